/* attn_sdpa_ring: ring attention over an MPI communicator (Liu et al. 2023, arXiv 2310.01889),
 * striped or contiguous shards (Brandon et al. 2023, arXiv 2311.09431). See include/attn_mpi.h.
 *
 * Every rank keeps its queries and passes key/value shards to the right: at step s it holds the
 * shard of rank (me - s) mod P, posts the receive of the next one and the send of this one, runs
 * the fused kernel on (its queries) x (this shard) with lse output, and merges the partial rows
 * into a float64 accumulator by log-sum-exp. A shard pair's causal visibility is always
 * "local key jl visible to local query il iff jl <= il + c" for one integer c (contiguous and
 * striped layouts alike), which at most two attn_sdpa calls express exactly (block_visibility). */
#include "attn_mpi.h"
#include "core/internal.h"
#include "mpi/mpi_internal.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const d_names[D_N] = {"B", "H", "Hkv", "D", "Dv", "Lq_local", "Lk_local", "is_causal",
                                         "layout", "has_scale", "scale", "key_lengths given"};

/* attn_set_error(code, "who: " fmt, ...) */
static int ring_err(const char *who, int code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return attn_set_error(code, "%s: %s", who, msg);
}

attn_ring_params attn_ring_params_default(void) {
    attn_ring_params p;
    memset(&p, 0, sizeof p);
    p.sdpa = attn_sdpa_params_default();
    p.layout = ATTN_RING_STRIPED;
    return p;
}

int attn_ring_shard(attn_ring_layout layout, int64_t L, int P, int r, int64_t *len, int64_t *first, int64_t *step) {
    if (L < 0 || P < 1 || r < 0 || r >= P)
        return attn_set_error(ATTN_E_INVALID, "attn_ring_shard: need L >= 0, P >= 1, 0 <= r < P (L=%lld, P=%d, r=%d)",
                              (long long)L, P, r);
    int64_t n, f, st;
    if (layout == ATTN_RING_CONTIGUOUS) {
        int64_t base = L / P, extra = L % P;
        n = base + (r < extra);
        f = (int64_t)r * base + (r < extra ? r : extra);
        st = 1;
    } else if (layout == ATTN_RING_STRIPED) {
        n = r < L ? (L - r + P - 1) / P : 0;
        f = r;
        st = P;
    } else {
        return attn_set_error(ATTN_E_INVALID, "attn_ring_shard: unknown layout %d", (int)layout);
    }
    if (len) *len = n;
    if (first) *first = f;
    if (step) *step = st;
    return ATTN_OK;
}

/* floor(a / b) for b > 0 */
static int64_t floordiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

