/* attn_sdpa_ring_backward: the backward of ring attention (include/attn_mpi.h).
 *
 * Ring Attention's backward (Liu, Zaharia, Abbeel 2023, arXiv 2310.01889, §3 and its Algorithm 1
 * run backwards): every rank keeps its queries, out, lse, dout and a float64 dq accumulator; the
 * key/value shards travel around the ring as in the forward, and with each shard travels its
 * dk / dv accumulator, so that a shard's accumulator has collected every rank's contribution when
 * it comes home. A block's contribution is FlashAttention-2's backward (Dao 2023, Algorithm 2)
 * of this rank's rows against that shard with the GLOBAL lse and out: P = exp(scale·q·kᵀ − lse)
 * is then the block of the whole softmax and Δ = rowsum(dout·out) the whole row's, so
 * attn_sdpa_backward (the single-process tile kernel) computes exactly the block's share of dq,
 * dk and dv. The causal split of a block into at most two calls is the forward's (ring.c).
 *
 * Step s (0 ≤ s < P), shard of rank src = me − s:
 *   post  Irecv next k/v (left), Isend this k/v (right)          — as the forward, s < P − 1
 *   post  Irecv the accumulator of shard src from the left          — s > 0 (the left computed
 *         its share of shard src at step s − 1)
 *   compute this rank's share of shard src into a zeroed partial (dq into the accumulator)
 *   wait; partial += received accumulator; Isend the partial to the right
 * After step P − 1 the right neighbour is the shard's home; every rank then receives its own
 * shard's complete dk / dv from the left. The k/v transfer and the incoming accumulator overlap
 * the block's computation; the last hop home does not (one dk/dv shard, after the last block). */
#include "attn_mpi.h"
#include "core/internal.h"
#include "mpi/mpi_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const WHO = "attn_sdpa_ring_backward";

static int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

/* the backward's own checks (besides attn__ring_check_local's), before anything is exchanged */
static int check_bw(attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q, const attn_tensor *k,
                    const attn_tensor *v, const attn_tensor *out, const attn_tensor *lse, const attn_tensor *dout) {
    const attn_tensor *g[4] = {dq, dk, dv, dout}, *like[4] = {q, k, v, out};
    static const char *const gn[4] = {"dq", "dk", "dv", "dout"}, *const ln[4] = {"q", "k", "v", "out"};
    if (!lse) return attn_set_error(ATTN_E_INVALID, "%s: lse must not be NULL", WHO);
    for (int i = 0; i < 4; i++) {
        if (!g[i] || !like[i]) return attn_set_error(ATTN_E_INVALID, "%s: NULL tensor", WHO);
        if (g[i]->dtype != ATTN_F32)
            return attn_set_error(ATTN_E_DTYPE, "%s: %s has dtype %s; expected float32", WHO, gn[i],
                                  attn_dtype_name(g[i]->dtype));
        if (g[i]->ndim != 4 || like[i]->ndim != 4)
            return attn_set_error(ATTN_E_SHAPE, "%s: %s has %d dims; expected 4", WHO, gn[i], g[i]->ndim);
        if (!g[i]->data && attn_tensor_numel(g[i]) > 0)
            return attn_set_error(ATTN_E_INVALID, "%s: %s has no data", WHO, gn[i]);
        for (int d = 0; d < 4; d++)
            if (g[i]->shape[d] != like[i]->shape[d])
                return attn_set_error(ATTN_E_SHAPE, "%s: %s must have the shape of %s (dim %d is %lld, not %lld)", WHO,
                                      gn[i], ln[i], d, (long long)g[i]->shape[d], (long long)like[i]->shape[d]);
    }
    return ATTN_OK;
}

typedef struct {
    int64_t B, H, Hkv, D, Dv, nq, maxk;
    const attn_tensor *q, *out, *lse, *dout;
    attn_sdpa_params sp;
    double *dqacc;            /* [B, H, nq, D] */
    float *tdq, *tdk, *tdv;   /* one attn_sdpa_backward call's results: [1, H, nq, D], [1, Hkv, maxk, D / Dv] */
    int64_t pairs;
} bw_state;

/* one attn_sdpa_backward call: rows [r0, r0 + n) of batch row b against the first nkv keys of the
 * shard in kvbuf ([B, Hkv, nk, D] then [B, Hkv, nk, Dv]), key length kl; its dq is added to the
 * accumulator, its dk / dv to part (packed like kvbuf) */
