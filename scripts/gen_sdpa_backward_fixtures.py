#!/usr/bin/env python3
"""Reference gradients for attn_sdpa_backward, made by torch.autograd through
torch.nn.functional.scaled_dot_product_attention in float32 (CPU), saved as .npy under
tests/fixtures/sdpa_backward/. Run from the repository root:

    /work/venv-peers/bin/python scripts/gen_sdpa_backward_fixtures.py

Per case: q, k, v, dout (inputs), mask (bool, or float32 additive) when the case has one,
out and lse (the forward: lse = logsumexp of the masked scaled scores, computed in float64),
dq, dk, dv (torch's gradients of sum(out * dout)). attn's own options (is_causal bottom-right,
window, key_lengths) are given to torch as the equivalent boolean mask; the C test
(tests/test_sdpa_backward.c) holds the same table of options. torch's is_causal is top-left
aligned: case causal_tl uses it directly and attn gets the saved top-left mask.
No case has a fully masked row (torch returns NaN there; attn returns 0).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "sdpa_backward")
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(2101)


def save(case, name, a):
    a = a.detach().numpy() if torch.is_tensor(a) else np.asarray(a)
    np.save(os.path.join(OUT, f"{case}.{name}.npy"), np.ascontiguousarray(a))


def visible(Lq, Lk, B, causal_br=False, window=0, key_lengths=None):
    """attn's causal (bottom-right) / window / key_lengths rules as a [B, 1, Lq, Lk] bool mask"""
    i = torch.arange(Lq)[:, None]
    j = torch.arange(Lk)[None, :]
    qpos = i + Lk - Lq
    m = torch.ones(Lq, Lk, dtype=torch.bool)
    if causal_br or window > 0:
        m &= j <= qpos
    if window > 0:
        m &= j > qpos - window
    m = m.expand(B, 1, Lq, Lk).clone()
    if key_lengths is not None:
        for b, n in enumerate(key_lengths):
            m[b, :, :, n:] = False
    return m


def case(name, B, H, Hkv, Lq, Lk, D, Dv, mask=None, torch_causal=False, scale=None, save_mask=None):
    q = torch.randn(B, H, Lq, D)
    k = torch.randn(B, Hkv, Lk, D)
    v = torch.randn(B, Hkv, Lk, Dv)
    dout = torch.randn(B, H, Lq, Dv)
    for t in (q, k, v):
        t.requires_grad_(True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=torch_causal, scale=scale,
                                         enable_gqa=H != Hkv)
    out.backward(dout)
    # log-sum-exp of the masked, scaled scores in float64
    sc = scale if scale is not None else 1.0 / np.sqrt(D)
    kk = k.detach().double().repeat_interleave(H // Hkv, dim=1)
    s = (q.detach().double() @ kk.transpose(-1, -2)) * sc
    if torch_causal:
        s = s.masked_fill(~torch.ones(Lq, Lk, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.double()
    lse = torch.logsumexp(s, dim=-1)
    assert torch.isfinite(lse).all() and torch.isfinite(out).all()
    for n, t in [("q", q), ("k", k), ("v", v), ("dout", dout), ("out", out), ("lse", lse.float()),
                 ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)]:
        save(name, n, t.float())
    if save_mask is not None:
        save(name, "mask", save_mask)
    print(f"{name}: q {tuple(q.shape)} k {tuple(k.shape)} v {tuple(v.shape)}")


case("basic", 2, 4, 4, 37, 37, 32, 32)
case("causal_tl", 1, 2, 2, 20, 33, 16, 16, torch_causal=True,
     save_mask=torch.ones(20, 33, dtype=torch.bool).tril().numpy())
m = visible(20, 33, 1, causal_br=True)
case("causal_br", 1, 2, 2, 20, 33, 16, 16, mask=m)
bias = torch.randn(48, 48) * 0.5
bias[torch.rand(48, 48) < 0.2] = float("-inf")
bias.fill_diagonal_(0.0)  # every row keeps a visible key
case("gqa_float_mask", 1, 6, 2, 48, 48, 64, 64, mask=bias, save_mask=bias.numpy())
m = visible(40, 40, 2, window=8, key_lengths=[40, 34])
case("window_klen", 2, 2, 1, 40, 40, 24, 24, mask=m)
case("decode_dv", 2, 3, 3, 1, 70, 16, 40)
case("scale_wide", 1, 1, 1, 70, 5, 128, 8, scale=0.3)
