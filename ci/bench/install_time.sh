#!/usr/bin/env bash
# Seconds until a CI job has a working kw, measured on this machine:
#   download  the GitHub template's install step, as written (curl GET
#             /download/kw and its checksum, sha256sum, kw --version), against
#             a kw-server started here (loopback: a runner far from the server
#             adds the transfer of kw's bytes, printed)
#   source    what the templates did before: configure and build the kw
#             target from a clean checkout, dependencies already installed
# Usage: ci/bench/install_time.sh BUILD_DIR [RUNS]   (BUILD_DIR has kw-server)
# Prints one line per measurement and a Markdown table for docs/PERFORMANCE.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:?BUILD_DIR}" && pwd)"
runs="${2:-5}"
work="$(mktemp -d /tmp/kw-install-time-XXXXXX)"
chmod 755 "$work"  # the embedded PostgreSQL runs as another user when this is root
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  "$build/server/kw-server" token list --data-dir "$work/data" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$build/server/kw-server" --data-dir "$work/data" --listen "127.0.0.1:$port" --read-token-required \
  >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/server.log" && break; sleep 0.2; done
token=$("$build/server/kw-server" token create --data-dir "$work/data" --scope ci --name bench | tail -1)
python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1]));
print(next(s["run"] for s in d["jobs"]["gate"]["steps"] if "/download/kw" in s.get("run", "")))' \
  "$root/ci/github/kernelwatch.yml" >"$work/install.sh"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
time_install() {
  local times=()
  for i in $(seq "$runs"); do
    rm -rf "$work/runner"; mkdir -p "$work/runner"
    local start end
    start=$(date +%s.%N)
    env KW_SERVER="http://127.0.0.1:$port" KW_TOKEN="$token" RUNNER_TEMP="$work/runner" \
      GITHUB_PATH="$work/runner/path" bash -eo pipefail "$work/install.sh" >/dev/null
    end=$(date +%s.%N)
    times+=("$(awk "BEGIN {print $end - $start}")")
  done
  echo "  runs: ${times[*]}" >&2
  printf "%s\n" "${times[@]}" | median
}

size=$(curl -fsS -H "Authorization: Bearer $token" "http://127.0.0.1:$port/download/kw" | wc -c)
download=$(time_install)
echo "download (loopback): median of $runs: ${download} s, kw is $size bytes"

source_s=""
if [ "${KW_SKIP_SOURCE_BUILD:-0}" != 1 ]; then
  git -C "$root" archive --format=tar HEAD | (mkdir -p "$work/src" && tar -x -C "$work/src")
  start=$(date +%s.%N)
  cmake -S "$work/src" -B "$work/src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKW_BUILD_SERVER=OFF \
    -DKW_BUILD_KERNELS=OFF -DKW_BUILD_TESTS=OFF >/dev/null
  cmake --build "$work/src/build" --target kw >/dev/null
  end=$(date +%s.%N)
  source_s=$(awk "BEGIN {print $end - $start}")
  echo "build from source ($(nproc) cores, no ccache): ${source_s} s"
fi

echo
echo "| how a CI job gets kw | seconds |"
echo "|---|---:|"
echo "| (kw is $size bytes) | |"
echo "| \`GET /download/kw\` + checksum + \`kw --version\` (loopback, median of $runs) | $download |"
[ -n "$source_s" ] && echo "| configure + build the \`kw\` target from source, $(nproc) cores | $source_s |"
exit 0
