"""The mean pipeline communication of two --backend sim reports: the
first's (nodes of 8) must exceed the second's (one node of 48)."""
import re
import sys

def pipeline_ms(path):
    text = open(path).read()
    return float(re.search(r"^breakdown .*pipeline communication ([0-9.e+-]+) ms", text, re.M)[1])

across, within = pipeline_ms(sys.argv[1]), pipeline_ms(sys.argv[2])
print(f"pipeline communication across nodes {'exceeds' if across > within else 'does NOT exceed'} "
      f"that within one ({across} ms, {within} ms)")
