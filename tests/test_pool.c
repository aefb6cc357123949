/* The thread pool (src/core/pool.c): every index of a job runs exactly once for many (n, chunk,
 * threads) combinations, nested calls and concurrent callers run serially without deadlock, one
 * thread is the serial fallback, and the converted kernels give bit-identical results on 1 and 2
 * threads where their arithmetic does not depend on the split. */
#include "attn.h"
#include "attn_ops.h"
#include "attn_beam.h"
#include "attention/fused_internal.h"
#include "core/pool.h"
#include "ct2compat/ct2compat.h"
#include "ops/quant_internal.h"
#include "testutil.h"

#include <cblas.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t seed = 4242;

typedef struct {
    _Atomic int *hits;  /* hits[i]: times index i ran */
    _Atomic int bad;    /* a chunk outside [0, n), longer than chunk, or a tid out of range */
    _Atomic int calls;  /* fn calls */
    int64_t n, chunk;
    int nt;
    _Atomic int tids;   /* bit t set when participant t ran a chunk */
} cover_ctx;

static void cover_fn(void *p, int64_t lo, int64_t hi, int tid) {
    cover_ctx *c = (cover_ctx *)p;
    atomic_fetch_add(&c->calls, 1);
    if (lo < 0 || hi > c->n || lo >= hi || tid < 0 || tid >= (c->nt > 0 ? c->nt : 64)) atomic_store(&c->bad, 1);
    if (tid >= 0 && tid < 31) atomic_fetch_or(&c->tids, 1 << tid);
    /* a chunk handed to a worker is exactly one chunk; the serial path gets the whole range */
    if (hi - lo > c->chunk && !(lo == 0 && hi == c->n)) atomic_store(&c->bad, 1);
    for (int64_t i = lo; i < hi && i < c->n && i >= 0; i++) atomic_fetch_add(&c->hits[i], 1);
}

static int run_cover(int64_t n, int64_t chunk, int nt, int *calls) {
    cover_ctx c;
    memset(&c, 0, sizeof c);
    c.hits = (_Atomic int *)calloc((size_t)(n > 0 ? n : 1), sizeof(_Atomic int));
    c.n = n, c.chunk = chunk < 1 ? 1 : chunk, c.nt = nt;
    attn__pool_for(n, chunk, nt, cover_fn, &c);
    int ok = !atomic_load(&c.bad);
    for (int64_t i = 0; i < n; i++) ok &= atomic_load(&c.hits[i]) == 1;
    if (calls) *calls = atomic_load(&c.calls);
    free((void *)c.hits);
    return ok;
}

static void test_cover(void) {
    const int64_t ns[] = {0, 1, 2, 3, 7, 16, 17, 100, 1000, 4097, 100003};
    const int64_t chunks[] = {0, 1, 2, 3, 16, 64, 1000, 1 << 20};
    const int nts[] = {1, 2, 3, 4, 8};
    int bad = 0, combos = 0;
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof chunks / sizeof *chunks; b++)
            for (size_t t = 0; t < sizeof nts / sizeof *nts; t++) {
                combos++;
                if (!run_cover(ns[a], chunks[b], nts[t], NULL)) {
                    bad++;
                    CHECK(0, "n=%lld chunk=%lld threads=%d: an index did not run exactly once", (long long)ns[a], (long long)chunks[b], nts[t]);
                }
            }
    CHECK(bad == 0, "%d of %d (n, chunk, threads) combinations ran every index exactly once", combos - bad, combos);
    /* repeated small jobs: the hand-off between consecutive jobs (a late worker must not take a
     * chunk of the next job as one of its own) */
    int rep_bad = 0;
    for (int r = 0; r < 3000; r++) rep_bad += !run_cover(1 + r % 37, 1 + r % 5, 2 + r % 3, NULL);
    CHECK(rep_bad == 0, "3000 consecutive small jobs: %d ran an index other than once", rep_bad);
}

