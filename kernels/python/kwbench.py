"""kwbench for Python: kernelwatch's harness for benches written in Python.
kw carries this file and puts it on a Python bench's PYTHONPATH, so a
repository imports it without a copy (`kw harness-path` prints where it is,
for running a bench by hand).

A bench script defines cases and hands them to `main`; kernelwatch's agent
runs it with the command line of the C++ kwbench (`--list`, `--stage S --json
FILE --case GLOB`, the full_bench replicate options) and reads the same stage
JSON (kernels/harness/README.md):

    import kwbench

    class Scale(kwbench.Case):
        name = "scale/fp32/n4M"
        def setup(self, state):
            self.x = state.torch.rand(1 << 22, device="cuda")
            self.y = state.torch.empty_like(self.x)
        def run_candidate(self, state):
            my_extension.scale(self.x, self.y, 1.5, state.stream_handle)
        def output(self, state):
            return self.y
        def reference(self, state):
            return 1.5 * self.x.double()
        def expected_launch(self):
            return kwbench.Launch("scale_kernel*", block=(384, 1, 1))

    if __name__ == "__main__":
        sys.exit(kwbench.main([Scale()], modules=["my_extension"]))

What each stage does with a case:
- load: imports `modules` (the extension's import, every symbol bound when
  the agent sets LD_BIND_NOW) and names the shared objects that are the
  bench's own (mapped from the repository, or loaded by the imports from
  outside the interpreter's and the system's trees), for the agent's
  kernel-image checks.
- launch_geometry: runs the candidate once per case between two marks in the
  records of libkw_inject.so (which the agent loads into the process); the
  agent holds each case's launches to its `expected_launch()`.
- correctness: poisons the output with NaN, runs the candidate, compares with
  `reference()` in float64: relative L2 error against `tolerance()`, and any
  non-finite value fails. A call that allocates its output (a PyTorch
  extension's `forward()`) just returns it from `run_candidate`, and the case
  needs no `output()`: what it returns is compared.
- quick_bench: a short interleaved timing, held to `sanity()`.
- full_bench: one replicate: the implementations interleaved round by round
  (the first rotating), each sample after an L2 flush, timed with CUDA events
  in batches the host queues whole behind a spin kernel, after a warm-up
  until two batches in a row agree within 2%.

A case that leaves the CUDA context broken (an illegal address) fails, and
the process starts again for the cases after it (exec), as kwbench's fresh
child does.

kw starts a full_bench replicate's process ahead of its turn with
`--go-file FILE`: the script's imports (and torch's) run while the GPU times
another replicate, and the process waits until kw writes the replicate's
arguments to FILE. Where the bench imported Triton, the process also does
before the go what Triton's first compile in a process would do on the
pass's clock: hashing Triton's own install for its cache key and importing
the front ends it loads lazily. With `--context-before-go` it makes its
CUDA context before it waits too (a few tenths of a second of every pass otherwise);
without, it waits with none. A full_bench process run from the command line
ends as soon as its result is written (os._exit, without the interpreter's
teardown of torch and Triton): code a script puts after `main()` does not
run in it.

`python3 -m kwbench --perf-report SCRIPT` runs a repository's own
triton.testing.perf_report script as it is, its x values as cases and its
providers as implementations (perf_report_cases, below).

Backends: `torch` (CUDA events and tensors on the current stream) and
`cpu-stand-in`, a TEST DOUBLE that times Python callables with the host clock
and compares sequences of floats, so the harness and the agent's handling of
Python benches are tested on machines without a GPU or torch.
"""

import argparse
import contextlib
import ctypes
import fnmatch
import importlib
import json
import math
import os
import platform
import random
import re
import sys
import threading
import time
import traceback

SETTLED_SPREAD = 0.02
BATCH_SECONDS = 0.01
MAX_BATCH_ROUNDS = 64
# The GPU waits at the head of each timed batch for as long as the host took
# to queue the previous batch, times this margin (_EventTimer).
HEAD_START_MARGIN = 1.5
HEAD_START_MAX_SECONDS = 0.05
FIRST_SAMPLE_HOST_SECONDS = 50e-6
# torch.cuda._sleep spins for clock cycles; at most this many a second on
# current GPUs, so a head start lasts at least as long as asked.
SPIN_CYCLES_PER_SECOND = 2.0e9


class Error(Exception):
    """A failure of a case that names what is wrong."""


class Launch:
    """The kernel a case must launch: a glob over its demangled name, its block,
    and optionally its grid and register and shared-memory bounds. Write it
    out; do not compute it with the dispatch code under test."""

    def __init__(self, kernel, block, grid=None, max_registers=None, max_shared_bytes=None):
        self.kernel = kernel
        # None: an autotuned kernel (Triton) whose block the tuner picks.
        self.block = None if block is None else _dim3(block, "block")
        self.grid = None if grid is None else _dim3(grid, "grid")
        self.max_registers = max_registers
        self.max_shared_bytes = max_shared_bytes

    def to_json(self):
        out = {"kernel_pattern": self.kernel}
        if self.block is not None:
            out["block"] = self.block
        if self.grid is not None:
            out["grid"] = self.grid
        if self.max_registers is not None:
            out["max_registers"] = int(self.max_registers)
        if self.max_shared_bytes is not None:
            out["max_shared_bytes"] = int(self.max_shared_bytes)
        return out


class Sanity:
    """quick_bench's bounds: the candidate's speedup over a named baseline, and
    a time limit (0: none). `Sanity.report_only(versus)` says the speedup and
    holds it to no bound (a kernel meant to be slower than a baseline, or one
    whose range is not known yet)."""

    def __init__(self, versus="", min_speedup=0.0, max_speedup=float("inf"), max_ns=0.0, bounded=True):
        self.versus, self.min_speedup, self.max_speedup, self.max_ns = versus, min_speedup, max_speedup, max_ns
        self.bounded = bounded

    @classmethod
    def report_only(cls, versus):
        return cls(versus, bounded=False)


def _speedup_text(speedup):
    """Three significant digits: 230x slower is 0.00435x, not 0.00x."""
    return "%.3gx" % speedup


def _range_text(sanity):
    low, high = sanity.min_speedup > 0, sanity.max_speedup < float("inf") and sanity.max_speedup < 1e9
    if low and high:
        return "%s..%s" % (_speedup_text(sanity.min_speedup), _speedup_text(sanity.max_speedup))
    if low:
        return "at least " + _speedup_text(sanity.min_speedup)
    if high:
        return "at most " + _speedup_text(sanity.max_speedup)
    return "unbounded"


class Case:
    """One shape of one kernel with the baselines it is measured against."""

    name = ""
    params = {}

    def setup(self, state):
        pass

    def teardown(self, state):
        pass

    def run_candidate(self, state):
        raise NotImplementedError("run_candidate")

    def baselines(self):
        return []

    def run_baseline(self, name, state):
        raise NotImplementedError("run_baseline " + name)

    def baseline_unavailable(self, name):
        """Why a baseline cannot run here (it is then skipped), or None."""
        return None

    def output(self, state):
        """The candidate's output, for correctness: a case that keeps its output
        buffer names it here (it is poisoned before the run); a call that
        allocates its output just returns it from run_candidate instead."""
        raise NotImplementedError("output: the candidate's output, for correctness")

    def reference(self, state):
        raise NotImplementedError("reference: the expected output, computed by other code")

    def poison_output(self, state):
        state.backend.poison(self.output(state))

    def tolerance(self):
        return 1e-3

    def expected_launch(self):
        raise NotImplementedError("expected_launch: the kernel this case must launch")

    def sanity(self):
        return Sanity()

    def flops(self):
        return 0.0

    def bytes(self):
        return 0.0

    def timed(self):
        """False for a correctness-only case: quick_bench and full_bench leave it out."""
        return True


class State:
    def __init__(self, backend, seed):
        self.backend = backend
        self.seed = seed
        self.rng = random.Random(seed)

    @property
    def torch(self):
        return self.backend.torch

    @property
    def stream_handle(self):
        """The cudaStream_t (an int) to launch on, for ctypes and extensions."""
        return self.backend.stream_handle()


def _dim3(value, what):
    dims = [int(v) for v in value]
    if len(dims) != 3 or any(d < 1 for d in dims):
        raise ValueError("%s must be three positive integers, not %r" % (what, value))
    return dims


def _median(values):
    s = sorted(values)
    n = len(s)
    if n == 0:
        return 0.0
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def relative_noise(samples):
    """1.4826 x MAD / median, as kw::common::relative_noise."""
    center = _median(samples)
    if center == 0:
        return 0.0
    return 1.4826 * _median([abs(s - center) for s in samples]) / abs(center)


