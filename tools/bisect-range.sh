#!/usr/bin/env bash
# On the GPU machine: the bisect on real hardware. A scratch
# history of this tree: commit 0, then 16 commits that each change a line of
# a file, the 9th also injecting a 10% slowdown into the head-dim-128
# S=4096 attention cases (kernels/attention/bench/injected_slowdown.hpp).
# Commit dates are fixed, so a second call makes the same SHAs. `kw run`
# measures what a bisect of the push 0..16 asks for, assuming a binary
# search: main runs of 0 and 16, then 8 against 0, 12 against 8, 10 against
# 8 and 9 against 8, each A/B. tools/replay_bisect.py then plays them
# to a kw-server on the VM as its agent: kw-server's bisect asks for the
# steps, and a step it asks for that was not measured stops the replay.
#   BISECT_STEPS="main:0 main:16 step:8:0 step:12:8 step:10:8 step:9:8" tools/bisect-range.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=bisect
source "$root/tools/gpu-scratch.sh"
out="${OUT:-$root/gpu-results}"
work="${BISECT_WORK:-/tmp/kw-bisect}"
steps="${BISECT_STEPS:-main:0 main:16 step:8:0 step:12:8 step:10:8 step:9:8}"
cases="attention/*/d128/*s4096*"
injected="attention/*/d128/*s4096*=0.10"
mkdir -p "$out/bisect" "$work"
export GIT_AUTHOR_DATE="2026-11-24T12:00:00Z" GIT_COMMITTER_DATE="2026-11-24T12:00:00Z"
kw=$(kw_binary "$out/bisect") || exit 1

if [ ! -d "$work/r/.git" ]; then
  attention_tree "$work/r" "$cases"
  (cd "$work/r" && git_ init -q -b main && git_ add -A && git_ commit -qm "commit 0" &&
    for i in $(seq 1 16); do
      echo "line $i" >> bisect-range.txt
      if [ "$i" = 9 ]; then
        sed -i "s|kInjectedSlowdown = \"\"|kInjectedSlowdown = \"$injected\"|" kernels/attention/bench/injected_slowdown.hpp
        grep -qF "$injected" kernels/attention/bench/injected_slowdown.hpp || exit 1
      fi
      git_ add -A && git_ commit -qm "commit $i" || exit 1
    done) || { log "the history was not made"; exit 1; }
fi
git -C "$work/r" rev-list --reverse main > "$out/bisect/commits.txt"
commit() { sed -n "$(($1 + 1))p" "$out/bisect/commits.txt"; }
log "commit 0 $(commit 0), commit 9 $(commit 9), commit 16 $(commit 16)"

for item in $steps; do
  IFS=: read -r kind at base <<< "$item"
  name="$kind-$at${base:+-$base}"
  [ -f "$out/bisect/$name.json" ] && continue
  if [ -n "${BISECT_DEADLINE:-}" ] && [ "$(date +%s)" -ge "$BISECT_DEADLINE" ]; then
    log "deadline reached: $name and later not started"
    break
  fi
  extra=()
  [ -n "$base" ] && extra=(--base "$(commit "$base")")
  git -C "$work/r" checkout -q "$(commit "$at")"
  started=$SECONDS
  "$kw" run --repo "$work/r" --stages full_bench --cache-dir "$work/built" --name bisect --branch "$kind" \
    "${extra[@]}" --out "$out/bisect/$name.json" > "$out/bisect/$name.log" 2>&1
  log "$name: exit $? in $((SECONDS - started)) s; $(grep -E 'stage (build|full_bench) (passed|failed)' "$out/bisect/$name.log" | sed 's/.*stage //' | cut -c1-120 | tr '\n' ' ')"
  tar -C "$out" -czf "$out/bisect-range.tar.gz" bisect
done
git -C "$work/r" checkout -q main
tar -C "$out" -czf "$out/bisect-range.tar.gz" bisect && rm -rf "$out/bisect"
log "done"
