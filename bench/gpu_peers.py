"""PyTorch's side of the GPU check's benchmarks (tools/gpu-bundle/check),
measured on the same GPU in the same run as strata's:

  gpu_peers.py --models MODELS.json --out PEERS.json [--quick]

- a bf16 gemm 8192x8192x8192 (the machine's practical ceiling);
- causal attention forward and forward+backward, bf16, head dims 64 and
  128, sequence 2048 and 4096, through scaled_dot_product_attention with
  its flash backend, then its cuDNN backend ("attention_cudnn");
- a training step (forward, backward, fused AdamW) of each model in
  MODELS.json (layers, hidden, heads, seq, vocab, batch, flops): the
  project's torch twin (torch_models.GPT, attention through SDPA) eager and
  under torch.compile, and Hugging Face's GPT2LMHeadModel with SDPA
  attention, each in bf16 autocast over fp32 weights.

Times are CUDA-event medians after warm-up, on random data. A peer that
cannot run (no transformers, out of memory) is recorded with its error.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402


def timed(fn, warmup, repeat):
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


def gemm_tflops(quick):
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = timed(lambda: a @ b, 3, 5 if quick else 20)
    return 2 * n ** 3 / (ms / 1e3) / 1e12


def attention(quick, backend_name="FLASH_ATTENTION"):
    """SDPA's causal attention through one backend (SDPBackend's name):
    forward and backward rows, or one row with the error where that
    backend cannot run here."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = getattr(SDPBackend, backend_name, None)
    if backend is None:
        return [dict(what="every shape", error=f"this torch has no SDPBackend.{backend_name}")]
    rows = []
    for d in (64, 128):
        for s in (2048, 4096):
            heads = 2048 // d  # hidden 2048
            batch = max(1, 16384 // s)
            q, k, v = (torch.randn(batch, heads, s, d, device="cuda", dtype=torch.bfloat16,
                                   requires_grad=True) for _ in range(3))
            grad = torch.randn(batch, heads, s, d, device="cuda", dtype=torch.bfloat16)
            # Causal: half the score matrix; forward 2 products, backward 5.
            fwd_flops = 4 * batch * heads * s * s * d / 2
            try:
                with sdpa_kernel(backend):
                    fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                3, 5 if quick else 20)

                    def both():
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        out.backward(grad)
                    both_ms = timed(both, 3, 5 if quick else 20)
            except RuntimeError as e:  # the backend refused the shape
                rows.append(dict(what=f"d{d} s{s} b{batch}h{heads}",
                                 error=str(e).splitlines()[0][:200]))
                continue
            bwd = both_ms - fwd
            rows.append(dict(what=f"forward d{d} s{s} b{batch}h{heads}", ms=fwd,
                             tflops=fwd_flops / (fwd / 1e3) / 1e12))
            rows.append(dict(what=f"backward d{d} s{s} b{batch}h{heads}",
                             ms=bwd, tflops=2.5 * fwd_flops / (bwd / 1e3) / 1e12))
    return rows


def sdpa_attention(q, k, v):
    """torch_models.causal_attention's contract through SDPA's flash path."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                         v.transpose(1, 2), is_causal=True)
    return out.transpose(1, 2)


def twin(m):
    torch_models.causal_attention = sdpa_attention
    return torch_models.GPT(layers=m["layers"], hidden=m["hidden"], heads=m["heads"],
                            seq=m["seq"], vocab=m["vocab"], openai_gelu=True)


def hf_gpt2(m):
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(n_layer=m["layers"], n_embd=m["hidden"], n_head=m["heads"],
                        n_positions=m["seq"], vocab_size=m["vocab"], resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0)
    # transformers 4.36 and later read it from the config (5.x's
    # constructor takes no attn_implementation).
    config._attn_implementation = "sdpa"

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = GPT2LMHeadModel(config)
            implementation = getattr(self.inner.config, "_attn_implementation", None)
            if implementation != "sdpa":
                raise RuntimeError(f"GPT2LMHeadModel chose {implementation} attention, not sdpa")

        def forward(self, tokens, labels):
            logits = self.inner(input_ids=tokens).logits
            return torch_models.cross_entropy(logits, labels)
    return Wrapped()


def train_step_ms(model, m, steps, compile_model=False):
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    step_model = torch.compile(model) if compile_model else model
    tokens = torch.randint(0, m["vocab"], (m["batch"], m["seq"]), device="cuda")
    labels = torch.randint(0, m["vocab"], (m["batch"], m["seq"]), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_model(tokens, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return timed(step, 3, steps)


def models(specs, quick, record):
    """Each peer's step of each model, given to record(model, peer, entry)
    as soon as measured (a check cut short keeps what finished)."""
    peers = [("torch eager", twin, False), ("HF GPT-2 sdpa", hf_gpt2, False),
             ("torch.compile", twin, True)]
    for m in specs:
        for who, build, compiled in peers:
            torch.cuda.empty_cache()
            started = time.time()
            try:
                ms = train_step_ms(build(m), m, 3 if quick else 10, compiled)
                tokens = m["batch"] * m["seq"]
                entry = dict(ms=ms, tokens_per_s=tokens / ms * 1e3,
                             tflops=m["flops"] / (ms / 1e3) / 1e12, seconds=time.time() - started)
            except Exception as e:  # recorded, not fatal: the others still run
                entry = dict(error=f"{type(e).__name__}: {str(e)[:200]}")
            record(m["name"], who, entry)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_peers.py: PyTorch sees no GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}

    def save():
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    result["gemm_tflops"] = gemm_tflops(args.quick)
    save()
    result["attention"] = attention(args.quick)
    save()
    result["attention_cudnn"] = attention(args.quick, "CUDNN_ATTENTION")
    save()
    with open(args.models) as f:
        specs = json.load(f)
    result["models"] = {}

    def record(name, who, entry):
        result["models"].setdefault(name, {})[who] = entry
        print(json.dumps({name: {who: entry}}), flush=True)
        save()
    models(specs, args.quick, record)
    print(f"gemm {result['gemm_tflops']:.1f} TFLOP/s", file=sys.stderr)


if __name__ == "__main__":
    main()
