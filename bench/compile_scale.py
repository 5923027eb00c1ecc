"""How strata-compile scales with the cluster and the model: the paper's 1T
GPT (examples/gpt-1t.model, t=8, bf16, full recomputation, micro batch 1,
512 microbatches) compiled to a plan while one size varies, the others at
the paper's (d=6, p=64, 128 layers; the layer sweep at p=8, since 32 layers
do not cut into 64 stages). Each row: wall time, peak memory (the child's
max RSS) and plan size, and their ratio to the sweep's first row: a plan of
rank templates should stay flat in d and grow at most linearly in p and in
the layer count. The compile includes strata-compile's check of every rank
of the plan. A last row adds the paper's interleaved schedule (one layer
per virtual stage).

  /usr/bin/python3 bench/compile_scale.py [--bin build/bin]
"""
import argparse
import os
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SWEEPS = [
    # (what varies, [(t, p, d, layers, extra flags)])
    ("d", [(8, 64, d, 128, []) for d in (1, 6, 64)]),
    ("p", [(8, p, 6, 128, []) for p in (8, 16, 64)]),
    ("layers", [(8, 8, 6, layers, []) for layers in (32, 64, 128)]),
    ("interleaved", [(8, 64, 6, 128, []),
                     (8, 64, 6, 128, ["--num-layers-per-virtual-pipeline-stage", "1"])]),
]
MICROBATCHES = 512


def compile_once(bin_dir, t, p, d, layers, extra, plan):
    cmd = [os.path.join(bin_dir, "strata-compile"), os.path.join(ROOT, "examples", "gpt-1t.model"),
           "--set", f"layers={layers}", "--tensor-model-parallel-size", str(t),
           "--pipeline-model-parallel-size", str(p), "--data-parallel-size", str(d),
           "--micro-batch-size", "1", "--global-batch-size", str(MICROBATCHES * d),
           "--recompute-granularity", "full", "--bf16", "-o", plan] + extra
    start = time.monotonic()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)  # its own max RSS
    seconds = time.monotonic() - start
    if status != 0:
        raise SystemExit(f"failed ({status}): {' '.join(cmd)}")
    return seconds, usage.ru_maxrss * 1024, os.path.getsize(plan)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="strata-compile-scale-")
    print("| varies | t x p x d | layers | ranks | wall s | peak MiB | plan MB | "
          "wall / first | memory / first | size / first |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for what, rows in SWEEPS:
        first = None
        for t, p, d, layers, extra in rows:
            plan = os.path.join(work, "plan")
            seconds, rss, size = compile_once(args.bin, t, p, d, layers, extra, plan)
            first = first or (seconds, rss, size)
            label = f"{t} x {p} x {d}" + (" v" if extra else "")
            print(f"| {what} | {label} | {layers} | {t * p * d} | {seconds:.2f} | "
                  f"{rss / 2**20:.0f} | {size / 1e6:.1f} | {seconds / first[0]:.2f}x | "
                  f"{rss / first[1]:.2f}x | {size / first[2]:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
