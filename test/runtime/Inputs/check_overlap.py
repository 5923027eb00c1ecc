"""Reads a strata-run trace and says, per rank, how many of the gradient
reductions on its communication stream began while the last iteration's
backward was still running on its compute stream (they overlap it), and
how many ran at all."""
import sys

from trace_events import comm, load, steps

events = load(sys.argv[1])
ranks = int(sys.argv[2])
for r in range(ranks):
    ran = steps(events, r)
    last = max(s["args"]["iteration"] for s in ran)
    backward = [s for s in ran if s["args"]["iteration"] == last and
                s["args"]["phase"] in ("microbatch", "backward")]
    begin = min(s["ts"] for s in backward)
    end = max(s["ts"] + s["dur"] for s in backward)
    reductions = [e for e in comm(events, r)
                  if e["name"].startswith(("all_reduce_sum over dp", "reduce_scatter over dp"))]
    during = [e for e in reductions if begin <= e["ts"] < end]
    print(f"rank {r}: {len(during)} gradient reductions began before the backward ended, "
          f"{len(reductions)} on the communication stream in all")
