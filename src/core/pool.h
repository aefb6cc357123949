/* attn's thread pool (internal): one set of persistent workers shared by every parallel loop of
 * the library (products, quantised products, fused attention, norms).
 *
 * A job is a range [0, n) cut into chunks of `chunk` indices. The caller publishes it and takes
 * chunks itself; idle workers take the others through one atomic counter, so a thread that
 * loses its core (a busy machine) holds back at most the chunk it is running, never a fixed
 * share of the work decided up front. Workers wait for a job by spinning briefly (the next
 * product of a decoding step usually follows within microseconds), then sleep on a futex; the
 * caller waits for the last chunk the same way. Only one job runs at a time: a call made inside
 * a job (nested) or while another application thread's job runs executes on the calling thread,
 * serially, so nesting never deadlocks. n_threads == 1, a job of one chunk, or a cost below the
 * threshold (attn__pool_threads) also run serially, as one call fn(ctx, 0, n, 0).
 *
 * Results are bit-identical between thread counts wherever fn computes each index independently
 * of the range it is handed (the row kernels of attn_qmatmul, the fused attention's items):
 * chunk boundaries never depend on the thread count, only which thread runs a chunk does. */
#ifndef ATTN_CORE_POOL_H
#define ATTN_CORE_POOL_H

#include <stdint.h>

/* one chunk [lo, hi) of a job, run by participant tid (0 = the caller, < the job's n_threads:
 * an index into per-thread scratch) */
typedef void (*attn__pool_fn)(void *ctx, int64_t lo, int64_t hi, int tid);

/* Run fn over [0, n) in chunks of `chunk` (>= 1) on at most n_threads threads (<= 0: the
 * attn_get_num_threads() count); returns when every chunk has run. n <= 0 does nothing. */
void attn__pool_for(int64_t n, int64_t chunk, int n_threads, attn__pool_fn fn, void *ctx);

/* Below this many multiply-adds (or comparable element operations) a step runs on one thread:
 * handing a job to a sleeping worker costs a few microseconds, more than the work. */
#define ATTN__POOL_MIN_COST 65536.0

/* n_threads for a step of `cost` multiply-adds: 1 under ATTN__POOL_MIN_COST, else `nt`
 * (<= 0: attn_get_num_threads()) */
int attn__pool_threads(double cost, int nt);

/* Row-wise steps (norms, adds, quantization, log-softmax: each row computed whole by one thread)
 * over [0, n): on the pool when `cost` (multiply-adds or comparable element operations) reaches
 * ATTN__POOL_MIN_COST and n >= 2, else one call fn(ctx, 0, n, 0) on the caller. chunk <= 0 takes
 * about 4 chunks a thread. n_threads <= 0: attn_get_num_threads(). */
void attn__pool_rows(int64_t n, int64_t chunk, double cost, int n_threads, attn__pool_fn fn, void *ctx);

/* 1 while the calling thread runs inside a job (its nested calls run serially) */
int attn__pool_in_job(void);

/* Graceful degradation: after each parallel job the caller compares the job's time with its
 * estimated time on the caller alone; when helpers stop paying for themselves (a busy machine:
 * a worker that loses its core holds the caller up for a scheduler time slice) while the caller
 * itself waits for a CPU (other threads want the cores: a quiet VM's slow wake-ups are not that), the pool runs
 * the following jobs serially for a stretch (256 jobs, doubling while it keeps happening, at
 * most 16384), then tries threads again. Results do not change, as long as fn gives the same
 * bits for any split of its range (every fn in attn does). On by default; ATTN_POOL_ADAPT=0 in the environment or
 * attn__pool_set_adapt(0) turns it off (tests that count parallel jobs). */
void attn__pool_set_adapt(int on);
/* the busy-machine check of the fallback (the calling thread waiting on a run queue for >= 10%
 * of the time, /proc/thread-self/schedstat): busy 1 / 0 makes the pool take the machine as busy /
 * quiet (tests), -1 asks the kernel again */
void attn__pool_assume_busy(int busy);

/* the most threads one job runs on: 4 per CPU the process may run on (its affinity mask, read
 * once), at most ATTN_MAX_THREADS; attn__pool_for and attn__pool_threads cap larger counts to it */
int attn__pool_max_threads(void);

/* counts since the process started: jobs handed to workers (each one hand-off and one wait:
 * the synchronisation points) and jobs run serially. With ATTN_POOL_STATS=1 in the
 * environment they are printed to stderr when the library is unloaded (process exit), with the
 * fallbacks and, for the parallel jobs in which the caller ran chunks itself, their wall time
 * against their estimated time on the caller alone (its own rate over all chunks; ms). */
void attn__pool_stats(uint64_t *parallel_jobs, uint64_t *serial_jobs);
/* times the pool fell back to one thread (see attn__pool_set_adapt) */
uint64_t attn__pool_fallbacks(void);

#endif
