#!/usr/bin/env python3
"""Fixtures for tests/test_variants.c: linear attention (Katharopoulos et al. 2020) computed
in float64 with NumPy, independently of the C code.

    phi(x) = elu(x) + 1
    out_i  = sum_j A_ij v_j / sum_j A_ij,   A_ij = phi(q_i) . phi(k_j) over visible keys j
             (visible: key-padding mask true and, when causal, j <= i + Lk - Lq)
    a query row with no visible key gives 0.

Writes tests/fixtures/variants/lin_*.npy (float32 inputs, float32 outputs of the float64
reference). Run from the repository root:  python3 scripts/gen_variants_fixtures.py
"""
import os

import numpy as np

OUT = os.path.join("tests", "fixtures", "variants")


def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(q, k, v, causal, kpm=None):
    """q [B,H,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv]; kpm bool [B,Lk] (True = real key)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    B, H, Lq, _ = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    g = H // Hkv
    k = np.repeat(k, g, axis=1)  # query head h reads kv head h // g
    v = np.repeat(v, g, axis=1)
    A = np.einsum("bhid,bhjd->bhij", phi(q), phi(k))
    keep = np.ones((B, 1, Lq, Lk), dtype=bool)
    if kpm is not None:
        keep &= kpm[:, None, None, :]
    if causal:
        i = np.arange(Lq)[:, None]
        j = np.arange(Lk)[None, :]
        keep &= (j <= i + Lk - Lq)[None, None]
    A = A * keep
    den = A.sum(-1, keepdims=True)
    num = A @ v
    out = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    return out.astype(np.float32)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240601)
    B, H, Hkv, L, D, Dv = 2, 4, 2, 9, 6, 5
    q = rng.standard_normal((B, H, L, D)).astype(np.float32)
    k = rng.standard_normal((B, Hkv, L, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, L, Dv)).astype(np.float32)
    # batch row 1 is left-padded by 3 keys, and has a hole at key 6
    kpm = np.ones((B, L), dtype=bool)
    kpm[1, :3] = False
    kpm[1, 6] = False
    files = {
        "lin_q": q,
        "lin_k": k,
        "lin_v": v,
        "lin_kpm": kpm,
        "lin_out": linear_attention(q, k, v, False),
        "lin_out_causal": linear_attention(q, k, v, True),
        "lin_out_kpm": linear_attention(q, k, v, False, kpm),
        "lin_out_causal_kpm": linear_attention(q, k, v, True, kpm),
    }
    # a continuation: Lq = 4 queries over Lk = 9 keys (bottom-right causal alignment)
    q4 = rng.standard_normal((B, H, 4, D)).astype(np.float32)
    files["lin_q4"] = q4
    files["lin_out_q4_causal"] = linear_attention(q4, k, v, True)
    for name, arr in files.items():
        np.save(os.path.join(OUT, name + ".npy"), arr)
    print("wrote", len(files), "files to", OUT)


if __name__ == "__main__":
    main()
