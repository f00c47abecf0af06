"""A plain script that times its kernels with triton.testing.do_bench in
loops over shapes and providers, for kwbench's do_bench form on the CPU
stand-in backend (a TEST DOUBLE for CUDA) with the Triton test double
(triton_test_double/); its kernels are saxpy_kernels.py's. DO_BENCH_LINES
times each provider on a line of its own instead of looping over a provider
variable. It parses its own arguments, as such scripts do."""
import argparse
import os

import triton.testing
from saxpy_kernels import saxpy_listcomp, saxpy_triton


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,4000")
    args = parser.parse_args()
    if os.environ.get("DO_BENCH_LINES"):  # one line a provider, no provider variable
        for n in [int(v) for v in args.sizes.split(",")]:
            x = [float(i % 17) for i in range(n)]
            print(triton.testing.do_bench(lambda: saxpy_listcomp(x)))
            print(triton.testing.do_bench(lambda: saxpy_triton(x)))
        return
    for n in [int(v) for v in args.sizes.split(",")]:
        x = [float(i % 17) for i in range(n)]
        for provider in ("triton", "listcomp"):
            fn = (lambda: saxpy_triton(x)) if provider == "triton" else (lambda: saxpy_listcomp(x))
            ms = triton.testing.do_bench(fn)
            print("n=%d %s: %.3f ms" % (n, provider, ms))


if __name__ == "__main__":
    main()
