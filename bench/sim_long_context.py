"""Long contexts, predicted by strata's simulated cluster: LLaMA-3 8B
(examples/llama3-8b.model) at sequences of 8k, 32k and 128k tokens on DGX
H100 nodes, tensor parallel within a node (t = 8, with sequence
parallelism), context parallel across c = 1 to 16 nodes, bf16, full
recomputation, the distributed optimizer over the context ranks, one
sequence an iteration; each compiled for sm_90a and one iteration
simulated. Prints each layout's iteration time, tokens a second per GPU,
TFLOP/s per GPU, the largest rank's memory and whether it fits the GPU,
for each kind of context-parallel exchange (p2p: the ring, Megatron's
default, keys and values passed from rank to rank a step at a time;
all_gather: every rank's gathered, then one attention). c = 1 has no
exchange: one row.

  /usr/bin/python3 bench/sim_long_context.py [--bin build/bin]
      [--cluster examples/clusters/dgx-h100.json] [--seqs 8192,32768,131072]
      [--contexts 1,2,4,8,16] [--svg docs/figures/long-context.svg]
      [--jobs N] [--work DIR]

With --svg, draws tokens a second per GPU against c for each sequence.
"""
import argparse
import concurrent.futures
import os
import re
import tempfile
import time

import sim_paper
from svg_chart import line_chart

ROOT = sim_paper.ROOT
GIB = 2**30
TENSOR = 8
EXCHANGES = ["p2p", "all_gather"]


def flags(seq, c, exchange):
    return ["--set", f"seq={seq}", "--bf16", "--target", "cuda", "--cuda-arch", "sm_90a",
            "--tensor-model-parallel-size", str(TENSOR), "--sequence-parallel",
            "--context-parallel-size", str(c), "--cp-comm-type", exchange,
            "--use-distributed-optimizer", "--recompute-granularity", "full"]


def exchanges(c):
    """The exchanges a layout with c context ranks has: none at c = 1."""
    return EXCHANGES if c > 1 else ["-"]


def simulate(bin_dir, cluster, seq, c, exchange, plan):
    """Iteration time (ms), TFLOP/s per GPU and the largest rank's bytes,
    or why the layout was refused."""
    result = sim_paper.compile_and_simulate(
        bin_dir, cluster, os.path.join(ROOT, "examples", "llama3-8b.model"),
        flags(seq, c, exchange if c > 1 else EXCHANGES[0]), plan)
    if "refused" in result:
        return result
    out = result["simulated"]
    peaks = [int(b.replace(",", "")) for b in re.findall(r"= [0-9.]+ \w+ \(([0-9,]+) bytes\)", out)]
    return {**sim_paper.iteration_figures(out), "peak": max(peaks)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--cluster", default=os.path.join(ROOT, "examples", "clusters", "dgx-h100.json"))
    parser.add_argument("--seqs", default="8192,32768,131072")
    parser.add_argument("--contexts", default="1,2,4,8,16")
    parser.add_argument("--svg", help="draw tokens/s per GPU against c to this file")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--work", help="where the plans go (default: a temporary folder)")
    args = parser.parse_args()
    args.work = args.work or tempfile.mkdtemp(prefix="strata-sim-long-context-")
    os.makedirs(args.work, exist_ok=True)
    hbm = sim_paper.hbm_bytes(args.cluster)
    seqs = [int(s) for s in args.seqs.split(",")]
    contexts = [int(c) for c in args.contexts.split(",")]
    start = time.monotonic()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(simulate, args.bin, args.cluster, seq, c, exchange,
                               os.path.join(args.work, f"s{seq}-c{c}-{exchange}.plan")):
                   (seq, c, exchange)
                   for seq in seqs for c in contexts for exchange in exchanges(c)}
        for future in concurrent.futures.as_completed(futures):
            results[futures[future]] = future.result()

    print(f"LLaMA-3 8B, t={TENSOR} with sequence parallelism, bf16, full recomputation, "
          f"the distributed optimizer, one sequence an iteration; {os.path.basename(args.cluster)}")
    print(f"{'sequence':>9} {'c':>3} {'GPUs':>5} {'exchange':>10} {'iteration':>10} "
          f"{'tokens/s/GPU':>12} {'TFLOP/s':>7} {'memory':>8}")
    for seq in seqs:
        for c in contexts:
            for exchange in exchanges(c):
                head = f"{seq:>9} {c:>3} {TENSOR * c:>5} {exchange:>10}"
                r = results[(seq, c, exchange)]
                if "refused" in r:
                    print(f"{head}  refused: {r['refused']}")
                    continue
                tokens = seq / (r["ms"] / 1e3) / (TENSOR * c)
                fits = "" if r["peak"] <= hbm else "  (does not fit the GPU)"
                print(f"{head} {r['ms'] / 1e3:>9.3f}s {tokens:>12,.0f} {r['tflops']:>7.1f} "
                      f"{r['peak'] / GIB:>5.1f} GiB{fits}")
    if args.svg:
        series = []
        for k, seq in enumerate(seqs):
            for exchange in EXCHANGES:
                points = []
                for c in contexts:
                    r = results[(seq, c, exchange if c > 1 else "-")]
                    if "refused" not in r:
                        points.append((c, seq / (r["ms"] / 1e3) / (TENSOR * c)))
                series.append((f"{seq // 1024}k tokens, {exchange}", points,
                               exchange != EXCHANGES[0], k))
        line_chart(args.svg, f"LLaMA-3 8B on simulated {os.path.basename(args.cluster)} "
                   f"(t={TENSOR}, sp): context parallelism", "context-parallel size c",
                   "tokens/s per GPU", series, xlog=True, ymin=0)
        print(f"wrote {args.svg}")
    print(f"{len(results)} layouts compiled and simulated in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
