"""A script that times its kernels with torch.utils.benchmark.Timer in loops
over shapes and implementations, for kwbench's do_bench form on the CPU
stand-in backend (a TEST DOUBLE for CUDA) with the PyTorch test double
(torch_test_double/); its kernels are saxpy_kernels.py's."""
import torch.utils.benchmark as benchmark
from saxpy_kernels import saxpy_listcomp, saxpy_triton

results = []
for n in (1000, 4000):
    x = [float(i % 17) for i in range(n)]
    for name, stmt in (("triton", "saxpy_triton(x)"), ("listcomp", "saxpy_listcomp(x)")):
        timer = benchmark.Timer(stmt=stmt, globals={"x": x, "saxpy_triton": saxpy_triton,
                                                    "saxpy_listcomp": saxpy_listcomp},
                                label="saxpy", sub_label="n=%d" % n, description=name)
        results.append(timer.blocked_autorange(min_run_time=0.1))
benchmark.Compare(results).print()