static void test_serial(void) {
    uint64_t p0, s0, p1, s1;
    attn__pool_stats(&p0, &s0);
    int calls = 0;
    CHECK(run_cover(1000, 10, 1, &calls), "1 thread runs every index once");
    CHECK(calls == 1, "1 thread: one call over the whole range (got %d)", calls);
    CHECK(run_cover(5, 10, 4, &calls) && calls == 1, "a job of one chunk runs as one call (got %d)", calls);
    attn__pool_stats(&p1, &s1);
    CHECK(p1 == p0 && s1 == s0 + 2, "both ran serially: %llu parallel, %llu serial jobs added", (unsigned long long)(p1 - p0),
          (unsigned long long)(s1 - s0));
    CHECK(attn__pool_threads(ATTN__POOL_MIN_COST - 1, 4) == 1, "below the work threshold: 1 thread");
    CHECK(attn__pool_threads(ATTN__POOL_MIN_COST, 4) == 4, "at the threshold: the requested threads");
    CHECK(attn__pool_threads(1e9, 0) == attn_get_num_threads(), "n_threads <= 0: attn_get_num_threads()");
    /* a parallel job is counted once (one hand-off, one wait) */
    attn__pool_stats(&p0, NULL);
    CHECK(run_cover(1000, 10, 2, NULL), "2 threads run every index once");
    attn__pool_stats(&p1, NULL);
    CHECK(p1 == p0 + 1, "2 threads: one parallel job counted (got %llu)", (unsigned long long)(p1 - p0));
}

/* nested: each chunk of the outer job starts an inner job, which must run serially on the
 * calling thread (the pool is busy with the outer one) */
typedef struct {
    _Atomic int *hits;
    int64_t inner;
    _Atomic int not_serial;
} nest_ctx;

typedef struct {
    nest_ctx *c;
    int64_t row;
} nest_inner;

static void nest_inner_fn(void *p, int64_t lo, int64_t hi, int tid) {
    nest_inner *in = (nest_inner *)p;
    if (tid != 0 || lo != 0 || hi != in->c->inner || !attn__pool_in_job()) atomic_store(&in->c->not_serial, 1);
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&in->c->hits[in->row * in->c->inner + i], 1);
}

static void nest_outer_fn(void *p, int64_t lo, int64_t hi, int tid) {
    nest_ctx *c = (nest_ctx *)p;
    for (int64_t r = lo; r < hi; r++) {
        nest_inner in = {c, r};
        attn__pool_for(c->inner, 3, 4, nest_inner_fn, &in);
    }
}

static void test_nested(void) {
    nest_ctx c;
    memset(&c, 0, sizeof c);
    c.inner = 50;
    const int64_t outer = 64;
    c.hits = (_Atomic int *)calloc((size_t)(outer * c.inner), sizeof(_Atomic int));
    attn__pool_for(outer, 1, 4, nest_outer_fn, &c);
    int ok = 1;
    for (int64_t i = 0; i < outer * c.inner; i++) ok &= atomic_load(&c.hits[i]) == 1;
    CHECK(ok, "nested jobs: every (outer, inner) index ran exactly once");
    CHECK(!atomic_load(&c.not_serial), "nested jobs ran serially on the calling thread as one call");
    CHECK(!attn__pool_in_job(), "the caller is outside a job once attn__pool_for returns");
    free((void *)c.hits);
}

/* two application threads submitting jobs at once: one gets the pool, the other runs serially */
static void *concurrent_main(void *p) {
    int *ok = (int *)p;
    /* chunk counts that jump up and down from one job to the next: a worker still holding the
     * previous job's exhausted ticket must not take a chunk of the next one */
    for (int r = 0; r < 1500; r++) *ok &= run_cover(1 + (r * 37) % 200, 1 + r % 3, 2 + r % 2, NULL);
    return NULL;
}

static void test_concurrent(void) {
    pthread_t th[3];
    int ok[3] = {1, 1, 1};
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, concurrent_main, &ok[i]);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK(ok[0] && ok[1] && ok[2], "3 application threads x 1500 jobs at once: every index ran exactly once");
}

/* ---------------------------------------------------------------- skinny products */

/* the weight a kernel reads, as float64 */
static double wval(const void *W, attn_qtype t, size_t i) {
    if (t == ATTN_QT_F16) return attn_f16_to_f32(((const uint16_t *)W)[i]);
    if (t == ATTN_QT_BF16) return attn_bf16_to_f32(((const uint16_t *)W)[i]);
    return ((const float *)W)[i];
}

/* skinny products against float64 sums of the same (rounded) weights: |y - exact| <=
 * K·2^-23·Σ|x·w| + 1e-30 (the bound of a float32 sum of K products, each product and each
 * addition rounded once: gamma_K < K·2^-23 for K·2^-24 < 1/2) */