/* local checks, before anything is exchanged: ATTN_OK with desc filled, or an error */
int attn__ring_check_local(const char *who, const attn_tensor *out, const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                       const attn_ring_params *p, int64_t *d) {
    const attn_sdpa_params *sp = &p->sdpa;
    if (!out || !q || !k || !v) return ring_err(who, ATTN_E_INVALID, "NULL tensor");
    const attn_tensor *ts[4] = {q, k, v, out};
    static const char *const tn[4] = {"q", "k", "v", "out"};
    for (int i = 0; i < 4; i++) {
        if (ts[i]->dtype != ATTN_F32)
            return ring_err(who, ATTN_E_DTYPE, "%s has dtype %s; expected float32", tn[i],
                                  attn_dtype_name(ts[i]->dtype));
        if (ts[i]->ndim != 4)
            return ring_err(who, ATTN_E_SHAPE, "%s has %d dims; expected 4", tn[i], ts[i]->ndim);
        if (!ts[i]->data && attn_tensor_numel(ts[i]) > 0)
            return ring_err(who, ATTN_E_INVALID, "%s has no data", tn[i]);
    }
    if (sp->mask) return ring_err(who, ATTN_E_UNSUPPORTED, "a mask is not supported (use is_causal / key_lengths)");
    if (sp->window) return ring_err(who, ATTN_E_UNSUPPORTED, "a sliding window is not supported");
    if (sp->has_scale && !isfinite(sp->scale))
        return ring_err(who, ATTN_E_INVALID, "scale %g is not finite", (double)sp->scale);
    if (p->layout != ATTN_RING_CONTIGUOUS && p->layout != ATTN_RING_STRIPED)
        return ring_err(who, ATTN_E_INVALID, "unknown layout %d", (int)p->layout);
    int64_t B = q->shape[0], H = q->shape[1], Lq = q->shape[2], D = q->shape[3];
    int64_t Hkv = k->shape[1], Lk = k->shape[2], Dv = v->shape[3];
    if (k->shape[0] != B || v->shape[0] != B || k->shape[3] != D || v->shape[1] != Hkv || v->shape[2] != Lk)
        return ring_err(who, ATTN_E_SHAPE,
                              "q [%lld, %lld, %lld, %lld], k [%lld, %lld, %lld, %lld] and v [%lld, %lld, "
                              "%lld, %lld] do not fit together",
                              (long long)B, (long long)H, (long long)Lq, (long long)D, (long long)k->shape[0],
                              (long long)Hkv, (long long)Lk, (long long)k->shape[3], (long long)v->shape[0],
                              (long long)v->shape[1], (long long)v->shape[2], (long long)Dv);
    if (Hkv == 0 || H % Hkv != 0)
        return ring_err(who, ATTN_E_SHAPE, "H=%lld is not a multiple of Hkv=%lld", (long long)H,
                              (long long)Hkv);
    if (out->shape[0] != B || out->shape[1] != H || out->shape[2] != Lq || out->shape[3] != Dv)
        return ring_err(who, ATTN_E_SHAPE, "out is [%lld, %lld, %lld, %lld]; expected [%lld, %lld, %lld, %lld]",
                              (long long)out->shape[0], (long long)out->shape[1], (long long)out->shape[2],
                              (long long)out->shape[3], (long long)B, (long long)H, (long long)Lq, (long long)Dv);
    if (sp->lse) {
        const attn_tensor *l = sp->lse;
        if (l->dtype != ATTN_F32) return ring_err(who, ATTN_E_DTYPE, "lse must be float32");
        if (l->ndim != 3 || l->shape[0] != B || l->shape[1] != H || l->shape[2] != Lq)
            return ring_err(who, ATTN_E_SHAPE, "lse must be [B, H, Lq_local] = [%lld, %lld, %lld]",
                                  (long long)B, (long long)H, (long long)Lq);
    }
    uint32_t sb;
    memcpy(&sb, &sp->scale, 4);
    int64_t vals[D_N] = {B, H, Hkv, D, Dv, Lq, Lk, !!sp->is_causal, p->layout, !!sp->has_scale,
                         sp->has_scale ? (int64_t)sb : 0, sp->key_lengths != NULL};
    memcpy(d, vals, sizeof vals);
    return ATTN_OK;
}