class TorchBackend:
    name = "torch"

    def __init__(self):
        import torch  # noqa: PLC0415 (the stand-in runs without it)

        if not torch.cuda.is_available():
            raise Error("torch sees no CUDA device")
        self.torch = torch
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.props = torch.cuda.get_device_properties(self.device)
        self._flush = None

    def device_report(self):
        p = self.props
        report = {
            "kind": "gpu",
            "name": p.name,
            "compute_capability": "%d.%d" % (p.major, p.minor),
            "memory_bytes": int(p.total_memory),
            "sm_count": int(p.multi_processor_count),
            "cuda_runtime": str(self.torch.version.cuda or ""),
        }
        uuid = getattr(p, "uuid", None)
        if uuid is not None:
            report["uuid"] = "GPU-" + str(uuid)
        l2 = getattr(p, "L2_cache_size", 0)
        if l2:
            report["l2_bytes"] = int(l2)
        driver = _driver_version()
        if driver:
            report["driver"] = driver
        return report

    def stream_handle(self):
        return self.torch.cuda.current_stream(self.device).cuda_stream

    def synchronize(self):
        self.torch.cuda.synchronize(self.device)

    def release_cached_memory(self):
        """The caching allocator's free blocks back to the driver: a process
        that waits holds no GPU memory another process needs."""
        self.synchronize()
        self.torch.cuda.empty_cache()

    def healthy(self):
        try:
            self.synchronize()
            self.torch.zeros(1, device=self.device).add_(1).item()
            return True
        except Exception:  # noqa: BLE001 (any failure means the context is gone)
            return False

    def flush_l2(self, round_index):
        # Writing twice the L2 size evicts what the previous sample left there.
        if self._flush is None:
            size = max(2 * int(getattr(self.props, "L2_cache_size", 0) or 0), 8 << 20)
            self._flush = self.torch.empty(size, dtype=self.torch.uint8, device=self.device)
        self._flush.fill_(round_index & 0xFF)

    def timer(self):
        return _EventTimer(self.torch)

    def poison(self, tensor):
        if tensor.is_floating_point():
            tensor.fill_(float("nan"))

    def compare(self, output, reference):
        t = self.torch
        out = output.detach().to(t.float64).flatten()
        ref = t.as_tensor(reference).to(device=out.device, dtype=t.float64).flatten()
        if out.numel() != ref.numel():
            raise Error("the output has %d values, the reference %d" % (out.numel(), ref.numel()))
        finite = t.isfinite(out)
        nonfinite = int((~finite).sum().item())
        diff = t.where(finite, out - ref, t.zeros_like(out))
        norm = float(t.linalg.vector_norm(t.where(finite, ref, t.zeros_like(ref))).item())
        err = float(t.linalg.vector_norm(diff).item())
        max_abs = float(diff.abs().max().item()) if diff.numel() else 0.0
        return (err / norm if norm > 0 else err), max_abs, nonfinite


class _EventTimer:
    """CUDA events around each sample; read after the batch's synchronize.

    Python queues a sample in about the time the GPU runs a small one (tens
    of microseconds with the L2 flush). Where the GPU caught up with the
    host, a sample's events timed the host's launch latency, not the kernel:
    on an H200 one attention case measured 5.5 us in some processes and
    17 us in others, and an A/A pull request was flagged. So each batch
    starts behind a spin kernel lasting the time the host took to queue the
    previous batch, with a margin: the GPU finds the batch queued whole, as
    in the C++ harness, whose host keeps ahead by itself."""

    def __init__(self, torch):
        self.torch = torch
        self.pairs = []
        self.spin = getattr(torch.cuda, "_sleep", None)
        self.host_seconds_per_sample = FIRST_SAMPLE_HOST_SECONDS
        self.queue_started = self.queue_ended = 0.0

    def begin_batch(self, samples=0):
        if self.pairs:
            self.host_seconds_per_sample = (self.queue_ended - self.queue_started) / len(self.pairs)
        self.pairs = []
        if self.spin is not None and samples > 0:
            head_start = min(HEAD_START_MAX_SECONDS,
                             HEAD_START_MARGIN * self.host_seconds_per_sample * samples)
            self.spin(int(head_start * SPIN_CYCLES_PER_SECOND))
        self.queue_started = self.queue_ended = time.perf_counter()

    def time(self, fn):
        start = self.torch.cuda.Event(enable_timing=True)
        stop = self.torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        self.pairs.append((start, stop))
        self.queue_ended = time.perf_counter()

    def elapsed_ns(self):
        return [start.elapsed_time(stop) * 1e6 for start, stop in self.pairs]


class CpuStandInBackend:
    """TEST DOUBLE for CUDA: host-clock timing of Python callables, outputs and
    references as sequences of floats. It measures nothing about a GPU."""

    name = "cpu-stand-in"
    torch = None

    def device_report(self):
        model = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as cpuinfo:
                for line in cpuinfo:
                    if line.startswith("model name"):
                        model = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        memory = 1
        try:
            memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            pass
        return {"kind": "cpu", "name": "CPU stand-in: " + model, "memory_bytes": int(memory),
                "sm_count": os.cpu_count() or 1}

    def stream_handle(self):
        return 0

    def synchronize(self):
        pass

    def release_cached_memory(self):
        pass

    def __init__(self):
        self.broken = False

    def break_context(self):
        """What an illegal address does to a CUDA context: for tests of the
        fresh process that continues after it."""
        self.broken = True

    def healthy(self):
        return not self.broken

    def flush_l2(self, round_index):
        pass

    def timer(self):
        return _HostTimer()

    def poison(self, values):
        for i in range(len(values)):
            values[i] = float("nan")

    def compare(self, output, reference):
        if len(output) != len(reference):
            raise Error("the output has %d values, the reference %d" % (len(output), len(reference)))
        err = norm = max_abs = 0.0
        nonfinite = 0
        for o, r in zip(output, reference):
            if not math.isfinite(o):
                nonfinite += 1
                continue
            err += (o - r) ** 2
            norm += r * r
            max_abs = max(max_abs, abs(o - r))
        return (math.sqrt(err / norm) if norm > 0 else math.sqrt(err)), max_abs, nonfinite


class _HostTimer:
    def __init__(self):
        self.samples = []

    def begin_batch(self, samples=0):
        self.samples = []

    def time(self, fn):
        start = time.perf_counter_ns()
        fn()
        self.samples.append(float(time.perf_counter_ns() - start))

    def elapsed_ns(self):
        return self.samples


