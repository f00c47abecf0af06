"""kwbench.py's command line and stages over standin_bench.py, with the CPU
stand-in backend (a TEST DOUBLE for CUDA): what the agent reads from a
Python bench, checked without a GPU."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import types
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
BENCH = os.path.join(HERE, "standin_bench.py")


def run(*args, env=None):
    """The bench's exit status, its JSON document and its stderr."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        full_env = dict(os.environ, **(env or {}))
        full_env.pop("CUDA_INJECTION64_PATH", None)
        done = subprocess.run([sys.executable, BENCH, "--backend", "cpu-stand-in", "--json", out] + list(args),
                              capture_output=True, text=True, env=full_env, timeout=120)
        document = None
        if os.path.exists(out):
            with open(out) as f:
                document = json.load(f)
        return done.returncode, document, done.stderr


PERF_REPORT = os.path.join(HERE, "perf_report_bench.py")


def run_perf_report(*args, env=None, form=("--perf-report", PERF_REPORT), doubles=("triton_test_double",)):
    """`python3 -m kwbench --perf-report perf_report_bench.py` (or another
    form) with the Triton test double (or those named): its exit status,
    JSON document and stderr."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        full_env = dict(os.environ, **(env or {}))
        full_env.pop("CUDA_INJECTION64_PATH", None)
        full_env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE)] + [os.path.join(HERE, d) for d in doubles])
        done = subprocess.run([sys.executable, "-m", "kwbench"] + list(form) + ["--backend",
                               "cpu-stand-in", "--json", out] + list(args),
                              capture_output=True, text=True, env=full_env, timeout=120, cwd=tmp)
        document = None
        if os.path.exists(out):
            with open(out) as f:
                document = json.load(f)
        return done.returncode, document, done.stderr


def case_results(document):
    return {c["name"]: c for c in document["stage"]["details"]["cases"]}


sys.path.insert(0, os.path.dirname(HERE))
import kwbench  # noqa: E402


class SanityText(unittest.TestCase):
    def test_speedups_keep_three_significant_digits(self):
        self.assertEqual(kwbench._speedup_text(1 / 230), "0.00435x")
        self.assertEqual(kwbench._speedup_text(1.7), "1.7x")
        self.assertEqual(kwbench._range_text(kwbench.Sanity("copy", 0.2, 5.0)), "0.2x..5x")
        self.assertEqual(kwbench._range_text(kwbench.Sanity("copy", 0.0044)), "at least 0.0044x")
        self.assertEqual(kwbench._range_text(kwbench.Sanity("copy", max_speedup=2)), "at most 2x")

    def test_an_autotuned_kernels_launch_names_no_block(self):
        self.assertEqual(kwbench.Launch("softmax_kernel*", block=None).to_json(),
                         {"kernel_pattern": "softmax_kernel*"})
        self.assertEqual(kwbench.Launch("k*", block=(128, 1, 1)).to_json()["block"], [128, 1, 1])

    def test_a_case_can_report_its_speedup_with_no_bound(self):
        sanity = kwbench.Sanity.report_only("unfused")
        self.assertFalse(sanity.bounded)
        self.assertEqual(sanity.versus, "unfused")


class AllocatedOutputs(unittest.TestCase):
    def test_a_returned_output_is_compared_without_an_output_method(self):
        bench = os.path.join(HERE, "allocating_bench.py")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out.json")
            done = subprocess.run([sys.executable, bench, "--backend", "cpu-stand-in", "--json", out,
                                   "--stage", "correctness", "--case", "*"],
                                  capture_output=True, text=True, timeout=120)
            with open(out) as f:
                results = case_results(json.load(f))
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertEqual(results["scale/ok"]["status"], "passed", results["scale/ok"])
        self.assertEqual(results["scale/wrong"]["status"], "failed")
        self.assertIn("relative L2 error", results["scale/wrong"]["message"])
        self.assertEqual(results["scale/forgets"]["status"], "failed")
        self.assertIn("return the output, or define output(state)", results["scale/forgets"]["message"])


class CodeInputs(unittest.TestCase):
    """What a python bench's fingerprint takes besides its kernels."""

    def test_the_repositorys_imported_sources_by_digest_and_the_package_versions(self):
        with tempfile.TemporaryDirectory() as root:
            source = os.path.join(root, "kw_fingerprint_probe.py")
            with open(source, "w") as f:
                f.write("SCALE = 2\n")
            sys.path.insert(0, root)
            try:
                import kw_fingerprint_probe  # noqa: F401, PLC0415
                inputs = kwbench._code_inputs(root)
            finally:
                sys.path.remove(root)
                sys.modules.pop("kw_fingerprint_probe", None)
            with open(source, "rb") as f:
                digest = kwbench._source_digest(f.read())
        self.assertEqual(inputs["sources"], {"kw_fingerprint_probe.py": digest})
        self.assertTrue(digest.startswith("ast:"))
        self.assertEqual(inputs["packages"]["python"], sys.version.split()[0])
        self.assertNotIn("torch", inputs["packages"])  # not imported here

    def test_a_comment_or_docstring_changes_no_digest_and_what_runs_does(self):
        base = (b'"""A launcher."""\nimport triton\n\n\ndef softmax(x, num_warps=4):\n'
                b'    """Row-wise softmax."""\n    BLOCK = 1024\n    return launch(x, BLOCK, num_warps=num_warps)\n')
        same = [
            base.replace(b'"""A launcher."""\n', b'"""The softmax launcher, documented again."""\n'),
            base.replace(b'    BLOCK = 1024\n', b'    # the tile: one row a program\n    BLOCK = 1024  # fits\n'),
            b"\n\n# a header comment\n" + base.replace(b'    """Row-wise softmax."""\n', b""),
        ]
        changed = [
            base.replace(b"num_warps=4", b"num_warps=8"),
            base.replace(b"BLOCK = 1024", b"BLOCK = 2048"),
            base.replace(b"def softmax", b"@triton.jit\ndef softmax"),
            base.replace(b"return launch(x, BLOCK", b"return launch(x * 1, BLOCK"),
        ]
        digest = kwbench._source_digest(base)
        for text in same:
            self.assertEqual(kwbench._source_digest(text), digest, text)
        for text in changed:
            self.assertNotEqual(kwbench._source_digest(text), digest, text)
        # What does not parse is digested by its bytes.
        self.assertEqual(len(kwbench._source_digest(b"def broken(:\n")), 64)

    def test_a_module_whose_file_is_relative_is_none_of_the_repositorys(self):
        # torch._ops and torch._classes carry __file__ "_ops.py" and
        # "_classes.py": resolved against the checkout they named files
        # that are not there, with the checkout's path in the fingerprint.
        import types  # noqa: PLC0415

        module = types.ModuleType("kw_relative_probe")
        module.__file__ = "_ops.py"
        sys.modules["kw_relative_probe"] = module
        try:
            with tempfile.TemporaryDirectory() as root:
                cwd = os.getcwd()
                os.chdir(root)
                try:
                    inputs = kwbench._code_inputs(root)
                finally:
                    os.chdir(cwd)
        finally:
            sys.modules.pop("kw_relative_probe", None)
        self.assertNotIn("_ops.py", inputs["sources"])


