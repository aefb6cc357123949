/* attn's thread pool: persistent workers, chunked jobs taken through one atomic counter,
 * spin-then-futex waits (see core/pool.h).
 *
 * The job in flight is described by relaxed atomics (fn, ctx, n, chunk, chunk count, threads)
 * and a 64-bit ticket: the job's generation in the high 32 bits, the next chunk in the low 32.
 * A thread takes chunk i of generation g with a compare-and-swap (g, i) -> (g, i + 1). Before
 * the next job's description is written, the ticket moves to (g + 1, none), so a successful swap
 * proves the description it read belonged to g — a worker that wakes late, after its job ended,
 * takes nothing by mistake (without that step, a worker holding the ticket (g, last) could read
 * the next job's larger chunk count and take a chunk that does not exist; ThreadSanitizer found
 * it). `done` counts finished
 * chunks; the caller waits for it to reach the chunk count. */
#include "core/pool.h"

#include "attn_core.h"
#include "core/internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ATTN__PAUSE() _mm_pause()
#else
#define ATTN__PAUSE() ((void)0)
#endif

static struct {
    pthread_mutex_t lock; /* held by the application thread whose job is in flight */
    _Atomic(attn__pool_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t n, chunk;
    _Atomic uint32_t nchunks;
    _Atomic int nt;
    _Atomic uint64_t ticket;   /* generation << 32 | next chunk */
    _Atomic uint32_t gen;      /* the generation published last (futex word of idle workers) */
    _Atomic uint32_t done;     /* chunks finished (futex word of the waiting caller) */
    _Atomic int sleepers;      /* workers asleep on gen */
    _Atomic int caller_asleep; /* the caller sleeps on done */
    _Atomic int shutdown;
    int nworkers;
    pthread_t workers[ATTN_MAX_THREADS];
    long spin_ns;
    /* the fallback to one thread when helpers do not help (under the lock, see attn__judge) */
    int adapt;
    double ratio;      /* running mean of (job time) / (its estimated time on the caller alone) */
    unsigned slow;     /* the last 16 judged jobs, a bit each: 1 = slower than the caller alone */
    int probe;         /* parallel jobs left before the mean is judged */
    int64_t skip;      /* jobs still to run serially */
    int64_t backoff;   /* the next serial stretch */
    int64_t calm;      /* judged jobs since the last fallback that did not fall back */
    int assume_busy;   /* -1: ask the kernel (attn__machine_busy); 0 / 1: tests say so */
    int busy_seen;     /* judgements in a row that found the machine busy */
    _Atomic uint64_t n_parallel, n_serial, n_fallback;
    double par_ns, alone_ns; /* judged parallel jobs: their time, and their estimated time on the caller alone */
} attn__P = {.lock = PTHREAD_MUTEX_INITIALIZER, .spin_ns = -1, .assume_busy = -1};

static _Thread_local int attn__tls_in_job;

int attn__pool_in_job(void) { return attn__tls_in_job; }

void attn__pool_stats(uint64_t *parallel_jobs, uint64_t *serial_jobs) {
    if (parallel_jobs) *parallel_jobs = atomic_load(&attn__P.n_parallel);
    if (serial_jobs) *serial_jobs = atomic_load(&attn__P.n_serial);
}

uint64_t attn__pool_fallbacks(void) { return atomic_load(&attn__P.n_fallback); }

int attn__pool_threads(double cost, int nt) {
    if (nt <= 0) nt = attn_get_num_threads();
    if (nt > attn__pool_max_threads()) nt = attn__pool_max_threads();
    return cost < ATTN__POOL_MIN_COST ? 1 : nt;
}

void attn__pool_rows(int64_t n, int64_t chunk, double cost, int n_threads, attn__pool_fn fn, void *ctx) {
    if (n <= 0) return;
    const int nt = n < 2 ? 1 : attn__pool_threads(cost, n_threads);
    if (chunk <= 0) chunk = nt > 1 ? n / (4 * (int64_t)nt) : n;
    attn__pool_for(n, chunk < 1 ? 1 : chunk, nt, fn, ctx);
}

/* ---------------------------------------------------------------- waiting */

static void attn__futex_wait(_Atomic uint32_t *w, uint32_t seen) {
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
#else
    (void)w, (void)seen;
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
#endif
}

static void attn__futex_wake(_Atomic uint32_t *w, int count) {
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#else
    (void)w, (void)count;
#endif
}

static long attn__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* spin up to spin_ns while *w == seen; returns 1 if it changed */
static int attn__spin(_Atomic uint32_t *w, uint32_t seen) {
    const long limit = attn__P.spin_ns;
    if (limit <= 0) return atomic_load_explicit(w, memory_order_acquire) != seen;
    long t0 = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(w, memory_order_acquire) != seen) return 1;
        ATTN__PAUSE();
        if ((i & 63) == 0) {
            long t = attn__now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > limit) return 0;
        }
    }
}

