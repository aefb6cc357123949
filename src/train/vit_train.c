/* ViT training: parameters, the forward that keeps its activations in one arena, and the
 * backward (include/attn_train.h). The forward is the computation of src/models/vit.c
 * (attn_encoder_layer's pre-LN layer) written out op by op so that every intermediate the
 * backward needs is kept; the backward chains the ops of backward_ops.c and attn_sdpa_backward.
 * Checked against torch.autograd of transformers' ViTForImageClassification
 * (tests/test_train_vit.c, scripts/gen_train_step_fixtures.py). */
#include "attn_train.h"
#include "attn_attention.h"
#include "attention/short_internal.h"
#include "core/internal.h"
#include "train/train_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* per-layer parameter slots, in attn_train.h's order */
enum { LQW, LQB, LKW, LKB, LVW, LVB, LOW, LOB, LF1W, LF1B, LF2W, LF2B, LN1G, LN1B, LN2G, LN2B, LPER };
static const char *const attn__layer_names[LPER] = {
    "attention.attention.query.weight", "attention.attention.query.bias", "attention.attention.key.weight",
    "attention.attention.key.bias",     "attention.attention.value.weight", "attention.attention.value.bias",
    "attention.output.dense.weight",    "attention.output.dense.bias",    "intermediate.dense.weight",
    "intermediate.dense.bias",          "output.dense.weight",            "output.dense.bias",
    "layernorm_before.weight",          "layernorm_before.bias",          "layernorm_after.weight",
    "layernorm_after.bias"};
enum { P_CLS, P_POS, P_PW, P_PB, P_LAYER0 }; /* then L·LPER layer slots, then the 4 below */
#define P_LNG(L) (P_LAYER0 + (L)*LPER)
#define P_LNB(L) (P_LNG(L) + 1)
#define P_CW(L) (P_LNG(L) + 2)
#define P_CB(L) (P_LNG(L) + 3)

int attn_vit_train_config_check(const attn_vit_train_config *c) {
    if (!c) return attn_set_error(ATTN_E_INVALID, "vit train: NULL config");
    struct {
        const char *name;
        int64_t v, lo, hi;
    } f[] = {{"image size", c->image_size, 1, 4096}, {"channels", c->channels, 1, 3},   {"patch size", c->patch, 1, 4096},
             {"hidden size", c->d_model, 1, 65536},  {"layers", c->n_layers, 1, 1024},  {"heads", c->n_heads, 1, 1024},
             {"MLP size", c->d_ff, 1, 1 << 20},      {"labels", c->n_labels, 2, 1 << 20}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < f[i].lo || f[i].v > f[i].hi)
            return attn_set_error(ATTN_E_INVALID, "vit train: %s %lld is not in %lld..%lld", f[i].name, (long long)f[i].v,
                                  (long long)f[i].lo, (long long)f[i].hi);
    if (c->channels == 2) return attn_set_error(ATTN_E_INVALID, "vit train: channels must be 1 or 3");
    if (c->d_model % c->n_heads)
        return attn_set_error(ATTN_E_INVALID, "vit train: hidden size %lld is not a multiple of %lld heads",
                              (long long)c->d_model, (long long)c->n_heads);
    if (c->image_size % c->patch)
        return attn_set_error(ATTN_E_INVALID, "vit train: patch size %lld does not divide image size %lld",
                              (long long)c->patch, (long long)c->image_size);
    if ((c->image_size / c->patch) * (c->image_size / c->patch) > 65536)
        return attn_set_error(ATTN_E_INVALID, "vit train: more than 65536 patches");
    if (!(c->eps >= 0.0f) || !isfinite(c->eps)) return attn_set_error(ATTN_E_INVALID, "vit train: layer_norm_eps must be finite and >= 0");
    if (c->act != ATTN_ACT_GELU && c->act != ATTN_ACT_GELU_TANH && c->act != ATTN_ACT_RELU)
        return attn_set_error(ATTN_E_INVALID, "vit train: unsupported activation %d", (int)c->act);
    return ATTN_OK;
}

