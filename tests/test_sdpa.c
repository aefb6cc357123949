/* Scaled dot-product attention: the reference path against an independent float64
 * implementation written here (full score matrix + explicit keep-matrix), the issue's
 * hand-checked cases, and the error contract. */
#include "attn.h"
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- independent float64 oracle -------------------------------------------------- */
typedef struct {
    int has_mask, mask_bool;
    int mdims[4];          /* mask extents broadcast to [B,H,Lq,Lk]; 1 = broadcast */
    const unsigned char *mb;
    const float *mf;
    int causal;
    int64_t window;
    const int64_t *klen;
    double scale;          /* 0 -> 1/sqrt(D) */
} oracle_opts;

/* q,k,v contiguous [B,H,Lq,D], [B,Hkv,Lk,D], [B,Hkv,Lk,Dv]; out64 [B,H,Lq,Dv], w64 [B,H,Lq,Lk] */
static void oracle(double *out64, double *w64, const float *q, const float *k, const float *v, int B, int H, int Hkv,
                   int Lq, int Lk, int D, int Dv, const oracle_opts *o) {
    double scale = o->scale != 0 ? o->scale : 1.0 / sqrt((double)D);
    double *s = malloc(sizeof(double) * (size_t)(Lk > 0 ? Lk : 1));
    int *keep = malloc(sizeof(int) * (size_t)(Lk > 0 ? Lk : 1));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            int hk = h / (H / Hkv);
            for (int i = 0; i < Lq; i++) {
                int any = 0;
                for (int j = 0; j < Lk; j++) {
                    int kp = 1;
                    double add = 0;
                    if (o->causal && !(j <= i + Lk - Lq)) kp = 0;
                    if (o->window > 0 && !(j > i + Lk - Lq - o->window && j <= i + Lk - Lq)) kp = 0;
                    if (o->klen && j >= o->klen[b]) kp = 0;
                    if (o->has_mask) {
                        int idx[4] = {b, h, i, j}, off = 0;
                        for (int d = 0; d < 4; d++) off = off * o->mdims[d] + (o->mdims[d] == 1 ? 0 : idx[d]);
                        if (o->mask_bool) {
                            if (!o->mb[off]) kp = 0;
                        } else {
                            if (o->mf[off] == -INFINITY || o->mf[off] <= -FLT_MAX) kp = 0;
                            else add = o->mf[off];
                        }
                    }
                    keep[j] = kp;
                    if (kp) {
                        double dot = 0;
                        for (int d = 0; d < D; d++)
                            dot += (double)q[(((size_t)b * H + h) * Lq + i) * D + d] *
                                   (double)k[(((size_t)b * Hkv + hk) * Lk + j) * D + d];
                        s[j] = dot * scale + add;
                        any = 1;
                    }
                }
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < Lk; j++)
                    if (keep[j] && s[j] > mx) mx = s[j];
                for (int j = 0; j < Lk; j++)
                    if (keep[j]) sum += exp(s[j] - mx);
                for (int e = 0; e < Dv; e++) out64[(((size_t)b * H + h) * Lq + i) * Dv + e] = 0;
                for (int j = 0; j < Lk; j++) {
                    double w = (any && keep[j]) ? exp(s[j] - mx) / sum : 0.0;
                    if (w64) w64[(((size_t)b * H + h) * Lq + i) * Lk + j] = w;
                    for (int e = 0; e < Dv; e++)
                        out64[(((size_t)b * H + h) * Lq + i) * Dv + e] += w * v[(((size_t)b * Hkv + hk) * Lk + j) * Dv + e];
                }
            }
        }
    free(s);
    free(keep);
}

static uint64_t seed = 0x9E3779B97F4A7C15ULL;

/* One random case: compares out and weights of attn_sdpa_reference (and attn_sdpa) with the oracle.
 * Tolerance: 1e-6 x max|ref| (float32 output rounding of float64 sums; inputs are O(1)). */
