#!/usr/bin/env python3
"""PyTorch reference outputs for the Python package's tests (python/tests/test_sdpa.py).

Runs torch.nn.functional.scaled_dot_product_attention (CPU, float32) on small random inputs
covering the argument semantics attn.sdpa must reproduce: grouped-query attention, bool and
float masks with broadcasting, is_causal for Lq < Lk and Lq > Lk (torch aligns it top-left),
torch's causal_lower_right bias, custom scale, 2-D and 5-D inputs, broadcast batch dims.
Writes tests/fixtures/python/torch_sdpa.npz: for case NAME the arrays NAME.q, NAME.k, NAME.v,
optional NAME.mask, NAME.out and NAME.opts (a JSON string of the keyword arguments).
Run from the repository root with a Python that has torch (not needed by the tests):
    /work/venv/bin/python scripts/gen_python_fixtures.py
"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

OUT = os.path.join("tests", "fixtures", "python", "torch_sdpa.npz")


def main():
    rng = np.random.default_rng(20261130)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    arrays = {}

    def case(name, q, k, v, mask=None, torch_mask=None, **opts):
        t = lambda a: torch.from_numpy(a)
        tm = torch_mask if torch_mask is not None else (None if mask is None else t(mask))
        with torch.no_grad():
            out = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=tm, **opts).numpy()
        assert np.all(np.isfinite(out)), name
        arrays[name + ".q"], arrays[name + ".k"], arrays[name + ".v"] = q, k, v
        if mask is not None:
            arrays[name + ".mask"] = mask
        arrays[name + ".out"] = out
        arrays[name + ".opts"] = np.array(json.dumps(opts))

    q, k, v = f32(2, 4, 5, 8), f32(2, 2, 7, 8), f32(2, 2, 7, 6)
    case("gqa", q, k, v, enable_gqa=True)
    bm = rng.random((2, 1, 5, 7)) < 0.6
    bm[..., 0] = True
    case("boolmask", q, k, v, bm, enable_gqa=True)
    bm2 = bm.copy()
    bm2[1, 0, 2, :] = False  # a fully masked row: torch (2.5+) gives 0 there
    case("boolmask_emptyrow", q, k, v, bm2, enable_gqa=True)
    fm = (rng.standard_normal((5, 7)) * 2).astype(np.float32)
    fm[0, 1] = -np.inf
    fm[3, 2] = -1e9
    case("floatmask", q, k, v, fm, enable_gqa=True)
    qm, km, vm = f32(2, 4, 5, 8), f32(2, 4, 7, 8), f32(2, 4, 7, 6)
    case("causal_lq_lt_lk", qm, km, vm, is_causal=True)
    q7, k5, v5 = f32(2, 4, 7, 8), f32(2, 4, 5, 8), f32(2, 4, 5, 6)
    case("causal_lq_gt_lk", q7, k5, v5, is_causal=True)
    qs = f32(1, 3, 6, 8)
    case("causal_square_scale", qs, f32(1, 3, 6, 8), f32(1, 3, 6, 4), is_causal=True, scale=0.3)
    case("lower_right_bias", qm, km, vm, torch_mask=causal_lower_right(5, 7))
    case("rank5", f32(2, 3, 2, 4, 8), f32(2, 3, 2, 6, 8), f32(2, 3, 2, 6, 5))
    case("rank2", f32(6, 4), f32(3, 4), f32(3, 5))
    case("batch_broadcast", f32(3, 2, 4, 8), f32(1, 2, 6, 8), f32(1, 2, 6, 8))
    case("mask_rank5", f32(2, 3, 2, 4, 8), f32(2, 3, 2, 6, 8), f32(2, 3, 2, 6, 5),
         rng.random((3, 1, 4, 6)) < 0.7)
    case("mqa_causal", f32(1, 4, 6, 16), f32(1, 1, 6, 16), f32(1, 1, 6, 16), is_causal=True, enable_gqa=True)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    np.savez(OUT, **arrays)
    print(f"wrote {OUT} ({len(arrays)} arrays, torch {torch.__version__})")


if __name__ == "__main__":
    main()
