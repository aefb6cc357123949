/* Linear, norms, activations, softmax, embedding, FFN and positional encodings against
 * published values and float64 re-derivations written here. */
#include "attn.h"
#include "attn_ops.h"
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed = 12345;

static void test_layernorm(void) {
    float x[8] = {40000, 40001, 40002, 40003, 7, 7, 7, 7}, y[8];
    attn_tensor tx = attn_tensor_f32_2d(x, 2, 4), ty = attn_tensor_f32_2d(y, 2, 4);
    CHECK_OK(attn_layernorm(&ty, &tx, NULL, NULL, 1e-5f));
    const double want[4] = {-1.34164, -0.44721, 0.44721, 1.34164};
    /* 1e-5: the published values have 5 decimals; eps 1e-5 with var 1.25 shifts them by 4e-6 */
    for (int i = 0; i < 4; i++) CHECK_NEAR(y[i], want[i], 1e-5, "layernorm of [40000..40003]");
    for (int i = 4; i < 8; i++) CHECK(y[i] == 0.0f, "layernorm of a constant row is 0 (got %g)", y[i]);
    /* gamma/beta, in place, against a float64 two-pass computation */
    float z[3 * 6], g[6], b[6], z0[3 * 6];
    attn_test_fill_uniform(z, 18, -3, 3, &seed);
    attn_test_fill_uniform(g, 6, 0.5f, 1.5f, &seed);
    attn_test_fill_uniform(b, 6, -1, 1, &seed);
    memcpy(z0, z, sizeof z);
    attn_tensor tz = attn_tensor_f32_2d(z, 3, 6), tg = attn_tensor_f32_1d(g, 6), tb = attn_tensor_f32_1d(b, 6);
    CHECK_OK(attn_layernorm(&tz, &tz, &tg, &tb, 1e-5f));
    double err = 0;
    for (int r = 0; r < 3; r++) {
        double m = 0, v = 0;
        for (int i = 0; i < 6; i++) m += z0[r * 6 + i];
        m /= 6;
        for (int i = 0; i < 6; i++) v += (z0[r * 6 + i] - m) * (z0[r * 6 + i] - m);
        v /= 6;
        for (int i = 0; i < 6; i++) err = fmax(err, fabs((z0[r * 6 + i] - m) / sqrt(v + 1e-5) * g[i] + b[i] - z[r * 6 + i]));
    }
    CHECK(err < 1e-6, "layernorm with affine params, in place (err %.3g)", err);
    /* rmsnorm */
    float r[4] = {1, 2, 3, 4}, ry[4], w[4] = {1, 1, 2, 0.5f};
    attn_tensor tr = attn_tensor_f32_2d(r, 1, 4), try_ = attn_tensor_f32_2d(ry, 1, 4), tw = attn_tensor_f32_1d(w, 4);
    CHECK_OK(attn_rmsnorm(&try_, &tr, &tw, 0.0f));
    double rms = sqrt(30.0 / 4);
    for (int i = 0; i < 4; i++) CHECK_NEAR(ry[i], r[i] / rms * w[i], 1e-6, "rmsnorm");
    float g5[5];
    attn_tensor tg5 = attn_tensor_f32_1d(g5, 5);
    CHECK_ERR(attn_layernorm(&ty, &tx, &tg5, NULL, 1e-5f), ATTN_E_SHAPE);
    CHECK_ERR(attn_layernorm(&ty, &tx, NULL, NULL, -1.0f), ATTN_E_INVALID);
}

