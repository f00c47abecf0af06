#!/usr/bin/env python3
"""Fails when a public method of a kw-server service is walked by no access
test: every `Class::method` declared public in server/src/service/*_service.hpp
must be named in server/tests/service_access_test.cpp, in its walk (refused
on another project's data), in kFiltered (answers filtered to the caller's
projects) or in kNoCaller (takes no caller, with why).

usage: service_access_walk.py SOURCE_DIR
"""
import pathlib
import re
import sys

CLASS = re.compile(r"^class (\w+Service)\b[^;]*$")
METHOD = re.compile(r"^\s*(?:static\s+|virtual\s+|inline\s+)*(?:[\w:<>,]+[\s&*]+)+(\w+)\s*\(")


def public_methods(header):
    """(class, method) for each method declared public, at the class's own level."""
    found = []
    owner, public, depth = None, False, 0
    for line in header.read_text().splitlines():
        code = line.split("//")[0]
        if owner is None:
            match = CLASS.match(code)
            if match:
                owner, public, depth = match[1], False, code.count("{") - code.count("}")
            continue
        if depth == 1:
            stripped = code.strip()
            if stripped in ("public:", "private:", "protected:"):
                public = stripped == "public:"
            elif public:
                match = METHOD.match(code)
                # Constructors, their initializer lists and operators are no methods.
                initializer = stripped.startswith((":", "explicit"))
                if match and match[1] not in (owner, "operator") and not initializer:
                    found.append((owner, match[1]))
        depth += code.count("{") - code.count("}")
        if depth <= 0 and "}" in code:
            owner = None
    return found


def main():
    root = pathlib.Path(sys.argv[1])
    walk = (root / "server/tests/service_access_test.cpp").read_text()
    named = set(re.findall(r'"(\w+Service::\w+)"', walk))
    methods = [m for h in sorted((root / "server/src/service").glob("*_service.hpp")) for m in public_methods(h)]
    if len(methods) < 20:
        sys.exit(f"service_access_walk.py: read only {len(methods)} public service methods; is the parser stale?")
    missing = sorted({f"{c}::{m}" for c, m in methods} - named)
    stale = sorted(named - {f"{c}::{m}" for c, m in methods})
    for name in missing:
        print(f"{name}: a public service method no access test walks; add it to "
              "server/tests/service_access_test.cpp (its walk, kFiltered or kNoCaller)")
    for name in stale:
        print(f"{name}: named in server/tests/service_access_test.cpp, but no service declares it")
    if missing or stale:
        sys.exit(1)
    print(f"service_access_walk.py: {len(methods)} public service methods, each walked or listed")


if __name__ == "__main__":
    main()
