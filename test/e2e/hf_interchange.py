"""Weights in and out under Hugging Face's names: train --model a few
iterations at t=2 (its shards resharded on the way out), save; export the
checkpoint with --names hf-gpt2 or hf-llama (and its config.json) and with
strata's names; load the first strictly into the Hugging Face-named torch
twin that config.json describes (hf_models.py)
and the second into strata's torch twin (torch_models.py): their logits on
the next iteration's tokens must agree, and the loss on them must be the
one strata logs resuming from the checkpoint (--tolerance relative). Then
start runs from both exported files (--load-safetensors): their first
losses must be equal, bit for bit, and the Hugging Face twin's on the first
iteration's tokens.

  hf_interchange.py --examples DIR --model gpt-tiny|llama-tiny --names hf-gpt2|hf-llama
      --data-path PREFIX [--openai-gelu]   (gpt-tiny with GELU's tanh form)
"""
import argparse
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
import hf_models  # noqa: E402
import megatron_samples  # noqa: E402
import safetensors_io  # noqa: E402
from strata_runs import losses, run  # noqa: E402
from torch_models import MODELS, cross_entropy, load_strata  # noqa: E402

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--examples", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--names", required=True)
    p.add_argument("--data-path", required=True)
    p.add_argument("--trained", type=int, default=3)
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--openai-gelu", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="strata-hf-")
    plan = os.path.join(work, "t2.plan")
    gbs = 8
    run(["strata-compile", os.path.join(args.examples, args.model + ".model"), "-o", plan,
         "--tensor-model-parallel-size", "2", "--micro-batch-size", "2", "--global-batch-size", str(gbs)]
        + (["--set", "openai_gelu=true"] if args.openai_gelu else []))
    flags = ["--seed", "5", "--lr", "3e-3", "--eval-iters", "0", "--data-path", args.data_path,
             "--train-iters", "10"]
    ckpt = os.path.join(work, "ckpt")
    run(["strata-run", plan, "--save", ckpt, "--exit-interval", str(args.trained)] + flags)
    os.makedirs(os.path.join(work, "hf"))
    hf_file = os.path.join(work, "hf", "model.safetensors")
    strata_file = os.path.join(work, "strata.safetensors")
    print(run(["strata-data", "export", "--load", ckpt, "--names", args.names, "--output", hf_file,
               "--num-attention-heads", "4", "--max-position-embeddings", "64"]).strip()
          .replace(work, "WORK"))
    with open(os.path.join(work, "hf", "config.json")) as f:
        config = json.load(f)
    if args.names == "hf-gpt2":
        print(f"config.json: activation_function {config['activation_function']}")
    run(["strata-data", "export", "--load", ckpt, "--names", "strata", "--output", strata_file])

    # The twin as the exported config.json describes it, its weights
    # loaded strictly by Hugging Face's names.
    hf = hf_models.from_config(config)
    hf.load_state_dict(safetensors_io.read(hf_file), strict=True)
    twin = MODELS[args.model](**({"openai_gelu": True} if args.openai_gelu else {}))
    try:
        load_strata(twin, safetensors_io.read(strata_file))
    except ValueError as e:
        sys.exit(f"FAILED: {e}")

    samples = megatron_samples.dataset([args.data_path], "969,30,1", twin.seq, 5, 10 * gbs)

    def batch(iteration):  # 1-based, as strata logs it
        texts = [samples[(iteration - 1) * gbs + i] for i in range(gbs)]
        tokens = torch.tensor([t[:-1] for t in texts])
        labels = torch.tensor([t[1:] for t in texts])
        return tokens, labels

    def hf_loss(tokens, labels):
        with torch.no_grad():
            logits = hf.logits(tokens)
        return logits, cross_entropy(logits, labels).item()

    # The next iteration's tokens: logits of both twins, and strata's loss.
    tokens, labels = batch(args.trained + 1)
    logits, loss = hf_loss(tokens, labels)
    with torch.no_grad():
        twin_logits = twin.logits(tokens)
    logit_error = ((logits - twin_logits).norm() / twin_logits.norm()).item()
    resumed = losses(run(["strata-run", plan, "--load", ckpt, "--exit-interval", str(args.trained + 1)] + flags))
    strata_loss = float(resumed[args.trained + 1])
    loss_error = abs(loss - strata_loss) / abs(strata_loss)
    print(f"exported at iteration {args.trained}: {args.names} twin's logits {logit_error:.1e} from "
          f"strata's twin; its loss {loss:.6e}, strata's {strata_loss:.6e} ({loss_error:.1e})")
    if logit_error > args.tolerance or loss_error > args.tolerance:
        sys.exit("FAILED: beyond the tolerance")

    # Imported: runs started from either file agree, and with the twin.
    first = {}
    for scheme, path in ((args.names, hf_file), ("strata", strata_file)):
        log = run(["strata-run", plan, "--load-safetensors", path, "--names", scheme,
                   "--exit-interval", "1"] + flags)
        first[scheme] = losses(log)[1]
    _, loss1 = hf_loss(*batch(1))
    import_error = abs(float(first[args.names]) - loss1) / abs(loss1)
    print(f"imported: first loss {first[args.names]} ({args.names}), {first['strata']} (strata); "
          f"the twin's {loss1:.6e} ({import_error:.1e})")
    if first[args.names] != first["strata"] or import_error > args.tolerance:
        sys.exit("FAILED: the imported run's first loss")
    print("PASSED")


if __name__ == "__main__":
    main()
