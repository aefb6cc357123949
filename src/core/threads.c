/* Thread-count policy: attn's OpenMP regions use attn_get_num_threads(); OpenBLAS is
 * given the same count, and is called with one thread from inside attn's own parallel
 * regions (see attn__blas_threads_begin/end in core/internal.h). */
#include "attn_core.h"
#include "core/internal.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <unistd.h>

static int attn__nthreads = 0;

static int attn__ncores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int attn_set_num_threads(int n) {
    attn__nthreads = n > 0 ? n : attn__ncores();
    openblas_set_num_threads(attn__nthreads);
    return attn__nthreads;
}

int attn_get_num_threads(void) {
    if (attn__nthreads <= 0) attn__nthreads = attn__ncores();
    return attn__nthreads;
}
