#!/usr/bin/env python3
"""The harness's self-test cases as a Python bench: y = a * x through
libkw_selftest_scale.so (ctypes), correct and broken on purpose, each a row
of DESIGN.md's failure table, so the GPU tests can show that every broken
kernel the C++ self-test bench catches is caught through Python too.

Environment: KW_SELFTEST_SCALE_LIBRARY (the launch library, required) and
KW_SELFTEST_LIBRARY (a library the load stage must bind: the broken build
without its explicit instantiation fails it).
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "..", "python"))
import kwbench  # noqa: E402

VARIANTS = {"ok": 0, "block128": 1, "unwritten": 2, "nan": 3, "slow": 4, "fault": 5, "overrun": 6}
N = 1 << 24


def _library():
    path = os.environ.get("KW_SELFTEST_SCALE_LIBRARY", "")
    if not path:
        raise kwbench.Error("KW_SELFTEST_SCALE_LIBRARY names no library")
    library = ctypes.CDLL(path)
    library.kw_selftest_scale.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float,
                                          ctypes.c_size_t, ctypes.c_void_p]
    library.kw_selftest_big_smem.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return library


def _check(error, what):
    if error != 0:
        raise kwbench.Error("%s: cudaError_t %d" % (what, error))


class ScaleCase(kwbench.Case):
    def __init__(self, variant, n=N):
        self.name = "broken." + variant
        self.variant = variant
        self.n = n
        self.params = {"n": n, "dtype": "fp32"}

    def setup(self, state):
        torch = state.torch
        self.library = _library()
        generator = torch.Generator(device="cuda").manual_seed(state.seed)
        self.x = torch.rand(self.n, device="cuda", generator=generator)
        self.y = torch.empty_like(self.x)
        self.copy = torch.empty_like(self.x)

    def run_candidate(self, state):
        _check(self.library.kw_selftest_scale(VARIANTS[self.variant], self.x.data_ptr(), self.y.data_ptr(), 1.5,
                                              self.n, state.stream_handle), "scale launch")

    def baselines(self):
        return ["memcpy"]

    def run_baseline(self, name, state):
        self.copy.copy_(self.x)

    def output(self, state):
        return self.y

    def reference(self, state):
        return 1.5 * self.x.double()

    def tolerance(self):
        return 1e-6

    def expected_launch(self):
        return kwbench.Launch("kwbench_selftest::scale*", block=(384, 1, 1), max_registers=64,
                              max_shared_bytes=0)

    def sanity(self):
        return kwbench.Sanity("memcpy", 0.5, 4.0)

    def bytes(self):
        return 8.0 * self.n


class BigSharedMemoryCase(ScaleCase):
    """Asks for 160 KiB of dynamic shared memory without raising its limit."""

    def __init__(self):
        super().__init__("ok", 256)
        self.name = "broken.smem"

    def run_candidate(self, state):
        _check(self.library.kw_selftest_big_smem(self.y.data_ptr(), state.stream_handle), "big_smem launch")

    def expected_launch(self):
        return kwbench.Launch("kwbench_selftest::big_smem_kernel*", block=(256, 1, 1))


CASES = [ScaleCase(v) for v in ("ok", "block128", "unwritten", "nan", "slow", "fault")]
CASES.append(ScaleCase("overrun", N - 1000))
CASES.append(BigSharedMemoryCase())

if __name__ == "__main__":
    extra = os.environ.get("KW_SELFTEST_LIBRARY")
    sys.exit(kwbench.main(CASES, libraries=[extra] if extra else []))