static void test_activations(void) {
    /* reference values: GELU(x) = x·Φ(x); Φ(1) = 0.8413447461, Φ(-1) = 0.1586552539 */
    CHECK_NEAR(attn_gelu(1.0f), 0.8413447461, 1e-7, "gelu(1)");
    CHECK_NEAR(attn_gelu(-1.0f), -0.1586552539, 1e-7, "gelu(-1)");
    CHECK_NEAR(attn_gelu(3.0f), 3 * 0.9986501020, 1e-6, "gelu(3)");
    /* tanh form: 0.5(1 + tanh(0.7978845608(1 + 0.044715))) = 0.8411919906 */
    CHECK_NEAR(attn_gelu_tanh(1.0f), 0.8411919906, 1e-7, "gelu_tanh(1)");
    CHECK_NEAR(attn_silu(1.0f), 0.7310585786, 1e-7, "silu(1)");
    CHECK_NEAR(attn_silu(-2.0f), -2 * 0.1192029220, 1e-7, "silu(-2)");
    /* vectorised GELU of attn_activate against float64 erf over [-12, 12]: the A&S 7.1.26 erf
     * (|err| <= 1.5e-7) gives <= 7.5e-8 |x|, plus float rounding of the result */
    enum { NG = 4801 };
    static float gx[NG], gy[NG];
    for (int i = 0; i < NG; i++) gx[i] = -12.0f + 24.0f * (float)i / (NG - 1);
    attn_tensor tgx = attn_tensor_f32_2d(gx, 1, NG), tgy = attn_tensor_f32_2d(gy, 1, NG);
    CHECK_OK(attn_activate(&tgy, &tgx, ATTN_ACT_GELU));
    double gerr = 0;
    for (int i = 0; i < NG; i++) {
        double xd = gx[i], want = 0.5 * xd * erfc(-xd / sqrt(2.0));
        double tol = 1e-7 * fmax(1.0, fabs(xd)) + 1.2e-7 * fabs(want);
        gerr = fmax(gerr, fabs(gy[i] - want) / tol);
    }
    CHECK(gerr <= 1.0, "vectorised GELU within 1e-7 max(1,|x|) + float rounding (worst ratio %.3f)", gerr);
    CHECK(gy[0] == -0.0f || fabsf(gy[0]) < 1e-30f, "gelu(-12) is 0 to float precision (%g)", gy[0]);
    float x[5] = {-2, -0.5f, 0, 0.5f, 2}, y[5];
    attn_tensor tx = attn_tensor_f32_1d(x, 5), ty = attn_tensor_f32_1d(y, 5);
    CHECK_OK(attn_activate(&ty, &tx, ATTN_ACT_RELU));
    CHECK(y[0] == 0 && y[1] == 0 && y[2] == 0 && y[3] == 0.5f && y[4] == 2, "relu");
    CHECK_ERR(attn_activate(&ty, &tx, (attn_activation)42), ATTN_E_INVALID);
    /* strided view: every other element */
    float s[10], so[10] = {0};
    for (int i = 0; i < 10; i++) s[i] = (float)i - 5;
    attn_tensor ts = attn_tensor_f32_1d(s, 5), tso = attn_tensor_f32_1d(so, 5);
    ts.stride[0] = 2;
    tso.stride[0] = 2;
    CHECK_OK(attn_activate(&tso, &ts, ATTN_ACT_SILU));
    CHECK_NEAR(so[2], attn_silu(-3), 0, "strided activation");
    CHECK(so[1] == 0, "strided activation leaves gaps untouched");
}

static void test_softmax(void) {
    float x[8] = {1, 2, 3, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY}, y[8];
    attn_tensor tx = attn_tensor_f32_2d(x, 2, 4), ty = attn_tensor_f32_2d(y, 2, 4);
    CHECK_OK(attn_softmax(&ty, &tx));
    double z = exp(1) + exp(2) + exp(3);
    CHECK_NEAR(y[0], exp(1) / z, 1e-7, "softmax[0]");
    CHECK_NEAR(y[2], exp(3) / z, 1e-7, "softmax[2]");
    CHECK(y[3] == 0, "softmax of -inf is 0");
    CHECK(y[4] == 0 && y[7] == 0, "softmax of an all -inf row is 0, not NaN");
    float big[3] = {1e30f, 1e30f, -1e30f}, by[3];
    attn_tensor tb = attn_tensor_f32_1d(big, 3), tby = attn_tensor_f32_1d(by, 3);
    CHECK_OK(attn_softmax(&tby, &tb));
    CHECK_NEAR(by[0], 0.5, 1e-7, "softmax is overflow-safe");
    x[1] = NAN;
    CHECK_ERR(attn_softmax(&ty, &tx), ATTN_E_RANGE);
}

