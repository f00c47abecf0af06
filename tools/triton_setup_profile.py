"""Where a fresh python replicate's setup goes for a Triton bench: run by
tools/triton-setup-profile.sh on the GPU machine, over the row softmax of
tools/triton-fingerprint.sh (its module path is the first argument).

  triton_setup_profile.py BENCH_DIR cold|warm

cold: as a replicate's pass did before kwbench.py's warm step; warm: after
kwbench._warm_triton() (what a prepared process does before its go). Prints
each step's seconds, then cProfile's top entries for the context and the
cases' first launches."""
import cProfile
import io
import os
import pstats
import sys
import time

bench_dir, mode = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "python"))
sys.path.insert(0, bench_dir)
seconds = {}
started = time.monotonic()
import torch  # noqa: E402
import triton  # noqa: E402, F401

import kwbench  # noqa: E402
import softmax_bench  # noqa: E402

seconds["import torch, triton, the bench"] = time.monotonic() - started
if mode == "warm":
    started = time.monotonic()
    kwbench._warm_triton()
    seconds["kwbench._warm_triton()"] = time.monotonic() - started
profile = cProfile.Profile()
profile.enable()
started = time.monotonic()
torch.empty(1, device="cuda")
torch.cuda.synchronize()
seconds["CUDA context"] = time.monotonic() - started
for rows, cols in ((4096, 1024), (4096, 2048), (16384, 1024), (1024, 4096)):
    case = softmax_bench.Softmax(rows, cols)
    started = time.monotonic()
    case.setup(None)
    case.run_candidate(None)
    torch.cuda.synchronize()
    seconds["first launch " + case.name] = time.monotonic() - started
profile.disable()
for step, value in seconds.items():
    print("%-45s %7.3f s" % (step, value))
text = io.StringIO()
pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(25)
print(text.getvalue())