class ListAndLoad(unittest.TestCase):
    def test_list_names_baselines_and_timing(self):
        code, document, _ = run("--list", "--case", "saxpy/ok,saxpy/edge")
        self.assertEqual(code, 0)
        self.assertEqual(document["cases"], [
            {"name": "saxpy/ok", "params": {"n": 2000, "variant": "ok"}, "baselines": ["copy", "missing"],
             "timed": True},
            {"name": "saxpy/edge", "params": {"n": 2000, "variant": "edge"}, "baselines": ["copy", "missing"],
             "timed": False}])

    def test_load_imports_the_modules_and_names_a_missing_one(self):
        code, document, _ = run("--stage", "load")
        self.assertEqual(code, 0)
        self.assertEqual(document["stage"]["status"], "passed")
        self.assertEqual(document["stage"]["message"], "imported json")
        self.assertTrue(document["device"]["name"].startswith("CPU stand-in: "))
        code, document, _ = run("--stage", "load", "--module", "no_such_extension")
        self.assertEqual(code, 1)
        self.assertEqual(document["stage"]["status"], "failed")
        self.assertIn("import no_such_extension: ModuleNotFoundError", document["stage"]["message"])

    def test_a_bad_command_line_exits_2(self):
        code, _, err = run("--stage", "warp_speed")
        self.assertEqual(code, 2)
        self.assertIn("invalid choice", err)


