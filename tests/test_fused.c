/* The fused SDPA kernel (src/attention/sdpa_fused*.c) against attn_sdpa_reference: random shapes,
 * masks, causal / window / key_lengths, GQA, Dv != D, strided views, decode (Lq = 1 against a long
 * KV cache) with split-K, on every SIMD path this CPU supports plus the portable one, with
 * several tile sizes so that small shapes still cross many tile boundaries. Also: the accuracy
 * of each path's vectorised exp, ATTN_SIMD handling and attn_sdpa's dispatch.
 *
 * Tolerances: out within 2e-6 x max|out_ref| (fp32 accumulation against the float64 reference),
 * weights within 2e-6 absolute. */
#include "attn.h"
#include "attention/fused_internal.h"
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed = 0xC0FFEE1234567ULL;
static int n_paths;
static int paths[3];
static const char *path_names[3] = {"portable", "avx2", "avx512"};
static double worst_out_err, worst_w_err; /* relative / absolute, for the log */

/* ---------------------------------------------------------------- vectorised exp */

static void test_exp_accuracy(void) {
    const int64_t n = 1 << 21;
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    /* a dense grid over [-87, 0] plus uniform random points (all within the kernel's range) */
    for (int64_t i = 0; i < n / 2; i++) x[i] = (float)(-87.0 * (double)i / (double)(n / 2 - 1));
    attn_test_fill_uniform(x + n / 2, (size_t)(n - n / 2), -87.0f, 0.0f, &seed);
    for (int pi = 0; pi < n_paths; pi++) {
        const attn__fused_kernels *kern = paths[pi] == ATTN__SIMD_AVX512 ? attn__fused_kernels_avx512()
                                          : paths[pi] == ATTN__SIMD_AVX2 ? attn__fused_kernels_avx2()
                                                                         : attn__fused_kernels_portable();
        kern->exp_n(y, x, n);
        double worst = 0;
        float worst_x = 0;
        for (int64_t i = 0; i < n; i++) {
            double ref = exp((double)x[i]);
            double rel = fabs((double)y[i] - ref) / ref;
            if (!(rel <= worst)) {
                worst = rel;
                worst_x = x[i];
            }
        }
        printf("exp[%s]: max relative error %.3g at x = %.7g over [-87, 0] (%lld points; bound %.2g)\n",
               path_names[paths[pi]], worst, (double)worst_x, (long long)n, ATTN__FUSED_EXP_MAX_REL_ERR);
        CHECK(worst <= ATTN__FUSED_EXP_MAX_REL_ERR, "exp[%s]: max relative error %.3g > %.3g at x = %.9g",
              path_names[paths[pi]], worst, ATTN__FUSED_EXP_MAX_REL_ERR, (double)worst_x);
        float sp[7] = {0.0f, -INFINITY, -100.0f, -87.5f, -87.0f, -1e30f, -FLT_MAX}, sy[7];
        kern->exp_n(sy, sp, 7);
        CHECK(sy[0] == 1.0f, "exp[%s](0) = %.9g, want exactly 1", path_names[paths[pi]], (double)sy[0]);
        CHECK(sy[1] == 0.0f && sy[2] == 0.0f && sy[3] == 0.0f && sy[5] == 0.0f && sy[6] == 0.0f,
              "exp[%s] of -inf / -100 / -87.5 / -1e30 / -FLT_MAX must be exactly 0", path_names[paths[pi]]);
        CHECK(sy[4] >= FLT_MIN && fabs(sy[4] - exp(-87.0)) <= ATTN__FUSED_EXP_MAX_REL_ERR * exp(-87.0), "exp[%s](-87) = %.9g (normal)",
              path_names[paths[pi]], (double)sy[4]);
    }
    free(x);
    free(y);
}

/* ---------------------------------------------------------------- random cases */

typedef struct {
    int B, H, Hkv, Lq, Lk, D, Dv;
    int mask_kind;    /* 0 none, 1 bool, 2 float */
    int mask_shape;   /* 0 [Lq,Lk], 1 [B,1,Lq,Lk], 2 [H,Lq,Lk], 3 [1,Lk] (key mask), 4 [B,H,Lq,Lk] */
    int empty_rows;   /* mask some query rows out entirely */
    int causal;
    int64_t window;
    int klen;         /* 1: key_lengths */
    int layout;       /* 0 contiguous, 1 [B,L,H,D] memory (split heads), 2 last dim strided */
    int weights;      /* also request the weights */
} tcase;

