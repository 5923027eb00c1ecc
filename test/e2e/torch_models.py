"""The example models written again in PyTorch (torch.nn modules, torch's
autograd), loading strata's weights by name: the oracle strata must match.

strata stores a linear weight as [in, out] (x @ W); torch.nn.Linear holds
[out, in], so weights are transposed on the way in and out.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def cross_entropy(logits, labels):
    """The mean loss over every token, as strata's cross_entropy."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def load_strata(model, weights):
    """Sets `model`'s parameters from strata's weights by strata name (in
    strata's layout); returns its strata_names(). The names must agree."""
    names = model.strata_names()
    if set(weights) != set(names):
        raise ValueError(f"parameter names differ: strata-only {sorted(set(weights) - set(names))}, "
                         f"torch-only {sorted(set(names) - set(weights))}")
    with torch.no_grad():
        for name, (param, transposed) in names.items():
            value = weights[name].t() if transposed else weights[name]
            if value.shape != param.shape:
                raise ValueError(f"{name}: strata's {list(value.shape)}, torch's {list(param.shape)}")
            param.copy_(value.to(param.dtype))
    return names


def causal_attention(q, k, v):
    """q [b, s, H, d], k and v [b, s, K, d]; query head h reads kv head h // (H/K)."""
    b, s, heads, d = q.shape
    kv_heads = k.shape[2]
    k = k.repeat_interleave(heads // kv_heads, dim=2)
    v = v.repeat_interleave(heads // kv_heads, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [b, H, s, d]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    out = F.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2)  # [b, s, H, d]


class GPTLayer(nn.Module):
    def __init__(self, hidden, heads, ffn, eps, gelu="none"):
        super().__init__()
        self.heads = heads
        self.gelu = gelu  # F.gelu's approximate: "none" (erf) or "tanh"
        self.ln1 = nn.LayerNorm(hidden, eps=eps)
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=eps)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        y = self.ln1(x)
        q = self.q(y).view(b, s, self.heads, d)
        k = self.k(y).view(b, s, self.heads, d)
        v = self.v(y).view(b, s, self.heads, d)
        a = causal_attention(q, k, v).reshape(b, s, h)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate=self.gelu))


class GPT(nn.Module):
    """examples/gpt-tiny.model: learned positions, pre-LN, GELU, tied output;
    openai_gelu as the model's constant (GELU's tanh form)."""

    def __init__(self, layers=4, hidden=64, heads=4, seq=64, vocab=256, eps=1e-5, openai_gelu=False):
        super().__init__()
        self.seq = seq
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Parameter(torch.zeros(seq, hidden))
        gelu = "tanh" if openai_gelu else "none"
        self.layers = nn.ModuleList(GPTLayer(hidden, heads, 4 * hidden, eps, gelu) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=eps)

    def logits(self, tokens):
        x = self.wte(tokens) + self.wpe
        for layer in self.layers:
            x = layer(x)
        return self.ln_f(x) @ self.wte.weight.t()

    def forward(self, tokens, labels):
        return cross_entropy(self.logits(tokens), labels)

    def strata_names(self):
        """strata name -> (torch parameter, transposed?)"""
        names = {"wte": (self.wte.weight, False), "wpe": (self.wpe, False),
                 "ln_f.weight": (self.ln_f.weight, False), "ln_f.bias": (self.ln_f.bias, False)}
        for i, layer in enumerate(self.layers):
            p = f"layers.{i}."
            names[p + "ln1.weight"] = (layer.ln1.weight, False)
            names[p + "ln1.bias"] = (layer.ln1.bias, False)
            names[p + "ln2.weight"] = (layer.ln2.weight, False)
            names[p + "ln2.bias"] = (layer.ln2.bias, False)
            for ours, theirs in (("attn.q", layer.q), ("attn.k", layer.k), ("attn.v", layer.v),
                                 ("attn.proj", layer.proj), ("mlp.fc1", layer.fc1), ("mlp.fc2", layer.fc2)):
                names[p + ours + ".weight"] = (theirs.weight, True)
                names[p + ours + ".bias"] = (theirs.bias, False)
        return names


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, base=10000.0):
    """Rotate-half rotary embedding of [b, s, heads, d]; angles in float64."""
    b, s, heads, d = x.shape
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(s, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos = torch.cos(angles).to(x.dtype)[None, :, None, :]
    sin = torch.sin(angles).to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class LlamaLayer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn, eps):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        d = hidden // heads
        self.attn_norm = RMSNorm(hidden, eps)
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, kv_heads * d, bias=False)
        self.v = nn.Linear(hidden, kv_heads * d, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.mlp_norm = RMSNorm(hidden, eps)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        y = self.attn_norm(x)
        q = rope(self.q(y).view(b, s, self.heads, d))
        k = rope(self.k(y).view(b, s, self.kv_heads, d))
        v = self.v(y).view(b, s, self.kv_heads, d)
        x = x + self.o(causal_attention(q, k, v).reshape(b, s, h))
        y = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class Llama(nn.Module):
    """examples/llama-tiny.model: RMSNorm, rope, GQA, SwiGLU, untied output."""

    def __init__(self, layers=4, hidden=64, heads=4, kv_heads=2, seq=64, vocab=256, ffn=176, eps=1e-5):
        super().__init__()
        self.seq = seq
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaLayer(hidden, heads, kv_heads, ffn, eps) for _ in range(layers))
        self.norm = RMSNorm(hidden, eps)
        self.output = nn.Linear(hidden, vocab, bias=False)

    def logits(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.output(self.norm(x))

    def forward(self, tokens, labels):
        return cross_entropy(self.logits(tokens), labels)

    def strata_names(self):
        names = {"embed": (self.embed.weight, False), "norm.weight": (self.norm.weight, False),
                 "output.weight": (self.output.weight, True)}
        for i, layer in enumerate(self.layers):
            p = f"layers.{i}."
            names[p + "attn_norm.weight"] = (layer.attn_norm.weight, False)
            names[p + "mlp_norm.weight"] = (layer.mlp_norm.weight, False)
            for ours, theirs in (("attn.q", layer.q), ("attn.k", layer.k), ("attn.v", layer.v),
                                 ("attn.o", layer.o), ("mlp.gate", layer.gate), ("mlp.up", layer.up),
                                 ("mlp.down", layer.down)):
                names[p + ours + ".weight"] = (theirs.weight, True)
        return names


MODELS = {"gpt-tiny": GPT, "llama-tiny": Llama}
