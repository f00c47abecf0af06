#!/usr/bin/env bash
# On the GPU machine, after kernels/run-on-gpu.sh built build/gpu: cuobjdump's
# listings of this repository's attention library and bench, the agent's load
# stage reads (agent/src/pipeline/load_check.cpp), written to $OUT/cuobjdump-h100 for
# tests/data/cuobjdump-h100.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/gpu-results}/cuobjdump-h100"
mkdir -p "$out"
cuobjdump="$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)"
"$cuobjdump" --version | tail -1 > "$out/version.txt"
for file in "$root/build/gpu/kernels/attention/libkw_attention.so" "$root/build/gpu/agent/kw"; do
  name="$(basename "$file")"
  for what in list-elf list-ptx dump-resource-usage; do
    # A file without device code makes cuobjdump fail; its words are the fixture.
    "$cuobjdump" "--$what" "$file" > "$out/$name.$what.txt" 2>&1 || echo "exit $?" >> "$out/$name.$what.txt"
  done
done
ls -la "$out"