static void random_case(int B, int H, int Hkv, int Lq, int Lk, int D, int Dv, int mask_kind, int mask_ndim, int causal,
                        int64_t window, int use_klen, int transpose_inputs) {
    size_t nq = (size_t)B * H * Lq * D, nk = (size_t)B * Hkv * Lk * D, nv = (size_t)B * Hkv * Lk * Dv;
    size_t no = (size_t)B * H * Lq * Dv, nw = (size_t)B * H * Lq * Lk;
    float *q = malloc(4 * nq + 4), *k = malloc(4 * nk + 4), *v = malloc(4 * nv + 4);
    float *out = malloc(4 * no + 4), *w = malloc(4 * nw + 4);
    double *o64 = malloc(8 * no + 8), *w64 = malloc(8 * nw + 8);
    attn_test_fill_uniform(q, nq, -2, 2, &seed);
    attn_test_fill_uniform(k, nk, -2, 2, &seed);
    attn_test_fill_uniform(v, nv, -1, 1, &seed);
    oracle_opts o;
    memset(&o, 0, sizeof o);
    o.causal = causal;
    o.window = window;
    int64_t klen[8];
    for (int b = 0; b < B; b++) klen[b] = (b * 7 + 3) % (Lk + 1);
    if (use_klen) o.klen = klen;
    int full[4] = {B, H, Lq, Lk};
    int64_t mshape[4];
    size_t mn = 1;
    unsigned char *mb = NULL;
    float *mf = NULL;
    attn_tensor mask;
    if (mask_kind) {
        o.has_mask = 1;
        o.mask_bool = mask_kind == 1;
        for (int d = 0; d < 4; d++) {
            /* broadcast over B and H when mask_ndim < 4; keep Lq, Lk full */
            o.mdims[d] = (d >= 4 - mask_ndim) ? full[d] : 1;
            if (d == 1 && mask_ndim == 4) o.mdims[d] = 1; /* a [B,1,Lq,Lk] mask */
        }
        for (int d = 0; d < mask_ndim; d++) {
            mshape[d] = o.mdims[4 - mask_ndim + d];
            mn *= (size_t)mshape[d];
        }
        if (o.mask_bool) {
            mb = malloc(mn);
            float *r = malloc(4 * mn);
            attn_test_fill_uniform(r, mn, 0, 1, &seed);
            for (size_t i = 0; i < mn; i++) mb[i] = r[i] < 0.7f;
            free(r);
            o.mb = mb;
            attn_tensor_make(&mask, mb, ATTN_BOOL, mask_ndim, mshape);
        } else {
            mf = malloc(4 * mn);
            attn_test_fill_uniform(mf, mn, -3, 3, &seed);
            for (size_t i = 0; i < mn; i += 5) mf[i] = -INFINITY;
            for (size_t i = 2; i < mn; i += 11) mf[i] = -FLT_MAX;
            o.mf = mf;
            attn_tensor_make(&mask, mf, ATTN_F32, mask_ndim, mshape);
        }
    }
    oracle(o64, w64, q, k, v, B, H, Hkv, Lq, Lk, D, Dv, &o);

    attn_tensor tq = attn_tensor_f32_4d(q, B, H, Lq, D), tk = attn_tensor_f32_4d(k, B, Hkv, Lk, D);
    attn_tensor tv = attn_tensor_f32_4d(v, B, Hkv, Lk, Dv), tw = attn_tensor_f32_4d(w, B, H, Lq, Lk);
    attn_tensor to = attn_tensor_f32_4d(out, B, H, Lq, Dv);
    float *qt = NULL, *ot = NULL;
    if (transpose_inputs) {
        /* q stored as [B, Lq, H, D] and out as [B, Lq, H, Dv]: strided views */
        qt = malloc(4 * nq + 4);
        ot = malloc(4 * no + 4);
        attn_tensor src = tq;
        float *base = qt;
        attn_tensor st = attn_tensor_f32_4d(base, B, Lq, H, D), sv;
        attn_tensor_transpose(&sv, &st, 1, 2);
        attn_tensor_copy(&sv, &src);
        tq = sv;
        attn_tensor ost = attn_tensor_f32_4d(ot, B, Lq, H, Dv);
        attn_tensor_transpose(&to, &ost, 1, 2);
    }
    attn_sdpa_params p = attn_sdpa_params_default();
    p.mask = mask_kind ? &mask : NULL;
    p.is_causal = causal;
    p.window = window;
    p.key_lengths = use_klen ? klen : NULL;
    p.impl = ATTN_IMPL_REFERENCE;
    char what[256];
    snprintf(what, sizeof what, "B%d H%d Hkv%d Lq%d Lk%d D%d Dv%d mask%d/%dd causal%d win%lld klen%d T%d", B, H, Hkv, Lq, Lk,
             D, Dv, mask_kind, mask_ndim, causal, (long long)window, use_klen, transpose_inputs);
    int rc = attn_sdpa_reference(&to, &tw, &tq, &tk, &tv, &p);
    CHECK(rc == 0, "%s: rc %d %s", what, rc, attn_last_error());
    float *ocontig = out;
    if (transpose_inputs) { /* gather out back to [B,H,Lq,Dv] */
        ocontig = malloc(4 * no + 4);
        attn_tensor dst = attn_tensor_f32_4d(ocontig, B, H, Lq, Dv);
        attn_tensor_copy(&dst, &to);
    }
    double ref_max = 0;
    for (size_t i = 0; i < no; i++) ref_max = fmax(ref_max, fabs(o64[i]));
    double err = attn_test_max_abs_diff_f64(ocontig, o64, no);
    CHECK(err <= 1e-6 * fmax(ref_max, 1e-30) + 1e-30, "%s: out max err %.3g (ref max %.3g)", what, err, ref_max);
    double werr = attn_test_max_abs_diff_f64(w, w64, nw);
    CHECK(werr <= 1e-6, "%s: weights max err %.3g", what, werr);
    CHECK(!attn_test_has_nonfinite(ocontig, no) && !attn_test_has_nonfinite(w, nw), "%s: non-finite output", what);
    /* weight rows sum to 1, or to 0 for empty rows */
    int rows_ok = 1;
    for (size_t r = 0; r < (size_t)B * H * Lq; r++) {
        double s = 0, s64 = 0;
        for (int j = 0; j < Lk; j++) {
            s += w[r * Lk + j];
            s64 += w64[r * Lk + j];
        }
        if (fabs(s - s64) > 1e-5 || !(fabs(s - 1) < 1e-5 || s == 0)) rows_ok = 0;
    }
    CHECK(rows_ok, "%s: weight rows must sum to 1 (or 0 when empty)", what);
    /* attn_sdpa (default impl) without weights gives the same output */
    if (!transpose_inputs) {
        float *out2 = malloc(4 * no + 4);
        attn_tensor to2 = attn_tensor_f32_4d(out2, B, H, Lq, Dv);
        attn_sdpa_params p2 = p;
        p2.impl = ATTN_IMPL_DEFAULT;
        CHECK_OK(attn_sdpa(&to2, NULL, &tq, &tk, &tv, &p2));
        double e2 = attn_test_max_abs_diff(out2, out, no);
        CHECK(e2 <= 2e-6 * fmax(ref_max, 1e-30), "%s: default impl differs from reference by %.3g", what, e2);
        free(out2);
    }
    if (ocontig != out) free(ocontig);
    free(q); free(k); free(v); free(out); free(w); free(o64); free(w64); free(mb); free(mf); free(qt); free(ot);
}

