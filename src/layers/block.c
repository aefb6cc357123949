/* The encoder and decoder layers every model family runs on (see attn_layers.h). */
#include "attn_layers.h"
#include "core/internal.h"
#include "core/pool.h"
#include "core/simd_math.h"
#include "ct2compat/ct2compat.h"
#include "ops/weight_internal.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- geometry and checks */

typedef struct {
    int64_t E, H, Hkv, D, F, qd, kvd; /* qd = H·D, kvd = Hkv·D */
} attn__geo;

static attn__geo attn__geometry(const attn_block_config *c) {
    attn__geo g;
    g.E = c->d_model;
    g.H = c->n_heads;
    g.Hkv = c->n_kv_heads > 0 ? c->n_kv_heads : c->n_heads;
    g.D = c->head_dim > 0 ? c->head_dim : (c->n_heads > 0 ? c->d_model / c->n_heads : 0);
    g.F = c->d_ff;
    g.qd = g.H * g.D;
    g.kvd = g.Hkv * g.D;
    return g;
}

static int attn__check_w(const attn_weight *w, int64_t rows, int64_t cols, const char *name, int required) {
    if (!w->data) return required ? attn_set_error(ATTN_E_INVALID, "layer: weight %s is missing", name) : ATTN_OK;
    if (w->rows != rows || w->cols != cols)
        return attn_set_error(ATTN_E_SHAPE, "layer: %s must be [%lld, %lld], got [%lld, %lld]", name, (long long)rows, (long long)cols,
                              (long long)w->rows, (long long)w->cols);
    return ATTN_OK;
}

int attn_block_check(const attn_block_config *c, const attn_block_weights *w) {
    if (!c || !w) return attn_set_error(ATTN_E_INVALID, "layer: config and weights must not be NULL");
    const attn__geo g = attn__geometry(c);
    if (g.E <= 0 || g.H <= 0 || g.Hkv <= 0 || g.D <= 0 || g.F <= 0)
        return attn_set_error(ATTN_E_INVALID, "layer: d_model (%lld), n_heads (%lld), n_kv_heads (%lld), head_dim (%lld), d_ff (%lld) must be > 0",
                              (long long)g.E, (long long)g.H, (long long)g.Hkv, (long long)g.D, (long long)g.F);
    if (g.H % g.Hkv != 0)
        return attn_set_error(ATTN_E_SHAPE, "layer: n_heads (%lld) is not a multiple of n_kv_heads (%lld)", (long long)g.H, (long long)g.Hkv);
    if (c->norm < ATTN_NORM_LAYER || c->norm > ATTN_NORM_LAYER_CT2) return attn_set_error(ATTN_E_INVALID, "layer: unknown norm %d", (int)c->norm);
    if (!(c->eps > 0) || !isfinite(c->eps)) return attn_set_error(ATTN_E_INVALID, "layer: norm epsilon must be > 0");
    if (c->rope_inv_freq) {
        const int64_t R = c->rope_dim > 0 ? c->rope_dim : g.D;
        if (R > g.D || (R & 1)) return attn_set_error(ATTN_E_INVALID, "layer: rope_dim %lld must be even and <= head_dim %lld", (long long)R, (long long)g.D);
    }
    if (w->qkv.data) {
        ATTN_TRY(attn__check_w(&w->qkv, g.qd + 2 * g.kvd, g.E, "qkv", 1));
    } else {
        ATTN_TRY(attn__check_w(&w->q, g.qd, g.E, "q", 1));
        ATTN_TRY(attn__check_w(&w->k, g.kvd, g.E, "k", 1));
        ATTN_TRY(attn__check_w(&w->v, g.kvd, g.E, "v", 1));
    }
    ATTN_TRY(attn__check_w(&w->o, g.E, g.qd, "o", 1));
    if (c->d_cross > 0) {
        ATTN_TRY(attn__check_w(&w->cross_q, g.qd, g.E, "cross_q", 1));
        ATTN_TRY(attn__check_w(&w->cross_kv, 2 * g.kvd, c->d_cross, "cross_kv", 0)); /* or projected by the caller */
        ATTN_TRY(attn__check_w(&w->cross_o, g.E, g.qd, "cross_o", 1));
        if (!w->norm2.g && c->norm != ATTN_NORM_LAYER) return attn_set_error(ATTN_E_INVALID, "layer: the cross-attention norm is missing");
    }
    ATTN_TRY(attn__check_w(&w->ff_up, g.F, g.E, "ff_up", 1));
    ATTN_TRY(attn__check_w(&w->ff_gate, g.F, g.E, "ff_gate", c->gated));
    ATTN_TRY(attn__check_w(&w->ff_down, g.E, g.F, "ff_down", 1));
    /* LayerNorm may go without affine parameters (elementwise_affine=False); the others need a scale */
    if ((!w->norm1.g || !w->norm3.g) && c->norm != ATTN_NORM_LAYER) return attn_set_error(ATTN_E_INVALID, "layer: norm weights are missing");
    return ATTN_OK;
}

