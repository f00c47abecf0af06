"""A triton.testing.perf_report script in the Triton tutorials' form, for
kwbench's perf_report form on the CPU stand-in backend (a TEST DOUBLE for
CUDA) with the Triton test double (triton_test_double/). Its "kernels" are
Python functions over lists (saxpy_kernels.py, whose environment variables
slow them, break them or make them return tuples)."""
import triton
import triton.testing
from saxpy_kernels import saxpy_listcomp, saxpy_triton


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