class Stages(unittest.TestCase):
    def test_correctness_catches_unwritten_and_nan_outputs(self):
        code, document, _ = run("--stage", "correctness", "--case", "saxpy/ok,saxpy/unwritten,saxpy/nan")
        self.assertEqual(code, 1)
        results = case_results(document)
        self.assertEqual(results["saxpy/ok"]["status"], "passed")
        self.assertEqual(results["saxpy/unwritten"]["message"],
                         "1000 output values are NaN/Inf (unwritten outputs keep the NaN poison)")
        self.assertEqual(results["saxpy/nan"]["status"], "failed")
        parts = {c["name"]: c for c in document["cases"]}
        self.assertEqual(parts["saxpy/ok"]["correctness"]["rel_l2_err"], 0.0)
        self.assertEqual(parts["saxpy/nan"]["correctness"]["nonfinite"], 1)

    def test_a_broken_context_fails_its_case_and_a_fresh_process_runs_the_rest(self):
        code, document, err = run("--stage", "correctness", "--case", "saxpy/crash,saxpy/ok")
        self.assertEqual(code, 1)
        results = case_results(document)
        self.assertEqual(results["saxpy/crash"]["message"], "RuntimeError: illegal memory access (stand-in)")
        self.assertEqual(results["saxpy/ok"]["status"], "passed")
        self.assertIn("a fresh process continues after saxpy/crash", err)

    def test_quick_bench_holds_the_sanity_range(self):
        code, document, _ = run("--stage", "quick_bench", "--case", "saxpy/ok,saxpy/slow,saxpy/edge")
        self.assertEqual(code, 1)
        results = case_results(document)
        self.assertNotIn("saxpy/edge", results, "a correctness-only case is not timed")
        self.assertIn("x of baseline:copy, inside 0.2x..5x", results["saxpy/ok"]["message"])
        self.assertEqual(results["saxpy/ok"]["details"]["skipped_baselines"], {"baseline:missing": "not built here"})
        self.assertRegex(results["saxpy/slow"]["message"], r"^candidate runs at 0\.0\d+x of baseline:copy")

    def test_full_bench_is_one_interleaved_replicate_of_the_listed_cases(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as listing:
            listing.write("saxpy/ok\n")
        try:
            code, document, _ = run("--stage", "full_bench", "--case-list", listing.name, "--impls", "*",
                                    "--order-seed", "3", "--min-samples", "12", "--max-samples", "12",
                                    "--max-seconds", "5")
        finally:
            os.unlink(listing.name)
        self.assertEqual(code, 0)
        (part,) = document["cases"]
        impls = [m["impl"] for m in part["measurements"]]
        self.assertEqual(impls, ["candidate", "baseline:copy"])
        for m in part["measurements"]:
            self.assertEqual(len(m["samples_ns"]), 12)
            self.assertGreater(m["median_ns"], 0)
        details = case_results(document)["saxpy/ok"]["details"]
        self.assertEqual(details["backend"], "cpu-stand-in")
        self.assertGreater(details["warmup_seconds"], 0)

    def test_a_prepared_process_runs_the_pass_its_go_file_names_or_exits(self):
        # With --context-before-go the backend is made before the wait: the
        # pass after the go is the same.
        for early in ([], ["--context-before-go"]):
            with self.subTest(early=early), tempfile.TemporaryDirectory() as tmp:
                self._prepared_process(tmp, early)

    def _prepared_process(self, tmp, early):
        out, go = os.path.join(tmp, "out.json"), os.path.join(tmp, "go")
        argv = [sys.executable, BENCH, "--backend", "cpu-stand-in", "--stage", "full_bench", "--go-file", go] + early
        waiting = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            with self.assertRaises(subprocess.TimeoutExpired):
                waiting.wait(timeout=0.5)  # nothing happens before the go
            with open(go + ".partial", "w") as f:
                json.dump({"argv": ["--json", out, "--case", "saxpy/ok", "--impls", "candidate",
                                    "--min-samples", "5", "--max-samples", "5"]}, f)
            os.rename(go + ".partial", go)
            self.assertEqual(waiting.wait(timeout=60), 0, waiting.stderr.read())
        finally:
            waiting.kill()
        with open(out) as f:
            document = json.load(f)
        (part,) = document["cases"]
        self.assertEqual([m["impl"] for m in part["measurements"]], ["candidate"])
        self.assertFalse(os.path.exists(go), "the go file is consumed")

        idle = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with open(go, "w") as f:
            json.dump({"exit": True}, f)
        self.assertEqual(idle.wait(timeout=60), 0)

    def test_full_bench_times_only_the_implementations_asked_for(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as listing:
            listing.write("saxpy/ok\n")
        try:
            _, document, _ = run("--stage", "full_bench", "--case-list", listing.name, "--impls", "baseline:*",
                                 "--max-samples", "10")
        finally:
            os.unlink(listing.name)
        self.assertEqual([m["impl"] for m in document["cases"][0]["measurements"]], ["baseline:copy"])

    def test_launch_geometry_needs_the_injection_library(self):
        code, document, _ = run("--stage", "launch_geometry", "--case", "saxpy/ok")
        self.assertEqual(code, 1)
        self.assertEqual(document["stage"]["status"], "failed")
        self.assertIn("launch_geometry needs libkw_inject.so in the process", document["stage"]["message"])

    def test_an_unknown_case_in_a_case_list_is_named(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as listing:
            listing.write("saxpy/none\n")
        try:
            code, _, err = run("--stage", "full_bench", "--case-list", listing.name)
        finally:
            os.unlink(listing.name)
        self.assertNotEqual(code, 0)
        self.assertIn("no case named 'saxpy/none'", err)


class PerfReportForm(unittest.TestCase):
    """A triton.testing.perf_report script run as it is: each x value a case,
    the Triton provider the candidate, the others baselines."""

    def test_each_x_value_is_a_case_with_the_other_providers_as_baselines(self):
        code, document, err = run_perf_report("--list")
        self.assertEqual(code, 0, err)
        self.assertEqual(document["cases"], [
            {"name": "saxpy-performance/N=1000", "params": {"N": 1000, "scale": 1.5},
             "baselines": ["listcomp", "vendor"], "timed": True},
            {"name": "saxpy-performance/N=4000", "params": {"N": 4000, "scale": 1.5},
             "baselines": ["listcomp", "vendor"], "timed": True}])
        # The script's own `benchmark.run(print_data=True)` did not run.
        self.assertNotIn("saxpy-performance 1000", err)

    def test_the_candidate_is_held_to_a_baseline_providers_output(self):
        code, document, err = run_perf_report("--stage", "correctness")
        self.assertEqual(code, 0, err)
        code, document, _ = run_perf_report("--stage", "correctness", env={"SAXPY_WRONG": "1"})
        self.assertEqual(code, 1)
        results = case_results(document)
        self.assertIn("relative L2 error 0.00225 against listcomp exceeds the tolerance 1e-09",
                      results["saxpy-performance/N=1000"]["message"])
        # A launcher's tuple: every output held to the baseline's.
        code, document, err = run_perf_report("--stage", "correctness", env={"SAXPY_TUPLE": "1"})
        self.assertEqual(code, 0, err)

    def test_the_callables_are_timed_and_a_provider_this_host_lacks_is_skipped(self):
        code, document, err = run_perf_report("--stage", "full_bench", "--case", "saxpy-performance/N=1000",
                                              "--min-samples", "5", "--max-samples", "5")
        self.assertEqual(code, 0, err)
        case = document["cases"][0]
        self.assertEqual([m["impl"] for m in case["measurements"]], ["candidate", "baseline:listcomp"])
        self.assertEqual(len(case["measurements"][0]["samples_ns"]), 5)
        skipped = case_results(document)["saxpy-performance/N=1000"]["details"]["skipped_baselines"]
        self.assertIn("ImportError: the vendor library is not installed here", skipped["baseline:vendor"])

    def test_configs_sharing_a_plot_name_are_told_apart_by_their_args(self):
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "rms_bench.py")
            with open(script, "w") as out:
                out.write(
                    "import triton\n"
                    "def config(dtype):\n"
                    "    return triton.testing.Benchmark(x_names=['N'], x_vals=[512], line_arg='backend',\n"
                    "        line_vals=['torch', 'mykernels'], line_names=['Torch', 'Ours'], plot_name='rms',\n"
                    "        args={'dtype': dtype, 'M': 4096})\n"
                    "@triton.testing.perf_report([config(d) for d in ('float16', 'bfloat16')])\n"
                    "def bench(N, backend, dtype, M):\n"
                    "    return triton.testing.do_bench(lambda: [1.0] * N)\n")
            code, document, err = run_perf_report("--list", form=("--perf-report", script))
        self.assertEqual(code, 0, err)
        # The repository's own provider is the candidate where none says triton.
        self.assertEqual([(c["name"], c["baselines"]) for c in document["cases"]],
                         [("rms/dtype=float16/N=512", ["torch"]), ("rms/dtype=bfloat16/N=512", ["torch"])])

    def test_a_parameter_only_run_gives_comes_from_run_args_or_is_named(self):
        # kakaobrain/trident's layout: perf_report behind a wrapper in a
        # sibling module, and a dtype that only its runner's .run() passes.
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "util.py"), "w") as out:
                out.write("import triton\n"
                          "def report(title, x_names, x_vals, args):\n"
                          "    return triton.testing.perf_report([triton.testing.Benchmark(x_names, x_vals,\n"
                          "        'backend', ['torch', 'trident'], ['torch', 'trident'], title, args)])\n")
            script = os.path.join(tmp, "benchmark_scale.py")
            with open(script, "w") as out:
                out.write("import triton\nimport util\n"
                          "@util.report('scale forward', ['x_size'], [64, 128], {'y_size': 2})\n"
                          "def bench_scale(y_size, x_size, dtype, backend):\n"
                          "    factor = 2.0 if backend == 'torch' else dtype\n"
                          "    return triton.testing.do_bench(lambda: [factor] * (x_size * y_size))\n"
                          "def run_benchmark(dtype):\n"
                          "    bench_scale.run(print_data=True, dtype=dtype)\n")
            code, _, err = run_perf_report("--list", form=("--perf-report", script))
            self.assertEqual(code, 2)
            self.assertIn("bench_scale(y_size, x_size, dtype, backend): nothing gives dtype", err)
            self.assertIn('"run_args": {"dtype": "torch.float16"}', err)
            code, document, err = run_perf_report("--stage", "correctness", "--run-arg", "dtype=1.0 + 1.0",
                                                  form=("--perf-report", script))
            self.assertEqual(code, 0, err)
            self.assertEqual(document["stage"]["status"], "passed", document["stage"]["message"])
            self.assertEqual(sorted(case_results(document)), ["scale_forward/x_size=128", "scale_forward/x_size=64"])
            code, document, _ = run_perf_report("--stage", "correctness", "--run-arg", "dtype=3.0",
                                                form=("--perf-report", script))
            self.assertEqual(document["stage"]["status"], "failed")
            code, _, err = run_perf_report("--list", "--run-arg", "dtype=torch.nope", form=("--perf-report", script))
            self.assertEqual(code, 2)
            self.assertIn("run_args dtype = 'torch.nope': NameError", err)

    def test_each_provider_gets_the_same_random_inputs(self):
        # The tutorials make their inputs with torch.randn inside the
        # benchmark function: once per provider.
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "random_bench.py")
            with open(script, "w") as out:
                out.write("import random\nimport triton\n"
                          "@triton.testing.perf_report(triton.testing.Benchmark(x_names=['N'], x_vals=[256],\n"
                          "    line_arg='provider', line_vals=['triton', 'torch'], line_names=['T', 'P'],\n"
                          "    plot_name='double', args={}))\n"
                          "def bench(N, provider):\n"
                          "    x = [random.random() for _ in range(N)]\n"
                          "    return triton.testing.do_bench(lambda: [2.0 * v for v in x])\n")
            code, document, err = run_perf_report("--stage", "correctness", form=("--perf-report", script))
        self.assertEqual(code, 0, err)
        self.assertEqual(document["stage"]["status"], "passed", document["stage"]["message"])

    def test_the_default_candidate_is_the_provider_that_names_no_reference(self):
        self.assertEqual(kwbench._choose_candidate(["torch", "trident"]), "trident")
        self.assertEqual(kwbench._choose_candidate(["naive_softmax", "triton_softmax"]), "triton_softmax")
        self.assertEqual(kwbench._choose_candidate(["torch_compile", "cublas", "liger"]), "liger")
        self.assertEqual(kwbench._choose_candidate(["torch", "pytorch"]), "torch")

    def test_a_provider_the_benchmark_lacks_is_named(self):
        code, _, err = run_perf_report("--list", "--candidate", "cuda")
        self.assertEqual(code, 2)
        self.assertIn("saxpy-performance: no provider cuda (its provider: triton, listcomp, vendor)", err)


