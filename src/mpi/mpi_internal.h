/* Private helpers of libattn_mpi (src/mpi/); names use the attn__ prefix. */
#ifndef ATTN_MPI_INTERNAL_H
#define ATTN_MPI_INTERNAL_H

#include "attn_mpi.h"

/* attn__mpi_ready: ATTN_OK when MPI is initialised and not finalised and comm is not
 * MPI_COMM_NULL, else ATTN_E_INVALID naming `who`. Calls only MPI_Initialized / MPI_Finalized
 * before that is known (the two calls MPI allows at any time). */
int attn__mpi_ready(MPI_Comm comm, const char *who);

/* attn__mpi_error: ATTN_E_IO "what failed: <MPI_Error_string(code)>". */
int attn__mpi_error(int code, const char *what);

/* What attn__ring_check_local records of a rank's call (one int64 each), exchanged by
 * MPI_Allgather into a table all[P][D_N] (src/mpi/ring.c, ring_backward.c). */
enum { D_B, D_H, D_HKV, D_D, D_DV, D_LQ, D_LK, D_CAUSAL, D_LAYOUT, D_HAS_SCALE, D_SCALE, D_HAS_KL, D_N };

/* attn__ring_check_local: the local checks of a ring call (attn_sdpa_ring's: q, k, v, out float32
 * 4-D with data; no mask / window; finite scale; a known layout; the shapes; p->sdpa.lse when
 * given), before anything is exchanged; fills d[D_N]. Errors name `who`. */
int attn__ring_check_local(const char *who, const attn_tensor *out, const attn_tensor *q, const attn_tensor *k,
                           const attn_tensor *v, const attn_ring_params *p, int64_t *d);

/* attn__ring_check_global: after the exchange, the same verdict on every rank from all[P][D_N]:
 * the ranks agree on everything but the lengths, every rank holds >= 1 query and key, striped
 * lengths are attn_ring_shard's; *Lq, *Lk the global lengths. Errors name `who`. */
int attn__ring_check_global(const char *who, const int64_t *all, int P, attn_ring_layout layout, int64_t *Lq,
                            int64_t *Lk);

/* attn__ring_rows_view: rows [r0, r0 + n) of batch row b of a 4-D tensor, or of a 3-D one (lse):
 * a view (shape[0] = 1, shape[2] = n, the same strides) */
static inline attn_tensor attn__ring_rows_view(const attn_tensor *t, int64_t b, int64_t r0, int64_t n) {
    attn_tensor v = *t;
    v.data = (float *)t->data + b * t->stride[0] + r0 * t->stride[2];
    v.shape[0] = 1;
    v.shape[2] = n;
    return v;
}

/* attn__ring_shard_size: from all[P][D_N], *maxk the longest key/value shard (keys) and *per_key
 * the floats one key carries (B·Hkv·(D + Dv)); ATTN_E_UNSUPPORTED naming `who` when a shard
 * (maxk·per_key floats) exceeds one MPI message (INT_MAX elements), else ATTN_OK. */
int attn__ring_shard_size(const char *who, const int64_t *all, int P, int64_t *maxk, int64_t *per_key);

/* attn__ring_key_lengths: kl[B] = the global key lengths (p->sdpa.key_lengths, else Lk each),
 * checked to be the same on every rank (MPI_Allreduce max and min; klmin[B]: scratch) and within
 * 0..Lk: the same verdict on every rank (collective; errors name `who`). */
int attn__ring_key_lengths(MPI_Comm comm, const char *who, const attn_ring_params *p, int64_t B, int64_t Lk, int64_t *kl,
                           int64_t *klmin);

/* attn__ring_block_offset: rank me's queries (the first at global position qs in the contiguous
 * layout) against the shard of rank src (nk keys; ks[src] its first global key, contiguous):
 * returns the causal offset c (local key jl visible to local query il iff jl <= il + c) and fills
 * klocal[B], the shard's keys within the global key lengths kl[B]. */
int64_t attn__ring_block_offset(attn_ring_layout layout, int me, int src, int P, int64_t Lq, int64_t Lk, int64_t qs,
                                const int64_t *ks, int64_t nk, int64_t B, const int64_t *kl, int64_t *klocal);

/* attn__ring_step_wait: the end of a ring step whose computation began at t0 (MPI_Wtime): waits
 * for the n requests (MPI_Waitall); stats, when not NULL, gets the computation time (t0 until
 * the wait), the wait time and one step. ATTN_OK, or ATTN_E_IO when the wait failed. */
int attn__ring_step_wait(int n, MPI_Request *req, double t0, attn_ring_stats *stats);

/* One collective ring call (attn_sdpa_ring, attn_sdpa_ring_backward), between
 * attn__ring_begin and attn__ring_end. */
typedef struct {
    MPI_Comm comm;         /* a duplicate of the caller's (errors returned), MPI_COMM_NULL if none */
    int me, P;             /* this rank, the ranks */
    int64_t *all;          /* [P][D_N], every rank's attn__ring_check_local record */
    int64_t Lq, Lk;        /* the global lengths */
    double t_start;        /* MPI_Wtime() at the start */
    attn_ring_stats stats; /* zeroed; the run fills it */
} attn__ring_call;

/* attn__ring_begin: duplicates comm, and when st (the caller's own checks so far) is ATTN_OK,
 * runs attn__ring_check_local on (out, q, k, v, p), exchanges the records and runs
 * attn__ring_check_global: the same verdict on every rank (errors name `who`). Call
 * attn__ring_end with its result in every case. */
int attn__ring_begin(attn__ring_call *rc, MPI_Comm comm, const char *who, int st, const attn_tensor *out,
                     const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, const attn_ring_params *p);

/* attn__ring_end: frees what attn__ring_begin made; when st is ATTN_OK and p->stats is set, copies
 * rc->stats there with total_s since the start. Returns st. */
int attn__ring_end(attn__ring_call *rc, int st, const attn_ring_params *p);

#endif
