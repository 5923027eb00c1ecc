"""Table 1 of Narayanan et al. (SC'21) predicted by strata's simulated
cluster: each row's model and layout compiled by strata-compile with the
settings of Megatron-LM's examples/sc21/run_table_1.sh (tensor and
pipeline sizes, micro-batch and global batch, layers per virtual stage
where it sets them, full recomputation as its checkpointing ran it (each
layer's whole forward again: --recompute-method uniform); the gradients'
all-reduce after the pipeline's flush where p > 1, as Megatron's local DDP
did; attention unfused, as Megatron computed it in 2021; Megatron's
default dropouts, 0.1 hidden and attention), then one
iteration simulated on Selene (examples/clusters/selene.json) with
`strata-run --backend sim`. Prints the predicted TFLOP/s per GPU (the
paper's count) beside the published figure (../shared/paper/table1.tsv),
each error, the mean absolute error and the worst, with the simulated
pipeline bubble and the largest stage's memory (the compiler's figure).

  /usr/bin/python3 bench/sim_paper.py [--bin build/bin] [--rows 1.7,1008.0]
      [--cluster examples/clusters/selene.json] [--work DIR]
"""
import argparse
import csv
import json
import os
import re
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "..", "shared", "paper", "table1.tsv")


def rows(path):
    with open(path) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            yield row


def compile_flags(row):
    t, p, gpus = int(row["tp"]), int(row["pp"]), int(row["gpus"])
    d = gpus // (t * p)
    flags = ["--set", f"layers={row['layers']}", "--set", f"hidden={row['hidden']}",
             "--set", f"heads={row['heads']}",
             "--tensor-model-parallel-size", str(t), "--pipeline-model-parallel-size", str(p),
             "--data-parallel-size", str(d), "--micro-batch-size", row["mbs"],
             "--global-batch-size", row["batch"], "--recompute-granularity", "full",
             "--recompute-method", "uniform", "--recompute-num-layers", "1",
             "--attention-backend", "unfused", "--bf16", "--target", "cuda",
             # Megatron's defaults, which the script leaves.
             "--set", "hidden_dropout=0.1", "--set", "attention_dropout=0.1"]
    if row["vp_layers_per_stage"] != "-":
        flags += ["--num-layers-per-virtual-pipeline-stage", row["vp_layers_per_stage"]]
    if p > 1:
        # Megatron's local DDP all-reduced the gradients after the flush.
        flags += ["--no-overlap-grad-reduce"]
    return flags


def hbm_bytes(cluster):
    """A GPU's memory in the cluster spec."""
    with open(cluster) as f:
        return json.load(f)["gpu"]["hbm_bytes"]


def compile_and_simulate(bin_dir, cluster, model, flags, plan):
    """Compiles `model` (a path) with `flags` to `plan` and simulates one
    iteration on `cluster`: strata-compile's and strata-run's outputs, or
    {"refused": the last line of the one that refused}."""
    compiled = subprocess.run([os.path.join(bin_dir, "strata-compile"), model, *flags,
                               "-o", plan], capture_output=True, text=True)
    if compiled.returncode != 0:
        said = compiled.stderr.strip().splitlines()
        return {"refused": said[-1] if said else f"strata-compile exited {compiled.returncode}"}
    run = subprocess.run([os.path.join(bin_dir, "strata-run"), plan, "--backend", "sim",
                          "--cluster", cluster], capture_output=True, text=True)
    if run.returncode != 0:
        said = run.stderr.strip().splitlines()
        return {"refused": said[-1] if said else f"strata-run exited {run.returncode}"}
    return {"compiled": compiled.stdout, "simulated": run.stdout}


def iteration_figures(out):
    """From strata-run's simulation: the iteration in ms and TFLOP/s per
    GPU (the paper's count)."""
    return {
        "ms": float(re.search(r"^breakdown of the ([0-9.e+-]+) ms", out, re.M)[1]),
        "tflops": float(re.search(r"throughput per GPU \(TFLOP/s/GPU\): ([0-9.]+)", out)[1]),
    }


def predict(bin_dir, cluster, flags, plan):
    """Compiles examples/gpt-1t.model with `flags` to `plan` and simulates
    one iteration on `cluster`: TFLOP/s per GPU (the paper's count), the
    iteration in ms, the bubble's share in % and the largest stage's
    bytes."""
    result = compile_and_simulate(bin_dir, cluster,
                                  os.path.join(ROOT, "examples", "gpt-1t.model"), flags, plan)
    if "refused" in result:
        raise SystemExit(f"{plan}: {result['refused']}")
    out = result["simulated"]
    return {
        **iteration_figures(out),
        "bubble": float(re.search(r"breakdown .*pipeline bubble [0-9.e+-]+ ms \(([0-9.]+)%\)", out)[1]),
        "peak": max(int(b.replace(",", "")) for b in re.findall(r"\(([0-9,]+) bytes\)", out)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--cluster", default=os.path.join(ROOT, "examples", "clusters", "selene.json"))
    parser.add_argument("--table", default=TABLE)
    parser.add_argument("--rows", help="params (billions) of the rows to run, comma-separated")
    parser.add_argument("--work", help="where the plans go (default: a temporary folder)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="strata-sim-paper-")
    os.makedirs(work, exist_ok=True)
    wanted = set(args.rows.split(",")) if args.rows else None
    results = []
    print(f"{'model':>8} {'t':>2} {'p':>3} {'d':>3} {'GPUs':>5} {'mbs':>3} {'v':>2} "
          f"{'paper':>6} {'strata':>7} {'error':>7}  bubble  memory  compile+simulate")
    for row in rows(args.table):
        if wanted and row["params_b"] not in wanted:
            continue
        plan = os.path.join(work, f"table1-{row['params_b']}B.plan")
        start = time.monotonic()
        result = predict(args.bin, args.cluster, compile_flags(row), plan)
        seconds = time.monotonic() - start
        predicted, bubble, peak = result["tflops"], result["bubble"], result["peak"]
        published = float(row["tflops_per_gpu"])
        error = (predicted - published) / published
        results.append(error)
        t, p, gpus = int(row["tp"]), int(row["pp"]), int(row["gpus"])
        v = "-" if row["vp_layers_per_stage"] == "-" else str(
            int(row["layers"]) // (p * int(row["vp_layers_per_stage"])))
        print(f"{row['params_b'] + 'B':>8} {t:>2} {p:>3} {gpus // (t * p):>3} {gpus:>5} {row['mbs']:>3} {v:>2} "
              f"{published:>6.0f} {predicted:>7.1f} {100 * error:>+6.1f}%  {bubble:>5.1f}%  "
              f"{peak / 2**30:>4.0f} GiB  {seconds:.1f} s",
              flush=True)
    if results:
        mae = sum(abs(e) for e in results) / len(results)
        worst = max(results, key=abs)
        print(f"mean absolute error {100 * mae:.1f}%, worst {100 * worst:+.1f}% over {len(results)} rows")


if __name__ == "__main__":
    main()
