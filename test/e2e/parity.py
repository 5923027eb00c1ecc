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


class Layout:
    """One parallel layout: t, d, p, context-parallel c, layers per virtual
    stage (0: one chunk per stage), microbatches m per data-parallel rank,
    schedule, recompute, sequence parallel, distributed optimizer, and how
    context parallelism exchanges keys (the ring, or all-gathered)."""

    def __init__(self, t=1, d=1, p=1, lpv=0, m=None, sched="", rc="none", sp=False,
                 distopt=False, c=1):
        self.t, self.d, self.p, self.lpv, self.sched, self.rc = t, d, p, lpv, sched, rc
        self.c = c
        self.allgather = False
        self.sp, self.distopt = sp, distopt
        self.m = m
        self.first = self.last = None  # uneven first/last stage layers

    def global_batch(self, args):
        if self.m is None:
            return args.global_batch_size
        return self.m * args.micro_batch_size * self.d

    def ranks(self):
        return self.t * self.c * self.d * self.p

    def name(self, args):
        parts = [f"t{self.t}", f"d{self.d}"]
        if self.c > 1:
            parts.append(f"c{self.c}" + ("-allgather" if self.allgather else ""))
        if self.p > 1 or self.lpv or self.rc != "none" or self.sched:
            parts += [f"p{self.p}", f"v{self.virtual(args)}", f"m{self.global_batch(args) // (args.micro_batch_size * self.d)}"]
            parts.append(self.sched or ("interleaved" if self.virtual(args) > 1 else "1f1b"))
            if self.rc != "none":
                parts.append(self.rc)
            if self.first is not None:
                parts.append(f"first{self.first}")
            if self.last is not None:
                parts.append(f"last{self.last}")
        if self.sp:
            parts.append("sp")
        if self.distopt:
            parts.append("distopt")
        return "-".join(parts)

    def virtual(self, args):
        return args.layers // (self.p * self.lpv) if self.lpv else 1

    def flags(self, args):
        f = ["--global-batch-size", str(self.global_batch(args)),
             "--tensor-model-parallel-size", str(self.t), "--data-parallel-size", str(self.d),
             "--pipeline-model-parallel-size", str(self.p)]
        if self.c > 1:
            f += ["--context-parallel-size", str(self.c)]
        if self.allgather:
            f += ["--cp-comm-type", "all_gather"]
        if self.lpv:
            f += ["--num-layers-per-virtual-pipeline-stage", str(self.lpv)]
        if self.sched:
            f += ["--pipeline-schedule", self.sched]
        if self.sched == "zb-auto":  # its order comes from costs on a cluster
            f += ["--cluster", os.path.join(args.examples, "clusters", "dgx-h200.json")]
        if self.rc == "uniform":  # Megatron's spelling: each layer's whole forward again
            f += ["--recompute-granularity", "full", "--recompute-method", "uniform",
                  "--recompute-num-layers", "1"]
        elif self.rc != "none":
            f += ["--recompute-granularity", self.rc]
        if self.first is not None:
            f += ["--decoder-first-pipeline-num-layers", str(self.first)]
        if self.last is not None:
            f += ["--decoder-last-pipeline-num-layers", str(self.last)]
        if self.sp:
            f.append("--sequence-parallel")
        if self.distopt:
            f.append("--use-distributed-optimizer")
        return f


def compile_plan(args, work, name, flags):
    """The plan named `name`: compiled into `work`, or taken from --plans
    (compiled elsewhere with --compile-only: a GPU machine without LLVM)."""
    if args.plans:
        plan = os.path.join(args.plans, name + ".plan")
        if not os.path.isfile(plan):
            sys.exit(f"FAILED: {plan} is missing (compile it with --compile-only)")
        return plan
    plan = os.path.join(args.compile_only or work, name + ".plan")
    run(["strata-compile", os.path.join(args.examples, args.model + ".model"), "-o", plan,
         "--micro-batch-size", str(args.micro_batch_size)] + flags + [f"--set={s}" for s in args.set]
        + args.compile_flag)
    return plan