class DoBenchForm(unittest.TestCase):
    """A script that calls do_bench in loops over shapes and providers, run as
    it is: a case per shape, the providers its implementations."""

    FORM = ("--do-bench", os.path.join(HERE, "do_bench_bench.py"))

    def test_a_case_per_shape_named_by_the_function_and_what_varies(self):
        code, document, err = run_perf_report("--list", form=self.FORM)
        self.assertEqual(code, 0, err)
        self.assertEqual([(c["name"], c["baselines"]) for c in document["cases"]],
                         [("do_bench_bench/main/n=1000", ["listcomp"]), ("do_bench_bench/main/n=4000", ["listcomp"])])
        self.assertIn("n=1000 triton: 1.000 ms", err)  # the script's own output, kept off the document

    def test_each_shape_is_timed_on_its_own_inputs_and_checked_against_the_baseline(self):
        code, document, err = run_perf_report("--stage", "full_bench", "--min-samples", "5", "--max-samples", "5",
                                              form=self.FORM)
        self.assertEqual(code, 0, err)
        fastest = {c["name"]: min(c["measurements"][0]["samples_ns"]) for c in document["cases"]}
        self.assertGreater(fastest["do_bench_bench/main/n=4000"], 2 * fastest["do_bench_bench/main/n=1000"])
        code, document, _ = run_perf_report("--stage", "correctness", form=self.FORM, env={"SAXPY_WRONG": "1"})
        self.assertEqual(code, 1)
        self.assertIn("against listcomp exceeds", case_results(document)["do_bench_bench/main/n=1000"]["message"])

    def test_without_a_provider_variable_each_line_is_an_implementation(self):
        code, document, err = run_perf_report("--list", form=self.FORM, env={"DO_BENCH_LINES": "1"})
        self.assertEqual(code, 0, err)
        # Each named by what its callable calls; the candidate the one that says triton.
        self.assertEqual([(c["name"], c["baselines"]) for c in document["cases"]],
                         [("do_bench_bench/main/n=1000", ["saxpy_listcomp"]),
                          ("do_bench_bench/main/n=4000", ["saxpy_listcomp"])])

    def test_the_stand_in_answers_in_the_shape_of_tritons_signatures(self):
        capture = kwbench._Capture
        self.assertEqual(capture.do_bench(lambda: 0), 1.0)
        self.assertEqual(capture.do_bench(lambda: 0, 25, 100, None, [0.5, 0.2, 0.8]), [1.0, 1.0, 1.0])
        self.assertEqual(capture.do_bench_cudagraph(lambda: 0, 20, None, [0.5, 0.1]), [1.0, 1.0])
        self.assertEqual(capture.do_bench(lambda: 0, return_mode="all"), [1.0])

    def test_a_script_without_do_bench_is_named(self):
        code, _, err = run_perf_report("--list", form=("--do-bench", os.path.join(HERE, "standin_bench.py")))
        self.assertEqual(code, 2)
        self.assertIn("calls no triton.testing.do_bench and times no torch.utils.benchmark.Timer", err)

    def test_a_timer_script_is_a_case_per_shape_its_descriptions_the_implementations(self):
        """torch.utils.benchmark.Timer statements (timer_bench.py, over the
        TEST DOUBLE of torch.utils.benchmark), no Triton installed: the
        description is the provider, and the locals set from it (its name,
        its statement) and the sub_label spelling n name nothing more."""
        timer = ("--do-bench", os.path.join(HERE, "timer_bench.py"))
        code, document, err = run_perf_report("--list", form=timer, doubles=("torch_test_double",))
        self.assertEqual(code, 0, err)
        self.assertEqual([(c["name"], c["params"], c["baselines"]) for c in document["cases"]],
                         [("timer_bench/module/n=1000", {"n": 1000}, ["listcomp"]),
                          ("timer_bench/module/n=4000", {"n": 4000}, ["listcomp"])])
        code, document, err = run_perf_report("--stage", "full_bench", "--min-samples", "5", "--max-samples", "5",
                                              form=timer, doubles=("torch_test_double",))
        self.assertEqual(code, 0, err)
        fastest = {c["name"]: min(c["measurements"][0]["samples_ns"]) for c in document["cases"]}
        self.assertGreater(fastest["timer_bench/module/n=4000"], 2 * fastest["timer_bench/module/n=1000"])
        code, document, _ = run_perf_report("--stage", "correctness", form=timer, doubles=("torch_test_double",),
                                            env={"SAXPY_WRONG": "1"})
        self.assertEqual(code, 1)
        self.assertIn("against listcomp exceeds", case_results(document)["timer_bench/module/n=1000"]["message"])


