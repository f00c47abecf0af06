#!/usr/bin/env python3
"""Plays the reports of tools/bisect-range.sh to a kw-server as its
GPU agent would: the main run of commit 0, then the push 0..16 as a job with
its range; kw-server flags it and bisects, and each step job it queues is
answered with the report measured on the GPU for that commit against that
base. A step the server asks for that was not measured stops the replay
(the search went another way than the binary search the GPU run assumed).

  replay_bisect.py --server URL --agent-token T --ci-token T --dir DIR [--json OUT]

DIR holds commits.txt (commit 0 first) and main-0.json, main-16.json,
step-I-J.json (commit I measured A/B against commit J).
"""
import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request


def call(server, token, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server + path, data=data, method=method,
                                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            text = response.read().decode()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read().decode() or "null")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--agent-token", required=True)
    parser.add_argument("--ci-token", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--project", default="kernelwatch")
    parser.add_argument("--json")
    args = parser.parse_args()
    commits = open(os.path.join(args.dir, "commits.txt")).read().split()
    report = lambda name: json.load(open(os.path.join(args.dir, name + ".json")))

    status, answer = call(args.server, args.agent_token, "POST", "/api/v1/runs", report("main-0"))
    print(f"main run of commit 0: HTTP {status}, verdict {answer.get('verdict')}")
    status, job = call(args.server, args.ci_token, "POST", "/api/v1/jobs",
                       {"project": args.project, "commit": commits[16], "branch": "main", "range": commits[:17]})
    if status not in (200, 201):
        sys.exit(f"the push's job was refused: HTTP {status} {job}")
    gpu = report("main-16")["device"]["name"]
    agent = report("main-16")["agent"]["name"]  # a report is taken only from the agent that holds its job
    push_run = None
    while True:
        status, claimed = call(args.server, args.agent_token, "POST", "/api/v1/agents/claim",
                               {"agent": agent, "gpus": [gpu], "projects": [args.project]})
        if status == 204:
            break
        at = commits.index(claimed["commit"])
        base = claimed.get("base_commit")
        name = "main-16" if base is None else f"step-{at}-{commits.index(base)}"
        path = os.path.join(args.dir, name + ".json")
        if not os.path.exists(path):
            sys.exit(f"kw-server asked for commit {at} against {commits.index(base)}, which was not measured")
        body = report(name)
        body["job_id"] = claimed["id"]
        body["branch"] = claimed["branch"]
        status, posted = call(args.server, args.agent_token, "POST", f"/api/v1/jobs/{claimed['id']}/report", body)
        if status not in (200, 201):
            sys.exit(f"job {claimed['id']}: the report {name} was refused: HTTP {status} {posted}")
        print(f"job {claimed['id']}: commit {at}" + ("" if base is None else f" against {commits.index(base)}") +
              f" ({name}): HTTP {status}, verdict {posted.get('verdict')}")
        if base is None:
            push_run = posted["run_id"]
    if push_run is None:
        sys.exit("the push's job was never claimed")
    _, run = call(args.server, args.ci_token, "GET", f"/api/v1/runs/{push_run}?per_page=1")
    if not run.get("bisect"):
        sys.exit(f"no bisect: the push's verdict is {run['verdict']}")
    _, bisect = call(args.server, args.ci_token, "GET", f"/api/v1/bisects/{run['bisect']['id']}")
    first_bad = bisect.get("first_bad")
    print(f"bisect {bisect['id']}: {bisect['state']} after {bisect['steps']} steps; first bad commit "
          f"{commits.index(first_bad) if first_bad in commits else first_bad}: {bisect['message']}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"bisect": bisect, "commits": commits}, out, indent=2)
    sys.exit(0 if bisect["state"] == "found" else 1)


if __name__ == "__main__":
    main()
