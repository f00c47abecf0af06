#!/usr/bin/env bash
# `scripts/kw up --detach` returns once kw-server answers and leaves it
# running; a second one says so and starts nothing; `scripts/kw down` stops
# it (and its PostgreSQL), and says so when nothing runs. KW_SERVER points
# kw up at this build's kw-server: nothing is installed or built.
#   kw_up_detach_test.sh SCRIPTS_KW KW_SERVER
set -euo pipefail
kw_script=$1 server=$2
work=$(mktemp -d /tmp/kw-up-detach.XXXXXX)
chmod 755 "$work"  # the embedded PostgreSQL runs as its own user
# A port free now (the kernel picks it), not one picked at random that another test may hold.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export KW_SERVER="$server" KW_DATA_DIR="$work/data" KW_LISTEN="127.0.0.1:$port" \
  KW_SERVER_LOG="$work/kw-server.log" KW_PID_FILE="$work/kw-server.pid"
cleanup() {
  local pid
  pid=$(cat "$KW_PID_FILE" 2>/dev/null) && kill -KILL "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

started=$SECONDS
timeout 120 bash "$kw_script" up --detach > "$work/up.out" 2>&1 || { cat "$work/up.out"; fail "kw up --detach failed"; }
grep -q "kernelwatch is up at http://127.0.0.1:$port" "$work/up.out" || { cat "$work/up.out"; fail "no summary"; }
grep -q "runs in the background (pid" "$work/up.out" || { cat "$work/up.out"; fail "no background line"; }
pid=$(cat "$KW_PID_FILE")
kill -0 "$pid" || fail "kw-server (pid $pid) is not running after kw up --detach returned"
curl -sf "http://127.0.0.1:$port/healthz" > /dev/null || fail "kw-server does not answer /healthz"
echo "kw up --detach returned in $((SECONDS - started)) s, kw-server pid $pid answers"

bash "$kw_script" up --detach > "$work/again.out" 2>&1 || { cat "$work/again.out"; fail "a second kw up --detach failed"; }
grep -q "already running (pid $pid" "$work/again.out" || { cat "$work/again.out"; fail "second up did not say"; }
[ "$(cat "$KW_PID_FILE")" = "$pid" ] || fail "a second kw up --detach replaced the pid file"

postmaster=$(head -1 "$KW_DATA_DIR/postgres/postmaster.pid" 2>/dev/null || true)
bash "$kw_script" down > "$work/down.out" 2>&1 || { cat "$work/down.out"; fail "kw down failed"; }
grep -q "kw-server stopped" "$work/down.out" || { cat "$work/down.out"; fail "kw down did not say it stopped"; }
! kill -0 "$pid" 2>/dev/null || fail "kw-server (pid $pid) still runs after kw down"
[ ! -e "$KW_PID_FILE" ] || fail "kw down left the pid file"
if [ -n "$postmaster" ]; then
  for _ in $(seq 100); do kill -0 "$postmaster" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$postmaster" 2>/dev/null || fail "the embedded PostgreSQL (pid $postmaster) outlived kw down"
fi

bash "$kw_script" down > "$work/down2.out" 2>&1 || { cat "$work/down2.out"; fail "kw down with nothing running failed"; }
grep -q "no kw-server of kw up --detach is running" "$work/down2.out" || { cat "$work/down2.out"; fail "second down"; }
echo "PASS"