static void test_linear_ffn(void) {
    enum { M = 5, IN = 7, OUT = 3, F = 11 };
    float x[M * IN], w[OUT * IN], b[OUT], y[M * OUT];
    attn_test_fill_uniform(x, sizeof x / 4, -1, 1, &seed);
    attn_test_fill_uniform(w, sizeof w / 4, -1, 1, &seed);
    attn_test_fill_uniform(b, sizeof b / 4, -1, 1, &seed);
    attn_tensor tx = attn_tensor_f32_3d(x, 1, M, IN), tw = attn_tensor_f32_2d(w, OUT, IN), tb = attn_tensor_f32_1d(b, OUT);
    attn_tensor ty = attn_tensor_f32_3d(y, 1, M, OUT);
    CHECK_OK(attn_linear(&ty, &tx, &tw, &tb));
    double err = 0;
    for (int m = 0; m < M; m++)
        for (int o = 0; o < OUT; o++) {
            double a = b[o];
            for (int i = 0; i < IN; i++) a += (double)x[m * IN + i] * w[o * IN + i];
            err = fmax(err, fabs(a - y[m * OUT + o]));
        }
    CHECK(err < 1e-5, "linear vs float64 (err %.3g)", err);
    attn_tensor bad = attn_tensor_f32_2d(w, IN, OUT);
    CHECK_ERR(attn_linear(&ty, &tx, &bad, &tb), ATTN_E_SHAPE);
    CHECK_ERR(attn_linear(&tx, &tx, &tw, &tb), ATTN_E_SHAPE);

    /* FFN and SwiGLU against float64 */
    float w1[F * IN], b1[F], w2[IN * F], b2[IN], wu[F * IN], fo[M * IN], go[M * IN];
    attn_test_fill_uniform(w1, sizeof w1 / 4, -0.5f, 0.5f, &seed);
    attn_test_fill_uniform(b1, sizeof b1 / 4, -0.5f, 0.5f, &seed);
    attn_test_fill_uniform(w2, sizeof w2 / 4, -0.5f, 0.5f, &seed);
    attn_test_fill_uniform(b2, sizeof b2 / 4, -0.5f, 0.5f, &seed);
    attn_test_fill_uniform(wu, sizeof wu / 4, -0.5f, 0.5f, &seed);
    attn_arena a;
    attn_arena_init(&a, 0);
    attn_tensor t1 = attn_tensor_f32_2d(w1, F, IN), tb1 = attn_tensor_f32_1d(b1, F), t2 = attn_tensor_f32_2d(w2, IN, F);
    attn_tensor tb2 = attn_tensor_f32_1d(b2, IN), tu = attn_tensor_f32_2d(wu, F, IN);
    attn_tensor tfo = attn_tensor_f32_3d(fo, 1, M, IN), tgo = attn_tensor_f32_3d(go, 1, M, IN);
    CHECK_OK(attn_ffn(&tfo, &tx, &t1, &tb1, &t2, &tb2, ATTN_ACT_GELU, &a));
    CHECK_OK(attn_ffn_gated(&tgo, &tx, &t1, &tu, &t2, ATTN_ACT_SILU, &a));
    double e1 = 0, e2 = 0;
    for (int m = 0; m < M; m++) {
        double h[F], g[F];
        for (int f = 0; f < F; f++) {
            double s = b1[f], s2 = 0, u = 0;
            for (int i = 0; i < IN; i++) {
                s += (double)w1[f * IN + i] * x[m * IN + i];
                s2 += (double)w1[f * IN + i] * x[m * IN + i];
                u += (double)wu[f * IN + i] * x[m * IN + i];
            }
            h[f] = 0.5 * s * (1 + erf(s / sqrt(2.0)));
            g[f] = s2 / (1 + exp(-s2)) * u;
        }
        for (int o = 0; o < IN; o++) {
            double s = b2[o], s2 = 0;
            for (int f = 0; f < F; f++) {
                s += (double)w2[o * F + f] * h[f];
                s2 += (double)w2[o * F + f] * g[f];
            }
            e1 = fmax(e1, fabs(s - fo[m * IN + o]));
            e2 = fmax(e2, fabs(s2 - go[m * IN + o]));
        }
    }
    CHECK(e1 < 1e-5, "ffn (GELU) vs float64 (err %.3g)", e1);
    CHECK(e2 < 1e-5, "ffn_gated (SwiGLU) vs float64 (err %.3g)", e2);
    CHECK(a.used_bytes == 0, "ffn released its scratch");
    attn_arena_free(&a);
}

static void test_embedding(void) {
    float table[4 * 3];
    for (int i = 0; i < 12; i++) table[i] = (float)i;
    int32_t ids[3] = {2, 0, 3};
    float out[9];
    int64_t is[1] = {3};
    attn_tensor ti, tt = attn_tensor_f32_2d(table, 4, 3), to = attn_tensor_f32_2d(out, 3, 3);
    attn_tensor_make(&ti, ids, ATTN_I32, 1, is);
    CHECK_OK(attn_embedding(&to, &ti, &tt));
    CHECK(out[0] == 6 && out[3] == 0 && out[8] == 11, "embedding rows");
    ids[1] = 4;
    CHECK_ERR(attn_embedding(&to, &ti, &tt), ATTN_E_RANGE);
    ids[1] = -1;
    CHECK_ERR(attn_embedding(&to, &ti, &tt), ATTN_E_RANGE);
    float pe[2 * 3];
    attn_tensor tpe = attn_tensor_f32_2d(pe, 2, 3);
    CHECK_OK(attn_pe_learned(&tpe, &tt, 2));
    CHECK(pe[0] == 6 && pe[5] == 11, "learned positions 2..3");
    CHECK_ERR(attn_pe_learned(&tpe, &tt, 3), ATTN_E_RANGE);
}