/* A view [d0, d1, d2, d3] of mem with the given layout; mem holds d0*d1*d2*d3 floats. */
static attn_tensor make_view(float *mem, int layout, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    attn_tensor t, tt;
    if (layout == 1) { /* memory [d0, d2, d1, d3] */
        t = attn_tensor_f32_4d(mem, d0, d2, d1, d3);
        attn_tensor_transpose(&tt, &t, 1, 2);
        return tt;
    }
    if (layout == 2) { /* memory [d0, d1, d3, d2]: last dim strided */
        t = attn_tensor_f32_4d(mem, d0, d1, d3, d2);
        attn_tensor_transpose(&tt, &t, 2, 3);
        return tt;
    }
    return attn_tensor_f32_4d(mem, d0, d1, d2, d3);
}

/* copy a strided view out to a contiguous buffer */
static void gather(float *dst, const attn_tensor *src) {
    attn_tensor d = attn_tensor_f32_4d(dst, src->shape[0], src->shape[1], src->shape[2], src->shape[3]);
    attn_tensor_copy(&d, src);
}

typedef struct {
    int path, block_q, block_k, split, row_max_lq;
} variant;

static void run_case(const tcase *c, const variant *vars, int n_vars) {
    const int B = c->B, H = c->H, Hkv = c->Hkv, Lq = c->Lq, Lk = c->Lk, D = c->D, Dv = c->Dv;
    size_t nq = (size_t)B * H * Lq * D, nk = (size_t)B * Hkv * Lk * D, nv = (size_t)B * Hkv * Lk * Dv;
    size_t no = (size_t)B * H * Lq * Dv, nw = (size_t)B * H * Lq * Lk;
    float *q = malloc(4 * nq + 4), *k = malloc(4 * nk + 4), *v = malloc(4 * nv + 4);
    float *qm = malloc(4 * nq + 4), *km = malloc(4 * nk + 4), *vm = malloc(4 * nv + 4);
    float *oref = malloc(4 * no + 4), *wref = malloc(4 * nw + 4);
    float *om = malloc(4 * no + 4), *wm = malloc(4 * nw + 4), *og = malloc(4 * no + 4), *wg = malloc(4 * nw + 4);
    attn_test_fill_uniform(q, nq, -2, 2, &seed);
    attn_test_fill_uniform(k, nk, -2, 2, &seed);
    attn_test_fill_uniform(v, nv, -1, 1, &seed);
    attn_tensor cq = attn_tensor_f32_4d(q, B, H, Lq, D), ck = attn_tensor_f32_4d(k, B, Hkv, Lk, D);
    attn_tensor cv = attn_tensor_f32_4d(v, B, Hkv, Lk, Dv);
    attn_tensor tq = make_view(qm, c->layout, B, H, Lq, D), tk = make_view(km, c->layout, B, Hkv, Lk, D);
    attn_tensor tv = make_view(vm, c->layout, B, Hkv, Lk, Dv);
    attn_tensor_copy(&tq, &cq);
    attn_tensor_copy(&tk, &ck);
    attn_tensor_copy(&tv, &cv);
    attn_tensor to = make_view(om, c->layout, B, H, Lq, Dv);
    /* weights: contiguous, or (layout 2) a transposed view with a strided last dim */
    attn_tensor tw = make_view(wm, c->layout == 2 ? 2 : 0, B, H, Lq, Lk);

    /* mask */
    int64_t mshape[4];
    int mnd;
    switch (c->mask_shape) {
    case 1: mnd = 4; mshape[0] = B; mshape[1] = 1; mshape[2] = Lq; mshape[3] = Lk; break;
    case 2: mnd = 3; mshape[0] = H; mshape[1] = Lq; mshape[2] = Lk; break;
    case 3: mnd = 2; mshape[0] = 1; mshape[1] = Lk; break;
    case 4: mnd = 4; mshape[0] = B; mshape[1] = H; mshape[2] = Lq; mshape[3] = Lk; break;
    default: mnd = 2; mshape[0] = Lq; mshape[1] = Lk; break;
    }
    size_t mn = 1;
    for (int d = 0; d < mnd; d++) mn *= (size_t)mshape[d];
    const int64_t mrows = c->mask_shape == 3 ? 1 : (int64_t)(mn / (size_t)(Lk > 0 ? Lk : 1)); /* rows of Lk */
    unsigned char *mb = NULL;
    float *mf = NULL;
    attn_tensor mask;
    if (c->mask_kind == 1) {
        mb = malloc(mn + 1);
        float *r = malloc(4 * mn + 4);
        attn_test_fill_uniform(r, mn, 0, 1, &seed);
        for (size_t i = 0; i < mn; i++) mb[i] = r[i] < 0.7f;
        if (c->empty_rows && c->mask_shape != 3)
            for (int64_t rr = 0; rr < mrows; rr++)
                if (rr % 5 == 2) memset(mb + rr * Lk, 0, (size_t)Lk);
        free(r);
        attn_tensor_make(&mask, mb, ATTN_BOOL, mnd, mshape);
    } else if (c->mask_kind == 2) {
        mf = malloc(4 * mn + 4);
        attn_test_fill_uniform(mf, mn, -3, 3, &seed);
        for (size_t i = 0; i < mn; i += 5) mf[i] = -INFINITY;
        for (size_t i = 2; i < mn; i += 11) mf[i] = -FLT_MAX;
        if (c->empty_rows && c->mask_shape != 3)
            for (int64_t rr = 0; rr < mrows; rr++)
                if (rr % 5 == 2)
                    for (int64_t j = 0; j < Lk; j++) mf[rr * Lk + j] = (j & 1) ? -INFINITY : -FLT_MAX;
        attn_tensor_make(&mask, mf, ATTN_F32, mnd, mshape);
    }
    int64_t klen[16];
    for (int b = 0; b < B; b++) klen[b] = b == 0 ? Lk : (b * 7 + 3) % (Lk + 1);

    attn_sdpa_params p = attn_sdpa_params_default();
    p.mask = c->mask_kind ? &mask : NULL;
    p.is_causal = c->causal;
    p.window = c->window;
    p.key_lengths = c->klen ? klen : NULL;
    p.impl = ATTN_IMPL_REFERENCE;
    char what[256];
    snprintf(what, sizeof what, "B%d H%d Hkv%d Lq%d Lk%d D%d Dv%d mask%d/%d%s causal%d win%lld klen%d layout%d w%d", B, H,
             Hkv, Lq, Lk, D, Dv, c->mask_kind, c->mask_shape, c->empty_rows ? "e" : "", c->causal,
             (long long)c->window, c->klen, c->layout, c->weights);

    /* reference on contiguous inputs */
    attn_tensor ro = attn_tensor_f32_4d(oref, B, H, Lq, Dv), rw = attn_tensor_f32_4d(wref, B, H, Lq, Lk);
    int rc = attn_sdpa_reference(&ro, &rw, &cq, &ck, &cv, &p);
    CHECK(rc == 0, "%s: reference rc %d %s", what, rc, attn_last_error());
    const double omax = attn_test_max_abs(oref, no);

    for (int vi = 0; vi < n_vars; vi++) {
        attn__fused_opts o = attn__fused_opts_default();
        o.path = vars[vi].path;
        o.block_q = vars[vi].block_q;
        o.block_k = vars[vi].block_k;
        o.split = vars[vi].split;
        o.row_max_lq = vars[vi].row_max_lq;
        for (size_t i = 0; i < no; i++) om[i] = NAN; /* everything must be written */
        for (size_t i = 0; i < nw; i++) wm[i] = NAN;
        attn_sdpa_params pf = p;
        pf.impl = ATTN_IMPL_FUSED;
        pf.n_threads = 1 + vi % 3;
        rc = attn__sdpa_fused_ex(&to, c->weights ? &tw : NULL, &tq, &tk, &tv, &pf, &o);
        CHECK(rc == 0, "%s [%s bq%d bk%d split%d row%d]: rc %d %s", what, path_names[o.path], o.block_q, o.block_k,
              o.split, o.row_max_lq, rc, attn_last_error());
        if (rc != 0) continue;
        gather(og, &to);
        double err = attn_test_max_abs_diff(og, oref, no);
        double rel = err / (omax > 0 ? omax : 1.0);
        if (rel > worst_out_err) worst_out_err = rel;
        if (getenv("FUSED_VERBOSE") && rel > 4e-7) /* FUSED_VERBOSE=1: list the larger errors */
            printf("  %s [%s bq%d bk%d split%d]: rel err %.3g\n", what, path_names[o.path], o.block_q, o.block_k,
                   o.split, rel);
        CHECK(err <= 2e-6 * omax + 1e-30 && !attn_test_has_nonfinite(og, no),
              "%s [%s bq%d bk%d split%d row%d]: out max err %.3g (%.3g relative to max|out| %.3g)", what,
              path_names[o.path], o.block_q, o.block_k, o.split, o.row_max_lq, err, rel, omax);
        if (c->weights) {
            gather(wg, &tw);
            double werr = attn_test_max_abs_diff(wg, wref, nw);
            if (werr > worst_w_err) worst_w_err = werr;
            CHECK(werr <= 2e-6 && !attn_test_has_nonfinite(wg, nw), "%s [%s bq%d bk%d]: weights max err %.3g", what,
                  path_names[o.path], o.block_q, o.block_k, werr);
            /* masked / invisible keys have weight exactly 0 where the reference has 0 */
            int zero_ok = 1;
            for (size_t i = 0; i < nw; i++)
                if (wref[i] == 0.0f && wg[i] != 0.0f) zero_ok = 0;
            CHECK(zero_ok, "%s [%s]: invisible keys must have weight exactly 0", what, path_names[o.path]);
        }
        /* empty rows give exactly 0 */
        int empty_ok = 1;
        for (size_t r = 0; r < (size_t)B * H * Lq; r++) {
            int ref_zero = 1;
            for (int e = 0; e < Dv; e++) ref_zero &= oref[r * Dv + e] == 0.0f;
            if (ref_zero)
                for (int e = 0; e < Dv; e++) empty_ok &= og[r * Dv + e] == 0.0f;
        }
        CHECK(empty_ok, "%s [%s]: rows with no visible key must be exactly 0", what, path_names[o.path]);
    }
    free(q); free(k); free(v); free(qm); free(km); free(vm); free(oref); free(wref);
    free(om); free(wm); free(og); free(wg); free(mb); free(mf);
}

