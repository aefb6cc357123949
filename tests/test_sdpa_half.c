/* attn_sdpa with bfloat16 / float16 tensors (q, k, v in bf16 or f16; out in f32, bf16 or f16)
 * against the float64 reference, on every fused SIMD path this CPU has (forced one by one) and on
 * the reference implementation. Inputs ~N(0, 1) (Box-Muller), rounded to the half dtype.
 *
 * What is asserted, and why:
 *  (a) against the float64 reference of the SAME half inputs (exactly representable in float32):
 *      the fused kernel widens each block to float32 and runs the float32 kernels, so its error is
 *      the float32 kernel's: |out - ref| <= 2e-6·max|ref| (tests/test_fused.c's bound), plus, for a
 *      half output, one round-to-nearest of the result: + u·|ref| with u = 2^-8 (bf16) / 2^-11
 *      (f16), + 2^-25 absolute for f16 subnormal outputs.
 *  (b) the reference with a half output is exactly the rounding of its float32 output.
 *  (c) against the float64 result of the ORIGINAL float32 inputs (what a user who casts to bf16
 *      loses), for information and with a loose bound: every input carries a relative rounding
 *      error <= u, which moves each score by <= 2u·sum_d |q_d k_d|·scale and each value by
 *      u·|v|; the measured error is printed per case and asserted below 8u·max|ref| + 4u·sqrt(D)
 *      (the score term, |s| ~ sqrt(D)·u for N(0,1) data, through softmax weights summing to 1).
 * Plus: errors for mixed dtypes, half weights, NaN in bf16 keys, float16 output overflow. */