/* ---------------------------------------------------------------- running chunks */

/* take and run chunks of generation g as participant tid until none is left; returns how many */
static int64_t attn__take(uint32_t g, int tid) {
    int64_t ran = 0;
    for (;;) {
        uint64_t t = atomic_load_explicit(&attn__P.ticket, memory_order_acquire);
        if ((uint32_t)(t >> 32) != g) return ran;
        const uint32_t i = (uint32_t)t;
        const uint32_t nch = atomic_load_explicit(&attn__P.nchunks, memory_order_relaxed);
        if (i >= nch || tid >= atomic_load_explicit(&attn__P.nt, memory_order_relaxed)) return ran;
        attn__pool_fn fn = atomic_load_explicit(&attn__P.fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&attn__P.ctx, memory_order_relaxed);
        const int64_t n = atomic_load_explicit(&attn__P.n, memory_order_relaxed);
        const int64_t chunk = atomic_load_explicit(&attn__P.chunk, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (!atomic_compare_exchange_weak_explicit(&attn__P.ticket, &t, t + 1, memory_order_acq_rel, memory_order_acquire)) continue;
        /* chunk i of g is ours: the values read above are g's (see the top of this file) */
        const int64_t lo = (int64_t)i * chunk, hi = lo + chunk < n ? lo + chunk : n;
        fn(ctx, lo, hi, tid);
        ran++;
        if (atomic_fetch_add(&attn__P.done, 1) + 1 == nch && atomic_load(&attn__P.caller_asleep))
            attn__futex_wake(&attn__P.done, 1);
    }
}

typedef struct {
    int tid;
    uint32_t seen;
} attn__worker_arg;

static void *attn__worker(void *p) {
    attn__worker_arg a = *(attn__worker_arg *)p;
    free(p);
    attn__tls_in_job = 1; /* anything a chunk calls runs serially on this worker */
    for (;;) {
        uint32_t g;
        if (!attn__spin(&attn__P.gen, a.seen)) {
            atomic_fetch_add(&attn__P.sleepers, 1);
            while (atomic_load(&attn__P.gen) == a.seen && !atomic_load(&attn__P.shutdown)) attn__futex_wait(&attn__P.gen, a.seen);
            atomic_fetch_sub(&attn__P.sleepers, 1);
        }
        if (atomic_load(&attn__P.shutdown)) return NULL;
        g = atomic_load_explicit(&attn__P.gen, memory_order_acquire);
        a.seen = g;
        (void)attn__take(g, a.tid);
    }
}

/* grow the pool to `want` workers (under the lock); returns the count it has */
static int attn__grow(int want) {
    if (attn__P.spin_ns < 0) {
        /* ATTN_POOL_SPIN_US: how long an idle thread spins before it sleeps (default 100 us) */
        const char *e = getenv("ATTN_POOL_SPIN_US");
        long us = e && *e ? strtol(e, NULL, 10) : 100;
        attn__P.spin_ns = (us < 0 ? 0 : us > 1000000 ? 1000000 : us) * 1000L;
        /* ATTN_POOL_ADAPT=0: never fall back to one thread (tests that count parallel jobs) */
        e = getenv("ATTN_POOL_ADAPT");
        attn__P.adapt = !(e && *e == '0');
        attn__P.ratio = 0.5;
        attn__P.probe = 8;
        attn__P.backoff = 256;
    }
    while (attn__P.nworkers < want) {
        attn__worker_arg *a = (attn__worker_arg *)malloc(sizeof *a);
        if (!a) break;
        a->tid = attn__P.nworkers + 1;
        a->seen = atomic_load(&attn__P.gen);
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, (size_t)8 << 20); /* as a main thread's: kernels keep blocks on the stack */
        int rc = pthread_create(&attn__P.workers[attn__P.nworkers], &at, attn__worker, a);
        pthread_attr_destroy(&at);
        if (rc != 0) {
            free(a);
            break;
        }
        attn__P.nworkers++;
    }
    return attn__P.nworkers;
}