/* After the exchange: the same decision on every rank from the same table all[P][D_N]. */
int attn__ring_check_global(const char *who, const int64_t *all, int P, attn_ring_layout layout, int64_t *Lq, int64_t *Lk) {
    for (int r = 1; r < P; r++)
        for (int i = 0; i < D_N; i++) {
            if (i == D_LQ || i == D_LK) continue;
            if (all[r * D_N + i] != all[i])
                return ring_err(who, i == D_CAUSAL || i >= D_LAYOUT ? ATTN_E_INVALID : ATTN_E_SHAPE,
                                      "ranks disagree on %s: rank 0 has %lld, rank %d has %lld", d_names[i],
                                      (long long)all[i], r, (long long)all[r * D_N + i]);
        }
    int64_t sq = 0, sk = 0;
    for (int r = 0; r < P; r++) {
        sq += all[r * D_N + D_LQ];
        sk += all[r * D_N + D_LK];
    }
    for (int r = 0; r < P; r++)
        if (all[r * D_N + D_LQ] < 1 || all[r * D_N + D_LK] < 1)
            return ring_err(who, ATTN_E_SHAPE,
                                  "rank %d holds %lld queries and %lld keys; every one of the %d ranks "
                                  "must hold at least one of each (Lq = %lld, Lk = %lld: use at most min(Lq, Lk) ranks)",
                                  r, (long long)all[r * D_N + D_LQ], (long long)all[r * D_N + D_LK], P, (long long)sq,
                                  (long long)sk);
    if (layout == ATTN_RING_STRIPED)
        for (int r = 0; r < P; r++) {
            int64_t nq, nk;
            attn_ring_shard(layout, sq, P, r, &nq, NULL, NULL);
            attn_ring_shard(layout, sk, P, r, &nk, NULL, NULL);
            if (all[r * D_N + D_LQ] != nq || all[r * D_N + D_LK] != nk)
                return ring_err(who, ATTN_E_SHAPE,
                                      "striped layout: rank %d holds %lld queries and %lld keys; positions "
                                      "r, r+P, ... of Lq = %lld, Lk = %lld are %lld and %lld (attn_ring_shard)",
                                      r, (long long)all[r * D_N + D_LQ], (long long)all[r * D_N + D_LK], (long long)sq,
                                      (long long)sk, (long long)nq, (long long)nk);
        }
    *Lq = sq;
    *Lk = sk;
    return ATTN_OK;
}

int attn__ring_key_lengths(MPI_Comm comm, const char *who, const attn_ring_params *p, int64_t B, int64_t Lk, int64_t *kl,
                           int64_t *klmin) {
    for (int64_t b = 0; b < B; b++) kl[b] = klmin[b] = p->sdpa.key_lengths ? p->sdpa.key_lengths[b] : Lk;
    if (B == 0) return ATTN_OK;
    int rc1 = MPI_Allreduce(MPI_IN_PLACE, kl, (int)B, MPI_INT64_T, MPI_MAX, comm);
    int rc2 = MPI_Allreduce(MPI_IN_PLACE, klmin, (int)B, MPI_INT64_T, MPI_MIN, comm);
    if (rc1 != MPI_SUCCESS || rc2 != MPI_SUCCESS) return attn__mpi_error(rc1 != MPI_SUCCESS ? rc1 : rc2, "MPI_Allreduce");
    for (int64_t b = 0; b < B; b++) {
        if (kl[b] != klmin[b])
            return attn_set_error(ATTN_E_INVALID, "%s: ranks disagree on key_lengths[%lld] (%lld .. %lld)", who, (long long)b,
                                  (long long)klmin[b], (long long)kl[b]);
        if (kl[b] < 0 || kl[b] > Lk)
            return attn_set_error(ATTN_E_INVALID, "%s: key_lengths[%lld] = %lld is outside 0..Lk = %lld", who, (long long)b,
                                  (long long)kl[b], (long long)Lk);
    }
    return ATTN_OK;
}

int64_t attn__ring_block_offset(attn_ring_layout layout, int me, int src, int P, int64_t Lq, int64_t Lk, int64_t qs,
                                const int64_t *ks, int64_t nk, int64_t B, const int64_t *kl, int64_t *klocal) {
    if (layout == ATTN_RING_STRIPED) {
        for (int64_t b = 0; b < B; b++) klocal[b] = kl[b] - src <= 0 ? 0 : clamp64((kl[b] - src + P - 1) / P, 0, nk);
        return floordiv(me - src + Lk - Lq, P);
    }
    for (int64_t b = 0; b < B; b++) klocal[b] = clamp64(kl[b] - ks[src], 0, nk);
    return qs - ks[src] + Lk - Lq;
}

