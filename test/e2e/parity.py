"""Parallel layouts against one device, number for number.

Trains the model on one device, then in each layout (tensor-parallel t,
data-parallel d, sequence parallel, distributed optimizer) from the same
seed on the same batches, and compares every iteration's loss (7 printed
digits) and every gathered parameter at the end (--save-params).

Relative error of a parameter: ||layout - single||_2 / ||single||_2 (see
oracle.py for why not element-wise). A parameter the single-device run left
within lr/100 of its start has no gradient in exact arithmetic (GPT's key
bias): rounding noise alone moves it, differently in every layout, so it is
only checked to stay that still.
"""
import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

LOSS = re.compile(r"lm loss: (\S+)")


def run(cmd, env=None):
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{result.stdout}\n{result.stderr}")
    return result.stdout


def train(args, work, name, t, d, sp, distopt, mpi=False):
    plan = os.path.join(work, name + ".plan")
    cmd = ["strata-compile", os.path.join(args.examples, args.model + ".model"), "-o", plan,
           "--micro-batch-size", str(args.micro_batch_size),
           "--global-batch-size", str(args.global_batch_size),
           "--tensor-model-parallel-size", str(t), "--data-parallel-size", str(d)]
    cmd += [f"--set={s}" for s in args.set]
    if sp:
        cmd.append("--sequence-parallel")
    if distopt:
        cmd.append("--use-distributed-optimizer")
    run(cmd)
    params = os.path.join(work, name + ".safetensors")
    cmd = ["strata-run", plan, "--train-iters", str(args.train_iters), "--seed", str(args.seed),
           "--lr", str(args.lr), "--clip-grad", "1.0", "--save-params", params,
           "--adam-eps", str(args.adam_eps)]
    if args.data:  # else synthetic tokens from the seed
        cmd += ["--data-path", args.data]
    env = None
    if mpi:
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        cmd = ["mpirun", "-np", str(t * d)] + cmd
    log = run(cmd, env)
    losses = [float(x) for x in LOSS.findall(log)]
    if len(losses) != args.train_iters:
        sys.exit(f"FAILED: {name}: expected {args.train_iters} losses:\n{log}")
    return losses, safetensors_io.read(params)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--examples", required=True)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--micro-batch-size", type=int, default=2)
    p.add_argument("--global-batch-size", type=int, default=8)
    p.add_argument("--train-iters", type=int, default=5)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--adam-eps", type=float, default=1e-6)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--tensor", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--data-parallel", type=int, nargs="+", default=[1, 2])
    p.add_argument("--mpi", action="store_true", help="run the layouts under mpirun")
    p.add_argument("--only", help="one layout, as t,d,sp,distopt (0/1 flags)")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--data-path", dest="data", default="/usr/share/common-licenses/GPL-3",
                   help="a text to train on ('' for synthetic tokens)")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="strata-parity-")

    base_losses, base = train(args, work, "single", 1, 1, False, False)
    start = os.path.join(work, "start.safetensors")
    run(["strata-compile", os.path.join(args.examples, args.model + ".model"), "-o",
         os.path.join(work, "start.plan"), "--micro-batch-size", str(args.micro_batch_size),
         "--global-batch-size", str(args.global_batch_size)] + [f"--set={s}" for s in args.set])
    run(["strata-run", os.path.join(work, "start.plan"), "--seed", str(args.seed), "--save-params", start])
    initial = safetensors_io.read(start)
    still = {n for n in base if (base[n] - initial[n]).abs().max().item() < args.lr / 100}

    if args.only:
        t, d, sp, distopt = (int(x) for x in args.only.split(","))
        layouts = [(t, d, bool(sp), bool(distopt))]
    else:
        layouts = [(t, d, sp, distopt)
                   for t, d, sp, distopt in itertools.product(args.tensor, args.data_parallel, (False, True), (False, True))
                   if t * d <= 8]
    failed = 0
    for t, d, sp, distopt in layouts:
        name = f"t{t}-d{d}{'-sp' if sp else ''}{'-distopt' if distopt else ''}"
        losses, params = train(args, work, name, t, d, sp, distopt, args.mpi)
        loss_error = max(abs(a - b) / abs(b) for a, b in zip(losses, base_losses))
        worst, worst_name, drift = 0.0, "", 0.0
        if set(params) != set(base):
            sys.exit(f"FAILED: {name}: parameter names differ")
        for n in base:
            if tuple(params[n].shape) != tuple(base[n].shape):
                sys.exit(f"FAILED: {name}: {n} has shape {tuple(params[n].shape)}, expected {tuple(base[n].shape)}")
            if n in still:
                drift = max(drift, (params[n] - initial[n]).abs().max().item())
                continue
            error = ((params[n].double() - base[n].double()).norm() / base[n].double().norm()).item()
            if error > worst:
                worst, worst_name = error, n
        ok = loss_error <= args.tolerance and worst <= args.tolerance and drift < args.lr / 100
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:24} loss {loss_error:.1e}  params {worst:.1e} ({worst_name})"
              f"{f'  still params drift {drift:.1e}' if still else ''}")
    print(f"{len(layouts) - failed} of {len(layouts)} layouts match one device"
          f" ({len(base)} parameters, {len(still)} with zero gradient)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