def train(args, work, name, layout, mpi=False, run_flags=None):
    plan = compile_plan(args, work, name, layout.flags(args))
    params = os.path.join(work, name + ".safetensors")
    cmd = [args.strata_run, plan, "--train-iters", str(args.train_iters), "--seed", str(args.seed),
           "--lr", str(args.lr), "--clip-grad", "1.0", "--save-params", params,
           "--adam-eps", str(args.adam_eps)] + (args.run_flag if run_flags is None else run_flags)
    if args.data and args.data != [""]:  # else synthetic tokens from the seed
        cmd += ["--data-path"] + args.data
    env = None
    if mpi:
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        cmd = ["mpirun", "-np", str(layout.ranks())] + cmd
    log = run(cmd, env)
    if args.print_load:  # each process's --report-load line, in rank order
        for line in sorted(l for l in log.splitlines() if " decoded " in l):
            print(f"{name}: {line}")
    losses = [float(x) for x in LOSS.findall(log)]
    if len(losses) != args.train_iters:
        sys.exit(f"FAILED: {name}: expected {args.train_iters} losses:\n{log}")
    return losses, safetensors_io.read(params)


def parse_layout(text):
    """t2,d1,c2,p2,lpv1,m4,interleaved,full,first1,last2,sp,distopt,allgather:
    any order (uniform: full, as Megatron's --recompute-method uniform runs
    it; allgather: context parallelism's keys gathered, not the ring)."""
    layout = Layout()
    for part in text.split(","):
        if part in ("gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-auto", "zb-v"):
            layout.sched = part
        elif part in ("full", "selective", "uniform"):
            layout.rc = part
        elif part == "sp":
            layout.sp = True
        elif part == "distopt":
            layout.distopt = True
        elif part == "allgather":
            layout.allgather = True
        elif part.startswith("first"):
            layout.first = int(part[5:])
        elif part.startswith("last"):
            layout.last = int(part[4:])
        elif part.startswith("lpv"):
            layout.lpv = int(part[3:])
        elif part[:1] in "tdpmc" and part[1:].isdigit():
            setattr(layout, part[0], int(part[1:]))
        else:
            sys.exit(f"bad layout part '{part}' in '{text}'")
    return layout


