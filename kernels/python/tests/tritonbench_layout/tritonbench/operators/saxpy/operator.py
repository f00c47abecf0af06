"""A saxpy operator in TritonBench's form (fixture; see ../../../README.md)."""
import os
import sys
from typing import Generator

from tritonbench.utils.triton_op import BenchmarkOperator, register_benchmark, register_metric, register_x_val

sys.path.insert(0, os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
from saxpy_kernels import saxpy_listcomp, saxpy_triton  # noqa: E402


class Operator(BenchmarkOperator):
    DEFAULT_METRICS = ["latency", "speedup", "accuracy"]

    def __init__(self, tb_args, extra_args=None):
        super().__init__(tb_args, extra_args)
        self.sizes = [1000, 4000]

    @register_benchmark(baseline=True)
    def listcomp_saxpy(self, x):
        return lambda: saxpy_listcomp(x)

    @register_benchmark()
    def triton_saxpy(self, x):
        return lambda: saxpy_triton(x)

    def get_input_iter(self) -> Generator:
        for n in self.sizes:
            yield ([float(i % 7) for i in range(n)],)

    if os.environ.get("SAXPY_TUPLE_X"):
        @register_x_val(label="(N, repeat)")
        def get_x_val(self, example_inputs):
            return (len(example_inputs[0]), 1)
    else:
        @register_x_val(label="size")
        def get_x_val(self, example_inputs):
            return len(example_inputs[0])

    @register_metric()
    def gbps(self, fn, example_inputs, metrics):
        return 0.0

    if os.environ.get("SAXPY_OWN_ACCURACY"):
        def accuracy(self, fn, baseline_fn):
            return len(fn()) == len(baseline_fn())  # a looser check than kwbench's by dtype
