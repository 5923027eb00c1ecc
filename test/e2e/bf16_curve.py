"""bf16 training follows fp32: gpt-tiny for 200 iterations on the same text
and seed, fp32 and bf16 (bf16 parameters and activations, fp32 master
weights, gradients and moments), every iteration's loss within 2%."""
import os
import re
import subprocess
import sys
import tempfile

LOSS = re.compile(r"lm loss: (\S+)")
examples, data = sys.argv[1], sys.argv[2]
iterations = 200
work = tempfile.mkdtemp(prefix="strata-bf16-")
curves = {}
for mode in ("fp32", "bf16"):
    plan = os.path.join(work, mode + ".plan")
    extra = ["--bf16"] if mode == "bf16" else []
    subprocess.run(["strata-compile", os.path.join(examples, "gpt-tiny.model"), "-o", plan,
                    "--micro-batch-size", "8", "--global-batch-size", "16"] + extra,
                   check=True, capture_output=True)
    log = subprocess.run(["strata-run", plan, "--train-iters", str(iterations), "--lr", "6e-4",
                          "--lr-warmup-iters", "20", "--lr-decay-style", "cosine", "--min-lr", "6e-5",
                          "--data-path", data, "--seed", "3"],
                         check=True, capture_output=True, text=True).stdout
    curves[mode] = [float(x) for x in LOSS.findall(log)]
    assert len(curves[mode]) == iterations, log

fp32, bf16 = curves["fp32"], curves["bf16"]
worst = max(abs(b - f) / f for f, b in zip(fp32, bf16))
at = max(range(iterations), key=lambda i: abs(bf16[i] - fp32[i]) / fp32[i])
print(f"fp32 loss {fp32[0]:.4f} -> {fp32[-1]:.4f}; bf16 loss {bf16[0]:.4f} -> {bf16[-1]:.4f}")
print(f"worst relative difference {worst:.4f} at iteration {at + 1} "
      f"(fp32 {fp32[at]:.4f}, bf16 {bf16[at]:.4f})")
if fp32[-1] > fp32[0] - 1.0:
    sys.exit("FAILED: fp32 did not learn; the comparison would mean nothing")
if bf16 == fp32:
    sys.exit("FAILED: the bf16 curve is the fp32 curve: bf16 was not in effect")
if worst > 0.02:
    sys.exit("FAILED: bf16 is more than 2% off fp32")
print("PASSED")
