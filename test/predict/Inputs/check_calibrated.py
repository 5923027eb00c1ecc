"""The sum of a --profile-json's measured seconds against the compute the
simulation reports with that profile as its calibration (one rank: every
gemm and kernel of the iteration)."""
import json
import re
import sys

profile = json.load(open(sys.argv[1]))
measured_ms = 1e3 * sum(e["seconds"] for e in profile["entries"])
report = open(sys.argv[2]).read()
compute_ms = float(re.search(r"^stage 0 \(rank 0\): compute ([0-9.e+-]+) ms", report, re.M)[1])
# The report prints three significant digits; copies and fills are the model's.
if abs(compute_ms - measured_ms) <= 0.01 * measured_ms:
    print("simulated compute equals the measured kernels' time")
else:
    print(f"simulated compute {compute_ms} ms, measured {measured_ms} ms")
