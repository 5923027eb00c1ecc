"""Checkpoints against the uninterrupted run: train --train-iters in the
save layout; train again with --exit-interval --save-at, which saves there and stops; then resume
from that checkpoint in each --load layout to --train-iters. The resumed
losses must equal the uninterrupted run's: bit for bit (the log's values
and the final parameters' bytes) when the layout is the same, within
--tolerance relative when the checkpoint is resharded.

  checkpoint.py --examples DIR --data-path PREFIX --save-layout FLAGS
      --load-layout FLAGS [--load-layout FLAGS ...] [--mpi-load]

A layout is strata-compile's flags in one string ("" for one device); the
model is --model with --set values."""
import argparse
import os
import re
import shlex
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from strata_runs import MPI_ENV, losses, run  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--examples", required=True)
    p.add_argument("--model", default="gpt-tiny")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--data-path", nargs="+", required=True)
    p.add_argument("--save-layout", required=True)
    p.add_argument("--load-layout", action="append", required=True)
    p.add_argument("--train-iters", type=int, default=10)
    p.add_argument("--save-at", type=int, default=5)
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--mpi-load", action="store_true", help="resume under mpirun")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="strata-checkpoint-")
    common = ["--micro-batch-size", "2", "--global-batch-size", "8"] + [f"--set={s}" for s in args.set]
    # Evaluations every 3 iterations too: they must leave training as it was.
    run_flags = ["--seed", "7", "--lr", "1e-3", "--lr-warmup-iters", "2", "--lr-decay-style", "cosine",
                 "--eval-interval", "3", "--eval-iters", "2", "--data-path"] + args.data_path

    def compile_plan(name, layout):
        plan = os.path.join(work, name + ".plan")
        run(["strata-compile", os.path.join(args.examples, args.model + ".model"), "-o", plan]
            + common + shlex.split(layout))
        return plan

    saved = compile_plan("save", args.save_layout)
    full_params = os.path.join(work, "full.safetensors")
    full = losses(run(["strata-run", saved, "--train-iters", str(args.train_iters),
                       "--save-params", full_params] + run_flags))
    ckpt = os.path.join(work, "ckpt")
    first = run(["strata-run", saved, "--train-iters", str(args.train_iters), "--save", ckpt,
                 "--exit-interval", str(args.save_at)] + run_flags)
    if f"saved checkpoint of iteration {args.save_at}" not in first:
        sys.exit(f"FAILED: no checkpoint saved:\n{first}")
    worst_all = 0.0
    for i, layout in enumerate(args.load_layout):
        plan = compile_plan(f"load{i}", layout)
        params = os.path.join(work, f"resumed{i}.safetensors")
        cmd = ["strata-run", plan, "--train-iters", str(args.train_iters), "--load", ckpt,
               "--save-params", params] + run_flags
        env = None
        if args.mpi_load:
            env = MPI_ENV
            cmd = ["mpirun", "-np", str(world(plan))] + cmd
        log = run(cmd, env)
        resumed = losses(log)
        expected = list(range(args.save_at + 1, args.train_iters + 1))
        if sorted(resumed) != expected:
            sys.exit(f"FAILED: layout '{layout}' logged iterations {sorted(resumed)}, not {expected}\n{log}")
        same = layout == args.save_layout and not args.mpi_load
        worst = 0.0
        for it in expected:
            a, b = float(full[it]), float(resumed[it])
            worst = max(worst, abs(a - b) / abs(a))
            if same and full[it] != resumed[it]:
                sys.exit(f"FAILED: iteration {it}: {resumed[it]} resumed, {full[it]} uninterrupted")
        if same:
            with open(full_params, "rb") as f, open(params, "rb") as g:
                if f.read() != g.read():
                    sys.exit("FAILED: the resumed run's parameters differ from the uninterrupted run's")
        if worst > args.tolerance:
            sys.exit(f"FAILED: layout '{layout}': losses {worst:.2e} relative from the uninterrupted run")
        worst_all = max(worst_all, worst)
        how = "bitwise, parameters byte-equal" if same else f"worst {worst:.1e} relative"
        print(f"resumed '{layout}' from '{args.save_layout}' at {args.save_at}: "
              f"iterations {expected[0]}-{expected[-1]} match ({how})")
    print("PASSED")


def world(plan):
    out = run(["strata-inspect", plan])
    return int(re.search(r"(\d+) ranks", out)[1])


if __name__ == "__main__":
    main()
