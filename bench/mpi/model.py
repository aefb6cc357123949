#!/usr/bin/env python3
"""Ring attention on P hosts: when communication is hidden, how long a sequence fits, how long a
layer takes. Every input is an assumption stated below (change them on the command line:
model.py F_TFLOPS BW_GBPS LAT_US MEM_GIB). Model (bench/mpi/README.md):
  n = L / P tokens per host, one layer's attention, B = 1, float32, H query heads, Hkv kv heads,
  D = Dv head dim;
  step compute  Tc(n) = c * 4 H n^2 D / F      (c = 1 non-causal, 1/2 striped causal: every
                                                striped block is half visible)
  step transfer Tm(n) = lat + 8 Hkv n D / bw   (K and V of n tokens; send and receive overlap,
                                                full duplex)
  one forward   T = P * max(Tc, Tm)            (P steps; the kernel runs while the next shard
                                                arrives: attn_sdpa_ring's double buffer)
  hidden iff Tc(n) >= Tm(n)  ->  n* = (b + sqrt(b^2 + 4 a lat)) / (2a), a = 4cHD/F, b = 8 Hkv D/bw
  memory per host = ((20 H + 24 Hkv) D + 20 H) n bytes (= (44 H D + 20 H) n at H = Hkv): the q, k,
                    v, out shards plus attn_sdpa_ring's scratch (two K/V buffers, the block result,
                    the float64 accumulator), as bench_ring's scratch_bytes measures it """
import math, sys

F = float(sys.argv[1]) * 1e12 if len(sys.argv) > 1 else 4.0e12      # block FLOP/s per host
BW = float(sys.argv[2]) * 1e9 if len(sys.argv) > 2 else 12.5e9      # bytes/s per direction
LAT = float(sys.argv[3]) * 1e-6 if len(sys.argv) > 3 else 5e-6      # seconds per message
MEM = float(sys.argv[4]) * 2**30 if len(sys.argv) > 4 else 64 * 2**30  # bytes for attention per host
H, HKV, D = 32, 32, 128

def tc(n, c): return c * 4 * H * n * n * D / F
def tm(n): return LAT + 8 * HKV * n * D / BW
def nstar(c):
    a, b = 4 * c * H * D / F, 8 * HKV * D / BW
    return (b + math.sqrt(b * b + 4 * a * LAT)) / (2 * a)
per_tok = 4 * (H * D + 2 * HKV * D + H * D) + 8 * HKV * 2 * D + H * (4 * D + 4 + 8 * D + 16)
nmax = MEM / per_tok

print(f"assumptions: F = {F/1e12:g} TFLOP/s per host, bw = {BW/1e9:g} GB/s, latency = {LAT*1e6:g} us, "
      f"memory for attention = {MEM/2**30:g} GiB per host; H = Hkv = {H}, D = {D}, float32, B = 1")
print(f"bytes per token per host: {per_tok}  ->  at most {nmax:,.0f} tokens per host")
for c, name in ((1.0, "non-causal"), (0.5, "causal (striped)")):
    ns = nstar(c)
    print(f"{name}: communication hidden from n* = {ns:,.0f} tokens per host "
          f"(step {tc(ns, c)*1e3:.3f} ms at n*)")
print()
print("| hosts P | L hidden from (P n*, causal) | longest L in memory (P n_max) | causal layer time at L = P n* | causal layer time at 1M tokens | causal layer time at L_max |")
print("|---:|---:|---:|---:|---:|---:|")
for P in (8, 16, 64, 256, 1024):
    ns = nstar(0.5)
    def T(L):
        n = L / P
        return P * max(tc(n, 0.5), tm(n))
    def fmt(s):
        return f"{s*1e3:.1f} ms" if s < 1 else f"{s:.1f} s" if s < 3600 else f"{s/3600:.1f} h"
    print(f"| {P} | {P*ns:,.0f} | {P*nmax:,.0f} | {fmt(T(P*ns))} | {fmt(T(1e6))} | {fmt(T(P*nmax))} |")