static void test_skinny(void) {
    const attn_qtype types[] = {ATTN_QT_F32, ATTN_QT_F16, ATTN_QT_BF16};
    const int64_t Ms[] = {1, 2, 3, 5, 8, 16}, Ns[] = {1, 3, 4, 5, 67, 512}, Ks[] = {1, 7, 8, 9, 64, 383};
    int checked = 0, bad = 0;
    double worst = 0;
    for (int path = 0; path < 2; path++) {
        if (path == 1 && !attn__skinny_simd_available()) continue;
        for (size_t ti = 0; ti < 3; ti++)
            for (size_t mi = 0; mi < 6; mi++)
                for (size_t ni = 0; ni < 6; ni++)
                    for (size_t ki = 0; ki < 6; ki++) {
                        const int64_t M = Ms[mi], N = Ns[ni], K = Ks[ki];
                        const attn_qtype t = types[ti];
                        float *x = (float *)malloc(sizeof(float) * (size_t)(M * K)), *wf = (float *)malloc(sizeof(float) * (size_t)(N * K));
                        float *y = (float *)malloc(sizeof(float) * (size_t)(M * N));
                        uint16_t *wh = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(N * K));
                        attn_test_fill_uniform(x, (size_t)(M * K), -2, 2, &seed);
                        attn_test_fill_uniform(wf, (size_t)(N * K), -1, 1, &seed);
                        for (int64_t i = 0; i < N * K; i++) wh[i] = t == ATTN_QT_F16 ? attn_f32_to_f16(wf[i]) : attn_f32_to_bf16(wf[i]);
                        const void *W = t == ATTN_QT_F32 ? (const void *)wf : (const void *)wh;
                        int rc = attn__skinny_matmul_path(y, x, W, t, M, N, K, 2, path);
                        for (int64_t m = 0; m < M && rc == 0; m++)
                            for (int64_t n = 0; n < N; n++) {
                                double e = 0, mag = 0;
                                for (int64_t k = 0; k < K; k++) {
                                    const double p = (double)x[m * K + k] * wval(W, t, (size_t)(n * K + k));
                                    e += p, mag += fabs(p);
                                }
                                const double err = fabs((double)y[m * N + n] - e), tol = (double)K * ldexp(1.0, -23) * mag + 1e-30;
                                if (err > tol) bad++;
                                if (mag > 0 && err / tol > worst) worst = err / tol;
                                checked++;
                            }
                        if (rc) bad++;
                        free(x), free(wf), free(y), free(wh);
                    }
    }
    CHECK(bad == 0 && checked > 0, "skinny f32/f16/bf16, M 1..16, both paths: %d of %d outputs within K·2^-23·Σ|xw| of float64 (worst %.3g of the bound)",
          checked - bad, checked, worst);
    float y[4];
    const float x[16 * 4] = {0}, w[4] = {0};
    CHECK_ERR(attn__skinny_matmul(y, x, w, ATTN_QT_F32, 17, 1, 4, 1), ATTN_E_INVALID);
    CHECK_ERR(attn__skinny_matmul(y, x, w, ATTN_QT_Q8_0, 1, 1, 32, 1), ATTN_E_INVALID);
}

/* ---------------------------------------------------------------- 1 vs 2 threads */

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

/* Kernels whose outputs are each computed by one thread in an order that does not depend on
 * the split: bit-identical on 1 and 2 threads. Not so: attn_linear (OpenBLAS: the piece shapes
 * depend on the thread count and OpenBLAS picks its kernels by shape) and the fused SDPA when it
 * splits the keys of few query rows across threads (the split count follows the thread count,
 * and the partial results are merged in a different order). */
