#!/usr/bin/env python3
"""A Python bench whose candidate allocates its output and returns it, as a
PyTorch extension's forward() does, on the CPU stand-in backend (a TEST
DOUBLE for CUDA): no output() and no poison_output() override."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
import kwbench  # noqa: E402


class Scale(kwbench.Case):
    def __init__(self, variant):
        self.name = "scale/" + variant
        self.variant = variant

    def setup(self, state):
        self.x = [state.rng.random() for _ in range(500)]

    def run_candidate(self, state):
        if self.variant == "forgets":
            return None
        factor = 1.5 if self.variant == "ok" else 1.25
        return [factor * v for v in self.x]

    def reference(self, state):
        return [1.5 * v for v in self.x]

    def expected_launch(self):
        return kwbench.Launch("scale_kernel*", block=(256, 1, 1))


if __name__ == "__main__":
    sys.exit(kwbench.main([Scale(v) for v in ("ok", "wrong", "forgets")]))
