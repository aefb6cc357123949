"""Scaled dot-product attention and the efficient variants over NumPy arrays."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ._core import Tensor, as_array, as_f32, as_float, check_bool, check_float, check_int, raise_for, tensor
from ._ffi import ffi, lib

ArrayLike = Any
CausalArg = Union[bool, str]

_IMPLS = {"default": 0, "reference": 1, "fused": 2}
_T_PARAMS = ffi.typeof("attn_sdpa_params *")


class _QKV(NamedTuple):
    q: np.ndarray  # [B, H, Lq, D]
    k: np.ndarray  # [B, Hkv, Lk, D]
    v: np.ndarray  # [B, Hkv, Lk, Dv]
    lead: Tuple[int, ...]  # query's shape without its last two dims ([..., H])
    full: Tuple[int, ...]  # the shape masks broadcast to: q.shape[:-1] + (Lk,)


def _to4(a: np.ndarray, B: int) -> np.ndarray:
    if a.ndim == 2:
        return a[None, None]
    if a.ndim == 3:
        return a[None]
    if a.ndim == 4:
        return a
    return a.reshape((B,) + a.shape[-3:])


def _prepare(fn: str, query: ArrayLike, key: ArrayLike, value: ArrayLike, enable_gqa: bool,
             half: bool = False) -> _QKV:
    conv = as_float if half else as_f32
    q, k, v = conv(query, "query", fn), conv(key, "key", fn), conv(value, "value", fn)
    if half and not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"{fn}: query, key and value must have the same dtype, got {q.dtype}, "
                        f"{k.dtype} and {v.dtype}")
    if q.ndim < 2:
        raise ValueError(f"{fn}: query must have at least 2 dims [..., L, D], got shape {q.shape}")
    if k.ndim != q.ndim or v.ndim != q.ndim:
        raise ValueError(f"{fn}: query, key and value must have the same number of dims, got "
                         f"{q.shape}, {k.shape} and {v.shape}")
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(f"{fn}: key's head_dim {k.shape[-1]} differs from query's {q.shape[-1]} "
                         f"(query {q.shape}, key {k.shape})")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"{fn}: value has {v.shape[-2]} positions but key has {k.shape[-2]} "
                         f"(key {k.shape}, value {v.shape})")
    if q.ndim >= 4 and not (q.shape[:-3] == k.shape[:-3] == v.shape[:-3]):
        # batch dims broadcast as in torch (stride-0 views, no copy for 4-D inputs)
        try:
            bs = np.broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])
        except ValueError:
            raise ValueError(f"{fn}: batch dims do not broadcast: query {q.shape}, key {k.shape}, "
                             f"value {v.shape}") from None
        q, k, v = (np.broadcast_to(a, bs + a.shape[-3:]) for a in (q, k, v))
    if q.ndim >= 3:
        Hq, Hkv = q.shape[-3], k.shape[-3]
        if v.shape[-3] != Hkv:
            raise ValueError(f"{fn}: key has {Hkv} heads but value has {v.shape[-3]}")
        if Hq != Hkv:
            if not enable_gqa:
                raise ValueError(f"{fn}: query has {Hq} heads and key/value {Hkv}; pass enable_gqa=True "
                                 "for grouped-query attention")
            if Hkv == 0 or Hq % Hkv != 0:
                raise ValueError(f"{fn}: the number of query heads ({Hq}) must be a multiple of the "
                                 f"number of key/value heads ({Hkv})")
    B = int(np.prod(q.shape[:-3], dtype=np.int64)) if q.ndim > 4 else 1
    return _QKV(_to4(q, B), _to4(k, B), _to4(v, B), tuple(q.shape[:-1]),
                tuple(q.shape[:-1]) + (k.shape[-2],))


def _mask(fn: str, attn_mask: ArrayLike, full: Tuple[int, ...]) -> np.ndarray:
    m = as_array(attn_mask, "attn_mask", fn)
    if m.dtype == np.bool_:
        pass
    elif m.dtype.kind == "f":
        if m.dtype != np.float32:
            m = m.astype(np.float32)
    else:
        raise TypeError(f"{fn}: attn_mask must be bool (True = take part in attention) or a float "
                        f"additive mask, got dtype {m.dtype}")
    if m.ndim == 0:
        m = m.reshape(1)
    ok = m.ndim <= len(full) and all(a == 1 or a == b for a, b in zip(m.shape[::-1], full[::-1]))
    if not ok:
        raise ValueError(f"{fn}: attn_mask of shape {m.shape} does not broadcast to {full} "
                         "(query's shape with the last dim replaced by the key length)")
    if len(full) > 4:  # flatten the batch dims as the query was
        B = int(np.prod(full[:-3], dtype=np.int64))
        m = np.broadcast_to(m, full).reshape((B,) + full[-3:])
    return m


def _causal_kind(fn: str, is_causal: CausalArg) -> str:
    if is_causal is None:
        return "none"
    if isinstance(is_causal, (bool, np.bool_)):
        return "upper_left" if is_causal else "none"
    if isinstance(is_causal, str) and is_causal in ("upper_left", "lower_right"):
        return is_causal
    if not isinstance(is_causal, str):  # 2 or 'no' were truthy: a flag must be a bool
        raise TypeError(f"{fn}: is_causal must be a bool, 'upper_left' or 'lower_right', got {type(is_causal).__name__} {is_causal!r}")
    raise ValueError(f"{fn}: is_causal must be True, False, 'upper_left' or 'lower_right', got {is_causal!r}")



def _with_top_left_causal(m, Lq: int, Lk: int, W: int):
    """torch's is_causal (top-left: key j visible to query i when j <= i, and j > i - W with a
    window) as an explicit mask combined with the user's bool or float mask m (None: none)."""
    i = np.arange(Lq)[:, None]
    j = np.arange(Lk)[None, :]
    vis = j <= i
    if W:
        vis &= j > i - W
    if m is None:
        return vis
    if m.dtype == np.bool_:
        return np.logical_and(m, vis)
    return np.where(vis, m, np.float32(-np.inf)).astype(np.float32)

