#!/usr/bin/env python3
"""Holds a CUDA plan's launches to the catalog's rule (runtime/plan/
Kernels.def): a memory-bound launch fills at least 2 blocks an SM of an
H100 (264), unless its work is too small for that (its largest operand
under 264 · 256 · 8 elements: a chunk of 8 a thread) and its kernels' run
in the catalog says why in a `// Few blocks:` line. Reads strata-inspect
--launches. Attention is compute-bound and not held to it.

usage: check_launch_blocks.py KERNELS_DEF LAUNCHES_TXT
"""
import re
import sys

BLOCKS = 2 * 132
SMALL = BLOCKS * 256 * 8
COMPUTE_BOUND = {"attention_fwd", "attention_bwd"}


def excused_kernels(path):
    """The kernels whose run has a `// Few blocks:` line."""
    excused, current = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("// Where:"):
            current = False
        if line.startswith("// Few blocks:"):
            current = True
        match = re.match(r'KERNEL\(\w+, "(\w+)"\)', line)
        if match and current:
            excused.add(match.group(1))
    return excused


def elements(shape):
    n = 1
    for d in shape.split(","):
        d = d.strip()
        if d:
            n *= int(d)
    return n


def main():
    excused = excused_kernels(sys.argv[1])
    failures, launches = [], 0
    for line in open(sys.argv[2]):
        match = re.match(r"\s+(\w+) ([\w+]+) grid (\d+)x(\d+)x(\d+) block \d+ shared \d+ x\d+ \|(.*)",
                         line)
        if not match:
            continue
        launches += 1
        name, kernels = match.group(1), match.group(2).split("+")
        blocks = int(match.group(3)) * int(match.group(4)) * int(match.group(5))
        largest = max([elements(s) for s in re.findall(r"\[([0-9, ]*)\]", match.group(6))],
                      default=0)
        if blocks >= BLOCKS or set(kernels) & COMPUTE_BOUND:
            continue
        if largest < SMALL and all(k in excused for k in kernels):
            continue
        failures.append(f"{name} ({'+'.join(kernels)}): {blocks} blocks over operands of up to "
                        f"{largest} elements")
    if not launches:
        failures.append("no launches read")
    if failures:
        sys.exit("\n".join(failures))
    print(f"{launches} launches: each at least {BLOCKS} blocks, or small and excused by the catalog")


if __name__ == "__main__":
    main()
