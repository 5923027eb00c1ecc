#!/usr/bin/env python3
"""Checks the PTX of a plan's attention kernels for what FlashAttention-2's
form needs (issue 36): K, V, Q and dO tiles come by 16-byte cp.async and
fragments by ldmatrix (.trans for the products that read rows as B's rows),
the products are mma.sync, the exponentials ex2.approx, and no global load
moves a single 16-bit element (the scalar loads the old kernels walked
their tiles with). Prints one line per kernel with its counts.

usage: check_attention_ptx.py DIR   (strata-inspect --kernels DIR)
"""
import os
import re
import sys

SCALAR16 = re.compile(r"^\s*ld\.global(\.[a-z]+)*\.(u16|b16|s16|f16|bf16)\s", re.M)
REQUIRED = {
    "attention_fwd": ["cp.async.cg.shared.global", "cp.async.wait_group",
                      "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                      "ex2.approx"],
}
REQUIRED["attention_bwd"] = REQUIRED["attention_fwd"]


def main():
    directory = sys.argv[1]
    found, failures = 0, []
    for name in sorted(os.listdir(directory)):
        kind = re.sub(r"_\d+\.ptx$", "", name)
        if not name.endswith(".ptx") or kind not in REQUIRED:
            continue
        found += 1
        ptx = open(os.path.join(directory, name)).read()
        missing = [op for op in REQUIRED[kind] if op not in ptx]
        scalar = SCALAR16.findall(ptx)
        if missing:
            failures.append(f"{name}: no {', '.join(missing)}")
        if scalar:
            failures.append(f"{name}: {len(scalar)} scalar 16-bit global loads")
        print(f"{name}: cp.async {ptx.count('cp.async.cg')}, ldmatrix "
              f"{ptx.count('ldmatrix')}, mma {ptx.count('mma.sync')}, "
              f"16-bit global loads {len(scalar)}")
    if not found:
        failures.append(f"no attention kernels in {directory}")
    if failures:
        sys.exit("\n".join(failures))
    print(f"{found} attention kernels: cp.async, ldmatrix, mma.sync, no scalar 16-bit loads")


if __name__ == "__main__":
    main()
