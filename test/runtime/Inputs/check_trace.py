"""Reads a strata-run trace as JSON (so it must parse) and summarises it:
the tracks, each rank's step count, whether every instruction lies inside
a step of its rank, and rank 0's step order in the last iteration."""
import json
import sys

trace = json.load(open(sys.argv[1]))
ranks = int(sys.argv[2])
events = trace["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
print("tracks: " + "; ".join(names[r] for r in sorted(names)))
last = 0
for r in range(ranks):
    steps = [e for e in events if e.get("cat") == "step" and e["tid"] == r]
    kernels = [e for e in events if e.get("cat") == "kernel" and e["tid"] == r]
    nested = all(any(s["ts"] <= k["ts"] + 1e-3 and k["ts"] + k["dur"] <= s["ts"] + s["dur"] + 1e-3
                     for s in steps) for k in kernels)
    print(f"rank {r}: {len(steps)} steps, instructions nested: {nested and len(kernels) > 0}")
    last = max([last] + [s["args"]["iteration"] for s in steps])
order = [e["name"] for e in events
         if e.get("cat") == "step" and e["tid"] == 0 and e["args"]["iteration"] == last]
print(f"rank 0 iteration {last}: " + " ".join(order))