class TritonBenchForm(unittest.TestCase):
    """An operator in TritonBench's layout run as it is: a case per input,
    its registered benchmarks the implementations (tests/tritonbench_layout,
    whose tritonbench.utils is a TEST DOUBLE of TritonBench's)."""

    OPERATOR = os.path.join(HERE, "tritonbench_layout", "tritonbench", "operators", "saxpy", "operator.py")
    FORM = ("--tritonbench", OPERATOR)

    def test_a_case_per_input_named_by_its_x_value_the_registered_baseline_first(self):
        code, document, err = run_perf_report("--list", form=self.FORM)
        self.assertEqual(code, 0, err)
        self.assertEqual([(c["name"], c["params"], c["baselines"]) for c in document["cases"]],
                         [("saxpy/size=1000", {"size": 1000}, ["listcomp_saxpy"]),
                          ("saxpy/size=4000", {"size": 4000}, ["listcomp_saxpy"])])
        # A tuple x value under a label like TritonBench's "(M, N)".
        code, tuple_x, err = run_perf_report("--list", form=self.FORM, env={"SAXPY_TUPLE_X": "1"})
        self.assertEqual(code, 0, err)
        self.assertEqual([(c["name"], c["params"]) for c in tuple_x["cases"]],
                         [("saxpy/N_repeat=1000x1", {"N_repeat": "1000x1"}),
                          ("saxpy/N_repeat=4000x1", {"N_repeat": "4000x1"})])
        # The operator's package directory names it as well as its operator.py.
        code, same, err = run_perf_report("--list", form=("--tritonbench", os.path.dirname(self.OPERATOR)))
        self.assertEqual((code, same), (0, document), err)

    def test_each_input_is_timed_and_a_slower_candidate_measures_slower(self):
        code, document, err = run_perf_report("--stage", "full_bench", "--min-samples", "5", "--max-samples", "5",
                                              form=self.FORM, env={"KWBENCH_STANDIN_SLOWDOWN": "3"})
        self.assertEqual(code, 0, err)
        fastest = {(c["name"], m["impl"]): min(m["samples_ns"]) for c in document["cases"] for m in c["measurements"]}
        self.assertGreater(fastest[("saxpy/size=4000", "candidate")], 2 * fastest[("saxpy/size=1000", "candidate")])
        self.assertGreater(fastest[("saxpy/size=4000", "candidate")],
                           2 * fastest[("saxpy/size=4000", "baseline:listcomp_saxpy")])

    def test_correctness_holds_the_candidate_to_the_registered_baseline(self):
        code, document, err = run_perf_report("--stage", "correctness", form=self.FORM)
        self.assertEqual(code, 0, err)
        code, document, _ = run_perf_report("--stage", "correctness", form=self.FORM, env={"SAXPY_WRONG": "1"})
        self.assertEqual(code, 1)
        self.assertIn("against listcomp_saxpy exceeds", case_results(document)["saxpy/size=1000"]["message"])

    def test_the_operators_own_accuracy_check_decides_where_it_has_one(self):
        env = {"SAXPY_WRONG": "1", "SAXPY_OWN_ACCURACY": "1"}
        code, document, err = run_perf_report("--stage", "correctness", form=self.FORM, env=env)
        self.assertEqual(code, 0, err)
        message = case_results(document)["saxpy/size=1000"]["message"]
        self.assertIn("the operator's accuracy() passes triton_saxpy against listcomp_saxpy", message)
        self.assertIn("exceeds the tolerance", message)  # kwbench's own comparison, said beside it

    def test_the_candidate_is_chosen_by_name_and_an_unknown_one_is_named(self):
        code, document, err = run_perf_report("--list", "--candidate", "listcomp", form=self.FORM)
        self.assertEqual(code, 0, err)
        self.assertEqual(document["cases"][0]["baselines"], ["triton_saxpy"])
        code, _, err = run_perf_report("--list", "--candidate", "cuda", form=self.FORM)
        self.assertEqual(code, 2)
        self.assertIn("operator saxpy: no benchmark cuda (registered: listcomp_saxpy, triton_saxpy)", err)

    def test_a_file_outside_the_layout_is_named(self):
        code, _, err = run_perf_report("--list", form=("--tritonbench", os.path.join(HERE, "do_bench_bench.py")))
        self.assertEqual(code, 2)
        self.assertIn("is not in TritonBench's layout (tritonbench/operators/<op>/operator.py)", err)


