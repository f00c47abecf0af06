#!/usr/bin/env bash
# Here, from a `ci` build: the reliability figures of docs/PERFORMANCE.md
# ("Reliability"): valid gzip bodies refused out of 10,000 (GzipProperty),
# reports lost over 10 kill -9 rounds during uploads' completions, half of
# them PostgreSQL killed too (ServerProcessTest), the reaper's look for
# shard merges over 100,000 jobs (JobRepositoryScale), and kw-hostile-bench's
# rows (unauthenticated bodies, slow requests, a 64-shard merge).
#   tools/reliability-figures.sh [build-dir]   (default build/ci)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/ci}"
log() { printf '[reliability %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

log "gzip: 10,000 valid bodies"
KW_GZIP_PROPERTY_BODIES=10000 "$build/common/kw_http_test" --gtest_filter='GzipProperty.*' |
  grep -E 'gzip property:|OK|FAILED'
log "kill -9 during completions: 10 rounds"
KW_COMPLETION_KILL_ROUNDS=10 "$build/server/tests/kw_server_db_test" \
  --gtest_filter='ServerProcessTest.AKillDuringAnUploadsCompletionLosesNoReport' |
  grep -E '^round|reports stored once|OK \]|FAILED'
log "the reaper's merge look over 100,000 jobs"
"$build/server/tests/kw_server_db_test" \
  --gtest_filter='JobRepositoryScale.*' | grep -E 'merge_pending|OK \]|FAILED'
log "kw-hostile-bench"
"$build/server/kw-hostile-bench"