static void test_sinusoidal(void) {
    float pe[3 * 5];
    attn_tensor t = attn_tensor_f32_2d(pe, 3, 5);
    CHECK_OK(attn_pe_sinusoidal(&t, 0));
    const double want[5] = {0.841471, 0.540302, 0.025116, 0.999685, 0.000631};
    for (int i = 0; i < 5; i++) CHECK_NEAR(pe[5 + i], want[i], 1e-6, "sinusoidal d_model=5 position 1");
    for (int i = 0; i < 5; i++) CHECK_NEAR(pe[i], (i & 1) ? 1.0 : 0.0, 0, "position 0 is [0,1,0,1,0]");
    /* offset: row 0 of offset 2 equals row 2 of offset 0 */
    float pe2[5];
    attn_tensor t2 = attn_tensor_f32_2d(pe2, 1, 5);
    CHECK_OK(attn_pe_sinusoidal(&t2, 2));
    CHECK(memcmp(pe2, pe + 10, sizeof pe2) == 0, "offset");
    /* a larger table against float64 */
    enum { L = 50, D = 64 };
    static float big[L * D];
    attn_tensor tb = attn_tensor_f32_2d(big, L, D);
    CHECK_OK(attn_pe_sinusoidal(&tb, 0));
    double e = 0;
    for (int p = 0; p < L; p++)
        for (int i = 0; i < D / 2; i++) {
            double f = p / pow(10000.0, 2.0 * i / D);
            e = fmax(e, fabs(big[p * D + 2 * i] - sin(f)));
            e = fmax(e, fabs(big[p * D + 2 * i + 1] - cos(f)));
        }
    CHECK(e < 1e-7, "sinusoidal 50x64 vs float64 (err %.3g)", e);
}

static void test_rope(void) {
    enum { B = 1, H = 2, L = 5, D = 8 };
    float x[B * H * L * D], xh[B * H * L * D], xi[B * H * L * D];
    attn_test_fill_uniform(x, sizeof x / 4, -1, 1, &seed);
    memcpy(xh, x, sizeof x);
    memcpy(xi, x, sizeof x);
    attn_tensor th = attn_tensor_f32_4d(xh, B, H, L, D), ti = attn_tensor_f32_4d(xi, B, H, L, D);
    CHECK_OK(attn_rope(&th, 3, 10000.0f, 0, ATTN_ROPE_HALF));
    CHECK_OK(attn_rope(&ti, 3, 10000.0f, 0, ATTN_ROPE_INTERLEAVED));
    double eh = 0, ei = 0;
    for (int h = 0; h < H; h++)
        for (int l = 0; l < L; l++) {
            const float *r = x + (h * L + l) * D;
            for (int i = 0; i < D / 2; i++) {
                double ang = (3 + l) * pow(10000.0, -2.0 * i / D), c = cos(ang), s = sin(ang);
                /* half layout pairs (i, i + D/2) */
                eh = fmax(eh, fabs(xh[(h * L + l) * D + i] - (r[i] * c - r[i + D / 2] * s)));
                eh = fmax(eh, fabs(xh[(h * L + l) * D + i + D / 2] - (r[i + D / 2] * c + r[i] * s)));
                /* interleaved pairs (2i, 2i+1) */
                ei = fmax(ei, fabs(xi[(h * L + l) * D + 2 * i] - (r[2 * i] * c - r[2 * i + 1] * s)));
                ei = fmax(ei, fabs(xi[(h * L + l) * D + 2 * i + 1] - (r[2 * i + 1] * c + r[2 * i] * s)));
            }
        }
    CHECK(eh < 1e-6, "rope half-split layout (err %.3g)", eh);
    CHECK(ei < 1e-6, "rope interleaved layout (err %.3g)", ei);
    /* relative-position property: <rope(q, m), rope(k, n)> depends only on m - n */
    float q[D], k[D], q1[D], k1[D], q2[D], k2[D];
    attn_test_fill_uniform(q, D, -1, 1, &seed);
    attn_test_fill_uniform(k, D, -1, 1, &seed);
    memcpy(q1, q, sizeof q); memcpy(k1, k, sizeof k); memcpy(q2, q, sizeof q); memcpy(k2, k, sizeof k);
    attn_tensor a = attn_tensor_f32_4d(q1, 1, 1, 1, D), b = attn_tensor_f32_4d(k1, 1, 1, 1, D);
    attn_tensor c = attn_tensor_f32_4d(q2, 1, 1, 1, D), d = attn_tensor_f32_4d(k2, 1, 1, 1, D);
    attn_rope(&a, 7, 10000.0f, 0, ATTN_ROPE_HALF);
    attn_rope(&b, 4, 10000.0f, 0, ATTN_ROPE_HALF);
    attn_rope(&c, 13, 10000.0f, 0, ATTN_ROPE_HALF);
    attn_rope(&d, 10, 10000.0f, 0, ATTN_ROPE_HALF);
    double d1 = 0, d2 = 0;
    for (int i = 0; i < D; i++) {
        d1 += (double)q1[i] * k1[i];
        d2 += (double)q2[i] * k2[i];
    }
    CHECK_NEAR(d1, d2, 1e-5, "rope scores depend on relative position only");
    /* partial rotary: channels >= rotary_dim untouched */
    float p[D];
    memcpy(p, x, sizeof p);
    attn_tensor tp = attn_tensor_f32_4d(p, 1, 1, 1, D);
    CHECK_OK(attn_rope(&tp, 5, 10000.0f, 4, ATTN_ROPE_HALF));
    CHECK(p[4] == x[4] && p[7] == x[7] && p[0] != x[0], "partial rotary leaves the tail");
    CHECK_ERR(attn_rope(&tp, 0, 10000.0f, 3, ATTN_ROPE_HALF), ATTN_E_INVALID);
    CHECK_ERR(attn_rope(&tp, 0, 10000.0f, 10, ATTN_ROPE_HALF), ATTN_E_INVALID);
}