/* ---- the hand-checked cases ---------------------------------------------- */

static void run1(float *out, float *w, const float *q, const float *k, const float *v, int Lq, int Lk, int D,
                 const attn_sdpa_params *p) {
    attn_tensor tq = attn_tensor_f32_4d((float *)q, 1, 1, Lq, D), tk = attn_tensor_f32_4d((float *)k, 1, 1, Lk, D);
    attn_tensor tv = attn_tensor_f32_4d((float *)v, 1, 1, Lk, D), to = attn_tensor_f32_4d(out, 1, 1, Lq, D);
    attn_tensor tw = attn_tensor_f32_4d(w, 1, 1, Lq, Lk);
    CHECK_OK(attn_sdpa(&to, &tw, &tq, &tk, &tv, p));
}

static void test_top_left_keep_mask(void) {
    enum { L = 8, D = 4 };
    float q[L * D], k[L * D], v[L * D], out[L * D], w[L * L];
    attn_test_fill_uniform(q, L * D, -1, 1, &seed);
    attn_test_fill_uniform(k, L * D, -1, 1, &seed);
    attn_test_fill_uniform(v, L * D, -1, 1, &seed);
    unsigned char m[L * L];
    for (int i = 0; i < L; i++)
        for (int j = 0; j < L; j++) m[i * L + j] = i < 4 && j < 4;
    int64_t ms[2] = {L, L};
    attn_tensor mt;
    attn_tensor_make(&mt, m, ATTN_BOOL, 2, ms);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.mask = &mt;
    run1(out, w, q, k, v, L, L, D, &p);
    CHECK(!attn_test_has_nonfinite(out, L * D), "top-left mask: no NaN");
    int zero = 1, sum_ok = 1, outside = 1;
    for (int i = 4; i < L; i++)
        for (int e = 0; e < D; e++) zero &= out[i * D + e] == 0.0f;
    for (int i = 4; i < L; i++)
        for (int j = 0; j < L; j++) zero &= w[i * L + j] == 0.0f;
    for (int i = 0; i < 4; i++) {
        double s = 0;
        for (int j = 0; j < L; j++) {
            s += w[i * L + j];
            if (j >= 4 && w[i * L + j] != 0.0f) outside = 0;
        }
        if (fabs(s - 1) > 1e-6) sum_ok = 0;
    }
    CHECK(zero, "top-left mask: rows 4-7 give output 0 and weights 0");
    CHECK(sum_ok && outside, "top-left mask: rows 0-3 sum to 1 over keys 0-3 only");
}

