/* Probe: checks attn's emulation of CTranslate2's int8 GEMM against CTranslate2 itself.
 * CTranslate2 4.8.5's CPU library exports primitives<CPU>::gemm<int8_t, int32_t> (the oneDNN
 * u8 x s8 -> s32 GEMM its int8 Dense layers call) and gemm_batch_strided<float> (attention).
 * This program loads that library with dlopen, runs both on random inputs shaped like the aren
 * model's layers (rows of unsigned bytes near 0 and 255 and weights near +-127, where int16
 * saturation happens) and counts mismatches against:
 *   - pairs (k, k+1) summed into int16 with saturation, then int32 (what ct2_layers.c does),
 *   - exact int32 sums;
 * and, for the float GEMMs, against a sequential fused multiply-add chain, mul-then-add and a
 * double-precision sum (none matches every shape: oneDNN picks its summation order by shape and
 * tile; scripts/probe_ct2_attention.c checks the per-shape rules attn follows).
 * Not part of the build or CI (it needs the CTranslate2 wheel).
 * Build and run:
 *   cc -O1 -o /tmp/probe_ct2_int8 scripts/probe_ct2_int8.c -ldl -lm
 *   /tmp/probe_ct2_int8 /work/venv/lib/python3.11/site-packages/ctranslate2.libs/libctranslate2-*.so.4.8.5
 * Measured (AMD EPYC, AVX2, oneDNN backend): saturating pairs 0 mismatches in 6 shapes
 * (M 1..32, N 32/96, K 32/128); exact int32 sums mismatch 3-87%. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
#include <math.h>
typedef void (*gemm_i8_t)(bool, bool, bool, bool, long, long, long, float, const int8_t *, long, const int8_t *, long, float, int32_t *, long, const int32_t *);
typedef void (*gemm_f_t)(bool, bool, bool, bool, long, long, long, float, const float *, long, const float *, long, float, float *, long, const float *);
typedef void (*gbs_t)(bool, bool, long, long, long, float, const float *, long, long, const float *, long, long, float, float *, long, long, long);
typedef void (*softmax_t)(const float *, const int32_t *, float *, long, long, bool);
static uint64_t rs = 88172645463325252ull;
static double rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (double)(rs >> 11) / 9007199254740992.0; }
static int32_t sat(int32_t p) { return p > 32767 ? 32767 : p < -32768 ? -32768 : p; }
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { printf("%s\n", dlerror()); return 1; }
    gemm_i8_t gi = (gemm_i8_t)dlsym(h, "_ZN11ctranslate210primitivesILNS_6DeviceE0EE4gemmIaiEEvbbbblllfPKT_lS6_lfPT0_lPKS7_");
    gemm_f_t gf = (gemm_f_t)dlsym(h, "_ZN11ctranslate210primitivesILNS_6DeviceE0EE4gemmIffEEvbbbblllfPKT_lS6_lfPT0_lPKS7_");
    gbs_t gb = (gbs_t)dlsym(h, "_ZN11ctranslate210primitivesILNS_6DeviceE0EE18gemm_batch_stridedIffEEvbblllfPKT_llS6_llfPT0_lll");
    softmax_t sm = (softmax_t)dlsym(h, "_ZN11ctranslate23cpu7softmaxILNS0_6CpuIsaE2EEEvPKfPKiPfllb");
    printf("syms %p %p %p %p\n", (void *)gi, (void *)gf, (void *)gb, (void *)sm);
    /* int8 gemm: saturation check */
    for (int trial = 0; trial < 6; trial++) {
        long M = trial < 3 ? 1 + trial * 7 : 32, N = trial % 2 ? 96 : 32, K = trial % 3 == 2 ? 128 : 32;
        uint8_t *a = malloc(M * K); int8_t *b = malloc(N * K); int32_t *c = malloc(4 * M * N), *comp = malloc(4 * N);
        for (long i = 0; i < M * K; i++) a[i] = (uint8_t)(rnd() < 0.3 ? (rnd() < 0.5 ? 250 + 5 * rnd() : 5 * rnd()) : 256 * rnd());
        for (long i = 0; i < N * K; i++) b[i] = (int8_t)(rnd() < 0.3 ? (rnd() < 0.5 ? 127 : -127) : 254 * rnd() - 127);
        for (long n = 0; n < N; n++) { int32_t s = 0; for (long k = 0; k < K; k++) s += b[n * K + k]; comp[n] = -128 * s; }
        gi(false, false, false, true, M, N, K, 1.0f, (const int8_t *)a, K, b, K, 0.0f, c, N, comp);
        long bad_sat = 0, bad_nosat = 0;
        for (long m = 0; m < M; m++) for (long n = 0; n < N; n++) {
            int32_t s1 = 0, s2 = 0;
            for (long k = 0; k < K; k += 2) { int32_t p = a[m*K+k]*b[n*K+k] + a[m*K+k+1]*b[n*K+k+1]; s1 += sat(p); s2 += p; }
            s1 += comp[n]; s2 += comp[n];
            bad_sat += c[m*N+n] != s1; bad_nosat += c[m*N+n] != s2;
        }
        printf("i8 M=%ld N=%ld K=%ld: mismatches sat-pairs %ld, exact %ld of %ld\n", M, N, K, bad_sat, bad_nosat, M * N);
    }
    /* float gemm orders: C = A[M,K] * B[N,K]^T */
    for (int trial = 0; trial < 8; trial++) {
        long M = 1 + trial * 3, N = 1 + (trial * 5) % 13, K = trial < 4 ? 4 : 1 + trial * 2;
        float *a = malloc(4 * M * K), *b = malloc(4 * N * K), *c = malloc(4 * M * N);
        for (long i = 0; i < M * K; i++) a[i] = (float)(rnd() * 2 - 1);
        for (long i = 0; i < N * K; i++) b[i] = (float)(rnd() * 2 - 1);
        /* as attention: batch of 1, trans_b (QK^T) */
        gb(false, true, M, N, K, 1.0f, a, K, M * K, b, K, N * K, 0.0f, c, N, M * N, 1);
        long bf = 0, bn = 0, bd = 0;
        for (long m = 0; m < M; m++) for (long n = 0; n < N; n++) {
            float f = 0, s = 0; double d = 0;
            for (long k = 0; k < K; k++) { f = fmaf(a[m*K+k], b[n*K+k], f); s += a[m*K+k] * b[n*K+k]; d += (double)a[m*K+k] * b[n*K+k]; }
            bf += f != c[m*N+n]; bn += s != c[m*N+n]; bd += (float)d != c[m*N+n];
        }
        printf("sgemm-bs transB M=%ld N=%ld K=%ld: mismatch fma-chain %ld, mul-add %ld, double %ld / %ld\n", M, N, K, bf, bn, bd, M * N);
        /* no trans: C = P[M,K] * V[K,N] */
        gb(false, false, M, N, K, 1.0f, a, K, M * K, b, N, N * K, 0.0f, c, N, M * N, 1);
        bf = bn = bd = 0;
        for (long m = 0; m < M; m++) for (long n = 0; n < N; n++) {
            float f = 0, s = 0; double d = 0;
            for (long k = 0; k < K; k++) { f = fmaf(a[m*K+k], b[k*N+n], f); s += a[m*K+k] * b[k*N+n]; d += (double)a[m*K+k] * b[k*N+n]; }
            bf += f != c[m*N+n]; bn += s != c[m*N+n]; bd += (float)d != c[m*N+n];
        }
        printf("sgemm-bs noTrans M=%ld N=%ld K=%ld: mismatch fma-chain %ld, mul-add %ld, double %ld / %ld\n", M, N, K, bf, bn, bd, M * N);
    }
    return 0;
}
