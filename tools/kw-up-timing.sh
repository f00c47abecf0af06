#!/usr/bin/env bash
# How long a new user waits for a serving kw-server: a fresh clone of this
# repository, `./scripts/kw up`, until /healthz answers (first); then the
# same on the built tree (second). The Debian packages are taken as
# installed unless KW_UP_APT="pkg ..." names packages to remove first, so
# that kw up installs them again (the apt step timed inside the first).
#   tools/kw-up-timing.sh [OUT.json]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-/dev/stdout}"
work=$(mktemp -d /tmp/kw-up-timing.XXXXXX)
chmod 755 "$work"  # the embedded PostgreSQL runs as its own user
port=$((20000 + RANDOM % 20000))
log() { printf '[kw-up-timing %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

if [ -n "${KW_UP_APT:-}" ]; then
  log "removing $KW_UP_APT (kw up installs them again)"
  as_root=(); [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq $KW_UP_APT > "$work/apt-remove.log" 2>&1
fi

# up LOG: kw up in the clone, in its own process group; prints the seconds
# until /healthz answered.
up() {
  local started=$SECONDS
  (cd "$work/kernelwatch" && KW_LISTEN=127.0.0.1:$port exec setsid ./scripts/kw up) > "$1" 2>&1 < /dev/null &
  until curl -fsS "http://127.0.0.1:$port/healthz" > /dev/null 2>&1; do
    if [ $((SECONDS - started)) -gt 1800 ]; then
      tail -30 "$1" >&2
      log "no answer after 30 minutes"
      exit 1
    fi
    sleep 0.5
  done
  echo $((SECONDS - started))
}

down() {
  pkill -TERM -f "$work/kernelwatch/build/up/server/kw-server" || true
  while pgrep -f "$work/kernelwatch/build/up/server/kw-server" > /dev/null; do sleep 0.2; done
}

started=$SECONDS
git clone -q "$root" "$work/kernelwatch"
log "cloned in $((SECONDS - started)) s; kw up"
first_up=$(up "$work/first.log")
first=$((SECONDS - started))
log "first kw up: /healthz answered $first s after the clone began"
down
second=$(up "$work/second.log")
log "second kw up: $second s"
down
python3 - "$out" <<PY
import json, os, subprocess, sys
summary = {
    "first_s": $first, "first_up_s": $first_up, "second_s": $second,
    "apt_removed_first": "${KW_UP_APT:-}".split(),
    "cores": os.cpu_count(),
    "date": subprocess.check_output(["date", "-u", "+%Y-%m-%d"], text=True).strip(),
    "commit": subprocess.check_output(["git", "-C", "$root", "rev-parse", "HEAD"], text=True).strip(),
    "first_log_lines": sum(1 for _ in open("$work/first.log")),
}
text = json.dumps(summary, indent=2)
(open(sys.argv[1], "w") if sys.argv[1] != "/dev/stdout" else sys.stdout).write(text + "\n")
PY
rm -rf "$work"