def _driver_version():
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int()
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return "%d.%d" % (version.value // 1000, version.value % 1000 // 10)
    except OSError:
        pass
    return ""


class _Injection:
    """libkw_inject.so in this process: marks between cases in its records."""

    def __init__(self):
        path = os.environ.get("CUDA_INJECTION64_PATH", "")
        if not path or not os.environ.get("KW_INJECT_OUT"):
            raise Error("launch_geometry needs libkw_inject.so in the process "
                        "(CUDA_INJECTION64_PATH and KW_INJECT_OUT; kw sets both)")
        try:
            self.lib = ctypes.CDLL(path)
            self.mark_fn = self.lib.kw_inject_mark
        except (OSError, AttributeError) as error:
            raise Error("cannot use %s: %s" % (path, error)) from error
        self.mark_fn.argtypes = [ctypes.c_char_p]
        self.mark_fn.restype = ctypes.c_int

    def mark(self, label):
        if self.mark_fn(label.encode()) != 0:
            raise Error("libkw_inject.so could not mark %r in its records (is CUDA initialised?)" % label)

    def record(self, on):
        """Launch and module records on or off (a preflight records its
        launch_geometry alone: tracing would slow the stages that time).
        Off, the records written so far are complete, as at an exit."""
        switch = getattr(self.lib, "kw_inject_record", None)
        if switch is None:  # an older library: it keeps recording, which costs time, not results
            return
        switch.argtypes = [ctypes.c_int]
        switch.restype = ctypes.c_int
        if switch(1 if on else 0) != 0:
            raise Error("libkw_inject.so could not turn its records %s (its records say why)" % ("on" if on else "off"))


def _impls(case, impls_glob, skipped):
    out = []
    if fnmatch.fnmatchcase("candidate", impls_glob):
        out.append(("candidate", None))
    for name in case.baselines():
        impl = "baseline:" + name
        if not fnmatch.fnmatchcase(impl, impls_glob):
            continue
        why = case.baseline_unavailable(name)
        if why:
            skipped[impl] = why
            continue
        out.append((impl, name))
    return out


def _run_impl(case, impl, state):
    if impl[1] is None:
        case.run_candidate(state)
    else:
        case.run_baseline(impl[1], state)


def _header(case):
    return {"name": case.name, "params": dict(case.params)}


def _stage_launch_geometry(case, state, injection):
    part = _header(case)
    # Without a declaration the launches are recorded for the agent, which
    # holds them to kernelwatch.json's `launches` where it names any.
    if _defines(case, "expected_launch"):
        part["expected_launch"] = case.expected_launch().to_json()
    # A JIT or autotuned kernel (Triton) compiles and tunes on its first call,
    # launching configurations the timed calls never use; those stay unmarked.
    case.run_candidate(state)
    state.backend.synchronize()
    injection.mark("case " + case.name)
    case.run_candidate(state)
    state.backend.synchronize()
    injection.mark("end")
    return "passed", "ran once between marks", part, {}


def _defines(case, method):
    """Whether the case's class overrides Case's `method`."""
    return getattr(type(case), method) is not getattr(Case, method)


def _stage_correctness(case, state):
    part = _header(case)
    # A call that allocates its output returns it; only an output the case
    # keeps (and names through output()) can be poisoned before the run.
    keeps_output = _defines(case, "output")
    if keeps_output or _defines(case, "poison_output"):
        case.poison_output(state)
    returned = case.run_candidate(state)
    state.backend.synchronize()
    if returned is None and not keeps_output:
        raise RuntimeError("run_candidate returned nothing and the case has no output(): "
                           "return the output, or define output(state)")
    output = returned if returned is not None else case.output(state)
    rel, max_abs, nonfinite = state.backend.compare(output, case.reference(state))
    return _correctness_verdict(part, rel, max_abs, nonfinite, case.tolerance(),
                                " (unwritten outputs keep the NaN poison)", "")


def _correctness_verdict(part, rel, max_abs, nonfinite, tolerance, nonfinite_note, against):
    finite = math.isfinite(rel) and math.isfinite(max_abs)
    passed = nonfinite == 0 and finite and rel <= tolerance
    part["correctness"] = {"passed": passed, "rel_l2_err": rel if finite else 0.0,
                           "max_abs_err": max_abs if finite else 0.0, "tolerance": tolerance,
                           "nonfinite": nonfinite}
    if nonfinite:
        return "failed", "%d output values are NaN/Inf%s" % (nonfinite, nonfinite_note), part, {}
    if not passed:
        return ("failed", "relative L2 error %.3g%s exceeds the tolerance %.3g (max abs error %.3g)"
                % (rel, against, tolerance, max_abs), part, {})
    return "passed", "rel L2 %.3g <= %.3g%s" % (rel, tolerance, against), part, {}


def _stage_quick_bench(case, state, options):
    part = _header(case)
    skipped = {}
    impls = _impls(case, "*", skipped)
    backend = state.backend
    for impl in impls:
        _run_impl(case, impl, state)  # warm-up
    backend.synchronize()
    samples = {impl[0]: [] for impl in impls}
    timer = backend.timer()
    timer.begin_batch(options.quick_iterations * len(impls))
    for _ in range(options.quick_iterations):
        for impl in impls:
            timer.time(lambda impl=impl: _run_impl(case, impl, state))
    backend.synchronize()
    elapsed = timer.elapsed_ns()
    for i, value in enumerate(elapsed):
        samples[impls[i % len(impls)][0]].append(value)
    medians = {name: _median(values) for name, values in samples.items()}
    details = {"median_ns": medians, "skipped_baselines": skipped}
    sanity = case.sanity()
    candidate = medians["candidate"]
    if sanity.max_ns and candidate > sanity.max_ns:
        return ("failed", "candidate median %.1f us exceeds the sanity bound %.1f us"
                % (candidate / 1000, sanity.max_ns / 1000), part, details)
    if not sanity.versus:
        return "passed", "median %.1f us" % (candidate / 1000), part, details
    versus = "baseline:" + sanity.versus
    if versus not in medians:
        return ("passed", "sanity range vs %s not checked: %s"
                % (versus, skipped.get(versus, "no such baseline")), part, details)
    speedup = medians[versus] / candidate
    details["speedup"] = speedup
    if sanity.bounded and not sanity.min_speedup <= speedup <= sanity.max_speedup:
        return ("failed", "candidate runs at %s of %s (median %.1f us vs %.1f us); its sanity range is %s"
                % (_speedup_text(speedup), versus, candidate / 1000, medians[versus] / 1000,
                   _range_text(sanity)), part, details)
    return ("passed", "%s of %s, %s" % (_speedup_text(speedup), versus,
                                        "inside " + _range_text(sanity) if sanity.bounded else "no bound set"),
            part, details)


def _stage_full_bench(case, state, options):
    part = _header(case)
    setup_started = time.monotonic()
    skipped = {}
    impls = _impls(case, options.impls, skipped)
    if not impls:
        raise Error('no implementation of this case matches --impls "%s"' % options.impls)
    backend = state.backend
    timer = backend.timer()
    offset = options.order_seed % len(impls)

    def run_batch(first_round, rounds):
        timer.begin_batch(rounds * len(impls))
        order = []
        for r in range(first_round, first_round + rounds):
            # Interleaved: each round times every implementation once, rotating
            # which goes first, so drift hits all of them alike.
            for k in range(len(impls)):
                index = (k + r + offset) % len(impls)
                backend.flush_l2(r)
                timer.time(lambda index=index: _run_impl(case, impls[index], state))
                order.append(index)
        return order

    # Warm-up until two batches in a row run as fast per round (within 2%):
    # the clocks after the setup's idle gap take tens of milliseconds to settle.
    warm_started = time.monotonic()
    rounds_done, batch_rounds, previous = 0, 1, 0.0
    while True:
        started = time.monotonic()
        run_batch(rounds_done, batch_rounds)
        backend.synchronize()
        per_round = (time.monotonic() - started) / batch_rounds
        settled = previous > 0 and abs(per_round / previous - 1) <= SETTLED_SPREAD
        previous = per_round
        rounds_done += batch_rounds
        warm = time.monotonic() - warm_started
        if rounds_done >= 5 and ((settled and warm >= 0.02) or warm >= 0.1):
            warmup_seconds = warm
            break
        batch_rounds = max(1, min(MAX_BATCH_ROUNDS, int(BATCH_SECONDS / max(per_round, 1e-7))))
    setup_seconds = time.monotonic() - setup_started

    samples = [[] for _ in impls]
    measure_started = time.monotonic()
    taken = 0
    while taken < options.max_samples:
        rounds = min(batch_rounds, options.max_samples - taken)
        if taken < options.min_samples:
            rounds = max(rounds, min(options.min_samples, options.max_samples) - taken)
        order = run_batch(taken, rounds)
        backend.synchronize()
        for index, value in zip(order, timer.elapsed_ns()):
            samples[index].append(value)
        taken += rounds
        if taken >= options.min_samples:
            quiet = all(relative_noise(s) <= options.noise_target for s in samples)
            if quiet or time.monotonic() - measure_started >= options.max_seconds:
                break

    measurements, noise = [], {}
    for (impl, _), values in zip(impls, samples):
        m = {"impl": impl, "samples_ns": values, "median_ns": _median(values)}
        if case.flops() > 0:
            m["flops"] = float(case.flops())
        if case.bytes() > 0:
            m["bytes"] = float(case.bytes())
        measurements.append(m)
        noise[impl] = relative_noise(values)
    part["measurements"] = measurements
    details = {"samples": len(samples[0]), "setup_seconds": setup_seconds, "warmup_seconds": warmup_seconds,
               "measure_seconds": time.monotonic() - measure_started, "relative_noise": noise,
               "skipped_baselines": skipped, "backend": backend.name}
    first = measurements[0]["median_ns"]
    message = "%d samples, %s median %.2f us, noise %.2f%%" % (len(samples[0]), impls[0][0], first / 1000,
                                                              100 * noise[impls[0][0]])
    if case.flops() > 0 and first > 0:
        message += ", %.1f TFLOP/s" % (case.flops() / first / 1000)
    return "passed", message, part, details


def _case_list(cases, options):
    by_name = {}
    for case in cases:
        if not case.name:
            raise SystemExit("kwbench: a case of %s has no name" % type(case).__name__)
        if case.name in by_name:
            raise SystemExit("kwbench: two cases are named %r" % case.name)
        by_name[case.name] = case
    if options.case_list:
        with open(options.case_list) as listing:
            wanted = [line.strip() for line in listing if line.strip()]
        unknown = [name for name in wanted if name not in by_name]
        if unknown:
            raise SystemExit("kwbench: no case named %s" % ", ".join(repr(n) for n in unknown))
        selected = [by_name[name] for name in wanted]
        random.Random(options.order_seed).shuffle(selected)
        return selected
    patterns = [p for p in options.case.split(",") if p]
    return [c for c in cases if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]


def _write(path, document):
    text = json.dumps(document, allow_nan=False)
    if path:
        with open(path, "w") as out:
            out.write(text)
    else:
        sys.stdout.write(text + "\n")


def _log(line):
    sys.stderr.write("[kwbench.py] " + line + "\n")
    sys.stderr.flush()


def _mapped_shared_objects():
    found = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6 and ".so" in os.path.basename(fields[5].strip()):
                    path = fields[5].strip()
                    if path not in found:
                        found.append(path)
    except OSError:
        pass
    return found


def _bench_shared_objects(before, root):
    """The shared objects that are the bench's own, for the agent's kernel-image
    checks: those mapped from the repository, and those the imports mapped
    from anywhere but the interpreter's and the system's trees (a build tree's
    extension library, not torch's or the CUDA toolkit's)."""
    import site  # noqa: PLC0415

    root = os.path.realpath(root) + os.sep
    foreign = {os.path.realpath(p) + os.sep for p in
               [sys.prefix, sys.base_prefix, sys.exec_prefix] + list(getattr(site, "getsitepackages", list)())}
    foreign.update({"/usr/", "/lib/", "/lib64/", "/opt/", "/snap/"})
    out = []
    for path in _mapped_shared_objects():
        real = os.path.realpath(path)
        if real.startswith(root) or (path not in before and not any(real.startswith(f) for f in foreign)):
            out.append(real)
    return out


def _load_stage(options, modules, libraries):
    import importlib  # noqa: PLC0415

    imported, problems = {}, []
    before = set(_mapped_shared_objects())
    for name in list(modules) + list(options.module or []):
        try:
            module = importlib.import_module(name)
            imported[name] = getattr(module, "__file__", None) or "(built in)"
        except Exception as error:  # noqa: BLE001 (an import can fail in any way)
            problems.append("import %s: %s: %s" % (name, type(error).__name__, error))
    for path in libraries:
        try:
            ctypes.CDLL(path, mode=os.RTLD_NOW)
        except OSError as error:
            problems.append("load %s: %s" % (path, error))
    details = {"modules": imported, "shared_objects": _bench_shared_objects(before, os.getcwd()),
               "bind_now": os.environ.get("LD_BIND_NOW") == "1"}
    if problems:
        return {"name": "load", "status": "failed", "message": "; ".join(problems), "log_tail": "",
                "details": details}
    what = ["imported " + ", ".join(sorted(imported))] if imported else []
    what += ["loaded %d librar%s" % (len(libraries), "y" if len(libraries) == 1 else "ies")] if libraries else []
    return {"name": "load", "status": "passed", "message": "; ".join(what) or "nothing to import", "log_tail": "",
            "details": details}


def _run_cases(stage, cases, state, options, carried, preflight=None, injection=None):
    """Each case's result: (name, status, message, part, details, seconds).
    `preflight`: what a restart carries besides the runs (the preflight's
    stages done)."""
    runs = list(carried.get("runs", []))
    done = set(r[0] for r in runs)
    if stage == "launch_geometry" and injection is None:
        injection = _Injection()
    for case in cases:
        if case.name in done:
            continue
        if stage in ("quick_bench", "full_bench") and not case.timed():
            continue
        started = time.monotonic()
        try:
            case.setup(state)
            try:
                if stage == "launch_geometry":
                    result = _stage_launch_geometry(case, state, injection)
                elif stage == "correctness":
                    result = (_stage_correctness_of_outputs(case, state) if isinstance(case, _PerfReportCase)
                              else _stage_correctness(case, state))
                elif stage == "quick_bench":
                    result = _stage_quick_bench(case, state, options)
                else:
                    result = _stage_full_bench(case, state, options)
            finally:
                case.teardown(state)
        except Exception as error:  # noqa: BLE001 (the case fails with its error; the others go on)
            traceback.print_exc()
            message = "%s: %s" % (type(error).__name__, error) if not isinstance(error, Error) else str(error)
            result = ("failed", message, _header(case), {})
            if not state.backend.healthy():
                runs.append([case.name] + list(result) + [time.monotonic() - started])
                _restart(options, runs, preflight)
        runs.append([case.name] + list(result) + [time.monotonic() - started])
        _log("%s %s %s (%.2f s): %s" % (stage, case.name, result[0], runs[-1][5], result[1]))
    return runs


def _restart(options, runs, preflight=None):
    """The CUDA context is broken: the cases after this one run in a fresh
    process image (the same pid, so the agent's timeout and the injection
    library's record file carry on)."""
    fd, path = _carry_file()
    with os.fdopen(fd, "w") as out:
        json.dump(dict(preflight or {}, runs=runs), out)
    _log("the CUDA context is broken: a fresh process continues after %s" % runs[-1][0])
    argv = _without([a for a in sys.argv if a], "--resume")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable] + argv + ["--resume", path])