/* ---------------------------------------------------------------- row-wise steps on the pool */

/* The steps between a layer's products — RMSNorm, SiLU(gate)·up, residual adds, RoPE — on the
 * rows of a prompt chunk are a third of a 2-thread prefill's time when the caller does them
 * alone; they run on attn's threads instead once a step has ATTN__POOL_MIN_COST elements. A
 * row (or, for the element-wise steps, a range of elements) is computed whole by one thread
 * with the same arithmetic as on one thread, so the result does not depend on the split. */
typedef enum { ATTN__ROW_RMS, ATTN__ROW_SILU_MUL, ATTN__ROW_ADD, ATTN__ROW_ROPE } attn__row_op;

typedef struct {
    attn__row_op op;
    float *y;          /* RMS: output rows; SILU_MUL: gate, overwritten; ADD: y += a; ROPE: query rows */
    const float *a;    /* RMS: input rows; SILU_MUL: up; ADD: the addend; ROPE: NULL */
    float *k;          /* ROPE: key rows */
    int64_t width;     /* RMS: d_model; SILU_MUL, ADD: 1 (units are elements); ROPE: head_dim */
    const attn_block_config *c;
    const float *g;    /* RMS: the scale */
    int64_t qr, kr, nq, nk; /* ROPE: row strides and head counts of queries and keys */
    const int64_t *pos;     /* ROPE: positions of the rows */
} attn__rowwise;

static void attn__rope_rows(const attn__rowwise *j, int64_t lo, int64_t hi) {
    const attn_block_config *c = j->c;
    const int64_t D = j->width, R = c->rope_dim > 0 ? c->rope_dim : D, half = R / 2;
    for (int64_t t = lo; t < hi; t++) {
        const double p = (double)j->pos[t];
        for (int64_t i = 0; i < half; i++) {
            const double a = p * c->rope_inv_freq[i];
            const float cs = (float)cos(a), sn = (float)sin(a);
            const int64_t i0 = c->rope_layout == ATTN_ROPE_HALF ? i : 2 * i, i1 = c->rope_layout == ATTN_ROPE_HALF ? i + half : 2 * i + 1;
            for (int64_t h = 0; h < j->nq + j->nk; h++) { /* the query heads, then the key heads */
                float *q = h < j->nq ? j->y + t * j->qr + h * D : j->k + t * j->kr + (h - j->nq) * D;
                const float x0 = q[i0], x1 = q[i1];
                q[i0] = x0 * cs - x1 * sn;
                q[i1] = x0 * sn + x1 * cs;
            }
        }
    }
}

static void attn__rowwise_fn(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__rowwise *j = (const attn__rowwise *)p;
    (void)tid;
    switch (j->op) {
    case ATTN__ROW_RMS:
        for (int64_t t = lo; t < hi; t++) {
            const int64_t E = j->width;
            const float *xr = j->a + t * E;
            float *o = j->y + t * E;
            /* the sum of squares in float64, in 8 interleaved partial sums (one dependent add
             * chain was ~4 cycles an element: 1% of a decode token), added in a fixed order */
            double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, ss = 0;
            int64_t i = 0;
            for (; i + 8 <= E; i += 8)
                for (int k = 0; k < 8; k++) acc[k] += (double)xr[i + k] * xr[i + k];
            for (; i < E; i++) acc[i & 7] += (double)xr[i] * xr[i];
            for (int k = 0; k < 8; k++) ss += acc[k];
            const float r = (float)(1.0 / sqrt(ss / (double)E + (double)j->c->eps));
            for (int64_t i = 0; i < E; i++) o[i] = j->g[i] * (xr[i] * r);
        }
        break;
    case ATTN__ROW_SILU_MUL: {
        /* SiLU(a)·b = a / (1 + exp(-a)) · b with the library's vector exp (core/simd_math.h,
         * max relative error 1.5e-7; libm's expf one element at a time was 4% of a decode token) */
        const attn__exp_n_fn ex = attn__exp_n_best();
        float e[256];
        for (int64_t i0 = lo; i0 < hi; i0 += 256) {
            const int64_t n = hi - i0 < 256 ? hi - i0 : 256;
            float *a = j->y + i0;
            const float *b = j->a + i0;
#pragma omp simd
            for (int64_t i = 0; i < n; i++) e[i] = -a[i];
            ex(e, e, n);
#pragma omp simd
            for (int64_t i = 0; i < n; i++) a[i] = a[i] / (1.0f + e[i]) * b[i];
        }
        break;
    }
    case ATTN__ROW_ADD:
        for (int64_t i = lo; i < hi; i++) j->y[i] += j->a[i];
        break;
    case ATTN__ROW_ROPE: attn__rope_rows(j, lo, hi); break;
    }
}