/* default tiles, tiny tiles (many blocks, partial tiles everywhere), forced split-K, tile path
 * forced for small Lq and the row path forced for larger Lq — on every path */
static int make_variants(variant *v, int lq) {
    int n = 0;
    for (int pi = 0; pi < n_paths; pi++) {
        int path = paths[pi];
        v[n++] = (variant){path, 0, 0, 0, 0};
        v[n++] = (variant){path, 16, 7, 0, -1};
        v[n++] = (variant){path, 32, 13, 3, -1};
        if (lq <= 40) v[n++] = (variant){path, 0, 5, 2, 1 << 30}; /* row path for every query row */
    }
    return n;
}

static void rc_(int B, int H, int Hkv, int Lq, int Lk, int D, int Dv, int mk, int ms, int er, int causal, int64_t win,
                int klen, int layout, int weights) {
    tcase c = {B, H, Hkv, Lq, Lk, D, Dv, mk, ms, er, causal, win, klen, layout, weights};
    variant v[16];
    int n = make_variants(v, Lq);
    run_case(&c, v, n);
}

static void test_random_cases(void) {
    /*   B  H Hkv  Lq   Lk    D   Dv mk ms er ca win kl lay w */
    rc_(1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1);              /* L = 1 */
    rc_(1, 2, 1, 1, 1, 8, 8, 0, 0, 0, 1, 0, 0, 0, 1);
    rc_(2, 4, 2, 67, 67, 64, 64, 0, 0, 0, 0, 0, 0, 0, 1);          /* GQA, L not a tile multiple */
    rc_(1, 2, 2, 100, 100, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1);          /* D = 1, causal */
    rc_(1, 3, 1, 45, 70, 8, 5, 1, 0, 1, 1, 0, 0, 0, 1);            /* bool mask with empty rows, causal, Dv != D */
    rc_(2, 2, 1, 33, 33, 80, 80, 2, 1, 1, 0, 0, 1, 1, 1);          /* float mask [B,1,Lq,Lk], klen, transposed */
    rc_(1, 2, 2, 40, 52, 128, 128, 2, 2, 0, 1, 9, 0, 2, 1);        /* float mask [H,Lq,Lk], window, strided last dim */
    rc_(2, 2, 2, 29, 29, 256, 256, 1, 3, 0, 0, 0, 1, 0, 0);        /* key mask [1,Lk], D = 256 */
    rc_(1, 4, 2, 70, 70, 64, 48, 1, 4, 1, 1, 16, 1, 1, 1);         /* everything at once */
    rc_(1, 2, 1, 130, 130, 64, 64, 0, 0, 0, 1, 0, 0, 0, 0);        /* causal, 3 query tiles */
    rc_(1, 1, 1, 20, 150, 16, 16, 0, 0, 0, 1, 0, 0, 0, 1);         /* Lq < Lk causal (bottom-right) */
    rc_(1, 2, 1, 90, 30, 24, 24, 2, 0, 0, 1, 5, 0, 0, 1);          /* Lq > Lk causal: leading rows empty */
    rc_(3, 2, 1, 3, 200, 64, 64, 1, 1, 1, 0, 0, 1, 2, 1);          /* decode-like Lq = 3, bool, klen, strided */
    rc_(1, 1, 1, 17, 17, 3, 7, 2, 0, 1, 0, 0, 0, 1, 1);            /* odd D / Dv */
    rc_(2, 2, 2, 0, 5, 4, 4, 0, 0, 0, 0, 0, 0, 0, 1);              /* empty query */
    rc_(2, 2, 2, 3, 0, 4, 4, 0, 0, 0, 0, 0, 0, 0, 1);              /* no keys: zeros */
    rc_(2, 2, 1, 70, 3, 4, 4, 0, 0, 0, 0, 0, 1, 0, 1);             /* few keys, klen */
    rc_(1, 2, 2, 21, 21, 8, 0, 0, 0, 0, 1, 0, 0, 0, 1);            /* Dv = 0: weights only */
    rc_(1, 2, 1, 333, 333, 64, 64, 0, 0, 0, 1, 0, 0, 1, 0);        /* larger: many default-size tiles */
    rc_(1, 1, 1, 300, 410, 128, 128, 2, 0, 1, 0, 50, 0, 0, 1);     /* sliding window, skipped tiles */
    rc_(1, 2, 2, 150, 150, 256, 64, 1, 4, 0, 1, 0, 1, 2, 0);       /* D = 256, Dv = 64 */
}

