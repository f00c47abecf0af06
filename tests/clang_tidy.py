#!/usr/bin/env python3
"""Runs clang-tidy, with the committed .clang-tidy, over the C++ sources that
the build compiles under the given folders, and fails on any finding.

usage: clang_tidy.py [--full] [--ninja NINJA] [--export FILE]
                     CLANG_TIDY BUILD_DIR SOURCE_DIR FOLDER [FOLDER ...]

BUILD_DIR holds compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS);
FOLDERs are relative to SOURCE_DIR. Each finding is printed once, as
clang-tidy gives it (file:line:column: warning: ... [check]), with its notes;
a header's finding reached from several sources is printed once.

A source whose inputs are byte for byte those of a clean result is not
checked again. Its digest covers clang-tidy's version, the .clang-tidy files
clang-tidy reads for it (in its folder and those above), the compile command
(the source and build folders written as S and B), and the content of every
file the compiler read for it (ninja's deps). Clean results are
tests/clang_tidy_clean.txt (committed: what a fresh clone needs not check)
and BUILD_DIR/clang-tidy-clean/ (this build's own). With --full, or where the
build's deps are unknown (a generator other than Ninja), every source is
checked (with deps, one found clean is stamped). --export FILE writes the
digests of the sources now known clean, for committing, and checks nothing.
"""
import argparse
import hashlib
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

FINDING = re.compile(r"^(/[^:]+):(\d+):(\d+): (warning|error): .*\[([\w.,-]+)\]$")
UNITY_INCLUDE = re.compile(r'^#include "(.+\.cpp)"$', re.MULTILINE)
COMMITTED = "tests/clang_tidy_clean.txt"


def units_of(build, folders):
    """{source: compile_commands entry} for the .cpp files under `folders`. A
    unity build's sources each get their unity file's command and output."""
    units = {}
    for entry in json.loads((build / "compile_commands.json").read_text()):
        name = entry["file"]
        if name.endswith(".cpp"):
            units[name] = entry
        elif "/Unity/unity_" in name:
            for source in UNITY_INCLUDE.findall(pathlib.Path(name).read_text()):
                units[source] = dict(entry, file=source, command=entry["command"].replace(name, source))
    return {name: entry for name, entry in units.items()
            if any(pathlib.Path(name).resolve().is_relative_to(folder) for folder in folders)}


def output_of(entry):
    """The object file an entry writes (CMake before 3.26 names it only in
    the command)."""
    if "output" in entry:
        return entry["output"]
    words = shlex.split(entry["command"])
    return words[words.index("-o") + 1] if "-o" in words else None


def ninja_deps(ninja, build):
    """{output: [input, ...]} as ninja recorded them at the last build; {}
    when they cannot be read."""
    if not ninja:
        return {}
    result = subprocess.run([ninja, "-C", str(build), "-t", "deps"], capture_output=True, text=True, check=False)
    deps, current = {}, None
    for line in result.stdout.splitlines():
        if line and not line.startswith(" "):
            output, _, state = line.partition(": ")
            # "#deps 0": ninja kept no dependencies for it (a compiler cache
            # hit can leave none); a digest without its headers would be
            # stored clean and never match a clone's, so it has none.
            current = deps.setdefault(output, []) if "(VALID)" in state and "#deps 0" not in state else None
        elif line.strip() and current is not None:
            current.append(line.strip())
    return deps


class Digests:
    def __init__(self, tidy, build, source):
        self.build, self.source = str(build.resolve()), str(source)
        self.contents = {}
        self.version = hashlib.sha256(subprocess.run([tidy, "--version"], capture_output=True, check=True).stdout)

    def portable(self, text):
        return text.replace(self.build, "B").replace(self.source, "S")

    def content(self, path):
        """A file's digest; a file the build wrote (a unity file, a configured
        header) with the two folders written as S and B."""
        if path not in self.contents:
            data = pathlib.Path(path).read_bytes()
            if path.startswith(self.build + os.sep):
                data = self.portable(data.decode(errors="surrogateescape")).encode(errors="surrogateescape")
            self.contents[path] = hashlib.sha256(data).digest()
        return self.contents[path]

    def configs(self, file):
        """The .clang-tidy files clang-tidy reads for `file`: in its folder and
        each one above it, up to the source folder."""
        folder, found = pathlib.Path(file).parent, []
        while True:
            config = folder / ".clang-tidy"
            if config.exists():
                found.append(self.portable(str(config)).encode() + self.content(str(config)))
            if folder == pathlib.Path(self.source) or folder == folder.parent:
                return found
            folder = folder.parent

    def of(self, entry, inputs):
        digest = self.version.copy()
        for config in self.configs(entry["file"]):
            digest.update(config)
        digest.update(self.portable(entry["command"]).encode())
        # In the order of their portable names: a checkout under /tmp sorts
        # its own files before /usr's, one under /work after them.
        for name in sorted((os.path.normpath(os.path.join(self.build, i)) for i in inputs), key=self.portable):
            digest.update(self.portable(name).encode() + self.content(name))
        return digest.hexdigest()


