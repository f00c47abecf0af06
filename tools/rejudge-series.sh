#!/usr/bin/env bash
# On the VM: judge stored GPU series again with this tree's kw-server, one
# fresh server (and embedded PostgreSQL) per series, through post_series.py.
# What a change of the detection does to every A/A and power job measured so
# far, without a GPU.
#   tools/rejudge-series.sh OUT_DIR SERIES_DIR...
# A SERIES_DIR holds main-*.json, pr-*.json and power-*.json (a series' OUT,
# or a stored series restored from git history: tools/post_series.py says
# how). OUT_DIR/NAME/v.json gets the
# verdicts, OUT_DIR/summary.txt the pull request and power lines.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
server="${KW_SERVER:-$root/build/ci/server/kw-server}"
out=$1
shift
mkdir -p "$out" && chmod 755 "$out"
: > "$out/summary.txt"
port=$((18100 + RANDOM % 500))
for dir in "$@"; do
  port=$((port + 1))
  name=$(echo "$dir" | tr '/' '_' | sed 's/^[._]*//')
  d="$out/$name"
  rm -rf "$d" && mkdir -p "$d" && chmod 755 "$d"
  "$server" --data-dir "$d/data" --listen "127.0.0.1:$port" > "$d/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 60); do grep -q listening "$d/server.log" && break; sleep 1; done
  token=$("$server" token create --data-dir "$d/data" --scope agent --name series --project kernelwatch-series | tail -1)
  mapfile -t mains < <(ls "$dir"/main-*.json 2>/dev/null | sort -V)
  mapfile -t prs < <(ls "$dir"/pr-*.json 2>/dev/null | sort -V)
  mapfile -t powers < <(ls "$dir"/power-*.json 2>/dev/null | sort -V)
  python3 "$root/tools/post_series.py" --server "http://127.0.0.1:$port" --token "$token" \
    --json "$d/v.json" --main "${mains[@]}" --pr "${prs[@]}" --power "${powers[@]}" > "$d/out.txt" 2>&1
  { echo "== $dir"; grep -E '^(pr|power)' "$d/out.txt" | cut -c1-200; } | tee -a "$out/summary.txt"
  kill "$pid"
  wait "$pid" 2>/dev/null
  "$server" token list --data-dir "$d/data" > /dev/null 2>&1  # stops the embedded cluster
done
