"""Times one training step (forward, backward, AdamW; microbatches
accumulated) in strata and in PyTorch, on the same machine, model, batch and
thread count, in one run, and prints the ratio.

  /usr/bin/python3 bench/cpu_step.py [--threads N] [--iters K]

Models: gpt-tiny (examples/gpt-tiny.model) and a ~10M-parameter GPT of the
same shape (6 layers, hidden 384, 6 heads, sequence 256). PyTorch runs the
same model (test/e2e/torch_models.py) eagerly with torch.optim.AdamW and
clip_grad_norm_. Times are medians over K steps after 2 warm-up steps.
Debian's torch calls OpenBLAS, whose own thread pool ignores
torch.set_num_threads: OPENBLAS_NUM_THREADS is set to the thread count
before torch loads, so that both sides use the same number of cores.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

CONFIGS = [
    # name, --set overrides, micro batch, global batch
    ("gpt-tiny", dict(layers=4, hidden=64, heads=4, seq=64, vocab=256), 8, 16),
    ("gpt-10m", dict(layers=6, hidden=384, heads=6, seq=256, vocab=256), 4, 8),
]


def strata_ms(bin_dir, name, sets, micro, global_batch, threads, iters, work):
    plan = os.path.join(work, name + ".plan")
    cmd = [os.path.join(bin_dir, "strata-compile"), os.path.join(ROOT, "examples", "gpt-tiny.model"),
           "-o", plan, "--micro-batch-size", str(micro), "--global-batch-size", str(global_batch)]
    for key, value in sets.items():
        cmd += ["--set", f"{key}={value}"]
    compiled = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    params = int(re.search(r"([\d,]+) parameters", compiled).group(1).replace(",", ""))
    log = subprocess.run([os.path.join(bin_dir, "strata-run"), plan, "--train-iters", str(iters + 2),
                          "--threads", str(threads), "--lr", "1e-4"],
                         check=True, capture_output=True, text=True).stdout
    times = [float(x) for x in re.findall(r"per iteration \(ms\): ([\d.]+)", log)][2:]
    return statistics.median(times), params


def torch_ms(sets, micro, global_batch, threads, iters):
    import torch
    from torch_models import GPT
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = GPT(layers=sets["layers"], hidden=sets["hidden"], heads=sets["heads"],
                seq=sets["seq"], vocab=sets["vocab"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    m = global_batch // micro
    tokens = torch.randint(0, sets["vocab"], (m, micro, sets["seq"]))
    labels = torch.randint(0, sets["vocab"], (m, micro, sets["seq"]))
    times = []
    for step in range(iters + 2):
        start = time.perf_counter()
        optimizer.zero_grad()
        for mb in range(m):
            (model(tokens[mb], labels[mb]) / m).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step >= 2:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--iters", type=int, default=10)
    args = p.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)  # before torch loads
    import torch
    work = tempfile.mkdtemp(prefix="strata-bench-")
    print(f"threads {args.threads}, torch {torch.__version__}, {os.cpu_count()} cores")
    print(f"{'model':10} {'params':>12} {'batch':>9} {'strata ms':>10} {'torch ms':>10} {'torch/strata':>13}")
    for name, sets, micro, global_batch in CONFIGS:
        ours, params = strata_ms(args.bin, name, sets, micro, global_batch, args.threads, args.iters, work)
        theirs = torch_ms(sets, micro, global_batch, args.threads, args.iters)
        print(f"{name:10} {params:12,} {micro:>3} x {global_batch // micro:<3} {ours:10.1f} {theirs:10.1f} "
              f"{theirs / ours:12.2f}x")


if __name__ == "__main__":
    main()
