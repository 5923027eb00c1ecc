"""The parts of a strata-run trace the trace tests read: each rank is a
process (pid); its compute stream is track 0, its communication stream
track 1, its transfer streams (activations and gradients, toward higher
and lower stages) tracks 2 to 5."""
import json

COMPUTE_TRACK = 0
COMM_TRACK = 1
TRANSFER_TRACKS = (2, 3, 4, 5)


def load(path):
    return json.load(open(path))["traceEvents"]


def steps(events, rank):
    """The rank's schedule steps (programs), on its compute track."""
    return [e for e in events if e.get("cat") == "step" and e["pid"] == rank
            and e["tid"] == COMPUTE_TRACK]


def comm(events, rank):
    """The work on the rank's communication track."""
    return [e for e in events if e.get("cat") == "communication" and e["pid"] == rank
            and e["tid"] == COMM_TRACK]


def transfers(events, rank):
    """The work on the rank's transfer tracks (the pipeline's exchanges)."""
    return [e for e in events if e.get("cat") == "communication" and e["pid"] == rank
            and e["tid"] in TRANSFER_TRACKS]