/* sizes (floats) of the arena's parts */
typedef struct {
    int64_t N, T, K, E, F, H, L, n;
} attn__dims;
static attn__dims attn__vdims(const attn_vit_train_config *c) {
    attn__dims d;
    const int64_t g = c->image_size / c->patch;
    d.N = g * g, d.T = d.N + 1, d.K = c->channels * c->patch * c->patch, d.E = c->d_model, d.F = c->d_ff;
    d.H = c->n_heads, d.L = c->n_layers, d.n = c->n_labels;
    return d;
}

static double attn__arena_floats(const attn_vit_train_config *c, int64_t B) {
    const attn__dims d = attn__vdims(c);
    const double BTE = (double)B * d.T * d.E, BTF = (double)B * d.T * d.F;
    return (double)B * d.N * d.K + (double)(d.L + 1) * BTE + (double)d.L * (8 * BTE + 2 * BTF + (double)B * d.H * d.T) +
           4.0 * B * d.E + 2.0 * B * d.n + 9 * BTE + 2 * BTF;
}

size_t attn_vit_train_arena_bytes(const attn_vit_train_config *c, int64_t B) {
    if (B < 1 || attn_vit_train_config_check(c) < 0) return 0;
    const double f = attn__arena_floats(c, B) * 4.0;
    return f > (double)SIZE_MAX / 2 ? 0 : (size_t)f;
}

/* ---------------------------------------------------------------- create */