def known_clean(source, stamps):
    clean = set()
    committed = source / COMMITTED
    if committed.exists():
        clean.update(line.split()[0] for line in committed.read_text().splitlines() if line.strip())
    if stamps.is_dir():
        clean.update(path.name for path in stamps.iterdir())
    return clean


def tidy_database(build, units):
    """A compile database holding exactly `units` (a unity build's own lists
    unity files, not the sources clang-tidy reads)."""
    folder = build / "clang-tidy" / hashlib.sha256("\n".join(sorted(units)).encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / "compile_commands.json.partial"
    partial.write_text(json.dumps(list(units.values())))
    partial.replace(folder / "compile_commands.json")
    return folder


def run_tidy(tidy, database, file, source, seen, findings):
    """Checks one source: True when clean, False with a finding, None where
    clang-tidy itself failed."""
    # The GCC-only flags of a build (a unity build's -Wno-subobject-linkage)
    # are no finding of the source's.
    result = subprocess.run([tidy, "-p", str(database), "--quiet", "--extra-arg=-Wno-unknown-warning-option", file],
                            capture_output=True, text=True, check=False)
    block, found = None, False
    for line in result.stdout.splitlines():
        match = FINDING.match(line)
        if match:
            found = True
            location = os.path.normpath(match.group(1)), match.group(2), match.group(3), match.group(5)
            block = None if location in seen else []
            if block is not None:
                seen.add(location)
                findings.append(block)
                line = line.replace(match.group(1), os.path.relpath(location[0], source), 1)
        if block is not None:
            block.append(line)
    if result.returncode != 0 and not found:
        print(result.stderr[-4000:], file=sys.stderr)
        print(f"clang-tidy failed on {file} (exit {result.returncode})", file=sys.stderr)
        return None
    return not found


def main() -> int:
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--ninja")
    parser.add_argument("--export")
    parser.add_argument("tidy")
    parser.add_argument("build", type=pathlib.Path)
    parser.add_argument("source", type=lambda p: pathlib.Path(p).resolve())
    parser.add_argument("folders", nargs="+")
    options = parser.parse_args()
    build, source = options.build, options.source
    if not (build / "compile_commands.json").exists():
        print(f"{build}/compile_commands.json: missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON)",
              file=sys.stderr)
        return 64
    units = units_of(build, [source / folder for folder in options.folders])
    if not units:
        print(f"no C++ source of the build under {', '.join(options.folders)}", file=sys.stderr)
        return 64
    deps = ninja_deps(options.ninja, build)
    digests = Digests(options.tidy, build, source) if deps else None
    digest_of = {name: digests.of(entry, deps[output_of(entry)])
                 for name, entry in units.items() if digests and output_of(entry) in deps}
    stamps = build / "clang-tidy-clean"
    clean = set() if options.full else known_clean(source, stamps)
    if options.export:
        lines = [f"{digest_of[name]} {os.path.relpath(name, source)}"
                 for name in sorted(digest_of) if digest_of[name] in clean]
        pathlib.Path(options.export).write_text("".join(line + "\n" for line in lines))
        print(f"{options.export}: {len(lines)} of {len(units)} source(s) known clean")
        return 0
    files = sorted(name for name in units if digest_of.get(name) not in clean)
    database = tidy_database(build, units) if any("/Unity/" in e["command"] for e in units.values()) else build
    seen, findings = set(), []
    started = time.monotonic()
    stamps.mkdir(exist_ok=True)
    for number, file in enumerate(files, 1):
        outcome = run_tidy(options.tidy, database, file, source, seen, findings)
        if outcome is None:
            return 1
        if outcome and file in digest_of:
            (stamps / digest_of[file]).touch()
        print(f"[{number}/{len(files)}] {os.path.relpath(file, source)}", file=sys.stderr, flush=True)
    for block in findings:
        print("\n".join(block))
    print(f"clang-tidy: {len(findings)} finding(s) in {len(files)} source(s) under {', '.join(options.folders)}; "
          f"{len(units) - len(files)} more unchanged since a clean result, not checked again "
          f"({time.monotonic() - started:.0f} s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
