#!/usr/bin/env python3
"""ncu TEST DOUBLE: Nsight Compute cannot run without a GPU, so the e2e tests
give `kw agent --ncu` this instead. It takes ncu's options as kw passes them,
runs the program after them (the bench: its command line is exercised), and
prints real ncu output recorded on an H100 (tests/data/ncu-h100) with the
kernel's time scaled by the checkout's kwbench-fake.json "slowdown", as the
kwbench CPU test double scales its samples. Each call's arguments go, one
JSON array a line, to the file KW_FAKE_NCU_CALLS names."""
import csv
import json
import os
import subprocess
import sys

args = sys.argv[1:]
i = 0
while i < len(args) and args[i].startswith("--"):
    i += 1 if args[i] == "--csv" else 2
program = args[i:]
calls = os.environ.get("KW_FAKE_NCU_CALLS")
if calls:
    with open(calls, "a") as out:
        out.write(json.dumps(args) + "\n")
if not program:
    sys.exit("==ERROR== no application to profile")
bench = subprocess.run(program, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
print(bench.stdout, end="")
if bench.returncode != 0:
    sys.exit(bench.returncode)

slowdown = 1.0
if os.path.exists("kwbench-fake.json"):
    with open("kwbench-fake.json") as behaviour:
        slowdown = json.load(behaviour).get("slowdown", 1.0)
fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "ncu-h100",
                       "attention-fp16-d128-b4h16s4096.csv")
with open(fixture, newline="") as recorded:
    rows = list(csv.reader(recorded))
time = rows[0].index("gpu__time_duration.sum")
for row in rows[2:]:  # after the header and the units
    row[time] = f"{float(row[time].replace(',', '')) * slowdown:.3f}"
print("==PROF== Disconnected from process")
csv.writer(sys.stdout, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