def sdpa(query: ArrayLike, key: ArrayLike, value: ArrayLike, attn_mask: Optional[ArrayLike] = None,
         dropout_p: float = 0.0, is_causal: CausalArg = False, scale: Optional[float] = None,
         enable_gqa: bool = True, *, window: Optional[int] = None, return_weights: bool = False,
         impl: str = "default", return_lse: bool = False) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
    """Scaled dot-product attention, with the argument meaning of PyTorch's
    ``torch.nn.functional.scaled_dot_product_attention`` (positional order included)::

        out = softmax(query @ key.T * scale + mask) @ value      (Vaswani et al. 2017, eq. 1)

    Args:
        query: float32 ``[..., Hq, Lq, D]`` (any number of leading batch dims, or ``[L, D]``);
            float16 or bfloat16 (ml_dtypes) when libattn has half-precision SDPA (computed in
            float32, result rounded once to query's dtype; TypeError from libattn otherwise).
        key: float32 ``[..., Hkv, Lk, D]``; the leading (batch) dims broadcast with query's.
        value: float32 ``[..., Hkv, Lk, Dv]``.
            Any strides (transposed or sliced views are read in place; an array is copied
            only when misaligned, byte-swapped or with negative strides). query, key and value
            share one dtype; other dtypes raise TypeError (no silent conversion). Array-likes
            (e.g. CPU torch tensors) go through np.asarray.
        attn_mask: None; bool, True = the key takes part in attention (torch's meaning); or
            float (float16/32/64, used as float32), added to the scaled scores (-inf masks).
            Broadcast to ``[..., Hq, Lq, Lk]`` with NumPy rules.
        dropout_p: must be 0.0 (attn is for inference); accepted so torch-style calls work.
        is_causal: True (or ``"upper_left"``): query i sees keys j <= i, the causal mask
            aligned at the top-left as in torch (``torch.ones(Lq, Lk).tril()``) — for
            Lq > Lk the last rows see every key; for Lq < Lk the keys past Lq are never seen.
            ``"lower_right"``: j <= i + Lk - Lq, the KV-cache convention (torch's
            ``causal_lower_right``; libattn's native mode): with a cache of Lk - Lq earlier
            positions, each new query sees the cache and the queries up to itself.
            Unlike torch, an attn_mask may be given too; both then apply (AND).
        scale: the factor applied to query @ key.T; None = 1 / sqrt(D).
        enable_gqa: allow grouped-query attention (Hq a multiple of Hkv; query head h reads
            key/value head h // (Hq // Hkv), as torch's repeat_interleave). Default True.
        window: None, or W >= 1 for a sliding window: query i sees the W keys ending at its
            own position (pos - W < j <= pos, which implies causal), with pos = i, or
            i + Lk - Lq when is_causal="lower_right" (Mistral / Longformer one-sided window).
            Not in torch.
        return_weights: also return the softmax weights ``[..., Hq, Lq, Lk]`` (float32).
        impl: "default" (the fused online-softmax kernel), "fused", or "reference" (the
            float64-accumulating reference path of libattn).
        return_lse: also return each query row's log-sum-exp ``[..., Hq, Lq]`` (float32, natural
            log of the sum of exp(scaled score + mask) over the visible keys; -inf for a row
            that sees no key): what ``sdpa_backward`` takes.

    Returns:
        out ``[..., Hq, Lq, Dv]`` of query's dtype (C-contiguous); ``(out, weights)`` with
        float32 weights; ``(out, lse)``; or ``(out, weights, lse)`` when both are asked for.

    A query row that sees no key at all gives out = 0 and weights = 0, as current PyTorch
    does on CPU (checked with 2.15; older releases gave NaN). Float mask values <= -3.4028235e38 (finfo.min)
    mask the key, as -inf does (torch adds them; the result differs only in such a row).

    Raises:
        TypeError: an input is not float32, a mask is neither bool nor float.
        ValueError: shapes that do not fit (the message gives them), dropout_p != 0, a bad
            option; NaN or inf in query, key or value, NaN or +inf in a float mask (a
            libattn ``RangeError``, a subclass of ValueError carrying the library's message).
    The GIL is released while libattn computes.
    """
    fn = "sdpa"
    if dropout_p != 0.0:
        raise ValueError(f"{fn}: dropout_p must be 0.0 (attn implements inference), got {dropout_p}")
    if impl not in _IMPLS:
        raise ValueError(f"{fn}: impl must be one of {sorted(_IMPLS)}, got {impl!r}")
    qkv = _prepare(fn, query, key, value, check_bool(enable_gqa, "enable_gqa", fn), half=True)
    causal = _causal_kind(fn, is_causal)
    return_weights = check_bool(return_weights, "return_weights", fn)
    W = 0 if window is None else check_int(window, "window", fn, minimum=1)
    sc = None if scale is None else check_float(scale, "scale", fn)
    q, k, v = qkv.q, qkv.k, qkv.v
    B, H, Lq, D = q.shape
    Lk, Dv = k.shape[2], v.shape[3]
    m = None if attn_mask is None else _mask(fn, attn_mask, qkv.full)

    weights = None
    w_view = None
    if return_weights:
        weights = np.empty((B, H, Lq, Lk), dtype=np.float32)  # libattn writes every entry
        w_view = weights
    c_causal = causal != "none"
    c_window = W
    if (causal == "upper_left" or (causal == "none" and W)) and Lq != Lk:
        # libattn aligns causal / window bottom-right; convert to torch's top-left alignment.
        if Lq < Lk:
            # keys past Lq are invisible to every query: drop them, then the square case
            k, v = k[:, :, :Lq], v[:, :, :Lq]
            if m is not None and m.shape[-1] == Lk:
                m = m[..., :Lq]
            if w_view is not None:
                weights[..., Lq:] = 0.0
                w_view = weights[..., :Lq]
        else:
            m = _with_top_left_causal(m, Lq, Lk, W)
            c_causal, c_window = False, 0

    out = np.empty((B, H, Lq, Dv), dtype=q.dtype)
    mp, mkeep = tensor(m)
    lse = np.empty((B, H, Lq), dtype=np.float32) if return_lse else None
    tl = Tensor(lse) if lse is not None else None
    # attn_sdpa_params: mask, is_causal, window, key_lengths, has_scale, scale, n_threads, impl, lse
    p = ffi.new(_T_PARAMS, [mp, 1 if c_causal else 0, c_window, ffi.NULL, 0 if sc is None else 1,
                            0.0 if sc is None else sc, 0, _IMPLS[impl], tl.ptr if tl else ffi.NULL])
    to, tw = Tensor(out), (Tensor(w_view) if w_view is not None else None)
    tq, tk, tv = Tensor(q), Tensor(k), Tensor(v)
    rc = lib.attn_sdpa(to.ptr, tw.ptr if tw else ffi.NULL, tq.ptr, tk.ptr, tv.ptr, p)
    raise_for(rc)
    del mkeep
    out = out.reshape(qkv.lead + (Dv,))
    res = (out,) + (() if weights is None else (weights.reshape(qkv.full),))
    if lse is not None:
        res += (lse.reshape(qkv.lead),)
    return res[0] if len(res) == 1 else res


