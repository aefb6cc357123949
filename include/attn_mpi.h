/*
 * attn_mpi.h — attention and data-parallel jobs across the ranks of an MPI communicator
 * (libattn_mpi; built when mpicc is found or with `make MPI=1`, against Open MPI).
 *
 * Ring attention: exact scaled dot-product attention (the semantics of attn_sdpa,
 * attn_attention.h) over a sequence whose queries, keys and values are split along the
 * sequence across the P ranks of a communicator. Each rank holds one shard of q and one of
 * k / v; the key/value shards travel around the ring (rank r sends to r + 1 and receives from
 * r - 1, P - 1 steps, MPI_Isend / MPI_Irecv into a second buffer while the fused SDPA kernel
 * computes the block it holds), and every rank merges its partial results by their
 * log-sum-exp, so that no rank ever holds more than two key/value shards.
 * Source: Liu, Zaharia, Abbeel 2023, "Ring Attention with Blockwise Transformers for
 * Near-Infinite Context", arXiv 2310.01889 (the ring and the blockwise merge); Brandon et al.
 * 2023, "Striped Attention: Faster Ring Attention for Causal Transformers", arXiv 2311.09431
 * (the striped layout that balances the causal case).
 *
 * Threads: the library calls MPI only from the calling thread (MPI_THREAD_FUNNELED is
 * enough); the SDPA kernel runs its own OpenMP threads between the MPI calls.
 */
#ifndef ATTN_MPI_H
#define ATTN_MPI_H

