"""TEST DOUBLE of tritonbench.utils.triton_op: its registries, decorators and
BenchmarkOperator's constructor, as TritonBench has them, without its
dependencies. An operator's module path names the operator
(tritonbench.operators.<name>...)."""
import argparse
from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum


@dataclass
class BenchmarkOperatorBackend:
    name: str
    label: str
    baseline: bool = False
    enabled: bool = True
    fwd_only: bool = False


REGISTERED_BENCHMARKS = {}
BASELINE_BENCHMARKS = {}
REGISTERED_X_VALS = {}
REGISTERED_METRICS = {}


class Mode(Enum):
    FWD = "fwd"
    BWD = "bwd"
    FWD_BWD = "fwd_bwd"
    FWD_NO_GRAD = "fwd_no_grad"


def _op_name(module_path):
    prefix = "tritonbench.operators."
    assert prefix in module_path, "expected %s<operator_name>, got %s" % (prefix, module_path)
    return module_path.partition(prefix)[2].split(".")[0]


def register_benchmark(operator_name=None, func_name=None, baseline=False, enabled=True, fwd_only=False,
                       label=None):
    def decorator(function):
        op_name = operator_name or _op_name(function.__module__)
        fn_name = func_name or function.__name__
        REGISTERED_BENCHMARKS.setdefault(op_name, OrderedDict())[fn_name] = BenchmarkOperatorBackend(
            name=fn_name, label=label or fn_name, baseline=baseline, enabled=enabled, fwd_only=fwd_only)
        if baseline:
            BASELINE_BENCHMARKS[op_name] = fn_name

        def _inner(self, *args, **kwargs):
            return function(self, *args, **kwargs)

        return _inner

    return decorator


def register_x_val(label="x_val"):
    def decorator(function):
        REGISTERED_X_VALS[_op_name(function.__module__)] = label

        def _inner(self, *args, **kwargs):
            return function(self, *args, **kwargs)

        return _inner

    return decorator


def register_metric(skip_baseline=False, x_only=False):
    def decorator(function):
        REGISTERED_METRICS.setdefault(_op_name(function.__module__), []).append(function.__name__)

        def _inner(self, *args, **kwargs):
            return function(self, *args, **kwargs)

        return _inner

    return decorator


class BenchmarkOperator:
    mode = Mode.FWD
    device = "cuda"
    example_inputs = None

    def __init__(self, tb_args: argparse.Namespace, extra_args=None):
        self.name = _op_name(self.__class__.__module__)
        self.tb_args = tb_args
        self.extra_args = extra_args
        self.mode = Mode(tb_args.mode)
        self.device = tb_args.device
        self.dtype = None
        REGISTERED_X_VALS.setdefault(self.name, "x_val")

    def get_x_val(self, example_inputs):
        return None

    def get_input_iter(self):
        raise NotImplementedError("Each operator must implement its own input iterator.")

    def accuracy(self, fn, baseline_fn):
        return fn() == baseline_fn()
