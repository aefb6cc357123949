/* bench_variants: time one attention variant on random inputs and report its peak memory.
 * One configuration per process, so that ru_maxrss belongs to it alone
 * (bench/variants/run_bench.py runs the grid and writes the CSV).
 *
 *   bench_variants VARIANT L [options]
 *     VARIANT            exact | linear | performer | sliding | longformer | bigbird
 *     L                  sequence length (Lq = Lk = L)
 *     --heads H          heads (default 2; Hkv = H), batch 1
 *     --dim D            head dim D = Dv (default 64)
 *     --causal           causal form (linear, performer, longformer, bigbird, exact)
 *     --window W --global G --block b --global-blocks g --random r --features M --seed S
 *                        variant parameters (defaults of attn_variant_params_default)
 *     --threads N        worker threads (default: all cores)
 *     --min-time S       repeat until S seconds were spent (default 1.0), at least 2 runs
 *     --max-reps N       at most N timed runs (default 10)
 *
 * Memory, two measures:
 *   heap_kb  the peak of heap bytes allocated during one call beyond those allocated before
 *            it, from glibc's own statistics (the allocator is not replaced): a child process
 *            sets M_MMAP_THRESHOLD = 4 KiB before anything is allocated, so that every block of
 *            a page or more is its own mmap, runs the warm-up and one call, and reports glibc's
 *            high-water mark of mmapped bytes (malloc_stats' "max mmap bytes") less the bytes
 *            mapped before the call (mallinfo2().hblkhd): the call's working memory, exact to
 *            the page for every block of 4 KiB or more (smaller blocks are not counted),
 *            independent of what else runs on the machine; the timed runs (in the parent) keep
 *            glibc's default settings.
 *   rss      the process first runs the same variant on L = min(L, 256) (OpenMP threads and the
 *            OpenBLAS buffers then exist), allocates and touches q, k, v and out, reads
 *            ru_maxrss (base_kb), and after the timed runs reads it again (peak_kb);
 *            work_kb = peak - base (resident KiB; pages reused from the warm-up are not seen).
 * Output: one CSV line
 *   variant,L,H,D,causal,params,threads,best_ms,median_ms,reps,base_kb,peak_kb,work_kb,heap_kb */
#include "attn.h"
#include "attn_variants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* ---- heap accounting from glibc's own statistics (nothing is interposed; see heap_kb above) */
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

enum { HEAP_GRAIN = 4096 }; /* blocks of a page or more are counted, each page-rounded */

/* "max mmap bytes" of malloc_stats(), which prints only to stderr: read through a temporary
 * file; -1 if it cannot be read */