static void test_bool_equals_float(void) {
    enum { Lq = 2, Lk = 3, D = 4 };
    float q[Lq * D], k[Lk * D], v[Lk * D], o1[Lq * D], o2[Lq * D], w1[Lq * Lk], w2[Lq * Lk];
    attn_test_fill_uniform(q, sizeof q / 4, -1, 1, &seed);
    attn_test_fill_uniform(k, sizeof k / 4, -1, 1, &seed);
    attn_test_fill_uniform(v, sizeof v / 4, -1, 1, &seed);
    unsigned char mb[3] = {1, 1, 0};
    float mf[3] = {0, 0, -INFINITY};
    int64_t s1[1] = {3};
    attn_tensor tb, tf;
    attn_tensor_make(&tb, mb, ATTN_BOOL, 1, s1);
    attn_tensor_make(&tf, mf, ATTN_F32, 1, s1);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.mask = &tb;
    run1(o1, w1, q, k, v, Lq, Lk, D, &p);
    p.mask = &tf;
    run1(o2, w2, q, k, v, Lq, Lk, D, &p);
    CHECK(attn_test_max_abs_diff(o1, o2, Lq * D) == 0.0, "bool [T,T,F] equals float [0,0,-inf] (outputs)");
    CHECK(attn_test_max_abs_diff(w1, w2, Lq * Lk) == 0.0, "bool [T,T,F] equals float [0,0,-inf] (weights)");
    CHECK(w1[2] == 0.0f && w1[5] == 0.0f, "masked key has weight 0");
}

static void test_float_mask_shift(void) {
    /* scores s0, s1 with softmax [0.1070, 0.8930]: s1 - s0 = ln(0.8930/0.1070).
     * Adding the float mask [1, 2] raises the gap by 1: [0.0422, 0.9578]. */
    float gap = (float)log(0.8930 / 0.1070);
    float q[1] = {1.0f}, k[2] = {0.0f, gap}, v[2] = {0.0f, 0.0f}, out[1], w[2];
    float mf[2] = {1.0f, 2.0f};
    int64_t s1[1] = {2};
    attn_tensor tf;
    attn_tensor_make(&tf, mf, ATTN_F32, 1, s1);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.has_scale = 1;
    p.scale = 1.0f;
    run1(out, w, q, k, v, 1, 2, 1, &p);
    CHECK_NEAR(w[0], 0.1070, 5e-5, "weights before mask [0]");
    CHECK_NEAR(w[1], 0.8930, 5e-5, "weights before mask [1]");
    p.mask = &tf;
    run1(out, w, q, k, v, 1, 2, 1, &p);
    CHECK_NEAR(w[0], 0.0422, 5e-5, "float mask [1,2] -> [0.0422, ...]");
    CHECK_NEAR(w[1], 0.9578, 5e-5, "float mask [1,2] -> [..., 0.9578]");
}

