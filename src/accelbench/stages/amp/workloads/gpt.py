"""The ``gpt`` workload: a decoder-only language model in plain torch, and its generated Markov-chain corpus.

Two styles, picked by the preset (``GPT_PRESETS``), every size overridable in ``amp.gpt``:

- ``gpt2`` (nanoGPT's GPT-2): learned positions, pre-norm blocks of LayerNorm (with bias), causal
  self-attention through ``F.scaled_dot_product_attention(is_causal=True)``, a GELU MLP of ``ffn_mult`` x
  d_model, biases in every Linear, tied input/output embeddings;
- ``llama`` (Llama-style): no learned positions but rotary ones (RoPE on q and k), RMSNorm, a SwiGLU MLP of
  ``ffn_hidden`` units (three matrices), no biases, tied embeddings.

The corpus (``make_corpus``) is sampled from a fixed random Markov chain over the vocabulary: every token has
``markov_branching`` possible successors with random probabilities (one of them the next token id, so the chain
is irreducible), the first token of a sequence is drawn from the chain's stationary distribution. The best
possible next-token loss is the chain's entropy rate ``H = sum_i pi_i H(P_i)`` (nats/token), computed exactly
from the transition table (``entropy_rate``): the known floor the loss falls toward.
"""

from __future__ import annotations

import math

# The presets: name -> sizes. gpt2-124m/350m are GPT-2 small/medium with nanoGPT's padded vocabulary
# (50304 = 50257 rounded up to a multiple of 64); llama-1b is a Llama-3.2-1B-like shape (16 layers, d 2048,
# 32 heads of 64, SwiGLU 8192) with full multi-head attention and a 32000-token vocabulary (Llama 2's).
GPT_PRESETS = {
    "tiny": {
        "style": "gpt2",
        "n_layers": 2,
        "d_model": 32,
        "n_heads": 2,
        "seq_len": 32,
        "vocab_size": 32,
        "ffn_mult": 4,
    },
    "gpt2-124m": {
        "style": "gpt2",
        "n_layers": 12,
        "d_model": 768,
        "n_heads": 12,
        "seq_len": 1024,
        "vocab_size": 50304,
        "ffn_mult": 4,
    },
    "gpt2-350m": {
        "style": "gpt2",
        "n_layers": 24,
        "d_model": 1024,
        "n_heads": 16,
        "seq_len": 1024,
        "vocab_size": 50304,
        "ffn_mult": 4,
    },
    "llama-1b": {
        "style": "llama",
        "n_layers": 16,
        "d_model": 2048,
        "n_heads": 32,
        "seq_len": 2048,
        "vocab_size": 32000,
        "ffn_hidden": 8192,
    },
}
SIZE_KEYS = ("style", "n_layers", "d_model", "n_heads", "seq_len", "vocab_size", "ffn_mult", "ffn_hidden")


def resolve(gpt_cfg: dict) -> dict:
    """The preset's sizes with every size the config sets (not None) over them; ``ffn_hidden`` filled in."""
    preset = gpt_cfg.get("preset", "tiny")
    if preset not in GPT_PRESETS:
        raise ValueError(f"amp.gpt.preset: unknown {preset!r}; allowed: {', '.join(GPT_PRESETS)}")
    sizes = dict(GPT_PRESETS[preset])
    sizes.update({k: gpt_cfg[k] for k in SIZE_KEYS if gpt_cfg.get(k) is not None})
    if sizes["style"] == "gpt2" or sizes.get("ffn_hidden") is None:
        sizes["ffn_hidden"] = sizes.get("ffn_mult", 4) * sizes["d_model"]
    sizes["preset"] = preset
    return sizes