static long long max_mmap_bytes(void) {
    long long v = -1;
    FILE *t = tmpfile();
    int saved = t ? dup(2) : -1;
    if (saved < 0) {
        if (t) fclose(t);
        return -1;
    }
    fflush(stderr);
    dup2(fileno(t), 2);
    malloc_stats();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(t);
    char line[256];
    while (fgets(line, sizeof line, t))
        if (sscanf(line, "max mmap bytes = %lld", &v) == 1) break;
    fclose(t);
    return v;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long maxrss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rs = 0x9E3779B97F4A7C15ULL;
static float urand(void) {
    rs ^= rs >> 12;
    rs ^= rs << 25;
    rs ^= rs >> 27;
    return (float)((double)((rs * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

typedef struct {
    float *q, *k, *v, *o;
    attn_tensor tq, tk, tv, to;
} bufs;

static int alloc_bufs(bufs *b, int64_t H, int64_t L, int64_t D) {
    size_t n = (size_t)(H * L * D);
    b->q = malloc(4 * n), b->k = malloc(4 * n), b->v = malloc(4 * n), b->o = malloc(4 * n);
    if (!b->q || !b->k || !b->v || !b->o) return -1;
    for (size_t i = 0; i < n; i++) b->q[i] = urand(), b->k[i] = urand(), b->v[i] = urand(), b->o[i] = 1.0f; /* touch every page */
    b->tq = attn_tensor_f32_4d(b->q, 1, H, L, D);
    b->tk = attn_tensor_f32_4d(b->k, 1, H, L, D);
    b->tv = attn_tensor_f32_4d(b->v, 1, H, L, D);
    b->to = attn_tensor_f32_4d(b->o, 1, H, L, D);
    return 0;
}

static void free_bufs(bufs *b) {
    free(b->q);
    free(b->k);
    free(b->v);
    free(b->o);
}

static int run(bufs *b, const attn_variant_params *p) {
    if (p->kind == ATTN_VARIANT_EXACT) { /* attn_sdpa with the default (fused) implementation */
        attn_sdpa_params s = attn_sdpa_params_default();
        s.is_causal = p->is_causal;
        s.n_threads = p->n_threads;
        return attn_sdpa(&b->to, NULL, &b->tq, &b->tk, &b->tv, &s);
    }
    return attn_variant_attention(&b->to, NULL, &b->tq, &b->tk, &b->tv, p);
}

/* warm-up on a small problem (at most the measured size): threads, BLAS buffers. 0 or -1 (said) */
static int warm_up(const attn_variant_params *p, int64_t H, int64_t L, int64_t D) {
    bufs w;
    int64_t Lw = L < 256 ? L : 256;
    if (alloc_bufs(&w, H, Lw, D) < 0) return -1;
    attn_variant_params pw = *p;
    if (pw.kind == ATTN_VARIANT_BIGBIRD && Lw % pw.block) pw.block = 64;
    if (run(&w, &pw) < 0) {
        fprintf(stderr, "bench_variants: warm-up: %s\n", attn_last_error());
        free_bufs(&w);
        return -1;
    }
    free_bufs(&w);
    return 0;
}

/* heap_kb, measured in a child process so that the timed runs keep glibc's default allocator
 * settings: there, from the start, every block of HEAP_GRAIN bytes or more is its own mmap
 * (M_MMAP_THRESHOLD, which also stops glibc from raising the threshold; M_TOP_PAD and
 * M_TRIM_THRESHOLD 0 keep the arena's free top from serving such blocks); after the warm-up and
 * the inputs, one call; heap_kb = glibc's high-water mark of mmapped bytes less the bytes mapped
 * before the call. -1 when it could not be measured. */
static double heap_kb_child(const attn_variant_params *p, int64_t H, int64_t L, int64_t D) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        mallopt(M_MMAP_THRESHOLD, HEAP_GRAIN);
        mallopt(M_TOP_PAD, 0);
        mallopt(M_TRIM_THRESHOLD, 0);
        double kb = -1;
        bufs b;
        if (warm_up(p, H, L, D) == 0 && alloc_bufs(&b, H, L, D) == 0) {
            const long long before = (long long)mallinfo2().hblkhd;
            if (run(&b, p) == 0) {
                const long long high = max_mmap_bytes();
                if (high >= 0) kb = high > before ? (double)(high - before) / 1024.0 : 0.0;
            }
        }
        ssize_t w = write(fd[1], &kb, sizeof kb);
        _exit(w == (ssize_t)sizeof kb ? 0 : 1);
    }
    close(fd[1]);
    double kb = -1;
    if (read(fd[0], &kb, sizeof kb) != (ssize_t)sizeof kb) kb = -1;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return kb;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_variants VARIANT L [options] (see the source)\n");
        return 2;
    }
    attn_variant_kind kind;
    if (attn_variant_from_name(argv[1], &kind) < 0) {
        fprintf(stderr, "bench_variants: %s\n", attn_last_error());
        return 2;
    }
    int64_t L = atoll(argv[2]), H = 2, D = 64;
    attn_variant_params p = attn_variant_params_default(kind);
    double min_time = 1.0;
    int max_reps = 10;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
        if (!strcmp(a, "--causal")) {
            p.is_causal = 1;
            continue;
        }
        if (!strcmp(a, "--heads")) H = atoll(v);
        else if (!strcmp(a, "--dim")) D = atoll(v);
        else if (!strcmp(a, "--window")) p.window = atoll(v);
        else if (!strcmp(a, "--global")) p.n_global = atoll(v);
        else if (!strcmp(a, "--block")) p.block = atoll(v);
        else if (!strcmp(a, "--global-blocks")) p.global_blocks = atoll(v);
        else if (!strcmp(a, "--random")) p.random_blocks = atoll(v);
        else if (!strcmp(a, "--features")) p.features = atoll(v);
        else if (!strcmp(a, "--seed")) p.seed = (uint64_t)atoll(v);
        else if (!strcmp(a, "--threads")) p.n_threads = atoi(v);
        else if (!strcmp(a, "--min-time")) min_time = atof(v);
        else if (!strcmp(a, "--max-reps")) max_reps = atoi(v);
        else {
            fprintf(stderr, "bench_variants: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    if (p.n_threads > 0) attn_set_num_threads(p.n_threads);
    int threads = p.n_threads > 0 ? p.n_threads : attn_get_num_threads();
    char params[128] = "";
    switch (kind) {
    case ATTN_VARIANT_SLIDING: snprintf(params, sizeof params, "W=%lld", (long long)p.window); break;
    case ATTN_VARIANT_LONGFORMER: snprintf(params, sizeof params, "w=%lld G=%lld", (long long)p.window, (long long)p.n_global); break;
    case ATTN_VARIANT_BIGBIRD:
        snprintf(params, sizeof params, "b=%lld g=%lld r=%lld", (long long)p.block, (long long)p.global_blocks, (long long)p.random_blocks);
        break;
    case ATTN_VARIANT_PERFORMER: snprintf(params, sizeof params, "M=%lld", (long long)p.features); break;
    default: break;
    }
    /* heap_kb first: the child is forked before this process starts its OpenMP threads */
    const double heap_kb = heap_kb_child(&p, H, L, D);
    if (warm_up(&p, H, L, D) < 0) return 1;
    bufs b;
    if (alloc_bufs(&b, H, L, D) < 0) {
        fprintf(stderr, "bench_variants: out of memory for the inputs\n");
        return 1;
    }
    long base = maxrss_kb();
    double times[64];
    int reps = 0;
    double t_start = now_s();
    if (max_reps > 64) max_reps = 64;
    while (reps < max_reps && (reps < 2 || now_s() - t_start < min_time)) {
        double t0 = now_s();
        if (run(&b, &p) < 0) {
            fprintf(stderr, "bench_variants: %s\n", attn_last_error());
            return 1;
        }
        times[reps++] = now_s() - t0;
    }
    long peak = maxrss_kb();
    qsort(times, (size_t)reps, sizeof times[0], cmp_d);
    printf("%s,%lld,%lld,%lld,%d,%s,%d,%.3f,%.3f,%d,%ld,%ld,%ld,%.1f\n", attn_variant_name(kind), (long long)L, (long long)H,
           (long long)D, p.is_causal, params, threads, 1e3 * times[0], 1e3 * times[reps / 2], reps, base, peak, peak - base,
           heap_kb);
    free_bufs(&b);
    return 0;
}