static void test_causal_rows(void) {
    enum { Lq = 2, Lk = 5, D = 3 };
    float q[Lq * D], k[Lk * D], v[Lk * D], out[Lq * D], w[Lq * Lk], out2[Lq * D], w2[Lq * Lk];
    attn_test_fill_uniform(q, sizeof q / 4, -1, 1, &seed);
    attn_test_fill_uniform(k, sizeof k / 4, -1, 1, &seed);
    attn_test_fill_uniform(v, sizeof v / 4, -1, 1, &seed);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.is_causal = 1;
    run1(out, w, q, k, v, Lq, Lk, D, &p);
    const char *want[2] = {"11110", "11111"};
    for (int i = 0; i < Lq; i++) {
        char got[6];
        for (int j = 0; j < Lk; j++) got[j] = w[i * Lk + j] > 0 ? '1' : '0';
        got[5] = 0;
        CHECK(strcmp(got, want[i]) == 0, "causal 2x5 row %d: got %s want %s", i, got, want[i]);
    }
    /* is_causal equals an explicit lower-triangular (bottom-right) keep-mask */
    unsigned char m[Lq * Lk];
    for (int i = 0; i < Lq; i++)
        for (int j = 0; j < Lk; j++) m[i * Lk + j] = j <= i + Lk - Lq;
    int64_t ms[2] = {Lq, Lk};
    attn_tensor mt;
    attn_tensor_make(&mt, m, ATTN_BOOL, 2, ms);
    attn_sdpa_params p2 = attn_sdpa_params_default();
    p2.mask = &mt;
    run1(out2, w2, q, k, v, Lq, Lk, D, &p2);
    CHECK(attn_test_max_abs_diff(out, out2, Lq * D) == 0.0 && attn_test_max_abs_diff(w, w2, Lq * Lk) == 0.0,
          "is_causal equals the explicit keep-mask");
}

static void test_empty_rows_and_extremes(void) {
    enum { Lq = 3, Lk = 4, D = 2 };
    float q[Lq * D], k[Lk * D], v[Lk * D], out[Lq * D], w[Lq * Lk];
    attn_test_fill_uniform(q, sizeof q / 4, -1, 1, &seed);
    attn_test_fill_uniform(k, sizeof k / 4, -1, 1, &seed);
    attn_test_fill_uniform(v, sizeof v / 4, -1, 1, &seed);
    /* row 0: all -inf; row 1: all -FLT_MAX; row 2: real scores near -6e4 */
    float mf[Lq * Lk];
    for (int j = 0; j < Lk; j++) {
        mf[0 * Lk + j] = -INFINITY;
        mf[1 * Lk + j] = -FLT_MAX;
        mf[2 * Lk + j] = -6e4f - (float)j;
    }
    int64_t ms[2] = {Lq, Lk};
    attn_tensor mt;
    attn_tensor_make(&mt, mf, ATTN_F32, 2, ms);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.mask = &mt;
    p.has_scale = 1;
    p.scale = 0.0f; /* scores = mask only */
    run1(out, w, q, k, v, Lq, Lk, D, &p);
    CHECK(!attn_test_has_nonfinite(out, Lq * D) && !attn_test_has_nonfinite(w, Lq * Lk), "extremes: no NaN/inf");
    int zero = 1;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < Lk; j++) zero &= w[i * Lk + j] == 0.0f;
    for (int i = 0; i < 2; i++)
        for (int e = 0; e < D; e++) zero &= out[i * D + e] == 0.0f;
    CHECK(zero, "rows masked by -inf / -FLT_MAX give 0");
    /* -6e4 - j: softmax of [0, -1, -2, -3] */
    double z = 1 + exp(-1) + exp(-2) + exp(-3);
    for (int j = 0; j < Lk; j++) CHECK_NEAR(w[2 * Lk + j], exp(-j) / z, 1e-6, "scores near -6e4 are real scores");
    /* combined: causal + a mask that hides the only causal key of row 0 */
    unsigned char mb[Lq * Lk];
    memset(mb, 1, sizeof mb);
    mb[0 * Lk + 0] = 0; mb[0 * Lk + 1] = 0; /* Lk - Lq = 1: row 0 sees keys 0, 1 */
    attn_tensor mbt;
    attn_tensor_make(&mbt, mb, ATTN_BOOL, 2, ms);
    attn_sdpa_params p2 = attn_sdpa_params_default();
    p2.mask = &mbt;
    p2.is_causal = 1;
    run1(out, w, q, k, v, Lq, Lk, D, &p2);
    CHECK(out[0] == 0.0f && out[1] == 0.0f && w[0] == 0 && w[1] == 0 && w[2] == 0 && w[3] == 0,
          "causal combined with a bool mask that empties row 0 gives 0");
    CHECK(!attn_test_has_nonfinite(out, Lq * D), "combined masks: no NaN");
    /* key_lengths = 0 for the batch row: everything empty */
    int64_t kl[1] = {0};
    attn_sdpa_params p3 = attn_sdpa_params_default();
    p3.key_lengths = kl;
    run1(out, w, q, k, v, Lq, Lk, D, &p3);
    CHECK(attn_test_max_abs(out, Lq * D) == 0.0 && attn_test_max_abs(w, Lq * Lk) == 0.0, "key_lengths 0: all zero");
    /* window 1 with Lq == Lk: each query sees only itself -> out = v[i] */
    float q2[Lk * D], out3[Lk * D], w3[Lk * Lk];
    attn_test_fill_uniform(q2, sizeof q2 / 4, -1, 1, &seed);
    attn_sdpa_params p4 = attn_sdpa_params_default();
    p4.window = 1;
    run1(out3, w3, q2, k, v, Lk, Lk, D, &p4);
    CHECK(attn_test_max_abs_diff(out3, v, Lk * D) < 1e-7, "window 1: each query returns its own value");
}

