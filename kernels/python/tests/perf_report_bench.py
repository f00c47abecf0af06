"""A triton.testing.perf_report script in the Triton tutorials' form, for
kwbench's perf_report form on the CPU stand-in backend (a TEST DOUBLE for
CUDA) with the Triton test double (triton_test_double/). Its "kernels" are
Python functions over lists. KWBENCH_STANDIN_SLOWDOWN scales the Triton
provider's work (a regression); PERF_REPORT_WRONG makes it return a wrong
value; PERF_REPORT_TUPLE makes every provider return (output, a copy)."""
import os

import triton
import triton.testing


def saxpy_triton(x):
    out = None
    for _ in range(max(1, int(float(os.environ.get("KWBENCH_STANDIN_SLOWDOWN", "1"))))):
        out = [1.5 * v for v in x]
    if os.environ.get("PERF_REPORT_WRONG"):
        out[3] += 1.0
    return (out, list(out)) if os.environ.get("PERF_REPORT_TUPLE") else out


def saxpy_listcomp(x):
    out = [v * 1.5 for v in x]
    return (out, list(out)) if os.environ.get("PERF_REPORT_TUPLE") else out


def saxpy_unbuilt(x):
    raise ImportError("the vendor library is not installed here")


@triton.testing.perf_report(
    triton.testing.Benchmark(
        x_names=["N"],
        x_vals=[1000, 4000],
        line_arg="provider",
        line_vals=["triton", "listcomp", "vendor"],
        line_names=["Triton", "List comprehension", "Vendor"],
        styles=[("blue", "-"), ("green", "-"), ("red", "-")],
        ylabel="GB/s",
        plot_name="saxpy-performance",
        args={"scale": 1.5},
    ))
def benchmark(N, provider, scale):
    x = [float(i % 17) for i in range(N)]
    quantiles = [0.5, 0.2, 0.8]
    if provider == "triton":
        ms, min_ms, max_ms = triton.testing.do_bench(lambda: saxpy_triton(x), quantiles=quantiles)
    elif provider == "listcomp":
        ms, min_ms, max_ms = triton.testing.do_bench(lambda: saxpy_listcomp(x), quantiles=quantiles)
    else:
        saxpy_unbuilt(x)

    def gbps(ms):
        return 2 * N * 8 * 1e-9 / (ms * 1e-3)

    return gbps(ms), gbps(max_ms), gbps(min_ms)


benchmark.run(print_data=True, show_plots=True)
