"""bf16 training follows fp32: the model trained in fp32 on one device, then
in bf16 (bf16 parameters and activations, fp32 master weights, gradients and
moments) on one device or in the parallel layouts given, on the same text and
seed; every iteration's loss within 2% of the fp32 curve.

  bf16_curve.py EXAMPLES TEXT [--model M] [--set NAME=VALUE]... [--iterations N] [--layout FLAGS]...
      [--backend B]

A layout is strata-compile's flags as one string ("" for one device)."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

LOSS = re.compile(r"lm loss: (\S+)")
p = argparse.ArgumentParser()
p.add_argument("examples")
p.add_argument("data")
p.add_argument("--model", default="gpt-tiny")
p.add_argument("--set", action="append", default=[], help="a model constant, for every curve")
p.add_argument("--iterations", type=int, default=200)
p.add_argument("--micro-batch-size", type=int, default=8)
p.add_argument("--global-batch-size", type=int, default=16)
p.add_argument("--layout", action="append", default=[])
p.add_argument("--backend", choices=["cpu", "cuda", "simt"], default="cpu",
               help="where the bf16 curves run: cuda and simt compile them with --target cuda "
                    "(fp32 stays the CPU's)")
args = p.parse_args()
layouts = args.layout or [""]
work = tempfile.mkdtemp(prefix="strata-bf16-")


def curve(name, flags, run_flags=()):
    plan = os.path.join(work, name + ".plan")
    compiled = subprocess.run(["strata-compile", os.path.join(args.examples, args.model + ".model"),
                               "-o", plan, "--micro-batch-size", str(args.micro_batch_size),
                               "--global-batch-size", str(args.global_batch_size)]
                              + [f"--set={s}" for s in args.set] + flags,
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        sys.exit(f"FAILED: {name}: strata-compile {' '.join(flags)}\n{compiled.stderr}")
    run = subprocess.run(["strata-run", plan, "--train-iters", str(args.iterations), "--lr", "6e-4",
                          "--lr-warmup-iters", "20", "--lr-decay-style", "cosine", "--min-lr", "6e-5",
                          "--data-path", args.data, "--seed", "3"] + list(run_flags),
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"FAILED: {name}: strata-run\n{run.stdout}\n{run.stderr}")
    losses = [float(x) for x in LOSS.findall(run.stdout)]
    if len(losses) != args.iterations:
        sys.exit(f"FAILED: {name}: expected {args.iterations} losses\n{run.stdout}")
    return losses


fp32 = curve("fp32", [])
if fp32[-1] > fp32[0] - 1.0:
    sys.exit("FAILED: fp32 did not learn; the comparison would mean nothing")
print(f"{args.model}: fp32 loss {fp32[0]:.4f} -> {fp32[-1]:.4f}")
failed = False
for i, layout in enumerate(layouts):
    name = "bf16 " + (layout or "one device")
    cuda = args.backend != "cpu"
    bf16 = curve(f"bf16-{i}", ["--bf16"] + layout.split() + (["--target", "cuda"] if cuda else []),
                 ["--backend", args.backend])
    worst = max(abs(b - f) / f for f, b in zip(fp32, bf16))
    at = max(range(args.iterations), key=lambda k: abs(bf16[k] - fp32[k]) / fp32[k])
    ok = worst <= 0.02 and bf16 != fp32
    failed |= not ok
    print(f"{'ok  ' if ok else 'FAIL'} {name}: loss {bf16[0]:.4f} -> {bf16[-1]:.4f}, "
          f"worst relative difference {worst:.4f} at iteration {at + 1} "
          f"(fp32 {fp32[at]:.4f}, bf16 {bf16[at]:.4f})"
          f"{'' if bf16 != fp32 else ' (the fp32 curve itself: bf16 was not in effect)'}",
          flush=True)
if failed:
    sys.exit("FAILED: a bf16 curve is more than 2% off fp32")
print("PASSED")