/* n units (rows, or elements), `work` elements in all */
static void attn__rowwise_run(const attn__rowwise *j, int64_t n, double work, int n_threads) {
    attn__pool_rows(n, 0, work, n_threads, attn__rowwise_fn, (void *)j);
}

/* ---------------------------------------------------------------- pieces */

int attn_block_norm(float *y, const float *x, int64_t M, const attn_block_config *c, const attn_norm_weights *nw) {
    const int64_t E = c->d_model;
    if (c->norm == ATTN_NORM_LAYER_CT2) {
        attn__ct2_layernorm(y, x, M, nw->g, nw->b, E, c->eps);
        return ATTN_OK;
    }
    if (c->norm == ATTN_NORM_RMS) {
        attn__rowwise j = {.op = ATTN__ROW_RMS, .y = y, .a = x, .width = E, .c = c, .g = nw->g};
        attn__rowwise_run(&j, M, (double)M * (double)E, c->n_threads);
        return ATTN_OK;
    }
    attn_tensor ty = attn_tensor_f32_2d(y, M, E), tx = attn_tensor_f32_2d((float *)x, M, E);
    attn_tensor tg = attn_tensor_f32_1d((float *)nw->g, E), tb = attn_tensor_f32_1d((float *)nw->b, E);
    return attn_layernorm(&ty, &tx, nw->g ? &tg : NULL, nw->b ? &tb : NULL, c->eps);
}

static void attn__add(float *y, const float *a, int64_t n, const attn_block_config *c) {
    attn__rowwise j = {.op = ATTN__ROW_ADD, .y = y, .a = a, .width = 1, .c = c};
    attn__rowwise_run(&j, n, (double)n, c->n_threads);
}

/* RoPE on the query and key rows of a step (positions pos), one pass: each row's angles once */
static void attn__rope(float *q, int64_t qr, int64_t nq, float *k, int64_t kr, int64_t nk, int64_t n, const attn_block_config *c, int64_t D,
                       const int64_t *pos) {
    attn__rowwise j = {.op = ATTN__ROW_ROPE, .y = q, .k = k, .width = D, .c = c, .qr = qr, .kr = kr, .nq = nq, .nk = nk, .pos = pos};
    attn__rowwise_run(&j, n, (double)n * (double)((nq + nk) * D), c->n_threads);
}

/* threads for an attention step: one under ~2e6 multiply-adds (a decode step), where a fork and
 * a barrier cost more than the work */
static int attn__attn_threads(const attn_block_config *c, int64_t rows, int64_t Lk, int64_t qd) {
    const int nt = c->n_threads > 0 ? c->n_threads : attn_get_num_threads();
    return (double)rows * (double)Lk * (double)qd < 2e6 ? 1 : nt;
}

/* threads for the attention of a decode step: `items` sequences of `rows` <= 4 query rows each
 * (the fused kernel's row path) over Lk keys. Below attn__attn_threads' threshold it still pays
 * to spread the items x heads over the threads from ~5e4 multiply-adds a head-row pair up
 * (SmolLM2-135M past ~90 positions: its single-threaded attention was ~13% of a 2-thread
 * decode token), but only while there are at least two (item, head, row) units a thread: then
 * the fused kernel never splits a row's keys, each unit is computed whole by one thread, and
 * the result is bit-identical to one thread's (test_llama_batch checks 1 vs 2 threads). */
static int attn__decode_attn_threads(const attn_block_config *c, const attn__geo *g, int64_t items, int64_t rows, int64_t Lk) {
    const int nt = attn__attn_threads(c, items * rows, Lk, g->qd);
    if (nt > 1 || rows > 4) return nt;
    const int want = c->n_threads > 0 ? c->n_threads : attn_get_num_threads();
    const int64_t units = items * rows * g->H;
    return (double)items * (double)rows * (double)Lk * (double)g->qd >= 5e4 && units >= 2 * (int64_t)want ? want : 1;
}

/* out rows [B·Lq, H·D] (stride os) = SDPA of q [B, H, Lq, D] (row stride qr, item stride qb)
 * over k / v [B, Hkv, Lk, D] (row stride kr, item stride kb) */
static int attn__sdpa_rows(float *out, int64_t os, float *w, const float *q, int64_t qb, int64_t qr, const float *k, const float *v,
                           int64_t kb, int64_t kh, int64_t kr, int64_t B, int64_t Lq, int64_t Lk, const attn__geo *g, attn_sdpa_params p) {
    attn_tensor tq = {(void *)q, ATTN_F32, 4, {B, g->H, Lq, g->D}, {qb, g->D, qr, 1}};
    attn_tensor tk = {(void *)k, ATTN_F32, 4, {B, g->Hkv, Lk, g->D}, {kb, kh, kr, 1}};
    attn_tensor tv = {(void *)v, ATTN_F32, 4, {B, g->Hkv, Lk, g->D}, {kb, kh, kr, 1}};
    attn_tensor to = {out, ATTN_F32, 4, {B, g->H, Lq, g->D}, {Lq * os, g->D, os, 1}};
    attn_tensor tw = {w, ATTN_F32, 4, {B, g->H, Lq, Lk}, {g->H * Lq * Lk, Lq * Lk, Lk, 1}};
    return attn_sdpa(&to, w ? &tw : NULL, &tq, &tk, &tv, &p);
}

