"""kill -9 at random moments while a run saves a checkpoint every
iteration: whatever moment the process dies, the marker must name a
complete checkpoint, and resuming from it must give the next iteration's
loss of the uninterrupted run, bit for bit. (With no marker yet, the run
starts from iteration 0.) Prints how many kills landed inside a save (a
.tmp directory left behind), and fails if none did.

  checkpoint_kill.py --examples DIR --data-path PREFIX [--trials 20]
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from strata_runs import losses, run  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--examples", required=True)
    p.add_argument("--data-path", required=True)
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--train-iters", type=int, default=12)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="strata-kill-")
    plan = os.path.join(work, "step.plan")
    run(["strata-compile", os.path.join(args.examples, "gpt-tiny.model"), "-o", plan,
         "--tensor-model-parallel-size", "2", "--data-parallel-size", "2",
         "--use-distributed-optimizer", "--micro-batch-size", "2", "--global-batch-size", "8"])
    flags = ["--seed", "3", "--lr", "1e-3", "--eval-iters", "0", "--data-path", args.data_path,
             "--train-iters", str(args.train_iters)]
    full = losses(run(["strata-run", plan] + flags))
    # How long a run that saves every iteration takes: the kills fall in it.
    ckpt = os.path.join(work, "ckpt")
    began = time.monotonic()
    run(["strata-run", plan, "--save", ckpt, "--save-interval", "1"] + flags)
    span = time.monotonic() - began
    rng = random.Random()
    seed = rng.randrange(2**32)
    rng.seed(seed)
    print(f"checkpoint_kill.py seed {seed}; a saving run takes {span:.2f} s")
    inside, resumed, fresh = 0, 0, 0
    for trial in range(args.trials):
        shutil.rmtree(ckpt, ignore_errors=True)
        proc = subprocess.Popen(["strata-run", plan, "--save", ckpt, "--save-interval", "1"] + flags,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.0) * span)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        leftovers = [n for n in os.listdir(ckpt)] if os.path.isdir(ckpt) else []
        inside += any(n.endswith(".tmp") for n in leftovers)
        marker = os.path.join(ckpt, "latest_checkpointed_iteration.txt")
        if not os.path.exists(marker):
            log = run(["strata-run", plan, "--load", ckpt, "--exit-interval", "1"] + flags)
            if "training from iteration 0" not in log:
                sys.exit(f"FAILED: trial {trial}: no marker, yet:\n{log}")
            fresh += 1
            continue
        with open(marker) as f:
            k = int(f.read())
        if k >= args.train_iters:
            continue  # the run had finished
        log = run(["strata-run", plan, "--load", ckpt, "--exit-interval", str(k + 1)] + flags)
        got = losses(log)
        if list(got) != [k + 1] or got[k + 1] != full[k + 1]:
            sys.exit(f"FAILED: trial {trial}: resumed after iteration {k}: {got}, "
                     f"uninterrupted {full[k + 1]}\n{log}")
        resumed += 1
    print(f"{args.trials} kills: {resumed} resumed from the last complete checkpoint bit for bit, "
          f"{fresh} before the first; {inside} inside a save")
    # The point is kills inside saves: none landing there tests nothing.
    if inside == 0:
        sys.exit(f"FAILED: no kill of {args.trials} landed inside a save")
    print("PASSED")


if __name__ == "__main__":
    main()
