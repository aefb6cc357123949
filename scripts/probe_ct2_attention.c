/* Probe: checks attn's emulation of CTranslate2's CPU attention arithmetic (the int8 models'
 * path, attn__ct2_mha_exact in src/models/ct2_layers.c) against CTranslate2 itself.
 * CTranslate2 4.8.5's CPU library exports primitives<CPU>::gemm_batch_strided<float> (the
 * oneDNN sgemm its attention calls) and cpu::softmax<AVX2>. This program loads it with dlopen
 * and, for every shape attention with head_dim 4 makes with up to 24 queries and 24 keys
 * (one item, one head: scores [M, N] = scale * Q[M, 4]·K[N, 4]ᵀ, softmax over the first Lk
 * keys, context [M, 4] = P[M, N]·V[N, 4]), computes the context with CTranslate2's own
 * functions and with attn's, on random inputs (8 per shape, random valid key counts), and
 * counts context values that are not bit-identical; then the same for the encoder's
 * self-attention over one source of L = 25..144 tokens.
 * Not part of the build or CI (it needs the CTranslate2 wheel). Build and run (one thread, as
 * the fixtures were made: CTranslate2's intra_threads=1):
 *   make lib
 *   cc -O1 -Iinclude -Isrc -o /tmp/probe_ct2_attention scripts/probe_ct2_attention.c -Lbuild -lattn -Wl,-rpath,$PWD/build -ldl -lm
 *   OMP_NUM_THREADS=1 /tmp/probe_ct2_attention /work/venv/lib/python3.11/site-packages/ctranslate2.libs/libctranslate2-*.so.4.8.5
 * Measured (AMD EPYC, AVX2, CTranslate2's oneDNN backend): 0 of 576 shapes and 0 of 120 lengths
 * differ (from 145 tokens on, oneDNN cuts Q·Kᵀ in other chunks: not followed). */
#include "models/ct2_layers.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*gbs_t)(bool, bool, long, long, long, float, const float *, long, long, const float *, long, long, float, float *, long, long,
                      long);
typedef void (*softmax_t)(const float *, const int32_t *, float *, long, long, bool);
static uint64_t rs = 88172645463325252ull;
static float rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((double)(rs >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

static gbs_t gb;
static softmax_t sm;

/* one item, one head (head_dim D): random q [M, D], k and v [N, D] with Lk valid keys; the
 * context through CTranslate2's GEMM + softmax + GEMM and through attn__ct2_mha_exact; returns
 * the number of context values that are not bit-identical */
static long compare(long M, long N, long Lk, long D, float scale) {
    float *q = malloc(sizeof(float) * (size_t)((M + 2 * N) * D)), *k = q + M * D, *v = k + N * D;
    float *s = malloc(sizeof(float) * (size_t)(2 * M * N)), *p = s + M * N, *ctx = malloc(sizeof(float) * (size_t)(2 * M * D));
    float *mine = ctx + M * D, *scratch = malloc(sizeof(float) * (size_t)N);
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)M);
    for (long i = 0; i < (M + 2 * N) * D; i++) q[i] = rnd();
    gb(false, true, M, N, D, scale, q, D, M * D, k, D, N * D, 0.0f, s, N, M * N, 1);
    for (long i = 0; i < M; i++) lens[i] = (int32_t)Lk;
    sm(s, lens, p, M, N, false);
    gb(false, false, M, D, N, 1.0f, p, N, M * N, v, D, N * D, 0.0f, ctx, D, M * D, 1);
    attn__ct2_mha_exact(mine, D, NULL, q, D, k, v, D, 1, D, M, Lk, M, N, 0, scale, scratch);
    long bad = 0;
    for (long i = 0; i < M * D; i++) bad += memcmp(&mine[i], &ctx[i], sizeof(float)) != 0;
    free(q);
    free(s);
    free(ctx);
    free(scratch);
    free(lens);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s libctranslate2.so\n", argv[0]);
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        printf("%s\n", dlerror());
        return 1;
    }
    gb = (gbs_t)dlsym(h, "_ZN11ctranslate210primitivesILNS_6DeviceE0EE18gemm_batch_stridedIffEEvbblllfPKT_llS6_llfPT0_lll");
    sm = (softmax_t)dlsym(h, "_ZN11ctranslate23cpu7softmaxILNS0_6CpuIsaE2EEEvPKfPKiPfllb");
    if (!gb || !sm) {
        printf("symbols not found\n");
        return 1;
    }
    const long D = 4;
    const float scale = 0.5f; /* 1 / sqrt(4) */
    long bad_shapes = 0, bad_elems = 0, shapes = 0;
    for (long M = 1; M <= 24; M++)
        for (long N = 1; N <= 24; N++) {
            long bad = 0;
            for (int rep = 0; rep < 8; rep++) {
                const long Lk = rep == 0 ? N : 1 + (long)((rnd() + 2.0f) / 4.0f * (float)N) % N; /* valid keys */
                bad += compare(M, N, Lk, D, scale);
            }
            shapes++;
            bad_elems += bad;
            if (bad) {
                bad_shapes++;
                printf("M=%ld N=%ld: %ld context values differ\n", M, N, bad);
            }
        }
    printf("attention (context = softmax(scale Q Kᵀ) V, head_dim 4): %ld of %ld shapes differ (%ld values)\n", bad_shapes, shapes,
           bad_elems);
    /* the encoder's self-attention of one source of L tokens: M = N = L */
    long bad_l = 0;
    for (long L = 25; L <= 144; L++) {
        long bad = 0;
        for (int rep = 0; rep < 3; rep++) bad += compare(L, L, L, D, scale);
        if (bad) {
            bad_l++;
            printf("L=%ld: %ld context values differ\n", L, bad);
        }
    }
    printf("encoder self-attention, L = 25..144: %ld of 120 lengths differ\n", bad_l);
    bad_shapes += bad_l;
    return bad_shapes ? 1 : 0;
}
