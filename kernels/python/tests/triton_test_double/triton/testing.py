"""TEST DOUBLE for triton.testing (see __init__.py): the same names and
arguments as Triton 3's, host-clock timing."""
import time


class Benchmark:
    def __init__(self, x_names, x_vals, line_arg, line_vals, line_names, plot_name, args, xlabel="", ylabel="",
                 x_log=False, y_log=False, styles=None):
        self.x_names = x_names
        self.x_vals = x_vals
        self.line_arg = line_arg
        self.line_vals = line_vals
        self.line_names = line_names
        self.plot_name = plot_name
        self.args = args
        self.xlabel, self.ylabel, self.x_log, self.y_log, self.styles = xlabel, ylabel, x_log, y_log, styles


class Mark:
    def __init__(self, fn, benchmarks):
        self.fn = fn
        self.benchmarks = benchmarks

    def run(self, show_plots=False, print_data=False, save_path="", **kwargs):
        benchmarks = self.benchmarks if isinstance(self.benchmarks, list) else [self.benchmarks]
        for bench in benchmarks:
            for x in bench.x_vals:
                values = list(x) if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
                row = [self.fn(**dict(zip(bench.x_names, values)), **{bench.line_arg: v}, **bench.args)
                       for v in bench.line_vals]
                if print_data:
                    print(bench.plot_name, x, row)


def perf_report(benchmarks):
    return lambda fn: Mark(fn, benchmarks)


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    fn()
    times = []
    for _ in range(5):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1e3)
    times.sort()
    if quantiles:
        return [times[min(len(times) - 1, int(q * len(times)))] for q in quantiles]
    return sum(times) / len(times)


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    return do_bench(fn, quantiles=quantiles, return_mode=return_mode)
