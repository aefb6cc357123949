/* AdamW, the learning-rate schedule, gradient clipping, the seeded RNG, shuffling and the
 * augmented mini-batches of the ViT trainer (include/attn_train.h). */
#include "attn_train.h"
#include "core/internal.h"
#include "core/pool.h"
#include "train/train_internal.h"

#include <math.h>
#include <string.h>

void attn_adamw_update(float *p, const float *g, float *m, float *v, int64_t n, int64_t t, double lr,
                       const attn_adamw_config *c, int decay) {
    const double b1 = c->beta1, b2 = c->beta2, bc1 = 1.0 - pow(b1, (double)t), bc2s = sqrt(1.0 - pow(b2, (double)t));
    const double step = lr / bc1, keep = 1.0 - lr * (decay ? c->weight_decay : 0.0);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        const double gi = g[i];
        const double mi = b1 * m[i] + (1.0 - b1) * gi, vi = b2 * v[i] + (1.0 - b2) * gi * gi;
        m[i] = (float)mi, v[i] = (float)vi;
        p[i] = (float)((double)p[i] * keep - step * mi / (sqrt(vi) / bc2s + c->eps));
    }
}

typedef struct {
    attn_vit_trainer *t;
    double lr;
    const attn_adamw_config *c;
} attn__adamw_job;

/* parameters [lo, hi) (element-wise: the same bits for any split) */
static void attn__adamw_piece(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__adamw_job *j = (const attn__adamw_job *)p;
    attn_vit_trainer *t = j->t;
    (void)tid;
    for (int64_t i = lo; i < hi; i++) {
        const attn__vparam *q = &t->par[i];
        attn_adamw_update(t->p + q->off, t->g + q->off, t->m + q->off, t->v + q->off, q->numel, t->step, j->lr, j->c, q->decay);
    }
}

int attn_vit_trainer_adamw_step(attn_vit_trainer *t, double lr, const attn_adamw_config *c) {
    if (!t || !c) return attn_set_error(ATTN_E_INVALID, "adamw: NULL argument");
    if (!(lr >= 0.0) || !isfinite(lr)) return attn_set_error(ATTN_E_INVALID, "adamw: learning rate %g must be finite and >= 0", lr);
    if (!(c->beta1 >= 0.0 && c->beta1 < 1.0) || !(c->beta2 >= 0.0 && c->beta2 < 1.0) || !(c->eps > 0.0) ||
        !(c->weight_decay >= 0.0) || !isfinite(c->eps) || !isfinite(c->weight_decay))
        return attn_set_error(ATTN_E_INVALID, "adamw: betas must be in [0, 1), eps > 0, weight decay finite and >= 0");
    t->step++;
    attn__adamw_job j = {t, lr, c};
    attn__pool_for(t->np, 1, attn__pool_threads(20.0 * (double)t->numel, 0), attn__adamw_piece, &j);
    return ATTN_OK;
}

typedef struct {
    const float *g;
    int64_t n;
    double *parts;
} attn__sq_job;

static void attn__sq_piece(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__sq_job *j = (const attn__sq_job *)p;
    (void)tid;
    for (int64_t b = lo; b < hi; b++) {
        const int64_t a = b * ATTN__CLIP_BLOCK, e = a + ATTN__CLIP_BLOCK < j->n ? a + ATTN__CLIP_BLOCK : j->n;
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = a; i < e; i++) s += (double)j->g[i] * j->g[i];
        j->parts[b] = s;
    }
}

double attn_vit_trainer_clip_grad_norm(attn_vit_trainer *t, double max_norm) {
    if (!t) return NAN;
    /* sums of squares of fixed 16384-element blocks (vectorised), added in order: the same bits
     * for any thread count */
    const int64_t nb = (t->numel + ATTN__CLIP_BLOCK - 1) / ATTN__CLIP_BLOCK;
    double s = 0.0;
    attn__sq_job j = {t->g, t->numel, t->sqpart};
    attn__pool_for(nb, 1, attn__pool_threads(2.0 * (double)t->numel, 0), attn__sq_piece, &j);
    for (int64_t b = 0; b < nb; b++) s += t->sqpart[b];
    const double total = sqrt(s);
    if (!isfinite(total) || !(max_norm > 0.0) || !isfinite(max_norm) || total <= max_norm) return total;
    const float k = (float)(max_norm / (total + 1e-6));
    for (int64_t i = 0; i < t->numel; i++) t->g[i] *= k;
    return total;
}

double attn_lr_warmup_cosine(int64_t s, int64_t warmup, int64_t total, double base) {
    if (warmup > 0 && s < warmup) return base * (double)(s + 1) / (double)warmup;
    if (warmup < 0) warmup = 0;
    const double span = total - warmup > 1 ? (double)(total - warmup) : 1.0;
    double f = (double)(s - warmup) / span;
    f = f < 0 ? 0 : f > 1 ? 1 : f;
    return base * 0.5 * (1.0 + cos(M_PI * f));
}

static uint64_t attn__splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void attn_train_rng_seed(attn_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = stream * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL;
    attn_rng_seed(r, seed ^ attn__splitmix(&x));
}

uint64_t attn_rng_below(attn_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    for (;;) { /* Lemire 2019: reject the low products that would bias the result */
        const unsigned __int128 m = (unsigned __int128)attn_rng_next(r) * n;
        const uint64_t lo = (uint64_t)m;
        if (lo >= n || lo >= (-n) % n) return (uint64_t)(m >> 64);
    }
}

void attn_shuffle(int64_t *perm, int64_t n, attn_rng *r) {
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        const int64_t j = (int64_t)attn_rng_below(r, (uint64_t)i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

void attn_train_make_batch(float *pixels, const uint8_t *images, int64_t S, const int64_t *idx, int64_t B,
                           float mean, float std, int pad, attn_rng *rng) {
    const float bg = (0.0f * (1.0f / 255.0f) - mean) / std;
    for (int64_t b = 0; b < B; b++) {
        const uint8_t *src = images + idx[b] * S * S;
        float *dst = pixels + b * S * S;
        int64_t oy = 0, ox = 0;
        int flip = 0;
        if (rng) {
            if (pad > 0) {
                oy = (int64_t)attn_rng_below(rng, 2 * (uint64_t)pad + 1) - pad;
                ox = (int64_t)attn_rng_below(rng, 2 * (uint64_t)pad + 1) - pad;
            }
            flip = (int)(attn_rng_next(rng) >> 63);
        }
        for (int64_t y = 0; y < S; y++)
            for (int64_t x = 0; x < S; x++) { /* crop, then flip: output column x shows cropped column S-1-x */
                const int64_t sy = y + oy, sx = (flip ? S - 1 - x : x) + ox;
                dst[y * S + x] = sy < 0 || sy >= S || sx < 0 || sx >= S ? bg : ((float)src[sy * S + sx] * (1.0f / 255.0f) - mean) / std;
            }
    }
}
