#!/usr/bin/env bash
# On the GPU machine: where a fresh Triton replicate's setup goes, before and
# after kwbench.py's warm step (docs/PERFORMANCE.md, python replicates). The
# bench is tools/triton-fingerprint.sh's row softmax; a first process fills
# Triton's disk cache, as the preflight does for a pass. Output on stdout.
#   tools/triton-setup-profile.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work=$(mktemp -d /tmp/kw-triton-profile.XXXXXX)
sed -n '/^cat > "\$repo\/softmax_bench.py" <<.PY.$/,/^PY$/p' "$root/tools/triton-fingerprint.sh" | sed '1d;$d' \
  > "$work/softmax_bench.py"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
python3 "$root/tools/triton_setup_profile.py" "$work" cold > /dev/null  # fills Triton's cache
for mode in cold warm; do
  echo "== $mode"
  python3 "$root/tools/triton_setup_profile.py" "$work" "$mode" | head -40
done
rm -rf "$work"