static void test_threads_bitwise(void) {
    const int64_t M = 3, N = 1000, K = 512;
    float *x = (float *)malloc(sizeof(float) * M * K), *wf = (float *)malloc(sizeof(float) * N * K);
    float *y1 = (float *)malloc(sizeof(float) * M * N), *y2 = (float *)malloc(sizeof(float) * M * N);
    attn_test_fill_uniform(x, (size_t)(M * K), -1, 1, &seed);
    attn_test_fill_uniform(wf, (size_t)(N * K), -1, 1, &seed);
    const attn_qtype qt[] = {ATTN_QT_Q8_0, ATTN_QT_Q4_1, ATTN_QT_Q5_0, ATTN_QT_Q4_K, ATTN_QT_Q6_K, ATTN_QT_F16, ATTN_QT_F32};
    for (size_t i = 0; i < sizeof qt / sizeof *qt; i++) {
        const size_t rb = attn_qtype_row_bytes(qt[i], K);
        void *q = malloc(rb * (size_t)N);
        CHECK_OK(attn_quantize_rows(q, wf, N, K, qt[i], 1));
        const attn_qmatrix w = {qt[i], q, N, K};
        uint64_t p0, p1;
        CHECK_OK(attn_qmatmul(y1, x, &w, M, 1));
        attn__pool_stats(&p0, NULL);
        CHECK_OK(attn_qmatmul(y2, x, &w, M, 2));
        attn__pool_stats(&p1, NULL);
        CHECK(same_bits(y1, y2, (size_t)(M * N)), "qmatmul %s [%lld x %lld] x %lld rows: 1 and 2 threads bit-identical", attn_qtype_name(qt[i]),
              (long long)N, (long long)K, (long long)M);
        CHECK(p1 > p0, "qmatmul %s on 2 threads ran a parallel job", attn_qtype_name(qt[i]));
        free(q);
    }
    /* qmatmul_n: three matrices in one job */
    {
        const size_t rb = attn_qtype_row_bytes(ATTN_QT_Q8_0, K);
        void *q = malloc(rb * (size_t)N);
        CHECK_OK(attn_quantize_rows(q, wf, N, K, ATTN_QT_Q8_0, 2));
        const attn_qmatrix w[3] = {{ATTN_QT_Q8_0, q, 320, K}, {ATTN_QT_Q8_0, (char *)q + rb * 320, 336, K}, {ATTN_QT_Q8_0, (char *)q + rb * 656, 336, K}};
        float *a1[3] = {y1, y1 + M * 320, y1 + M * 656}, *a2[3] = {y2, y2 + M * 320, y2 + M * 656};
        CHECK_OK(attn_qmatmul_n(a1, x, w, 3, M, 1));
        CHECK_OK(attn_qmatmul_n(a2, x, w, 3, M, 2));
        CHECK(same_bits(y1, y2, (size_t)(M * N)), "qmatmul_n of 3 Q8_0 matrices: 1 and 2 threads bit-identical");
        free(q);
    }
    /* norms (one row per thread) */
    {
        const int64_t R = 200, E = 512;
        float *a = (float *)malloc(sizeof(float) * R * E), *o1 = (float *)malloc(sizeof(float) * R * E), *o2 = (float *)malloc(sizeof(float) * R * E);
        float g[512];
        attn_test_fill_uniform(a, (size_t)(R * E), -3, 3, &seed);
        attn_test_fill_uniform(g, 512, 0.5f, 1.5f, &seed);
        attn_tensor ta = attn_tensor_f32_2d(a, R, E), t1 = attn_tensor_f32_2d(o1, R, E), t2 = attn_tensor_f32_2d(o2, R, E), tg = attn_tensor_f32_1d(g, E);
        const int keep = attn_get_num_threads();
        attn_set_num_threads(1);
        CHECK_OK(attn_rmsnorm(&t1, &ta, &tg, 1e-5f));
        attn_set_num_threads(2);
        CHECK_OK(attn_rmsnorm(&t2, &ta, &tg, 1e-5f));
        CHECK(same_bits(o1, o2, (size_t)(R * E)), "rmsnorm [200 x 512]: 1 and 2 threads bit-identical");
        attn_set_num_threads(1);
        CHECK_OK(attn_activate(&t1, &ta, ATTN_ACT_GELU));
        attn_set_num_threads(2);
        CHECK_OK(attn_activate(&t2, &ta, ATTN_ACT_GELU));
        CHECK(same_bits(o1, o2, (size_t)(R * E)), "gelu [200 x 512]: 1 and 2 threads bit-identical");
        attn_set_num_threads(keep);
        free(a), free(o1), free(o2);
    }
    /* log-softmax rows (a beam's rows over Whisper's vocabulary) on the pool: 5 rows of 51864,
     * one row with -inf entries */
    {
        const int64_t R = 5, V = 51864;
        float *a = (float *)malloc(sizeof(float) * R * V), *o1 = (float *)malloc(sizeof(float) * R * V), *o2 = (float *)malloc(sizeof(float) * R * V);
        attn_test_fill_uniform(a, (size_t)(R * V), -20, 20, &seed);
        for (int64_t i = 0; i < V; i += 3) a[2 * V + i] = -INFINITY;
        const int keep = attn_get_num_threads();
        uint64_t p0, p1;
        memcpy(o1, a, sizeof(float) * (size_t)(R * V));
        memcpy(o2, a, sizeof(float) * (size_t)(R * V));
        attn_set_num_threads(1);
        attn_log_softmax_rows(o1, R, V);
        attn_set_num_threads(2);
        attn__pool_stats(&p0, NULL);
        attn_log_softmax_rows(o2, R, V);
        attn__pool_stats(&p1, NULL);
        double sum = 0;
        for (int64_t i = 0; i < V; i++) sum += exp((double)o2[2 * V + i]);
        CHECK(same_bits(o1, o2, (size_t)(R * V)) && p1 > p0 && fabs(sum - 1.0) < 1e-4,
              "log-softmax [5 x 51864]: 1 and 2 threads bit-identical (a parallel job ran: %d), row 2 sums to %.6f", (int)(p1 > p0), sum);
        attn_set_num_threads(keep);
        free(a), free(o1), free(o2);
    }
    /* CTranslate2's LayerNorm (Whisper's encoder: 1500 rows) on the pool: rows of 387 (a tail
     * past the 8 lanes), 700 rows in chunks of 42, on both paths */
    {
        const int64_t R = 700, E = 387;
        float *a = (float *)malloc(sizeof(float) * R * E), *o1 = (float *)malloc(sizeof(float) * R * E), *o2 = (float *)malloc(sizeof(float) * R * E);
        float g[387], bt[387];
        attn_test_fill_uniform(a, (size_t)(R * E), -3, 3, &seed);
        attn_test_fill_uniform(g, 387, 0.5f, 1.5f, &seed);
        attn_test_fill_uniform(bt, 387, -0.5f, 0.5f, &seed);
        const int keep = attn_get_num_threads();
        for (int portable = 0; portable < 2; portable++) {
            if (portable) setenv("ATTN_QUANT_KERNEL", "portable", 1);
            uint64_t p0, p1;
            attn_set_num_threads(1);
            attn__ct2_layernorm(o1, a, R, g, bt, E, 1e-5f);
            attn_set_num_threads(2);
            attn__pool_stats(&p0, NULL);
            attn__ct2_layernorm(o2, a, R, g, bt, E, 1e-5f);
            attn__pool_stats(&p1, NULL);
            CHECK(same_bits(o1, o2, (size_t)(R * E)) && p1 > p0, "ct2 layernorm [700 x 387], %s path: 1 and 2 threads bit-identical (a parallel job ran: %d)",
                  portable ? "portable" : "default", (int)(p1 > p0));
            if (portable) unsetenv("ATTN_QUANT_KERNEL");
        }
        attn_set_num_threads(keep);
        free(a), free(o1), free(o2);
    }
    /* fused SDPA with enough query rows that it never splits keys: one item per tile/row */
    {
        const int64_t B = 2, H = 4, L = 96, D = 32, n = B * H * L * D;
        float *q = (float *)malloc(sizeof(float) * n), *k = (float *)malloc(sizeof(float) * n), *v = (float *)malloc(sizeof(float) * n);
        float *o1 = (float *)malloc(sizeof(float) * n), *o2 = (float *)malloc(sizeof(float) * n);
        attn_test_fill_uniform(q, (size_t)n, -1, 1, &seed);
        attn_test_fill_uniform(k, (size_t)n, -1, 1, &seed);
        attn_test_fill_uniform(v, (size_t)n, -1, 1, &seed);
        attn_tensor tq = attn_tensor_f32_4d(q, B, H, L, D), tk = attn_tensor_f32_4d(k, B, H, L, D), tv = attn_tensor_f32_4d(v, B, H, L, D);
        attn_tensor t1 = attn_tensor_f32_4d(o1, B, H, L, D), t2 = attn_tensor_f32_4d(o2, B, H, L, D);
        attn_sdpa_params p = attn_sdpa_params_default();
        p.is_causal = 1;
        p.n_threads = 1;
        CHECK_OK(attn_sdpa(&t1, NULL, &tq, &tk, &tv, &p));
        p.n_threads = 2;
        CHECK_OK(attn_sdpa(&t2, NULL, &tq, &tk, &tv, &p));
        CHECK(same_bits(o1, o2, (size_t)n), "causal SDPA [2, 4, 96, 32]: 1 and 2 threads bit-identical");
        /* split keys with a fixed split count: the last split of a row / tile to finish merges it,
         * in split order, so which thread finishes last does not matter */
        attn__fused_opts fo = attn__fused_opts_default();
        fo.split = 3;
        for (int rowp = 0; rowp < 2; rowp++) {
            fo.row_max_lq = rowp ? 1000 : -1; /* the row (decode) path, or query tiles */
            p.n_threads = 1;
            CHECK_OK(attn__sdpa_fused_ex(&t1, NULL, &tq, &tk, &tv, &p, &fo));
            p.n_threads = 2;
            CHECK_OK(attn__sdpa_fused_ex(&t2, NULL, &tq, &tk, &tv, &p, &fo));
            CHECK(same_bits(o1, o2, (size_t)n), "fused SDPA, 3 key splits, %s path: 1 and 2 threads bit-identical", rowp ? "row" : "tile");
            double err = 0;
            CHECK_OK(attn_sdpa(&t1, NULL, &tq, &tk, &tv, &p));
            err = attn_test_max_abs_diff(o1, o2, (size_t)n);
            /* 1e-5: outputs are convex combinations of values in [-1, 1]; split merging rescales
             * partial sums by exp of max differences (a few float32 roundings) */
            CHECK(err < 1e-5, "fused SDPA, 3 key splits, %s path, against the unsplit kernel: max |diff| %.3g", rowp ? "row" : "tile", err);
        }
        free(q), free(k), free(v), free(o1), free(o2);
    }
    /* skinny: Whisper's projection shape at beam 5 (a slice of the vocabulary) */
    {
        const int64_t Mv = 5, Nv = 4096, Kv = 384;
        float *xv = (float *)malloc(sizeof(float) * Mv * Kv), *wv = (float *)malloc(sizeof(float) * Nv * Kv);
        float *r1 = (float *)malloc(sizeof(float) * Mv * Nv), *r2 = (float *)malloc(sizeof(float) * Mv * Nv);
        attn_test_fill_uniform(xv, (size_t)(Mv * Kv), -1, 1, &seed);
        attn_test_fill_uniform(wv, (size_t)(Nv * Kv), -1, 1, &seed);
        CHECK_OK(attn__skinny_matmul(r1, xv, wv, ATTN_QT_F32, Mv, Nv, Kv, 1));
        CHECK_OK(attn__skinny_matmul(r2, xv, wv, ATTN_QT_F32, Mv, Nv, Kv, 2));
        CHECK(same_bits(r1, r2, (size_t)(Mv * Nv)), "skinny [4096 x 384] x 5 rows: 1 and 2 threads bit-identical");
        free(xv), free(wv), free(r1), free(r2);
    }
    free(x), free(wf), free(y1), free(y2);
}