#include "attn.h"
#include "attention/fused_internal.h"
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed = 0xB16B00B5CAFEULL;
static double urand(void) {
    seed ^= seed >> 12;
    seed ^= seed << 25;
    seed ^= seed >> 27;
    return (double)((seed * 2685821657736338717ULL) >> 11) * 0x1p-53;
}
static float nrand(void) {
    double u1 = urand(), u2 = urand();
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static int n_paths;
static int paths[3];
static const char *path_names[3] = {"portable", "avx2", "avx512"};
static double worst_a[2], worst_c[2]; /* [bf16, f16]: worst (a) error / max|ref|, worst (c) error / max|ref| */

typedef struct {
    int B, H, Hkv, Lq, Lk, D, Dv, causal, layout; /* layout 1: [B, L, H, D] memory (split heads) */
    int split;                                     /* forced split-K (0 = auto) */
} hcase;

static attn_tensor view4(void *mem, attn_dtype dt, int layout, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    attn_tensor t, tt;
    if (layout == 1) {
        int64_t s[4] = {d0, d2, d1, d3};
        attn_tensor_make(&t, mem, dt, 4, s);
        attn_tensor_transpose(&tt, &t, 1, 2);
        return tt;
    }
    int64_t s[4] = {d0, d1, d2, d3};
    attn_tensor_make(&t, mem, dt, 4, s);
    return t;
}

static void run(const hcase *c, attn_dtype dt) {
    const int B = c->B, H = c->H, Hkv = c->Hkv, Lq = c->Lq, Lk = c->Lk, D = c->D, Dv = c->Dv;
    const size_t nq = (size_t)B * H * Lq * D, nk = (size_t)B * Hkv * Lk * D, nv = (size_t)B * Hkv * Lk * Dv;
    const size_t no = (size_t)B * H * Lq * Dv;
    const double u = dt == ATTN_BF16 ? 0x1p-8 : 0x1p-11;
    const int di = dt == ATTN_BF16 ? 0 : 1;
    float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nv);
    float *qw = malloc(4 * nq), *kw = malloc(4 * nk), *vw = malloc(4 * nv); /* widened half values */
    uint16_t *qh = malloc(2 * nq), *kh = malloc(2 * nk), *vh = malloc(2 * nv);
    float *ref = malloc(4 * no), *ref0 = malloc(4 * no), *got = malloc(4 * no), *tmp = malloc(4 * no);
    uint16_t *oh = malloc(2 * no), *rh = malloc(2 * no);
    for (size_t i = 0; i < nq; i++) q[i] = nrand();
    for (size_t i = 0; i < nk; i++) k[i] = nrand();
    for (size_t i = 0; i < nv; i++) v[i] = nrand();
    attn_convert(qw, ATTN_F32, q, ATTN_F32, nq); /* q -> half -> f32 below */
    attn_convert(qh, dt, q, ATTN_F32, nq);
    attn_convert(kh, dt, k, ATTN_F32, nk);
    attn_convert(vh, dt, v, ATTN_F32, nv);
    attn_convert(qw, ATTN_F32, qh, dt, nq);
    attn_convert(kw, ATTN_F32, kh, dt, nk);
    attn_convert(vw, ATTN_F32, vh, dt, nv);
    /* half tensors in the case's layout */
    uint16_t *qm = malloc(2 * nq), *km = malloc(2 * nk), *vm = malloc(2 * nv);
    attn_tensor hq = view4(qm, dt, c->layout, B, H, Lq, D), hk = view4(km, dt, c->layout, B, Hkv, Lk, D);
    attn_tensor hv = view4(vm, dt, c->layout, B, Hkv, Lk, Dv);
    attn_tensor cqh = view4(qh, dt, 0, B, H, Lq, D), ckh = view4(kh, dt, 0, B, Hkv, Lk, D), cvh = view4(vh, dt, 0, B, Hkv, Lk, Dv);
    attn_tensor_copy(&hq, &cqh);
    attn_tensor_copy(&hk, &ckh);
    attn_tensor_copy(&hv, &cvh);

    attn_sdpa_params p = attn_sdpa_params_default();
    p.is_causal = c->causal;
    p.impl = ATTN_IMPL_REFERENCE;
    char what[200];
    snprintf(what, sizeof what, "%s B%d H%d/%d Lq%d Lk%d D%d Dv%d causal%d layout%d split%d", attn_dtype_name(dt), B, H,
             Hkv, Lq, Lk, D, Dv, c->causal, c->layout, c->split);
    /* float64 reference of the half values (as float32 tensors: exact) and of the original values */
    attn_tensor wq = view4(qw, ATTN_F32, 0, B, H, Lq, D), wk = view4(kw, ATTN_F32, 0, B, Hkv, Lk, D);
    attn_tensor wv = view4(vw, ATTN_F32, 0, B, Hkv, Lk, Dv), ro = view4(ref, ATTN_F32, 0, B, H, Lq, Dv);
    CHECK_OK(attn_sdpa_reference(&ro, NULL, &wq, &wk, &wv, &p));
    attn_tensor oq = view4(q, ATTN_F32, 0, B, H, Lq, D), ok_ = view4(k, ATTN_F32, 0, B, Hkv, Lk, D);
    attn_tensor ov = view4(v, ATTN_F32, 0, B, Hkv, Lk, Dv), ro0 = view4(ref0, ATTN_F32, 0, B, H, Lq, Dv);
    CHECK_OK(attn_sdpa_reference(&ro0, NULL, &oq, &ok_, &ov, &p));
    const double omax = attn_test_max_abs(ref, no);

    /* (b) the reference reads the half tensors directly, f32 out and half out */
    attn_tensor go = view4(got, ATTN_F32, 0, B, H, Lq, Dv);
    CHECK_OK(attn_sdpa(&go, NULL, &hq, &hk, &hv, &p));
    CHECK(attn_test_max_abs_diff(got, ref, no) == 0.0, "%s: reference on half tensors differs from reference on their widened values", what);
    attn_tensor gh = view4(rh, dt, 0, B, H, Lq, Dv);
    CHECK_OK(attn_sdpa(&gh, NULL, &hq, &hk, &hv, &p));
    attn_convert(oh, dt, ref, ATTN_F32, no);
    CHECK(memcmp(oh, rh, 2 * no) == 0, "%s: reference with %s out is not the rounding of its float32 out", what,
          attn_dtype_name(dt));

    /* (c) input rounding, for information */
    const double ec = attn_test_max_abs_diff(ref, (const float *)ref0, no) / (omax > 0 ? omax : 1);
    if (ec > worst_c[di]) worst_c[di] = ec;
    CHECK(ec <= 8 * u + 4 * u * sqrt((double)D), "%s: error from rounding the inputs %.3g x max|ref| > bound %.3g", what, ec,
          8 * u + 4 * u * sqrt((double)D));

    /* (a) the fused kernel on each path, out in float32 and in the half dtype */
    for (int pi = 0; pi < n_paths; pi++) {
        for (int oi = 0; oi < 2; oi++) {
            const attn_dtype odt = oi ? dt : ATTN_F32;
            attn__fused_opts o = attn__fused_opts_default();
            o.path = paths[pi];
            o.split = c->split;
            if (pi == 0) o.block_k = 40; /* small tiles on one path: many block boundaries */
            attn_sdpa_params pf = p;
            pf.impl = ATTN_IMPL_FUSED;
            pf.n_threads = 1 + (pi + oi) % 2;
            attn_tensor to;
            if (oi) {
                for (size_t i = 0; i < no; i++) oh[i] = 0x7fc0; /* NaN: everything must be written */
                to = view4(oh, dt, c->layout, B, H, Lq, Dv);
            } else {
                for (size_t i = 0; i < no; i++) tmp[i] = NAN;
                to = view4(tmp, ATTN_F32, c->layout, B, H, Lq, Dv);
            }
            int rc = attn__sdpa_fused_ex(&to, NULL, &hq, &hk, &hv, &pf, &o);
            CHECK(rc == 0, "%s [%s, out %s]: rc %d %s", what, path_names[paths[pi]], attn_dtype_name(odt), rc, attn_last_error());
            if (rc) continue;
            attn_tensor g = view4(got, ATTN_F32, 0, B, H, Lq, Dv);
            attn_tensor_convert(&g, &to);
            const double uo = oi ? u : 0.0;
            double worst = 0;
            int bad = 0;
            for (size_t i = 0; i < no; i++) {
                const double e = fabs((double)got[i] - (double)ref[i]);
                const double bound = 2e-6 * omax * (1 + uo) + uo * fabs((double)ref[i]) + (oi && dt == ATTN_F16 ? 0x1p-25 : 0.0);
                if (!(e <= bound)) bad++;
                if (e / (omax > 0 ? omax : 1) > worst) worst = e / (omax > 0 ? omax : 1);
            }
            if (!oi && worst > worst_a[di]) worst_a[di] = worst;
            CHECK(bad == 0, "%s [%s, out %s]: %d elements outside the bound (worst %.3g x max|ref|)", what,
                  path_names[paths[pi]], attn_dtype_name(odt), bad, worst);
        }
    }
    free(q), free(k), free(v), free(qw), free(kw), free(vw), free(qh), free(kh), free(vh);
    free(ref), free(ref0), free(got), free(tmp), free(oh), free(rh), free(qm), free(km), free(vm);
}

