#!/usr/bin/env bash
# On the GPU machine: what skipping identical code costs and misses
# (docs/detection.md, "Fingerprints"; docs/PERFORMANCE.md). Builds kw and
# libkw_inject.so, makes a scratch git history of this tree whose
# kernelwatch.json runs the bundled attention suite (every case), and
# measures pull requests against its first commit A with the whole pipeline
# (`kw run --base A`, the head's fingerprints from its preflight):
#   docs-N    A + a README change: nothing any case runs
#   kernel-N  A + one kernel variant's device code (fp16, head dim 64: a
#             fence at the kernel's start); its host code is unchanged
#   flags-N   A + --use_fast_math for the attention kernels (a build flag)
#   host-N    A + an injected slowdown of the D=128 S=4096 cases (a host
#             change: the bench's own code)
#   flags and host are timed with 2 replicates a side and no confirmation:
#   what they show is which cases are timed, not their verdict
#   pr-N      A + a README change as an A/A pull request, full_bench alone
#             (the head's fingerprints from a launch pass of its own), for
#             the false-verdict count
# Reports (kind-N.json, with their logs) go to $OUT/fingerprints.tar.gz.
#   SERIES="docs:1 kernel:1 flags:1 host:1 pr:20" [SERIES_DEADLINE=EPOCH_S] tools/fingerprint-series.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=fingerprints
source "$root/tools/gpu-scratch.sh"
out="${OUT:-$root/gpu-results}"
work="${SERIES_WORK:-/tmp/kw-fingerprints}"
series="${SERIES:-docs:1 kernel:1 flags:1 host:1}"
mkdir -p "$out/fingerprints" "$work"
kw=$(kw_binary "$out/fingerprints") || exit 1
inject_library "$out/fingerprints" || exit 1

# One repository, a branch per kind of change, each one commit over A.
repo="$work/repo"
if [ ! -d "$repo/.git" ]; then
  log "scratch history in $repo"
  attention_tree "$repo" "*"
  (cd "$repo" && git_ init -q -b main && git_ add -A && git_ commit -qm "A")
  for kind in docs kernel flags host; do  # a branch off A with the kind's change committed
    (cd "$repo" && git_ checkout -q -b "$kind" main && python3 "$root/tools/fingerprint_variants.py" "$kind" &&
      git_ commit -qam "$kind") || { log "branch $kind not made"; exit 1; }
  done
  (cd "$repo" && git_ checkout -q main)
fi
base=$(git -C "$repo" rev-parse main)
log "A=$base"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader

series_run() {  # kind index
  local kind=$1 i=$2 branch=$1 stages=() config=()
  [ "$kind" = pr ] && branch=docs stages=(--stages full_bench)
  if [ "$kind" = flags ] || [ "$kind" = host ]; then
    python3 -c "import json, sys; c = json.load(open(sys.argv[1])); c['full_bench'].update(replicates=2, max_replicates=2, confirm_replicates=0, resolve_replicates=0); json.dump(c, open(sys.argv[2], 'w'))" \
      "$repo/kernelwatch.json" "$work/quick.json" && config=(--config "$work/quick.json")
  fi
  git -C "$repo" checkout -q "$branch" || return 1
  local started=$SECONDS
  "$kw" run --repo "$repo" --cache-dir "$work/built" --name fingerprints --branch "$branch" --base "$base" \
    "${stages[@]}" "${config[@]}" --out "$out/fingerprints/$kind-$i.json" > "$out/fingerprints/$kind-$i.log" 2>&1
  local status=$?
  tar -C "$out" -czf "$out/fingerprints.tar.gz" fingerprints
  log "$kind $i: exit $status in $((SECONDS - started)) s; $(grep -E 'identical code on both sides|stage [a-z_]+ (passed|failed) in' "$out/fingerprints/$kind-$i.log" | sed 's/.*full_bench attention: //; s/.*stage //' | cut -c1-160 | tr '\n' ' ')"
}
series_each "$series" "$out/fingerprints" "${SERIES_DEADLINE:-}"
git -C "$repo" checkout -q main
rm -rf "$out/fingerprints"
log "done: $(du -h "$out/fingerprints.tar.gz" | cut -f1)"