/* decode: Lq = 1 against a long KV cache, automatic and forced split-K on every path */
static void test_decode(void) {
    for (int pi = 0; pi < n_paths; pi++) {
        variant v[4] = {{paths[pi], 0, 0, 0, 0}, {paths[pi], 0, 0, 5, 0}, {paths[pi], 0, 0, 1, 0},
                        {paths[pi], 0, 64, 3, -1}};
        tcase c1 = {1, 4, 2, 1, 3000, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0};
        run_case(&c1, v, 4);
        tcase c2 = {2, 2, 1, 1, 3000, 128, 128, 2, 1, 0, 1, 0, 1, 1, 0}; /* float mask, causal, klen, strided */
        run_case(&c2, v, 4);
        tcase c3 = {1, 1, 1, 1, 3000, 80, 80, 1, 3, 0, 0, 1000, 0, 2, 0}; /* key mask, window, last dim strided */
        run_case(&c3, v, 4);
        tcase c4 = {1, 2, 1, 1, 3000, 64, 64, 0, 0, 0, 1, 0, 0, 0, 1}; /* with weights (no split) */
        run_case(&c4, v, 2);
    }
}

/* is_causal must equal the explicit bottom-right keep-mask bit for bit (the skipped tiles and the
 * masked ones contribute exactly nothing), in the tile path across many blocks */