def build_gpt(sizes: dict, torch):
    """The model for resolved ``sizes`` (``resolve``): ``model(tokens (B, T)) -> logits (B, T, vocab)``."""
    nn, F = torch.nn, torch.nn.functional
    d, h, L, T, V = sizes["d_model"], sizes["n_heads"], sizes["n_layers"], sizes["seq_len"], sizes["vocab_size"]
    llama = sizes["style"] == "llama"
    hidden = sizes["ffn_hidden"]
    bias = not llama

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight

    def norm():
        return RMSNorm(d) if llama else nn.LayerNorm(d)

    def rotary(x, cos, sin):  # x (B, h, T, hd): rotate pairs (first half, second half)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d, bias=bias)
            self.proj = nn.Linear(d, d, bias=bias)

        def forward(self, x, rope):
            B, Tn, _ = x.shape
            q, k, v = self.qkv(x).view(B, Tn, 3, h, d // h).permute(2, 0, 3, 1, 4)
            if rope is not None:
                q, k = rotary(q, *rope), rotary(k, *rope)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(B, Tn, d))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            if llama:  # SwiGLU: w2(silu(w1 x) * w3 x)
                self.w1 = nn.Linear(d, hidden, bias=False)
                self.w3 = nn.Linear(d, hidden, bias=False)
                self.w2 = nn.Linear(hidden, d, bias=False)
            else:
                self.fc = nn.Linear(d, hidden, bias=bias)
                self.proj = nn.Linear(hidden, d, bias=bias)

        def forward(self, x):
            if llama:
                return self.w2(F.silu(self.w1(x)) * self.w3(x))
            return self.proj(F.gelu(self.fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attn, self.norm2, self.mlp = norm(), Attention(), norm(), MLP()

        def forward(self, x, rope):
            x = x + self.attn(self.norm1(x), rope)
            return x + self.mlp(self.norm2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, d)
            self.wpe = None if llama else nn.Embedding(T, d)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.norm = norm()
            self.head = nn.Linear(d, V, bias=False)
            self.head.weight = self.wte.weight  # tied embeddings
            if llama:
                hd = d // h
                inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
                ang = torch.outer(torch.arange(T, dtype=torch.float32), inv)  # (T, hd/2)
                self.register_buffer("cos", ang.cos(), persistent=False)  # (T, hd/2): one angle per pair
                self.register_buffer("sin", ang.sin(), persistent=False)
            for name, p in self.named_parameters():  # GPT-2's init: N(0, 0.02), residual projections scaled
                if p.dim() >= 2:
                    std = 0.02 / math.sqrt(2 * L) if name.endswith(("proj.weight", "w2.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx):
            Tn = idx.shape[1]
            x = self.wte(idx)
            rope = None
            if self.wpe is not None:
                x = x + self.wpe(torch.arange(Tn, device=idx.device))
            else:
                rope = (self.cos[:Tn].to(x.dtype), self.sin[:Tn].to(x.dtype))
            for block in self.blocks:
                x = block(x, rope)
            return self.head(self.norm(x))

    return GPT()


def matmul_params(sizes: dict) -> int:
    """N of the 6N rule: every parameter but the learned position table (nanoGPT's ``get_num_params``, which
    counts the tied token embedding once: it is the output head's matrix); norms and biases included."""
    d, L, V, hidden = sizes["d_model"], sizes["n_layers"], sizes["vocab_size"], sizes["ffn_hidden"]
    if sizes["style"] == "llama":
        per_layer = 4 * d * d + 3 * d * hidden + 2 * d  # qkv + proj, w1 w2 w3, two RMSNorm weights
        return L * per_layer + V * d + d
    per_layer = (3 * d * d + 3 * d) + (d * d + d) + (d * hidden + hidden) + (hidden * d + d) + 4 * d
    return L * per_layer + V * d + 2 * d


def analytic_flops_per_token(sizes: dict) -> float:
    """Training FLOPs per token: 6N + 12·L·H·Q·T (PaLM, Chowdhery et al. 2022, appendix B; nanoGPT's
    ``estimate_mfu``): 6N for the forward and backward matmuls with the weights, 12·L·H·Q·T for the attention
    scores and their weighted sum (H heads of size Q, context T), counted in full as a dense product."""
    d, L, T = sizes["d_model"], sizes["n_layers"], sizes["seq_len"]
    return 6 * matmul_params(sizes) + 12 * L * d * T


# ---------------------------------------------------------------- the corpus


def markov_chain(vocab: int, branching: int, gen, torch):
    """(successors (V, k) int64, probs (V, k)): token i goes to successors[i, j] with probs[i, j]. The k
    successors of a token are distinct and include i+1 (mod V), so every token reaches every other one."""
    k = max(1, min(branching, vocab))
    gaps = torch.randint(1, max(2, vocab // k), (vocab, k - 1), generator=gen)
    offsets = torch.cat([torch.ones(vocab, 1, dtype=torch.long), 1 + gaps.cumsum(1)], 1)  # distinct, < V
    successors = (torch.arange(vocab).unsqueeze(1) + offsets) % vocab
    probs = torch.softmax(torch.randn(vocab, k, generator=gen, dtype=torch.float64), dim=1)
    return successors, probs


def stationary(successors, probs, torch, tol: float = 1e-13, max_iter: int = 100_000):
    """The chain's stationary distribution, by the lazy power iteration pi <- (pi + pi P) / 2 (same fixed
    point, converges for periodic chains too) until it moves by less than ``tol`` (L1)."""
    V = successors.shape[0]
    pi = torch.full((V,), 1.0 / V, dtype=torch.float64)
    flat = successors.reshape(-1)
    for _ in range(max_iter):
        nxt = torch.zeros(V, dtype=torch.float64).index_add_(0, flat, (pi.unsqueeze(1) * probs).reshape(-1))
        nxt = 0.5 * (pi + nxt)
        if float((nxt - pi).abs().sum()) < tol:
            return nxt
        pi = nxt
    return pi


def entropy_rate(successors, probs, torch) -> float:
    """The chain's entropy rate in nats per token: sum_i pi_i · H(P_i), the lowest possible mean next-token
    cross-entropy on text drawn from it."""
    pi = stationary(successors, probs, torch)
    row_entropy = -(probs * probs.log()).sum(1)
    return float((pi * row_entropy).sum())


def make_corpus(sizes: dict, gpt_cfg: dict, gen, torch) -> tuple:
    """(x_train, y_train, x_test, y_test, floor): ``n_train`` + ``n_test`` sequences of ``seq_len`` tokens
    (int64) sampled from the chain, y the next tokens; ``floor`` the entropy rate (nats/token)."""
    V, T = sizes["vocab_size"], sizes["seq_len"]
    successors, probs = markov_chain(V, gpt_cfg["markov_branching"], gen, torch)
    pi = stationary(successors, probs, torch)
    n = gpt_cfg["n_train"] + gpt_cfg["n_test"]
    seq = torch.empty(n, T + 1, dtype=torch.long)
    seq[:, 0] = torch.multinomial(pi.float(), n, replacement=True, generator=gen)
    probs32 = probs.float()
    for t in range(T):
        state = seq[:, t]
        pick = torch.multinomial(probs32[state], 1, generator=gen).squeeze(1)
        seq[:, t + 1] = successors[state, pick]
    floor = float((pi * -(probs * probs.log()).sum(1)).sum())
    tr = gpt_cfg["n_train"]
    x, y = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
    return x[:tr], y[:tr], x[tr:], y[tr:], floor
