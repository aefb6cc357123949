/* Reference scaled dot-product attention: plain loops, float64 accumulation, one query
 * row at a time; bfloat16 / float16 inputs are read exactly (widened to double). This is the oracle the optimised kernels are tested against; keep it
 * obviously right rather than fast. */
#include "attention/sdpa_internal.h"
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* element (a, b, c, d) of a float32 / bfloat16 / float16 view, as double (exact) */
static inline double attn__ref_ld(const attn_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    const int64_t o = a * t->stride[0] + b * t->stride[1] + c * t->stride[2] + d * t->stride[3];
    if (t->dtype == ATTN_F32) return (double)((const float *)t->data)[o];
    return (double)attn__load_f32((const uint16_t *)t->data + o, t->dtype);
}

int attn_sdpa_reference(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                        const attn_tensor *v, const attn_sdpa_params *p) {
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    attn__mask_view mv;
    ATTN_TRY(attn__sdpa_check_ex(out, weights, q, k, v, p, 1, &mv, &B, &H, &Hkv, &Lq, &Lk, &D, &Dv));
    const double scale = (p && p->has_scale) ? (double)p->scale : 1.0 / sqrt((double)(D > 0 ? D : 1));
    const int64_t group = Hkv > 0 ? H / Hkv : 1;
    int nt = (p && p->n_threads > 0) ? p->n_threads : attn_get_num_threads();
    const int64_t rows = B * H * Lq;
    if (rows == 0 || (Dv == 0 && !weights && !(p && p->lse))) return ATTN_OK; /* nothing to write (zero-size output) */
    if (nt > rows) nt = (int)rows;
    if (nt < 1) nt = 1;

    /* per-thread scratch: scores (double), visibility flags, accumulator */
    size_t per = (size_t)(Lk > 0 ? Lk : 1);
    double *sc_all = (double *)malloc(sizeof(double) * per * (size_t)nt);
    unsigned char *vis_all = (unsigned char *)malloc(per * (size_t)nt);
    double *acc_all = (double *)malloc(sizeof(double) * (size_t)(Dv > 0 ? Dv : 1) * (size_t)nt);
    if (!sc_all || !vis_all || !acc_all) {
        free(sc_all);
        free(vis_all);
        free(acc_all);
        return attn_set_error(ATTN_E_NOMEM, "sdpa reference: out of memory for %lld keys", (long long)Lk);
    }

#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const int tid = attn__omp_tid();
        double *sc = sc_all + per * (size_t)tid;
        unsigned char *vis = vis_all + per * (size_t)tid;
        double *acc = acc_all + (size_t)(Dv > 0 ? Dv : 1) * (size_t)tid;
        int64_t b = r / (H * Lq), h = (r / Lq) % H, i = r % Lq;
        int64_t hk = h / group;
        int64_t lo, hi;
        attn__key_range(p, b, i, Lq, Lk, &lo, &hi);
        double mx = -INFINITY;
        for (int64_t j = 0; j < Lk; j++) {
            double mval;
            vis[j] = (unsigned char)(j >= lo && j < hi && attn__mask_allows(&mv, b, h, i, j, &mval));
            if (!vis[j]) continue;
            double dot = 0.0;
            for (int64_t d = 0; d < D; d++)
                dot += attn__ref_ld(q, b, h, i, d) * attn__ref_ld(k, b, hk, j, d);
            sc[j] = dot * scale + mval;
            if (sc[j] > mx) mx = sc[j];
        }
        double sum = 0.0;
        for (int64_t j = 0; j < Lk; j++) {
            if (!vis[j]) continue;
            sc[j] = exp(sc[j] - mx);
            sum += sc[j];
        }
        /* sum >= 1 whenever a key is visible (the max term is exp(0)); 0 for an empty row */
        double inv = sum > 0.0 ? 1.0 / sum : 0.0;
        if (p && p->lse)
            *attn__lse_at(p->lse, b, h, i) = sum > 0.0 ? (float)(mx + log(sum)) : -INFINITY;
        for (int64_t d = 0; d < Dv; d++) acc[d] = 0.0;
        for (int64_t j = 0; j < Lk; j++) {
            double w = vis[j] ? sc[j] * inv : 0.0;
            if (weights) *attn__f32_at4(weights, b, h, i, j) = (float)w;
            if (w == 0.0) continue;
            for (int64_t d = 0; d < Dv; d++) acc[d] += w * attn__ref_ld(v, b, hk, j, d);
        }
        const size_t oes = attn_dtype_size(out->dtype);
        for (int64_t d = 0; d < Dv; d++) /* one rounding to float32, then (bf16 / f16 out) one to the output dtype */
            attn__store_f32((char *)out->data + (size_t)(b * out->stride[0] + h * out->stride[1] + i * out->stride[2] +
                                                         d * out->stride[3]) * oes,
                            out->dtype, (float)acc[d]);
    }
    free(sc_all);
    free(vis_all);
    free(acc_all);
    /* the inputs were scanned above; this only reports a result that does not fit out's dtype
     * (e.g. a float16 out above 65504) */
    return attn__sdpa_post_check(out, weights, q, k, v, 0);
}