static void test_errors(void) {
    float buf[64] = {0};
    attn_tensor q = attn_tensor_f32_4d(buf, 1, 3, 2, 4), k = attn_tensor_f32_4d(buf, 1, 2, 2, 4);
    attn_tensor v = attn_tensor_f32_4d(buf, 1, 2, 2, 4), o = attn_tensor_f32_4d(buf + 32, 1, 3, 2, 4);
    CHECK_ERR(attn_sdpa(&o, NULL, &q, &k, &v, NULL), ATTN_E_SHAPE); /* 3 heads, 2 kv heads */
    CHECK(strstr(attn_last_error(), "multiple") != NULL, "message names the H %% Hkv problem: %s", attn_last_error());
    q = attn_tensor_f32_4d(buf, 1, 2, 2, 4);
    k = attn_tensor_f32_4d(buf, 1, 2, 2, 3);
    o = attn_tensor_f32_4d(buf + 32, 1, 2, 2, 4);
    CHECK_ERR(attn_sdpa(&o, NULL, &q, &k, &v, NULL), ATTN_E_SHAPE); /* head_dim mismatch */
    k = attn_tensor_f32_4d(buf, 1, 2, 2, 4);
    attn_tensor qi = q;
    qi.dtype = ATTN_F64;
    CHECK_ERR(attn_sdpa(&o, NULL, &qi, &k, &v, NULL), ATTN_E_DTYPE);
    int32_t mi[4] = {1, 1, 1, 1};
    int64_t ms[2] = {2, 2};
    attn_tensor mt;
    attn_tensor_make(&mt, mi, ATTN_I32, 2, ms);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.mask = &mt;
    CHECK_ERR(attn_sdpa(&o, NULL, &q, &k, &v, &p), ATTN_E_DTYPE);
    CHECK(strstr(attn_last_error(), "mask") != NULL, "int mask rejected with a message about the mask");
    float mf[6] = {0};
    int64_t ms3[2] = {2, 3};
    attn_tensor_make(&mt, mf, ATTN_F32, 2, ms3);
    CHECK_ERR(attn_sdpa(&o, NULL, &q, &k, &v, &p), ATTN_E_SHAPE); /* not broadcastable */
    float mn[4] = {0, NAN, 0, 0};
    attn_tensor_make(&mt, mn, ATTN_F32, 2, ms);
    CHECK_ERR(attn_sdpa(&o, NULL, &q, &k, &v, &p), ATTN_E_RANGE);
    p = attn_sdpa_params_default();
    p.window = -1;
    CHECK_ERR(attn_sdpa(&o, NULL, &q, &k, &v, &p), ATTN_E_INVALID);
    p.window = 0;
    int64_t kl[1] = {3};
    p.key_lengths = kl;
    CHECK_ERR(attn_sdpa(&o, NULL, &q, &k, &v, &p), ATTN_E_INVALID);
    p.key_lengths = NULL;
    p.has_scale = 1;
    p.scale = NAN;
    CHECK_ERR(attn_sdpa(&o, NULL, &q, &k, &v, &p), ATTN_E_INVALID);
    CHECK_ERR(attn_sdpa(NULL, NULL, &q, &k, &v, NULL), ATTN_E_INVALID);
    attn_tensor q3 = attn_tensor_f32_3d(buf, 2, 2, 4);
    CHECK_ERR(attn_sdpa(&o, NULL, &q3, &k, &v, NULL), ATTN_E_SHAPE);
    float qn[16] = {0};
    qn[5] = NAN;
    attn_tensor qq = attn_tensor_f32_4d(qn, 1, 2, 2, 4);
    CHECK_ERR(attn_sdpa(&o, NULL, &qq, &k, &v, NULL), ATTN_E_RANGE);
    /* non-finite k / v through the default (fused) path: named in the error */
    float kn[16] = {0}, vn[16] = {0};
    kn[9] = INFINITY;
    attn_tensor kk = attn_tensor_f32_4d(kn, 1, 2, 2, 4), vv = attn_tensor_f32_4d(vn, 1, 2, 2, 4);
    CHECK_ERR(attn_sdpa(&o, NULL, &q, &kk, &v, NULL), ATTN_E_RANGE);
    CHECK(strstr(attn_last_error(), "k[0, 1, 0, 1]") != NULL, "inf in k is named: %s", attn_last_error());
    vn[14] = NAN;
    CHECK_ERR(attn_sdpa(&o, NULL, &q, &k, &vv, NULL), ATTN_E_RANGE);
    CHECK(strstr(attn_last_error(), "v[0, 1, 1, 2]") != NULL, "NaN in v is named: %s", attn_last_error());
    attn_sdpa_params pr = attn_sdpa_params_default();
    pr.impl = ATTN_IMPL_REFERENCE;
    CHECK_ERR(attn_sdpa(&o, NULL, &q, &k, &vv, &pr), ATTN_E_RANGE);
    /* scores beyond float32 range: the fused path reports the overflow instead of returning NaN;
     * the float64 reference computes them */
    float qb[4] = {1e20f, 0, 0, 0}, kb[8] = {1e20f, 0, 0, 0, 0, 0, 0, 0}, vb[8] = {1, 2, 3, 4, 5, 6, 7, 8}, ob[4];
    attn_tensor tq1 = attn_tensor_f32_4d(qb, 1, 1, 1, 4), tk1 = attn_tensor_f32_4d(kb, 1, 1, 2, 4);
    attn_tensor tv1 = attn_tensor_f32_4d(vb, 1, 1, 2, 4), to1 = attn_tensor_f32_4d(ob, 1, 1, 1, 4);
    attn_sdpa_params pf = attn_sdpa_params_default();
    pf.impl = ATTN_IMPL_FUSED;
    CHECK_ERR(attn_sdpa(&to1, NULL, &tq1, &tk1, &tv1, &pf), ATTN_E_RANGE);
    CHECK(strstr(attn_last_error(), "overflow") != NULL, "overflow is reported: %s", attn_last_error());
    CHECK_OK(attn_sdpa(&to1, NULL, &tq1, &tk1, &tv1, &pr));
    CHECK(ob[0] == 1.0f && ob[3] == 4.0f, "reference: the huge score takes all the weight");
    /* the tiled path (Lq > 4) reports a NaN in a key it reads; keys past key_lengths are never
     * read and cannot change the result, so a NaN there is not an error */
    {
        enum { TL = 40, TD = 8 };
        static float tq[TL * TD], tk[TL * TD], tv[TL * TD], to[TL * TD];
        attn_test_fill_uniform(tq, TL * TD, -1, 1, &seed);
        attn_test_fill_uniform(tk, TL * TD, -1, 1, &seed);
        attn_test_fill_uniform(tv, TL * TD, -1, 1, &seed);
        tk[33 * TD + 5] = NAN;
        attn_tensor a = attn_tensor_f32_4d(tq, 1, 1, TL, TD), bk = attn_tensor_f32_4d(tk, 1, 1, TL, TD);
        attn_tensor cv = attn_tensor_f32_4d(tv, 1, 1, TL, TD), d = attn_tensor_f32_4d(to, 1, 1, TL, TD);
        CHECK_ERR(attn_sdpa(&d, NULL, &a, &bk, &cv, NULL), ATTN_E_RANGE);
        CHECK(strstr(attn_last_error(), "k[0, 0, 33, 5]") != NULL, "tiled path names the NaN key: %s", attn_last_error());
        int64_t kl1[1] = {30};
        attn_sdpa_params pk = attn_sdpa_params_default();
        pk.key_lengths = kl1;
        CHECK_OK(attn_sdpa(&d, NULL, &a, &bk, &cv, &pk));
        CHECK(!attn_test_has_nonfinite(to, TL * TD), "NaN in an unread (padded) key leaves the result finite");
    }
    /* zero-size tensors with huge other extents (valid NumPy files) return at once */
    int64_t zq[4] = {1, 1, 5, 0}, zk[4] = {1, 1, (int64_t)1 << 40, 0}, zo[4] = {1, 1, 5, 0};
    attn_tensor tzq, tzk, tzo;
    CHECK_OK(attn_tensor_make(&tzq, NULL, ATTN_F32, 4, zq));
    CHECK_OK(attn_tensor_make(&tzk, NULL, ATTN_F32, 4, zk));
    CHECK_OK(attn_tensor_make(&tzo, NULL, ATTN_F32, 4, zo));
    CHECK_OK(attn_sdpa(&tzo, NULL, &tzq, &tzk, &tzk, NULL));
    CHECK_OK(attn_sdpa(&tzo, NULL, &tzq, &tzk, &tzk, &pr));
    int64_t zh[4] = {1, (int64_t)1 << 40, 7, 0};
    CHECK_OK(attn_tensor_make(&tzq, NULL, ATTN_F32, 4, zh));
    CHECK_OK(attn_sdpa(&tzq, NULL, &tzq, &tzq, &tzq, NULL));
    int64_t zs[4] = {1, 4, 0, (int64_t)1 << 62}, big[2] = {(int64_t)1 << 62, 4};
    CHECK_OK(attn_tensor_make(&tzq, NULL, ATTN_F32, 4, zs));
    CHECK_ERR(attn_tensor_make(&tzq, NULL, ATTN_F32, 2, big), ATTN_E_INVALID);
    CHECK(strcmp(attn_status_str(ATTN_E_SHAPE), "shape mismatch") == 0, "status strings");
}

