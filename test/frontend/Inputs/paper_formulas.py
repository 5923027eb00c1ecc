"""Checks strata-compile's summary of a GPT model against Narayanan et al.

Parameters: P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)), which leaves out
the final LayerNorm's 2h weights; strata counts them, so P_strata = P + 2h.
FLOPs of one training step without recomputation (forward and backward, as
the paper counts: matmuls and attention scores):
F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)); with the layers' forward
recomputed, the count the paper reports throughput by,
F_r = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)). All exact integers here.
"""
import argparse
import re
import sys

parser = argparse.ArgumentParser()
for name in ("layers", "hidden", "seq", "vocab", "batch"):
    parser.add_argument("--" + name, type=int, required=True)
args = parser.parse_args()
l, h, s, V, B = args.layers, args.hidden, args.seq, args.vocab, args.batch

text = sys.stdin.read()
params = int(re.search(r"([\d,]+) parameters", text).group(1).replace(",", ""))
flops = int(re.search(r"([\d,]+) FLOPs per microbatch", text).group(1).replace(",", ""))
recomputed = int(re.search(r"([\d,]+) with the layers' forward recomputed", text).group(1).replace(",", ""))

paper_params = 12 * l * h * h + 13 * l * h + (V + s) * h
paper_flops = 72 * B * s * l * h * h + 12 * B * s * s * l * h + 6 * B * s * h * V
paper_recomputed = 96 * B * s * l * h * h + 16 * B * s * s * l * h + 6 * B * s * h * V

ok = True
if params - paper_params != 2 * h:
    print(f"parameters {params} - formula {paper_params} = {params - paper_params}, expected 2h = {2 * h}")
    ok = False
if flops != paper_flops:
    print(f"FLOPs {flops} != formula {paper_flops}")
    ok = False
if recomputed != paper_recomputed:
    print(f"FLOPs with recomputation {recomputed} != formula {paper_recomputed}")
    ok = False
if ok:
    print(f"OK parameters {params} = formula {paper_params} + 2h; FLOPs {flops} = formula; "
          f"with recomputation {recomputed} = formula")
sys.exit(0 if ok else 1)
