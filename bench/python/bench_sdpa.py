#!/usr/bin/env python3
"""attn.sdpa against torch.nn.functional.scaled_dot_product_attention from Python, on the same
NumPy arrays (torch.from_numpy shares their memory), plus the binding's own overhead.

For each shape: attn.sdpa(q, k, v) and F.scaled_dot_product_attention(tq, tk, tv) are timed
alternately (blocks of repetitions, interleaved, so a change in machine load hits both);
"C call" times lib.attn_sdpa through cffi with the attn_tensor structs built once, i.e. the
library's time plus cffi's per-call cost; binding overhead = attn.sdpa - C call (argument
checks, building the tensor views, allocating the output). Times are the best of all
repetitions (medians too: on a loaded machine the best is the stable statistic). Needs torch (never in CI): run with the project's venv from the repository root:
    /work/venv/bin/python bench/python/bench_sdpa.py [--threads N] [--quick]
"""
import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import attn  # noqa: E402
from attn._core import Tensor  # noqa: E402
from attn._ffi import ffi, lib  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# (label, B, H, Lq, Lk, D, causal)
SHAPES = [
    ("tiny", 1, 1, 1, 1, 64, False),
    ("decode step", 1, 8, 1, 512, 64, False),
    ("small", 1, 8, 16, 16, 64, False),
    ("small causal", 1, 8, 16, 16, 64, True),
    ("L=128", 1, 8, 128, 128, 64, False),
    ("L=512", 1, 8, 512, 512, 64, False),
    ("L=512 causal", 1, 8, 512, 512, 64, True),
    ("L=2048", 1, 8, 2048, 2048, 64, False),
    ("L=2048 causal", 1, 8, 2048, 2048, 64, True),
]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def simd_path():
    env = os.environ.get("ATTN_SIMD")
    if env and env != "auto":
        return env + " (ATTN_SIMD)"
    flags = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = line
                break
    return "avx512" if " avx512f" in flags else "avx2" if " avx2" in flags else "portable"


def timeit(fn, budget):
    """Run fn repeatedly for about `budget` seconds; return the list of per-call times (s)."""
    fn()
    ts = []
    end = time.perf_counter() + budget
    while True:
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
        if time.perf_counter() > end and len(ts) >= 3:
            return ts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0, help="threads for both (default: all cores)")
    ap.add_argument("--quick", action="store_true", help="shorter runs")
    args = ap.parse_args()
    n = args.threads or os.cpu_count()
    attn.set_num_threads(n)
    torch.set_num_threads(n)
    budget = 0.15 if args.quick else 0.5
    rounds = 2 if args.quick else 4
    rng = np.random.default_rng(0)
    load0 = os.getloadavg()
    rows = []
    for label, B, H, Lq, Lk, D, causal in SHAPES:
        q = rng.uniform(-1, 1, (B, H, Lq, D)).astype(np.float32)
        k = rng.uniform(-1, 1, (B, H, Lk, D)).astype(np.float32)
        v = rng.uniform(-1, 1, (B, H, Lk, D)).astype(np.float32)
        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
        out = np.empty((B, H, Lq, D), np.float32)
        views = [Tensor(a) for a in (out, q, k, v)]
        p = ffi.new("attn_sdpa_params *")
        p.is_causal = 1 if causal else 0

        def run_attn():
            attn.sdpa(q, k, v, is_causal=causal)

        def run_c():
            rc = lib.attn_sdpa(views[0].ptr, ffi.NULL, views[1].ptr, views[2].ptr, views[3].ptr, p)
            assert rc == 0

        def run_torch():
            with torch.no_grad():
                F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)

        # same result (Lq == Lk or non-causal here, so causal alignment agrees)
        with torch.no_grad():
            ref = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal).numpy()
        err = float(np.max(np.abs(attn.sdpa(q, k, v, is_causal=causal) - ref)))
        ta, tc, tt = [], [], []
        for _ in range(rounds):
            ta += timeit(run_attn, budget / rounds)
            tt += timeit(run_torch, budget / rounds)
            tc += timeit(run_c, budget / rounds)
        med = lambda ts: statistics.median(ts) * 1e6
        best = lambda ts: min(ts) * 1e6
        flops = 4.0 * B * H * Lq * Lk * D * (0.5 if causal else 1.0)
        rows.append((label, f"[{B},{H},{Lq},{D}] x {Lk} keys", "yes" if causal else "no", best(ta), best(tt),
                     best(tc), best(ta) - best(tc), med(ta), med(tt), flops / (best(ta) * 1e3), err))
    load1 = os.getloadavg()
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs; attn kernel path {simd_path()}; threads {n} (both); "
          f"torch {torch.__version__}; numpy {np.__version__}; Python {platform.python_version()}; "
          f"load avg before {load0[0]:.2f}, after {load1[0]:.2f}")
    print()
    print("| shape | q [B,H,Lq,D] x keys | causal | attn.sdpa µs | torch µs | attn / torch time "
          "| C call µs | binding overhead µs | attn.sdpa median µs | torch median µs | attn GFLOP/s "
          "| max abs diff |")
    print("|---|---|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        label, shp, c, ba, bt, bc, ov, ma, mt, gf, err = r
        print(f"| {label} | {shp} | {c} | {ba:.1f} | {bt:.1f} | {ba / bt:.2f} | {bc:.1f} | {ov:.1f} | "
              f"{ma:.1f} | {mt:.1f} | {gf:.1f} | {err:.1e} |")


if __name__ == "__main__":
    main()
