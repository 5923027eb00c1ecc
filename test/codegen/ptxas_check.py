#!/usr/bin/env python3
"""Assembles every .ptx in a directory with ptxas for one architecture and
fails on an error or a register spill (ptxas -v reports spill stores and
loads per kernel).

usage: ptxas_check.py ARCH DIR
"""
import os
import re
import shutil
import subprocess
import sys


def main():
    arch, directory = sys.argv[1], sys.argv[2]
    ptxas = shutil.which("ptxas") or os.path.join(
        os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas")
    files = sorted(f for f in os.listdir(directory) if f.endswith(".ptx"))
    if not files:
        sys.exit(f"no .ptx files in {directory}")
    failures = []
    for name in files:
        path = os.path.join(directory, name)
        run = subprocess.run([ptxas, f"-arch={arch}", "-v", path, "-o", os.devnull],
                             capture_output=True, text=True)
        report = run.stdout + run.stderr
        if run.returncode != 0:
            failures.append(f"{name}: ptxas failed:\n{report}")
            continue
        spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
        if not spills:
            failures.append(f"{name}: ptxas -v reported no spill counts:\n{report}")
        elif any(int(s) or int(l) for s, l in spills):
            failures.append(f"{name}: register spills:\n{report}")
    if failures:
        sys.exit("\n".join(failures))
    print(f"{arch}: {len(files)} kernels assemble, no spills")


if __name__ == "__main__":
    main()