static double attn__trunc_normal(attn_rng *r, double std) {
    for (;;) { /* Box–Muller; rejection outside [-2, 2] (torch.nn.init.trunc_normal_'s a, b) */
        double u1 = ((attn_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        double u2 = (attn_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
        double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2) * std;
        if (z >= -2.0 && z <= 2.0) return z;
    }
}

int attn_vit_trainer_new(attn_vit_trainer **out, const attn_vit_train_config *c, int64_t max_batch, uint64_t init_seed) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "vit train: NULL argument");
    *out = NULL;
    ATTN_TRY(attn_vit_train_config_check(c));
    if (max_batch < 1) return attn_set_error(ATTN_E_INVALID, "vit train: batch size %lld < 1", (long long)max_batch);
    const attn__dims d = attn__vdims(c);
    attn_vit_trainer *t = (attn_vit_trainer *)calloc(1, sizeof *t);
    if (!t) return attn_set_error(ATTN_E_NOMEM, "vit train: out of memory");
    t->cfg = *c;
    t->max_batch = max_batch;
    t->np = (int)(P_LAYER0 + d.L * LPER + 4);
    t->par = (attn__vparam *)calloc((size_t)t->np, sizeof *t->par);
    if (!t->par) {
        free(t);
        return attn_set_error(ATTN_E_NOMEM, "vit train: out of memory");
    }
    int64_t off = 0;
#define SET(i, nm, nd, s0, s1, s2, s3)                                                          \
    do {                                                                                         \
        attn__vparam *q_ = &t->par[i];                                                           \
        snprintf(q_->name, sizeof q_->name, "%s", nm);                                          \
        q_->ndim = nd;                                                                           \
        q_->shape[0] = s0, q_->shape[1] = s1, q_->shape[2] = s2, q_->shape[3] = s3;              \
        q_->numel = 1;                                                                           \
        for (int k_ = 0; k_ < nd; k_++) q_->numel *= q_->shape[k_];                              \
        q_->off = off;                                                                           \
        off += q_->numel;                                                                        \
    } while (0)
    SET(P_CLS, "vit.embeddings.cls_token", 3, 1, 1, d.E, 0);
    SET(P_POS, "vit.embeddings.position_embeddings", 3, 1, d.T, d.E, 0);
    SET(P_PW, "vit.embeddings.patch_embeddings.projection.weight", 4, d.E, c->channels, c->patch, c->patch);
    SET(P_PB, "vit.embeddings.patch_embeddings.projection.bias", 1, d.E, 0, 0, 0);
    /* a layer's storage order puts the query, key and value weights (then their biases) side by
     * side: one [3·E, E] matrix and one [3·E] bias for the fused projection (the slots keep
     * attn_train.h's order) */
    static const int attn__layer_store[LPER] = {LQW, LKW, LVW, LQB, LKB, LVB, LOW, LOB, LF1W, LF1B, LF2W, LF2B, LN1G, LN1B, LN2G, LN2B};
    for (int64_t l = 0; l < d.L; l++)
        for (int ks = 0; ks < LPER; ks++) {
            const int k = attn__layer_store[ks];
            char nm[96];
            snprintf(nm, sizeof nm, "vit.encoder.layer.%lld.%s", (long long)l, attn__layer_names[k]);
            const int w = k == LQW || k == LKW || k == LVW || k == LOW || k == LF1W || k == LF2W;
            const int64_t rows = k == LF1W || k == LF1B ? d.F : d.E, cols = k == LF2W ? d.F : d.E;
            if (w) SET(P_LAYER0 + l * LPER + k, nm, 2, rows, cols, 0, 0);
            else SET(P_LAYER0 + l * LPER + k, nm, 1, rows, 0, 0, 0);
        }
    SET(P_LNG(d.L), "vit.layernorm.weight", 1, d.E, 0, 0, 0);
    SET(P_LNB(d.L), "vit.layernorm.bias", 1, d.E, 0, 0, 0);
    SET(P_CW(d.L), "classifier.weight", 2, d.n, d.E, 0, 0);
    SET(P_CB(d.L), "classifier.bias", 1, d.n, 0, 0, 0);
#undef SET
    t->numel = off;
    const double abytes = attn__arena_floats(c, max_batch) * 4.0, pbytes = 16.0 * (double)off;
    t->mem = abytes + pbytes < 1e15 ? (float *)calloc((size_t)(4 * off), sizeof(float)) : NULL;
    t->arena = abytes + pbytes < 1e15 ? (float *)malloc((size_t)abytes) : NULL;
    t->lnpart = abytes + pbytes < 1e15 ? (float *)malloc(sizeof(float) * attn__vk_ln_part_floats(max_batch * d.T, d.E)) : NULL;
    t->sqpart = (double *)malloc(sizeof(double) * (size_t)((off + ATTN__CLIP_BLOCK - 1) / ATTN__CLIP_BLOCK + 1));
    if (!t->mem || !t->arena || !t->lnpart || !t->sqpart) {
        attn_vit_trainer_free(t);
        return attn_set_error(ATTN_E_NOMEM, "vit train: out of memory (%.0f bytes of parameters, gradients and moments, %.0f of activations)",
                              pbytes, abytes);
    }
    t->p = t->mem, t->g = t->mem + off, t->m = t->mem + 2 * off, t->v = t->mem + 3 * off;
    attn_rng r;
    attn_train_rng_seed(&r, init_seed, 0x1417);
    for (int i = 0; i < t->np; i++) {
        attn__vparam *q = &t->par[i];
        float *p = t->p + q->off;
        const int ln_w = strstr(q->name, "layernorm") && strstr(q->name, ".weight");
        const int normal = !ln_w && (q->ndim >= 2 || i == P_CLS || i == P_POS);
        for (int64_t e = 0; e < q->numel; e++) p[e] = ln_w ? 1.0f : normal ? (float)attn__trunc_normal(&r, 0.02) : 0.0f;
        q->decay = q->ndim >= 2 && !strstr(q->name, "position");
    }
    *out = t;
    return ATTN_OK;
}

void attn_vit_trainer_free(attn_vit_trainer *t) {
    if (!t) return;
    free(t->par);
    free(t->mem);
    free(t->arena);
    free(t->lnpart);
    free(t->sqpart);
    free(t);
}

const attn_vit_train_config *attn_vit_trainer_config(const attn_vit_trainer *t) { return t ? &t->cfg : NULL; }
int attn_vit_trainer_param_count(const attn_vit_trainer *t) { return t ? t->np : 0; }
const char *attn_vit_trainer_param_name(const attn_vit_trainer *t, int i) {
    return t && i >= 0 && i < t->np ? t->par[i].name : NULL;
}
int64_t attn_vit_trainer_numel(const attn_vit_trainer *t) { return t ? t->numel : 0; }
int64_t attn_vit_trainer_step_count(const attn_vit_trainer *t) { return t ? t->step : 0; }
void attn_vit_trainer_set_step_count(attn_vit_trainer *t, int64_t step) {
    if (t) t->step = step;
}
void attn_vit_trainer_set_grad_hook(attn_vit_trainer *t, attn_vit_grad_hook fn, void *user) {
    if (t) t->grad_hook = fn, t->grad_hook_user = user;
}