static void test_errors(void) {
    float f[64];
    uint16_t h[64], g[64];
    for (int i = 0; i < 64; i++) {
        f[i] = 0.1f * (float)(i % 7);
        h[i] = attn_f32_to_bf16(f[i]);
        g[i] = attn_f32_to_f16(f[i]);
    }
    attn_tensor q = view4(h, ATTN_BF16, 0, 1, 1, 4, 8), kf = view4(f, ATTN_F32, 0, 1, 1, 4, 8);
    attn_tensor kg = view4(g, ATTN_F16, 0, 1, 1, 4, 8), out = view4(f, ATTN_F32, 0, 1, 1, 4, 8);
    float o[32];
    attn_tensor of = view4(o, ATTN_F32, 0, 1, 1, 4, 8);
    CHECK_ERR(attn_sdpa(&of, NULL, &q, &kf, &q, NULL), ATTN_E_DTYPE); /* bf16 q with f32 k */
    CHECK_ERR(attn_sdpa(&of, NULL, &q, &kg, &q, NULL), ATTN_E_DTYPE); /* bf16 q with f16 k */
    uint16_t w16[16];
    attn_tensor wh = view4(w16, ATTN_BF16, 0, 1, 1, 4, 4);
    CHECK_ERR(attn_sdpa(&of, &wh, &q, &q, &q, NULL), ATTN_E_DTYPE); /* weights must be float32 */
    attn_tensor oi = of;
    oi.dtype = ATTN_I32;
    CHECK_ERR(attn_sdpa(&oi, NULL, &q, &q, &q, NULL), ATTN_E_DTYPE);
    (void)out;
    /* NaN in a bf16 key: reported by both implementations */
    uint16_t kn[32];
    memcpy(kn, h, sizeof kn);
    kn[13] = 0x7fc1;
    attn_tensor kb = view4(kn, ATTN_BF16, 0, 1, 1, 4, 8);
    attn_sdpa_params p = attn_sdpa_params_default();
    for (int impl = 1; impl <= 2; impl++) {
        p.impl = (attn_impl)impl;
        int rc = attn_sdpa(&of, NULL, &q, &kb, &q, &p);
        CHECK(rc == ATTN_E_RANGE && strstr(attn_last_error(), "k[0, 0, 1, 5]"), "NaN in bf16 k (impl %d): rc %d '%s'", impl, rc,
              attn_last_error());
    }
    /* a float16 output that overflows: values 1e5 (bf16) averaged -> 1e5 > 65504 */
    uint16_t vb[32];
    for (int i = 0; i < 32; i++) vb[i] = attn_f32_to_bf16(1e5f);
    attn_tensor vv = view4(vb, ATTN_BF16, 0, 1, 1, 4, 8);
    uint16_t o16[32];
    attn_tensor oh = view4(o16, ATTN_F16, 0, 1, 1, 4, 8);
    for (int impl = 1; impl <= 2; impl++) {
        p.impl = (attn_impl)impl;
        int rc = attn_sdpa(&oh, NULL, &q, &q, &vv, &p);
        CHECK(rc == ATTN_E_RANGE && strstr(attn_last_error(), "float16"), "f16 out overflow (impl %d): rc %d '%s'", impl, rc,
              attn_last_error());
    }
    /* a masked key's overflowing q.k (bf16 inputs): no error under causal; without it the fused
     * kernel's float32 score overflows: an error.
     * q0 and k1 hold 1e30 (q0.k1 = inf, masked by causal), all else 0.1 */
    {
        uint16_t qo[32], ko[32];
        for (int i = 0; i < 32; i++) qo[i] = ko[i] = attn_f32_to_bf16(0.1f);
        for (int d = 0; d < 8; d++) qo[d] = ko[8 + d] = attn_f32_to_bf16(1e30f);
        attn_tensor tq = view4(qo, ATTN_BF16, 0, 1, 1, 4, 8), tk = view4(ko, ATTN_BF16, 0, 1, 1, 4, 8);
        for (int impl = 1; impl <= 2; impl++) {
            attn_sdpa_params pc = attn_sdpa_params_default();
            pc.impl = (attn_impl)impl;
            pc.is_causal = 1;
            CHECK_OK(attn_sdpa(&of, NULL, &tq, &tk, &q, &pc));
            CHECK(!attn_test_has_nonfinite(o, 32), "masked overflow (bf16, impl %d): out finite", impl);
            pc.is_causal = 0; /* visible: float32 scores overflow (the float64 reference does not) */
            if (impl == ATTN_IMPL_FUSED) CHECK_ERR(attn_sdpa(&of, NULL, &tq, &tk, &q, &pc), ATTN_E_RANGE);
        }
    }
    /* the efficient variants are float32 only */
    attn_variant_params vp = attn_variant_params_default(ATTN_VARIANT_SLIDING);
    vp.window = 2;
    CHECK_ERR(attn_variant_attention(&of, NULL, &q, &q, &q, &vp), ATTN_E_DTYPE);
}