static float attn__scale(const attn_block_config *c, const attn__geo *g) {
    return c->query_scale > 0 ? c->query_scale : (float)(1.0 / sqrt((double)g->D));
}

/* x += w(in): float32 weights on OpenBLAS accumulate into x (no temporary, no add pass: ~7% of a
 * ViT forward on one thread with the bias pass and zero-fill they also save); the others through
 * tmp [M, E] */
static int attn__residual_matmul(float *x, float *tmp, const float *in, int64_t M, const attn_weight *w, const attn_block_config *c) {
    if (attn__weight_on_blas(w)) return attn__weight_matmul_acc(x, in, M, w);
    ATTN_TRY(attn_weight_matmul(tmp, in, M, w, ATTN_ACT_IDENTITY, c->n_threads));
    attn__add(x, tmp, M * c->d_model, c);
    return ATTN_OK;
}

/* x += o(att), then the post-norm */
static int attn__close_sublayer(float *x, const float *att, float *tmp, int64_t M, const attn_weight *o, const attn_block_config *c,
                                const attn_norm_weights *nw) {
    ATTN_TRY(attn__residual_matmul(x, tmp, att, M, o, c));
    return c->norm_first ? ATTN_OK : attn_block_norm(x, x, M, c, nw);
}

/* the input of a sub-layer: x itself, or with norm_first nw's normalisation of x, written to h */
static int attn__open_sublayer(const float **in, float *h, const float *x, int64_t M, const attn_block_config *c,
                               const attn_norm_weights *nw) {
    *in = x;
    if (!c->norm_first) return ATTN_OK;
    *in = h;
    return attn_block_norm(h, x, M, c, nw);
}

/* the FFN sub-layer on x [M, E] in place; h, t: [M, E]; f1, f2: [M, F] */
static int attn__ffn(float *x, float *h, float *t, float *f1, float *f2, int64_t M, const attn_block_config *c, const attn_block_weights *w) {
    const int64_t F = c->d_ff;
    const float *in;
    ATTN_TRY(attn__open_sublayer(&in, h, x, M, c, &w->norm3));
    if (c->gated) {
        float *const outs[2] = {f1, f2};
        const attn_weight *ws[2] = {&w->ff_gate, &w->ff_up};
        ATTN_TRY(attn_weight_matmul_n(outs, in, ws, 2, M, c->n_threads));
        if (c->act == ATTN_ACT_SILU) {
            /* a vector exp, a division and a product: ~1.3-1.7 ns an element measured on Zen 4 (8 x 1536,
             * a batched decode step's rows: ~15 us, serial on the caller below the threshold with the
             * 4 multiply-adds an element counted before), counted as 16 multiply-adds */
            attn__rowwise j = {.op = ATTN__ROW_SILU_MUL, .y = f1, .a = f2, .width = 1, .c = c};
            attn__rowwise_run(&j, M * F, 16.0 * (double)(M * F), c->n_threads);
        } else {
            attn_tensor tg = attn_tensor_f32_2d(f1, M, F);
            ATTN_TRY(attn_activate(&tg, &tg, c->act));
            for (int64_t i = 0; i < M * F; i++) f1[i] *= f2[i];
        }
    } else {
        ATTN_TRY(attn_weight_matmul(f1, in, M, &w->ff_up, c->act, c->n_threads));
    }
    ATTN_TRY(attn__residual_matmul(x, t, f1, M, &w->ff_down, c));
    return c->norm_first ? ATTN_OK : attn_block_norm(x, x, M, c, &w->norm3);
}

/* queries, keys and values of M rows: fused (one product, views with row stride rs) or three
 * products into q / k / v of their own widths */
typedef struct {
    float *q, *k, *v;
    int64_t qr, kr; /* row strides of q and of k / v */
} attn__qkv;

static int attn__project_qkv(attn__qkv *out, float *buf, const float *in, int64_t M, const attn_block_config *c, const attn_block_weights *w,
                             const attn__geo *g) {
    if (w->qkv.data) {
        const int64_t rs = g->qd + 2 * g->kvd;
        ATTN_TRY(attn_weight_matmul(buf, in, M, &w->qkv, ATTN_ACT_IDENTITY, c->n_threads));
        *out = (attn__qkv){buf, buf + g->qd, buf + g->qd + g->kvd, rs, rs};
        return ATTN_OK;
    }
    float *q = buf, *k = buf + M * g->qd, *v = k + M * g->kvd;
    float *const outs[3] = {q, k, v};
    const attn_weight *ws[3] = {&w->q, &w->k, &w->v};
    ATTN_TRY(attn_weight_matmul_n(outs, in, ws, 3, M, c->n_threads));
    *out = (attn__qkv){q, k, v, g->qd, g->kvd};
    return ATTN_OK;
}