static int block_call(bw_state *st, const float *kvbuf, float *part, int64_t nk, int64_t b, int64_t r0, int64_t n,
                      int64_t nkv, int64_t kl, int causal) {
    const int64_t B = st->B, H = st->H, Hkv = st->Hkv, D = st->D, Dv = st->Dv, nq = st->nq;
    if (kl <= 0) return ATTN_OK; /* no visible key: nothing to add */
    attn_tensor qv = attn__ring_rows_view(st->q, b, r0, n), ov = attn__ring_rows_view(st->out, b, r0, n);
    attn_tensor gv = attn__ring_rows_view(st->dout, b, r0, n);
    attn_tensor lv = attn__ring_rows_view(st->lse, b, r0, n);
    attn_tensor kv = attn_tensor_f32_4d((float *)kvbuf, B, Hkv, nk, D);
    attn_tensor vv = attn_tensor_f32_4d((float *)kvbuf + B * Hkv * nk * D, B, Hkv, nk, Dv);
    kv = attn__ring_rows_view(&kv, b, 0, nkv);
    vv = attn__ring_rows_view(&vv, b, 0, nkv);
    attn_tensor tdq = attn_tensor_f32_4d(st->tdq, 1, H, n, D), tdk = attn_tensor_f32_4d(st->tdk, 1, Hkv, nkv, D);
    attn_tensor tdv = attn_tensor_f32_4d(st->tdv, 1, Hkv, nkv, Dv);
    attn_sdpa_params sp = st->sp;
    sp.is_causal = causal;
    sp.key_lengths = &kl;
    sp.lse = NULL;
    ATTN_TRY(attn_sdpa_backward(&tdq, &tdk, &tdv, &qv, &kv, &vv, &ov, &lv, &gv, &sp));
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < n; i++) {
            double *acc = st->dqacc + ((b * H + h) * nq + r0 + i) * D;
            const float *x = st->tdq + (h * n + i) * D;
            for (int64_t d = 0; d < D; d++) acc[d] += x[d];
        }
    float *pk = part + b * Hkv * nk * D, *pv = part + B * Hkv * nk * D + b * Hkv * nk * Dv;
    for (int64_t h = 0; h < Hkv; h++)
        for (int64_t j = 0; j < nkv; j++) {
            float *dk = pk + (h * nk + j) * D, *dv = pv + (h * nk + j) * Dv;
            const float *xk = st->tdk + (h * nkv + j) * D, *xv = st->tdv + (h * nkv + j) * Dv;
            for (int64_t d = 0; d < D; d++) dk[d] += xk[d];
            for (int64_t e = 0; e < Dv; e++) dv[e] += xv[e];
        }
    for (int64_t i = 0; i < n; i++) {
        int64_t vis = causal ? (i + nkv - n + 1) : nkv;
        st->pairs += H * (vis < kl ? vis : kl);
    }
    return ATTN_OK;
}

/* this rank's share of one shard (the forward's block_compute: rows [0, a0) see nothing, rows
 * [a0, b0) are causal against the key prefix [0, b0 + c), rows [b0, nq) see every key) */
static int block_compute(bw_state *st, const float *kvbuf, float *part, int64_t nk, int causal, int64_t c,
                         const int64_t *kl, MPI_Request *req, int nreq) {
    const int64_t nq = st->nq;
    for (int64_t b = 0; b < st->B; b++) {
        int64_t klb = kl[b];
        if (klb > 0) {
            if (!causal) {
                ATTN_TRY(block_call(st, kvbuf, part, nk, b, 0, nq, nk, klb, 0));
            } else {
                int64_t a0 = clamp64(-c, 0, nq), b0 = clamp64(nk - 1 - c, a0, nq);
                if (b0 > a0)
                    ATTN_TRY(block_call(st, kvbuf, part, nk, b, a0, b0 - a0, b0 + c, clamp64(klb, 0, b0 + c), 1));
                if (nq > b0) ATTN_TRY(block_call(st, kvbuf, part, nk, b, b0, nq - b0, nk, klb, 0));
            }
        }
        int flag; /* let MPI progress the transfers between calls */
        MPI_Testall(nreq, req, &flag, MPI_STATUSES_IGNORE);
    }
    return ATTN_OK;
}

/* pack k and v (any strides) into buf as [B, Hkv, nk, D] then [B, Hkv, nk, Dv] (to = 0), or
 * unpack buf into them (to = 1) */
static void pack_kv(float *buf, attn_tensor *k, attn_tensor *v, int to) {
    attn_tensor *ts[2] = {k, v};
    for (int t = 0; t < 2; t++) {
        attn_tensor *x = ts[t];
        float *p = x->data;
        for (int64_t b = 0; b < x->shape[0]; b++)
            for (int64_t h = 0; h < x->shape[1]; h++)
                for (int64_t j = 0; j < x->shape[2]; j++)
                    for (int64_t e = 0; e < x->shape[3]; e++, buf++) {
                        float *y = p + b * x->stride[0] + h * x->stride[1] + j * x->stride[2] + e * x->stride[3];
                        if (to) *y = *buf;
                        else *buf = *y;
                    }
    }
}

