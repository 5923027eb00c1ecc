"""GPT-2 and LLaMA written with torch.nn under Hugging Face's parameter
names and layouts (transformers' GPT2LMHeadModel and LlamaForCausalLM,
their state_dict keys and shapes), independent of strata's names: what
`strata-data export --names hf-gpt2|hf-llama` must fill, strictly.

GPT-2 keeps Conv1D weights [in, out] and q, k, v side by side in c_attn;
LLaMA keeps nn.Linear weights [out, in]. GPT-2's activation_function is
"gelu" (the exact GELU, Megatron's default) or "gelu_new" (the tanh form,
GPT-2's own)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_models import RMSNorm, causal_attention, rope


class Conv1D(nn.Module):
    """Hugging Face's Conv1D: y = x @ weight + bias, weight [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


ACTIVATIONS = {"gelu": "none", "gelu_new": "tanh"}  # F.gelu's approximate


class Gpt2Block(nn.Module):
    def __init__(self, hidden, heads, inner, eps, activation):
        super().__init__()
        self.heads = heads
        self.approximate = ACTIVATIONS[activation]
        self.ln_1 = nn.LayerNorm(hidden, eps=eps)
        self.attn = nn.Module()
        self.attn.c_attn = Conv1D(hidden, 3 * hidden)
        self.attn.c_proj = Conv1D(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden, eps=eps)
        self.mlp = nn.Module()
        self.mlp.c_fc = Conv1D(hidden, inner)
        self.mlp.c_proj = Conv1D(inner, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(h, dim=-1)
        shape = (b, s, self.heads, h // self.heads)
        a = causal_attention(q.reshape(shape), k.reshape(shape), v.reshape(shape)).reshape(b, s, h)
        x = x + self.attn.c_proj(a)
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate=self.approximate))


class HfGpt2(nn.Module):
    def __init__(self, layers, hidden, heads, positions, vocab, inner, eps, activation):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(vocab, hidden)
        self.transformer.wpe = nn.Embedding(positions, hidden)
        self.transformer.h = nn.ModuleList(Gpt2Block(hidden, heads, inner, eps, activation)
                                           for _ in range(layers))
        self.transformer.ln_f = nn.LayerNorm(hidden, eps=eps)

    def logits(self, tokens):
        t = self.transformer
        x = t.wte(tokens) + t.wpe(torch.arange(tokens.shape[1]))
        for block in t.h:
            x = block(x)
        return t.ln_f(x) @ t.wte.weight.t()  # lm_head tied to wte


class LlamaLayer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn, eps):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        d = hidden // heads
        self.input_layernorm = RMSNorm(hidden, eps)
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.self_attn.k_proj = nn.Linear(hidden, kv_heads * d, bias=False)
        self.self_attn.v_proj = nn.Linear(hidden, kv_heads * d, bias=False)
        self.self_attn.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.mlp.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.mlp.down_proj = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        a = self.self_attn
        y = self.input_layernorm(x)
        q = rope(a.q_proj(y).view(b, s, self.heads, d))
        k = rope(a.k_proj(y).view(b, s, self.kv_heads, d))
        v = a.v_proj(y).view(b, s, self.kv_heads, d)
        x = x + a.o_proj(causal_attention(q, k, v).reshape(b, s, h))
        y = self.post_attention_layernorm(x)
        return x + self.mlp.down_proj(F.silu(self.mlp.gate_proj(y)) * self.mlp.up_proj(y))


class HfLlama(nn.Module):
    def __init__(self, layers, hidden, heads, kv_heads, ffn, vocab, eps):
        super().__init__()
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(vocab, hidden)
        self.model.layers = nn.ModuleList(LlamaLayer(hidden, heads, kv_heads, ffn, eps)
                                          for _ in range(layers))
        self.model.norm = RMSNorm(hidden, eps)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def logits(self, tokens):
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))


def from_config(c):
    """The twin a Hugging Face config.json describes (the parts these
    twins implement, checked)."""
    if c["model_type"] == "gpt2":
        assert c["architectures"] == ["GPT2LMHeadModel"] and c["activation_function"] in ACTIVATIONS, c
        assert c["tie_word_embeddings"] and c["n_ctx"] == c["n_positions"], c
        return HfGpt2(layers=c["n_layer"], hidden=c["n_embd"], heads=c["n_head"],
                      positions=c["n_positions"], vocab=c["vocab_size"], inner=c["n_inner"],
                      eps=c["layer_norm_epsilon"], activation=c["activation_function"])
    assert c["model_type"] == "llama" and c["architectures"] == ["LlamaForCausalLM"], c
    assert c["hidden_act"] == "silu" and c["rope_theta"] == 10000.0 and not c["tie_word_embeddings"], c
    return HfLlama(layers=c["num_hidden_layers"], hidden=c["hidden_size"], heads=c["num_attention_heads"],
                   kv_heads=c["num_key_value_heads"], ffn=c["intermediate_size"], vocab=c["vocab_size"],
                   eps=c["rms_norm_eps"])