/* ---------------------------------------------------------------- encoder */

int attn_encoder_block(float *x, float *attn_weights, const attn_block_config *c, const attn_block_weights *w, int64_t B, int64_t L,
                       const attn_sdpa_params *p, attn_arena *arena) {
    if (!x || !arena) return attn_set_error(ATTN_E_INVALID, "encoder layer: x and arena are required");
    if (B < 0 || L < 0) return attn_set_error(ATTN_E_INVALID, "encoder layer: negative size");
    ATTN_TRY(attn_block_check(c, w));
    const attn__geo g = attn__geometry(c);
    const int64_t M = B * L, E = g.E, wide = g.F > g.qd + 2 * g.kvd ? g.F : g.qd + 2 * g.kvd;
    if (M == 0) return ATTN_OK;
    attn_sdpa_params sp = p ? *p : attn_sdpa_params_default();
    if (sp.n_threads <= 0) sp.n_threads = attn__attn_threads(c, M, L, g.qd);
    attn_arena_mark mk = attn_arena_get_mark(arena);
    float *h = attn_arena_alloc_f32_uninit(arena, (size_t)(M * E));
    float *t = attn_arena_alloc_f32_uninit(arena, (size_t)(M * E));
    float *att = attn_arena_alloc_f32_uninit(arena, (size_t)(M * g.qd));
    float *f1 = attn_arena_alloc_f32_uninit(arena, (size_t)(M * wide));
    float *f2 = c->gated ? attn_arena_alloc_f32_uninit(arena, (size_t)(M * g.F)) : f1;
    float *scr = c->ct2_attention ? attn_arena_alloc_f32_uninit(arena, (size_t)(L + 1)) : f1;
    int rc = (!h || !t || !att || !f1 || !f2 || !scr) ? attn_set_error(ATTN_E_NOMEM, "encoder layer: out of memory") : ATTN_OK;
    /* self-attention */
    const float *in = x;
    if (rc == 0) rc = attn__open_sublayer(&in, h, x, M, c, &w->norm1);
    attn__qkv qkv;
    if (rc == 0) rc = attn__project_qkv(&qkv, f1, in, M, c, w, &g);
    if (rc == 0 && c->ct2_attention) {
        /* CTranslate2's score GEMM is [L, L] per item and head; padded query rows give zeros */
        for (int64_t b = 0; b < B; b++) {
            const int64_t n = sp.key_lengths ? sp.key_lengths[b] : L;
            attn__ct2_mha_exact(att + b * L * g.qd, g.qd, NULL, qkv.q + b * L * qkv.qr, qkv.qr, qkv.k + b * L * qkv.kr, qkv.v + b * L * qkv.kr,
                                qkv.kr, g.D, g.H, g.D, n, n, L, L, 0, attn__scale(c, &g), scr);
            memset(att + (b * L + n) * g.qd, 0, sizeof(float) * (size_t)((L - n) * g.qd));
        }
    } else if (rc == 0) {
        rc = attn__sdpa_rows(att, g.qd, attn_weights, qkv.q, L * qkv.qr, qkv.qr, qkv.k, qkv.v, L * qkv.kr, g.D, qkv.kr, B, L, L, &g, sp);
    }
    if (rc == 0) rc = attn__close_sublayer(x, att, t, M, &w->o, c, &w->norm1);
    if (rc == 0) rc = attn__ffn(x, h, t, f1, f2, M, c, w);
    attn_arena_release(arena, mk);
    return rc;
}

/* ---------------------------------------------------------------- decoder */

int attn_cross_kv(float *out, const float *enc, int64_t M, const attn_block_config *c, const attn_block_weights *w) {
    if (!c || !w) return attn_set_error(ATTN_E_INVALID, "cross_kv: NULL argument");
    if (!w->cross_kv.data) return attn_set_error(ATTN_E_INVALID, "cross_kv: the layer has no cross-attention key/value weights");
    return attn_weight_matmul(out, enc, M, &w->cross_kv, ATTN_ACT_IDENTITY, c->n_threads);
}

static int64_t attn__slot(const attn_decoder_rows *r, int64_t i) { return r->slot ? r->slot[i] : i; }
static int64_t attn__item(const attn_decoder_rows *r, int64_t i) { return r->row_item ? r->row_item[i] : 0; }