/* 1 when the calling thread (the one that hands out the jobs) spent at least a tenth of the wall
 * time since the last look waiting on a run queue: runnable, but a CPU was running another
 * thread (the kernel's schedstat of this thread, /proc/thread-self/schedstat: time on a CPU,
 * time waiting, slices). A competitor that keeps a core busy makes the job's threads share the
 * CPUs with it, and the caller waits a third of the time and more; this process's own short-lived
 * threads (attn serve's HTTP threads, its clients) cost it a few percent. Looks at most every
 * 2 ms (the last verdict in between); 1 when the file cannot be read (the rule without it). */
static int attn__machine_busy(void) {
    if (attn__P.assume_busy >= 0) return attn__P.assume_busy;
    static _Thread_local long last_t, last_wait;
    static _Thread_local int last_busy = 1;
    const long now = attn__now_ns();
    if (last_t && now - last_t < 2000000L) return last_busy;
    char buf[128];
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (!f) return 1;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    unsigned long long run = 0, wait = 0;
    if (sscanf(buf, "%llu %llu", &run, &wait) != 2) return 1;
    const int seen = last_t != 0;
    last_busy = seen ? (double)((long)wait - last_wait) >= 0.1 * (double)(now - last_t) : 1;
    last_t = now, last_wait = (long)wait;
    return seen ? last_busy : 1;
}

void attn__pool_assume_busy(int busy) {
    pthread_mutex_lock(&attn__P.lock);
    attn__P.assume_busy = busy < 0 ? -1 : busy > 0;
    pthread_mutex_unlock(&attn__P.lock);
}

/* After each parallel job (under the lock): fold the job's time against its estimated time on
 * the caller alone (the caller's own rate over all chunks) into a running mean. On a busy
 * machine a worker that loses its core mid-chunk makes the caller wait a scheduler time slice;
 * when the mean says the helpers no longer pay for themselves (>= 0.9 of the time alone), the
 * pool runs the next `backoff` jobs on the caller alone (each one the same calls as a parallel
 * run makes, so results do not change), then probes again; the stretch doubles (up to 16384
 * jobs) each time a probe ends in another fallback before 1024 calm jobs, and is back to 256
 * after them (a competitor that takes a core now and then made every probe pay a scheduler
 * slice when one calm judgement already reset the stretch: ~60 fallbacks in a 128-token chat). */