static void test_alibi(void) {
    float s8[8], s6[6], s12[12];
    CHECK_OK(attn_alibi_slopes(s8, 8));
    for (int h = 0; h < 8; h++) CHECK_NEAR(s8[h], pow(2.0, -(h + 1)), 0, "alibi slopes, 8 heads = 2^-1..2^-8");
    CHECK_OK(attn_alibi_slopes(s6, 6));
    /* non power of two: the 4-head slopes then every other 8-head slope */
    const double w6[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    for (int h = 0; h < 6; h++) CHECK_NEAR(s6[h], w6[h], 0, "alibi slopes, 6 heads");
    CHECK_OK(attn_alibi_slopes(s12, 12));
    CHECK_NEAR(s12[0], pow(2.0, -1), 0, "alibi 12 heads [0]");
    CHECK_NEAR(s12[8], pow(2.0, -0.5), 1e-7, "alibi 12 heads [8] = 2^-0.5");
    CHECK_NEAR(s12[11], pow(2.0, -3.5), 1e-7, "alibi 12 heads [11] = 2^-3.5");
    CHECK_ERR(attn_alibi_slopes(s8, 0), ATTN_E_INVALID);
    float bias[2 * 2 * 3];
    attn_tensor tb = attn_tensor_f32_3d(bias, 2, 2, 3);
    CHECK_OK(attn_alibi_bias(&tb));
    /* head 0 slope 2^-4 (2 heads: 2^-8/2 = 2^-4, 2^-8), query 1 at position 2 */
    CHECK_NEAR(bias[3 + 0], -2 * pow(2.0, -4), 1e-7, "alibi bias distance 2");
    CHECK_NEAR(bias[3 + 2], 0, 0, "alibi bias distance 0");
}

static void test_views(void) {
    /* [B=1, L=2, H*D=6] split into 3 heads of 2 and merged back, no copy */
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)i;
    attn_tensor t = attn_tensor_f32_3d(x, 1, 2, 6), s, m;
    CHECK_OK(attn_tensor_split_heads(&s, &t, 3));
    CHECK(s.shape[1] == 3 && s.shape[2] == 2 && s.shape[3] == 2, "split shape [1,3,2,2]");
    int64_t idx[4] = {0, 2, 1, 1};
    CHECK(((float *)s.data)[attn_tensor_offset(&s, idx)] == 11, "split view element [0,2,1,1] is x[0,1,5]");
    CHECK(!attn_tensor_is_contiguous(&s), "split view is not contiguous");
    CHECK_OK(attn_tensor_merge_heads(&m, &s));
    CHECK(m.shape[2] == 6 && attn_tensor_is_contiguous(&m) && m.data == x, "merge gives back the buffer");
    CHECK_ERR(attn_tensor_split_heads(&s, &t, 4), ATTN_E_SHAPE);
    attn_tensor tr;
    CHECK_OK(attn_tensor_transpose(&tr, &t, 1, 2));
    CHECK_ERR(attn_tensor_merge_heads(&m, &t), ATTN_E_SHAPE);
    CHECK_ERR(attn_tensor_transpose(&tr, &t, 0, 3), ATTN_E_INVALID);
    attn_arena a;
    attn_arena_init(&a, 256);
    float *p1 = attn_arena_alloc_f32(&a, 10);
    attn_arena_mark mk = attn_arena_get_mark(&a);
    float *p2 = attn_arena_alloc_f32(&a, 1000); /* spills into a new block */
    CHECK(p1 && p2 && ((uintptr_t)p2 % 64) == 0, "arena alignment");
    attn_arena_release(&a, mk);
    CHECK(a.used_bytes == 64, "arena release back to a mark (used %zu)", a.used_bytes);
    attn_arena_free(&a);
}