/* causal self-attention of rows [r0, r1) (one slot's consecutive rows) over their slot */
static int attn__self_group(float *att, const attn__qkv *qkv, const int64_t *pos, const attn_block_config *c, const attn__geo *g,
                            int64_t layer, attn_kv *cache, const attn_decoder_rows *r, int64_t r0, int64_t r1, float *scr) {
    const int64_t T = attn_kv_max_len(cache), kvd = g->kvd, s = attn__slot(r, r0);
    const int64_t n = r1 - r0, Lk = pos[r1 - 1] + 1;
    /* a slot of the cache is [Hkv, T, D]: a head's keys and values are read as one run of memory
     * (positions with their heads side by side, [T, Hkv·D], made the decode attention of an
     * 8-sequence step ~20% slower: a strided read of a cache larger than the L3) */
    const float *kc = attn_kv_keys(cache, layer, s), *vc = attn_kv_values(cache, layer, s);
    if (c->ct2_attention) {
        if (n != 1) return attn_set_error(ATTN_E_UNSUPPORTED, "decoder layer: CTranslate2's arithmetic decodes one position per sequence per step");
        attn__ct2_mha_exact(att + r0 * g->qd, g->qd, NULL, qkv->q + r0 * qkv->qr, qkv->qr, kc, vc, g->D, T * g->D, g->H, g->D, 1, Lk, 1, Lk, 0,
                            attn__scale(c, g), scr);
        return ATTN_OK;
    }
    attn_sdpa_params p = attn_sdpa_params_default();
    p.is_causal = 1;
    p.n_threads = attn__decode_attn_threads(c, g, 1, n, Lk);
    return attn__sdpa_rows(att + r0 * g->qd, g->qd, NULL, qkv->q + r0 * qkv->qr, n * qkv->qr, qkv->qr, kc, vc, T * kvd, T * g->D, g->D, 1, n, Lk, g, p);
}

/* the slots of a step on attn's threads: each slot's attention is the call it makes on its own
 * (same arguments, same thread count asked for, run on one thread inside the job: the same
 * arithmetic), the slots taken by whichever thread is free */
typedef struct {
    float *att;
    const attn__qkv *qkv;
    const int64_t *pos;
    const attn_block_config *c;
    const attn__geo *g;
    int64_t layer;
    attn_kv *cache;
    const attn_decoder_rows *r;
    _Atomic int failed;
} attn__self_job;

static void attn__self_rows(void *arg, int64_t lo, int64_t hi, int tid) {
    attn__self_job *j = (attn__self_job *)arg;
    const int64_t N = j->r->n_rows;
    for (int64_t r0 = lo; r0 < hi; r0++) {
        if (r0 > 0 && attn__slot(j->r, r0 - 1) == attn__slot(j->r, r0)) continue; /* not the first row of its slot */
        int64_t r1 = r0 + 1;
        while (r1 < N && attn__slot(j->r, r1) == attn__slot(j->r, r0)) r1++;
        if (attn__self_group(j->att, j->qkv, j->pos, j->c, j->g, j->layer, j->cache, j->r, r0, r1, NULL) < 0) j->failed = 1;
    }
}

/* causal self-attention of the step's rows over their slots; att [N, H·D] */
static int attn__self_attention(float *att, const attn__qkv *qkv, const int64_t *pos, const attn_block_config *c, const attn__geo *g,
                                int64_t layer, attn_kv *cache, const attn_decoder_rows *r, float *scr) {
    const int64_t N = r->n_rows, T = attn_kv_max_len(cache), kvd = g->kvd;
    /* several slots whose calls would each run on one thread (decode rows of a batch): the slots
     * in parallel instead (a step of 8 sequences spends ~6% of its time here) */
    const int nt = c->n_threads > 0 ? c->n_threads : attn_get_num_threads();
    if (nt > 1 && N > 1 && !c->ct2_attention) {
        int64_t groups = 0, serial = 1;
        double cost = 0;
        for (int64_t r0 = 0; r0 < N;) {
            int64_t r1 = r0 + 1;
            while (r1 < N && attn__slot(r, r1) == attn__slot(r, r0)) r1++;
            serial &= attn__attn_threads(c, r1 - r0, pos[r1 - 1] + 1, g->qd) == 1;
            cost += (double)(r1 - r0) * (double)(pos[r1 - 1] + 1) * (double)g->qd;
            groups++;
            r0 = r1;
        }
        if (groups > 1 && serial && attn__pool_threads(cost, nt) > 1) {
            attn__self_job j = {att, qkv, pos, c, g, layer, cache, r, 0};
            attn__pool_for(N, 1, nt, attn__self_rows, &j);
            if (!j.failed) return ATTN_OK;
            /* the message was set on another thread: run again here to have it */
            for (int64_t r0 = 0; r0 < N;) {
                int64_t r1 = r0 + 1;
                while (r1 < N && attn__slot(r, r1) == attn__slot(r, r0)) r1++;
                ATTN_TRY(attn__self_group(att, qkv, pos, c, g, layer, cache, r, r0, r1, scr));
                r0 = r1;
            }
            return attn_set_error(ATTN_E_NOMEM, "decoder layer: self-attention failed on a helper thread");
        }
    }
    /* rows that are each the next position of slots 0..N-1, all of one length: one batched call */
    int uniform = 1;
    for (int64_t i = 0; i < N && uniform; i++) uniform = attn__slot(r, i) == i && pos[i] == pos[0];
    if (uniform && !c->ct2_attention) {
        attn_sdpa_params p = attn_sdpa_params_default();
        p.is_causal = 1;
        p.n_threads = attn__decode_attn_threads(c, g, N, 1, pos[0] + 1);
        const float *k0 = attn_kv_keys(cache, layer, 0), *v0 = attn_kv_values(cache, layer, 0);
        return attn__sdpa_rows(att, g->qd, NULL, qkv->q, qkv->qr, qkv->qr, k0, v0, T * kvd, T * g->D, g->D, N, 1, pos[0] + 1, g, p);
    }
    for (int64_t r0 = 0; r0 < N;) {
        int64_t r1 = r0 + 1;
        while (r1 < N && attn__slot(r, r1) == attn__slot(r, r0)) r1++;
        ATTN_TRY(attn__self_group(att, qkv, pos, c, g, layer, cache, r, r0, r1, scr));
        r0 = r1;
    }
    return ATTN_OK;
}

