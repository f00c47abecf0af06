#!/usr/bin/env python3
"""Posts the GPU series of tools/detection-series.sh to a kw-server
and prints every verdict: the A/A and power targets of docs/detection.md are
read off real verdicts, not recomputed.

Main runs are posted in the order given, each as a new commit on main (the
series measures one build again and again); pull requests and power jobs are
posted after them, each as its own commit on its own branch, based on the last
main commit. Their verdicts come from the A/B measured in the job.

  post_series.py --server URL --token AGENT_TOKEN [--json OUT] --main M1.json ... --pr P1.json ... --power W1.json ...

The project (--project, default kernelwatch-series) must exist: make the token
with `kw-server token create --scope agent --name series --project kernelwatch-series`.

The reports of the series measured on the H100 are in the repository's
history: `git log --diff-filter=D --name-only -- 'docs/results/*.tar.gz'`
lists them, and `git show COMMIT^:docs/results/NAME.tar.gz > NAME.tar.gz`
restores one.
"""
import argparse
import hashlib
import json
import urllib.error
import urllib.request

INJECTED = ("/d128/", ("s2048", "s4096", "s8192", "s16384"))
TINY = "attention/fp16/d64/b1h1s128"


def sha(text):
    return hashlib.sha1(text.encode()).hexdigest()


def request(server, token, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server + path, data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise SystemExit(f"{method} {path}: HTTP {error.code}: {error.read().decode()[:500]}")


def fetch_run(server, token, run_id):
    """The whole run: its cases and comparisons come a page at a time."""
    path = f"/api/v1/runs/{run_id}?per_page=2000&page="
    run = request(server, token, "GET", path + "1")
    for page in range(2, run["paging"]["pages"] + 1):
        more = request(server, token, "GET", path + str(page))
        run["cases"] += more["cases"]
        run["comparisons"] += more["comparisons"]
    return run


def full_bench_cost(report):
    """The full_bench stage's wall time and where it went, from the report."""
    stage = next(s for s in report["stages"] if s["name"] == "full_bench")
    cost = {"seconds": stage["duration_ms"] / 1000, "cases": len(report["cases"])}
    details = stage["details"]
    # A merged run (kw merge-shards) keeps each shard's details: {"shards": [{"shard": K, BENCH: ...}]}.
    benches = ([b for shard in details["shards"] for k, b in shard.items() if k != "shard"]
               if "shards" in details else list(details.values()))
    for bench in benches:
        passes = bench.get("passes", [])
        candidate = [p for p in passes if p["side"] in ("head", "base")]
        cost.update({"passes": len(passes), "context_pass_seconds": sum(p["seconds"] for p in passes if p["side"] == "head baselines"),
                     "setup_seconds": bench.get("setup_seconds"), "measure_seconds": bench.get("measure_seconds"),
                     "full_pass_seconds": [round(p["seconds"], 1) for p in candidate if p["cases"] == cost["cases"]]})
    return cost


def flagged(run):
    return [(c["case"], c["status"], c["ratio"], c.get("method"))
            for c in run["comparisons"]
            if c["impl"] == "candidate" and c["status"] in ("regression", "improvement")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--project", default="kernelwatch-series")
    parser.add_argument("--json")
    parser.add_argument("--main", nargs="*", default=[])
    parser.add_argument("--pr", nargs="*", default=[])
    parser.add_argument("--power", nargs="*", default=[])
    args = parser.parse_args()

    results = []
    last_main = None
    for kind, files in (("main", args.main), ("pr", args.pr), ("power", args.power)):
        for i, path in enumerate(files, 1):
            report = json.load(open(path))
            report["project"] = args.project
            report["commit"] = sha(f"{kind}-{i}-{path}")
            report["branch"] = "main" if kind == "main" else f"{kind}-{i}"
            if kind == "main":
                report.pop("base_commit", None)
                last_main = report["commit"]
            else:
                report["base_commit"] = last_main or sha("base")
            answer = request(args.server, args.token, "POST", "/api/v1/runs", report)
            run = fetch_run(args.server, args.token, answer["run_id"])
            compared = [c for c in run["comparisons"] if c["impl"] == "candidate" and c.get("method")]
            entry = {"kind": kind, "file": path, "run_id": answer["run_id"], "verdict": answer["verdict"],
                     "comparisons": len(compared), "flagged": flagged(run),
                     "methods": sorted({c["method"] for c in compared}), "full_bench": full_bench_cost(report)}
            if kind == "power":
                injected = [c for c in compared
                            if INJECTED[0] in c["case"] and any(s in c["case"] for s in INJECTED[1])]
                entry["injected"] = [{"case": c["case"], "ratio": c["ratio"], "status": c["status"],
                                      "p_value": c["p_value"]} for c in injected]
                entry["tiny"] = [{"case": c["case"], "ratio": c["ratio"], "status": c["status"]}
                                 for c in compared if c["case"] == TINY]
            results.append(entry)
            print(f"{kind} {i}: run {answer['run_id']} verdict {answer['verdict']} "
                  f"(full_bench {entry['full_bench']['seconds']:.1f} s for {entry['full_bench']['cases']} cases; "
                  f"{len(compared)} comparisons by {'/'.join(entry['methods'])}; flagged: "
                  + (", ".join(f"{n} {s} {r:.3f}" for n, s, r, _ in entry["flagged"]) or "none") + ")")
            if kind == "power":
                for c in entry["injected"] + entry["tiny"]:
                    print(f"    {c['case']}: {c['ratio']:.3f} {c['status']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