static void test_causal_equals_mask(void) {
    enum { Lq = 77, Lk = 93, D = 16 };
    float *q = malloc(4 * Lq * D), *k = malloc(4 * Lk * D), *v = malloc(4 * Lk * D);
    float *o1 = malloc(4 * Lq * D), *o2 = malloc(4 * Lq * D), *w1 = malloc(4 * Lq * Lk), *w2 = malloc(4 * Lq * Lk);
    unsigned char *m = malloc(Lq * Lk);
    attn_test_fill_uniform(q, Lq * D, -2, 2, &seed);
    attn_test_fill_uniform(k, Lk * D, -2, 2, &seed);
    attn_test_fill_uniform(v, Lk * D, -1, 1, &seed);
    for (int i = 0; i < Lq; i++)
        for (int j = 0; j < Lk; j++) m[i * Lk + j] = j <= i + Lk - Lq;
    int64_t ms[2] = {Lq, Lk};
    attn_tensor mt;
    attn_tensor_make(&mt, m, ATTN_BOOL, 2, ms);
    attn_tensor tq = attn_tensor_f32_4d(q, 1, 1, Lq, D), tk = attn_tensor_f32_4d(k, 1, 1, Lk, D);
    attn_tensor tv = attn_tensor_f32_4d(v, 1, 1, Lk, D);
    attn_tensor to1 = attn_tensor_f32_4d(o1, 1, 1, Lq, D), to2 = attn_tensor_f32_4d(o2, 1, 1, Lq, D);
    attn_tensor tw1 = attn_tensor_f32_4d(w1, 1, 1, Lq, Lk), tw2 = attn_tensor_f32_4d(w2, 1, 1, Lq, Lk);
    for (int pi = 0; pi < n_paths; pi++) {
        attn__fused_opts o = attn__fused_opts_default();
        o.path = paths[pi];
        o.block_q = 16;
        o.block_k = 10;
        attn_sdpa_params p1 = attn_sdpa_params_default(), p2 = attn_sdpa_params_default();
        p1.is_causal = 1;
        p2.mask = &mt;
        CHECK_OK(attn__sdpa_fused_ex(&to1, &tw1, &tq, &tk, &tv, &p1, &o));
        CHECK_OK(attn__sdpa_fused_ex(&to2, &tw2, &tq, &tk, &tv, &p2, &o));
        CHECK(attn_test_max_abs_diff(o1, o2, Lq * D) == 0.0 && attn_test_max_abs_diff(w1, w2, Lq * Lk) == 0.0,
              "[%s] is_causal equals the explicit keep-mask exactly", path_names[paths[pi]]);
    }
    free(q); free(k); free(v); free(o1); free(o2); free(w1); free(w2); free(m);
}