int attn_vit_trainer_tensor(attn_tensor *out, const attn_vit_trainer *t, int i, int which) {
    if (!out || !t || i < 0 || i >= t->np || which < 0 || which > 3)
        return attn_set_error(ATTN_E_INVALID, "vit train: no tensor %d/%d", i, which);
    const attn__vparam *q = &t->par[i];
    float *base = which == 0 ? t->p : which == 1 ? t->g : which == 2 ? t->m : t->v;
    return attn_tensor_make(out, base + q->off, ATTN_F32, q->ndim, q->shape);
}

/* ---------------------------------------------------------------- forward */

static attn_tensor attn__pv(const attn_vit_trainer *t, float *base, int i) { /* parameter i as stored (weights 2-D) */
    const attn__vparam *q = &t->par[i];
    if (q->ndim == 1) return attn_tensor_f32_1d(base + q->off, q->shape[0]);
    if (i == P_PW) return attn_tensor_f32_2d(base + q->off, q->shape[0], q->numel / q->shape[0]);
    return attn_tensor_f32_2d(base + q->off, q->shape[0], q->shape[1]);
}

/* carve the arena for batch B (the layout attn__arena_floats counts) */
static void attn__carve(attn_vit_trainer *t, int64_t B) {
    const attn__dims d = attn__vdims(&t->cfg);
    const int64_t BTE = B * d.T * d.E, BTF = B * d.T * d.F;
    float *a = t->arena;
#define TAKE(n) (a += (n), a - (n))
    t->a.cols = TAKE(B * d.N * d.K);
    t->a.xs = TAKE((d.L + 1) * BTE);
    t->a.per = TAKE(d.L * (8 * BTE + 2 * BTF + B * d.H * d.T));
    t->a.clsx = TAKE(B * d.E), t->a.clsn = TAKE(B * d.E), t->a.dclsx = TAKE(B * d.E), t->a.dclsn = TAKE(B * d.E);
    t->a.logits = TAKE(B * d.n), t->a.dlogits = TAKE(B * d.n);
    for (int k = 0; k < 9; k++) t->a.s[k] = TAKE(BTE);
    t->a.sf[0] = TAKE(BTF), t->a.sf[1] = TAKE(BTF);
#undef TAKE
    t->B = B;
}

/* the activations of layer l: ln1, qkv [3·BTE], att, h, ln2 [BTE]; f1, act [BTF]; lse [B·H·T] */
typedef struct {
    float *ln1, *q, *k, *v, *att, *h, *ln2, *f1, *g, *lse;
} attn__lact;
static attn__lact attn__layer_act(const attn_vit_trainer *t, int64_t l) {
    const attn__dims d = attn__vdims(&t->cfg);
    const int64_t B = t->B, BTE = B * d.T * d.E, BTF = B * d.T * d.F;
    float *a = t->a.per + l * (8 * BTE + 2 * BTF + B * d.H * d.T);
    attn__lact r;
    /* q, k, v: one [B·T, 3·E] buffer (the fused projection's output), rows 3·E floats apart */
    r.ln1 = a, r.q = a + BTE, r.k = r.q + d.E, r.v = r.q + 2 * d.E, r.att = a + 4 * BTE, r.h = a + 5 * BTE, r.ln2 = a + 6 * BTE;
    r.f1 = a + 7 * BTE, r.g = r.f1 + BTF, r.lse = r.g + BTF;
    return r;
}

/* [B, T, E] buffers whose rows are ld floats apart as [B, H, T, D] views */
static attn_tensor attn__heads(float *p, int64_t B, int64_t T, int64_t E, int64_t H, int64_t ld) {
    attn_tensor x = attn_tensor_f32_3d(p, B, T, E), o;
    x.stride[0] = T * ld, x.stride[1] = ld;
    attn_tensor_split_heads(&o, &x, H);
    return o;
}