scaled_dot_product_attention = sdpa


def sdpa_backward(query: ArrayLike, key: ArrayLike, value: ArrayLike, out: ArrayLike, lse: ArrayLike,
                  grad_out: ArrayLike, attn_mask: Optional[ArrayLike] = None, dropout_p: float = 0.0,
                  is_causal: CausalArg = False, scale: Optional[float] = None, enable_gqa: bool = False, *,
                  window: Optional[int] = None, impl: str = "default") -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of ``sdpa`` with respect to query, key and value, as torch.autograd gives them
    through ``torch.nn.functional.scaled_dot_product_attention``: with P = softmax(scores),
    dP = grad_out @ value.T, dS = P * (dP - rowsum(grad_out * out)),
    ``dq = dS @ key * scale``, ``dk = dS.T @ query * scale``, ``dv = P.T @ grad_out`` (dk and dv
    summed over the query heads of a group under GQA). libattn's attn_sdpa_backward
    (FlashAttention-2's backward, Dao 2023: P recomputed per tile from lse, O(L) memory).

    Args:
        query, key, value, attn_mask, is_causal, scale, enable_gqa, window: as given to ``sdpa``
            (float32 only; enable_gqa defaults to False as in torch). The batch dims of query,
            key and value must be equal (no broadcasting: each gets its own gradient).
        out: the forward's output ``[..., Hq, Lq, Dv]`` (float32).
        lse: the forward's log-sum-exp ``[..., Hq, Lq]`` (``sdpa(..., return_lse=True)``).
        grad_out: the gradient of the loss with respect to out, ``[..., Hq, Lq, Dv]``.
        dropout_p: must be 0.0.
        impl: "default" / "fused" (the tiled kernel) or "reference" (libattn's float64 one).

    Returns:
        ``(dq, dk, dv)``: float32 arrays of the shapes of query, key and value. A query row that
        sees no key gets dq = 0 (torch gives NaN there); a key no query sees gets dk = dv = 0.

    Raises:
        TypeError: an input is not float32. ValueError: shapes that do not fit, a bad option,
        NaN / inf in an input (NaN or +inf in lse). The GIL is released while libattn computes.
    """
    fn = "sdpa_backward"
    if dropout_p != 0.0:
        raise ValueError(f"{fn}: dropout_p must be 0.0, got {dropout_p}")
    if impl not in _IMPLS:
        raise ValueError(f"{fn}: impl must be one of {sorted(_IMPLS)}, got {impl!r}")
    qa, ka, va = as_f32(query, "query", fn), as_f32(key, "key", fn), as_f32(value, "value", fn)
    if qa.ndim >= 4 and not (qa.shape[:-3] == ka.shape[:-3] == va.shape[:-3]):
        raise ValueError(f"{fn}: query, key and value must have the same batch dims, got {qa.shape}, "
                         f"{ka.shape} and {va.shape}")
    qkv = _prepare(fn, qa, ka, va, bool(enable_gqa))
    causal = _causal_kind(fn, is_causal)
    W = 0 if window is None else check_int(window, "window", fn, minimum=1)
    sc = None if scale is None else check_float(scale, "scale", fn)
    q, k, v = qkv.q, qkv.k, qkv.v
    B, H, Lq, D = q.shape
    Lk, Dv = k.shape[2], v.shape[3]
    arrs = []
    for a, name, shape in ((out, "out", qkv.lead + (Dv,)), (grad_out, "grad_out", qkv.lead + (Dv,)),
                           (lse, "lse", qkv.lead)):
        a = as_f32(a, name, fn)
        if a.shape != shape:
            raise ValueError(f"{fn}: {name} must have shape {shape}, got {a.shape}")
        arrs.append(a.reshape((B, H, Lq) + ((Dv,) if name != "lse" else ())))
    o, g, lz = arrs
    m = None if attn_mask is None else _mask(fn, attn_mask, qkv.full)
    # the same conversion of torch's top-left causal / window to libattn's bottom-right as sdpa
    c_causal, c_window, nk = causal != "none", W, Lk
    if (causal == "upper_left" or (causal == "none" and W)) and Lq != Lk:
        if Lq < Lk:  # keys past Lq are invisible to every query: their gradients are 0
            nk = Lq
            if m is not None and m.shape[-1] == Lk:
                m = m[..., :Lq]
        else:
            m = _with_top_left_causal(m, Lq, Lk, W)
            c_causal, c_window = False, 0
    dq = np.empty(q.shape, dtype=np.float32)
    dk = np.zeros(k.shape, dtype=np.float32)
    dv = np.zeros(v.shape, dtype=np.float32)
    mp, mkeep = tensor(m)
    p = ffi.new(_T_PARAMS, [mp, 1 if c_causal else 0, c_window, ffi.NULL, 0 if sc is None else 1,
                            0.0 if sc is None else sc, 0, _IMPLS[impl], ffi.NULL])
    ts = [Tensor(a) for a in (dq, dk[:, :, :nk], dv[:, :, :nk], q, k[:, :, :nk], v[:, :, :nk], o, lz, g)]
    rc = lib.attn_sdpa_backward(*(t.ptr for t in ts), p)
    raise_for(rc)
    del mkeep
    return dq.reshape(qa.shape), dk.reshape(ka.shape), dv.reshape(va.shape)

VARIANTS = ("exact", "linear", "performer", "sliding", "longformer", "bigbird")


def variant(name: str, query: ArrayLike, key: ArrayLike, value: ArrayLike, *, is_causal: bool = False,
            window: Optional[int] = None, n_global: Optional[int] = None, block: Optional[int] = None,
            global_blocks: Optional[int] = None, random_blocks: Optional[int] = None,
            features: Optional[int] = None, seed: int = 0, attn_mask: Optional[ArrayLike] = None,
            key_padding_mask: Optional[ArrayLike] = None, key_lengths: Optional[Sequence[int]] = None,
            scale: Optional[float] = None,
            return_weights: bool = False) -> Union[np.ndarray, Tuple[np.ndarray, np.ndarray]]:
    """Efficient attention variants of libattn (include/attn_variants.h).

    Args:
        name: "exact" (attn_sdpa), "linear" (Katharopoulos et al. 2020, elu+1 features),
            "performer" (FAVOR+, Choromanski et al. 2021), "sliding" (causal window of W keys),
            "longformer" (|i - j| <= w plus n_global global tokens, Beltagy et al. 2020),
            "bigbird" (block-sparse: sliding, global and random blocks, Zaheer et al. 2020).
        query, key, value: float32 ``[..., Hq, Lq, D]``, ``[..., Hkv, Lk, D]``,
            ``[..., Hkv, Lk, Dv]`` as in :func:`sdpa` (GQA allowed, any strides).
        is_causal: key j visible to query i only if j <= i + Lk - Lq. Positions are aligned
            bottom-right here (libattn's convention, the same as sdpa's
            is_causal="lower_right"); for Lq == Lk this is the ordinary causal mask.
        window: sliding W >= 1 (default 256) / longformer one-sided width w >= 1 (default 128).
        n_global: longformer's global tokens G (default 1).
        block, global_blocks, random_blocks: bigbird's block size (default 64; must divide Lk),
            global blocks (1) and random blocks per row (3).
        features: performer's random features M (default 256).
        seed: performer's projection and bigbird's random blocks (deterministic per seed).
        attn_mask: bool / float mask as in sdpa (exact, sliding, longformer, bigbird only).
        key_padding_mask: bool ``[B, Lk]`` (True = real key), B = product of query's batch
            dims (1 for 2-D/3-D inputs, where ``[Lk]`` is accepted too).
        key_lengths: B ints, keys j >= key_lengths[b] are padding (right padding).
        scale: softmax scale (default 1/sqrt(D); not for "linear").
        return_weights: also return the dense ``[..., Hq, Lq, Lk]`` weights the variant uses
            (zero outside its pattern; the implied weights for linear and performer).

    Returns:
        out float32 ``[..., Hq, Lq, Dv]``, or ``(out, weights)``.

    Raises:
        ValueError: unknown name (the message lists the valid ones), bad option or shapes.
        TypeError: wrong dtypes, an unknown option.
        NotImplementedError: a valid combination the variant does not support (e.g. a
            general attn_mask with linear or performer).
    """
    fn = f"variant({name!r})"
    if not isinstance(name, str):
        raise TypeError(f"variant: name must be a str, got {type(name).__name__}")
    kind = ffi.new("attn_variant_kind *")
    raise_for(lib.attn_variant_from_name(name.encode("utf-8", "replace"), kind))
    qkv = _prepare(fn, query, key, value, True)
    q, k, v = qkv.q, qkv.k, qkv.v
    B, H, Lq, _ = q.shape
    Lk, Dv = k.shape[2], v.shape[3]
    p = ffi.new("attn_variant_params *", lib.attn_variant_params_default(kind[0]))
    p.is_causal = 1 if check_bool(is_causal, "is_causal", fn) else 0
    return_weights = check_bool(return_weights, "return_weights", fn)
    for field, val in (("window", window), ("n_global", n_global), ("block", block),
                       ("global_blocks", global_blocks), ("random_blocks", random_blocks),
                       ("features", features)):
        if val is not None:
            setattr(p, field, check_int(val, field, fn))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 1 << 64:
        raise TypeError(f"{fn}: seed must be an int in [0, 2**64), got {seed!r}")
    p.seed = int(seed)
    if scale is not None:
        p.has_scale = 1
        p.scale = check_float(scale, "scale", fn)
    keep = []
    if attn_mask is not None:
        mp, mk = tensor(_mask(fn, attn_mask, qkv.full))
        p.mask = mp
        keep.append(mk)
    if key_padding_mask is not None:
        kpm = as_array(key_padding_mask, "key_padding_mask", fn)
        if kpm.dtype != np.bool_:
            raise TypeError(f"{fn}: key_padding_mask must be bool (True = real key), got {kpm.dtype}")
        if kpm.ndim == 1:
            kpm = kpm[None]
        if kpm.shape != (B, Lk):
            raise ValueError(f"{fn}: key_padding_mask must be [{B}, {Lk}] ([batch, Lk]), got {kpm.shape}")
        kp, kk = tensor(kpm)
        p.key_padding_mask = kp
        keep.append(kk)
    if key_lengths is not None:
        kl = np.asarray(key_lengths)
        if kl.dtype.kind not in "iu":
            raise TypeError(f"{fn}: key_lengths must be integers, got {kl.dtype}")
        kl = np.ascontiguousarray(kl.reshape(-1), dtype=np.int64)
        if kl.shape[0] != B:
            raise ValueError(f"{fn}: key_lengths must have {B} entries (one per batch row), got {kl.shape[0]}")
        p.key_lengths = ffi.cast("const int64_t *", kl.ctypes.data)
        keep.append(kl)
    out = np.empty((B, H, Lq, Dv), dtype=np.float32)
    weights = np.zeros((B, H, Lq, Lk), dtype=np.float32) if return_weights else None
    to, tw = Tensor(out), (Tensor(weights) if weights is not None else None)
    tq, tk, tv = Tensor(q), Tensor(k), Tensor(v)
    rc = lib.attn_variant_attention(to.ptr, tw.ptr if tw else ffi.NULL, tq.ptr, tk.ptr, tv.ptr, p)
    raise_for(rc)
    del keep
    out = out.reshape(qkv.lead + (Dv,))
    if weights is None:
        return out
    return out, weights.reshape(qkv.full)
