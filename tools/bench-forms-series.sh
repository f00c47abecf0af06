#!/usr/bin/env bash
# On the GPU machine: a repository's own Python benchmarks run as they are
# (docs/benchmark-forms.md), through `kw run`. A scratch repository with one
# Triton row softmax (softmax_kernels.py) timed against torch.softmax in
# each form kernelwatch drives:
#   perf_report  bench_perf_report.py: @triton.testing.perf_report, the tutorials' form
#   do_bench     bench_do_bench.py: triton.testing.do_bench in loops over shapes and providers
#   timer        bench_timer.py: torch.utils.benchmark.Timer statements
#   tritonbench  tritonbench/operators/softmax/operator.py, in TritonBench's layout (its
#                tritonbench.utils is the TEST DOUBLE of kernels/python/tests/tritonbench_layout:
#                TritonBench itself is not installed on the GPU machine)
# The first commit is measured as a main run; pull requests on it, each `kw run --base`:
#   comment  a comment and a docstring line in the kernel's module: no case should be timed
#   neutral  the launcher's grid written (rows, 1): every case timed, the same speed (A/A)
#   slow     the kernel subtracts its row maximum FORMS_SLOW_PASSES (default 16) more times:
#            the candidate slower, the baselines not
# Reports (main-1.json, comment-1.json, neutral-1.json, slow-1.json) and logs in
# $OUT/bench-forms.tar.gz; a line per run (stages, seconds after the build, what was
# timed) in $OUT/bench-forms.txt. Judge the reports here with tools/judge_series.py.
# FORMS_KINDS picks the pull requests, FORMS_MAIN=0 leaves the main run out;
# KW_BINARY measures another tree's kw (tools/gpu-scratch.sh), RESULT_SUFFIX
# names its results apart.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=bench-forms
source "$root/tools/gpu-scratch.sh"
top="${OUT:-$root/gpu-results}"
tag="bench-forms${RESULT_SUFFIX:-}"  # RESULT_SUFFIX: a second tree's results beside the first's
out="$top/$tag"
work="${FORMS_WORK:-/tmp/kw-forms}"
mkdir -p "$out"
rm -rf "$work" && mkdir -p "$work/repo"
kw=$(kw_binary "$out") || exit 1
inject_library "$out" || exit 1
repo="$work/repo"

cat > "$repo/softmax_kernels.py" <<'PY'
"""A Triton row softmax and its launcher."""
import torch
import triton
import triton.language as tl