static int any_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 1;
    return 0;
}

static int ring_bw_run(MPI_Comm comm, int me, int P, const int64_t *all, int64_t Lq, int64_t Lk, attn_tensor *dq,
                       attn_tensor *dk, attn_tensor *dv, const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                       const attn_tensor *out, const attn_tensor *lse, const attn_tensor *dout, const attn_ring_params *p,
                       attn_ring_stats *stats) {
    const int64_t B = all[D_B], H = all[D_H], Hkv = all[D_HKV], D = all[D_D], Dv = all[D_DV];
    const int64_t nq = all[me * D_N + D_LQ], nkme = all[me * D_N + D_LK];
    const int causal = p->sdpa.is_causal != 0;
    int64_t maxk, per_key;
    int st = attn__ring_shard_size(WHO, all, P, &maxk, &per_key);
    const size_t kvn = (size_t)(maxk * per_key), on = (size_t)(B * H * nq);
    int64_t *kl = calloc((size_t)B + 1, sizeof *kl), *klmin = calloc((size_t)B + 1, sizeof *klmin);
    int64_t *klocal = calloc((size_t)B + 1, sizeof *klocal), *ks = calloc((size_t)P + 1, sizeof *ks);
    float *buf[2] = {malloc(kvn * 4 + 4), malloc(kvn * 4 + 4)}, *part[2] = {malloc(kvn * 4 + 4), malloc(kvn * 4 + 4)};
    float *acc_in = malloc(kvn * 4 + 4);
    bw_state s;
    memset(&s, 0, sizeof s);
    s.B = B, s.H = H, s.Hkv = Hkv, s.D = D, s.Dv = Dv, s.nq = nq, s.maxk = maxk;
    s.q = q, s.out = out, s.lse = lse, s.dout = dout;
    s.dqacc = calloc(on * D + 1, sizeof(double));
    s.tdq = malloc((size_t)(H * nq * D) * 4 + 4);
    s.tdk = malloc((size_t)(Hkv * maxk * D) * 4 + 4);
    s.tdv = malloc((size_t)(Hkv * maxk * Dv) * 4 + 4);
    const int64_t scratch = (int64_t)(5 * kvn * 4 + on * D * 8 + (size_t)(H * nq * D + Hkv * maxk * (D + Dv)) * 4 +
                                      (size_t)(3 * B + P) * 8);
    if (stats) stats->scratch_bytes = scratch;
    if (st == ATTN_OK && (!kl || !klmin || !klocal || !ks || !buf[0] || !buf[1] || !part[0] || !part[1] || !acc_in ||
                          !s.dqacc || !s.tdq || !s.tdk || !s.tdv))
        st = attn_set_error(ATTN_E_NOMEM, "%s: out of memory (%lld bytes of shards and accumulators)", WHO, (long long)scratch);
    st = attn_mpi_agree(comm, st);
    if (st < 0) goto done;
    st = attn__ring_key_lengths(comm, WHO, p, B, Lk, kl, klmin); /* the global key lengths */
    if (st < 0) goto done;
    s.sp = p->sdpa;
    {
        attn_tensor kc = *k, vc = *v;
        pack_kv(buf[0], &kc, &vc, 0);
    }
    const int right = (me + 1) % P, left = (me + P - 1) % P;
    int64_t qs = 0;
    for (int r = 0; r < P; r++) ks[r + 1] = ks[r] + all[r * D_N + D_LK];
    for (int r = 0; r < me; r++) qs += all[r * D_N + D_LQ];
    int local_st = ATTN_OK, mpi_st = ATTN_OK, cur = 0;
    MPI_Request prev_send = MPI_REQUEST_NULL; /* the last partial sent on */
    for (int step = 0; step < P && mpi_st == ATTN_OK; step++) {
        const int src = (me - step + P) % P, nsrc = (me - step - 1 + 2 * P) % P;
        const int64_t nk = all[src * D_N + D_LK];
        const int cnt = (int)(nk * per_key);
        MPI_Request rq[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, prev_send};
        int r1 = MPI_SUCCESS, r2 = MPI_SUCCESS, r3 = MPI_SUCCESS;
        if (step < P - 1) {
            int cnt_in = (int)(all[nsrc * D_N + D_LK] * per_key);
            r1 = MPI_Irecv(buf[1 - cur], cnt_in, MPI_FLOAT, left, 7, comm, &rq[0]);
            r2 = MPI_Isend(buf[cur], cnt, MPI_FLOAT, right, 7, comm, &rq[1]);
            if (stats) stats->bytes_sent += (int64_t)cnt * 4, stats->bytes_received += (int64_t)cnt_in * 4;
        }
        if (step > 0) {
            r3 = MPI_Irecv(acc_in, cnt, MPI_FLOAT, left, 8, comm, &rq[2]);
            if (stats) stats->bytes_received += (int64_t)cnt * 4;
        }
        if (r1 != MPI_SUCCESS || r2 != MPI_SUCCESS || r3 != MPI_SUCCESS) {
            mpi_st = attn__mpi_error(r1 != MPI_SUCCESS ? r1 : r2 != MPI_SUCCESS ? r2 : r3, "MPI_Isend / MPI_Irecv");
            break;
        }
        float *pt = part[step & 1]; /* its previous send (step - 2) completed in step - 1's wait */
        memset(pt, 0, (size_t)cnt * 4);
        double t0 = MPI_Wtime();
        if (local_st == ATTN_OK) {
            /* causal offset and this shard's key lengths, from the global positions (as ring.c) */
            const int64_t c = attn__ring_block_offset(p->layout, me, src, P, Lq, Lk, qs, ks, nk, B, kl, klocal);
            local_st = block_compute(&s, buf[cur], pt, nk, causal, c, klocal, rq, 4);
        }
        mpi_st = attn__ring_step_wait(4, rq, t0, stats);
        if (mpi_st < 0) break;
        if (step > 0)
            for (int i = 0; i < cnt; i++) pt[i] += acc_in[i];
        int r4 = MPI_Isend(pt, cnt, MPI_FLOAT, right, 8, comm, &prev_send);
        if (r4 != MPI_SUCCESS) {
            mpi_st = attn__mpi_error(r4, "MPI_Isend");
            break;
        }
        if (stats) stats->bytes_sent += (int64_t)cnt * 4;
        cur = 1 - cur;
    }
    if (mpi_st == ATTN_OK) { /* this rank's own shard, complete, from the left */
        MPI_Request rq[2] = {MPI_REQUEST_NULL, prev_send};
        int cnt = (int)(nkme * per_key);
        double t1 = MPI_Wtime();
        int r1 = MPI_Irecv(acc_in, cnt, MPI_FLOAT, left, 8, comm, &rq[0]);
        int rw = r1 == MPI_SUCCESS ? MPI_Waitall(2, rq, MPI_STATUSES_IGNORE) : r1;
        if (rw != MPI_SUCCESS) mpi_st = attn__mpi_error(rw, "MPI_Irecv / MPI_Waitall");
        if (stats) stats->bytes_received += (int64_t)cnt * 4, stats->wait_s += MPI_Wtime() - t1;
    }
    if (mpi_st < 0) { /* the ring itself broke: the communicator cannot be trusted for agreement */
        st = mpi_st;
        goto done;
    }
    if (local_st == ATTN_OK) {
        pack_kv(acc_in, dk, dv, 1);
        float *g = dq->data;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < nq; i++)
                    for (int64_t d = 0; d < D; d++)
                        g[b * dq->stride[0] + h * dq->stride[1] + i * dq->stride[2] + d * dq->stride[3]] =
                            (float)s.dqacc[((b * H + h) * nq + i) * D + d];
        int bad = 0;
        for (size_t i = 0; i < on * D && !bad; i++) bad = !isfinite((float)s.dqacc[i]);
        if (bad || any_nonfinite(acc_in, (size_t)(nkme * per_key)))
            local_st = attn_set_error(ATTN_E_RANGE, "%s: a gradient overflowed float32 (inputs too large); dq, dk and dv "
                                                    "are undefined", WHO);
    }
    st = attn_mpi_agree(comm, local_st);
    if (stats) stats->pairs = s.pairs;
