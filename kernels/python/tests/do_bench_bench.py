"""A plain script that times its kernels with triton.testing.do_bench in
loops over shapes and providers, for kwbench's do_bench form on the CPU
stand-in backend (a TEST DOUBLE for CUDA) with the Triton test double
(triton_test_double/). KWBENCH_STANDIN_SLOWDOWN scales the Triton
provider's work; DO_BENCH_WRONG makes it return a wrong value;
DO_BENCH_LINES times each provider on a line of its own instead of looping
over a provider variable. It parses its own arguments, as such scripts do."""
import argparse
import os

import triton.testing


def saxpy_triton(x):
    out = None
    for _ in range(max(1, int(float(os.environ.get("KWBENCH_STANDIN_SLOWDOWN", "1"))))):
        out = [1.5 * v for v in x]
    if os.environ.get("DO_BENCH_WRONG"):
        out[3] += 1.0
    return out


def saxpy_listcomp(x):
    return [v * 1.5 for v in x]


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
