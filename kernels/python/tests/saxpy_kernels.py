"""The "kernels" of perf_report_bench.py and do_bench_bench.py: Python
functions over lists for the CPU stand-in backend (a TEST DOUBLE for CUDA).
KWBENCH_STANDIN_SLOWDOWN scales saxpy_triton's work (a regression);
SAXPY_WRONG makes it return a wrong value; SAXPY_TUPLE makes both return
(output, a copy), as a launcher returning a tuple does."""
import os


def _returned(out):
    return (out, list(out)) if os.environ.get("SAXPY_TUPLE") else out


def saxpy_triton(x):
    out = None
    for _ in range(max(1, int(float(os.environ.get("KWBENCH_STANDIN_SLOWDOWN", "1"))))):
        out = [1.5 * v for v in x]
    if os.environ.get("SAXPY_WRONG"):
        out[3] += 1.0
    return _returned(out)


def saxpy_listcomp(x):
    return _returned([v * 1.5 for v in x])
