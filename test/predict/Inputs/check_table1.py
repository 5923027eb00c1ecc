"""Reads bench/sim_paper.py's output: every row of Table 1 predicted, and
the mean absolute error and the worst row's within the bounds given (in
percent). Prints the verdict; exits 1 past a bound."""
import re
import sys

text = open(sys.argv[1]).read()
mean_bound, worst_bound = float(sys.argv[2]), float(sys.argv[3])
rows = re.findall(r"^\s*[0-9.]+B\s.*?([+-][0-9.]+)%", text, re.M)
summary = re.search(r"mean absolute error ([0-9.]+)%, worst ([+-][0-9.]+)% over (\d+) rows", text)
if not summary or len(rows) != int(summary[3]):
    sys.exit("FAILED: no summary line, or its rows are not all printed")
mean, worst = float(summary[1]), float(summary[2])
ok = mean <= mean_bound and abs(worst) <= worst_bound
print(f"{len(rows)} rows: mean absolute error {mean}% {'within' if mean <= mean_bound else 'PAST'} "
      f"{mean_bound:g}%, worst {worst:+}% {'within' if abs(worst) <= worst_bound else 'PAST'} {worst_bound:g}%")
sys.exit(0 if ok else 1)
