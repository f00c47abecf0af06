#!/usr/bin/env python3
"""One line for a `kw run` report: its stages with their seconds, the
seconds after the build, and which cases were timed, audited or skipped as
identical to the base; then each stage that did not pass, with its message.

  report_line.py REPORT.json KIND EXIT_STATUS WALL_SECONDS
"""
import datetime
import json
import sys


def _epoch(rfc3339):
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def main():
    path, kind, status, seconds = sys.argv[1:]
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as error:
        print("%s: exit %s in %s s, no report (%s)" % (kind, status, seconds, error))
        return
    stages = report["stages"]
    after_build = sum(s["duration_ms"] for s in stages if s["name"] != "build") / 1000
    # The job's wall clock past its build: what the stages' own times leave out (the agent between them) too.
    wall = (_epoch(report["finished_at"]) - _epoch(report["started_at"])
            - sum(s["duration_ms"] for s in stages if s["name"] == "build") / 1000)
    timed = [c for c in report["cases"] if c.get("measurements")]
    skipped = [c for c in report["cases"] if c.get("identical_to_base")]
    audited = [c for c in report["cases"] if c.get("audit")]
    print("%s: exit %s in %s s, %.1f s after the build (its stages' %.1f s); %s; %d cases, %d timed (%d audited), "
          "%d identical not timed"
          % (kind, status, seconds, wall, after_build,
             ", ".join("%s %s %.1f s" % (s["name"], s["status"], s["duration_ms"] / 1000) for s in stages),
             len(report["cases"]), len(timed), len(audited), len(skipped)))
    for stage in stages:
        if stage["status"] not in ("passed", "skipped"):
            print("  %s: %s" % (stage["name"], stage.get("message", "")[:800]))


if __name__ == "__main__":
    main()
