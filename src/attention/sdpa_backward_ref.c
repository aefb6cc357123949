/* Float64 reference of the SDPA backward (attn_sdpa_backward_reference): plain loops, one query
 * row at a time; the row's scores, probabilities (the materialised row of P), dP and dS live in
 * double, the softmax and Δ_i = sum_j P_ij dP_ij are recomputed from q, k and v (out and lse are
 * validated but not used), and dk / dv of one (b, kv head) are accumulated in double over the
 * group's query heads. The oracle the tiled kernel is tested against: obviously right, not fast. */
#include "attention/sdpa_backward_internal.h"
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static inline double attn__bwr_ld(const attn_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return (double)*attn__f32_at4(t, a, b, c, d);
}

int attn_sdpa_backward_reference(attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q,
                                 const attn_tensor *k, const attn_tensor *v, const attn_tensor *out,
                                 const attn_tensor *lse, const attn_tensor *dout, const attn_sdpa_params *p) {
    attn__bwctx c;
    ATTN_TRY(attn__sdpa_backward_check(&c, dq, dk, dv, q, k, v, out, lse, dout, p));
    const int64_t B = c.B, Hkv = c.Hkv, Lq = c.Lq, Lk = c.Lk, D = c.D, Dv = c.Dv, group = c.group;
    const double scale = (p && p->has_scale) ? (double)p->scale : 1.0 / sqrt((double)(D > 0 ? D : 1));
    const attn__mask_view *mv = &c.mv;
    const int64_t items = B * Hkv;
    int nt = (p && p->n_threads > 0) ? p->n_threads : attn_get_num_threads();
    if (nt > items) nt = (int)items;
    if (nt < 1) nt = 1;
    const size_t per = (size_t)(Lk > 0 ? Lk : 1) * (size_t)(D + Dv + 4) + (size_t)D + 1;
    double *work = (double *)malloc(sizeof(double) * per * (size_t)nt);
    unsigned char *vis_all = (unsigned char *)malloc((size_t)(Lk > 0 ? Lk : 1) * (size_t)nt);
    if (!work || !vis_all) {
        free(work);
        free(vis_all);
        return attn_set_error(ATTN_E_NOMEM, "sdpa backward reference: out of memory for %lld keys", (long long)Lk);
    }

#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t it = 0; it < items; it++) {
        const int tid = attn__omp_tid();
        const int64_t b = it / Hkv, hk = it % Hkv;
        double *dK = work + per * (size_t)tid;               /* [Lk][D] */
        double *dV = dK + (size_t)Lk * (size_t)D;            /* [Lk][Dv] */
        double *pr = dV + (size_t)Lk * (size_t)Dv;           /* P row [Lk] */
        double *dp = pr + Lk;                                /* dP, then dS row [Lk] */
        double *dqr = dp + Lk;                               /* [D] */
        unsigned char *vis = vis_all + (size_t)(Lk > 0 ? Lk : 1) * (size_t)tid;
        memset(dK, 0, sizeof(double) * (size_t)(Lk * (D + Dv)));
        for (int64_t h = hk * group; h < (hk + 1) * group; h++)
            for (int64_t i = 0; i < Lq; i++) {
                int64_t lo, hi;
                attn__key_range(p, b, i, Lq, Lk, &lo, &hi);
                double mx = -INFINITY;
                for (int64_t j = 0; j < Lk; j++) {
                    double mval;
                    vis[j] = (unsigned char)(j >= lo && j < hi && attn__mask_allows(mv, b, h, i, j, &mval));
                    if (!vis[j]) continue;
                    double dot = 0.0;
                    for (int64_t d = 0; d < D; d++) dot += attn__bwr_ld(q, b, h, i, d) * attn__bwr_ld(k, b, hk, j, d);
                    pr[j] = dot * scale + mval;
                    if (pr[j] > mx) mx = pr[j];
                }
                double sum = 0.0;
                for (int64_t j = 0; j < Lk; j++)
                    if (vis[j]) sum += (pr[j] = exp(pr[j] - mx));
                for (int64_t d = 0; d < D; d++) dqr[d] = 0.0;
                if (sum > 0.0) { /* a row with no visible key: no gradient at all */
                    double delta = 0.0;
                    for (int64_t j = 0; j < Lk; j++) {
                        if (!vis[j]) continue;
                        pr[j] /= sum;
                        double g = 0.0;
                        for (int64_t e = 0; e < Dv; e++) g += attn__bwr_ld(dout, b, h, i, e) * attn__bwr_ld(v, b, hk, j, e);
                        dp[j] = g;
                        delta += pr[j] * g; /* = dout_i · out_i in exact arithmetic */
                    }
                    for (int64_t j = 0; j < Lk; j++) {
                        if (!vis[j]) continue;
                        const double ds = pr[j] * (dp[j] - delta);
                        for (int64_t d = 0; d < D; d++) {
                            dqr[d] += ds * attn__bwr_ld(k, b, hk, j, d);
                            dK[j * D + d] += ds * attn__bwr_ld(q, b, h, i, d);
                        }
                        for (int64_t e = 0; e < Dv; e++) dV[j * Dv + e] += pr[j] * attn__bwr_ld(dout, b, h, i, e);
                    }
                }
                for (int64_t d = 0; d < D; d++) *attn__f32_at4(dq, b, h, i, d) = (float)(dqr[d] * scale);
            }
        for (int64_t j = 0; j < Lk; j++) {
            for (int64_t d = 0; d < D; d++) *attn__f32_at4(dk, b, hk, j, d) = (float)(dK[j * D + d] * scale);
            for (int64_t e = 0; e < Dv; e++) *attn__f32_at4(dv, b, hk, j, e) = (float)dV[j * Dv + e];
        }
    }
    free(work);
    free(vis_all);
    return attn__sdpa_backward_post_check(dq, dk, dv);
}
