#!/usr/bin/env bash
# README's "Your first tracked repository", run as written: the block between
# its first-repository marker and the fence, with only its first line (where
# kw, kw-server and the server are) pointed at this build and a server the
# test starts. ~/my-kernels is a small Google Benchmark repository nobody
# configured, so the agent runs it on this CPU.
#   readme_first_repository_test.sh README KW KW_SERVER
set -euo pipefail
readme=$1 kw=$2 server=$3
work=$(mktemp -d /tmp/kw-readme.XXXXXX)
chmod 755 "$work"  # the embedded PostgreSQL runs as its own user
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT

block=$(awk '/<!-- first-repository/ {found = 1; next} found && /^```sh/ {inside = 1; next}
             inside && /^```/ {exit} inside {print}' "$readme")
[ -n "$block" ] || { echo "README has no first-repository block" >&2; exit 1; }
[ "$(echo "$block" | wc -l)" -le 10 ] || { echo "the walkthrough is over ten lines" >&2; exit 1; }

export HOME="$work/home"
mkdir -p "$HOME/my-kernels"
cat > "$HOME/my-kernels/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(my_kernels CXX)
find_package(benchmark REQUIRED)
add_executable(bench_sort bench/sort.cpp)
target_link_libraries(bench_sort PRIVATE benchmark::benchmark)
CMAKE
mkdir -p "$HOME/my-kernels/bench"
cat > "$HOME/my-kernels/bench/sort.cpp" <<'CPP'
#include <benchmark/benchmark.h>
#include <algorithm>
#include <random>
#include <vector>
static void BM_Sort(benchmark::State& state) {
  std::mt19937 random(7);
  std::vector<int> values(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    state.PauseTiming();
    for (int& v : values) v = static_cast<int>(random());
    state.ResumeTiming();
    std::sort(values.begin(), values.end());
  }
}
BENCHMARK(BM_Sort)->Arg(1 << 12);
BENCHMARK_MAIN();
CPP
printf 'build/\n' > "$HOME/my-kernels/.gitignore"
git -C "$HOME/my-kernels" init -q -b main
git -C "$HOME/my-kernels" -c user.name=dev -c user.email=dev@example.invalid add -A
git -C "$HOME/my-kernels" -c user.name=dev -c user.email=dev@example.invalid commit -qm "a sort benchmark"
git config --global user.name dev
git config --global user.email dev@example.invalid

# A port free now (the kernel picks it); should another test take it before
# kw-server binds it, kw-server exits and is started again on another.
listening=
for _ in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$server" --data-dir "$work/data" --listen "127.0.0.1:$port" > "$work/server.log" 2>&1 &
  server_pid=$!
  # Its first start makes the cluster (initdb): up to 4 minutes on a loaded 2-core machine.
  for _ in $(seq 480); do
    grep -q "listening" "$work/server.log" && { listening=1; break; }
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.5
  done
  [ -n "$listening" ] && break
  kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true
  grep -qi "address already in use" "$work/server.log" || break
done
[ -n "$listening" ] || { echo "kw-server did not start:" >&2; tail -20 "$work/server.log" >&2; exit 1; }

first="kw=$kw server=$server data=$work/data url=http://127.0.0.1:$port"
script=$(printf '%s\n%s\n' "$first" "$(echo "$block" | tail -n +2)")
cd "$work"
set +e
output=$(bash -c "$script" 2>&1)
status=$?
set -e
echo "$output"
[ "$status" -eq 0 ] || { echo "the walkthrough exited $status" >&2; exit 1; }
echo "$output" | grep -q "kernelwatch.json: valid: project my-kernels, 1 bench(es): sort (gbench)" ||
  { echo "validate-config did not pass the kernelwatch.json kw init wrote" >&2; exit 1; }
# The first run of the repository: nothing to compare with yet, and it says so.
echo "$output" | grep -q "kernelwatch: pass (no baseline yet) for " || { echo "no passing verdict" >&2; exit 1; }
