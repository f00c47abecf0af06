#!/usr/bin/env python3
"""`kw up` compiles each library as a unity build (its sources included into
a few files: scripts/kw, CMakePresets.json's up preset), which fails where
two sources of one library define the same name in their anonymous
namespaces or at file scope; the ci build compiles them one by one and would
never see it. This check includes every source of a library into one file
and has the compiler check it (-fsyntax-only: no code is generated), with
the flags compile_commands.json gives that library, so a clash fails here
whatever batches the unity build makes.

  unity_build_check.py BUILD_DIR TARGET...   (e.g. kw_server_lib kw_agent_lib)
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile


def main():
    build, targets = sys.argv[1], sys.argv[2:]
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    failed = 0
    for target in targets:
        marker = "/CMakeFiles/%s.dir/" % target
        entries = [e for e in commands if marker in e.get("output", e["command"]) and e["file"].endswith(".cpp")]
        if not entries:
            print("%s: no sources in %s/compile_commands.json" % (target, build))
            failed += 1
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as unity:
            for e in entries:
                unity.write('#include "%s"\n' % e["file"])
        args = shlex.split(entries[0]["command"])
        kept, skip = [args[0]], False
        for arg in args[1:]:
            if skip:
                skip = False
            elif arg in ("-o", "-c", "-MF", "-MT", "-MQ"):
                skip = True
            elif arg != entries[0]["file"] and arg not in ("-MD", "-MMD"):
                kept.append(arg)
        # A class of a header with a member of an anonymous namespace's type is
        # what every .cpp looks like once included: the up preset turns that
        # warning off too (cmake/KwOptions.cmake).
        result = subprocess.run(kept + ["-fsyntax-only", "-Wno-subobject-linkage", unity.name],
                                cwd=entries[0]["directory"],
                                capture_output=True, text=True)
        os.unlink(unity.name)
        errors = [line for line in result.stderr.splitlines() if "error:" in line]
        if result.returncode != 0:
            failed += 1
            print("%s: its %d sources do not compile as one unity file:" % (target, len(entries)))
            for line in (errors or result.stderr.splitlines())[:20]:
                print("  " + line)
        else:
            print("%s: %d sources compile as one unity file" % (target, len(entries)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
