#!/usr/bin/env python3
"""Time torch.nn.functional.scaled_dot_product_attention on the CPU (float32) on the shapes
bench_sdpa uses, and print lines in bench_sdpa's format:

    impl simd B H Lq Lk D causal threads best_ms median_ms GFLOP/s

usage: torch_sdpa.py [--min-time S] [--max-reps N] SHAPE...
  SHAPE = L:D:H:B:causal:threads   (e.g. 4096:64:8:1:0:2)

FLOPs are counted as in bench_sdpa: 4*B*H*L*L*D, halved for causal. One untimed warm-up call,
then repetitions until --min-time seconds have passed (at least 2, at most --max-reps); the best
time is reported.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def bench(L, D, H, B, causal, threads, min_time, max_reps):
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1234)
    q = torch.rand(B, H, L, D, generator=g) * 2 - 1
    k = torch.rand(B, H, L, D, generator=g) * 2 - 1
    v = torch.rand(B, H, L, D, generator=g) * 2 - 1
    with torch.no_grad():
        F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
        times = []
        t_start = time.perf_counter()
        while len(times) < max_reps and (len(times) < 2 or time.perf_counter() - t_start < min_time):
            t0 = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
            times.append(time.perf_counter() - t0)
    flops = 4.0 * B * H * L * L * D * (0.5 if causal else 1.0)
    best = min(times)
    print(f"torch {torch.__version__.split('+')[0]} {B} {H} {L} {L} {D} {causal} {threads} "
          f"{best * 1e3:.3f} {statistics.median(times) * 1e3:.3f} {flops / best * 1e-9:.1f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--max-reps", type=int, default=20)
    ap.add_argument("shapes", nargs="+")
    a = ap.parse_args()
    for s in a.shapes:
        L, D, H, B, causal, threads = (int(x) for x in s.split(":"))
        bench(L, D, H, B, causal, threads, a.min_time, a.max_reps)


if __name__ == "__main__":
    main()
