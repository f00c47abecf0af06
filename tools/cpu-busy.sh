#!/usr/bin/env bash
# On the VM: a command's wall time and what the whole machine spent meanwhile
# (/proc/stat before and after): busy, idle and iowait CPU-seconds. Busy near
# wall x cores means the command is CPU-bound and more parallelism buys
# nothing; tests/README.md, "Where CI's time goes".
#   tools/cpu-busy.sh LOG COMMAND...   (the command's output goes to LOG)
set -uo pipefail
log=${1:?LOG}
shift
ticks=$(getconf CLK_TCK)
read -r _ user nice system idle iowait irq softirq _ < /proc/stat
start=$(date +%s.%N)
"$@" > "$log" 2>&1
status=$?
end=$(date +%s.%N)
read -r _ user2 nice2 system2 idle2 iowait2 irq2 softirq2 _ < /proc/stat
busy=$(((user2 + nice2 + system2 + irq2 + softirq2 - user - nice - system - irq - softirq) / ticks))
echo "exit $status: wall $(echo "$end - $start" | bc) s, busy $busy CPU-s," \
  "idle $(((idle2 - idle) / ticks)) s, iowait $(((iowait2 - iowait) / ticks)) s ($(nproc) cores)" | tee -a "$log"
exit "$status"