int attn_vit_trainer_forward(attn_vit_trainer *t, float *logits, const float *pixels, int64_t B) {
    if (!t || !pixels) return attn_set_error(ATTN_E_INVALID, "vit train forward: NULL argument");
    if (B < 1 || B > t->max_batch)
        return attn_set_error(ATTN_E_INVALID, "vit train forward: batch of %lld images is not in 1..%lld", (long long)B,
                              (long long)t->max_batch);
    const attn_vit_train_config *c = &t->cfg;
    const attn__dims d = attn__vdims(c);
    const int64_t P = c->patch, S = c->image_size, g = S / P, E = d.E, T = d.T, N = d.N, K = d.K, BT = B * T;
    attn__carve(t, B);
    t->fwd_ok = 0;
    float *cols = t->a.cols, *x0 = t->a.xs;
    for (int64_t b = 0; b < B; b++) /* im2col in (channel, row, column) order: the conv weight's */
        for (int64_t py = 0; py < g; py++)
            for (int64_t px = 0; px < g; px++) {
                float *dst = cols + ((b * g + py) * g + px) * K;
                for (int64_t ch = 0; ch < c->channels; ch++)
                    for (int64_t ky = 0; ky < P; ky++)
                        memcpy(dst + (ch * P + ky) * P, pixels + ((b * c->channels + ch) * S + py * P + ky) * S + px * P,
                               sizeof(float) * (size_t)P);
            }
    attn_tensor pw = attn__pv(t, t->p, P_PW), pb = attn__pv(t, t->p, P_PB);
    int rc = ATTN_OK;
    const float *cls = t->p + t->par[P_CLS].off, *pos = t->p + t->par[P_POS].off;
    { /* the patches of all images in one product (into the backward's free scratch), then CLS and positions */
        float *pe = t->a.s[0];
        attn_tensor tc = attn_tensor_f32_2d(cols, B * N, K), to = attn_tensor_f32_2d(pe, B * N, E);
        rc = attn_linear(&to, &tc, &pw, &pb);
        for (int64_t b = 0; b < B && rc == 0; b++) {
            float *xb = x0 + b * T * E;
            const float *pb_ = pe + b * N * E;
            for (int64_t e = 0; e < E; e++) xb[e] = cls[e] + pos[e];
            for (int64_t e = 0; e < N * E; e++) xb[E + e] = pb_[e] + pos[E + e];
        }
    }
    attn_sdpa_params sp = attn_sdpa_params_default();
    for (int64_t l = 0; l < d.L && rc == 0; l++) {
        const int b0 = P_LAYER0 + (int)l * LPER;
        attn__lact a = attn__layer_act(t, l);
        float *xin = t->a.xs + l * BT * E, *xout = xin + BT * E;
        const float *pp = t->p;
        attn_tensor g1 = attn__pv(t, t->p, b0 + LN1G), be1 = attn__pv(t, t->p, b0 + LN1B);
        attn__vk_layernorm_forward(a.ln1, xin, (const float *)g1.data, (const float *)be1.data, c->eps, BT, E);
        /* [q | k | v] = LN1 · [Wq; Wk; Wv]ᵀ + [bq; bk; bv]: one product */
        attn__vk_linear(a.q, a.ln1, pp + t->par[b0 + LQW].off, pp + t->par[b0 + LQB].off, NULL, BT, 3 * E, E);
        if (rc == 0 && T <= ATTN__SHORT_MAX_L && E / d.H <= ATTN__SHORT_MAX_D) { /* short sequences: the direct kernel (attention/sdpa_short.c) */
            rc = attn__short_attention_forward(a.att, a.lse, a.q, a.k, a.v, 3 * E, B, T, d.H, E / d.H);
        } else if (rc == 0) {
            attn_tensor q4 = attn__heads(a.q, B, T, E, d.H, 3 * E), k4 = attn__heads(a.k, B, T, E, d.H, 3 * E);
            attn_tensor v4 = attn__heads(a.v, B, T, E, d.H, 3 * E), o4 = attn__heads(a.att, B, T, E, d.H, E);
            attn_tensor lse = attn_tensor_f32_3d(a.lse, B, d.H, T);
            sp.lse = &lse;
            rc = attn_sdpa(&o4, NULL, &q4, &k4, &v4, &sp);
            sp.lse = NULL;
        }
        if (rc == 0) /* h = x + att·Woᵀ + bo */
            attn__vk_linear(a.h, a.att, pp + t->par[b0 + LOW].off, pp + t->par[b0 + LOB].off, xin, BT, E, E);
        if (rc == 0) {
            attn_tensor g2 = attn__pv(t, t->p, b0 + LN2G), be2 = attn__pv(t, t->p, b0 + LN2B);
            attn__vk_layernorm_forward(a.ln2, a.h, (const float *)g2.data, (const float *)be2.data, c->eps, BT, E);
            attn_tensor tf = attn_tensor_f32_2d(a.f1, BT, d.F), tg = attn_tensor_f32_2d(a.g, BT, d.F);
            attn__vk_linear(a.f1, a.ln2, pp + t->par[b0 + LF1W].off, pp + t->par[b0 + LF1B].off, NULL, BT, d.F, E);
            rc = attn_activate(&tg, &tf, c->act);
            /* out = h + act·W2ᵀ + b2 */
            if (rc == 0) attn__vk_linear(xout, a.g, pp + t->par[b0 + LF2W].off, pp + t->par[b0 + LF2B].off, a.h, BT, E, d.F);
        }
    }
    if (rc == 0) { /* final LayerNorm of the CLS rows (per row: the same as of all rows), classifier */
        const float *xl = t->a.xs + d.L * BT * E;
        for (int64_t b = 0; b < B; b++) memcpy(t->a.clsx + b * E, xl + b * T * E, sizeof(float) * (size_t)E);
        attn_tensor tx = attn_tensor_f32_2d(t->a.clsx, B, E), tn = attn_tensor_f32_2d(t->a.clsn, B, E);
        attn_tensor lg = attn__pv(t, t->p, P_LNG(d.L)), lb = attn__pv(t, t->p, P_LNB(d.L));
        attn_tensor cw = attn__pv(t, t->p, P_CW(d.L)), cb = attn__pv(t, t->p, P_CB(d.L));
        attn_tensor to = attn_tensor_f32_2d(t->a.logits, B, d.n);
        rc = attn_layernorm(&tn, &tx, &lg, &lb, c->eps);
        if (rc == 0) rc = attn_linear(&to, &tn, &cw, &cb);
    }
    if (rc < 0) return rc;
    if (logits) memcpy(logits, t->a.logits, sizeof(float) * (size_t)(B * d.n));
    t->fwd_ok = 1;
    return ATTN_OK;
}