def pipeline_matrix(args):
    """Every p in {1, 2, 4}, v in {1, 2}, m in {p, 2p}, the schedules that
    fit, recompute none/full/selective; each with t=1,d=1 and with t=2 and
    d=2 where t·p·d <= 8. GPipe with virtual stages on four stages and 2p
    microbatches would deadlock where sends wait to be received (a
    chunk's forward overwrites the output the next stage has not taken;
    strata-compile refuses it)."""
    layouts = []
    for p, v in itertools.product((1, 2, 4), (1, 2)):
        lpv = args.layers // (p * v) if v > 1 else 0
        if v > 1 and args.layers % (p * v):
            continue
        for m, rc, (t, d) in itertools.product((p, 2 * p), ("none", "full", "selective"),
                                               ((1, 1), (2, 1), (1, 2), (2, 2))):
            if t * p * d > 8:
                continue
            for sched in ("gpipe", "1f1b" if v == 1 else "interleaved"):
                if p == 1 and v == 1 and rc == "none" and sched == "1f1b":
                    continue  # no pipeline at all: the tensor/data tests
                if sched == "gpipe" and v > 1 and p > 2 and m > p:
                    continue
                layouts.append(Layout(t, d, p, lpv, m, sched, rc))
    return layouts


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
    p.add_argument("--layout", action="append", default=[],
                   help="a layout such as t2,d1,p2,lpv1,m4,interleaved,full (repeatable)")
    p.add_argument("--pipeline-matrix", action="store_true",
                   help="the pipeline layouts: p, v, m, schedules, recompute, with t and d")
    p.add_argument("--layers", type=int, default=4, help="the model's layers (for v)")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--strata-run", default="strata-run",
                   help="the strata-run to test the layouts with (strata-run-tsan)")
    p.add_argument("--run-flag", action="append", default=[],
                   help="a flag for strata-run (repeatable)")
    p.add_argument("--print-load", action="store_true",
                   help="run with --report-load and print which templates each process decoded")
    p.add_argument("--baseline-run-flag", action="append", default=None,
                   help="strata-run's flags for the one-device baseline, if not --run-flag's "
                        "(the cuda layouts against the CPU: --baseline-run-flag=--backend "
                        "--baseline-run-flag=cpu)")
    p.add_argument("--compile-flag", action="append", default=[],
                   help="a flag for strata-compile (repeatable)")
    p.add_argument("--compile-only", metavar="DIR",
                   help="only compile every plan the run needs into DIR (for --plans)")
    p.add_argument("--grep", metavar="REGEX",
                   help="only the layouts whose names match REGEX (applied before --shard)")
    p.add_argument("--shard", metavar="K/N",
                   help="only every N-th layout from the K-th (0-based): N runs side by side")
    p.add_argument("--plans", metavar="DIR",
                   help="take the plans from DIR (written by --compile-only) instead of compiling")
    p.add_argument("--data-path", dest="data", nargs="+", default=["/usr/share/common-licenses/GPL-3"],
                   help="a text to train on, or Megatron's indexed data ([weight] prefix...); "
                   "'' for synthetic tokens")
    args = p.parse_args()
    if args.print_load:
        args.run_flag.append("--report-load")
    work = tempfile.mkdtemp(prefix="strata-parity-")

    if args.only:
        t, d, sp, distopt = (int(x) for x in args.only.split(","))
        layouts = [Layout(t, d, sp=bool(sp), distopt=bool(distopt))]
    elif args.layout or args.pipeline_matrix:
        layouts = [parse_layout(text) for text in args.layout]
        if args.pipeline_matrix:
            layouts += pipeline_matrix(args)
    else:
        layouts = [Layout(t, d, sp=sp, distopt=distopt)
                   for t, d, sp, distopt in itertools.product(args.tensor, args.data_parallel, (False, True), (False, True))
                   if t * d <= 8]

    if args.grep:
        layouts = [layout for layout in layouts if re.search(args.grep, layout.name(args))]
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        if not 0 <= k < n:
            sys.exit(f"--shard {args.shard}: K must be in [0, N)")
        layouts = layouts[k::n]
    if args.compile_only:
        os.makedirs(args.compile_only, exist_ok=True)
        names = set()
        for layout in layouts:
            gb = layout.global_batch(args)
            for name, flags in ((f"single-gb{gb}", Layout(m=gb // args.micro_batch_size).flags(args)),
                                (f"start-gb{gb}", ["--global-batch-size", str(gb)]),
                                (layout.name(args), layout.flags(args))):
                if name not in names:
                    names.add(name)
                    compile_plan(args, work, name, flags)
        print(f"compiled {len(names)} plans for {len(layouts)} layouts into {args.compile_only}")
        return

    # One device, once per global batch the layouts use.
    baselines = {}

    def baseline(gb):
        if gb not in baselines:
            losses, params = train(args, work, f"single-gb{gb}", Layout(m=gb // args.micro_batch_size),
                                   run_flags=args.baseline_run_flag)
            start = os.path.join(work, f"start-gb{gb}.safetensors")
            plan = compile_plan(args, work, f"start-gb{gb}", ["--global-batch-size", str(gb)])
            run([args.strata_run, plan, "--seed", str(args.seed), "--save-params", start])
            initial = safetensors_io.read(start)
            still = {n for n in params if (params[n] - initial[n]).abs().max().item() < args.lr / 100}
            baselines[gb] = (losses, params, initial, still)
        return baselines[gb]

    failed = 0
    for layout in layouts:
        name = layout.name(args)
        base_losses, base, initial, still = baseline(layout.global_batch(args))
        losses, params = train(args, work, name, layout, args.mpi)
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
        print(f"{'ok  ' if ok else 'FAIL'} {name:40} loss {loss_error:.1e}  params {worst:.1e} ({worst_name})"
              f"{f'  still params drift {drift:.1e}' if still else ''}", flush=True)
    counts = {len(b[1]) for b in baselines.values()}
    print(f"{len(layouts) - failed} of {len(layouts)} layouts match one device"
          f" ({'/'.join(map(str, counts))} parameters)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
