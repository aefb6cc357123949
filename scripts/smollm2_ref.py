#!/usr/bin/env python3
"""Float64 NumPy reference of a llama-architecture GGUF model (SmolLM2-135M-Instruct Q4_1):
every weight is dequantized exactly by the `gguf` package (gguf.quants.dequantize: the GGUF block
formats' definitions), then the forward pass runs in float64 with unquantized activations:
RMSNorm, RoPE on adjacent pairs with theta from llama.rope.freq_base, grouped-query attention,
SwiGLU, output tied to token_embd. Used by scripts/gen_smollm2_fixtures.py.
"""
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class GGUFLlama:
    def __init__(self, path):
        r = GGUFReader(path)
        self.r = r

        def kv(k):
            f = r.fields[k]
            return f.parts[f.data[0]][0]
        self.dim = int(kv("llama.embedding_length"))
        self.L = int(kv("llama.block_count"))
        self.H = int(kv("llama.attention.head_count"))
        self.KV = int(kv("llama.attention.head_count_kv"))
        self.theta = float(kv("llama.rope.freq_base"))
        self.eps = float(kv("llama.attention.layer_norm_rms_epsilon"))
        self.hd = self.dim // self.H
        self.t = {}
        self.c64 = {}
        for t in r.tensors:
            a = dequantize(t.data, t.tensor_type)
            self.t[t.name] = np.asarray(a, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)] if a.ndim == 1 and len(t.shape) > 1 else a.shape)
        self.emb = self.t["token_embd.weight"]
        self.out = self.t.get("output.weight", self.emb)

    def rmsnorm(self, x, w):
        return w.astype(np.float64) * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps))

    def rope(self, x, pos):
        hd = self.hd
        inv = self.theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        o = np.empty_like(x)
        o[..., 0::2] = x0 * c - x1 * s
        o[..., 1::2] = x0 * s + x1 * c
        return o

    def w64(self, name):
        if name not in self.c64:
            self.c64[name] = self.t[name].astype(np.float64)
        return self.c64[name]

    def lin(self, x, name):
        return x @ self.w64(name).T

    def forward(self, tokens, cache=None):
        """logits float64 [T, V] of tokens following the cache (a dict, updated; None = empty):
        causal attention over the cached keys/values and the new ones."""
        T = len(tokens)
        x = self.emb[np.asarray(tokens)].astype(np.float64)
        cache = {} if cache is None else cache
        p0 = cache.get("len", 0)
        pos = np.arange(p0, p0 + T)
        H, KV, hd = self.H, self.KV, self.hd
        mask = np.triu(np.full((T, p0 + T), -np.inf), p0 + 1)
        for l in range(self.L):
            p = "blk.%d." % l
            h = self.rmsnorm(x, self.t[p + "attn_norm.weight"])
            q = self.rope(self.lin(h, p + "attn_q.weight").reshape(T, H, hd), pos)
            k = self.rope(self.lin(h, p + "attn_k.weight").reshape(T, KV, hd), pos)
            v = self.lin(h, p + "attn_v.weight").reshape(T, KV, hd)
            if l in cache:
                k = np.concatenate([cache[l][0], k])
                v = np.concatenate([cache[l][1], v])
            cache[l] = (k, v)
            k = np.repeat(k, H // KV, axis=1)
            v = np.repeat(v, H // KV, axis=1)
            a = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            o = np.einsum("hts,shd->thd", a, v).reshape(T, H * hd)
            x = x + self.lin(o, p + "attn_output.weight")
            h = self.rmsnorm(x, self.t[p + "ffn_norm.weight"])
            g = self.lin(h, p + "ffn_gate.weight")
            u = self.lin(h, p + "ffn_up.weight")
            x = x + self.lin((g / (1 + np.exp(-g))) * u, p + "ffn_down.weight")
        cache["len"] = p0 + T
        return self.rmsnorm(x, self.t["output_norm.weight"]) @ self.w64("output.weight" if "output.weight" in self.t else "token_embd.weight").T