#include "attn_attention.h"

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How a sequence of length L is split across P ranks (attn_ring_shard gives a rank's part):
 *   ATTN_RING_CONTIGUOUS  rank r holds one run of consecutive positions; the runs follow the
 *                         rank order. attn_sdpa_ring accepts any run lengths >= 1 (they are
 *                         gathered); attn_ring_shard gives the balanced split (lengths differ by
 *                         at most 1, the longer runs first).
 *   ATTN_RING_STRIPED     rank r holds positions r, r + P, r + 2P, ... (Striped Attention):
 *                         under a causal mask every rank then scores nearly the same number of
 *                         (query, key) pairs (see attn_sdpa_ring). */
typedef enum { ATTN_RING_CONTIGUOUS = 0, ATTN_RING_STRIPED = 1 } attn_ring_layout;

/* attn_ring_shard: rank r's part of a sequence of length L split over P ranks with `layout`:
 * *len positions (may be 0 when P > L), the first at global position *first, the next ones
 * every *step positions (contiguous: step 1; striped: step P). Any output pointer may be NULL.
 * Errors: ATTN_E_INVALID (L < 0, P < 1, r outside 0..P-1, unknown layout). */
int attn_ring_shard(attn_ring_layout layout, int64_t L, int P, int r, int64_t *len, int64_t *first,
                    int64_t *step);

/* What one rank did in one attn_sdpa_ring call (attn_ring_params.stats; all counts exact). */
typedef struct {
    int64_t bytes_sent;     /* key/value bytes this rank sent to its right neighbour */
    int64_t bytes_received; /* key/value bytes received from its left neighbour */
    int64_t scratch_bytes;  /* bytes the call allocated (two key/value buffers, the partial
                               block result, the float64 accumulator) — the per-rank memory
                               beyond the caller's q, k, v, out */
    int64_t pairs;          /* (query, key) pairs this rank scored, summed over batch and
                               heads: its share of the work (the causal balance measure) */
    int steps;              /* ring steps (= P) */
    double compute_s;       /* seconds in the SDPA kernel and the merge */
    double wait_s;          /* seconds blocked in MPI_Waitall after a block was computed: the
                               communication that computation did not hide */
    double total_s;         /* seconds for the whole call (checks and the final agreement too) */
} attn_ring_stats;

/* Parameters of attn_sdpa_ring. */
typedef struct {
    attn_sdpa_params sdpa;   /* as attn_sdpa, with these restrictions: mask must be NULL and
                                window 0 (ATTN_E_UNSUPPORTED: a dense [Lq, Lk] mask or window is
                                not sharded); is_causal, key_lengths ([B] valid key counts of the
                                WHOLE key sequence, the same on every rank), has_scale / scale,
                                n_threads and impl apply to every block; lse, when not NULL, is
                                float32 [B, H, Lq_local] and receives the log-sum-exp of this
                                rank's query rows over the whole key sequence (-inf: no visible
                                key) */
    attn_ring_layout layout; /* the same on every rank */
    attn_ring_stats *stats;  /* NULL, or filled on success */
} attn_ring_params;

/* attn_ring_params_default: attn_sdpa_params_default(), striped layout, no stats. */
attn_ring_params attn_ring_params_default(void);

/* attn_sdpa_ring: exact attention of this rank's queries against the keys and values of every
 * rank of comm (collective: every rank of comm calls it with the same parameters).
 * Shapes (PyTorch order), all float32, any strides; Lq_local / Lk_local are this rank's shard
 * lengths, the global lengths Lq / Lk their sums over the ranks:
 *   q   [B, H,   Lq_local, D]     k [B, Hkv, Lk_local, D]     v [B, Hkv, Lk_local, Dv]
 *   out [B, H,   Lq_local, Dv] (written)    p->sdpa.lse [B, H, Lq_local] (optional, written)
 * Row i of q on rank r is global query position first + i·step of attn_ring_shard(layout, Lq,
 * P, r) for the striped layout (lengths must be exactly attn_ring_shard's) and the prefix sum
 * of the lower ranks' Lq_local plus i for the contiguous layout (any lengths >= 1); the same for
 * k and v with Lk. H must be a multiple of Hkv (grouped-query attention).
 * The result is attn_sdpa on the whole sequence restricted to this rank's rows: bottom-right
 * causal (key j visible to query i iff j <= i + Lk - Lq, global positions), key_lengths
 * padding, and a row with no visible key gives out = 0 and lse = -inf, never NaN.
 * Measured against single-process attn_sdpa on the whole sequence (tests/test_mpi_ring.c,
 * inputs U(-1, 1), P = 1..4): asserted |diff| <= 2e-6 + 2e-6·|ref| against the float64
 * reference, measured max 1.2e-7 (each block is the fused kernel's float32 result; the merge
 * accumulates in float64 and rounds once); lse within 4.8e-7.
 * Work balance (causal, L = n·P): striped rank r scores n·r + P·n(n-1)/2 + n pairs per
 * (batch, head), so max/min = 1 + (P-1)/(P(n-1)/2 + 1): 1.008 / 1.017 / 1.025 at P = 2 / 3 / 4,
 * L = 240 (measured, tests/test_mpi_ring.c); the contiguous split gives 2.98 / 4.95 / 6.90
 * (rank P-1 does about 2P-1 times rank 0's work).
 * Memory per rank beyond the inputs and out: 2 key/value shards (2·B·Hkv·max Lk_local·(D+Dv)
 * floats) + B·H·Lq_local·(Dv+1) floats + B·H·Lq_local·(Dv+2) doubles: O(L/P·D).
 * Errors — returned on EVERY rank, with the same message naming the first failing rank
 * ("rank r of P: ..."); no rank hangs on another's bad input:
 *   ATTN_E_INVALID  MPI not initialised (or already finalised), comm MPI_COMM_NULL, a NULL
 *                   tensor, a non-finite scale, layouts or causal flags that differ between
 *                   ranks, key_lengths given on some ranks only, different or out of 0..Lk
 *   ATTN_E_DTYPE    a tensor not float32
 *   ATTN_E_SHAPE    shapes as attn_sdpa, B / H / Hkv / D / Dv that differ between ranks, a
 *                   rank holding no query or no key (e.g. more ranks than positions), striped
 *                   shard lengths other than attn_ring_shard's
 *   ATTN_E_UNSUPPORTED  a mask or window, a shard over INT_MAX floats (one MPI message)
 *   ATTN_E_RANGE    NaN / inf in q, k or v on some rank (as attn_sdpa)
 *   ATTN_E_NOMEM    an allocation failed on some rank
 *   ATTN_E_IO       an MPI call failed (its MPI_Error_string)
 * On error out and lse are undefined. */
int attn_sdpa_ring(MPI_Comm comm, attn_tensor *out, const attn_tensor *q, const attn_tensor *k,
                   const attn_tensor *v, const attn_ring_params *p);

/* attn_sdpa_ring_backward: gradients of attn_sdpa_ring's out with respect to this rank's q, k
 * and v (collective: every rank of comm calls it with the same parameters and the shards that
 * the forward had), given the forward's out and log-sum-exp (attn_ring_params.sdpa.lse of
 * attn_sdpa_ring: the global rows' lse) and dout, the gradient of a loss with respect to out.
 * Shapes (PyTorch order), all float32, any strides; shards exactly as attn_sdpa_ring's:
 *   q    [B, H,   Lq_local, D]     k  [B, Hkv, Lk_local, D]     v  [B, Hkv, Lk_local, Dv]
 *   out  [B, H,   Lq_local, Dv]    lse [B, H, Lq_local] (natural log; -inf: no visible key)
 *   dout [B, H,   Lq_local, Dv]
 *   dq   [B, H,   Lq_local, D] (written)   dk [B, Hkv, Lk_local, D] (written)
 *   dv   [B, Hkv, Lk_local, Dv] (written)
 * p: as attn_sdpa_ring (layout, is_causal, key_lengths, scale, n_threads; p->sdpa.lse is not
 * read: lse is the argument; stats, when not NULL, counts the key/value and dk/dv bytes and
 * the blocks' time). p may be NULL (the defaults).
 * The result is attn_sdpa_backward on the whole sequence restricted to this rank's rows of dq
 * and keys of dk / dv: dk and dv of a key sum over every rank's queries (and, under GQA, the
 * query heads of its group); a row with no visible key gets dq = 0, a key no query sees
 * dk = dv = 0, never NaN.
 * Algorithm: Ring Attention's backward (Liu et al. 2023, arXiv 2310.01889): each rank keeps its
 * dq accumulator (float64) while the key/value shards travel around the ring (P - 1 hops, as in
 * the forward, MPI_Isend / MPI_Irecv into a second buffer) together with their dk / dv
 * accumulators (float32, P hops: after the last one each shard's accumulator is home with every
 * rank's contribution). A shard's contribution is FlashAttention-2's backward (Dao 2023,
 * "FlashAttention-2", Algorithm 2: P recomputed from the saved lse, D = rowsum(dout·out)) run by
 * attn_sdpa_backward on this rank's rows and that shard, with the global out and lse, so it is
 * exactly the shard's share. The k/v transfer and the incoming dk / dv accumulator overlap the
 * block's computation; the final hop home follows the last block.
 * Bytes sent per rank per call, with shards of n keys: (P - 1)·4·B·Hkv·n·(D + Dv) of k/v plus
 * P·4·B·Hkv·n·(D + Dv) of dk/dv, (2P - 1) / (P - 1) times the forward's (each of the first P - 1
 * steps moves twice the forward's bytes, the last one the hop home); in all, over the ring,
 * (2P - 1)·4·B·Hkv·Lk·(D + Dv) for any shard lengths.
 * Memory per rank beyond the arguments: 5 key/value-sized shard buffers (2 k/v, 2 outgoing and
 * 1 incoming dk/dv) + B·H·Lq_local·D doubles (dq) + one call's float32 dq / dk / dv: O(L/P·D).
 * Measured against single-process attn_sdpa_backward on the whole sequence and the float64
 * attn_sdpa_backward_reference (tests/test_mpi_ring_backward.c, inputs U(-1, 1), P = 1..4):
 * asserted max|diff| <= 2e-5·max|reference| per gradient against both (the single-process
 * kernel's own tolerance against float64, tests/test_sdpa_backward.c).
 * Errors — returned on EVERY rank, as attn_sdpa_ring's (the same list, naming
 * attn_sdpa_ring_backward), plus: ATTN_E_INVALID (lse, dout, dq, dk or dv NULL), ATTN_E_DTYPE
 * (one of them not float32), ATTN_E_SHAPE (dout not out's shape, dq / dk / dv not q's / k's /
 * v's, lse not [B, H, Lq_local]), ATTN_E_RANGE (NaN / inf in out or dout, NaN or +inf in lse, a
 * gradient that overflows float32). On error dq, dk and dv are undefined. */
int attn_sdpa_ring_backward(MPI_Comm comm, attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q,
                            const attn_tensor *k, const attn_tensor *v, const attn_tensor *out, const attn_tensor *lse,
                            const attn_tensor *dout, const attn_ring_params *p);

/* attn_mpi_agree: collective: every rank of comm passes its own status (ATTN_OK or an
 * ATTN_E_* code, with attn_last_error() its message); every rank returns ATTN_OK when all did,
 * else the status of the lowest failing rank with its message as "rank r of P: message"
 * (unchanged when P = 1). For "commit the output only if every rank succeeded".
 * Errors: ATTN_E_INVALID (MPI not initialised), ATTN_E_IO (the exchange itself failed). */
int attn_mpi_agree(MPI_Comm comm, int status);

/* attn_mpi_split_by_size: split n items of sizes[0..n) (>= 0, e.g. bytes of text) into P
 * consecutive runs of nearly equal total size: run r is items starts[r] .. starts[r+1]-1,
 * starts[0] = 0, starts[P] = n (starts has P + 1 entries). Each item weighs sizes[i] + 1, so
 * empty items still count; the cut before item i goes to the rank whose share of the total
 * the item's midpoint falls in. Deterministic: the same on every rank.
 * Errors: ATTN_E_INVALID (NULL, n < 0, P < 1, a negative size). */
int attn_mpi_split_by_size(const int64_t *sizes, int64_t n, int P, int64_t *starts);

/* A float32 .npy file mapped read-only (attn_mpi_npy_map). */
typedef struct {
    attn_tensor t; /* C-order view of the file's data */
    void *map;     /* the mapping (private) */
    size_t size;
} attn_mpi_npy;

/* attn_mpi_npy_map: map the float32 .npy file at path read-only (mmap; pages are read when
 * touched, so a rank that views only its shard reads only those pages) as a C-order tensor
 * m->t of 0..ATTN_MAX_DIMS dims; release with attn_mpi_npy_unmap. Format versions 1.0, 2.0
 * and 3.0 with descr '<f4' and fortran_order False (the NumPy format specification).
 * Errors: ATTN_E_INVALID (NULL), ATTN_E_IO (missing / unreadable), ATTN_E_FORMAT (not a .npy,
 * malformed header, fortran order, shorter than the shape says), ATTN_E_DTYPE (not '<f4').
 * On error *m is zeroed. */
int attn_mpi_npy_map(attn_mpi_npy *m, const char *path);

/* attn_mpi_npy_unmap: release a mapping from attn_mpi_npy_map and zero it (NULL-safe; a
 * zeroed attn_mpi_npy is fine). */
void attn_mpi_npy_unmap(attn_mpi_npy *m);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_MPI_H */