def _carry_file():
    import tempfile  # noqa: PLC0415

    return tempfile.mkstemp(prefix="kwbench-py-", suffix=".json")


def _source_digest(data):
    """A Python module's digest by what runs: its syntax tree without
    comments, docstrings or positions, so that a comment or a docstring
    changes no fingerprint while any change to what executes (a constant, a
    default, a decorator, num_warps) does. A module that does not parse
    (another Python's syntax) is digested by its bytes."""
    import ast  # noqa: PLC0415
    import hashlib  # noqa: PLC0415

    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return hashlib.sha256(data).hexdigest()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
    return "ast:" + hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()


def _code_inputs(root):
    """What this process ran besides the kernels, for the case fingerprints:
    the repository's Python sources it imported (by what runs:
    _source_digest) and the versions of the interpreter and of the packages
    a bench's speed depends on."""
    root = os.path.realpath(root) + os.sep
    sources = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        # A relative __file__ names no file of the repository: torch's
        # torch._ops and torch._classes say "_ops.py", which would resolve
        # into whatever directory the bench runs in.
        if not isinstance(path, str) or not os.path.isabs(path):
            continue
        real = os.path.realpath(path)
        if not real.startswith(root) or not real.endswith(".py"):
            continue
        # The name and the reason alone: the same failure in another
        # checkout must give the same fingerprint.
        try:
            with open(real, "rb") as source:
                sources[real[len(root):]] = _source_digest(source.read())
        except OSError as error:
            sources[real[len(root):]] = "unreadable: %s" % (error.strerror or type(error).__name__)
    packages = {"python": sys.version.split()[0]}
    for name in ("torch", "triton", "numpy", "cupy", "jax"):
        module = sys.modules.get(name)
        if module is not None:
            packages[name] = str(getattr(module, "__version__", "unknown"))
    return {"sources": sources, "packages": packages}


def _stage_document(stage, runs, device, started):
    failures = [r for r in runs if r[1] == "failed"]
    passed = sum(1 for r in runs if r[1] == "passed")
    cases_json = [r[3] for r in runs]
    document = {"device": device, "cases": cases_json, "stage": {
        "name": stage,
        "status": "failed" if failures else "passed",
        "message": "%d cases passed" % passed,
        "log_tail": "",
        "details": {"cases": [{"name": r[0], "status": r[1], "message": r[2], "seconds": r[5],
                               "details": r[4]} for r in runs]},
        "duration_ms": int((time.monotonic() - started) * 1000)}}
    if failures:
        document["stage"]["message"] = "%d of %d cases failed: %s" % (
            len(failures), len(runs), "; ".join("%s: %s" % (r[0], r[2]) for r in failures[:5]))
    if not runs:
        document["stage"]["status"] = "failed"
        document["stage"]["message"] = "no case selected"
    return document



# --- The preflight in one process ---------------------------------------------
#
# `--stage preflight`: load, then launch_geometry, correctness and quick_bench
# over the selected cases in this one process, which imported torch, Triton and
# the bench once (seconds that a process per stage paid each time). The
# document is kwbench's ({"device", "preflight": [{"stage", "cases"}, ...]}),
# rewritten whole after every stage, so the agent reads each stage as it ends
# and what a crash left: the stage the process died in fails with the
# process's own outcome. A failed stage ends the preflight. libkw_inject.so
# records the load and launch_geometry only; quick_bench times without it.
# A case that breaks the CUDA context fails, and the cases after it run in a
# fresh process image, as in a stage of its own.

_PREFLIGHT_CASE_STAGES = ("launch_geometry", "correctness", "quick_bench")


class _PreflightDocument:
    """The preflight's document, written whole (beside, then renamed) after
    each stage; a stage's timeout fails it from a watchdog thread, since a
    kernel that never ends holds the main thread in CUDA."""

    def __init__(self, path, device, done, listing):
        self.path = path
        # The listing (--list's, over --case alone) spares the agent a process that imports to list.
        self.document = {"device": device, "listing": listing, "preflight": list(done)}
        self.lock = threading.Lock()
        self.timer = None

    def stages(self):
        return [entry["stage"]["name"] for entry in self.document["preflight"]]

    def add(self, entry):
        with self.lock:
            self.document["preflight"].append(entry)
            self._write()

    def _write(self):
        text = json.dumps(self.document, allow_nan=False)
        if not self.path:
            sys.stdout.write(text + "\n")
            return
        partial = self.path + ".partial"
        with open(partial, "w") as out:
            out.write(text)
        os.replace(partial, self.path)

    def watch(self, stage, seconds, started_wall):
        self.cancel()
        if seconds <= 0:
            return
        left = max(0.0, seconds - (time.time() - started_wall))

        def ran_out():
            with self.lock:
                self.document["preflight"].append({"cases": [], "stage": {
                    "name": stage, "status": "failed", "log_tail": "", "details": {},
                    "message": "the %s stage's %g s ran out" % (stage, seconds),
                    "duration_ms": int(seconds * 1000)}})
                self._write()
            _log("%s: its %g s ran out" % (stage, seconds))
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)

        self.timer = threading.Timer(left, ran_out)
        self.timer.daemon = True
        self.timer.start()

    def cancel(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def _stage_timeouts(items):
    out = {}
    for item in items:
        name, _, seconds = item.partition("=")
        try:
            out[name] = float(seconds)
        except ValueError:
            raise SystemExit("kwbench: --stage-timeout %r is not STAGE=SECONDS" % item) from None
    return out


def _listing(cases):
    return [{"name": c.name, "params": dict(c.params), "baselines": list(c.baselines()), "timed": c.timed()}
            for c in cases]


def _preflight(options, cases, selected, modules, libraries, backend, device, carried):
    """--stage preflight (above). Returns 0 when every stage it ran passed."""
    patterns = [p for p in options.case.split(",") if p]
    listing = _listing([c for c in cases if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)])
    written = _PreflightDocument(options.json, device, carried.get("preflight", []), listing)
    injection = None
    if os.environ.get("CUDA_INJECTION64_PATH") and os.environ.get("KW_INJECT_OUT"):
        injection = _Injection()
    if "load" not in written.stages():
        started = time.monotonic()
        sys.stderr.write("[kwbench] stage load started\n")
        load = _load_stage(options, modules, libraries)
        load["duration_ms"] = int((time.monotonic() - started) * 1000)
        written.add({"stage": load, "cases": []})
        _log("load %s: %s" % (load["status"], load["message"]))
        if load["status"] != "passed":
            return 1
    timeouts = _stage_timeouts(options.stage_timeout)
    stages = _PREFLIGHT_CASE_STAGES[:max(0, options.preflight_stages)]
    for stage in stages:
        if stage in written.stages():
            continue
        resumed = carried.get("stage") == stage
        stage_cases = selected
        if stage == "quick_bench" and options.quick_bench_go and not resumed:
            # The agent names the cases whose code changed once it has the
            # base's fingerprints, which the base's launch pass takes while
            # this process waits, imported, holding no cached GPU memory.
            # The agent's word: {"argv": [names]}, {"every_case": true} or {"exit": true}.
            go = _go_document(options.quick_bench_go)
            if go is None or go.get("exit"):
                return 0
            if not go.get("every_case"):
                wanted = set(go["argv"])
                stage_cases = [c for c in selected if c.name in wanted]
        elif stage == "quick_bench" and resumed:
            wanted = set(carried.get("cases", []))
            stage_cases = [c for c in selected if c.name in wanted] if "cases" in carried else selected
        if injection is not None:
            with contextlib.suppress(Error):  # on from the start; left on, it costs time, not results
                injection.record(stage == "launch_geometry")
        started_wall = carried.get("started_wall", time.time()) if resumed else time.time()
        sys.stderr.write("[kwbench] stage %s started\n" % stage)
        written.watch(stage, timeouts.get(stage, 0), started_wall)
        carry = {"preflight": written.document["preflight"], "stage": stage, "started_wall": started_wall,
                 "cases": [c.name for c in stage_cases]}
        try:
            runs = _run_cases(stage, stage_cases, State(backend, options.seed), options,
                              carried if resumed else {}, carry, injection)
        except Error as error:
            runs = None
            failure = str(error)
        written.cancel()
        if stage == "launch_geometry" and injection is not None and runs is not None:
            try:
                injection.record(False)  # the records are complete up to here, for the agent to read
            except Error as error:
                runs, failure = None, str(error)
        if runs is None:
            entry = {"cases": [], "stage": {"name": stage, "status": "failed", "message": failure,
                                            "log_tail": "", "details": {}}}
        else:
            entry = _stage_document(stage, runs, device, time.monotonic())
            del entry["device"]
            if stage == "launch_geometry":
                entry["stage"]["details"]["code"] = _code_inputs(os.getcwd())
        entry["stage"]["duration_ms"] = int((time.time() - started_wall) * 1000)
        # Before the agent reads the stage: another process may use the GPU
        # next (a pull request's base's launch pass while this one waits).
        with contextlib.suppress(Exception):  # a failed stage's error is its own
            backend.release_cached_memory()
        written.add(entry)
        _log("%s %s: %s" % (stage, entry["stage"]["status"], entry["stage"]["message"]))
        if entry["stage"]["status"] != "passed":
            return 1
    return 0


