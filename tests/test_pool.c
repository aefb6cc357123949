/* The thread pool (src/core/pool.c): every index of a job runs exactly once for many (n, chunk,
 * threads) combinations, nested calls and concurrent callers run serially without deadlock, one
 * thread is the serial fallback, and the converted kernels give bit-identical results on 1 and 2
 * threads where their arithmetic does not depend on the split. */
#include "attn.h"
#include "attn_ops.h"
#include "core/pool.h"
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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
    for (int r = 0; r < 300; r++) *ok &= run_cover(200 + r, 7, 2, NULL);
    return NULL;
}

static void test_concurrent(void) {
    pthread_t th[3];
    int ok[3] = {1, 1, 1};
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, concurrent_main, &ok[i]);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK(ok[0] && ok[1] && ok[2], "3 application threads x 300 jobs at once: every index ran exactly once");
}

int main(void) {
    attn_test_name = "pool";
    test_cover();
    test_serial();
    test_nested();
    test_concurrent();
    return attn_test_finish();
}
