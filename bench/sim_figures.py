"""The trends of Figures 12, 13, 14, 16 and 17 of Narayanan et al. (SC'21)
predicted by strata's simulated cluster: each point's model and layout
compiled by strata-compile with the settings of Megatron-LM's
examples/sc21/run_figure_NN.sh (at the commit the paper's scripts name,
6985e58938: sequence 2048, micro-batch 1 unless swept, full recomputation
unless swept, gradients all-reduced after the flush, no interleaving
unless swept) and one iteration simulated on Selene. Each figure is
written as an SVG beside the values the paper plotted (read exactly from
the vector data of its figures, arXiv:2104.04473v5), and printed as a
table with the ratio of the two.

  /usr/bin/python3 bench/sim_figures.py [--bin build/bin] [--figures 12,17]
      [--cluster examples/clusters/selene.json] [--out docs/figures] [--work DIR]
"""
import argparse
import os
import subprocess
import tempfile

import sim_paper
from svg_chart import line_chart

ROOT = sim_paper.ROOT
GIB = 2**30


def model(layers, hidden, heads):
    return ["--set", f"layers={layers}", "--set", f"hidden={hidden}", "--set", f"heads={heads}"]


def layout(t, p, d, mbs, batch, recompute=True, chunks=None, layers=None):
    flags = ["--tensor-model-parallel-size", str(t), "--pipeline-model-parallel-size", str(p),
             "--data-parallel-size", str(d), "--micro-batch-size", str(mbs),
             "--global-batch-size", str(batch), "--bf16", "--target", "cuda",
             # Megatron's local DDP (every figure's script) all-reduced the
             # gradients after the flush.
             "--no-overlap-grad-reduce",
             # What Megatron ran in 2021, as for Table 1: attention unfused,
             # its default dropouts.
             "--attention-backend", "unfused",
             "--set", "hidden_dropout=0.1", "--set", "attention_dropout=0.1"]
    if recompute:
        # Its checkpointing: each layer's whole forward again.
        flags += ["--recompute-granularity", "full", "--recompute-method", "uniform",
                  "--recompute-num-layers", "1"]
    if chunks:
        flags += ["--num-layers-per-virtual-pipeline-stage", str(layers // (p * chunks))]
    return flags


# Each figure: its title and axes, and its series as (name, points, the
# paper's values), a point being (x, model flags, layout flags).
GPT3 = model(96, 12288, 96)


def figures():
    fig12 = [(name, [(b, GPT3, layout(8, 12, 1, 1, b, chunks=chunks, layers=96)) for b in (12, 24, 36, 48, 60)],
              paper)
             for name, chunks, paper in [
                 ("non-interleaved", None, [82, 109, 122, 130, 135]),
                 ("interleaved, 4 chunks", 4, [119, 134, 141, 143, 146])]]
    splits = [(2, 32), (4, 16), (8, 8), (16, 4), (32, 2)]
    fig13 = [(f"batch {b}", [(i, model(32, 20480, 128), layout(t, p, 1, 1, b)) for i, (p, t) in enumerate(splits)],
              paper)
             for b, paper in [(32, [103, 134, 140, 111, 91]), (128, [107, 146, 165, 162, 148])]]
    fig14 = [(f"batch {b}", [(i, model(32, 3840, 32), layout(1, p, 64 // p, 1, b)) for i, (p, _) in enumerate(splits)],
              paper)
             for b, paper in [(32, [62, 56, 53, 49, 43]), (512, [148, 141, 129, 114, 90])]]
    fig16 = [(f"batch {b}", [(mbs, model(32, 15360, 128), layout(8, 8, 1, mbs, b)) for mbs in (1, 2, 4, 8)], paper)
             for b, paper in [(128, [156, 159, 139, 120]), (512, [162, 171, 160, 154])]]
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    fig17 = [(name, [(b, model(80, 12288, 96), layout(8, 16, 1, 1, b, recompute=recompute)) for b in batches],
              paper)
             for name, recompute, paper in [
                 ("with recomputation", True, [0.6, 1.0, 1.8, 3.0, 4.3, 5.7, 6.8, 7.4, 7.8]),
                 ("without", False, [0.7, 1.3, 2.3, 3.9])]]
    tp_names = {i: f"({p},{t})" for i, (p, t) in enumerate(splits)}
    pd_names = {i: f"({p},{64 // p})" for i, (p, _) in enumerate(splits)}
    return {
        12: ("Figure 12: GPT-3 175B on 96 GPUs, t=8 p=12", "global batch", "TFLOP/s per GPU", False, None,
             "tflops", fig12),
        13: ("Figure 13: 162B on 64 GPUs, d=1", "(pipeline, tensor) sizes", "TFLOP/s per GPU", False, tp_names,
             "tflops", fig13),
        14: ("Figure 14: 5.9B on 64 GPUs, t=1", "(pipeline, data) sizes", "TFLOP/s per GPU", False, pd_names,
             "tflops", fig14),
        16: ("Figure 16: 91B on 64 GPUs, t=8 p=8", "micro-batch size", "TFLOP/s per GPU", True, None, "tflops",
             fig16),
        17: ("Figure 17: 145.6B on 128 GPUs, t=8 p=16", "global batch", "sequences per second", True, None,
             "sequences", fig17),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--cluster", default=os.path.join(ROOT, "examples", "clusters", "selene.json"))
    parser.add_argument("--figures", help="numbers of the figures to run, comma-separated (default: all)")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "figures"))
    parser.add_argument("--work", help="where the plans go (default: a temporary folder)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="strata-sim-figures-")
    os.makedirs(work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    hbm = None
    wanted = {int(f) for f in args.figures.split(",")} if args.figures else None
    for number, (title, xlabel, ylabel, xlog, xnames, measure, series) in figures().items():
        if wanted and number not in wanted:
            continue
        print(f"Figure {number}: {title.split(': ', 1)[1]} ({ylabel}; strata / paper)")
        drawn = []
        for index, (name, points, paper) in enumerate(series):
            ours, theirs, cells = [], [], []
            for i, (x, model_flags, layout_flags) in enumerate(points):
                plan = os.path.join(work, f"fig{number}.plan")
                try:
                    r = sim_paper.predict(args.bin, args.cluster, model_flags + layout_flags, plan)
                except subprocess.CalledProcessError:
                    cells.append(f"{x:g}: refused")
                    continue
                if hbm is None:
                    hbm = sim_paper.hbm_bytes(args.cluster)
                batch = int(layout_flags[layout_flags.index("--global-batch-size") + 1])
                value = r["tflops"] if measure == "tflops" else batch / (r["ms"] / 1e3)
                fits = r["peak"] <= hbm
                published = paper[i] if i < len(paper) else None
                cell = f"{xnames[x] if xnames else f'{x:g}'}: {value:.3g}"
                if published is not None:
                    cell += f" / {published:g} ({value / published:.2f})"
                if not fits:
                    cell += f" [{r['peak'] / GIB:.0f} GiB: does not fit]"
                cells.append(cell)
                if fits:
                    ours.append((x, value))
                if published is not None:
                    theirs.append((x, published))
            print(f"  {name}: " + "; ".join(cells), flush=True)
            drawn.append((f"strata, {name}", ours, False, index))
            drawn.append((f"paper, {name}", theirs, True, index))
        line_chart(os.path.join(args.out, f"fig{number}.svg"), title, xlabel, ylabel,
                   [s for s in drawn if s[1]], xlog=xlog, ymin=0, xnames=xnames)


if __name__ == "__main__":
    main()