class HeadStart(unittest.TestCase):
    """The spin kernel at the head of each timed batch, against a TEST
    DOUBLE of torch.cuda (its _sleep and events record what they are
    asked): the GPU must find a batch queued whole."""

    class FakeTorch:
        def __init__(self):
            self.spins = []
            self.cuda = types.SimpleNamespace(Event=self.Event, _sleep=self.spins.append)

        class Event:
            def __init__(self, enable_timing):
                pass

            def record(self):
                pass

            def elapsed_time(self, other):
                return 0.001

    def test_each_batch_waits_as_long_as_the_host_took_to_queue_the_last_one(self):
        torch = self.FakeTorch()
        timer = kwbench._EventTimer(torch)
        for batch in range(3):
            timer.begin_batch(4)
            for _ in range(4):
                timer.time(lambda: time.sleep(0.002))
            self.assertEqual(len(timer.elapsed_ns()), 4)
        first, second, third = torch.spins
        cycles = kwbench.SPIN_CYCLES_PER_SECOND * kwbench.HEAD_START_MARGIN * 4
        self.assertEqual(first, int(cycles * kwbench.FIRST_SAMPLE_HOST_SECONDS))
        # 4 samples of at least 2 ms each: at least 12 ms of head start.
        self.assertGreaterEqual(second, cycles * 0.002)
        self.assertLessEqual(third, kwbench.HEAD_START_MAX_SECONDS * kwbench.SPIN_CYCLES_PER_SECOND)

    def test_a_long_batch_waits_no_longer_than_the_cap(self):
        torch = self.FakeTorch()
        timer = kwbench._EventTimer(torch)
        timer.begin_batch(1)
        timer.time(lambda: time.sleep(0.05))
        timer.begin_batch(100)
        self.assertEqual(torch.spins[-1], int(kwbench.HEAD_START_MAX_SECONDS * kwbench.SPIN_CYCLES_PER_SECOND))

    def test_a_torch_without_a_spin_kernel_times_as_before(self):
        torch = self.FakeTorch()
        del torch.cuda._sleep
        timer = kwbench._EventTimer(torch)
        timer.begin_batch(4)
        timer.time(lambda: None)
        self.assertEqual(timer.elapsed_ns(), [1000.0])


