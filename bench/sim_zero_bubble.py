"""What the zero-bubble schedules buy, predicted by strata's simulated
cluster: the rows of Table 1 of Narayanan et al. (SC'21) that have a
pipeline, and GPT-3 175B at the settings of the paper's Figure 12 (t=8,
p=12, micro-batch 1), each compiled as bench/sim_paper.py compiles Table 1
(Megatron-LM's run settings: full recomputation as its checkpointing ran
it, gradients all-reduced after the flush, attention unfused, its
dropouts) under each schedule — interleaved 1F1B (the row's virtual stages,
or two chunks a stage where the row has none), 1F1B, ZB-H1, ZB-H2, ZB-V
(two chunks a stage in a V) and zb-auto (priced on the same cluster, its
stash within 1F1B's; and again,
`zb-auto=`, within the stash of the faster of the paper's two) — and one
iteration simulated. Prints each schedule's iteration time, pipeline
bubble, activation memory (the largest stage's workspace and stash) and
peak, and for each row the best zero-bubble schedule that keeps no more
activation memory than the best of the paper's two, with its gain. With
--svg, draws the bubble against the number of microbatches on GPT-3 175B
(Figure 12's batch sweep) for each schedule.

  /usr/bin/python3 bench/sim_zero_bubble.py [--bin build/bin] [--rows 1008.0|1008.0,175|all]
      [--cluster examples/clusters/selene.json] [--svg docs/figures/zero-bubble.svg]
      [--jobs N] [--work DIR]
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
SCHEDULES = ["interleaved", "1f1b", "zb-h1", "zb-h2", "zb-v", "zb-auto"]
PAPERS = ("interleaved", "1f1b")  # the paper's schedules, the baseline
UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def gpt3_row(batch):
    """GPT-3 175B as Figure 12 runs it, as a Table 1 row."""
    return {"params_b": "175", "heads": "96", "hidden": "12288", "layers": "96", "tp": "8",
            "pp": "12", "gpus": "96", "batch": str(batch), "mbs": "1", "vp_layers_per_stage": "-"}


def schedule_flags(row, schedule, cluster, stash=None):
    """The row's flags (sim_paper's) for `schedule`; zb-auto's stash
    within `stash` bytes a stage where given."""
    flags = sim_paper.compile_flags(row)
    if "--num-layers-per-virtual-pipeline-stage" in flags:
        i = flags.index("--num-layers-per-virtual-pipeline-stage")
        del flags[i:i + 2]
    layers, p = int(row["layers"]), int(row["pp"])
    if schedule == "zb-v":  # two chunks a stage, always
        if layers % (2 * p):
            return None
        flags += ["--num-layers-per-virtual-pipeline-stage", str(layers // (2 * p)),
                  "--pipeline-schedule", schedule]
    elif schedule == "interleaved":
        if row["vp_layers_per_stage"] != "-":
            per_chunk = int(row["vp_layers_per_stage"])
        elif layers % (2 * p) == 0:
            per_chunk = layers // (2 * p)
        else:
            return None
        flags += ["--num-layers-per-virtual-pipeline-stage", str(per_chunk)]
    else:
        flags += ["--pipeline-schedule", schedule]
    if schedule == "zb-auto":
        flags += ["--cluster", cluster]
    if stash:
        flags += ["--max-activation-memory", str(int(stash))]
    return flags


def size(text):
    number, unit = text.split()
    return float(number) * UNITS[unit]


def simulate(bin_dir, cluster, flags, plan):
    """sim_paper's iteration figures, the bubble and the largest stage's
    activation memory (workspace + stash), with zb-auto's choice where it
    says it."""
    result = sim_paper.compile_and_simulate(
        bin_dir, cluster, os.path.join(ROOT, "examples", "gpt-1t.model"), flags, plan)
    if "refused" in result:
        return result
    out = result["simulated"]
    chose = re.search(r"chose (.*?) of \d+ orders", result["compiled"])
    stages = re.findall(r"memory [0-9.]+ \w+ persistent \+ ([0-9.]+ \w+) workspace \+ "
                        r"([0-9.]+ \w+) stash = [0-9.]+ \w+ \(([0-9,]+) bytes\)", out)
    return {
        **sim_paper.iteration_figures(out),
        "bubble": float(re.search(r"breakdown .*pipeline bubble [0-9.e+-]+ ms \(([0-9.]+)%\)", out)[1]),
        "activations": max(size(w) + size(s) for w, s, _ in stages),
        "stash": max(size(s) for _, s, _ in stages),
        "peak": max(int(b.replace(",", "")) for _, _, b in stages),
        "chose": chose[1] if chose else None,
    }


def run_all(args, jobs):
    """Results by key, compiled and simulated `args.jobs` at a time; a job
    is (key, row, schedule, zb-auto's stash limit or None)."""
    results = {}
    # zb-auto's compile searches (most of a row's time): started first, so
    # that the other schedules run beside it, not after it.
    jobs = sorted(jobs, key=lambda job: job[2] != "zb-auto")
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {}
        for key, row, schedule, stash in jobs:
            flags = schedule_flags(row, schedule, args.cluster, stash)
            if flags is None:
                results[key] = {"refused": "the layers do not make two chunks a stage"}
                continue
            plan = os.path.join(args.work, "-".join(key).replace("/", "_") + ".plan")
            futures[pool.submit(simulate, args.bin, args.cluster, flags, plan)] = key
        for future in concurrent.futures.as_completed(futures):
            results[futures[future]] = future.result()
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--cluster", default=os.path.join(ROOT, "examples", "clusters", "selene.json"))
    parser.add_argument("--table", default=sim_paper.TABLE)
    parser.add_argument("--rows", default="1008.0",
                        help="params (billions) of the rows, comma-separated; 175 is GPT-3 at "
                             "Figure 12's settings; all: every row with p > 1 (default: 1008.0, "
                             "the 1T row, 49 s on 2 cores)")
    parser.add_argument("--svg", help="draw the bubble against m on GPT-3 175B to this file")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--work", help="where the plans go (default: a temporary folder)")
    args = parser.parse_args()
    args.work = args.work or tempfile.mkdtemp(prefix="strata-sim-zero-bubble-")
    os.makedirs(args.work, exist_ok=True)
    start = time.monotonic()
    hbm = sim_paper.hbm_bytes(args.cluster)
    wanted = None if args.rows == "all" else set(args.rows.split(","))
    rows = [r for r in sim_paper.rows(args.table) if int(r["pp"]) > 1] + [gpt3_row(60)]
    rows = [r for r in rows if not wanted or r["params_b"] in wanted]
    jobs = [((r["params_b"], s), r, s, None) for r in rows for s in SCHEDULES]
    sweep = (12, 24, 36, 48, 60)
    if args.svg:
        jobs += [((f"175-b{b}", s), gpt3_row(b), s, None) for b in sweep for s in SCHEDULES]
    results = run_all(args, jobs)
    # zb-auto again, allowed the stash of the faster of the paper's two.
    def baseline(name):
        runs = [results[(name, s)] for s in PAPERS if "refused" not in results[(name, s)]
                and results[(name, s)]["peak"] <= hbm]
        return min(runs, key=lambda r: r["ms"]) if runs else None
    matched = [((r["params_b"], "zb-auto="), r, "zb-auto", baseline(r["params_b"])["stash"])
               for r in rows if baseline(r["params_b"])]
    results.update(run_all(args, matched))
    jobs += matched

    print(f"{'model':>7} {'schedule':>11} {'iteration':>10} {'TFLOP/s':>7} {'bubble':>6} "
          f"{'activations':>11} {'peak':>8}")
    for row in rows:
        name = row["params_b"]
        t, p = int(row["tp"]), int(row["pp"])
        d = int(row["gpus"]) // (t * p)
        m = int(row["batch"]) // (d * int(row["mbs"]))
        print(f"{name + 'B':>7}  t={t} p={p} d={d} m={m}")
        for schedule in SCHEDULES + ["zb-auto="]:
            if (name, schedule) not in results:
                continue
            r = results[(name, schedule)]
            if "refused" in r:
                print(f"{'':>7} {schedule:>11}  refused: {r['refused']}")
                continue
            fits = "" if r["peak"] <= hbm else "  (does not fit the GPU)"
            chose = f"  (chose {r['chose']})" if r["chose"] else ""
            print(f"{'':>7} {schedule:>11} {r['ms'] / 1e3:>9.2f}s {r['tflops']:>7.1f} "
                  f"{r['bubble']:>5.1f}% {r['activations'] / GIB:>7.1f} GiB {r['peak'] / GIB:>4.0f} GiB"
                  f"{fits}{chose}")
        usable = {s: results[(name, s)] for s in SCHEDULES + ["zb-auto="]
                  if (name, s) in results and "refused" not in results[(name, s)]
                  and results[(name, s)]["peak"] <= hbm}
        papers = [s for s in PAPERS if s in usable]
        if not papers:
            print(f"{'':>7} neither of the paper's schedules fits the GPU")
            continue
        base = min(papers, key=lambda s: usable[s]["ms"])
        limit = usable[base]["activations"]
        zero = [s for s in usable if s not in PAPERS and usable[s]["activations"] <= limit]
        if not zero:
            over = ", ".join(f"{s} {usable[s]['activations'] / limit - 1:+.0%}"
                             for s in usable if s not in PAPERS)
            print(f"{'':>7} no zero-bubble schedule keeps {base}'s activation memory "
                  f"({limit / GIB:.1f} GiB): {over or 'none fits the GPU'}")
            continue
        best = min(zero, key=lambda s: usable[s]["ms"])
        gain = usable[base]["ms"] / usable[best]["ms"] - 1
        print(f"{'':>7} best within {base}'s activation memory ({limit / GIB:.1f} GiB): {best}, "
              f"{gain:+.1%} throughput over {base} (bubble {usable[base]['bubble']:.1f}% -> "
              f"{usable[best]['bubble']:.1f}%)")

    if args.svg:
        series = []
        for index, schedule in enumerate(SCHEDULES):
            points = [(b, results[(f"175-b{b}", schedule)]["bubble"]) for b in sweep
                      if "refused" not in results[(f"175-b{b}", schedule)]]
            series.append((schedule, points, False, index))
        line_chart(args.svg, "GPT-3 175B on 96 simulated Selene GPUs (t=8, p=12): pipeline bubble",
                   "microbatches per iteration (m)", "bubble (% of the iteration)",
                   [s for s in series if s[1]], ymin=0)
        print(f"wrote {args.svg}")
    print(f"{len(jobs)} plans compiled and simulated in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
