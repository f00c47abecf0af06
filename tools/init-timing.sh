#!/usr/bin/env bash
# On the VM: how long `kw init` takes on a repository of many Triton kernels,
# and what it made of them. Copies DIR (a checkout, e.g. a snapshot of
# FlagOpen/FlagGems fetched with the search tool's fetch) to a scratch
# folder, runs `KW init --no-configure` there, and prints the time, the
# counts it reports and the bench script's case classes (a class defined
# twice is listed).
#   tools/init-timing.sh KW DIR
set -euo pipefail
kw=$1 source_dir=$2
scratch=$(mktemp -d /tmp/kw-init-timing.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
if git -C "$source_dir" rev-parse --git-dir >/dev/null 2>&1; then
  echo "repository: $(basename "$source_dir") at $(git -C "$source_dir" rev-parse --short HEAD)"
  git -C "$source_dir" archive HEAD | tar -C "$scratch" -xf -
else
  cp -r "$source_dir/." "$scratch"
fi
echo "python files: $(find "$scratch" -name '*.py' | wc -l), @triton.jit lines: $(grep -r '@triton.jit' --include='*.py' "$scratch" | wc -l)"
start=$(date +%s.%N)
"$kw" init "$scratch" --no-configure > "$scratch/.init-output" 2>&1
end=$(date +%s.%N)
printf 'kw init: %.1f s\n' "$(echo "$end - $start" | bc)"
grep -E "Triton: [0-9]+ @triton.jit function\(s\), |left out" "$scratch/.init-output" | sed 's/^ */  /'
script="$scratch/kernelwatch_bench.py"
if [ -f "$script" ]; then
  echo "case classes: $(grep -c '(kwbench.Case)' "$script"), defined twice: $(grep '(kwbench.Case)' "$script" | sort | uniq -d | wc -l)"
  python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$script" && echo "kernelwatch_bench.py parses"
fi
