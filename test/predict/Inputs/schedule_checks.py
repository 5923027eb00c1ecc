"""The simulated cluster against what is known of pipeline schedules and
gemms (issue 26's tests), on gpt-tiny made wide (hidden 4096, sequence
512, vocabulary 64) so that the layers' gemms dominate:

  bubble   with communication free, each schedule's bubble on the first
           stage, (its pipeline's end - its own forward and backward
           compute) / that compute, equals (p - 1) / (v m) over a grid of
           (p, v, m), within 0.01 (the first and last stages also embed
           and score, which the formula's equal stages do not);
  interleaving  on a DGX H200, interleaved 1F1B beats 1F1B at small
           batch and the gap shrinks as the batch grows;
  width    a model twice as wide spends close to 4x the gemm time;
  overlap  --no-overlap-grad-reduce exposes more data-parallel time.

  schedule_checks.py BIN EXAMPLES WORK CHECK
"""
import re
import subprocess
import sys

bin_dir, examples, work, check = sys.argv[1:5]
cluster = f"{examples}/clusters/dgx-h200.json"
wide = ["--set", "hidden=4096", "--set", "seq=512", "--set", "vocab=64", "--set", "heads=16"]


def simulate(name, flags, sim_flags=(), sets=wide):
    plan = f"{work}/{name}.plan"
    subprocess.run([f"{bin_dir}/strata-compile", f"{examples}/gpt-tiny.model", *sets, *flags,
                    "--micro-batch-size", "2", "--bf16", "--target", "cuda", "-o", plan],
                   check=True, capture_output=True)
    out = subprocess.run([f"{bin_dir}/strata-run", plan, "--backend", "sim", "--cluster", cluster,
                          *sim_flags], check=True, capture_output=True, text=True).stdout
    ms = float(re.search(r"elapsed time per iteration \(ms\): ([0-9.]+)", out)[1])
    stages = []
    for line in re.findall(r"^stage \d+ \(rank \d+\): .*$", out, re.M):
        value = lambda pattern: float(re.search(pattern, line)[1])
        stages.append(dict(
            compute=value(r"compute ([0-9.e+-]+) ms"),
            gemms=value(r"gemms ([0-9.e+-]+) ms"),
            optimizer=value(r"the optimizer ([0-9.e+-]+) ms"),
            dp=value(r"data-parallel communication ([0-9.e+-]+) ms"),
            end=value(r"ends at ([0-9.e+-]+) ms")))
    return ms, stages


if check == "bubble":
    worst = 0
    for p in (2, 4):
        for v in (1, 2):
            for m in (4, 8, 16):
                flags = ["--set", "layers=8", "--pipeline-model-parallel-size", str(p),
                         "--global-batch-size", str(2 * m)]
                if v > 1:
                    flags += ["--num-layers-per-virtual-pipeline-stage", str(8 // (p * v))]
                _, stages = simulate(f"p{p}v{v}m{m}", flags, ["--free-communication"])
                first = stages[0]
                own = first["compute"] - first["optimizer"]
                bubble = (first["end"] - own) / own
                formula = (p - 1) / (v * m)
                worst = max(worst, abs(bubble - formula))
                print(f"p={p} v={v} m={m}: bubble {bubble:.4f}, formula {formula:.4f}")
    print(f"worst difference {worst:.4f}: {'within' if worst <= 0.01 else 'NOT within'} 0.01")

elif check == "interleaving":
    ratios = []
    for m in (4, 8, 16, 32):
        base = ["--set", "layers=8", "--pipeline-model-parallel-size", "4",
                "--global-batch-size", str(2 * m)]
        plain, _ = simulate(f"plain-m{m}", base)
        interleaved, _ = simulate(f"interleaved-m{m}", base + ["--num-layers-per-virtual-pipeline-stage", "1"])
        ratios.append(plain / interleaved)
        print(f"m={m}: 1F1B {plain:.1f} ms, interleaved {interleaved:.1f} ms, speedup {ratios[-1]:.3f}")
    faster = all(r > 1 for r in ratios)
    shrinks = all(a > b for a, b in zip(ratios, ratios[1:]))
    print(f"interleaved {'faster' if faster else 'NOT faster'} at every batch; "
          f"the gap {'shrinks' if shrinks else 'does NOT shrink'} as the batch grows")

elif check == "width":
    flags = ["--set", "layers=2", "--global-batch-size", "8"]
    _, narrow = simulate("narrow", flags)
    wider = [w if w != "hidden=4096" else "hidden=8192" for w in wide]
    wider = [w if w != "heads=16" else "heads=32" for w in wider]
    _, wide2 = simulate("wide", flags, sets=wider)
    ratio = wide2[0]["gemms"] / narrow[0]["gemms"]
    print(f"gemm time, hidden 8192 over 4096: {ratio:.2f}x: {'close to' if 3.6 <= ratio <= 4.4 else 'NOT close to'} 4x")

elif check == "overlap":
    flags = ["--set", "layers=4", "--data-parallel-size", "2", "--global-batch-size", "8"]
    _, overlapped = simulate("overlap", flags)
    _, exposed = simulate("no-overlap", flags + ["--no-overlap-grad-reduce"])
    a, b = overlapped[0]["dp"], exposed[0]["dp"]
    print(f"data-parallel time exposed: {a:.3g} ms with overlap, {b:.3g} ms without: "
          f"{'more' if b > a else 'NOT more'} without")