/* ---------------------------------------------------------------- backward */

/* the backward of the forward above from t->a.dlogits; every gradient overwritten */
static int attn__backward(attn_vit_trainer *t) {
    const attn_vit_train_config *c = &t->cfg;
    const attn__dims d = attn__vdims(c);
    const int64_t B = t->B, E = d.E, T = d.T, N = d.N, K = d.K, F = d.F, BT = B * T;
    /* dq, dk, dv: one [B·T, 3·E] buffer (s[4..6] are adjacent), as q, k, v */
    float *dx = t->a.s[0], *dh = t->a.s[1], *dtmp = t->a.s[2], *dln = t->a.s[3], *dq = t->a.s[4], *dk = dq + E,
          *dv = dq + 2 * E, *datt = t->a.s[7], *dg = t->a.sf[0], *df1 = t->a.sf[1];
    /* classifier and final LayerNorm (CLS rows) */
    attn_tensor tdl = attn_tensor_f32_2d(t->a.dlogits, B, d.n), tn = attn_tensor_f32_2d(t->a.clsn, B, E);
    attn_tensor tdn = attn_tensor_f32_2d(t->a.dclsn, B, E);
    attn_tensor cw = attn__pv(t, t->p, P_CW(d.L)), dcw = attn__pv(t, t->g, P_CW(d.L)), dcb = attn__pv(t, t->g, P_CB(d.L));
    attn_tensor lg = attn__pv(t, t->p, P_LNG(d.L)), dlg = attn__pv(t, t->g, P_LNG(d.L)), dlb = attn__pv(t, t->g, P_LNB(d.L));
    ATTN_TRY(attn_linear_backward(&tdn, &dcw, &dcb, &tdl, &tn, &cw, 0));
    attn__vk_layernorm_backward(t->a.dclsx, (float *)dlg.data, (float *)dlb.data, t->a.dclsn, t->a.clsx, (const float *)lg.data,
                                NULL, c->eps, B, E, t->lnpart);
    if (t->grad_hook) t->grad_hook(t->grad_hook_user, P_LNG(d.L), 4);
    memset(dx, 0, sizeof(float) * (size_t)(BT * E));
    for (int64_t b = 0; b < B; b++) memcpy(dx + b * T * E, t->a.dclsx + b * E, sizeof(float) * (size_t)E);
    attn_sdpa_params sp = attn_sdpa_params_default();
    for (int64_t l = d.L - 1; l >= 0; l--) {
        const int b0 = P_LAYER0 + (int)l * LPER;
        attn__lact a = attn__layer_act(t, l);
        float *xin = t->a.xs + l * BT * E;
        /* MLP branch: out = h + fc2(act(fc1(LN2(h)))) */
        attn_tensor tdo = attn_tensor_f32_2d(dx, BT, E), tg = attn_tensor_f32_2d(a.g, BT, F);
        attn_tensor tdg = attn_tensor_f32_2d(dg, BT, F), tf1 = attn_tensor_f32_2d(a.f1, BT, F);
        attn_tensor tdf = attn_tensor_f32_2d(df1, BT, F), tl2 = attn_tensor_f32_2d(a.ln2, BT, E);
        attn_tensor tdln = attn_tensor_f32_2d(dln, BT, E);
        attn_tensor w2 = attn__pv(t, t->p, b0 + LF2W), dw2 = attn__pv(t, t->g, b0 + LF2W), db2 = attn__pv(t, t->g, b0 + LF2B);
        attn_tensor w1 = attn__pv(t, t->p, b0 + LF1W), dw1 = attn__pv(t, t->g, b0 + LF1W), db1 = attn__pv(t, t->g, b0 + LF1B);
        attn_tensor g2 = attn__pv(t, t->p, b0 + LN2G), dg2 = attn__pv(t, t->g, b0 + LN2G), dbe2 = attn__pv(t, t->g, b0 + LN2B);
        ATTN_TRY(attn_linear_backward(&tdg, &dw2, &db2, &tdo, &tg, &w2, 0));
        if (c->act == ATTN_ACT_GELU) attn__vk_gelu_backward(df1, dg, a.f1, BT * F);
        else ATTN_TRY(attn_activation_backward(&tdf, &tdg, &tf1, c->act));
        ATTN_TRY(attn_linear_backward(&tdln, &dw1, &db1, &tdf, &tl2, &w1, 0));
        /* dh = dx + LN2's backward */
        attn__vk_layernorm_backward(dh, (float *)dg2.data, (float *)dbe2.data, dln, a.h, (const float *)g2.data, dx, c->eps, BT, E,
                                    t->lnpart);
        /* attention branch: h = x + o_proj(SDPA(q, k, v)), q/k/v = proj(LN1(x)) */
        attn_tensor tdh = attn_tensor_f32_2d(dh, BT, E), ta = attn_tensor_f32_2d(a.att, BT, E);
        attn_tensor tda = attn_tensor_f32_2d(datt, BT, E);
        attn_tensor wo = attn__pv(t, t->p, b0 + LOW), dwo = attn__pv(t, t->g, b0 + LOW), dbo = attn__pv(t, t->g, b0 + LOB);
        ATTN_TRY(attn_linear_backward(&tda, &dwo, &dbo, &tdh, &ta, &wo, 0));
        if (T <= ATTN__SHORT_MAX_L && E / d.H <= ATTN__SHORT_MAX_D) {
            ATTN_TRY(attn__short_attention_backward(dq, dk, dv, a.q, a.k, a.v, a.att, a.lse, datt, 3 * E, B, T, d.H, E / d.H));
        } else {
            attn_tensor q4 = attn__heads(a.q, B, T, E, d.H, 3 * E), k4 = attn__heads(a.k, B, T, E, d.H, 3 * E);
            attn_tensor v4 = attn__heads(a.v, B, T, E, d.H, 3 * E), o4 = attn__heads(a.att, B, T, E, d.H, E);
            attn_tensor dq4 = attn__heads(dq, B, T, E, d.H, 3 * E), dk4 = attn__heads(dk, B, T, E, d.H, 3 * E);
            attn_tensor dv4 = attn__heads(dv, B, T, E, d.H, 3 * E), do4 = attn__heads(datt, B, T, E, d.H, E);
            attn_tensor lse = attn_tensor_f32_3d(a.lse, B, d.H, T);
            ATTN_TRY(attn_sdpa_backward(&dq4, &dk4, &dv4, &q4, &k4, &v4, &o4, &lse, &do4, &sp));
        }
        attn_tensor tl1 = attn_tensor_f32_2d(a.ln1, BT, E);
        { /* the fused projection: dLN1 = [dq | dk | dv] · [Wq; Wk; Wv], one product each for dx, dW, db */
            attn_tensor w = attn_tensor_f32_2d(t->p + t->par[b0 + LQW].off, 3 * E, E);
            attn_tensor dw = attn_tensor_f32_2d(t->g + t->par[b0 + LQW].off, 3 * E, E);
            attn_tensor db = attn_tensor_f32_1d(t->g + t->par[b0 + LQB].off, 3 * E), dy = attn_tensor_f32_2d(dq, BT, 3 * E);
            ATTN_TRY(attn_linear_backward(&tdln, &dw, &db, &dy, &tl1, &w, 0));
            /* The key bias's exact gradient is 0: it adds q_i·b_k to every score of row i, which the
             * softmax ignores (no mask here). The float sum of dk is rounding noise (~1e-9), which
             * AdamW's normalisation would turn into steps of up to lr·0.1; keep the exact value. */
            memset(t->g + t->par[b0 + LKB].off, 0, sizeof(float) * (size_t)E);
        }
        attn_tensor g1 = attn__pv(t, t->p, b0 + LN1G), dg1 = attn__pv(t, t->g, b0 + LN1G), dbe1 = attn__pv(t, t->g, b0 + LN1B);
        /* dx = dh + LN1's backward */
        attn__vk_layernorm_backward(dx, (float *)dg1.data, (float *)dbe1.data, dln, xin, (const float *)g1.data, dh, c->eps, BT, E,
                                    t->lnpart);
        if (t->grad_hook) t->grad_hook(t->grad_hook_user, b0, LPER);
    }
    /* embeddings: x[b, 0] = cls + pos[0]; x[b, 1 + n] = patch(cols)[b, n] + pos[1 + n] */
    float *dcls = t->g + t->par[P_CLS].off, *dpos = t->g + t->par[P_POS].off;
    for (int64_t e = 0; e < T * E; e++) {
        double s = 0.0;
        for (int64_t b = 0; b < B; b++) s += dx[b * T * E + e];
        dpos[e] = (float)s;
        if (e < E) dcls[e] = (float)s;
    }
    attn_tensor pw = attn__pv(t, t->p, P_PW), dpw = attn__pv(t, t->g, P_PW), dpb = attn__pv(t, t->g, P_PB);
    attn_tensor tdy = attn_tensor_f32_2d(dtmp, B * N, E), tc = attn_tensor_f32_2d(t->a.cols, B * N, K);
    for (int64_t b = 0; b < B; b++) memcpy(dtmp + b * N * E, dx + (b * T + 1) * E, sizeof(float) * (size_t)(N * E));
    ATTN_TRY(attn_linear_backward(NULL, &dpw, &dpb, &tdy, &tc, &pw, 0));
    if (t->grad_hook) t->grad_hook(t->grad_hook_user, P_CLS, P_LAYER0);
    return ATTN_OK;
}

int attn_vit_trainer_loss_backward(attn_vit_trainer *t, double *loss, float *logits, const float *pixels,
                                   const int32_t *labels, int64_t B, double label_smoothing) {
    if (!t || !loss || !pixels || !labels) return attn_set_error(ATTN_E_INVALID, "vit train: NULL argument");
    ATTN_TRY(attn_vit_trainer_forward(t, logits, pixels, B));
    t->fwd_ok = 0; /* the backward overwrites nothing the forward kept, but a second backward needs new dlogits */
    const int64_t n = t->cfg.n_labels;
    attn_tensor tl = attn_tensor_f32_2d(t->a.logits, B, n), tdl = attn_tensor_f32_2d(t->a.dlogits, B, n), ty;
    int64_t sh[1] = {B};
    ATTN_TRY(attn_tensor_make(&ty, (void *)labels, ATTN_I32, 1, sh));
    ATTN_TRY(attn_cross_entropy(loss, &tdl, &tl, &ty, label_smoothing));
    return attn__backward(t);
}
