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

#endif