class TritonBeforeTheGo(unittest.TestCase):
    """What a prepared replicate does for Triton before its go, against a
    TEST DOUBLE of the triton package (sys.modules entries: there is no
    Triton on the CI machine)."""

    def setUp(self):
        self.keys = []
        self.saved = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "triton"}
        for name in self.saved:
            del sys.modules[name]

    def tearDown(self):
        for name in [n for n in sys.modules if n.split(".")[0] == "triton"]:
            del sys.modules[name]
        sys.modules.update(self.saved)

    def install_triton(self, triton_key):
        for name in ("triton", "triton.runtime", "triton.runtime.cache", "triton.experimental",
                     "triton.experimental.gluon"):
            sys.modules[name] = types.ModuleType(name)
        sys.modules["triton.runtime.cache"].triton_key = triton_key
        del sys.modules["triton.experimental.gluon"]  # imported only by the warm step
        sys.modules["triton.experimental"].__path__ = []

    def test_the_cache_key_of_triton_itself_is_computed_once_before_the_go(self):
        self.install_triton(lambda: self.keys.append("hashed"))
        gluon = types.ModuleType("triton.experimental.gluon")
        finder = _OneModuleFinder(gluon)
        sys.meta_path.insert(0, finder)
        try:
            kwbench._warm_triton()
        finally:
            sys.meta_path.remove(finder)
        self.assertEqual(self.keys, ["hashed"])
        self.assertIs(sys.modules.get("triton.experimental.gluon"), gluon)

    def test_a_triton_whose_warm_step_fails_leaves_the_pass_to_compile_as_before(self):
        def broken():
            raise RuntimeError("no libtriton.so")
        self.install_triton(broken)
        kwbench._warm_triton()  # raises nothing; gluon is not there either

    def test_a_bench_without_triton_imports_none(self):
        kwbench._warm_triton()
        self.assertNotIn("triton", sys.modules)