/* the skinny kernel's documented order, one output: 8 partial sums (lane k mod 8, in k order),
 * added ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then the tail k >= K - K mod 8 in
 * order; fused = 1: each product-add one rounding (the AVX2 path), 0: two (the portable path) */
static float skinny_model(const float *x, const float *w, int64_t K, int fused) {
    const int64_t K8 = K & ~(int64_t)7;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t k = 0; k < K8; k += 8)
        for (int l = 0; l < 8; l++) {
            if (fused) acc[l] = fmaf(w[k + l], x[k + l], acc[l]);
            else {
                volatile float p = w[k + l] * x[k + l]; /* rounded before the addition */
                acc[l] += p;
            }
        }
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (int64_t k = K8; k < K; k++) {
        if (fused) s = fmaf(w[k], x[k], s);
        else {
            volatile float p = w[k] * x[k];
            s += p;
        }
    }
    return s;
}

/* both paths bit for bit against that model for every M (pairs of activation rows, the odd last
 * one alone), blocks of 4 weight rows and the rest one at a time, K with and without a tail, on
 * 1 and 2 threads; and float16 / bfloat16 weights give the bits of their float32 widening (the
 * Whisper projection reads the model's float16 values instead of the widened copy) */
static void test_skinny_order(void) {
    const int64_t Ns[] = {1, 4, 5, 7, 9, 67, 1031}, Ks[] = {1, 7, 8, 9, 64, 383, 384};
    int checked = 0, bad = 0, bad16 = 0;
    for (int path = 0; path < 2; path++) {
        if (path == 1 && !attn__skinny_simd_available()) continue;
        for (int64_t M = 1; M <= ATTN__SKINNY_MAX_M; M++)
            for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
                for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
                    const int64_t N = Ns[ni], K = Ks[ki];
                    float *x = (float *)malloc(sizeof(float) * (size_t)(M * K)), *wf = (float *)malloc(sizeof(float) * (size_t)(N * K));
                    float *y = (float *)malloc(sizeof(float) * (size_t)(M * N)), *y16 = (float *)malloc(sizeof(float) * (size_t)(M * N));
                    uint16_t *wh = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(N * K));
                    attn_test_fill_uniform(x, (size_t)(M * K), -2, 2, &seed);
                    attn_test_fill_uniform(wf, (size_t)(N * K), -1, 1, &seed);
                    const int nt = 1 + (int)((M + ni) % 2);
                    CHECK_OK(attn__skinny_matmul_path(y, x, wf, ATTN_QT_F32, M, N, K, nt, path));
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t n = 0; n < N; n++) {
                            const float e = skinny_model(x + m * K, wf + n * K, K, path);
                            bad += memcmp(&e, &y[m * N + n], sizeof e) != 0;
                            checked++;
                        }
                    for (int t16 = 0; t16 < 2; t16++) {
                        const attn_qtype t = t16 ? ATTN_QT_BF16 : ATTN_QT_F16;
                        for (int64_t i = 0; i < N * K; i++) {
                            wh[i] = t16 ? attn_f32_to_bf16(wf[i]) : attn_f32_to_f16(wf[i]);
                            wf[i] = t16 ? attn_bf16_to_f32(wh[i]) : attn_f16_to_f32(wh[i]);
                        }
                        CHECK_OK(attn__skinny_matmul_path(y, x, wf, ATTN_QT_F32, M, N, K, nt, path));
                        CHECK_OK(attn__skinny_matmul_path(y16, x, wh, t, M, N, K, 3 - nt, path));
                        bad16 += !same_bits(y, y16, (size_t)(M * N));
                    }
                    free(x), free(wf), free(y), free(y16), free(wh);
                }
    }
    CHECK(bad == 0 && checked > 0, "skinny, both paths, M 1..16: %d of %d outputs bit-identical to the documented order", checked - bad, checked);
    CHECK(bad16 == 0, "skinny: float16 / bfloat16 weights give the bits of their float32 widening (%d products differ)", bad16);
}