int main(void) {
    attn_test_name = "sdpa";
    test_top_left_keep_mask();
    test_bool_equals_float();
    test_float_mask_shift();
    test_causal_rows();
    test_empty_rows_and_extremes();
    test_errors();
    /* random shapes: Lq != Lk, GQA, Dv != D, B > 1, H > 1, masks, causal, window, padding, strides */
    random_case(1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0);
    random_case(2, 4, 2, 5, 9, 8, 6, 0, 0, 0, 0, 0, 0);
    random_case(2, 6, 3, 7, 7, 16, 16, 1, 2, 0, 0, 0, 0);
    random_case(3, 4, 1, 6, 11, 5, 7, 2, 4, 0, 0, 0, 0);
    random_case(2, 4, 4, 9, 4, 8, 8, 1, 3, 1, 0, 0, 0);
    random_case(2, 2, 1, 4, 10, 8, 3, 0, 0, 1, 0, 1, 0);
    random_case(1, 8, 2, 13, 13, 32, 32, 2, 2, 1, 4, 0, 1);
    random_case(2, 3, 3, 12, 20, 4, 9, 0, 0, 0, 5, 1, 1);
    random_case(4, 2, 2, 3, 17, 64, 64, 2, 1, 1, 0, 1, 0);
    random_case(1, 4, 2, 20, 6, 8, 8, 1, 4, 1, 3, 0, 0); /* Lq > Lk: early rows empty under causal */
    random_case(2, 2, 2, 0, 5, 4, 4, 0, 0, 0, 0, 0, 0);  /* empty query */
    random_case(2, 2, 2, 3, 0, 4, 4, 0, 0, 0, 0, 0, 0);  /* no keys: zeros */
    return attn_test_finish();
}
