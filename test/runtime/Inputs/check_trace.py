"""Reads a strata-run trace as JSON (so it must parse) and summarises it:
the ranks (a process each), each rank's step count on its compute track,
whether every instruction lies inside a step of its rank, whether its
communication and transfer tracks hold work, and rank 0's step order in
the last iteration."""
import sys

from trace_events import comm, load, steps, transfers

events = load(sys.argv[1])
ranks = int(sys.argv[2])
names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
print("tracks: " + "; ".join(names[r] for r in sorted(names)))
streams = sorted({e["args"]["name"] for e in events if e.get("name") == "thread_name"})
print("streams: " + ", ".join(streams))
last = 0
for r in range(ranks):
    ran = steps(events, r)
    kernels = [e for e in events if e.get("cat") == "kernel" and e["pid"] == r]
    nested = all(any(s["ts"] <= k["ts"] + 1e-3 and k["ts"] + k["dur"] <= s["ts"] + s["dur"] + 1e-3
                     for s in ran) for k in kernels)
    print(f"rank {r}: {len(ran)} steps, instructions nested: {nested and len(kernels) > 0}, "
          f"communication stream: {'busy' if comm(events, r) else 'idle'}, "
          f"transfer stream: {'busy' if transfers(events, r) else 'idle'}")
    last = max([last] + [s["args"]["iteration"] for s in ran])
order = [e["name"] for e in steps(events, 0) if e["args"]["iteration"] == last]
print(f"rank 0 iteration {last}: " + " ".join(order))
