/* Thread-count policy: the parallel steps of attn's forward paths (products, quantised products,
 * fused attention, norms) are jobs of attn's own thread pool (core/pool.c) on up to
 * attn_get_num_threads() threads; the remaining OpenMP regions (the reference and backward
 * attention, the variants, training) use the same count. OpenBLAS is always run with ONE thread
 * (set once, before attn's first GEMM): large GEMMs are cut into pieces that attn's threads take
 * (attn_linear), the rest run inside attn's jobs. Two thread pools that both spin-wait on 2 cores
 * (attn's and OpenBLAS's pthreads) made 2 threads no faster than 1; one pool avoids
 * oversubscription. */
#include "attn_core.h"
#include "core/internal.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <pthread.h>
#include <unistd.h>

static int attn__nthreads = 0;
static pthread_once_t attn__blas_once = PTHREAD_ONCE_INIT;

/* only when OpenBLAS is not on one thread already: its openblas_set_num_threads, called after the
 * CLI stopped OpenBLAS's worker threads (tools/main.c), starts them again (0.3.21: a thread that
 * spins in sched_yield for ~0.1 s beside attn's workers at the first forward pass, a competitor
 * of attn's own making) */
static void attn__blas_single(void) {
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void attn__blas_init(void) { pthread_once(&attn__blas_once, attn__blas_single); }

static int attn__ncores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int attn_set_num_threads(int n) {
    attn__blas_init();
    /* libgomp gives each thread of a region stack and bookkeeping; 100000 threads overflowed
     * its stack in the first parallel region (a segfault), so the count is bounded here (the
     * pool's workers too: it starts them when a job first has work for them). */
    if (n > ATTN_MAX_THREADS)
        return attn_set_error(ATTN_E_RANGE, "set_num_threads: %d threads is more than the %d allowed (n <= 0: one per core)", n,
                              ATTN_MAX_THREADS);
    attn__nthreads = n > 0 ? n : attn__ncores();
    if (attn__nthreads > ATTN_MAX_THREADS) attn__nthreads = ATTN_MAX_THREADS;
    return attn__nthreads;
}

int attn_get_num_threads(void) {
    attn__blas_init();
    if (attn__nthreads <= 0) attn__nthreads = attn__ncores();
    return attn__nthreads;
}
