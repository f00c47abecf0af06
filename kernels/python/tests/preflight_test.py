"""kwbench.py's `--stage preflight`: load, launch_geometry, correctness and
quick_bench in one process, over standin_bench.py with the CPU stand-in
backend and the TEST DOUBLE of libkw_inject.so (kernels/inject/tests/
inject_double.cpp; KW_INJECT_DOUBLE names it, ctest sets it), since CUPTI
cannot inject without a GPU."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
BENCH = os.path.join(HERE, "standin_bench.py")
DOUBLE = os.environ.get("KW_INJECT_DOUBLE", "")


def start(tmp, *args, env=None):
    """The preflight's process, recording into tmp/records; it writes tmp/out.json."""
    records = os.path.join(tmp, "records")
    os.makedirs(records, exist_ok=True)
    full_env = dict(os.environ, CUDA_INJECTION64_PATH=DOUBLE, KW_INJECT_OUT=records,
                    KWBENCH_STANDIN_PIDS=os.path.join(tmp, "pids"), **(env or {}))
    return subprocess.Popen([sys.executable, BENCH, "--backend", "cpu-stand-in", "--stage", "preflight",
                             "--json", os.path.join(tmp, "out.json")] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)


def finish(tmp, process):
    _, err = process.communicate(timeout=120)
    with open(os.path.join(tmp, "out.json")) as f:
        document = json.load(f)
    return process.returncode, document, err


def stages(document):
    return {e["stage"]["name"]: e for e in document["preflight"]}


def record_lines(tmp):
    lines = []
    for path in glob.glob(os.path.join(tmp, "records", "*.jsonl")):
        with open(path) as f:
            lines += [json.loads(line) for line in f]
    return lines


def imports(tmp):
    """The pids that imported the bench script (standin_bench.py writes its own)."""
    with open(os.path.join(tmp, "pids")) as f:
        return [line.strip() for line in f if line.strip()]


@unittest.skipUnless(DOUBLE and os.path.exists(DOUBLE), "KW_INJECT_DOUBLE: the test double of libkw_inject.so")
class PreflightTest(unittest.TestCase):
    def test_every_stage_runs_in_one_process_and_only_launch_geometry_is_recorded(self):
        with tempfile.TemporaryDirectory() as tmp:
            code, document, err = finish(tmp, start(tmp, "--case", "saxpy/ok,saxpy/edge"))
            self.assertEqual(code, 0, err)
            self.assertEqual([e["stage"]["name"] for e in document["preflight"]],
                             ["load", "launch_geometry", "correctness", "quick_bench"])
            for entry in document["preflight"]:
                self.assertEqual(entry["stage"]["status"], "passed", entry)
                self.assertGreaterEqual(entry["stage"]["duration_ms"], 0)
            self.assertEqual(len(imports(tmp)), 1, "the script was imported once")
            self.assertIn("[kwbench] stage correctness started", err)
            by_stage = stages(document)
            self.assertEqual([c["name"] for c in by_stage["quick_bench"]["cases"]], ["saxpy/ok"],
                             "a correctness-only case is not timed")
            self.assertIn("sources", by_stage["launch_geometry"]["stage"]["details"]["code"])
            # The marks of launch_geometry, then the records paused: nothing after.
            kinds = [next(iter(line)) for line in record_lines(tmp)]
            self.assertEqual(kinds[:1], ["start"])
            marks = [line["mark"] for line in record_lines(tmp) if "mark" in line]
            self.assertEqual(marks, ["case saxpy/ok", "end", "case saxpy/edge", "end"])
            self.assertEqual(kinds.count("kernel"), 2, kinds)  # the double's one launch a case
            after = kinds[kinds.index("paused"):]
            self.assertNotIn("mark", after)
            self.assertNotIn("kernel", after)

    def test_quick_bench_waits_for_the_cases_the_agent_names(self):
        with tempfile.TemporaryDirectory() as tmp:
            go = os.path.join(tmp, "go")
            process = start(tmp, "--case", "saxpy/ok,saxpy/slow", "--quick-bench-go", go)
            out = os.path.join(tmp, "out.json")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # correctness written, then it waits
                if os.path.exists(out):
                    with open(out) as f:
                        if "correctness" in stages(json.load(f)):
                            break
                time.sleep(0.05)
            self.assertIsNone(process.poll(), "it waits for the go")
            with open(go + ".partial", "w") as f:
                json.dump({"argv": ["saxpy/ok"]}, f)
            os.rename(go + ".partial", go)
            code, document, err = finish(tmp, process)
            self.assertEqual(code, 0, err)
            self.assertEqual([c["name"] for c in stages(document)["quick_bench"]["cases"]], ["saxpy/ok"])

    def test_told_to_exit_before_quick_bench_it_ends_with_three_stages(self):
        with tempfile.TemporaryDirectory() as tmp:
            go = os.path.join(tmp, "go")
            with open(go, "w") as f:
                json.dump({"exit": True}, f)
            code, document, err = finish(tmp, start(tmp, "--case", "saxpy/ok", "--quick-bench-go", go))
            self.assertEqual(code, 0, err)
            self.assertEqual(list(stages(document)), ["load", "launch_geometry", "correctness"])

    def test_a_stage_past_its_timeout_fails_and_ends_the_preflight(self):
        with tempfile.TemporaryDirectory() as tmp:
            started = time.monotonic()
            code, document, err = finish(tmp, start(tmp, "--case", "saxpy/ok", "--stage-timeout", "correctness=0.5",
                                                    env={"KWBENCH_STANDIN_SLOW_REFERENCE": "60"}))
            self.assertLess(time.monotonic() - started, 30)
            self.assertEqual(code, 1, err)
            correctness = stages(document)["correctness"]["stage"]
            self.assertEqual(correctness["status"], "failed")
            self.assertEqual(correctness["message"], "the correctness stage's 0.5 s ran out")
            self.assertNotIn("quick_bench", stages(document))

    def test_a_broken_context_fails_its_case_and_the_preflight_goes_on_in_a_fresh_image(self):
        with tempfile.TemporaryDirectory() as tmp:
            code, document, err = finish(tmp, start(tmp, "--case", "saxpy/crash,saxpy/ok",
                                                    "--stage-timeout", "correctness=60"))
            self.assertEqual(code, 1, err)
            by_stage = stages(document)
            # launch_geometry runs the candidate: the crash case breaks the context there first.
            self.assertEqual(list(by_stage), ["load", "launch_geometry"], err)
            cases = {c["name"]: c["status"] for c in by_stage["launch_geometry"]["stage"]["details"]["cases"]}
            self.assertEqual(cases, {"saxpy/crash": "failed", "saxpy/ok": "passed"})
            self.assertIn("a fresh process continues after saxpy/crash", err)

    def test_a_failed_load_ends_the_preflight(self):
        with tempfile.TemporaryDirectory() as tmp:
            code, document, err = finish(tmp, start(tmp, "--case", "saxpy/ok", "--module", "no_such_module_kw"))
            self.assertEqual(code, 1, err)
            self.assertEqual(list(stages(document)), ["load"])
            self.assertIn("import no_such_module_kw: ModuleNotFoundError", stages(document)["load"]["stage"]["message"])


if __name__ == "__main__":
    unittest.main()
