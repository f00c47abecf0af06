#!/usr/bin/env bash
# Carries the Google Benchmark self-test bench to the GPU machine, which has
# no Google Benchmark: the build of this machine (kw-selftest-gbench, built
# where libbenchmark-dev is installed), its library and that library's
# missing-instantiation twin, and libbenchmark itself, into
# .device-carry/gbench-selftest (RUNPATH $ORIGIN finds them there). Pass
# `carry: [".device-carry"]` to the device tool; kernels/run-on-gpu.sh points
# the GPU tests at it (KW_SELFTEST_GBENCH_DIR).
#   tools/stage-gbench-selftest.sh [BUILD_DIR]   (default build/ci)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/ci}"
harness="$build/kernels/harness"
cmake --build "$build" --target kw-selftest-gbench kw_selftest_good_lib kw_selftest_missing_as_good
out="$root/.device-carry/gbench-selftest"
rm -rf "$out" && mkdir -p "$out/missing-instantiation"
cp "$harness/kw-selftest-gbench" "$harness/libkw_selftest_good_lib.so" "$out/"
cp "$harness/missing-instantiation/libkw_selftest_good_lib.so" "$out/missing-instantiation/"
benchmark=$(ldd "$harness/kw-selftest-gbench" | awk '/libbenchmark/ {print $3}')
cp -L "$benchmark" "$out/"
ls -l "$out" "$out/missing-instantiation"