# --- A repository's own benchmarks, as they are -----------------------------
#
# `python3 -m kwbench --perf-report SCRIPT [--candidate PROVIDER] ...`: a
# script of triton.testing.perf_report benchmarks (the Triton tutorials'
# form). The script runs with perf_report, do_bench and do_bench_cudagraph
# standing in for Triton's: the benchmarks it declares are collected and its
# `.run()` does nothing. Each x value of each benchmark is a case; its
# providers (`line_vals`) are the implementations, the candidate one the
# repository's kernel and the others baselines. A case's setup calls the
# benchmark function once per provider with do_bench capturing the callable
# it would time; kwbench times those callables, and correctness holds the
# candidate's output against the first baseline's, with a tolerance by dtype.

# Relative L2 error allowed against a baseline provider, by output dtype: a
# Triton fp32 dot uses TF32 by default.
_FORM_TOLERANCE = {"float64": 1e-9, "float32": 2e-3, "float16": 1e-2, "bfloat16": 3e-2}
_FORM_TOLERANCE_OTHER = 1e-1  # fp8 and anything narrower


class _Capture:
    """do_bench's stand-in: while a case sets up, the callable a benchmark
    function would time is kept instead of timed."""

    active = None  # the list the next calls append to
    sites = None  # do_bench form: (file, line, the caller's scalar locals, fn) of every call

    @staticmethod
    def keep(fn, quantiles, return_mode, depth=2, names=None):
        if _Capture.active is not None:
            _Capture.active.append(fn)
        if _Capture.sites is not None:
            caller = sys._getframe(depth)  # the script's frame, past do_bench
            scalars = {k: _scalar(v) for k, v in caller.f_locals.items()
                       if _scalar(v) is not None and not k.startswith("_")}
            scalars.update(names or {})
            _Capture.sites.append((caller.f_code.co_filename, caller.f_code.co_name, caller.f_lineno, scalars,
                                   _bound_now(fn)))
        # A time the script's own arithmetic (GB/s, TFLOP/s) accepts.
        if return_mode == "all":
            return [1.0]
        return [1.0] * len(quantiles) if quantiles else 1.0

    # Triton's signatures (do_bench's positional quantiles are its fifth argument, do_bench_cudagraph's its fourth).
    @staticmethod
    def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, *args, return_mode="mean", **kwargs):
        return _Capture.keep(fn, quantiles, return_mode)

    @staticmethod
    def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, *args, return_mode="mean", **kwargs):
        return _Capture.keep(fn, quantiles, return_mode)


class _CapturedTimer:
    """torch.utils.benchmark.Timer, keeping what it would time as do_bench's
    stand-in keeps a callable: its statement, compiled with its globals once
    its setup ran (an expression's value is what correctness compares), and
    its label, sub_label and description, which name the case and the
    implementation."""

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=None, globals=None,  # noqa: A002
                 label=None, sub_label=None, description=None, env=None, num_threads=1, language=None):
        namespace = dict(globals or {})
        exec(setup, namespace)  # noqa: S102 (the script's own setup, as Timer runs it)
        try:
            code, run = compile(stmt, "<stmt>", "eval"), eval
        except SyntaxError:
            code, run = compile(stmt, "<stmt>", "exec"), exec
        self._fn = lambda: run(code, namespace)
        self.label, self.sub_label, self.description = label, sub_label, description
        self._names = {k: str(v) for k, v in (("label", label), ("sub_label", sub_label),
                                               ("description", description)) if v is not None}

    def _kept(self):
        _Capture.keep(self._fn, None, "mean", depth=3, names=self._names)
        return _CapturedMeasurement(self)

    def timeit(self, number=1000000):
        return self._kept()

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        return self._kept()

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0, callback=None):
        return self._kept()


class _CapturedMeasurement:
    """What a captured Timer answers: a time the script's arithmetic and
    printing accept (1 ms)."""

    def __init__(self, timer):
        self.label, self.sub_label, self.description = timer.label, timer.sub_label, timer.description
        self.number_per_run, self.raw_times, self.times = 1, [1e-3], [1e-3]
        self.mean = self.median = 1e-3
        self.iqr = 0.0
        self.title = " ".join(str(v) for v in (timer.label, timer.sub_label, timer.description) if v)

    def __repr__(self):
        return "%s: 1.00 ms (kernelwatch times it)" % (self.title or "stmt")


class _CapturedCompare:
    """torch.utils.benchmark.Compare over captured measurements: prints nothing."""

    def __init__(self, results=None):
        self.results = list(results or [])

    def extend_results(self, results):
        self.results.extend(results)

    def trim_significant_figures(self):
        pass

    def colorize(self, rowwise=False):
        pass

    def highlight_warnings(self):
        pass

    def print(self):
        pass


def _scalar(value):
    """What names a case: an integer, a string, a flag or a dtype (not a
    float: timings and rates the script computed are floats)."""
    if isinstance(value, (bool, int, str)):
        return value
    if type(value).__name__ == "dtype":
        return str(value).replace("torch.", "")
    return None


def _bound_now(fn):
    """`fn` with its closure's values as they are now: a lambda made in a
    loop reads the loop's variables when called, and kw calls it after the
    loop has moved on."""
    import types  # noqa: PLC0415

    if not isinstance(fn, types.FunctionType) or not fn.__closure__:
        return fn
    try:
        cells = tuple(types.CellType(cell.cell_contents) for cell in fn.__closure__)
    except ValueError:  # a cell not yet filled: the function reads it as it is
        return fn
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, cells)


class _Declared:
    """What perf_report returns: the function and its benchmarks, collected;
    `.run()` does nothing, a call runs the function."""

    collected = []
    # Mark.run's own options; its other keywords go to the benchmark function.
    _RUN_OPTIONS = ("show_plots", "print_data", "save_path", "return_df")

    def __init__(self, fn, benchmarks):
        self.fn = fn
        self.benchmarks = benchmarks if isinstance(benchmarks, (list, tuple)) else [benchmarks]
        self.extra = {}  # keywords the script's .run() passes, then kernelwatch.json's run_args
        _Declared.collected.append(self)

    def run(self, *args, **kwargs):
        self.extra.update({k: v for k, v in kwargs.items() if k not in self._RUN_OPTIONS})

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def _name_part(value):
    text = str(value)
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)


def _x_args(bench, x):
    values = list(x) if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
    return dict(zip(bench.x_names, values))


# Provider names that say "the reference, not our kernel".
_REFERENCE_WORDS = ("torch", "pytorch", "naive", "native", "eager", "aten", "cublas", "cudnn", "reference", "ref")


def _choose_candidate(providers, labels=()):
    """The provider that says triton; else the first that names no
    reference (a repository's own kernel, `trident` beside `torch`); else
    the first."""
    labels = list(labels) + [""] * (len(providers) - len(labels))
    texts = [(str(p) + " " + str(label)).lower() for p, label in zip(providers, labels)]
    for provider, text in zip(providers, texts):
        if "triton" in text:
            return provider
    for provider, text in zip(providers, texts):
        if not any(word in text.replace("-", "_").split("_") or text.startswith(word) for word in _REFERENCE_WORDS):
            return provider
    return providers[0]


def _default_candidate(bench):
    return _choose_candidate(list(bench.line_vals), list(getattr(bench, "line_names", None) or []))


def _args_that_differ(bench, siblings):
    """`/NAME=VALUE` for each of the benchmark's args that another with its
    plot name sets otherwise (a list of configs, one per dtype)."""
    args = dict(getattr(bench, "args", None) or {})
    differ = [k for k in sorted(args) if any(repr(dict(getattr(o, "args", None) or {}).get(k)) != repr(args[k])
                                             for o in siblings)]
    return "".join("/%s=%s" % (_name_part(k), _name_part(_scalar(args[k]) if _scalar(args[k]) is not None
                                                          else args[k])) for k in differ)


def _seed_generators(seed):
    """Python's, NumPy's and torch's generators (the GPU's too) seeded alike."""
    random.seed(seed)
    for name in ("numpy", "torch"):
        module = sys.modules.get(name)
        if name == "numpy" and module is not None:
            module.random.seed(seed)
        elif module is not None and hasattr(module, "manual_seed"):
            module.manual_seed(seed)


def _outputs(value):
    """The tensors (or float sequences) a callable returned, in order."""
    if value is None:
        return []
    if isinstance(value, (tuple, list)) and value and not isinstance(value[0], (int, float)):
        return [v for v in value if v is not None]
    return [value]


def _tolerance_of(output):
    dtype = getattr(output, "dtype", None)
    if dtype is None:
        return _FORM_TOLERANCE["float64"]
    return _FORM_TOLERANCE.get(str(dtype).replace("torch.", ""), _FORM_TOLERANCE_OTHER)