done:
    ATTN_FREE_ALL(kl, klmin, klocal, ks, buf[0], buf[1], part[0], part[1], acc_in, s.dqacc, s.tdq, s.tdk, s.tdv);
    return st;
}

int attn_sdpa_ring_backward(MPI_Comm comm, attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q,
                            const attn_tensor *k, const attn_tensor *v, const attn_tensor *out, const attn_tensor *lse,
                            const attn_tensor *dout, const attn_ring_params *p) {
    ATTN_TRY(attn__mpi_ready(comm, WHO));
    attn_ring_params def = attn_ring_params_default();
    if (!p) p = &def;
    attn_ring_params pp = *p; /* lse is the argument: checked as the forward checks its lse output */
    pp.sdpa.lse = (attn_tensor *)lse; /* only read: its shape and dtype are checked */
    attn__ring_call rc;
    int st = attn__ring_begin(&rc, comm, WHO, check_bw(dq, dk, dv, q, k, v, out, lse, dout), out, q, k, v, &pp);
    if (st == ATTN_OK)
        st = ring_bw_run(rc.comm, rc.me, rc.P, rc.all, rc.Lq, rc.Lk, dq, dk, dv, q, k, v, out, lse, dout, &pp, &rc.stats);
    return attn__ring_end(&rc, st, &pp);
}
