#!/usr/bin/env python3
"""A Python bench for the CPU stand-in backend (a TEST DOUBLE for CUDA): its
kernels are Python functions over lists, correct and broken on purpose, so
kwbench.py and the agent's handling of Python benches are tested without a
GPU. KWBENCH_STANDIN_SLOWDOWN scales the candidate's work (a regression);
KWBENCH_STANDIN_SLOW_REFERENCE makes each reference take that many seconds."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
import kwbench  # noqa: E402

if os.environ.get("KWBENCH_STANDIN_PIDS"):  # which processes imported the bench, for the preflight's tests
    with open(os.environ["KWBENCH_STANDIN_PIDS"], "a") as pids:
        pids.write("%d\n" % os.getpid())


class Saxpy(kwbench.Case):
    def __init__(self, variant, n=2000):
        self.name = "saxpy/" + variant
        self.variant = variant
        self.n = n
        self.params = {"n": n, "variant": variant}

    def setup(self, state):
        self.x = [state.rng.random() for _ in range(self.n)]
        self.y = [0.0] * self.n
        self.copy = [0.0] * self.n

    def run_candidate(self, state):
        if self.variant == "crash":
            state.backend.break_context()
            raise RuntimeError("illegal memory access (stand-in)")
        repeat = float(os.environ.get("KWBENCH_STANDIN_SLOWDOWN", "1"))
        if self.variant == "slow":
            repeat *= 30
        count = self.n // 2 if self.variant == "unwritten" else self.n
        for _ in range(max(1, int(repeat))):
            for i in range(count):
                self.y[i] = 1.5 * self.x[i] + (float("nan") if self.variant == "nan" and i == 7 else 0.0)

    def baselines(self):
        return ["copy", "missing"]

    def baseline_unavailable(self, name):
        return "not built here" if name == "missing" else None

    def run_baseline(self, name, state):
        for i in range(self.n):
            self.copy[i] = self.x[i]
            self.copy[i] = 1.5 * self.copy[i]

    def output(self, state):
        return self.y

    def reference(self, state):
        # A reference that takes this long: a correctness stage past its timeout.
        time.sleep(float(os.environ.get("KWBENCH_STANDIN_SLOW_REFERENCE", "0")))
        return [1.5 * v for v in self.x]

    def tolerance(self):
        return 1e-12

    def expected_launch(self):
        return kwbench.Launch("saxpy_kernel*", block=(256, 1, 1))

    def sanity(self):
        return kwbench.Sanity("copy", 0.2, 5.0)

    def timed(self):
        return self.variant != "edge"


CASES = [Saxpy(v) for v in ("ok", "unwritten", "nan", "slow", "crash", "edge")]

if __name__ == "__main__":
    sys.exit(kwbench.main(CASES, modules=["json"]))
