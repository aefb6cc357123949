"""Positional encodings and the non-attention ops people check by hand."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._core import Tensor, as_f32, check_float, check_int, raise_for, tensor
from ._ffi import ffi, lib

ArrayLike = Any


def positional_encoding(length: int, d_model: int, offset: int = 0) -> np.ndarray:
    """The sinusoidal positional-encoding table of Vaswani et al. 2017 (§3.5).

    ``PE[p, 2i] = sin(p / 10000^(2i/d_model))``, ``PE[p, 2i+1] = cos(p / 10000^(2i/d_model))``
    for positions p = offset .. offset+length-1 (computed in float64, stored as float32;
    an odd d_model ends with a sin channel).

    Returns:
        float32 ``[length, d_model]``.
    Raises:
        TypeError: a non-integer argument. ValueError: a negative argument.
    """
    fn = "positional_encoding"
    L = check_int(length, "length", fn, minimum=0)
    D = check_int(d_model, "d_model", fn, minimum=0)
    off = check_int(offset, "offset", fn, minimum=0)
    if L * max(D, 1) > (1 << 40):
        raise ValueError(f"{fn}: a {L} x {D} table is too large")
    out = np.empty((L, D), dtype=np.float32)
    t = Tensor(out)
    raise_for(lib.attn_pe_sinusoidal(t.ptr, off))
    return out


def _vec(x: Optional[ArrayLike], name: str, fn: str, E: int) -> Optional[np.ndarray]:
    if x is None:
        return None
    a = as_f32(x, name, fn)
    if a.shape != (E,):
        raise ValueError(f"{fn}: {name} must have shape ({E},) (the last dim of x), got {a.shape}")
    return a


def _input(x: ArrayLike, fn: str) -> np.ndarray:
    a = as_f32(x, "x", fn)
    if a.ndim < 1:
        raise ValueError(f"{fn}: x must have at least 1 dim [..., E], got a scalar")
    return a


def _norm(fn: str, x: ArrayLike, vectors: Any, eps: float, call: Any) -> np.ndarray:
    """layer_norm / rms_norm: check x, the optional ``[E]`` vectors ((name, value) pairs, in
    the order ``call`` takes them) and eps, then ``call(out, x, *vectors, eps)`` into a new
    float32 array."""
    a = _input(x, fn)
    vs = [_vec(v, name, fn, a.shape[-1]) for name, v in vectors]
    e = check_float(eps, "eps", fn)
    if e < 0:
        raise ValueError(f"{fn}: eps must be >= 0, got {e}")
    out = np.empty(a.shape, dtype=np.float32)
    to, tx = Tensor(out), Tensor(a)
    held = [tensor(v) for v in vs]  # (pointer, the Tensor that keeps it alive)
    raise_for(call(to.ptr, tx.ptr, *[p for p, _ in held], e))
    return out


def layer_norm(x: ArrayLike, weight: Optional[ArrayLike] = None, bias: Optional[ArrayLike] = None,
               eps: float = 1e-5) -> np.ndarray:
    """Layer normalisation over the last dim (Ba et al. 2016; torch.nn.functional.layer_norm
    with normalized_shape = (E,)): ``(x - mean) / sqrt(var + eps) * weight + bias`` with the
    biased variance, computed in float64 (two-pass).

    Args:
        x: float32 ``[..., E]``, any strides. weight, bias: float32 ``[E]`` or None (1 / 0).
        eps: >= 0.
    Returns:
        float32 ``[..., E]`` (a new array).
    Raises:
        TypeError: not float32. ValueError: weight/bias shape, negative or non-finite eps.
    """
    return _norm("layer_norm", x, (("weight", weight), ("bias", bias)), eps, lib.attn_layernorm)


def rms_norm(x: ArrayLike, weight: Optional[ArrayLike] = None, eps: float = 1e-6) -> np.ndarray:
    """RMS normalisation over the last dim (Zhang & Sennrich 2019; Llama's RMSNorm,
    torch.nn.functional.rms_norm with an explicit eps): ``x / sqrt(mean(x**2) + eps) * weight``.

    Args:
        x: float32 ``[..., E]``, any strides. weight: float32 ``[E]`` or None (1).
        eps: >= 0 (default 1e-6, Llama's; torch's default is finfo(float32).eps).
    Returns:
        float32 ``[..., E]`` (a new array).
    Raises:
        TypeError: not float32. ValueError: weight shape, negative or non-finite eps.
    """
    return _norm("rms_norm", x, (("weight", weight),), eps, lib.attn_rmsnorm)


def softmax(x: ArrayLike) -> np.ndarray:
    """Softmax over the last dim (row max subtracted). -inf entries get 0; a row of only -inf
    gives zeros (torch gives NaN).

    Args: x: float32 ``[..., N]``, any strides.
    Returns: float32 ``[..., N]``.
    Raises: TypeError (not float32), ValueError (NaN in x; libattn's RangeError).
    """
    fn = "softmax"
    a = _input(x, fn)
    out = np.empty(a.shape, dtype=np.float32)
    to, tx = Tensor(out), Tensor(a)
    raise_for(lib.attn_softmax(to.ptr, tx.ptr))
    return out


def rope(x: ArrayLike, offset: int = 0, theta: float = 10000.0, rotary_dim: Optional[int] = None,
         interleaved: bool = False) -> np.ndarray:
    """Rotary position embedding (Su et al. 2021, RoFormer), returned as a new array.

    Position of ``x[..., l, :]`` is offset + l. Pair i (i < R/2, R = rotary_dim or D) rotates
    by the angle ``pos * theta**(-2i/R)`` (float64); channels >= R are unchanged (partial
    rotary). Pairs are (i, i + R/2) ("rotate_half": HF Llama, GPT-NeoX) or, with
    interleaved=True, (2i, 2i + 1) (GPT-J, the original RoFormer).

    Args:
        x: float32 ``[B, H, L, D]``, ``[H, L, D]`` or ``[L, D]`` (a query or key), any strides.
        offset: position of the first row (>= 0), e.g. the KV-cache length.
        theta: the base (> 0), 10000 for most models.
        rotary_dim: None (= D) or an even number <= D.
    Returns:
        float32, x's shape.
    Raises:
        TypeError: not float32. ValueError: rank, odd/too large rotary_dim, theta <= 0,
        offset < 0.
    """
    fn = "rope"
    a = as_f32(x, "x", fn)
    if not 2 <= a.ndim <= 4:
        raise ValueError(f"{fn}: x must be [B, H, L, D], [H, L, D] or [L, D], got shape {a.shape}")
    off = check_int(offset, "offset", fn, minimum=0)
    th = check_float(theta, "theta", fn)
    R = 0 if rotary_dim is None else check_int(rotary_dim, "rotary_dim", fn, minimum=0)
    out = np.array(a, dtype=np.float32, order="C", copy=True)
    v = out
    while v.ndim < 4:
        v = v[None]
    t = Tensor(v)
    raise_for(lib.attn_rope(t.ptr, off, th, R, 1 if interleaved else 0))
    return out