/* attn_weight_matmul with a 16-bit copy of the weights (attn_weight.half): 1..16 rows give the
 * skinny kernel's bits on the copy, plus the bias (the CTranslate2 Whisper projection's path);
 * more rows go to the float32 matrix (within 1e-5 of the same float64 sums); a copy that is not
 * float16 / bfloat16 is refused */
static void test_weight_half(void) {
    const int64_t N = 37, K = 48;
    float wf[37 * 48], b[37], x[17 * 48], y[17 * 37], ys[17 * 37];
    uint16_t wh[37 * 48];
    attn_test_fill_uniform(wf, (size_t)(N * K), -1, 1, &seed);
    attn_test_fill_uniform(b, (size_t)N, -1, 1, &seed);
    attn_test_fill_uniform(x, (size_t)(17 * K), -2, 2, &seed);
    for (int64_t i = 0; i < N * K; i++) {
        wh[i] = attn_f32_to_f16(wf[i]);
        wf[i] = attn_f16_to_f32(wh[i]);
    }
    attn_weight w = attn_weight_f32(wf, b, N, K);
    w.kernel = ATTN_WKERNEL_CT2;
    w.half = wh, w.half_type = ATTN_QT_F16;
    for (int64_t M = 1; M <= 17; M += 16) {
        CHECK_OK(attn_weight_matmul(y, x, M, &w, ATTN_ACT_IDENTITY, 2));
        double worst = 0;
        int same = 1;
        if (M <= ATTN__SKINNY_MAX_M) {
            CHECK_OK(attn__skinny_matmul(ys, x, wh, ATTN_QT_F16, M, N, K, 1));
            for (int64_t i = 0; i < M * N; i++) ys[i] += b[i % N];
            same = same_bits(y, ys, (size_t)(M * N));
        }
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double e = b[n];
                for (int64_t k = 0; k < K; k++) e += (double)x[m * K + k] * wf[n * K + k];
                worst = fmax(worst, fabs(e - y[m * N + n]));
            }
        CHECK(same && worst < 1e-5, "weight with a float16 copy, M = %lld: skinny bits %d, max |diff| vs float64 %.3g", (long long)M, same, worst);
    }
    w.half_type = ATTN_QT_Q8_0;
    CHECK_ERR(attn_weight_matmul(y, x, 1, &w, ATTN_ACT_IDENTITY, 1), ATTN_E_INVALID);
}

