"""Reads strata-run --profile-json's file and checks each entry's cost
against the shape it names: a gemm's FLOPs are 2·m·n·k(·batch) and its
bytes each operand once; attention's 4·b·h·s²·d (half when causal, 2.5
times that backward). Prints the clock, the iteration, and the calls per
kind of the iteration.

  check_profile.py PROFILE.json
"""
import json
import re
import sys
from collections import Counter

profile = json.load(open(sys.argv[1]))
calls = Counter()
for e in profile["entries"]:
    calls[e["name"]] += e["calls"]
    assert e["seconds"] > 0 and e["bytes"] > 0, e
    if e["name"] == "gemm":
        m = re.match(r"m=(\d+) n=(\d+) k=(\d+)(?: batch=(\d+))? (\w+)(?:->(\w+))? [nt][nt]", e["shape"])
        assert m, e["shape"]
        mm, nn, kk, batch = int(m[1]), int(m[2]), int(m[3]), int(m[4] or 1)
        assert e["flops"] == 2 * mm * nn * kk * batch, e
        size = {"f32": 4, "bf16": 2}
        d = size[m[6] or m[5]] * mm * nn * batch * (2 if "accumulate" in e["shape"] else 1)
        assert e["bytes"] == size[m[5]] * (mm * kk + kk * nn) * batch + d, e
    elif e["name"] in ("attention_fwd", "attention_bwd"):
        b, s, h, d = (int(x) for x in re.match(r"\[(\d+), (\d+), (\d+), (\d+)\]", e["shape"]).groups())
        forward = 4 * b * h * s * s * d * (0.5 if e["shape"].endswith("causal") else 1)
        assert e["flops"] == (forward if e["name"] == "attention_fwd" else 2.5 * forward), e
    else:
        assert e["flops"] == 0, e
order = sorted(profile["entries"], key=lambda e: -e["seconds"])
assert [e["seconds"] for e in order] == [e["seconds"] for e in profile["entries"]], "not by time"
print(f"clock: {profile['clock']}, iteration {profile['iteration']}")
for name in ("gemm", "attention_fwd", "attention_bwd", "adamw"):
    print(f"{name}: {calls[name]} calls")