/* cross-attention of the rows over their items' keys / values; att [N, H·D]; wbuf: H·N·Ls floats */
static int attn__cross_attention(float *att, const float *q, const attn_block_config *c, const attn__geo *g, const attn_decoder_rows *r,
                                 float *wbuf, float *scr) {
    const int64_t N = r->n_rows, Ls = r->cross_len, kvd = g->kvd, H = g->H;
    for (int64_t r0 = 0; r0 < N;) {
        const int64_t b = attn__item(r, r0);
        int64_t r1 = r0 + 1;
        while (r1 < N && attn__item(r, r1) == b) r1++;
        const int64_t n = r1 - r0, sl = r->cross_lengths ? r->cross_lengths[b] : Ls;
        const float *kv = r->cross_kv + b * Ls * 2 * kvd;
        float *w = r->cross_weights ? wbuf : NULL;
        int64_t ww = Ls; /* width of a row of w */
        if (c->ct2_attention) {
            /* CTranslate2 multiplies the queries of an item's beams together with its keys (scores
             * [beams, Ls] per head), so the beam count is the GEMM's row count; w [H, n, sl] */
            attn__ct2_mha_exact(att + r0 * g->qd, g->qd, w, q + r0 * g->qd, g->qd, kv, kv + kvd, 2 * kvd, g->D, H, g->D, n, sl, n, Ls, 0,
                                attn__scale(c, g), scr);
            ww = sl;
        } else {
            attn_sdpa_params p = attn_sdpa_params_default();
            p.key_lengths = r->cross_lengths ? &r->cross_lengths[b] : NULL;
            p.n_threads = attn__attn_threads(c, n, Ls, g->qd);
            ATTN_TRY(attn__sdpa_rows(att + r0 * g->qd, g->qd, w, q + r0 * g->qd, n * g->qd, g->qd, kv, kv + kvd, Ls * 2 * kvd, g->D, 2 * kvd, 1, n, Ls,
                                     g, p));
        }
        if (w) /* [H, n, ww] -> rows r0.. of [N, H, Ls], zeros past the length */
            for (int64_t i = 0; i < n; i++)
                for (int64_t h = 0; h < H; h++) {
                    float *dst = r->cross_weights + ((r0 + i) * H + h) * Ls;
                    memcpy(dst, w + (h * n + i) * ww, sizeof(float) * (size_t)ww);
                    memset(dst + ww, 0, sizeof(float) * (size_t)(Ls - ww));
                }
        r0 = r1;
    }
    return ATTN_OK;
}

static int attn__check_rows(const attn_block_config *c, const attn_kv *cache, const attn_decoder_rows *r, int64_t layer, int64_t *pos) {
    const int64_t N = r->n_rows;
    for (int64_t i = 0; i < N; i++) {
        const int64_t s = attn__slot(r, i);
        if (s < 0 || s >= attn_kv_n_slots(cache))
            return attn_set_error(ATTN_E_INVALID, "decoder layer: row %lld names slot %lld of %lld", (long long)i, (long long)s,
                                  (long long)attn_kv_n_slots(cache));
        pos[i] = (i > 0 && attn__slot(r, i - 1) == s) ? pos[i - 1] + 1 : attn_kv_len(cache, s);
        if (pos[i] >= attn_kv_max_len(cache))
            return attn_set_error(ATTN_E_RANGE, "decoder layer: slot %lld is full (%lld positions)", (long long)s, (long long)attn_kv_max_len(cache));
    }
    if (!attn_kv_keys(cache, layer, 0)) return attn_set_error(ATTN_E_INVALID, "decoder layer: the cache has no layer %lld", (long long)layer);
    if (c->d_cross > 0 && (!r->cross_kv || r->cross_len <= 0))
        return attn_set_error(ATTN_E_INVALID, "decoder layer: cross-attention keys and values are missing");
    return ATTN_OK;
}

