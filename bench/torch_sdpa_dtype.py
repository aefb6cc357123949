#!/usr/bin/env python3
"""Time torch.nn.functional.scaled_dot_product_attention on the CPU in float32 or bfloat16, with the
same method and FLOP count as `attn bench sdpa`:

    usage: torch_sdpa_dtype.py [--min-time S] [--max-reps N] CONFIG...
      CONFIG = Lq:Lk:D:H:causal:threads:dtype     (dtype fp32 | bf16 | fp16)

Inputs uniform in [-1, 1), [1, H, L, D], cast to the dtype; one untimed warm-up call, then calls
until --min-time seconds and at least 3 (at most --max-reps); the best time is reported.
Useful FLOPs = 4·H·D·(visible (query, key) pairs): Lq·Lk, or with causal (bottom-right, as torch's
is_causal for Lq == Lk; for Lq < Lk the bottom-right mask is passed explicitly) only the visible
pairs. Output, one line per config:
    torch VERSION Lq Lk D H causal threads dtype best_ms median_ms GFLOP/s
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def bench(Lq, Lk, D, H, causal, threads, dtype, min_time, max_reps):
    torch.set_num_threads(threads)
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    g = torch.Generator().manual_seed(1234)
    q = (torch.rand(1, H, Lq, D, generator=g) * 2 - 1).to(dt)
    k = (torch.rand(1, H, Lk, D, generator=g) * 2 - 1).to(dt)
    v = (torch.rand(1, H, Lk, D, generator=g) * 2 - 1).to(dt)
    mask = None
    is_causal = bool(causal)
    if causal and Lq != Lk:  # bottom-right: key j visible to query i iff j <= i + Lk - Lq
        i = torch.arange(Lq)[:, None]
        j = torch.arange(Lk)[None, :]
        mask = j <= i + (Lk - Lq)
        is_causal = False
    with torch.no_grad():
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
        times = []
        t_start = time.perf_counter()
        while len(times) < max_reps and (len(times) < 3 or time.perf_counter() - t_start < min_time):
            t0 = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
            times.append(time.perf_counter() - t0)
    pairs = sum(max(0, min(Lk, i + Lk - Lq + 1)) for i in range(Lq)) if causal else Lq * Lk
    flops = 4.0 * H * D * pairs
    best = min(times)
    print(f"torch {torch.__version__.split('+')[0]} {Lq} {Lk} {D} {H} {causal} {threads} {dtype} "
          f"{best * 1e3:.4f} {statistics.median(times) * 1e3:.4f} {flops / best * 1e-9:.1f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--max-reps", type=int, default=100)
    ap.add_argument("configs", nargs="+")
    a = ap.parse_args()
    for c in a.configs:
        Lq, Lk, D, H, causal, threads, dtype = c.split(":")
        bench(int(Lq), int(Lk), int(D), int(H), int(causal), int(threads), dtype, a.min_time, a.max_reps)


if __name__ == "__main__":
    main()
