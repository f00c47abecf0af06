#!/usr/bin/env bash
# On the VM: CI's time on a fresh clone, as tests/README.md's table has it.
# Clones COMMIT (default HEAD) of this repository, moves ccache's cache aside
# (restored afterwards) and runs `bash .ci/run` there, each output line
# stamped; prints the phases from `kw test`'s own lines. Compare commits in
# the same hour: the VM's speed varies by machine.
#   tools/ci-timing.sh [COMMIT] [OUT_LOG]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
commit=${1:-HEAD}
log=${2:-/tmp/kw-ci-timing-$(git -C "$root" rev-parse --short "$commit").log}
clone=$(mktemp -d /tmp/kw-ci-clone.XXXXXX)
# mktemp makes it 0700: as root, the test clusters' user (postgres) must reach
# the build folder below it, as in any checkout.
chmod 755 "$clone"
cache="${CCACHE_DIR:-$HOME/.cache/ccache}"
aside="$cache.ci-timing-aside"
[ -e "$cache" ] && mv "$cache" "$aside"
restore() {
  # What the phases are made of: ninja's steps and ctest's per-test times.
  cp "$clone/build/ci/.ninja_log" "$log.ninja_log" 2>/dev/null || true
  rm -rf "$cache" "$clone"
  [ -e "$aside" ] && mv "$aside" "$cache"
  return 0
}
trap restore EXIT
git clone -q "$root" "$clone"
git -C "$clone" checkout -q "$commit"
start=$(date +%s)
set +e
(cd "$clone" && bash .ci/run 2>&1) | while IFS= read -r line; do printf '%s %s\n' "$(date +%s)" "$line"; done > "$log"
status=${PIPESTATUS[0]}
set -e
end=$(date +%s)
at() { grep -m1 "\[kw\].*$1" "$log" | cut -d' ' -f1; }
build=$(at "building") tests=$(at "running tests")
echo "commit $(git -C "$root" rev-parse --short "$commit"): exit $status"
echo "  packages, npm ci, configure: $((build - start)) s"
echo "  build: $((tests - build)) s"
echo "  tests: $((end - tests)) s ($(grep -o 'out of [0-9]*' "$log" | tail -1))"
echo "  whole run: $((end - start)) s (log: $log)"
exit "$status"