/* ATTN_SIMD selects the path for attn_sdpa (read on every call); the reference ignores it */
static void test_env_and_dispatch(void) {
    enum { B = 1, H = 2, L = 37, D = 24 };
    float q[B * H * L * D], k[B * H * L * D], v[B * H * L * D], oref[B * H * L * D], o[B * H * L * D];
    attn_test_fill_uniform(q, sizeof q / 4, -1, 1, &seed);
    attn_test_fill_uniform(k, sizeof k / 4, -1, 1, &seed);
    attn_test_fill_uniform(v, sizeof v / 4, -1, 1, &seed);
    attn_tensor tq = attn_tensor_f32_4d(q, B, H, L, D), tk = attn_tensor_f32_4d(k, B, H, L, D);
    attn_tensor tv = attn_tensor_f32_4d(v, B, H, L, D), tr = attn_tensor_f32_4d(oref, B, H, L, D);
    attn_tensor to = attn_tensor_f32_4d(o, B, H, L, D);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.is_causal = 1;
    p.impl = ATTN_IMPL_REFERENCE;
    CHECK_OK(attn_sdpa(&tr, NULL, &tq, &tk, &tv, &p));
    const double omax = attn_test_max_abs(oref, sizeof oref / 4);
    const char *env_names[3] = {"portable", "avx2", "avx512"};
    for (int pi = 0; pi < n_paths; pi++) {
        setenv("ATTN_SIMD", env_names[paths[pi]], 1);
        CHECK(attn__fused_resolve_path(ATTN__SIMD_AUTO) == paths[pi], "ATTN_SIMD=%s selects that path",
              env_names[paths[pi]]);
        for (int impl = 0; impl < 3; impl += 2) { /* DEFAULT and FUSED */
            p.impl = (attn_impl)impl;
            memset(o, 0, sizeof o);
            CHECK_OK(attn_sdpa(&to, NULL, &tq, &tk, &tv, &p));
            CHECK(attn_test_max_abs_diff(o, oref, sizeof o / 4) <= 2e-6 * omax, "ATTN_SIMD=%s impl %d matches",
                  env_names[paths[pi]], impl);
        }
    }
    setenv("ATTN_SIMD", "sse9", 1);
    p.impl = ATTN_IMPL_FUSED;
    CHECK_ERR(attn_sdpa(&to, NULL, &tq, &tk, &tv, &p), ATTN_E_INVALID);
    CHECK(strstr(attn_last_error(), "ATTN_SIMD") != NULL, "bad ATTN_SIMD is named in the message: %s",
          attn_last_error());
    p.impl = ATTN_IMPL_REFERENCE;
    CHECK_OK(attn_sdpa(&to, NULL, &tq, &tk, &tv, &p)); /* the reference does not look at ATTN_SIMD */
    setenv("ATTN_SIMD", "auto", 1);
    CHECK(attn__fused_resolve_path(ATTN__SIMD_AUTO) == attn__fused_best_path(), "ATTN_SIMD=auto = best path");
    unsetenv("ATTN_SIMD");
    CHECK(attn__fused_resolve_path(ATTN__SIMD_AUTO) == attn__fused_best_path(), "unset ATTN_SIMD = best path");
    for (int path = 1; path <= 2; path++)
        if (!attn__fused_path_supported(path))
            CHECK_ERR(attn__fused_resolve_path(path), ATTN_E_UNSUPPORTED);
    /* the fused path validates like the reference */
    p.impl = ATTN_IMPL_FUSED;
    p.window = -1;
    CHECK_ERR(attn_sdpa(&to, NULL, &tq, &tk, &tv, &p), ATTN_E_INVALID);
    p.window = 0;
    p.impl = (attn_impl)7;
    CHECK_ERR(attn_sdpa(&to, NULL, &tq, &tk, &tv, &p), ATTN_E_INVALID);
    attn_tensor bad = attn_tensor_f32_4d(o, B, H, L, D - 1);
    p.impl = ATTN_IMPL_DEFAULT;
    CHECK_ERR(attn_sdpa(&bad, NULL, &tq, &tk, &tv, &p), ATTN_E_SHAPE);
}

