/* Private to the library: what the CPU (and OS) can run, probed once. The one place that asks
 * the CPU; every SIMD dispatcher (core/convert.c, core/simd_math.c, ops/quant.c,
 * attention/sdpa_fused.c, ct2compat/gemm.c) goes through attn__cpu_has. */
#ifndef ATTN_CORE_CPU_H
#define ATTN_CORE_CPU_H

/* Feature bits (x86). On other architectures no bit is ever set. */
enum {
    ATTN__CPU_AVX2 = 1u << 0,
    ATTN__CPU_FMA = 1u << 1,
    ATTN__CPU_F16C = 1u << 2, /* from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports has no "f16c" */
    ATTN__CPU_AVX512F = 1u << 3,
    ATTN__CPU_AVX512BW = 1u << 4,
    ATTN__CPU_AVX512VL = 1u << 5,
    ATTN__CPU_AVX512DQ = 1u << 6,
    ATTN__CPU_AVX512VNNI = 1u << 7
};

/* The ATTN__CPU_* bits of this CPU (computed on the first call; thread-safe). */
unsigned attn__cpu_features(void);

/* 1 if the CPU has every feature in `mask` (an OR of ATTN__CPU_* bits), else 0. */
static inline int attn__cpu_has(unsigned mask) { return (attn__cpu_features() & mask) == mask; }

#endif
