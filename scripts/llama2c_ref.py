#!/usr/bin/env python3
"""Independent NumPy float64 implementation of a llama2.c checkpoint (legacy version-0 format)
and its tokenizer.bin, written from the format description (header of 7 int32, float32 weights
in the order token_embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final,
freq_cis_real, freq_cis_imag, [wcls]) and the Llama architecture (RMSNorm, RoPE on adjacent
pairs, grouped-query attention, SwiGLU). It is the oracle for tests/test_llama.c.

    python3 scripts/llama2c_ref.py MODEL.bin TOKENIZER.bin "prompt" [steps]   # greedy continuation
"""
import struct
import sys

import numpy as np


class Tokenizer:
    def __init__(self, path, vocab_size):
        data = open(path, "rb").read()
        self.max_len = struct.unpack_from("<i", data, 0)[0]
        off = 4
        self.pieces, self.scores = [], []
        for _ in range(vocab_size):
            score, n = struct.unpack_from("<fi", data, off)
            off += 8
            self.pieces.append(data[off:off + n])
            self.scores.append(score)
            off += n
        self.index = {}
        for i, p in enumerate(self.pieces):
            self.index.setdefault(p, i)

    def encode(self, text, bos=True):
        """SentencePiece-style BPE: dummy space prefix, characters or byte fallback (<0xXX> = id
        byte + 3), then repeatedly merge the adjacent pair whose concatenation has the best score
        (leftmost among equal scores)."""
        ids = [1] if bos else []
        if not text:
            return ids
        syms = [self.index[b" "]]
        for ch in text:
            b = ch.encode("utf-8")
            if b in self.index:
                syms.append(self.index[b])
            else:
                syms.extend(x + 3 for x in b)
        while True:
            best, best_i, best_id = None, -1, -1
            for i in range(len(syms) - 1):
                cat = self.pieces[syms[i]] + self.pieces[syms[i + 1]]
                j = self.index.get(cat)
                if j is not None and (best is None or self.scores[j] > best):
                    best, best_i, best_id = self.scores[j], i, j
            if best_i < 0:
                break
            syms[best_i:best_i + 2] = [best_id]
        return ids + syms

    def piece(self, prev, tok):
        p = self.pieces[tok]
        if prev == 1 and p.startswith(b" "):
            p = p[1:]
        if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
            return bytes([int(p[3:5], 16)])
        return p


class Model:
    def __init__(self, path):
        data = open(path, "rb").read()
        dim, hidden, L, H, KV, V, S = struct.unpack_from("<7i", data, 0)
        shared = V > 0
        V = abs(V)
        self.dim, self.hidden, self.L, self.H, self.KV, self.V, self.S = dim, hidden, L, H, KV, V, S
        self.hd = dim // H
        w = np.frombuffer(data, dtype="<f4", offset=28).astype(np.float64)
        o = 0

        def take(*shape):
            nonlocal o
            n = int(np.prod(shape))
            a = w[o:o + n].reshape(shape)
            o += n
            return a
        kvd = KV * self.hd
        self.emb = take(V, dim)
        self.rms_att = take(L, dim)
        self.wq = take(L, dim, dim)
        self.wk = take(L, kvd, dim)
        self.wv = take(L, kvd, dim)
        self.wo = take(L, dim, dim)
        self.rms_ffn = take(L, dim)
        self.w1 = take(L, hidden, dim)
        self.w2 = take(L, dim, hidden)
        self.w3 = take(L, hidden, dim)
        self.rms_final = take(dim)
        take(S, self.hd // 2)
        take(S, self.hd // 2)
        self.wcls = self.emb if shared else take(V, dim)
        assert o == len(w), (o, len(w))

    @staticmethod
    def rmsnorm(x, w, eps=1e-5):
        return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))

    def rope(self, x, pos):
        # x [T, nh, hd]; pairs (2i, 2i+1) rotate by pos * 10000^(-2i/hd)
        hd = self.hd
        inv = 10000.0 ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    def forward(self, tokens):
        """logits [T, V] for the whole sequence (causal attention, no cache)."""
        T = len(tokens)
        x = self.emb[np.asarray(tokens)]
        pos = np.arange(T)
        H, KV, hd = self.H, self.KV, self.hd
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for l in range(self.L):
            h = self.rmsnorm(x, self.rms_att[l])
            q = self.rope((h @ self.wq[l].T).reshape(T, H, hd), pos)
            k = self.rope((h @ self.wk[l].T).reshape(T, KV, hd), pos)
            v = (h @ self.wv[l].T).reshape(T, KV, hd)
            rep = H // KV
            k = np.repeat(k, rep, axis=1)
            v = np.repeat(v, rep, axis=1)
            att = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            o = np.einsum("hts,shd->thd", att, v).reshape(T, H * hd)
            x = x + o @ self.wo[l].T
            h = self.rmsnorm(x, self.rms_ffn[l])
            g = h @ self.w1[l].T
            u = h @ self.w3[l].T
            x = x + ((g / (1 + np.exp(-g))) * u) @ self.w2[l].T
        return self.rmsnorm(x, self.rms_final) @ self.wcls.T

    def greedy(self, ids, steps):
        ids = list(ids)
        out = []
        for _ in range(steps):
            nxt = int(np.argmax(self.forward(ids)[-1]))
            out.append(nxt)
            ids.append(nxt)
        return out


if __name__ == "__main__":
    m = Model(sys.argv[1])
    t = Tokenizer(sys.argv[2], m.V)
    ids = t.encode(sys.argv[3])
    gen = m.greedy(ids, int(sys.argv[4]) if len(sys.argv) > 4 else 32)
    text, prev = b"", ids[-1]
    for g in gen:
        text += t.piece(prev, g)
        prev = g
    print(ids, gen)
    print(sys.argv[3] + text.decode("utf-8", "replace"))
