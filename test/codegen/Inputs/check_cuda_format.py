#!/usr/bin/env python3
"""The hand-written CUDA (compiler/codegen/cuda/*.cuh) is formatted as the
tree is (the root's .clang-format): clang-format changes nothing in it.

usage: check_cuda_format.py SOURCE_ROOT
"""
import glob
import os
import subprocess
import sys

files = sorted(glob.glob(os.path.join(sys.argv[1], "compiler", "codegen", "cuda", "*.cuh")))
if not files:
    sys.exit("no .cuh files under compiler/codegen/cuda")
run = subprocess.run(["clang-format", "--dry-run", "--Werror"] + files,
                     capture_output=True, text=True)
if run.returncode != 0:
    sys.exit(run.stdout + run.stderr + "\nrun: clang-format -i compiler/codegen/cuda/*.cuh")
print(f"{len(files)} CUDA files formatted")