/* the fallback to one thread: a worker that holds its chunk for 2 ms (as one that lost its core)
 * while the caller's chunks take microseconds makes jobs slower than the caller alone */
static void slow_worker_fn(void *p, int64_t lo, int64_t hi, int tid) {
    _Atomic int *hits = (_Atomic int *)p;
    if (tid != 0) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&hits[i], 1);
}

static void test_adapt(void) {
    attn__pool_set_adapt(1);
    attn__pool_assume_busy(1); /* a busy machine (more runnable threads than CPUs) */
    _Atomic int hits[64];
    const uint64_t f0 = attn__pool_fallbacks();
    uint64_t p0, s0, p1, s1;
    int ok = 1, jobs = 0;
    for (; jobs < 40 && attn__pool_fallbacks() == f0; jobs++) {
        memset(hits, 0, sizeof hits);
        attn__pool_for(64, 1, 2, slow_worker_fn, hits);
        for (int i = 0; i < 64; i++) ok &= atomic_load(&hits[i]) == 1;
    }
    CHECK(attn__pool_fallbacks() == f0 + 1, "a helper that holds the caller up: fallback to one thread after %d jobs (at least 9 judged)", jobs);
    CHECK(jobs >= 9, "the first 8 jobs are a probe, not judged (fell back after %d)", jobs);
    attn__pool_stats(&p0, &s0);
    for (int r = 0; r < 100; r++) {
        memset(hits, 0, sizeof hits);
        attn__pool_for(64, 1, 2, slow_worker_fn, hits);
        for (int i = 0; i < 64; i++) ok &= atomic_load(&hits[i]) == 1;
    }
    attn__pool_stats(&p1, &s1);
    CHECK(p1 == p0 && s1 == s0 + 100, "the next 100 jobs ran on the caller alone (%llu parallel, %llu serial)", (unsigned long long)(p1 - p0),
          (unsigned long long)(s1 - s0));
    CHECK(ok, "every index ran exactly once through the fallback");
    /* the same late helper on a quiet machine (a CPU for each runnable thread): it was slow to
     * wake (a halted vCPU), not losing its core to others, and the pool keeps its threads —
     * judging such jobs late made a quiet 2-vCPU VM run a batched decode on one thread */
    attn__pool_assume_busy(0);
    attn__pool_set_adapt(1);
    const uint64_t f1 = attn__pool_fallbacks();
    for (int r = 0; r < 40; r++) {
        memset(hits, 0, sizeof hits);
        attn__pool_for(64, 1, 2, slow_worker_fn, hits);
        for (int i = 0; i < 64; i++) ok &= atomic_load(&hits[i]) == 1;
    }
    CHECK(attn__pool_fallbacks() == f1, "a late helper on a quiet machine: no fallback in 40 jobs (%llu)", (unsigned long long)(attn__pool_fallbacks() - f1));
    CHECK(ok, "every index ran exactly once");
    attn__pool_assume_busy(-1);
    attn__pool_set_adapt(0);
}

