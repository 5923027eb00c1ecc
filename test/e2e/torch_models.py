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


MASK32 = 0xFFFFFFFF


def _mul32(x, c):
    """x · c mod 2^32 for x < 2^32 in int64, without overflowing 64 bits."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & MASK32


def _mix32(x):
    """runtime/plan/Dropout.h's dropoutMix (lowbias32) on int64 values < 2^32."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def dropout_key(seed, sample):
    """runtime/plan/Dropout.h's dropoutKey: sample `sample`'s key under `seed`."""
    s = _mix32((seed & MASK32) ^ _mix32(seed >> 32))
    return _mix32((sample & MASK32) ^ s) & 0x7FFFFFFF


class Dropout:
    """strata's dropout written again: element i of a sample (its index in
    the whole tensor) kept by runtime/plan/Dropout.h's function of the
    sample's key, the site (the model's dropouts counted in order) and i.
    Dropouts made by with_rate share the keys and the count of sites."""

    def __init__(self, rate, state=None):
        self.rate = rate
        self.state = state if state is not None else {"keys": None, "site": 0}

    def with_rate(self, rate):
        return Dropout(rate, self.state)

    def start(self, keys):
        """A microbatch's keys (None: no dropout, evaluation)."""
        self.state["keys"], self.state["site"] = keys, 0

    def __call__(self, x):
        if self.rate == 0:
            return x
        site = self.state["site"]
        self.state["site"] += 1
        if self.state["keys"] is None:
            return x
        b = x.shape[0]
        index = torch.arange(x[0].numel(), dtype=torch.int64)
        h = self.state["keys"].view(b, 1) ^ _mix32(torch.tensor((site + 0x9E3779B9) & MASK32))
        keep = (_mix32(_mix32(h) ^ index) >> 8) >= int(self.rate * 16777216.0)
        return x * keep.view(x.shape).to(x.dtype) / (1 - self.rate)


def causal_attention(q, k, v, dropout=None):
    """q [b, s, H, d], k and v [b, s, K, d]; query head h reads kv head h // (H/K);
    `dropout` (a Dropout) on the probabilities."""
    b, s, heads, d = q.shape
    kv_heads = k.shape[2]
    k = k.repeat_interleave(heads // kv_heads, dim=2)
    v = v.repeat_interleave(heads // kv_heads, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [b, H, s, d]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    probs = F.softmax(scores, dim=-1)
    out = (dropout(probs) if dropout else probs) @ v
    return out.transpose(1, 2)  # [b, s, H, d]


class GPTLayer(nn.Module):
    def __init__(self, hidden, heads, ffn, eps, gelu="none", dropout=None, attention_dropout=None):
        super().__init__()
        self.heads = heads
        self.dropout = dropout or Dropout(0.0)
        self.attention_dropout = attention_dropout
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
        a = causal_attention(q, k, v, self.attention_dropout).reshape(b, s, h)
        x = x + self.dropout(self.proj(a))
        return x + self.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate=self.gelu)))


class GPT(nn.Module):
    """examples/gpt-tiny.model: learned positions, pre-LN, GELU, tied output;
    openai_gelu as the model's constant (GELU's tanh form)."""

    def __init__(self, layers=4, hidden=64, heads=4, seq=64, vocab=256, eps=1e-5, openai_gelu=False,
                 hidden_dropout=0.0, attention_dropout=0.0):
        super().__init__()
        self.seq = seq
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Parameter(torch.zeros(seq, hidden))
        gelu = "tanh" if openai_gelu else "none"
        # One counter of sites for both kinds, in the model's order.
        self.dropout = Dropout(hidden_dropout)
        attention = self.dropout.with_rate(attention_dropout) if attention_dropout else None
        self.layers = nn.ModuleList(GPTLayer(hidden, heads, 4 * hidden, eps, gelu, self.dropout, attention)
                                    for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=eps)

    def logits(self, tokens):
        x = self.dropout(self.wte(tokens) + self.wpe)
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
