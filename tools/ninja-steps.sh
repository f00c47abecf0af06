#!/usr/bin/env bash
# Step-seconds of a build by part, from ninja's log (tools/ci-timing.sh keeps
# one beside each run's log as LOG.ninja_log). With 4 jobs on 2 cores a
# step's seconds are about twice its CPU time, so compare runs of one
# machine: an unchanged part's growth is the machine's, the rest the change's.
#   ninja-steps.sh NINJA_LOG [NINJA_LOG ...]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: ninja-steps.sh NINJA_LOG [NINJA_LOG ...]" >&2; exit 2; }
for log in "$@"; do
  awk -v name="$log" 'NR > 1 {
      s = ($2 - $1) / 1000; all += s
      if ($4 ~ /^agent\//) agent += s
      else if ($4 ~ /^server\/tests\//) server_tests += s
      else if ($4 ~ /^server\//) server += s
    }
    END { printf "%s: all %.0f, agent %.0f, server (without its tests) %.0f, server tests %.0f step-seconds\n",
                 name, all, agent, server, server_tests }' "$log"
done