/* OpenBLAS's call that stops its worker threads (the CLI makes it at start, tools/main.c) */
extern int blas_thread_shutdown_(void) __attribute__((weak));

static int task_count(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The library's first call puts OpenBLAS on one thread; after the CLI stopped OpenBLAS's worker
 * threads, that call must not start them again (OpenBLAS 0.3.21's openblas_set_num_threads does
 * when its server is down: a thread that spun in sched_yield for ~0.1 s beside attn's workers at
 * the first forward pass, and took a core from them under contention). Runs first: nothing of
 * attn has called OpenBLAS yet. */
static void test_blas_threads(void) {
    if (!blas_thread_shutdown_) {
        printf("  (this OpenBLAS has no blas_thread_shutdown_: the CLI re-executes instead; not checked)\n");
        return;
    }
    const int started = openblas_get_num_threads();
    openblas_set_num_threads(1);
    blas_thread_shutdown_();
    const int before = task_count();
    const int nt = attn_get_num_threads();
    const int after = task_count();
    CHECK(before > 0 && after == before && openblas_get_num_threads() == 1,
          "OpenBLAS (started with %d threads) stopped: attn's first call starts no thread (%d -> %d threads; attn threads %d)", started,
          before, after, nt);
}

typedef struct {
    _Atomic int64_t sum;
    _Atomic int max_tid;
} cap_ctx;

static void cap_fn(void *p, int64_t lo, int64_t hi, int tid) {
    cap_ctx *c = (cap_ctx *)p;
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&c->sum, i);
    for (int m = atomic_load(&c->max_tid); tid > m && !atomic_compare_exchange_weak(&c->max_tid, &m, tid);) {
    }
}

/* a job asked for ATTN_MAX_THREADS threads runs on at most 4 a CPU (attn__pool_max_threads): with
 * 4096 on 2 CPUs every job woke 4095 workers and `attn chat` took 190 s for 4 tokens */
static void test_thread_cap(void) {
    const int cap = attn__pool_max_threads();
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(cap >= 4 && cap <= 4 * (cpus > 0 ? cpus : 1) && cap <= ATTN_MAX_THREADS, "cap %d threads for %ld CPUs", cap, cpus);
    CHECK(attn__pool_threads(1e12, ATTN_MAX_THREADS) == cap, "attn__pool_threads caps %d threads to %d", ATTN_MAX_THREADS, cap);
    cap_ctx c = {0, 0};
    const int64_t n = 200000;
    attn__pool_for(n, 1, ATTN_MAX_THREADS, cap_fn, &c);
    CHECK(atomic_load(&c.sum) == n * (n - 1) / 2 && atomic_load(&c.max_tid) < cap,
          "%d threads asked: every index ran once, participants 0..%d (< %d)", ATTN_MAX_THREADS, atomic_load(&c.max_tid), cap);
}

int main(void) {
    attn_test_name = "pool";
    test_blas_threads();
    attn__pool_set_adapt(0); /* the counts below must not depend on this machine's load */
    test_cover();
    test_serial();
    test_nested();
    test_concurrent();
    test_thread_cap();
    test_skinny();
    test_skinny_order();
    test_weight_half();
    test_threads_bitwise();
    test_adapt();
    return attn_test_finish();
}