int attn_decoder_block(float *x, const attn_block_config *c, const attn_block_weights *w, int64_t layer, attn_kv *cache,
                       const attn_decoder_rows *r, attn_arena *arena) {
    if (!x || !cache || !r || !arena) return attn_set_error(ATTN_E_INVALID, "decoder layer: x, cache, rows and arena are required");
    ATTN_TRY(attn_block_check(c, w));
    const attn__geo g = attn__geometry(c);
    const int64_t N = r->n_rows, E = g.E, T = attn_kv_max_len(cache);
    if (N <= 0) return N == 0 ? ATTN_OK : attn_set_error(ATTN_E_INVALID, "decoder layer: negative row count");
    if (g.kvd * T * attn_kv_n_slots(cache) <= 0) return attn_set_error(ATTN_E_INVALID, "decoder layer: empty cache");
    if (attn_kv_n_kv_heads(cache) != g.Hkv || attn_kv_head_dim(cache) != g.D)
        return attn_set_error(ATTN_E_INVALID, "decoder layer: the cache holds %lld KV heads of %lld, the layer has %lld of %lld",
                              (long long)attn_kv_n_kv_heads(cache), (long long)attn_kv_head_dim(cache), (long long)g.Hkv, (long long)g.D);
    const int64_t wide = g.F > g.qd + 2 * g.kvd ? g.F : g.qd + 2 * g.kvd, Ls = c->d_cross > 0 ? r->cross_len : 0;
    attn_arena_mark mk = attn_arena_get_mark(arena);
    int64_t *pos = (int64_t *)attn_arena_alloc(arena, sizeof(int64_t) * (size_t)N);
    float *h = attn_arena_alloc_f32_uninit(arena, (size_t)(N * E));
    float *t = attn_arena_alloc_f32_uninit(arena, (size_t)(N * E));
    float *att = attn_arena_alloc_f32_uninit(arena, (size_t)(N * g.qd));
    float *f1 = attn_arena_alloc_f32_uninit(arena, (size_t)(N * wide));
    float *f2 = c->gated ? attn_arena_alloc_f32_uninit(arena, (size_t)(N * g.F)) : f1;
    float *scr = attn_arena_alloc_f32_uninit(arena, (size_t)(T + Ls + 1));
    float *wbuf = r->cross_weights ? attn_arena_alloc_f32_uninit(arena, (size_t)(g.H * N * (Ls > 0 ? Ls : 1))) : NULL;
    int rc = (!pos || !h || !t || !att || !f1 || !f2 || !scr || (r->cross_weights && !wbuf))
                 ? attn_set_error(ATTN_E_NOMEM, "decoder layer: out of memory")
                 : attn__check_rows(c, cache, r, layer, pos);
    /* causal self-attention over the cache */
    const float *in = x;
    if (rc == 0) rc = attn__open_sublayer(&in, h, x, N, c, &w->norm1);
    attn__qkv qkv;
    if (rc == 0) rc = attn__project_qkv(&qkv, f1, in, N, c, w, &g);
    if (rc == 0 && c->rope_inv_freq) {
        attn__rope(qkv.q, qkv.qr, g.H, qkv.k, qkv.kr, g.Hkv, N, c, g.D, pos);
    }
    for (int64_t i = 0; rc == 0 && i < N; i++) rc = attn_kv_write(cache, layer, attn__slot(r, i), pos[i], qkv.k + i * qkv.kr, qkv.v + i * qkv.kr);
    if (rc == 0) rc = attn__self_attention(att, &qkv, pos, c, &g, layer, cache, r, scr);
    if (rc == 0) rc = attn__close_sublayer(x, att, t, N, &w->o, c, &w->norm1);
    /* cross-attention */
    if (rc == 0 && c->d_cross > 0) {
        rc = attn__open_sublayer(&in, h, x, N, c, &w->norm2);
        if (rc == 0) rc = attn_weight_matmul(f1, in, N, &w->cross_q, ATTN_ACT_IDENTITY, c->n_threads);
        if (rc == 0) rc = attn__cross_attention(att, f1, c, &g, r, wbuf, scr);
        if (rc == 0) rc = attn__close_sublayer(x, att, t, N, &w->cross_o, c, &w->norm2);
    }
    if (rc == 0) rc = attn__ffn(x, h, t, f1, f2, N, c, w);
    attn_arena_release(arena, mk);
    return rc;
}