int main(void) {
    attn_test_name = "sdpa_half";
    for (int path = 0; path <= 2; path++)
        if (attn__fused_path_supported(path)) paths[n_paths++] = path;
    printf("sdpa_half: fused paths tested:");
    for (int i = 0; i < n_paths; i++) printf(" %s", path_names[paths[i]]);
    printf("\n");
    unsetenv("ATTN_SIMD");
    const hcase cases[] = {
        {1, 2, 2, 64, 64, 64, 64, 0, 0, 0},     {1, 2, 2, 130, 130, 64, 64, 1, 0, 0},
        {2, 4, 2, 77, 200, 32, 48, 0, 1, 0},    {1, 3, 1, 256, 256, 128, 128, 1, 0, 0},
        {1, 2, 2, 33, 33, 17, 9, 1, 1, 0},      {2, 4, 4, 1, 1500, 128, 128, 0, 0, 0}, /* decode, split-K auto */
        {1, 2, 1, 1, 700, 64, 64, 1, 1, 3},     {1, 2, 2, 3, 513, 80, 80, 1, 0, 2},    /* row path, forced splits */
        {1, 1, 1, 512, 512, 64, 64, 1, 0, 0},   {1, 2, 2, 100, 100, 256, 256, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run(&cases[i], ATTN_BF16);
        run(&cases[i], ATTN_F16);
    }
    test_errors();
    printf("sdpa_half: worst fused error vs the float64 reference of the half inputs: bf16 %.3g, f16 %.3g x max|ref|\n",
           worst_a[0], worst_a[1]);
    printf("sdpa_half: worst error of half inputs vs the float64 result of the float32 inputs: bf16 %.3g, f16 %.3g x max|ref|\n",
           worst_c[0], worst_c[1]);
    return attn_test_finish();
}