EXTRA_PASSES = 0


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, extra_passes, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(in_ptr + row * n_cols + offsets, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    for _ in range(extra_passes):
        x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(out_ptr + row * n_cols + offsets, numerator / tl.sum(numerator, axis=0), mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    grid = (n_rows,)
    softmax_kernel[grid](y, x, n_cols, EXTRA_PASSES, BLOCK=triton.next_power_of_2(n_cols), num_warps=8)
    return y
PY

cat > "$repo/bench_perf_report.py" <<'PY'
import torch
import triton
import triton.testing

from softmax_kernels import softmax


@triton.testing.perf_report(
    triton.testing.Benchmark(
        x_names=["N"],
        x_vals=[1024, 4096],
        line_arg="provider",
        line_vals=["triton", "torch"],
        line_names=["Triton", "Torch"],
        styles=[("blue", "-"), ("green", "-")],
        ylabel="GB/s",
        plot_name="softmax-performance",
        args={"M": 8192},
    ))
def benchmark(M, N, provider):
    x = torch.randn(M, N, device="cuda", dtype=torch.float32)
    if provider == "torch":
        ms = triton.testing.do_bench(lambda: torch.softmax(x, axis=-1))
    else:
        ms = triton.testing.do_bench(lambda: softmax(x))
    return 2 * x.numel() * x.element_size() * 1e-9 / (ms * 1e-3)


if __name__ == "__main__":
    benchmark.run(show_plots=False, print_data=True)
PY

cat > "$repo/bench_do_bench.py" <<'PY'
import torch
import triton.testing

from softmax_kernels import softmax


def main():
    for n in (1024, 4096):
        x = torch.randn(8192, n, device="cuda")
        for provider in ("triton", "torch"):
            fn = (lambda: softmax(x)) if provider == "triton" else (lambda: torch.softmax(x, dim=-1))
            print("N=%d %s: %.4f ms" % (n, provider, triton.testing.do_bench(fn)))


if __name__ == "__main__":
    main()
PY

cat > "$repo/bench_timer.py" <<'PY'
import torch
import torch.utils.benchmark as benchmark

from softmax_kernels import softmax

results = []
for n in (1024, 4096):
    x = torch.randn(8192, n, device="cuda")
    for name, stmt in (("triton", "softmax(x)"), ("torch", "torch.softmax(x, dim=-1)")):
        timer = benchmark.Timer(stmt=stmt, globals={"x": x, "softmax": softmax, "torch": torch},
                                label="softmax", sub_label="N=%d" % n, description=name)
        results.append(timer.blocked_autorange(min_run_time=0.2))
benchmark.Compare(results).print()
PY

mkdir -p "$repo/tritonbench/operators/softmax"
cp -r "$root/kernels/python/tests/tritonbench_layout/tritonbench/utils" "$repo/tritonbench/"
touch "$repo/tritonbench/__init__.py" "$repo/tritonbench/operators/__init__.py"
echo "from .operator import Operator" > "$repo/tritonbench/operators/softmax/__init__.py"
cat > "$repo/tritonbench/operators/softmax/operator.py" <<'PY'
import os
import sys
from typing import Generator

import torch
from tritonbench.utils.triton_op import BenchmarkOperator, register_benchmark, register_x_val

sys.path.insert(0, os.path.join(os.path.dirname(__file__), *[os.pardir] * 3))
from softmax_kernels import softmax  # noqa: E402


class Operator(BenchmarkOperator):
    def __init__(self, tb_args, extra_args=None):
        super().__init__(tb_args, extra_args)
        self.sizes = [1024, 4096]

    @register_benchmark(baseline=True)
    def torch_softmax(self, x):
        return lambda: torch.softmax(x, dim=-1)

    @register_benchmark()
    def triton_softmax(self, x):
        return lambda: softmax(x)

    def get_input_iter(self) -> Generator:
        for n in self.sizes:
            yield (torch.randn(8192, n, device="cuda"),)

    @register_x_val(label="(M, N)")
    def get_x_val(self, example_inputs):
        return tuple(example_inputs[0].shape)
PY

full_bench=$(python3 -c "import json, os; print(json.dumps(json.loads(os.environ.get('FORMS_FULL_BENCH') or '{}')))")
cat > "$repo/kernelwatch.json" <<JSON
{
  "project": "bench-forms",
  "build": {"commands": ["python3 -c 'import torch, triton'"]},
  "benches": [
    {"name": "perf_report", "path": "bench_perf_report.py", "format": "perf_report"},
    {"name": "do_bench", "path": "bench_do_bench.py", "format": "do_bench"},
    {"name": "timer", "path": "bench_timer.py", "format": "do_bench"},
    {"name": "tritonbench", "path": "tritonbench/operators/softmax/operator.py", "format": "tritonbench"}
  ],
  "full_bench": $full_bench
}
JSON
echo "# Softmax benchmarks in four forms" > "$repo/README.md"
(cd "$repo" && git_ init -q -b main && git_ add -A && git_ commit -qm A) || exit 1
base=$(git -C "$repo" rev-parse main)
branch() {  # name sed-expression file
  (cd "$repo" && git_ checkout -q -b "$1" main && sed -i "$2" "$3" && git_ commit -qam "$1") || exit 1
}
branch comment 's/^    row = tl.program_id(0)$/    row = tl.program_id(0)  # one program per row/; s/^"""A Triton row softmax and its launcher."""$/"""A Triton row softmax and its launcher: one program per row."""/' softmax_kernels.py
branch neutral 's/^    grid = (n_rows,)$/    grid = (n_rows, 1)/' softmax_kernels.py
branch slow "s/^EXTRA_PASSES = 0$/EXTRA_PASSES = ${FORMS_SLOW_PASSES:-16}/" softmax_kernels.py
for b in comment neutral slow; do
  [ -n "$(git -C "$repo" diff --stat main "$b")" ] || { log "$b changes nothing: its sed no longer matches"; exit 1; }
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"

summary="$top/$tag.txt"
: > "$summary"
measure() {  # kind branch [kw run options...]
  local kind="$1" ref="$2" started
  shift 2
  git -C "$repo" checkout -q "$ref"
  started=$SECONDS
  "$kw" run --repo "$repo" --cache-dir "$work/built" --name forms --branch "$ref" "$@" \
    --out "$out/$kind.json" > "$out/$kind.log" 2>&1
  local status=$?
  line=$(python3 "$root/tools/report_line.py" "$out/$kind.json" "$kind" "$status" "$((SECONDS - started))")
  log "$line"
  echo "$line" >> "$summary"
}
[ "${FORMS_MAIN:-1}" = 0 ] || measure main-1 main
for kind in ${FORMS_KINDS:-comment neutral slow}; do
  measure "$kind-1" "$kind" --base "$base"
done
tar -C "$top" -czf "$top/$tag.tar.gz" "$tag" && rm -rf "$out"
