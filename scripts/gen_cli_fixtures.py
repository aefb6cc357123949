#!/usr/bin/env python3
"""Fixtures for tests/test_cli.c (`attn sdpa` parity). Run from the repository root:
    python3 scripts/gen_cli_fixtures.py
Writes small float32 inputs and float64 NumPy reference outputs to tests/fixtures/cli/.

The reference implements the semantics stated in include/attn_attention.h:
  out = softmax(q k^T * scale + mask) v, scale = 1/sqrt(D) unless given;
  grouped-query attention: query head h reads kv head h // (H / Hkv);
  bool mask: True = may attend; float mask: added to the scores, except that -inf or
  values <= -FLT_MAX mark the key as masked;
  causal (bottom-right): key j visible to query i iff j <= i + Lk - Lq;
  window W: i + Lk - Lq - W < j <= i + Lk - Lq;
  a query row with no visible key gives zero output and zero weights.
"""
import os

import numpy as np

OUT = os.path.join("tests", "fixtures", "cli")
FLT_MAX = float(np.finfo(np.float32).max)


def to4(x):
    while x.ndim < 4:
        x = x[None]
    return x


def sdpa_ref(q, k, v, mask=None, causal=False, window=0, scale=None):
    rank = q.ndim
    q, k, v = (to4(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    B, H, Lq, D = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    g = H // Hkv
    kk = np.repeat(k, g, axis=1)
    vv = np.repeat(v, g, axis=1)
    s = (1.0 / np.sqrt(D)) if scale is None else float(np.float32(scale))
    scores = np.einsum("bhid,bhjd->bhij", q, kk) * s
    visible = np.ones(scores.shape, dtype=bool)
    if mask is not None:
        m = np.broadcast_to(to4(mask), scores.shape)
        if m.dtype == np.bool_:
            visible &= m
        else:
            m = m.astype(np.float64)
            masked = np.isneginf(m) | (m <= -FLT_MAX)
            visible &= ~masked
            scores = scores + np.where(masked, 0.0, m)
    i = np.arange(Lq)[:, None]
    j = np.arange(Lk)[None, :]
    diag = i + Lk - Lq
    if causal:
        visible &= j <= diag
    if window > 0:
        visible &= (j <= diag) & (j > diag - window)
    scores = np.where(visible, scores, -np.inf)
    mx = scores.max(axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = np.where(visible, np.exp(scores - mx), 0.0)
    den = e.sum(axis=-1, keepdims=True)
    w = np.where(den > 0, e / np.where(den > 0, den, 1.0), 0.0)
    out = np.einsum("bhij,bhjd->bhid", w, vv)
    # back to q's rank
    out = out.reshape(out.shape[4 - rank:]) if rank < 4 else out
    w = w.reshape(w.shape[4 - rank:]) if rank < 4 else w
    return out, w


def save(name, arr):
    np.save(os.path.join(OUT, name), arr)


def case(name, q, k, v, mask=None, **kw):
    out, w = sdpa_ref(q, k, v, mask, **kw)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(w))
    save(name + "_ref_out.npy", out)
    save(name + "_ref_w.npy", w)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240601)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)

    # base: B=2, H=4, Hkv=2 (GQA), Lq=5 < Lk=7, D=8, Dv=6
    q, k, v = f32(2, 4, 5, 8), f32(2, 2, 7, 8), f32(2, 2, 7, 6)
    save("q.npy", q)
    save("k.npy", k)
    save("v.npy", v)
    case("plain", q, k, v)

    # bool mask [B, 1, Lq, Lk] broadcast over heads; batch 0 rows 1 and 3 fully masked
    bm = rng.random((2, 1, 5, 7)) < 0.6
    bm[0, 0, 1, :] = False
    bm[0, 0, 3, :] = False
    bm[1, 0, 4, :] = False
    bm[1, 0, 0, 2] = True
    save("mask_bool.npy", bm)
    case("boolmask", q, k, v, bm)

    # float mask [Lq, Lk]: real biases, -inf, finfo.min (masked) and one fully masked row
    fm = (rng.standard_normal((5, 7)) * 2).astype(np.float32)
    fm[0, 1] = -np.inf
    fm[0, 4] = np.finfo(np.float32).min
    fm[1, 0] = -1e9  # a real (finite) bias, not a mask
    fm[2, :] = -np.inf
    fm[2, 3] = np.finfo(np.float32).min
    fm[3, 5] = 6.0
    save("mask_float.npy", fm)
    case("floatmask", q, k, v, fm)

    case("causal", q, k, v, causal=True)
    case("window", q, k, v, window=3)
    case("causal_boolmask", q, k, v, bm, causal=True)
    case("scale", q, k, v, scale=0.3)

    # rank 3 ([H, L, D], B = 1), multi-query (Hkv = 1), causal with Lq < Lk
    q3, k3, v3 = f32(3, 4, 5), f32(1, 6, 5), f32(1, 6, 2)
    save("q3.npy", q3)
    save("k3.npy", k3)
    save("v3.npy", v3)
    case("rank3", q3, k3, v3, causal=True)

    # rank 2 ([L, D], B = H = 1), Lq > Lk
    q2, k2, v2 = f32(6, 4), f32(4, 4), f32(4, 3)
    save("q2.npy", q2)
    save("k2.npy", k2)
    save("v2.npy", v2)
    case("rank2", q2, k2, v2)


if __name__ == "__main__":
    main()