class _PerfReportCase(Case):
    def __init__(self, declared, bench, x, candidate, name):
        self.declared = declared
        self.bench = bench
        self.x = x
        self.candidate = candidate
        self.name = name
        # A benchmark's declared values, floats too (a do_bench caller's floats are its timings).
        declared_args = dict(getattr(bench, "args", None) or {})
        declared_args.update(_x_args(bench, x))
        self.params = {k: v if isinstance(v, float) else _scalar(v) for k, v in declared_args.items()
                       if isinstance(v, float) or _scalar(v) is not None}
        self.callables = {}
        self.unavailable = {}
        self.returned = {}
        self.reference_provider = ""

    def _providers(self):
        return [str(v) for v in self.bench.line_vals]

    def baselines(self):
        return [p for p in self._providers() if p != str(self.candidate)]

    def _call_for(self, provider, seed):
        value = self.bench.line_vals[self._providers().index(provider)]
        kwargs = dict(self.declared.extra)
        kwargs.update(getattr(self.bench, "args", None) or {})
        kwargs.update(_x_args(self.bench, self.x))
        kwargs[self.bench.line_arg] = value
        captured = []
        _Capture.active = captured
        _seed_generators(seed)  # each provider's inputs, made by the function, are the same
        try:
            self.declared.fn(**kwargs)
        finally:
            _Capture.active = None
        if len(captured) != 1:
            raise Error("%s: the benchmark function timed %d callables for provider %s; kw times exactly one"
                        % (self.name, len(captured), provider))
        return captured[0]

    def setup(self, state):
        self.callables, self.unavailable, self.returned = {}, {}, {}
        for provider in self._providers():
            try:
                self.callables[provider] = self._call_for(provider, state.seed)
            except Exception as error:  # noqa: BLE001 (a provider this host lacks is a skipped baseline)
                if provider == str(self.candidate):
                    raise
                self.unavailable[provider] = "%s: %s" % (type(error).__name__, error)

    def teardown(self, state):
        self.callables, self.returned = {}, {}

    def run_candidate(self, state):
        self.returned[str(self.candidate)] = self.callables[str(self.candidate)]()
        return self.returned[str(self.candidate)]

    def run_baseline(self, name, state):
        return self.callables[name]()

    def baseline_unavailable(self, name):
        return self.unavailable.get(name)

    def reference(self, state):
        for name in self.baselines():
            if name in self.callables:
                outputs = _outputs(self.callables[name]())
                if outputs:
                    self.reference_provider = name
                    return outputs
        raise Error("no baseline provider returned an output to hold %s's against (providers: %s)"
                    % (self.candidate, ", ".join(self._providers())))

    def tolerance(self):
        outputs = _outputs(self.returned.get(str(self.candidate)))
        return max((_tolerance_of(o) for o in outputs), default=_FORM_TOLERANCE["float64"])


# `python3 -m kwbench --do-bench SCRIPT [--candidate TEXT]`: a plain script
# that calls triton.testing.do_bench (or do_bench_cudagraph), or times
# torch.utils.benchmark.Timer statements, in loops over shapes and
# providers (a Timer's label, sub_label and description are locals of the
# call: its description a provider variable). The script runs once, as
# `__main__`, with do_bench keeping each callable and where it was called
# from: the calling function, the line and the caller's scalar locals. Calls
# from one line whose locals differ only in a provider variable (provider,
# impl, backend, method, kernel, description: the first that varies; locals
# set from it alone, its label or statement, vary with it) are one case,
# each provider an implementation; without
# one, the lines of one function called with the same other locals are the
# case's implementations, each named by what its callable calls. The case is
# named by the script, the function (and the line's rank in it where it has
# several) and the locals that vary. The candidate is the implementation
# whose name says `--candidate`, else as for perf_report (_choose_candidate).
# Every callable kept holds its inputs: the whole sweep's stay allocated in
# each process.

_PROVIDER_VARIABLES = ("provider", "impl", "implementation", "backend", "method", "kernel", "description")


class _CallableCase(_PerfReportCase):
    """A case whose implementations' callables are already captured."""

    def __init__(self, name, params, callables, candidate):
        Case.__init__(self)
        self.name = name
        self.params = params
        self.candidate = candidate
        self.providers = list(callables)
        self.kept = callables
        self.callables, self.unavailable, self.returned = {}, {}, {}
        self.reference_provider = ""

    def _providers(self):
        return self.providers

    def setup(self, state):
        self.callables, self.returned = dict(self.kept), {}

    def teardown(self, state):
        self.returned = {}


def _callable_name(fn):
    """What a callable calls, by name: `lambda: torch.softmax(x, -1)` is
    torch.softmax."""
    code = getattr(fn, "__code__", None)
    return ".".join(code.co_names) if code is not None and code.co_names else ""


def do_bench_cases(script, candidate=None):
    """The cases of a plain do_bench script, the script run once to find them."""
    import runpy  # noqa: PLC0415

    _install_capture(need_triton=False)
    script = os.path.abspath(script)
    sys.path.insert(0, os.path.dirname(script))
    _Capture.sites = []
    argv, sys.argv = sys.argv, [script]  # the script's own argument parser sees no kwbench option
    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout is the stage's document
            runpy.run_path(script, run_name="__main__")
    except SystemExit:
        pass
    finally:
        sys.argv = argv
        calls = [c for c in _Capture.sites if os.path.abspath(c[0]) == script] or _Capture.sites
        _Capture.sites = None
    if not calls:
        raise Error("%s calls no triton.testing.do_bench and times no torch.utils.benchmark.Timer: nothing kw "
                    "can time" % script)
    stem = _name_part(os.path.splitext(os.path.basename(script))[0])
    by_site = {}  # (function, line) -> [(scalars, fn)]
    for _, function, line, scalars, fn in calls:
        by_site.setdefault((function, line), []).append((scalars, fn))
    lines_of = {}
    for function, line in by_site:
        lines_of.setdefault(function, []).append(line)
    groups = {}  # case name -> (params, {implementation: fn})
    for (function, line), site_calls in sorted(by_site.items(), key=lambda item: item[0][1]):
        # Set at every call (a result the loop assigns after the call is not).
        common = set.intersection(*(set(c[0]) for c in site_calls))
        varying = sorted(k for k in common if len(set(repr(c[0][k]) for c in site_calls)) > 1)
        provider = next((v for v in _PROVIDER_VARIABLES if v in varying), None)
        def values(*keys):
            return len({tuple(repr(c[0][k]) for k in keys) for c in site_calls})

        if provider is not None:  # a local set from the provider alone (its label, its stmt) names nothing more
            varying = [k for k in varying if k == provider or values(provider, k) > values(provider)]
        # A local that is another's value spelt otherwise (sub_label "n=1024" beside n) names nothing more.
        kept = []
        for k in varying:
            if k == provider or not any(values(k, o) == values(k) == values(o) for o in kept if o != provider):
                kept.append(k)
        varying = kept
        # Named by its function, not its line: an edit above it renames nothing.
        where = _name_part("module" if function == "<module>" else function)
        lines = sorted(lines_of[function])
        for scalars, fn in site_calls:
            suffix = "".join("/%s=%s" % (_name_part(k), _name_part(scalars[k])) for k in varying if k != provider)
            params = {k: scalars[k] for k in varying if k != provider}
            if provider is not None:
                site = where if len(lines) == 1 else "%s-%d" % (where, lines.index(line) + 1)
                name, impl = "%s/%s%s" % (stem, site, suffix), str(scalars[provider])
            else:
                name, impl = "%s/%s%s" % (stem, where, suffix), _callable_name(fn) or "line%d" % line
            groups.setdefault(name, (params, {}))[1].setdefault(impl, fn)
    cases = []
    for name, (params, callables) in groups.items():
        chosen = (next((impl for impl in callables if candidate.lower() in impl.lower()), next(iter(callables)))
                  if candidate else _choose_candidate(list(callables)))
        cases.append(_CallableCase(name, params, callables, chosen))
    return cases


def _stage_correctness_of_outputs(case, state):
    """Correctness of a case whose implementations return their outputs
    (possibly several, a launcher's tuple): each held to the reference's."""
    part = _header(case)
    returned = _outputs(case.run_candidate(state))
    state.backend.synchronize()
    if not returned:
        raise Error("the candidate provider %s returned no output: nothing to hold against a baseline"
                    % case.candidate)
    reference = case.reference(state)
    if len(reference) != len(returned):
        raise Error("the candidate returned %d outputs, the baseline %d" % (len(returned), len(reference)))
    tolerance = case.tolerance()
    worst = (0.0, 0.0, 0)
    for output, expected in zip(returned, reference):
        rel, max_abs, nonfinite = state.backend.compare(output, expected)
        if not (math.isfinite(rel) and math.isfinite(max_abs)):
            rel, max_abs = float("inf"), float("inf")
        worst = (max(worst[0], rel), max(worst[1], max_abs), worst[2] + nonfinite)
    verdict = _correctness_verdict(part, *worst, tolerance, "", " against " + case.reference_provider)
    own = case.own_accuracy() if hasattr(case, "own_accuracy") else None
    if own is None:
        return verdict
    # The operator's own check decides; the comparison by dtype is said beside it.
    part["correctness"]["passed"] = own
    return ("passed" if own else "failed",
            "the operator's accuracy() %s %s against %s (by dtype: %s)"
            % ("passes" if own else "fails", case.candidate, case.reference_provider, verdict[1]), part, {})


def _install_capture(need_triton=True):
    """perf_report, do_bench and do_bench_cudagraph of triton.testing, and
    torch.utils.benchmark's Timer and Compare, replaced before the script
    imports them (where Triton or PyTorch is installed)."""
    try:
        import triton.testing  # noqa: PLC0415 (only a script of these forms needs Triton)
    except ImportError:
        if need_triton:
            raise
    else:
        triton.testing.perf_report = lambda benchmarks: (lambda fn: _Declared(fn, benchmarks))
        triton.testing.do_bench = _Capture.do_bench
        if hasattr(triton.testing, "do_bench_cudagraph"):
            triton.testing.do_bench_cudagraph = _Capture.do_bench_cudagraph
    try:
        import torch.utils.benchmark as torch_benchmark  # noqa: PLC0415
    except ImportError:
        return
    torch_benchmark.Timer = _CapturedTimer
    torch_benchmark.Compare = _CapturedCompare