class _OneModuleFinder:
    """Imports one stand-in module by its name."""

    def __init__(self, module):
        self.module = module

    def find_spec(self, name, path=None, target=None):
        if name != self.module.__name__:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


class StageJsonSchema(unittest.TestCase):
    """Every document kwbench.py writes, passing or failing, is what
    kernels/stage.schema.json says the C++ kwbench writes too (the GPU test
    holds the C++ side to the same file)."""

    @classmethod
    def setUpClass(cls):
        root = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
        sys.path.insert(0, os.path.join(root, "tests", "support"))
        import json_schema  # noqa: E402
        cls.validate = staticmethod(json_schema.validate)
        with open(os.path.join(root, "kernels", "stage.schema.json")) as f:
            cls.schema = json.load(f)

    def assert_valid(self, document, what):
        self.assertIsNotNone(document, what + ": no JSON written")
        self.assertEqual(self.validate(self.schema, document), [], what)

    def test_the_case_list(self):
        _, document, _ = run("--list")
        self.assert_valid(document, "--list")

    def test_every_stage(self):
        for stage in ("load", "launch_geometry", "correctness", "quick_bench", "full_bench"):
            _, document, _ = run("--stage", stage, "--max-seconds", "0.2")
            self.assert_valid(document, stage)
            self.assertEqual(document["stage"]["name"], stage)

    def test_a_document_off_the_schema_is_named(self):
        _, document, _ = run("--stage", "full_bench", "--case", "saxpy/ok", "--max-seconds", "0.2")
        document["cases"][0]["measurements"][0]["samples_ns"][0] = -1.0
        document["stage"]["status"] = "ok"
        problems = " ".join(self.validate(self.schema, document))
        self.assertIn("$.cases[0].measurements[0].samples_ns[0]: -1.0 must be above 0", problems)
        self.assertIn('$.stage.status: "ok" is not one of', problems)


if __name__ == "__main__":
    unittest.main()