/* issue 23 item 3: 100000 threads was accepted and the next parallel region overflowed
 * libgomp's stack (a segfault); now ATTN_E_RANGE, the count in effect unchanged, and a linear
 * still matches its float64 sum after the refusal. */
static void test_threads_bound(void) {
    int n0 = attn_get_num_threads();
    CHECK(attn_set_num_threads(2) == 2, "2 threads accepted");
    CHECK_ERR(attn_set_num_threads(100000), ATTN_E_RANGE);
    CHECK(strstr(attn_last_error(), "4096") != NULL, "the message names the bound: %s", attn_last_error());
    CHECK(attn_get_num_threads() == 2, "count unchanged after a refusal (%d)", attn_get_num_threads());
    CHECK_ERR(attn_set_num_threads(ATTN_MAX_THREADS + 1), ATTN_E_RANGE);
    CHECK(attn_set_num_threads(ATTN_MAX_THREADS) == ATTN_MAX_THREADS, "the bound itself is accepted");
    CHECK(attn_set_num_threads(2) == 2, "back to 2");
    float x[4 * 8], w[3 * 8], b[3], y[4 * 3];
    attn_test_fill_uniform(x, 32, -1, 1, &seed);
    attn_test_fill_uniform(w, 24, -1, 1, &seed);
    attn_test_fill_uniform(b, 3, -1, 1, &seed);
    attn_tensor tx = attn_tensor_f32_2d(x, 4, 8), tw = attn_tensor_f32_2d(w, 3, 8), tb = attn_tensor_f32_1d(b, 3);
    attn_tensor ty = attn_tensor_f32_2d(y, 4, 3);
    CHECK_OK(attn_linear(&ty, &tx, &tw, &tb));
    double worst = 0;
    for (int i = 0; i < 4; i++)
        for (int o = 0; o < 3; o++) {
            double s = b[o];
            for (int k = 0; k < 8; k++) s += (double)x[i * 8 + k] * w[o * 8 + k];
            worst = fmax(worst, fabs(s - y[i * 3 + o]));
        }
    CHECK(worst <= 1e-5, "linear after a refused thread count: max error %.3g (float32 sums of 8, tol 1e-5)", worst);
    /* the per-call count of attn_sdpa is bounded the same way */
    float q[1 * 1 * 2 * 4], o[1 * 1 * 2 * 4];
    attn_test_fill_uniform(q, 8, -1, 1, &seed);
    attn_tensor tq = attn_tensor_f32_4d(q, 1, 1, 2, 4), to = attn_tensor_f32_4d(o, 1, 1, 2, 4);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.n_threads = 100000;
    CHECK_ERR(attn_sdpa(&to, NULL, &tq, &tq, &tq, &p), ATTN_E_INVALID);
    p.n_threads = 2;
    CHECK_OK(attn_sdpa(&to, NULL, &tq, &tq, &tq, &p));
    attn_set_num_threads(n0);
}

int main(void) {
    attn_test_name = "ops";
    test_threads_bound();
    test_layernorm();
    test_activations();
    test_softmax();
    test_linear_ffn();
    test_embedding();
    test_sinusoidal();
    test_rope();
    test_alibi();
    test_views();
    return attn_test_finish();
}
