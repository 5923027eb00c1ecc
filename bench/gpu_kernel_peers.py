"""PyTorch's side of the GPU check's kernel-speeds step
(tools/gpu-bundle/check), on the same GPU in the same run as strata's
kernels timed alone (strata-kernels --speeds):

  gpu_kernel_peers.py --speeds SPEEDS.json [--vocab V] --out PEERS.json

- the rooflines: a device copy of 1 GiB (bytes read and written over the
  time) and a bf16 gemm 8192³;
- for each of strata's launches that PyTorch has an equivalent of, at the
  launch's shape: F.layer_norm forward and backward, F.cross_entropy
  forward and backward, scaled_dot_product_attention with its flash backend
  (forward, and backward as forward+backward less forward), an embedding's
  backward (a vocabulary of --vocab rows), AdamW(fused=True)'s step.

Times are CUDA-event medians after warm-up, on random data; a peer that
cannot run is recorded with its error. Shapes are read from each entry's
"shape" ("[8, 1024, 768] bf16", "[8, 1024, 12, 64] bf16 causal").
"""
import argparse
import json
import re
import statistics

import torch
import torch.nn.functional as F


def timed(fn, warmup=3, repeat=10):
    """Median milliseconds of fn() over `repeat` runs, CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def dims(shape):
    found = re.match(r"\[([0-9, ]*)\]", shape)
    return [int(d) for d in found.group(1).split(",") if d.strip()] if found else []


def rows_cols(shape):
    d = dims(shape)
    cols = d[-1]
    rows = 1
    for x in d[:-1]:
        rows *= x
    return rows, cols


def layer_norm(shape, backward):
    rows, cols = rows_cols(shape)
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    if not backward:
        with torch.no_grad():
            return "F.layer_norm", timed(lambda: F.layer_norm(x, (cols,), w, b))
    y = F.layer_norm(x, (cols,), w, b)
    dy = torch.randn_like(y)
    return "F.layer_norm backward", timed(
        lambda: torch.autograd.grad(y, (x, w, b), dy, retain_graph=True))


def cross_entropy(shape):
    rows, vocab = rows_cols(shape)
    z = torch.randn(rows, vocab, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (rows,), device="cuda")

    def step():
        loss = F.cross_entropy(z, labels)
        torch.autograd.grad(loss, (z,))
    return "F.cross_entropy forward+backward", timed(step)


def attention(shape, backward):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, s, h, d = dims(shape)
    causal = "causal" in shape
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        forward = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        if not backward:
            return "sdpa flash forward", forward
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        do = torch.randn_like(o)

        def both():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.autograd.grad(out, (q, k, v), do)
        return "sdpa flash backward (forward+backward less forward)", timed(both) - forward


def embedding_backward(shape, vocab):
    rows, hidden = rows_cols(shape)
    table = torch.randn(vocab, hidden, device="cuda", requires_grad=True)
    ids = torch.randint(0, vocab, (rows,), device="cuda")
    y = F.embedding(ids, table)
    dy = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16).float()
    return "embedding backward", timed(lambda: torch.autograd.grad(y, (table,), dy,
                                                                   retain_graph=True))


def adamw(shape):
    (n,) = dims(shape)
    p = torch.nn.Parameter(torch.randn(n, device="cuda"))
    p.grad = torch.randn(n, device="cuda")
    opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
    return "AdamW(fused=True) step", timed(opt.step)


def peer_of(entry, vocab):
    name, shape = entry["name"], entry["shape"]
    if name.endswith("layer_norm_fwd"):
        return layer_norm(shape, False)
    if name == "layer_norm_bwd":
        return layer_norm(shape, True)
    if name == "cross_entropy_with_grad":
        return cross_entropy(shape)
    if name == "attention_fwd":
        return attention(shape, False)
    if name == "attention_bwd":
        return attention(shape, True)
    if name == "embedding_bwd":
        return embedding_backward(shape, vocab)
    if name == "adamw":
        return adamw(shape)
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--speeds", required=True, action="append")
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    out = {"peers": {}}
    n = 1 << 29  # 1 GiB of bf16
    a = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    b = torch.empty_like(a)
    ms = timed(lambda: b.copy_(a))
    out["copy_gbytes_per_s"] = 2 * a.numel() * 2 / (ms / 1e3) / 1e9
    del a, b
    g = 8192
    x = torch.randn(g, g, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(g, g, device="cuda", dtype=torch.bfloat16)
    ms = timed(lambda: x @ y)
    out["gemm_tflops"] = 2 * g ** 3 / (ms / 1e3) / 1e12
    del x, y
    for path in args.speeds:
        with open(path) as f:
            entries = json.load(f)["entries"]
        for entry in entries:
            key = entry["name"] + " " + entry["shape"]
            if key in out["peers"]:
                continue
            try:
                found = peer_of(entry, args.vocab)
            except Exception as e:  # a peer that cannot run says why
                out["peers"][key] = {"error": f"{type(e).__name__}: {e}"[:200]}
                continue
            finally:
                torch.cuda.empty_cache()
            if found:
                out["peers"][key] = {"what": found[0], "ms": found[1]}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
