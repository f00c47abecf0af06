#!/usr/bin/env bash
# On the VM: what one source costs to compile, and how much of that its
# #include lines alone cost (tests/README.md, "Where CI's time goes").
# Takes the source's compile command from BUILD's compile_commands.json (a
# unity build's sources get their unity file's), without ccache.
#   tools/header-cost.sh BUILD SOURCE
set -euo pipefail
build=$(cd "${1:?BUILD}" && pwd)
source=$(realpath "${2:?SOURCE}")
command=$(python3 - "$build" "$source" <<'PY'
import json, pathlib, sys
build, source = sys.argv[1], sys.argv[2]
for entry in json.loads((pathlib.Path(build) / "compile_commands.json").read_text()):
    name = entry["file"]
    if name == source or ("/Unity/" in name and f'#include "{source}"' in pathlib.Path(name).read_text()):
        print(entry["command"].replace(name, "@SOURCE@"))
        break
PY
)
[ -n "$command" ] || { echo "no compile command for $source in $build" >&2; exit 1; }
command=${command#*ccache }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grep '^#include' "$source" | sed "s|^#include \"\([^/]\)|#include \"$(dirname "$source")/\1|" > "$work/includes.cpp"
measure() {  # LABEL FILE
  local line=${command//@SOURCE@/$2}
  line=$(sed -e "s| -o [^ ]*| -o $work/out.o|" -e 's| -MD -MT [^ ]* -MF [^ ]*||' <<< "$line")
  (cd "$build" && /usr/bin/time -f "$1: %e s wall, %U s user" bash -c "$line")
}
measure "whole source" "$source"
measure "its #include lines alone" "$work/includes.cpp"