def _bind_run_args(declared, run_args, namespace):
    """The benchmark function's parameters that its benchmarks do not give
    (a dtype its `.run()` call passes from a caller kw never runs): from
    kernelwatch.json's run_args, Python expressions read in the script's
    namespace; one nothing gives is an error that names it."""
    import inspect  # noqa: PLC0415

    fn = declared.fn
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return
    for name, expression in (run_args or {}).items():
        if name in parameters:  # over what a .run() call passes: the config says what to measure
            try:
                declared.extra[name] = eval(expression, namespace)  # noqa: S307 (the repository's own config)
            except Exception as error:  # noqa: BLE001 (said with the expression)
                raise Error("run_args %s = %r: %s: %s" % (name, expression, type(error).__name__, error)) from error
    for bench in declared.benchmarks:
        given = set(declared.extra) | set(getattr(bench, "args", None) or {}) | set(bench.x_names) | {bench.line_arg}
        missing = [name for name, p in parameters.items()
                   if name not in given and p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if missing:
            raise Error("%s(%s): nothing gives %s (not its benchmark's x_names, args or line_arg, nor a keyword of "
                        "a .run() call the script makes): set it in kernelwatch.json's run_args, a Python "
                        "expression each, e.g. \"run_args\": {\"%s\": \"torch.float16\"}"
                        % (fn.__name__, ", ".join(parameters), ", ".join(missing), missing[0]))


def perf_report_cases(script, candidate=None, run_args=None):
    """The cases of a perf_report script, the script run once to declare them."""
    import runpy  # noqa: PLC0415

    _install_capture()
    _Declared.collected = []
    script = os.path.abspath(script)
    sys.path.insert(0, os.path.dirname(script))
    argv, sys.argv = sys.argv, [script]  # the script's own argument parser sees no kwbench option
    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout is the stage's document
            namespace = runpy.run_path(script, run_name="__kwbench_perf_report__")
    finally:
        sys.argv = argv
    if not _Declared.collected:
        raise Error("%s declares no triton.testing.perf_report benchmark" % script)
    for declared in _Declared.collected:
        _bind_run_args(declared, run_args, namespace)
    cases, seen = [], set()
    plots = {}  # plot name -> its benchmarks: those sharing one are told apart by their args
    for declared in _Declared.collected:
        for bench in declared.benchmarks:
            plots.setdefault(getattr(bench, "plot_name", None) or declared.fn.__name__, []).append(bench)
    for declared in _Declared.collected:
        for bench in declared.benchmarks:
            providers = [str(v) for v in bench.line_vals]
            chosen = candidate if candidate is not None else _default_candidate(bench)
            if str(chosen) not in providers:
                raise Error("%s: no provider %s (its %s: %s)" % (bench.plot_name or declared.fn.__name__, chosen,
                                                               bench.line_arg, ", ".join(providers)))
            plot = getattr(bench, "plot_name", None) or declared.fn.__name__
            prefix = _name_part(plot) + _args_that_differ(bench, plots[plot])
            for x in bench.x_vals:
                name = prefix + "/" + "/".join("%s=%s" % (_name_part(k), _name_part(v))
                                                for k, v in _x_args(bench, x).items())
                if name in seen:
                    continue  # the same benchmark declared twice
                seen.add(name)
                cases.append(_PerfReportCase(declared, bench, x, chosen, name))
    return cases


# `python3 -m kwbench --tritonbench OPERATOR [--candidate NAME]`: an operator
# written in TritonBench's layout (tritonbench/operators/<op>/operator.py, in
# TritonBench's repository or one that follows it): its Operator class, the
# methods registered with @register_benchmark (each returns the callable to
# time), get_input_iter() for the inputs and get_x_val() to name them. Each
# input is a case named by the operator and its x value, each enabled
# registered benchmark an implementation, timed forward as TritonBench's
# default mode times it. The candidate is `--candidate` (a benchmark whose
# name says it), else the one that says triton among those not registered
# baseline=True; correctness holds it against the registered baseline's
# output with a tolerance by dtype, and where the operator defines its own
# accuracy(), that check decides. The inputs are made again for each case,
# one at a time, as TritonBench holds only the current one.


class _TritonBenchOperator:
    """The operator, made as TritonBench's runner makes it, and its inputs
    one at a time."""

    def __init__(self, path):
        path = os.path.abspath(path)
        parts = path.split(os.sep)
        if "operators" not in parts[:-1]:
            raise Error("%s is not in TritonBench's layout (tritonbench/operators/<op>/operator.py)" % path)
        at = len(parts) - 1 - parts[::-1].index("operators")
        if at + 1 >= len(parts) or at < 2:
            raise Error("%s: no operator directory under operators/" % path)
        package, op_dir = parts[at - 1], parts[at + 1]
        root = os.sep.join(parts[:at - 1]) or os.sep
        sys.path.insert(0, root)
        module_name = "%s.operators.%s" % (package, op_dir)
        if os.path.exists(os.path.join(root, package, "operators", op_dir, "operator.py")):
            module_name += ".operator"
        try:
            with contextlib.redirect_stdout(sys.stderr):  # stdout is the stage's document
                module = importlib.import_module(module_name)
                self.registry = importlib.import_module(package + ".utils.triton_op")
        except ImportError as error:
            raise Error("%s: importing %s from %s failed: %s" % (path, module_name, root, error)) from error
        operator_class = getattr(module, "Operator", None)
        if operator_class is None:
            raise Error("%s defines no Operator class" % module_name)
        try:
            parser = importlib.import_module(package + ".utils.parser").get_parser()
            tb_args, extra = parser.parse_known_args(["--op", op_dir, "--mode", "fwd"])
        except (ImportError, AttributeError, SystemExit) as error:
            raise Error("%s.utils.parser: no get_parser() that takes --op and --mode (%s)" % (package, error)) \
                from error
        with contextlib.redirect_stdout(sys.stderr):
            self.op = operator_class(tb_args=tb_args, extra_args=extra)
        base = getattr(self.registry, "BenchmarkOperator", None)
        self.own_accuracy = base is not None and getattr(operator_class, "accuracy", None) is not getattr(
            base, "accuracy", None)
        self.name = str(getattr(self.op, "name", op_dir))
        registered = getattr(self.registry, "REGISTERED_BENCHMARKS", {}).get(self.name, {})
        self.benchmarks = [n for n, backend in registered.items() if getattr(backend, "enabled", True)]
        self.labels = [str(getattr(registered[n], "label", "") or "") for n in self.benchmarks]
        if not self.benchmarks:
            raise Error("operator %s registers no enabled benchmark (@register_benchmark)" % self.name)
        self.baseline = getattr(self.registry, "BASELINE_BENCHMARKS", {}).get(self.name)
        # A label like "(M, N)" names the case as M_N.
        label = str(getattr(self.registry, "REGISTERED_X_VALS", {}).get(self.name, "x_val"))
        self.x_label = "_".join(filter(None, re.split(r"[^A-Za-z0-9.-]+", label))) or "x_val"
        self._iterator, self._next = None, 0

    def inputs(self, index):
        """The operator's input `index`, made afresh (the one before it freed)."""
        if self._iterator is None or self._next > index:
            self._iterator, self._next = iter(self.op.get_input_iter()), 0
        value = None
        while self._next <= index:
            value = next(self._iterator)
            self._next += 1
        return value

    def x_values(self):
        values = []
        for index, example in enumerate(self.op.get_input_iter()):
            self.op._cur_input_id = index
            x = self.op.get_x_val(example)
            values.append(index if x is None else x)
        return values

    def callable_of(self, benchmark, example):
        self.op.example_inputs = example
        method = getattr(self.op, benchmark)
        fn = method(**example) if isinstance(example, dict) else method(*example)
        if not callable(fn):
            raise Error("%s.%s returned %s, not the callable to time" % (self.name, benchmark, type(fn).__name__))
        return fn


def _x_text(x):
    if isinstance(x, (list, tuple)):
        return "x".join(_name_part(v) for v in x)
    return _name_part(x)


class _TritonBenchCase(_CallableCase):
    def __init__(self, operator, index, name, params, candidate):
        baselines = [b for b in operator.benchmarks if b != candidate]
        if operator.baseline in baselines:  # the reference, first
            baselines.remove(operator.baseline)
            baselines.insert(0, operator.baseline)
        _CallableCase.__init__(self, name, params, dict.fromkeys([candidate] + baselines), candidate)
        self.operator = operator
        self.index = index

    def setup(self, state):
        self.callables, self.unavailable, self.returned = {}, {}, {}
        example = self.operator.inputs(self.index)
        self.operator.op._cur_input_id = self.index
        for benchmark in self.providers:
            try:
                self.callables[benchmark] = self.operator.callable_of(benchmark, example)
            except Exception as error:  # noqa: BLE001 (a benchmark this host lacks is a skipped baseline)
                if benchmark == self.candidate:
                    raise
                self.unavailable[benchmark] = "%s: %s" % (type(error).__name__, error)

    def teardown(self, state):
        self.callables, self.returned = {}, {}
        self.operator.op.example_inputs = None

    def own_accuracy(self):
        """The operator's own accuracy(candidate, baseline), where it defines
        one; None otherwise."""
        baseline = self.operator.baseline
        if not self.operator.own_accuracy or baseline not in self.callables:
            return None
        return bool(self.operator.op.accuracy(self.callables[self.candidate], self.callables[baseline]))


def tritonbench_cases(path, candidate=None):
    """The cases of a TritonBench operator, its inputs iterated once to name them."""
    operator = _TritonBenchOperator(path)
    if candidate is not None:
        chosen = next((b for b in operator.benchmarks if candidate.lower() in b.lower()), None)
        if chosen is None:
            raise Error("operator %s: no benchmark %s (registered: %s)"
                        % (operator.name, candidate, ", ".join(operator.benchmarks)))
    else:
        others = [(b, label) for b, label in zip(operator.benchmarks, operator.labels) if b != operator.baseline]
        chosen = (_choose_candidate([b for b, _ in others], [label for _, label in others]) if others
                  else operator.benchmarks[0])
    with contextlib.redirect_stdout(sys.stderr):
        x_values = operator.x_values()
    cases, seen = [], {}
    for index, x in enumerate(x_values):
        name = "%s/%s=%s" % (_name_part(operator.name), operator.x_label, _x_text(x))
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name += "#%d" % seen[name]  # two inputs of one x value
        scalar = _scalar(x)
        params = {operator.x_label: scalar if scalar is not None else _x_text(x)}
        cases.append(_TritonBenchCase(operator, index, name, params, chosen))
    if not cases:
        raise Error("operator %s: get_input_iter() yields no input" % operator.name)
    return cases


def _parser():
    p = argparse.ArgumentParser(description="kwbench for Python (kernels/python/kwbench.py)")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--stage", choices=["load", "launch_geometry", "correctness", "quick_bench", "full_bench",
                                        "preflight"],
                   help="preflight: load, then launch_geometry, correctness and quick_bench in this one process")
    p.add_argument("--preflight-stages", type=int, default=len(_PREFLIGHT_CASE_STAGES),
                   help="preflight: how many of its per-case stages run (1: launch_geometry alone)")
    p.add_argument("--stage-timeout", action="append", default=[], metavar="STAGE=SECONDS",
                   help="preflight: the seconds a per-case stage may take over all its cases")
    p.add_argument("--quick-bench-go", help="preflight: before quick_bench, wait for this file to name the cases "
                   "it times ({\"argv\": [names]}, {\"every_case\": true}, or {\"exit\": true}: none)")
    p.add_argument("--json", help="write the result here (default: stdout)")
    p.add_argument("--case", default="*", help="globs over case names, separated by commas")
    p.add_argument("--case-list", help="a file of case names, one per line (full_bench replicates)")
    p.add_argument("--impls", default="*", help="glob over implementations: candidate, baseline:NAME")
    p.add_argument("--order-seed", type=int, default=0)
    p.add_argument("--energy-seconds", type=float, default=0,
                   help="accepted for the agent's protocol; the Python harness reports no energy (the field is absent)")
    p.add_argument("--max-seconds", type=float, default=0.25)
    p.add_argument("--min-samples", type=int, default=10)
    p.add_argument("--max-samples", type=int, default=200)
    p.add_argument("--noise-target", type=float, default=0.005)
    p.add_argument("--quick-iterations", type=int, default=20)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--module", action="append", help="load: import this module too")
    p.add_argument("--in-process", action="store_true", help="accepted for kwbench compatibility")
    p.add_argument("--backend", default=os.environ.get("KWBENCH_BACKEND", "torch"),
                   choices=["torch", "cpu-stand-in"])
    p.add_argument("--resume", help=argparse.SUPPRESS)
    p.add_argument("--go-file", help="full_bench or preflight: wait, imports done and no CUDA context made, for "
                   "this file's arguments (kw's prepared processes)")
    p.add_argument("--context-before-go", action="store_true",
                   help="with --go-file: make the CUDA context before waiting")
    p.add_argument("--perf-report", help="python3 -m kwbench: the cases of this triton.testing.perf_report script")
    p.add_argument("--do-bench", help="python3 -m kwbench: the cases of this script's triton.testing.do_bench "
                   "calls")
    p.add_argument("--tritonbench", help="python3 -m kwbench: the cases of this TritonBench operator "
                   "(tritonbench/operators/<op>/operator.py)")
    p.add_argument("--candidate", help="with --perf-report, --do-bench or --tritonbench: the provider (or registered "
                   "benchmark) that runs the repository's kernel (default: the one that says triton, else the first "
                   "that names no reference)")
    p.add_argument("--run-arg", action="append", default=[], metavar="NAME=EXPRESSION",
                   help="with --perf-report: a keyword the benchmark functions take that their benchmarks do not "
                   "give, as a Python expression in the script's namespace (kernelwatch.json's run_args)")
    return p


