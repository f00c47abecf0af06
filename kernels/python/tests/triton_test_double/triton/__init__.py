"""TEST DOUBLE for Triton: the part of triton.testing that benchmark scripts
use (Benchmark, perf_report, do_bench, do_bench_cudagraph), timing Python
callables with the host clock, so kwbench's perf_report form is tested on
machines without Triton or a GPU. It compiles and launches nothing."""
from . import testing  # noqa: F401
