#!/usr/bin/env python3
"""clang_tidy.py's stored clean results, on a small CMake project built with
Ninja in a temporary folder and checked by a TEST DOUBLE of clang-tidy
(fake_tidy below: it finds a "finding" wherever a source says FINDING, and
logs what it was asked to check). What is checked again, and what is not.

  clang_tidy_test.py   (needs cmake, ninja and a C++ compiler)
"""
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
FAKE_TIDY = """#!/usr/bin/env python3
import sys
if sys.argv[1] == "--version":
    print("fake clang-tidy 1")
    sys.exit(0)
source = sys.argv[-1]
with open(sys.argv[0] + ".log", "a") as log:
    log.write(source.rsplit("/", 1)[-1] + "\\n")
for number, line in enumerate(open(source), 1):
    if "FINDING" in line:
        print("%s:%d:1: warning: a finding [fake-check]" % (source, number))
"""


class StoredCleanResults(unittest.TestCase):
    def setUp(self):
        self.tmp = pathlib.Path(tempfile.mkdtemp())
        self.tidy = self.tmp / "fake_tidy"
        self.tidy.write_text(FAKE_TIDY)
        self.tidy.chmod(self.tidy.stat().st_mode | stat.S_IEXEC)
        self.project = self.make_project(self.tmp / "checkout-a")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def make_project(self, root):
        (root / "src").mkdir(parents=True)
        (root / "tests").mkdir()
        (root / ".clang-tidy").write_text("Checks: 'fake-*'\n")
        (root / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.16)\nproject(p CXX)\n"
            "add_library(p src/a.cpp src/b.cpp)\ntarget_include_directories(p PRIVATE src)\n")
        (root / "src" / "shared.hpp").write_text("inline int shared() { return 1; }\n")
        (root / "src" / "a.cpp").write_text('#include <cstddef>\n#include "shared.hpp"\nint a() { return shared(); }\n')
        (root / "src" / "b.cpp").write_text("int b() { return 2; }\n")
        return root

    def build(self, root, *flags):
        subprocess.run(["cmake", "-S", str(root), "-B", str(root / "build"), "-G", "Ninja",
                        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", *flags], check=True, capture_output=True)
        subprocess.run(["cmake", "--build", str(root / "build")], check=True, capture_output=True)

    def check(self, root, *options):
        """clang_tidy.py's exit status and the sources fake_tidy was asked about."""
        log = pathlib.Path(str(self.tidy) + ".log")
        log.unlink(missing_ok=True)
        done = subprocess.run([sys.executable, str(HERE / "clang_tidy.py"), "--ninja", shutil.which("ninja"),
                               *options, str(self.tidy), str(root / "build"), str(root), "src"],
                              capture_output=True, text=True, check=False)
        checked = sorted(log.read_text().split()) if log.exists() else []
        return done.returncode, checked

    def test_only_sources_whose_inputs_changed_since_a_clean_result_are_checked_again(self):
        self.build(self.project)
        self.assertEqual(self.check(self.project), (0, ["a.cpp", "b.cpp"]))
        self.assertEqual(self.check(self.project), (0, []))
        (self.project / "src" / "shared.hpp").write_text("inline int shared() { return 3; }\n")
        self.build(self.project)
        self.assertEqual(self.check(self.project), (0, ["a.cpp"]), "a header reached only from a.cpp")
        self.assertEqual(self.check(self.project, "--full"), (0, ["a.cpp", "b.cpp"]))

    def test_a_source_with_a_finding_is_checked_again_until_it_is_clean(self):
        (self.project / "src" / "b.cpp").write_text("int b() { return 2; }  // FINDING\n")
        self.build(self.project)
        self.assertEqual(self.check(self.project), (1, ["a.cpp", "b.cpp"]))
        self.assertEqual(self.check(self.project), (1, ["b.cpp"]))

    def test_another_configuration_or_compile_command_checks_everything(self):
        self.build(self.project)
        self.check(self.project)
        # Another project's configuration elsewhere in the tree is not read for these.
        (self.project / "tests" / "vendored").mkdir()
        (self.project / "tests" / "vendored" / ".clang-tidy").write_text("Checks: 'other-*'\n")
        self.assertEqual(self.check(self.project), (0, []))
        (self.project / "src" / ".clang-tidy").write_text("Checks: 'fake-*,other-*'\n")
        self.assertEqual(self.check(self.project), (0, ["a.cpp", "b.cpp"]))
        self.build(self.project, "-DCMAKE_CXX_FLAGS=-DSOMETHING")
        self.assertEqual(self.check(self.project), (0, ["a.cpp", "b.cpp"]))

    def test_a_committed_export_spares_a_fresh_checkout_elsewhere(self):
        # A unity build's files name the sources by their absolute paths; a
        # checkout under /var sorts its own files after /usr's headers, one
        # under /tmp before them.
        elsewhere = pathlib.Path(tempfile.mkdtemp(dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None))
        self.addCleanup(shutil.rmtree, elsewhere)
        for flags in ([], ["-DCMAKE_UNITY_BUILD=ON"]):
            with self.subTest(flags=flags):
                first = self.make_project(self.tmp / ("a%d" % len(flags)))
                self.build(first, *flags)
                self.check(first)
                other = self.make_project(elsewhere / ("b%d" % len(flags)))
                self.build(other, *flags)
                exported = other / "tests" / "clang_tidy_clean.txt"
                code = subprocess.run([sys.executable, str(HERE / "clang_tidy.py"), "--ninja", shutil.which("ninja"),
                                       "--export", str(exported), str(self.tidy), str(first / "build"), str(first),
                                       "src"], check=False, capture_output=True).returncode
                self.assertEqual(code, 0)
                self.assertEqual(len(exported.read_text().splitlines()), 2)
                self.assertEqual(self.check(other), (0, []))

    def test_a_unity_builds_sources_are_checked_one_by_one(self):
        self.build(self.project, "-DCMAKE_UNITY_BUILD=ON")
        self.assertEqual(self.check(self.project), (0, ["a.cpp", "b.cpp"]))
        self.assertEqual(self.check(self.project), (0, []))
        (self.project / "src" / "b.cpp").write_text("int b() { return 4; }\n")
        self.build(self.project)
        # One unity file holds both: its object's inputs changed for both.
        self.assertEqual(self.check(self.project), (0, ["a.cpp", "b.cpp"]))


if __name__ == "__main__":
    if not (shutil.which("cmake") and shutil.which("ninja") and os.environ.get("CXX", shutil.which("c++"))):
        print("clang_tidy_test: needs cmake, ninja and a C++ compiler")
        sys.exit(1)
    unittest.main()
