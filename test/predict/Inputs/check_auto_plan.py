"""strata-compile --auto's top layouts are fastest first; with a second
argument (strata-run --backend sim of the plan it wrote), that plan
predicts the iteration --auto printed for its best."""
import re
import sys

auto = open(sys.argv[1]).read()
seconds = [float(s) for s in re.findall(r"^ \d+\. .*?, ([0-9.e+-]+) s an iteration", auto, re.M)]
if len(sys.argv) == 2:
    print("fastest first" if seconds and seconds == sorted(seconds) else f"NOT in order: {seconds}")
    sys.exit(0)
sim = open(sys.argv[2]).read()
ms = float(re.search(r"elapsed time per iteration \(ms\): ([0-9.]+)", sim)[1])
# The report prints 0.1 ms; --auto three significant digits.
if abs(ms - 1e3 * seconds[0]) <= max(0.05, 0.005 * ms):
    print("the written plan predicts the best's iteration")
else:
    print(f"written plan {ms} ms, best {1e3 * seconds[0]} ms")