int attn__ring_step_wait(int n, MPI_Request *req, double t0, attn_ring_stats *stats) {
    double t1 = MPI_Wtime();
    int rw = n ? MPI_Waitall(n, req, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
    if (stats) {
        stats->compute_s += t1 - t0;
        stats->wait_s += MPI_Wtime() - t1;
        stats->steps++;
    }
    return rw != MPI_SUCCESS ? attn__mpi_error(rw, "MPI_Waitall") : ATTN_OK;
}

int attn__ring_shard_size(const char *who, const int64_t *all, int P, int64_t *maxk, int64_t *per_key) {
    *maxk = 0;
    for (int r = 0; r < P; r++)
        if (all[r * D_N + D_LK] > *maxk) *maxk = all[r * D_N + D_LK];
    *per_key = all[D_B] * all[D_HKV] * (all[D_D] + all[D_DV]);
    if (*per_key > 0 && *maxk > INT_MAX / *per_key)
        return attn_set_error(ATTN_E_UNSUPPORTED, "%s: a key/value shard of %lld x %lld floats exceeds one MPI message "
                                                  "(INT_MAX elements); use more ranks",
                              who, (long long)*maxk, (long long)*per_key);
    return ATTN_OK;
}

int attn__ring_begin(attn__ring_call *rc, MPI_Comm comm, const char *who, int st, const attn_tensor *out,
                     const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, const attn_ring_params *p) {
    memset(rc, 0, sizeof *rc);
    rc->comm = MPI_COMM_NULL;
    rc->t_start = MPI_Wtime();
    int mrc = MPI_Comm_dup(comm, &rc->comm);
    if (mrc != MPI_SUCCESS) {
        rc->comm = MPI_COMM_NULL;
        return attn__mpi_error(mrc, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(rc->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(rc->comm, &rc->me);
    MPI_Comm_size(rc->comm, &rc->P);
    int64_t desc[D_N] = {0};
    if (st == ATTN_OK) st = attn__ring_check_local(who, out, q, k, v, p, desc);
    rc->all = calloc((size_t)rc->P * D_N, sizeof *rc->all);
    if (st == ATTN_OK && !rc->all) st = attn_set_error(ATTN_E_NOMEM, "%s: out of memory", who);
    st = attn_mpi_agree(rc->comm, st);
    if (st == ATTN_OK) {
        mrc = MPI_Allgather(desc, D_N, MPI_INT64_T, rc->all, D_N, MPI_INT64_T, rc->comm);
        if (mrc != MPI_SUCCESS) st = attn__mpi_error(mrc, "MPI_Allgather");
    }
    if (st == ATTN_OK) st = attn__ring_check_global(who, rc->all, rc->P, p->layout, &rc->Lq, &rc->Lk); /* the same verdict on every rank */
    return st;
}

int attn__ring_end(attn__ring_call *rc, int st, const attn_ring_params *p) {
    free(rc->all);
    rc->all = NULL;
    if (rc->comm != MPI_COMM_NULL) MPI_Comm_free(&rc->comm);
    if (st == ATTN_OK && p->stats) {
        rc->stats.total_s = MPI_Wtime() - rc->t_start;
        *p->stats = rc->stats;
    }
    return st;
}

typedef struct {
    int64_t B, H, Hkv, D, Dv, nq;
    const attn_tensor *q;
    float *bo, *blse;   /* partial block result [B, H, nq, Dv] and its lse [B, H, nq] */
    double *acc, *m, *s; /* accumulator [B, H, nq, Dv] (scaled by exp(-m)), running max and sum [B, H, nq] */
    attn_sdpa_params sp; /* per call: is_causal, key_lengths, lse set here */
    int64_t pairs;
} ring_state;

/* merge rows [r0, r0 + n) of batch row b of the block result into the accumulator */
static void merge_rows(ring_state *st, int64_t b, int64_t r0, int64_t n) {
    const int64_t nq = st->nq, Dv = st->Dv;
    for (int64_t h = 0; h < st->H; h++)
        for (int64_t i = r0; i < r0 + n; i++) {
            int64_t row = (b * st->H + h) * nq + i;
            double l = st->blse[row];
            if (l == -INFINITY) continue; /* no visible key in this block */
            double *acc = st->acc + row * Dv;
            const float *o = st->bo + row * Dv;
            if (l > st->m[row]) {
                double sc = exp(st->m[row] - l); /* 0 for the first block */
                for (int64_t e = 0; e < Dv; e++) acc[e] *= sc;
                st->s[row] *= sc;
                st->m[row] = l;
            }
            double w = exp(l - st->m[row]);
            for (int64_t e = 0; e < Dv; e++) acc[e] += w * o[e];
            st->s[row] += w;
        }
}

/* one attn_sdpa call: rows [r0, r0 + n) of batch row b against the first nkv keys of the block
 * (kb, vb: [B, Hkv, nk, *] contiguous), key length kl, causal or not; merged at once */
static int block_call(ring_state *st, const float *kvbuf, int64_t nk, int64_t b, int64_t r0, int64_t n, int64_t nkv,
                      int64_t kl, int causal) {
    const int64_t B = st->B, H = st->H, Hkv = st->Hkv, D = st->D, Dv = st->Dv, nq = st->nq;
    attn_tensor qv = attn__ring_rows_view(st->q, b, r0, n);
    attn_tensor kv = attn_tensor_f32_4d((float *)kvbuf, B, Hkv, nk, D), vv;
    vv = attn_tensor_f32_4d((float *)kvbuf + B * Hkv * nk * D, B, Hkv, nk, Dv);
    kv = attn__ring_rows_view(&kv, b, 0, nkv);
    vv = attn__ring_rows_view(&vv, b, 0, nkv);
    attn_tensor ov = attn_tensor_f32_4d(st->bo, B, H, nq, Dv);
    ov = attn__ring_rows_view(&ov, b, r0, n);
    attn_tensor lv = attn_tensor_f32_3d(st->blse + b * H * nq + r0, 1, H, n);
    lv.stride[0] = H * nq;
    lv.stride[1] = nq;
    attn_sdpa_params sp = st->sp;
    sp.is_causal = causal;
    sp.key_lengths = &kl;
    sp.lse = &lv;
    int rc = attn_sdpa(&ov, NULL, &qv, &kv, &vv, &sp);
    if (rc < 0) return rc;
    merge_rows(st, b, r0, n);
    /* the pairs scored: row i (local, in [r0, r0 + n)) sees min(kl, visible prefix) keys */
    for (int64_t i = 0; i < n; i++) {
        int64_t vis = causal ? (i + nkv - n + 1) : nkv;
        st->pairs += H * (vis < kl ? vis : kl);
    }
    return ATTN_OK;
}

/* Compute this rank's queries against one key/value shard and merge. Visibility of local key
 * jl to local query il: jl <= il + c when causal; jl < kl[b] always. Rows [0, a0) see nothing,
 * rows [a0, b0) are causal against the key prefix [0, b0 + c) (attn_sdpa's bottom-right offset
 * is then exactly c), rows [b0, nq) see every key. poll() lets MPI progress between calls. */
static int block_compute(ring_state *st, const float *kvbuf, int64_t nk, int causal, int64_t c, const int64_t *kl,
                         void (*poll)(void *), void *pu) {
    const int64_t nq = st->nq;
    for (int64_t b = 0; b < st->B; b++) {
        int64_t klb = kl[b];
        if (klb == 0) continue;
        if (!causal) {
            ATTN_TRY(block_call(st, kvbuf, nk, b, 0, nq, nk, klb, 0));
        } else {
            int64_t a0 = clamp64(-c, 0, nq), b0 = clamp64(nk - 1 - c, a0, nq);
            if (b0 > a0) ATTN_TRY(block_call(st, kvbuf, nk, b, a0, b0 - a0, b0 + c, clamp64(klb, 0, b0 + c), 1));
            if (nq > b0) ATTN_TRY(block_call(st, kvbuf, nk, b, b0, nq - b0, nk, klb, 0));
        }
        if (poll) poll(pu);
    }
    return ATTN_OK;
}

typedef struct {
    MPI_Request req[2];
    int n;
} ring_reqs;

static void poll_reqs(void *u) {
    ring_reqs *r = u;
    int flag;
    if (r->n) MPI_Testall(r->n, r->req, &flag, MPI_STATUSES_IGNORE);
}

/* pack k and v (any strides) into buf as [B, Hkv, nk, D] then [B, Hkv, nk, Dv] */
static void pack_kv(float *buf, const attn_tensor *k, const attn_tensor *v) {
    const attn_tensor *ts[2] = {k, v};
    for (int t = 0; t < 2; t++) {
        const attn_tensor *x = ts[t];
        const float *src = x->data;
        for (int64_t b = 0; b < x->shape[0]; b++)
            for (int64_t h = 0; h < x->shape[1]; h++)
                for (int64_t j = 0; j < x->shape[2]; j++)
                    for (int64_t e = 0; e < x->shape[3]; e++)
                        *buf++ = src[b * x->stride[0] + h * x->stride[1] + j * x->stride[2] + e * x->stride[3]];
    }
}

static int ring_run(MPI_Comm comm, int me, int P, const int64_t *all, int64_t Lq, int64_t Lk, attn_tensor *out,
                    const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, const attn_ring_params *p,
                    attn_ring_stats *stats) {
    const int64_t B = all[D_B], H = all[D_H], Hkv = all[D_HKV], D = all[D_D], Dv = all[D_DV];
    const int64_t nq = all[me * D_N + D_LQ];
    const int causal = p->sdpa.is_causal != 0;
    int64_t maxk, per_key;
    int st = attn__ring_shard_size("attn_sdpa_ring", all, P, &maxk, &per_key);
    /* the global key lengths, identical on every rank and within 0..Lk */
    int64_t *kl = calloc((size_t)B + 1, sizeof *kl), *klmin = calloc((size_t)B + 1, sizeof *klmin);
    int64_t *klocal = calloc((size_t)B + 1, sizeof *klocal), *ks = calloc((size_t)P + 1, sizeof *ks);
    size_t kvn = (size_t)(maxk * per_key), on = (size_t)(B * H * nq);
    float *buf[2] = {malloc(kvn * 4 + 4), malloc(kvn * 4 + 4)};
    ring_state s;
    memset(&s, 0, sizeof s);
    s.B = B, s.H = H, s.Hkv = Hkv, s.D = D, s.Dv = Dv, s.nq = nq, s.q = q;
    s.bo = malloc(on * Dv * 4 + 4);
    s.blse = malloc(on * 4 + 4);
    s.acc = calloc(on * Dv + 1, sizeof(double));
    s.m = malloc(on * sizeof(double) + 8);
    s.s = calloc(on + 1, sizeof(double));
    if (stats) stats->scratch_bytes = (int64_t)(2 * kvn * 4 + on * Dv * 4 + on * 4 + on * Dv * 8 + 2 * on * 8 +
                                                2 * (size_t)B * 8);
    if (st == ATTN_OK && (!kl || !klmin || !klocal || !ks || !buf[0] || !buf[1] || !s.bo || !s.blse || !s.acc || !s.m || !s.s))
        st = attn_set_error(ATTN_E_NOMEM, "attn_sdpa_ring: out of memory (%lld bytes of shards and accumulators)",
                            (long long)(2 * kvn * 4 + on * (Dv * 12 + 20)));
    st = attn_mpi_agree(comm, st);
    if (st < 0) goto done;
    st = attn__ring_key_lengths(comm, "attn_sdpa_ring", p, B, Lk, kl, klmin);
    if (st < 0) goto done;
    for (size_t i = 0; i < on; i++) s.m[i] = -INFINITY;
    s.sp = p->sdpa;
    pack_kv(buf[0], k, v);
    const int right = (me + 1) % P, left = (me + P - 1) % P;
    int64_t qs = 0;
    ks[0] = 0;
    for (int r = 0; r < P; r++) ks[r + 1] = ks[r] + all[r * D_N + D_LK];
    for (int r = 0; r < me; r++) qs += all[r * D_N + D_LQ];
    int local_st = ATTN_OK;
    int cur = 0, mpi_st = ATTN_OK;
    for (int step = 0; step < P; step++) {
        const int src = (me - step + P) % P, nsrc = (me - step - 1 + 2 * P) % P;
        const int64_t nk = all[src * D_N + D_LK];
        ring_reqs rq = {{MPI_REQUEST_NULL, MPI_REQUEST_NULL}, 0};
        if (step < P - 1) {
            int cnt_in = (int)(all[nsrc * D_N + D_LK] * per_key), cnt_out = (int)(nk * per_key);
            int r1 = MPI_Irecv(buf[1 - cur], cnt_in, MPI_FLOAT, left, 7, comm, &rq.req[0]);
            int r2 = MPI_Isend(buf[cur], cnt_out, MPI_FLOAT, right, 7, comm, &rq.req[1]);
            if (r1 != MPI_SUCCESS || r2 != MPI_SUCCESS) {
                mpi_st = attn__mpi_error(r1 != MPI_SUCCESS ? r1 : r2, "MPI_Isend / MPI_Irecv");
                break;
            }
            rq.n = 2;
            if (stats) {
                stats->bytes_sent += (int64_t)cnt_out * 4;
                stats->bytes_received += (int64_t)cnt_in * 4;
            }
        }
        double t0 = MPI_Wtime();
        if (local_st == ATTN_OK) {
            /* causal offset c and this shard's key lengths, from the global positions */
            const int64_t c = attn__ring_block_offset(p->layout, me, src, P, Lq, Lk, qs, ks, nk, B, kl, klocal);
            local_st = block_compute(&s, buf[cur], nk, causal, c, klocal, poll_reqs, &rq);
        }
        mpi_st = attn__ring_step_wait(rq.n, rq.req, t0, stats);
        if (mpi_st < 0) break;
        cur = 1 - cur;
    }
    if (mpi_st < 0) { /* the ring itself broke: the communicator cannot be trusted for agreement */
        st = mpi_st;
        goto done;
    }
    if (local_st == ATTN_OK) {
        /* out = acc / s, lse = m + log s (rows without a visible key: 0 and -inf) */
        float *o = out->data, *lse = p->sdpa.lse ? p->sdpa.lse->data : NULL;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < nq; i++) {
                    int64_t row = (b * H + h) * nq + i;
                    double sum = s.s[row], inv = sum > 0 ? 1.0 / sum : 0.0;
                    for (int64_t e = 0; e < Dv; e++)
                        o[b * out->stride[0] + h * out->stride[1] + i * out->stride[2] + e * out->stride[3]] =
                            (float)(s.acc[row * Dv + e] * inv);
                    if (lse) {
                        const attn_tensor *lt = p->sdpa.lse;
                        lse[b * lt->stride[0] + h * lt->stride[1] + i * lt->stride[2]] =
                            sum > 0 ? (float)(s.m[row] + log(sum)) : -INFINITY;
                    }
                }
    }
    st = attn_mpi_agree(comm, local_st);
    if (stats) stats->pairs = s.pairs;
done:
    ATTN_FREE_ALL(kl, klmin, klocal, ks, buf[0], buf[1], s.bo, s.blse, s.acc, s.m, s.s);
    return st;
}

int attn_sdpa_ring(MPI_Comm comm, attn_tensor *out, const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                   const attn_ring_params *p) {
    ATTN_TRY(attn__mpi_ready(comm, "attn_sdpa_ring"));
    attn_ring_params def = attn_ring_params_default();
    if (!p) p = &def;
    attn__ring_call rc;
    int st = attn__ring_begin(&rc, comm, "attn_sdpa_ring", ATTN_OK, out, q, k, v, p);
    if (st == ATTN_OK) st = ring_run(rc.comm, rc.me, rc.P, rc.all, rc.Lq, rc.Lk, out, q, k, v, p, &rc.stats);
    return attn__ring_end(&rc, st, p);
}
