"""Reads strata-run --backend sim's report and trace: each simulated
rank's uses add up to the predicted iteration (to the printed precision),
which uses are there, and what the trace holds."""
import json
import re
import sys

report, trace = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
iteration = float(re.search(r"^breakdown of the ([0-9.e+-]+) ms", report, re.M)[1])
ranks = re.findall(r"^stage \d+ \(rank \d+\): (.*)$", report, re.M)
for line in ranks:
    uses = [float(x) for x in re.findall(r"([0-9.e+-]+) ms \(", line)]
    # The iteration printed to four significant digits, each of the five
    # uses to three: the sum may differ by their rounding, no more.
    rounding = 0.0005 * iteration + sum(0.005 * u for u in uses)
    assert abs(sum(uses) - iteration) <= rounding, (line, iteration)
print(f"{len(ranks)} ranks: each adds up to the iteration")
tensor = [float(re.search(r"tensor-parallel communication ([0-9.e+-]+) ms", line)[1]) for line in ranks]
if all(t > 0 for t in tensor):
    print("tensor-parallel communication on every rank")
events = trace["traceEvents"]
pids = sorted({e["pid"] for e in events})
assert all(e["dur"] >= 0 for e in events if e["ph"] == "X")
# Each rank's tracks by number: its streams' lanes, then its steps.
tracks = {pid: {e["tid"]: e["args"]["name"] for e in events
                if e["ph"] == "M" and e["pid"] == pid} for pid in pids}
names = {pid: [tracks[pid][t] for t in sorted(tracks[pid])] for pid in pids}
same = all(n == names[pids[0]] for n in names.values())
steps_track = {pid: next(t for t, n in tracks[pid].items() if n == "steps") for pid in pids}
steps = [e["name"] for e in events if e["ph"] == "X" and e.get("tid") == steps_track[e["pid"]]]
busy = [n for n in names[pids[0]] if n != "steps" and all(
    any(e["ph"] == "X" and e["pid"] == pid and tracks[pid].get(e["tid"]) == n for e in events)
    for pid in pids)]
print(f"trace: {len(pids)} ranks, {'each' if same else 'NOT each'} with tracks "
      f"{', '.join(names[pids[0]])}; busy on every rank: {', '.join(busy)}; "
      f"steps {steps[0]} to {steps[-1]}")