/* Issue 11, fault 8: a masked key may have a q.k that overflows float32; it must not change the
 * result or raise an error, whichever mechanism masks it (bool mask, -inf or -FLT_MAX additive
 * mask, key_lengths, causal, window), on every path, tile size, split and the row path. Keys
 * 3e38 in every component (q in [0.5, 1], scale 1/4: q.k >= 16 x 0.125 x 3e38 = 6e38 > FLT_MAX) sit
 * where they are masked; query
 * rows that can see one are zero (score 0). Reference: attn_sdpa_reference (float64, skips
 * masked keys); same tolerance as the random cases. An overflow at a visible key still fails. */
static void test_masked_overflow(void) {
    enum { Lq = 70, Lk = 70, D = 16, Dv = 8 };
    float *q = malloc(sizeof(float) * Lq * D), *k = malloc(sizeof(float) * Lk * D), *v = malloc(sizeof(float) * Lk * Dv);
    float *oref = malloc(sizeof(float) * Lq * Dv), *o = malloc(sizeof(float) * Lq * Dv);
    float *wref = malloc(sizeof(float) * Lq * Lk), *w = malloc(sizeof(float) * Lq * Lk);
    float *mf = malloc(sizeof(float) * Lq * Lk);
    unsigned char *mb = malloc((size_t)Lq * Lk);
    static const char *names[6] = {"bool mask", "-inf mask", "-FLT_MAX mask", "key_lengths", "causal", "window"};
    for (int kind = 0; kind < 6; kind++) {
        int64_t klen[1] = {Lk - 5};
        attn_sdpa_params p = attn_sdpa_params_default();
        attn_tensor mt;
        attn_test_fill_uniform(q, Lq * D, 0.5f, 1.0f, &seed);
        attn_test_fill_uniform(k, Lk * D, -1.0f, 1.0f, &seed);
        attn_test_fill_uniform(v, Lk * Dv, -1.0f, 1.0f, &seed);
        int huge[Lk];
        for (int j = 0; j < Lk; j++) huge[j] = kind == 3 ? j >= Lk - 5 : kind == 4 ? j >= Lk - 3 : kind == 5 ? j < 2 : j % 5 == 2;
        for (int j = 0; j < Lk; j++)
            if (huge[j])
                for (int d = 0; d < D; d++) k[j * D + d] = 3e38f;
        for (int i = 0; i < Lq; i++)
            for (int j = 0; j < Lk; j++) {
                int masked = huge[j] && (i % 7 != 0); /* rows i % 7 == 0 see everything (q = 0 there) */
                mb[i * Lk + j] = !masked;
                mf[i * Lk + j] = masked ? (kind == 2 ? -FLT_MAX : -INFINITY) : 0.25f * (float)((i + j) % 3);
            }
        if (kind <= 2) {
            int64_t ms[2] = {Lq, Lk};
            attn_tensor_make(&mt, kind == 0 ? (void *)mb : (void *)mf, kind == 0 ? ATTN_BOOL : ATTN_F32, 2, ms);
            p.mask = &mt;
            for (int i = 0; i < Lq; i += 7)
                for (int d = 0; d < D; d++) q[i * D + d] = 0.0f;
        } else if (kind == 3) {
            p.key_lengths = klen;
        } else if (kind == 4) {
            p.is_causal = 1;
            for (int i = Lq - 3; i < Lq; i++)
                for (int d = 0; d < D; d++) q[i * D + d] = 0.0f;
        } else {
            p.window = 4; /* rows 0..4 see key 0 or 1 */
            for (int i = 0; i < 6; i++)
                for (int d = 0; d < D; d++) q[i * D + d] = 0.0f;
        }
        attn_tensor qt = attn_tensor_f32_4d(q, 1, 1, Lq, D), kt = attn_tensor_f32_4d(k, 1, 1, Lk, D);
        attn_tensor vt = attn_tensor_f32_4d(v, 1, 1, Lk, Dv);
        attn_tensor ort = attn_tensor_f32_4d(oref, 1, 1, Lq, Dv), wrt = attn_tensor_f32_4d(wref, 1, 1, Lq, Lk);
        attn_tensor ot = attn_tensor_f32_4d(o, 1, 1, Lq, Dv), wt = attn_tensor_f32_4d(w, 1, 1, Lq, Lk);
        CHECK_OK(attn_sdpa_reference(&ort, &wrt, &qt, &kt, &vt, &p));
        double mref = attn_test_max_abs(oref, Lq * Dv);
        variant vs[16];
        int nv = make_variants(vs, 1);
        for (int vi = 0; vi < nv; vi++)
            for (int with_w = 0; with_w < 2; with_w++) {
                attn__fused_opts fo = attn__fused_opts_default();
                fo.path = vs[vi].path;
                fo.block_q = vs[vi].block_q;
                fo.block_k = vs[vi].block_k;
                fo.split = vs[vi].split;
                fo.row_max_lq = vs[vi].row_max_lq;
                int rc = attn__sdpa_fused_ex(&ot, with_w ? &wt : NULL, &qt, &kt, &vt, &p, &fo);
                CHECK(rc == 0, "masked overflow, %s, %s, variant %d%s: rc %d (%s)", names[kind], path_names[vs[vi].path], vi,
                      with_w ? ", weights" : "", rc, attn_last_error());
                if (rc) continue;
                double d = attn_test_max_abs_diff(o, oref, Lq * Dv);
                CHECK(d <= 2e-6 * mref && !attn_test_has_nonfinite(o, Lq * Dv), "masked overflow, %s, %s, variant %d: max|out - ref| %.3g",
                      names[kind], path_names[vs[vi].path], vi, d);
                if (with_w)
                    CHECK(attn_test_max_abs_diff(w, wref, Lq * Lk) <= 2e-6, "masked overflow, %s: weights", names[kind]);
            }
        /* the default dispatch, and a visible overflow still fails on both implementations */
        CHECK_OK(attn_sdpa(&ot, NULL, &qt, &kt, &vt, &p));
        for (int d = 0; d < D; d++) q[D + d] = 1.0f; /* row 1 is not zero; unmask row 1 everywhere */
        p.mask = NULL;
        p.key_lengths = NULL;
        p.is_causal = 0;
        p.window = 0;
        CHECK_ERR(attn_sdpa(&ot, NULL, &qt, &kt, &vt, &p), ATTN_E_RANGE);
    }
    /* a non-finite key is an invalid input even where it is masked: both implementations refuse it */
    {
        attn_test_fill_uniform(k, Lk * D, 0.0f, 1.0f, &seed);
        k[3 * D] = NAN;
        int64_t klen[1] = {2};
        attn_sdpa_params p = attn_sdpa_params_default();
        p.key_lengths = klen;
        attn_tensor qt = attn_tensor_f32_4d(q, 1, 1, Lq, D), kt = attn_tensor_f32_4d(k, 1, 1, Lk, D);
        attn_tensor vt = attn_tensor_f32_4d(v, 1, 1, Lk, Dv), ot = attn_tensor_f32_4d(o, 1, 1, Lq, Dv);
        CHECK_ERR(attn_sdpa_reference(&ot, NULL, &qt, &kt, &vt, &p), ATTN_E_RANGE);
        p.key_lengths = NULL;
        int64_t ms[1] = {Lk};
        for (int j = 0; j < Lk; j++) mb[j] = j != 3;
        attn_tensor mt;
        attn_tensor_make(&mt, mb, ATTN_BOOL, 1, ms);
        p.mask = &mt;
        CHECK_ERR(attn_sdpa(&ot, NULL, &qt, &kt, &vt, &p), ATTN_E_RANGE);
        CHECK(strstr(attn_last_error(), "k[0, 0, 3, 0] is NaN") != NULL, "names the NaN key: %s", attn_last_error());
    }
    free(q); free(k); free(v); free(oref); free(o); free(wref); free(w); free(mf); free(mb);
}

int main(void) {
    attn_test_name = "fused";
    for (int path = 0; path <= 2; path++)
        if (attn__fused_path_supported(path)) paths[n_paths++] = path;
    printf("fused: testing paths:");
    for (int i = 0; i < n_paths; i++) printf(" %s", path_names[paths[i]]);
    printf(" (best: %s)\n", path_names[attn__fused_best_path()]);
    unsetenv("ATTN_SIMD");
    test_exp_accuracy();
    test_random_cases();
    test_decode();
    test_causal_equals_mask();
    test_masked_overflow();
    test_env_and_dispatch();
    printf("fused: worst out error %.3g x max|out|, worst weights error %.3g\n", worst_out_err, worst_w_err);
    return attn_test_finish();
}