static void attn__judge(long t0, long t1, long t2, int64_t own, uint32_t nch) {
    if (!attn__P.adapt || own <= 0) return; /* the workers took every chunk: they help */
    const double alone = (double)(t1 - t0) * (double)nch / (double)own, r = alone > 0 ? (double)(t2 - t0) / alone : 0.0;
    attn__P.par_ns += (double)(t2 - t0), attn__P.alone_ns += alone;
    attn__P.ratio += (r - attn__P.ratio) / 8.0;
    attn__P.slow = (attn__P.slow << 1 | (r > 1.0)) & 0xffffu;
    if (attn__P.probe > 0) {
        attn__P.probe--;
        return;
    }
    /* one late wake-up on a quiet machine (a worker preempted once for a few hundred
     * microseconds) can alone lift the mean past 0.9 for a dozen jobs: fall back only when
     * helpers were late in at least 3 of the last 16 jobs as well, and only while the caller
     * itself waits for a CPU (attn__machine_busy: other threads want the cores) */
    if (attn__P.ratio >= 0.9 && __builtin_popcount(attn__P.slow) >= 3) {
        /* busy at 3 judgements in a row (one look can catch a burst of this process's other
         * threads, as attn serve's HTTP threads writing the chunks of a step) */
        attn__P.busy_seen = attn__machine_busy() ? attn__P.busy_seen + 1 : 0;
        if (attn__P.busy_seen < 3) {
            /* late helpers on a machine with a CPU for each runnable thread: they were waking up
             * (a vCPU halted while idle takes its time), not losing their cores to others. Not a
             * reason to run alone — on a quiet 2-vCPU Zen 5 the fallbacks it made (each probe
             * finding the helper asleep again) ran SmolLM2's 8-sequence decode on one thread,
             * 510-770 against ~1000 tokens/s. Judged again after another probe. */
            attn__P.ratio = 0.5;
            attn__P.slow = 0;
            attn__P.probe = 8;
            return;
        }
        attn__P.skip = attn__P.backoff;
        attn__P.backoff = attn__P.backoff < 16384 ? 2 * attn__P.backoff : 16384;
        attn__P.ratio = 0.5;
        attn__P.probe = 8;
        attn__P.calm = 0;
        atomic_fetch_add_explicit(&attn__P.n_fallback, 1, memory_order_relaxed);
    } else if (++attn__P.calm >= 1024) {
        attn__P.backoff = 256;
    }
}

void attn__pool_set_adapt(int on) {
    pthread_mutex_lock(&attn__P.lock);
    attn__grow(0); /* reads the environment first, so that this call has the last word */
    attn__P.adapt = on;
    attn__P.ratio = 0.5;
    attn__P.probe = 8;
    attn__P.slow = 0;
    attn__P.skip = 0;
    attn__P.backoff = 256;
    attn__P.calm = 0;
    pthread_mutex_unlock(&attn__P.lock);
}

static void attn__serial(int64_t n, attn__pool_fn fn, void *ctx) {
    atomic_fetch_add_explicit(&attn__P.n_serial, 1, memory_order_relaxed);
    const int was = attn__tls_in_job;
    attn__tls_in_job = 1;
    fn(ctx, 0, n, 0);
    attn__tls_in_job = was;
}

/* the most threads a job runs on: 4 per CPU this process may run on (sched_getaffinity, read
 * once). More only add thread switches to compute-bound chunks; far more starved the caller
 * itself — `attn chat --threads 4096` on 2 CPUs took 190 s for 4 tokens, every worker woken for
 * every job, the caller never running a chunk, so the fallback never judged a job (new-user
 * finding). Results do not depend on the split. */
int attn__pool_max_threads(void) {
    static _Atomic int cap;
    int c = atomic_load_explicit(&cap, memory_order_relaxed);
    if (c > 0) return c;
    int cpus = 0;
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
#endif
    if (cpus <= 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        cpus = n > 0 ? (int)n : 1;
    }
    c = 4 * cpus < ATTN_MAX_THREADS ? 4 * cpus : ATTN_MAX_THREADS;
    atomic_store_explicit(&cap, c, memory_order_relaxed);
    return c;
}