def _go_document(path):
    """Waits for kw to write `path` (whole: it renames it into place), and
    returns what it holds; None when kw is gone."""
    parent = os.getppid()
    while not os.path.exists(path):
        if os.getppid() != parent:
            return None
        time.sleep(0.005)
    with open(path) as go:
        document = json.load(go)
    os.unlink(path)
    return document


def _wait_for_go(path):
    """A prepared replicate: the script's imports are done and no CUDA
    context exists yet. Waits for kw to write the pass's arguments to `path`;
    None when told to exit, or when kw is gone."""
    document = _go_document(path)
    return None if document is None or document.get("exit") else document["argv"]


def _warm_triton():
    """Triton's first compile in a process, even one its cache answers,
    hashes Triton's install (libtriton.so, hundreds of megabytes) for the
    cache key and imports the gluon front end: 0.4-0.5 s of one core
    (Triton 3.6), none of it on the GPU. Done before the go, it overlaps the
    other side's pass. Nothing here may fail the pass: a Triton without
    these names compiles as it would have."""
    if "triton" not in sys.modules:
        return
    for module_name in ("triton.runtime.cache", "triton.compiler.compiler"):
        try:
            key = getattr(importlib.import_module(module_name), "triton_key", None)
            if key is not None:
                key()
                break
        except Exception:  # noqa: BLE001 (an optimisation only; the pass reports real errors)
            continue
    try:
        importlib.import_module("triton.experimental.gluon")
    except Exception:  # noqa: BLE001 (as above)
        pass


def _backend_with_context(name):
    """The backend with its CUDA context made (an allocation makes it), or
    None: what went wrong is said after the go, as a fresh process says it."""
    try:
        backend = TorchBackend() if name == "torch" else CpuStandInBackend()
        if name == "torch":
            backend.torch.empty(1, device=backend.device)
            backend.synchronize()
        return backend
    except (Error, ImportError, RuntimeError):
        return None


def _without(argv, option):
    out = list(argv)
    if option in out:
        i = out.index(option)
        del out[i:i + 2]
    return out


def main(cases, modules=(), libraries=(), argv=None):
    """Runs the command line over `cases` (or what calling it returns, after
    a prepared process's go); exits with 0 when the stage passed, 1 when it
    failed, 2 for a bad command line."""
    options = _parser().parse_args(argv)
    ready = None  # the backend, made before the go
    if options.go_file:
        if options.backend == "torch":
            try:
                import torch  # noqa: F401, PLC0415 (seconds of the pass's start)
            except ImportError:
                pass  # the pass says so after its go, as a fresh process would
        _warm_triton()
        if options.context_before_go:
            ready = _backend_with_context(options.backend)
        go = _wait_for_go(options.go_file)
        if go is None:
            return 0
        merged = _without(sys.argv[1:] if argv is None else argv, "--go-file") + go
        if argv is None:
            sys.argv = sys.argv[:1] + merged  # a restart after a broken context keeps the pass's arguments
        options = _parser().parse_args(merged)
    if callable(cases):  # a form whose script runs only once the pass may use the GPU
        try:
            cases = cases()
        except Error as error:
            sys.stderr.write("kwbench: %s\n" % error)
            return 2
    selected = _case_list(cases, options)
    if options.list:
        _write(options.json, {"cases": _listing(selected)})
        return 0
    if not options.stage:
        _parser().error("one of --list or --stage is required")
    started = time.monotonic()
    try:
        backend = ready or (TorchBackend() if options.backend == "torch" else CpuStandInBackend())
        device = backend.device_report()
    except (Error, ImportError) as error:
        stage = {"name": "load" if options.stage == "preflight" else options.stage, "status": "skipped",
                 "message": str(error), "log_tail": "", "details": {},
                 "duration_ms": int((time.monotonic() - started) * 1000)}
        if options.stage == "preflight":
            _write(options.json, {"device": None, "preflight": [{"stage": stage, "cases": []}]})
            return 0
        _write(options.json, {"stage": stage, "device": None, "cases": []})
        return 0
    _log("%s started on %s (%s backend)" % (options.stage, device["name"], backend.name))
    if options.stage == "load":
        stage = _load_stage(options, modules, libraries)
        stage["duration_ms"] = int((time.monotonic() - started) * 1000)
        _write(options.json, {"stage": stage, "device": device, "cases": []})
        _log("load %s: %s" % (stage["status"], stage["message"]))
        return 0 if stage["status"] == "passed" else 1
    carried = {}
    if options.resume:
        with open(options.resume) as carry:
            carried = json.load(carry)
        os.unlink(options.resume)
    if options.stage == "preflight":
        return _preflight(options, cases, selected, modules, libraries, backend, device, carried)
    state = State(backend, options.seed)
    try:
        runs = _run_cases(options.stage, selected, state, options, carried)
    except Error as error:
        stage = {"name": options.stage, "status": "failed", "message": str(error), "log_tail": "",
                 "details": {}, "duration_ms": int((time.monotonic() - started) * 1000)}
        _write(options.json, {"stage": stage, "device": device, "cases": []})
        return 1
    document = _stage_document(options.stage, runs, device, started)
    if options.stage == "launch_geometry":
        document["stage"]["details"]["code"] = _code_inputs(os.getcwd())
    _write(options.json, document)
    _log("%s %s: %s" % (options.stage, document["stage"]["status"], document["stage"]["message"]))
    code = 0 if document["stage"]["status"] == "passed" else 1
    if options.stage == "full_bench" and argv is None:
        # A replicate's process has nothing left to do once its result is
        # written, and kw waits for its exit: the interpreter's teardown of
        # torch's and Triton's modules would add most of a second to every
        # pass.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _form_main():
    """`python3 -m kwbench --perf-report SCRIPT`, `--do-bench SCRIPT` or
    `--tritonbench OPERATOR` [--candidate PROVIDER], with kwbench's own
    options: the script's cases, run as a bench script's."""
    options = _parser().parse_args()
    if options.tritonbench:
        # Its inputs are made on the GPU: once the pass may use it.
        return main(lambda: tritonbench_cases(options.tritonbench, options.candidate))
    if options.do_bench:
        # Its script runs its sweep, on the GPU: once the pass may.
        return main(lambda: do_bench_cases(options.do_bench, options.candidate))
    if not options.perf_report:
        _parser().error("run as a module, kwbench needs --perf-report SCRIPT, --do-bench SCRIPT or "
                        "--tritonbench OPERATOR")
    try:
        run_args = dict(item.partition("=")[::2] for item in options.run_arg)
        cases = perf_report_cases(options.perf_report, options.candidate, run_args)
    except Error as error:
        sys.stderr.write("kwbench: %s\n" % error)
        return 2
    return main(cases)


if __name__ == "__main__":
    sys.exit(_form_main())
