/* bench_sdpa: time attn_sdpa on random inputs and print GFLOP/s.
 *
 *   bench_sdpa [options] L D [H [B]]
 *     --impl fused|reference   implementation (default fused; ATTN_SIMD picks the SIMD path)
 *     --causal                 bottom-right causal mask
 *     --threads N              n_threads (default attn_get_num_threads())
 *     --min-time S             keep repeating until S seconds were spent (default 1.0)
 *     --max-reps N             at most N timed repetitions (default 50)
 *     --block-k N              (fused) keys per tile, for tuning
 *     --block-q N              (fused) query rows per tile (multiple of 16), for tuning
 *     --lq N                   query length (default L; e.g. 1 for decode)
 *     --header                 print the column header first
 *
 * Output, one line: impl simd B H Lq Lk D causal threads best_ms median_ms GFLOP/s
 * FLOPs are counted as 4·B·H·Lq·Lk·D (two matrix products), halved for causal with Lq == Lk
 * ("useful" FLOPs, the same count for every implementation). The best (minimum) time of the
 * repetitions is reported, after one untimed warm-up run. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "attn.h"
#include "attention/fused_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill(float *x, size_t n, uint64_t *s) {
    for (size_t i = 0; i < n; i++) {
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        uint64_t r = *s * 0x2545F4914F6CDD1DULL;
        x[i] = (float)((double)(r >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f;
    }
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *impl = "fused";
    int causal = 0, threads = 0, max_reps = 50, header = 0, block_k = 0, block_q = 0;
    double min_time = 1.0;
    long pos[4] = {0, 0, 8, 1}, lq = -1;
    int np = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--impl") && a + 1 < argc) impl = argv[++a];
        else if (!strcmp(argv[a], "--causal")) causal = 1;
        else if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--min-time") && a + 1 < argc) min_time = atof(argv[++a]);
        else if (!strcmp(argv[a], "--max-reps") && a + 1 < argc) max_reps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--block-k") && a + 1 < argc) block_k = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--block-q") && a + 1 < argc) block_q = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--lq") && a + 1 < argc) lq = atol(argv[++a]);
        else if (!strcmp(argv[a], "--header")) header = 1;
        else if (argv[a][0] != '-' && np < 4) pos[np++] = atol(argv[a]);
        else {
            fprintf(stderr, "usage: bench_sdpa [--impl fused|reference] [--causal] [--threads N] [--min-time S] "
                            "[--max-reps N] [--block-k N] [--block-q N] [--lq N] [--header] L D [H [B]]\n");
            return 2;
        }
    }
    if (np < 2) {
        fprintf(stderr, "bench_sdpa: need L and D\n");
        return 2;
    }
    const int64_t Lk = pos[0], D = pos[1], H = pos[2], B = pos[3], Lq = lq > 0 ? lq : Lk;
    size_t nq = (size_t)(B * H * Lq * D), nk = (size_t)(B * H * Lk * D);
    float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nk), *o = malloc(4 * nq);
    if (!q || !k || !v || !o) {
        fprintf(stderr, "bench_sdpa: out of memory\n");
        return 1;
    }
    uint64_t seed = 0x1234567u;
    fill(q, nq, &seed);
    fill(k, nk, &seed);
    fill(v, nk, &seed);
    attn_tensor tq = attn_tensor_f32_4d(q, B, H, Lq, D), tk = attn_tensor_f32_4d(k, B, H, Lk, D);
    attn_tensor tv = attn_tensor_f32_4d(v, B, H, Lk, D), to = attn_tensor_f32_4d(o, B, H, Lq, D);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.is_causal = causal;
    p.n_threads = threads;
    p.impl = !strcmp(impl, "reference") ? ATTN_IMPL_REFERENCE : ATTN_IMPL_FUSED;
    attn__fused_opts fo = attn__fused_opts_default();
    fo.block_k = block_k;
    fo.block_q = block_q;
    int nt = threads > 0 ? threads : attn_get_num_threads();

#define RUN()                                                                                    \
    (p.impl == ATTN_IMPL_FUSED ? attn__sdpa_fused_ex(&to, NULL, &tq, &tk, &tv, &p, &fo)           \
                               : attn_sdpa(&to, NULL, &tq, &tk, &tv, &p))
    if (RUN() != 0) {
        fprintf(stderr, "bench_sdpa: %s\n", attn_last_error());
        return 1;
    }
    double times[1000];
    int reps = 0;
    double t_start = now_s();
    if (max_reps > 1000) max_reps = 1000;
    while (reps < max_reps && (reps < 3 || now_s() - t_start < min_time)) {
        double t0 = now_s();
        RUN();
        times[reps++] = now_s() - t0;
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_d);
    double flops = 4.0 * (double)B * (double)H * (double)Lq * (double)Lk * (double)D;
    if (causal && Lq == Lk) flops *= 0.5;
    const char *simd = "-";
    if (p.impl == ATTN_IMPL_FUSED) {
        int path = attn__fused_resolve_path(ATTN__SIMD_AUTO);
        simd = path == ATTN__SIMD_AVX512 ? "avx512" : path == ATTN__SIMD_AVX2 ? "avx2" : "portable";
    }
    if (header) printf("impl simd B H Lq Lk D causal threads best_ms median_ms GFLOP/s\n");
    printf("%s %s %lld %lld %lld %lld %lld %d %d %.3f %.3f %.1f\n", impl, simd, (long long)B, (long long)H,
           (long long)Lq, (long long)Lk, (long long)D, causal, nt, times[0] * 1e3, times[reps / 2] * 1e3,
           flops / times[0] * 1e-9);
    free(q);
    free(k);
    free(v);
    free(o);
    return 0;
}
