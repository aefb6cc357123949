"""attn.sdpa(..., return_lse=True) and attn.sdpa_backward against a NumPy float64 reference
written here (full score matrix, softmax, the chain rule written out).

Tolerance: max |attn - ref| <= 2e-5 * max |ref| per gradient: float32 tile sums over <= 200 keys
and the float32 forward's out / lse (rel. error ~1e-6) against float64; the C suite
(tests/test_sdpa_backward.c) measures ~2e-6 against libattn's float64 reference, so 2e-5 is
10x the measured error while a wrong mask cell or a missed GQA head is off by 1e-2 or more.
lse: 2e-6 relative to max(|lse|, 1) (float32 scores and log)."""
import zlib

import numpy as np
import pytest

import attn
from conftest import max_rel_err

TOL = 2e-5


def ref_grads(q, k, v, dout, mask=None, causal="none", scale=None, window=0):
    """float64: (out, lse, dq, dk, dv) for [..., H, L, D] inputs (GQA by repeat)."""
    q, k, v, dout = (a.astype(np.float64) for a in (q, k, v, dout))
    H, Hkv = q.shape[-3], k.shape[-3]
    g = H // Hkv
    kr, vr = np.repeat(k, g, axis=-3), np.repeat(v, g, axis=-3)
    Lq, Lk, D = q.shape[-2], k.shape[-2], q.shape[-1]
    sc = 1.0 / np.sqrt(D) if scale is None else scale
    s = q @ np.swapaxes(kr, -1, -2) * sc
    vis = np.ones((Lq, Lk), dtype=bool)
    i, j = np.arange(Lq)[:, None], np.arange(Lk)[None, :]
    off = 0 if causal == "upper_left" else Lk - Lq
    if causal != "none" or window:
        vis &= j <= i + off
    if window:
        vis &= j > i + off - window
    vis = np.broadcast_to(vis, s.shape).copy()
    if mask is not None:
        if mask.dtype == np.bool_:
            vis &= np.broadcast_to(mask, s.shape)
        else:
            s = s + np.broadcast_to(mask, s.shape)
            vis &= np.broadcast_to(mask > -np.inf, s.shape)
    s = np.where(vis, s, -np.inf)
    mx = np.max(s, axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = np.where(vis, np.exp(s - mx), 0.0)
    tot = e.sum(-1, keepdims=True)
    p = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    with np.errstate(divide="ignore"):
        lse = np.where(tot[..., 0] > 0, mx[..., 0] + np.log(tot[..., 0]), -np.inf)
    out = p @ vr
    dp = dout @ np.swapaxes(vr, -1, -2)
    ds = p * (dp - np.sum(dout * out, axis=-1, keepdims=True))
    dq = ds @ kr * sc
    dkr = np.swapaxes(ds, -1, -2) @ q * sc
    dvr = np.swapaxes(p, -1, -2) @ dout
    shp = dkr.shape[:-3] + (Hkv, g) + dkr.shape[-2:]
    dk = dkr.reshape(shp).sum(-3)
    dv = dvr.reshape(dvr.shape[:-3] + (Hkv, g) + dvr.shape[-2:]).sum(-3)
    return out, lse, dq, dk, dv


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


CASES = [
    # (name, B-dims, H, Hkv, Lq, Lk, D, Dv, kwargs)
    ("plain", (2,), 3, 3, 17, 17, 16, 16, {}),
    ("causal_upper_left_Lq<Lk", (1,), 2, 2, 20, 45, 32, 32, {"is_causal": True}),
    ("causal_upper_left_Lq>Lk", (1,), 2, 2, 45, 20, 32, 32, {"is_causal": True}),
    ("causal_lower_right", (2,), 2, 2, 20, 45, 16, 24, {"is_causal": "lower_right"}),
    ("gqa", (1,), 6, 2, 70, 70, 64, 64, {"enable_gqa": True, "is_causal": True}),
    ("window", (1,), 2, 1, 90, 90, 16, 16, {"window": 9, "enable_gqa": True}),
    ("scale", (), 2, 2, 33, 50, 128, 8, {"scale": 0.2}),
    ("batch_5d", (2, 3), 2, 2, 10, 12, 16, 16, {}),
    ("decode", (1,), 4, 4, 1, 200, 64, 64, {"is_causal": "lower_right"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("impl", ["default", "reference"])
def test_matches_numpy(case, impl):
    name, bd, H, Hkv, Lq, Lk, D, Dv, kw = case
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    q, k, v = rand(rng, *bd, H, Lq, D), rand(rng, *bd, Hkv, Lk, D), rand(rng, *bd, Hkv, Lk, Dv)
    dout = rand(rng, *bd, H, Lq, Dv)
    out, lse = attn.sdpa(q, k, v, return_lse=True, impl=impl, **kw)
    causal = kw.get("is_causal", False)
    causal = "upper_left" if causal is True else ("none" if causal is False else causal)
    ro, rl, rdq, rdk, rdv = ref_grads(q, k, v, dout, causal=causal, scale=kw.get("scale"),
                                      window=kw.get("window", 0))
    assert lse.shape == q.shape[:-1] and lse.dtype == np.float32
    assert max_rel_err(out, ro) < 1e-5
    assert np.max(np.abs(lse - rl) / np.maximum(np.abs(rl), 1)) < 2e-6
    dq, dk, dv = attn.sdpa_backward(q, k, v, out, lse, dout, impl=impl, **kw)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    for got, want in ((dq, rdq), (dk, rdk), (dv, rdv)):
        assert got.dtype == np.float32
        assert max_rel_err(got, want) < TOL


def test_masks_and_empty_rows():
    rng = np.random.default_rng(7)
    q, k, v, dout = rand(rng, 2, 2, 30, 16), rand(rng, 2, 2, 40, 16), rand(rng, 2, 2, 40, 16), rand(rng, 2, 2, 30, 16)
    bm = rng.random((30, 40)) < 0.7
    bm[4] = False  # a fully masked row
    out, lse = attn.sdpa(q, k, v, attn_mask=bm, return_lse=True)
    assert np.all(lse[..., 4] == -np.inf) and np.all(out[..., 4, :] == 0)
    dq, dk, dv = attn.sdpa_backward(q, k, v, out, lse, dout, attn_mask=bm)
    _, _, rdq, rdk, rdv = ref_grads(q, k, v, dout, mask=bm)
    assert np.all(dq[..., 4, :] == 0) and np.all(np.isfinite(dq))
    for got, want in ((dq, rdq), (dk, rdk), (dv, rdv)):
        assert max_rel_err(got, want) < TOL
    fm = (rng.standard_normal((2, 1, 30, 40)) * 0.5).astype(np.float32)
    fm[rng.random(fm.shape) < 0.2] = -np.inf
    out, lse = attn.sdpa(q, k, v, attn_mask=fm, return_lse=True)
    dq, dk, dv = attn.sdpa_backward(q, k, v, out, lse, dout, attn_mask=fm)
    _, rl, rdq, rdk, rdv = ref_grads(q, k, v, dout, mask=fm)
    assert np.max(np.abs(lse - rl) / np.maximum(np.abs(rl), 1)) < 2e-6
    for got, want in ((dq, rdq), (dk, rdk), (dv, rdv)):
        assert max_rel_err(got, want) < TOL


def test_return_forms():
    rng = np.random.default_rng(3)
    q = rand(rng, 1, 2, 5, 8)
    out = attn.sdpa(q, q, q)
    o2, w = attn.sdpa(q, q, q, return_weights=True)
    o3, lse = attn.sdpa(q, q, q, return_lse=True)
    o4, w4, l4 = attn.sdpa(q, q, q, return_weights=True, return_lse=True)
    assert np.array_equal(out, o3) and np.array_equal(o2, o4) and np.array_equal(w, w4)
    assert np.array_equal(lse, l4) and lse.shape == (1, 2, 5)
    # lse is the softmax's normaliser: weights = exp(scores - lse)
    s = q.astype(np.float64) @ np.swapaxes(q, -1, -2) / np.sqrt(8)
    assert np.allclose(np.exp(s - lse[..., None]), w, atol=1e-6)


def test_errors():
    rng = np.random.default_rng(5)
    q, k = rand(rng, 1, 4, 6, 8), rand(rng, 1, 2, 6, 8)
    out, lse = attn.sdpa(q, k, k, return_lse=True)
    g = rand(rng, 1, 4, 6, 8)
    with pytest.raises(ValueError, match="enable_gqa"):
        attn.sdpa_backward(q, k, k, out, lse, g)  # torch's default: no GQA
    with pytest.raises(ValueError, match="grad_out must have shape"):
        attn.sdpa_backward(q, k, k, out, lse, g[..., :5], enable_gqa=True)
    with pytest.raises(ValueError, match="lse must have shape"):
        attn.sdpa_backward(q, k, k, out, lse[..., :5], g, enable_gqa=True)
    with pytest.raises(TypeError):
        attn.sdpa_backward(q, k, k, out, lse.astype(np.float64), g, enable_gqa=True)
    bad = lse.copy()
    bad[0, 1, 2] = np.nan
    with pytest.raises(ValueError, match=r"lse\[0, 1, 2\] is NaN"):
        attn.sdpa_backward(q, k, k, out, bad, g, enable_gqa=True)
    with pytest.raises(ValueError, match="same batch dims"):
        attn.sdpa_backward(q, k[None], k[None], out, lse, g, enable_gqa=True)
    with pytest.raises(ValueError, match="dropout_p"):
        attn.sdpa_backward(q, k, k, out, lse, g, dropout_p=0.1, enable_gqa=True)
