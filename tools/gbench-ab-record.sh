#!/usr/bin/env bash
# On the VM: kw agent's own A/B jobs of a Google Benchmark case on a busy
# 2-core host, into a fixture. Runs GbenchAbE2eTest RUNS times from BUILD
# (six jobs each: no-op and BM_Sort-slower pull requests alternating), keeps
# every job's stored run (KW_GBENCH_AB_RECORD) and writes each benchmark's
# replicate locations (its fastest repetition, replicate_location: minimum),
# head and base in replicate order: the k-th of each ran in the same pass,
# one after the other. tests/data/gbench-busy-host/sort-jobs.json is made so.
#   tools/gbench-ab-record.sh BUILD OUT_JSON [RUNS]
set -euo pipefail
build=$1 out=$2 runs=${3:-17}
record=$(mktemp -d /tmp/kw-gbench-ab-record.XXXXXX)
trap 'rm -rf "$record"' EXIT
for run in $(seq "$runs"); do
  mkdir -p "$record/$run"
  echo "run $run of $runs"
  KW_GBENCH_AB_RECORD="$record/$run" ctest --test-dir "$build" -R GbenchAbE2eTest --output-on-failure |
    tail -n 3
done
python3 - "$record" "$out" <<'PY'
import glob, json, os, sys
record, out = sys.argv[1], sys.argv[2]
def locations(measurement):
    fastest = {}
    for replicate, ns in zip(measurement["replicates"], measurement["samples_ns"]):
        fastest[replicate] = min(fastest.get(replicate, ns), ns)
    return [round(fastest[r], 1) for r in sorted(fastest)]
jobs = []
for run in sorted(os.listdir(record), key=int):
    files = glob.glob(os.path.join(record, run, "*.json"))
    for path in sorted(files, key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0])):
        job = {"kind": os.path.basename(path).rsplit("-", 1)[0]}
        for case in json.load(open(path))["cases"]:
            job[case["name"].split("/", 1)[1]] = {"head": locations(case["measurements"][0]),
                                                  "base": locations(case["base_measurements"][0])}
        jobs.append(job)
with open(out, "w") as f:
    f.write("{\n")
    for key, value in [("host", "the development VM (AMD EPYC, 2 cores, Debian 12, Google Benchmark 1.7.1)"),
                       ("source", "GbenchAbE2eTest (tests/e2e/gbench_ab_e2e_test.cpp) run by tools/gbench-ab-record.sh"),
                       ("location", "minimum"), ("unit", "ns")]:
        f.write("  %s: %s,\n" % (json.dumps(key), json.dumps(value)))
    f.write('  "jobs": [\n' + ",\n".join("    " + json.dumps(j) for j in jobs) + "\n  ]\n}\n")
print(len(jobs), "jobs ->", out)
PY
