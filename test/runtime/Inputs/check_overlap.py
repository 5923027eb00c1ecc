"""Reads a strata-run trace and says, per rank, how many of the gradient
reductions on its communication stream began while a backward was still
running on its compute stream (they overlap it), over every iteration,
and how many ran at all. Every iteration counts: whether one reduction's
start falls inside the backward depends on when the machine schedules
the communication thread, and a loaded machine can delay it past one
iteration's backward."""
import sys

from trace_events import comm, load, steps

events = load(sys.argv[1])
ranks = int(sys.argv[2])
for r in range(ranks):
    ran = steps(events, r)
    spans = []
    for iteration in sorted({s["args"]["iteration"] for s in ran}):
        backward = [s for s in ran if s["args"]["iteration"] == iteration and
                    s["args"]["phase"] in ("microbatch", "backward")]
        spans.append((min(s["ts"] for s in backward),
                      max(s["ts"] + s["dur"] for s in backward)))
    reductions = [e for e in comm(events, r)
                  if e["name"].startswith(("all_reduce_sum over dp", "reduce_scatter over dp"))]
    during = [e for e in reductions if any(b <= e["ts"] < end for b, end in spans)]
    print(f"rank {r}: {len(during)} gradient reductions began before the backward ended, "
          f"{len(reductions)} on the communication stream in all")