void attn__pool_for(int64_t n, int64_t chunk, int nt, attn__pool_fn fn, void *ctx) {
    if (n <= 0 || !fn) return;
    if (chunk < 1) chunk = 1;
    if (chunk < n / 0x40000000) chunk = n / 0x40000000 + 1; /* the chunk count fits the ticket's 32 bits */
    if (nt <= 0) nt = attn_get_num_threads();
    if (nt > attn__pool_max_threads()) nt = attn__pool_max_threads();
    const int64_t nch64 = (n + chunk - 1) / chunk;
    if (nt > nch64) nt = (int)nch64;
    if (nt <= 1 || attn__tls_in_job || pthread_mutex_trylock(&attn__P.lock) != 0) {
        attn__serial(n, fn, ctx);
        return;
    }
    nt = attn__grow(nt - 1) + 1 < nt ? attn__P.nworkers + 1 : nt;
    if (attn__P.skip > 0) attn__P.skip--, nt = 1;
    if (nt <= 1) {
        pthread_mutex_unlock(&attn__P.lock);
        attn__serial(n, fn, ctx);
        return;
    }
    atomic_fetch_add_explicit(&attn__P.n_parallel, 1, memory_order_relaxed);
    const uint32_t nch = (uint32_t)nch64;
    const uint32_t g = atomic_load_explicit(&attn__P.gen, memory_order_relaxed) + 1;
    /* first the ticket moves to the new generation with no chunk to take, then the description
     * changes: a thread still in the previous job that reads the new description finds its
     * compare-and-swap on the old ticket failing (the release fence here, the acquire fence in
     * attn__take) */
    atomic_store_explicit(&attn__P.ticket, (uint64_t)g << 32 | 0xffffffffu, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&attn__P.fn, fn, memory_order_relaxed);
    atomic_store_explicit(&attn__P.ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&attn__P.n, n, memory_order_relaxed);
    atomic_store_explicit(&attn__P.chunk, chunk, memory_order_relaxed);
    atomic_store_explicit(&attn__P.nchunks, nch, memory_order_relaxed);
    atomic_store_explicit(&attn__P.nt, nt, memory_order_relaxed);
    atomic_store_explicit(&attn__P.done, 0, memory_order_relaxed);
    const long t0 = attn__now_ns();
    atomic_store_explicit(&attn__P.ticket, (uint64_t)g << 32, memory_order_release);
    atomic_store(&attn__P.gen, g);
    if (atomic_load(&attn__P.sleepers) > 0) attn__futex_wake(&attn__P.gen, INT_MAX);
    attn__tls_in_job = 1;
    const int64_t own = attn__take(g, 0);
    attn__tls_in_job = 0;
    const long t1 = attn__now_ns();
    /* wait for the chunks other threads hold: spin, then sleep until the last one wakes us */
    uint32_t d = atomic_load_explicit(&attn__P.done, memory_order_acquire);
    if (d != nch && !attn__spin(&attn__P.done, d)) {
        atomic_store(&attn__P.caller_asleep, 1);
        while ((d = atomic_load(&attn__P.done)) != nch) attn__futex_wait(&attn__P.done, d);
        atomic_store(&attn__P.caller_asleep, 0);
    }
    while (atomic_load_explicit(&attn__P.done, memory_order_acquire) != nch) ATTN__PAUSE();
    attn__judge(t0, t1, attn__now_ns(), own, nch);
    pthread_mutex_unlock(&attn__P.lock);
}

/* the workers end with the library (process exit, or dlclose of libattn.so): none may be left
 * running code that is about to be unmapped */
__attribute__((destructor)) static void attn__pool_fini(void) {
    const char *e = getenv("ATTN_POOL_STATS");
    if (e && *e == '1')
        fprintf(stderr, "attn pool: %llu parallel jobs, %llu serial, %llu fallbacks to one thread; judged jobs %.1f ms, %.1f ms alone\n",
                (unsigned long long)atomic_load(&attn__P.n_parallel), (unsigned long long)atomic_load(&attn__P.n_serial),
                (unsigned long long)atomic_load(&attn__P.n_fallback), attn__P.par_ns * 1e-6, attn__P.alone_ns * 1e-6);
    if (pthread_mutex_trylock(&attn__P.lock) != 0) return; /* a job is in flight on another thread: leave the workers */
    atomic_store(&attn__P.shutdown, 1);
    atomic_fetch_add(&attn__P.gen, 1);
    attn__futex_wake(&attn__P.gen, INT_MAX);
    for (int i = 0; i < attn__P.nworkers; i++) pthread_join(attn__P.workers[i], NULL);
    attn__P.nworkers = 0;
    pthread_mutex_unlock(&attn__P.lock);
}

/* a child of fork() has none of the parent's workers: it starts with an empty pool */
static void attn__pool_atfork_child(void) {
    pthread_mutex_init(&attn__P.lock, NULL);
    attn__P.nworkers = 0;
    atomic_store(&attn__P.sleepers, 0);
    atomic_store(&attn__P.caller_asleep, 0);
    attn__tls_in_job = 0;
}

__attribute__((constructor)) static void attn__pool_init(void) { pthread_atfork(NULL, NULL, attn__pool_atfork_child); }
