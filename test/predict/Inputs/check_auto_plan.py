"""strata-compile --auto's top layouts are fastest first; with a second
argument (strata-run --backend sim of the plan it wrote), that plan
predicts the iteration --auto printed for its best; with --same-top and
the output of a search keeping more, its first layouts are the same."""
import re
import sys

auto = open(sys.argv[1]).read()
seconds = [float(s) for s in re.findall(r"^ \d+\. .*?, ([0-9.e+-]+) s an iteration", auto, re.M)]
if len(sys.argv) == 2:
    print("fastest first" if seconds and seconds == sorted(seconds) else f"NOT in order: {seconds}")
    sys.exit(0)
if sys.argv[2] == "--same-top":
    top = re.findall(r"^ \d+\. (.*?): ", auto, re.M)
    more = re.findall(r"^ \d+\. (.*?): ", open(sys.argv[3]).read(), re.M)
    if top and more[:len(top)] == top:
        print(f"the same best {len(top)} without pruning")
    else:
        print(f"DIFFERENT: {top} against {more[:len(top)]}")
    sys.exit(0)
sim = open(sys.argv[2]).read()
ms = float(re.search(r"^breakdown of the ([0-9.e+-]+) ms", sim, re.M)[1])
# The report prints four significant digits, --auto three: their rounding.
if abs(ms - 1e3 * seconds[0]) <= 0.0005 * ms + 0.005 * 1e3 * seconds[0]:
    print("the written plan predicts the best's iteration")
else:
    print(f"written plan {ms} ms, best {1e3 * seconds[0]} ms")
