"""positional_encoding, layer_norm, rms_norm, rope, softmax against float64 NumPy formulas.
Tolerances: 1e-6 absolute for the PE table (values in [-1, 1], computed in float64 and
rounded once); 1e-5 * scale for norms and RoPE (float32 inputs, float64 arithmetic in the
reference, one float32 rounding plus a few in the kernel)."""
import numpy as np
import pytest

import attn
from conftest import max_rel_err


def ref_pe(L, D, offset=0):
    pos = np.arange(offset, offset + L, dtype=np.float64)[:, None]
    i = np.arange(D)[None, :]
    ang = pos / np.power(10000.0, (2 * (i // 2)) / D)
    return np.where(i % 2 == 0, np.sin(ang), np.cos(ang))


@pytest.mark.parametrize("L,D,offset", [(1, 4, 0), (50, 64, 0), (7, 5, 3), (3, 1, 0), (0, 8, 0)])
def test_positional_encoding(L, D, offset):
    pe = attn.positional_encoding(L, D, offset=offset)
    assert pe.shape == (L, D) and pe.dtype == np.float32
    assert np.max(np.abs(pe - ref_pe(L, D, offset)), initial=0) <= 1e-6


def test_positional_encoding_known_value():
    # include/attn_ops.h: d_model = 5 at position 1
    want = [0.841471, 0.540302, 0.025116, 0.999685, 0.000631]
    assert np.allclose(attn.positional_encoding(2, 5)[1], want, atol=1e-6)


def test_positional_encoding_errors():
    with pytest.raises(ValueError, match="length"):
        attn.positional_encoding(-1, 4)
    with pytest.raises(TypeError):
        attn.positional_encoding(3.5, 4)
    with pytest.raises(ValueError, match="too large"):
        attn.positional_encoding(1 << 30, 1 << 20)


def test_layer_norm(rng):
    x = (rng.standard_normal((3, 5, 16)) * 3 + 40000).astype(np.float32)
    g, b = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    xd = x.astype(np.float64)
    mu, var = xd.mean(-1, keepdims=True), xd.var(-1, keepdims=True)
    want = (xd - mu) / np.sqrt(var + 1e-5) * g + b
    assert max_rel_err(attn.layer_norm(x, g, b), want) <= 1e-5
    xt = np.ascontiguousarray(x.transpose(1, 0, 2)).transpose(1, 0, 2)  # strided rows
    assert max_rel_err(attn.layer_norm(xt, g, b), want) <= 1e-5
    plain = (xd - mu) / np.sqrt(var + 1e-5)
    assert max_rel_err(attn.layer_norm(x), plain) <= 1e-5
    # the documented large-offset example
    y = attn.layer_norm(np.array([40000, 40001, 40002, 40003], np.float32))
    assert np.allclose(y, [-1.34164, -0.44721, 0.44721, 1.34164], atol=1e-5)


def test_rms_norm(rng):
    x = rng.standard_normal((4, 32)).astype(np.float32)[:, ::2]  # strided last dim
    w = rng.standard_normal(16).astype(np.float32)
    xd = x.astype(np.float64)
    want = xd / np.sqrt((xd ** 2).mean(-1, keepdims=True) + 1e-6) * w
    assert max_rel_err(attn.rms_norm(x, w), want) <= 1e-5


def test_norm_errors(rng):
    x = rng.standard_normal((2, 8)).astype(np.float32)
    with pytest.raises(ValueError, match=r"weight must have shape \(8,\)"):
        attn.layer_norm(x, np.ones(7, np.float32))
    with pytest.raises(TypeError, match="float32"):
        attn.rms_norm(x.astype(np.float64))
    with pytest.raises(ValueError, match="eps"):
        attn.layer_norm(x, eps=-1.0)
    with pytest.raises(ValueError):
        attn.rms_norm(np.float32(3.0))


def ref_rope(x, offset, theta, R, interleaved):
    x = x.astype(np.float64)
    L, D = x.shape[-2], x.shape[-1]
    R = R or D
    pos = np.arange(offset, offset + L, dtype=np.float64)[:, None]
    inv = theta ** (-2.0 * np.arange(R // 2) / R)
    ang = pos * inv
    c, s = np.cos(ang), np.sin(ang)
    out = x.copy()
    if interleaved:
        a, b = x[..., 0:R:2], x[..., 1:R:2]
        out[..., 0:R:2], out[..., 1:R:2] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., : R // 2], x[..., R // 2: R]
        out[..., : R // 2], out[..., R // 2: R] = a * c - b * s, a * s + b * c
    return out


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("R,offset", [(None, 0), (8, 5), (16, 100)])
def test_rope(rng, interleaved, R, offset):
    x = rng.standard_normal((2, 3, 7, 16)).astype(np.float32)
    y = attn.rope(x, offset=offset, rotary_dim=R, interleaved=interleaved)
    assert y.shape == x.shape and not np.shares_memory(x, y)
    assert max_rel_err(y, ref_rope(x, offset, 10000.0, R, interleaved)) <= 1e-5
    y2 = attn.rope(x[0].transpose(1, 0, 2).transpose(1, 0, 2), offset=offset, rotary_dim=R, interleaved=interleaved)
    assert max_rel_err(y2, ref_rope(x[0], offset, 10000.0, R, interleaved)) <= 1e-5


def test_rope_errors(rng):
    x = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    with pytest.raises(ValueError, match="rotary_dim"):
        attn.rope(x, rotary_dim=5)
    with pytest.raises(ValueError, match="rotary_dim"):
        attn.rope(x, rotary_dim=10)
    with pytest.raises(ValueError):
        attn.rope(x, theta=0.0)
    with pytest.raises(ValueError, match="offset"):
        attn.rope(x, offset=-1)
    with pytest.raises(ValueError):
        attn.rope(x[0, 0, 0])


def test_softmax(rng):
    x = rng.standard_normal((3, 9)).astype(np.float32) * 10
    x[1, 2] = -np.inf
    x[2] = -np.inf
    xd = x.astype(np.float64)
    e = np.exp(xd[:2] - xd[:2].max(-1, keepdims=True))
    y = attn.softmax(x)
    assert max_rel_err(y[:2], e / e.sum(-1, keepdims=True)) <= 1e-6
    assert np.all(y[2] == 0)
    x[0, 0] = np.nan
    with pytest.raises(ValueError):
        attn.softmax(x)
