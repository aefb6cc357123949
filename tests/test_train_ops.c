/* Backward passes of include/attn_train.h: against torch.autograd fixtures
 * (scripts/gen_train_op_fixtures.py, float32; losses float64) and against central finite
 * differences of float64 forwards written here; accumulate mode, edge cases and errors.
 * Tolerances (relative to max |reference|): 1e-5 against torch (float32 both sides, sums of
 * <= 15 terms: a few ulp; a wrong term is off by > 1e-2); 2e-6 against finite differences of
 * the float64 forward (step 1e-4 for the smooth functions: truncation ~1e-9, rounding ~1e-12;
 * the float32 result rounds once, ~6e-8, and float32 GEMM sums add a few ulp). */
#include "attn.h"
#include "testutil.h"
#include "attention/fused_internal.h"
#include "attention/short_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double rel(const float *a, const float *r, size_t n) {
    double m = attn_test_max_abs(r, n);
    return attn_test_max_abs_diff(a, r, n) / (m > 0 ? m : 1);
}
static double rel64(const float *a, const double *r, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fabs(r[i]) > m ? fabs(r[i]) : m;
    return attn_test_max_abs_diff_f64(a, r, n) / (m > 0 ? m : 1);
}

static attn_tensor fx(const char *name) {
    char p[128];
    attn_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(p, sizeof p, "train_ops/%s.npy", name);
    if (attn_npy_load(&t, attn_test_fixture(p)) != ATTN_OK) CHECK(0, "fixture %s: %s", name, attn_last_error());
    return t;
}

static attn_tensor like(const attn_tensor *t, float **buf) {
    attn_tensor r = *t;
    *buf = calloc((size_t)attn_tensor_numel(t) + 1, sizeof(float));
    r.data = *buf;
    return r;
}

static double worst_torch = 0, worst_fd = 0;
static void note(double *w, double e) {
    if (e > *w) *w = e;
}

/* ---- the ViT trainer's attention fast path (src/attention/sdpa_short_tmpl.h: blocked products of 4 rows x
 * 16 / 8 / 1 columns and a lincomb for the last T % 4 rows) against a float64 forward and backward
 * written here, on its AVX2 and portable compilations. Shapes cover every remainder: T = 1, 5, 17, 23,
 * 64 (T % 4 = 1, 1, 1, 3, 0; padded to 8, 8, 24, 24, 64) and D = 8, 12, 32, 40, 16, and the largest
 * item (T 64, D 256: the whole backward scratch). q, k, v are the
 * thirds of one [B·T, 3·H·D] buffer as the trainer writes them. Tolerance 2e-6 relative to max
 * |reference|: float32 sums of <= 64 products (a few ulp, ~1e-7 each) plus the exp polynomial's 1e-7;
 * one wrong or missing term (a dropped remainder row or column) is off by > 1e-2. */
static void ref_attention(double *out, double *lse, double *dq, double *dk, double *dv, const float *qkv, const float *dout,
                          int64_t B, int64_t T, int64_t H, int64_t D) {
    const int64_t E = H * D, ld = 3 * E;
    const double scale = 1.0 / sqrt((double)D);
    double *p = malloc(sizeof(double) * (size_t)(T * T)), *ds = malloc(sizeof(double) * (size_t)(T * T));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const float *q = qkv + b * T * ld + h * D, *k = q + E, *v = q + 2 * E, *g = dout + b * T * E + h * D;
            const int64_t o = b * T * E + h * D, oq = b * T * ld + h * D;
            for (int64_t i = 0; i < T; i++) {
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < T; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < D; d++) s += (double)q[i * ld + d] * k[j * ld + d];
                    p[i * T + j] = s * scale;
                    m = fmax(m, s * scale);
                }
                for (int64_t j = 0; j < T; j++) l += exp(p[i * T + j] - m);
                lse[(b * H + h) * T + i] = m + log(l);
                for (int64_t j = 0; j < T; j++) p[i * T + j] = exp(p[i * T + j] - m) / l;
                for (int64_t d = 0; d < D; d++) {
                    double s = 0;
                    for (int64_t j = 0; j < T; j++) s += p[i * T + j] * v[j * ld + d];
                    out[o + i * E + d] = s;
                }
            }
            for (int64_t i = 0; i < T; i++) {
                double delta = 0;
                for (int64_t d = 0; d < D; d++) delta += (double)g[i * E + d] * out[o + i * E + d];
                for (int64_t j = 0; j < T; j++) {
                    double dp = 0;
                    for (int64_t d = 0; d < D; d++) dp += (double)g[i * E + d] * v[j * ld + d];
                    ds[i * T + j] = p[i * T + j] * (dp - delta) * scale;
                }
            }
            for (int64_t i = 0; i < T; i++)
                for (int64_t d = 0; d < D; d++) {
                    double sq = 0, sk = 0, sv = 0;
                    for (int64_t j = 0; j < T; j++) {
                        sq += ds[i * T + j] * k[j * ld + d];
                        sk += ds[j * T + i] * q[j * ld + d];
                        sv += p[j * T + i] * g[j * E + d];
                    }
                    dq[oq + i * ld + d] = sq, dk[oq + i * ld + d] = sk, dv[oq + i * ld + d] = sv;
                }
        }
    free(p);
    free(ds);
}

static void test_vit_attention_kernels(void) {
    static const int64_t shapes[][2] = {{1, 8}, {5, 12}, {17, 32}, {23, 40}, {64, 16}, {64, 256}};
    static const char *const paths[] = {"avx2", "portable"};
    const int64_t B = 2, H = 3;
    uint64_t st = 42;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t T = shapes[si][0], D = shapes[si][1], E = H * D, n3 = B * T * 3 * E, n = B * T * E;
        float *qkv = malloc(sizeof(float) * (size_t)n3), *g = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n3; i++) st = st * 6364136223846793005ULL + 1442695040888963407ULL, qkv[i] = (float)((double)(st >> 40) / (1 << 24) * 4 - 2);
        for (int64_t i = 0; i < n; i++) st = st * 6364136223846793005ULL + 1442695040888963407ULL, g[i] = (float)((double)(st >> 40) / (1 << 24) * 2 - 1);
        double *ro = calloc((size_t)n, sizeof(double)), *rl = calloc((size_t)(B * H * T), sizeof(double));
        double *rg = calloc((size_t)n3, sizeof(double));
        ref_attention(ro, rl, rg, rg + E, rg + 2 * E, qkv, g, B, T, H, D);
        for (size_t pi = 0; pi < 2; pi++) {
            setenv("ATTN_SIMD", paths[pi], 1);
            if (pi == 0 && !attn__fused_path_supported(ATTN__SIMD_AVX2)) continue;
            float *o = calloc((size_t)n, sizeof(float)), *l = calloc((size_t)(B * H * T), sizeof(float));
            float *dg = calloc((size_t)n3, sizeof(float));
            CHECK_OK(attn__short_attention_forward(o, l, qkv, qkv + E, qkv + 2 * E, 3 * E, B, T, H, D));
            CHECK_OK(attn__short_attention_backward(dg, dg + E, dg + 2 * E, qkv, qkv + E, qkv + 2 * E, o, l, g, 3 * E, B, T, H, D));
            const double eo = rel64(o, ro, (size_t)n), el = rel64(l, rl, (size_t)(B * H * T)), eg = rel64(dg, rg, (size_t)n3);
            CHECK(eo <= 2e-6 && el <= 2e-6 && eg <= 2e-6, "ViT attention kernel (%s) T %lld D %lld: out %.2e lse %.2e grads %.2e",
                  paths[pi], (long long)T, (long long)D, eo, el, eg);
            free(o), free(l), free(dg);
        }
        unsetenv("ATTN_SIMD");
        free(qkv), free(g), free(ro), free(rl), free(rg);
    }
    { /* diverged weights: a score past float32 is ATTN_E_RANGE (the CLI stops the run), not a silent NaN */
        const int64_t T = 5, D = 8, E = 2 * D;
        float qkv[5 * 3 * 16], o[5 * 16], l[2 * 5];
        for (int i = 0; i < T * 3 * E; i++) qkv[i] = 1e30f;
        CHECK_ERR(attn__short_attention_forward(o, l, qkv, qkv + E, qkv + 2 * E, 3 * E, 1, T, 2, D), ATTN_E_RANGE);
        CHECK(strstr(attn_last_error(), "overflowed") != NULL, "names the overflow: %s", attn_last_error());
    }
}

/* ---- torch fixtures */
static void test_torch(void) {
    { /* linear */
        attn_tensor x = fx("linear.x"), w = fx("linear.w"), dy = fx("linear.dy");
        attn_tensor rdx = fx("linear.dx"), rdw = fx("linear.dw"), rdb = fx("linear.db");
        float *a, *b, *c;
        attn_tensor dx = like(&x, &a), dw = like(&w, &b), db = like(&rdb, &c);
        CHECK_OK(attn_linear_backward(&dx, &dw, &db, &dy, &x, &w, 0));
        double e1 = rel(a, rdx.data, 105), e2 = rel(b, rdw.data, 28), e3 = rel(c, rdb.data, 4);
        note(&worst_torch, e1), note(&worst_torch, e2), note(&worst_torch, e3);
        CHECK(e1 < 1e-5 && e2 < 1e-5 && e3 < 1e-5, "linear vs torch: dx %.3g dw %.3g db %.3g", e1, e2, e3);
        /* accumulate: a second call adds the same again */
        CHECK_OK(attn_linear_backward(NULL, &dw, &db, &dy, &x, &w, 1));
        double acc = 0;
        for (int i = 0; i < 28; i++) acc = fmax(acc, fabs(b[i] - 2 * ((float *)rdw.data)[i]));
        CHECK(acc < 2e-5 * attn_test_max_abs(rdw.data, 28) * 2, "linear accumulate: dw doubles (%.3g)", acc);
        free(a), free(b), free(c);
        attn_npy_free(&x), attn_npy_free(&w), attn_npy_free(&dy), attn_npy_free(&rdx), attn_npy_free(&rdw), attn_npy_free(&rdb);
    }
    { /* layernorm */
        attn_tensor x = fx("layernorm.x"), g = fx("layernorm.gamma"), dy = fx("layernorm.dy");
        attn_tensor rdx = fx("layernorm.dx"), rdg = fx("layernorm.dgamma"), rdb = fx("layernorm.dbeta");
        float *a, *b, *c;
        attn_tensor dx = like(&x, &a), dg = like(&g, &b), db = like(&g, &c);
        CHECK_OK(attn_layernorm_backward(&dx, &dg, &db, &dy, &x, &g, 1e-5f, 0));
        double e1 = rel(a, rdx.data, 60), e2 = rel(b, rdg.data, 10), e3 = rel(c, rdb.data, 10);
        note(&worst_torch, e1), note(&worst_torch, e2), note(&worst_torch, e3);
        CHECK(e1 < 1e-5 && e2 < 1e-5 && e3 < 1e-5, "layernorm vs torch: dx %.3g dgamma %.3g dbeta %.3g", e1, e2, e3);
        free(a), free(b), free(c);
        attn_npy_free(&x), attn_npy_free(&g), attn_npy_free(&dy), attn_npy_free(&rdx), attn_npy_free(&rdg), attn_npy_free(&rdb);
    }
    { /* rmsnorm */
        attn_tensor x = fx("rmsnorm.x"), w = fx("rmsnorm.w"), dy = fx("rmsnorm.dy");
        attn_tensor rdx = fx("rmsnorm.dx"), rdw = fx("rmsnorm.dw");
        float *a, *b;
        attn_tensor dx = like(&x, &a), dw = like(&w, &b);
        CHECK_OK(attn_rmsnorm_backward(&dx, &dw, &dy, &x, &w, 1e-6f, 0));
        double e1 = rel(a, rdx.data, 60), e2 = rel(b, rdw.data, 12);
        note(&worst_torch, e1), note(&worst_torch, e2);
        CHECK(e1 < 1e-5 && e2 < 1e-5, "rmsnorm vs torch: dx %.3g dweight %.3g", e1, e2);
        free(a), free(b);
        attn_npy_free(&x), attn_npy_free(&w), attn_npy_free(&dy), attn_npy_free(&rdx), attn_npy_free(&rdw);
    }
    { /* embedding: repeated ids sum */
        attn_tensor ids = fx("embedding.ids"), dy = fx("embedding.dy"), r = fx("embedding.dtable");
        float *a;
        attn_tensor dt = like(&r, &a);
        for (int i = 0; i < 54; i++) a[i] = 7.0f; /* overwritten (accumulate 0) */
        CHECK_OK(attn_embedding_backward(&dt, &dy, &ids, 0));
        double e = rel(a, r.data, 54);
        note(&worst_torch, e);
        CHECK(e < 1e-6, "embedding backward vs torch: %.3g", e);
        ((int64_t *)ids.data)[4] = 9; /* V = 9: out of range, dtable unchanged */
        float keep = a[0];
        CHECK_ERR(attn_embedding_backward(&dt, &dy, &ids, 1), ATTN_E_RANGE);
        CHECK(a[0] == keep && strstr(attn_last_error(), "id 9 at position 4"), "bad id named, table unchanged: %s",
              attn_last_error());
        free(a);
        attn_npy_free(&ids), attn_npy_free(&dy), attn_npy_free(&r);
    }
    { /* activations */
        attn_tensor x = fx("act.x"), dy = fx("act.dy");
        const char *names[4] = {"relu", "gelu", "gelu_tanh", "silu"};
        const attn_activation acts[4] = {ATTN_ACT_RELU, ATTN_ACT_GELU, ATTN_ACT_GELU_TANH, ATTN_ACT_SILU};
        for (int i = 0; i < 4; i++) {
            char n[64];
            snprintf(n, sizeof n, "act.%s.dx", names[i]);
            attn_tensor r = fx(n);
            float *a;
            attn_tensor dx = like(&x, &a);
            CHECK_OK(attn_activation_backward(&dx, &dy, &x, acts[i]));
            double e = rel(a, r.data, (size_t)attn_tensor_numel(&x));
            note(&worst_torch, e);
            CHECK(e < 1e-5, "%s backward vs torch: %.3g", names[i], e);
            free(a);
            attn_npy_free(&r);
        }
        attn_npy_free(&x), attn_npy_free(&dy);
    }
    { /* softmax */
        attn_tensor y = fx("softmax.y"), dy = fx("softmax.dy"), r = fx("softmax.dx");
        float *a;
        attn_tensor dx = like(&y, &a);
        CHECK_OK(attn_softmax_backward(&dx, &dy, &y));
        double e = rel(a, r.data, 36);
        note(&worst_torch, e);
        CHECK(e < 1e-5, "softmax backward vs torch: %.3g", e);
        free(a);
        attn_npy_free(&y), attn_npy_free(&dy), attn_npy_free(&r);
    }
    { /* cross entropy */
        attn_tensor z = fx("ce.logits"), lab = fx("ce.labels");
        const char *names[2] = {"ce_s0", "ce_s1"};
        for (int i = 0; i < 2; i++) {
            char n[64];
            snprintf(n, sizeof n, "%s.loss", names[i]);
            attn_tensor rl = fx(n);
            snprintf(n, sizeof n, "%s.dlogits", names[i]);
            attn_tensor rd = fx(n);
            float *a;
            attn_tensor d = like(&z, &a);
            double loss = -1;
            CHECK_OK(attn_cross_entropy(&loss, &d, &z, &lab, i ? 0.1 : 0.0));
            const double want = ((double *)rl.data)[0];
            /* float64 both sides on the same float32 logits: ~1e-15 */
            CHECK(fabs(loss - want) <= 1e-12 * fabs(want), "%s loss %.17g want %.17g", names[i], loss, want);
            double e = rel(a, rd.data, 80);
            note(&worst_torch, e);
            CHECK(e < 1e-5, "%s dlogits vs torch: %.3g", names[i], e);
            free(a);
            attn_npy_free(&rl), attn_npy_free(&rd);
        }
        attn_npy_free(&z), attn_npy_free(&lab);
    }
}

/* ---- finite differences of float64 forwards; loss = sum(f(inputs) * dy) */
static void fill(float *x, size_t n, uint64_t *s, float lo, float hi) { attn_test_fill_uniform(x, n, lo, hi, s); }

/* layernorm forward in double, [M, E] */
static double ln_loss(const double *x, const double *g, const double *b, const float *dy, int M, int E, double eps) {
    double L = 0;
    for (int m = 0; m < M; m++) {
        double mean = 0, var = 0;
        for (int e = 0; e < E; e++) mean += x[m * E + e];
        mean /= E;
        for (int e = 0; e < E; e++) var += (x[m * E + e] - mean) * (x[m * E + e] - mean);
        var /= E;
        for (int e = 0; e < E; e++) L += ((x[m * E + e] - mean) / sqrt(var + eps) * g[e] + b[e]) * dy[m * E + e];
    }
    return L;
}

static double act_f64(double x, int act) {
    switch (act) {
    case 0: return x > 0 ? x : 0;
    case 1: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case 2: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case 3: return x / (1 + exp(-x));
    default: return x;
    }
}

static void test_finite_differences(void) {
    uint64_t s = 77;
    const double h = 1e-4;
    { /* layernorm: dx, dgamma, dbeta */
        enum { M = 3, E = 8 };
        float x[M * E], g[E], b[E], dy[M * E], dx[M * E], dg[E], db[E];
        fill(x, M * E, &s, -2, 3), fill(g, E, &s, 0.5f, 1.5f), fill(b, E, &s, -0.2f, 0.2f), fill(dy, M * E, &s, -1, 1);
        double xd[M * E], gd[E], bd[E], fdx[M * E], fdg[E], fdb[E];
        for (int i = 0; i < M * E; i++) xd[i] = x[i];
        for (int i = 0; i < E; i++) gd[i] = g[i], bd[i] = b[i];
        double *vars[3] = {xd, gd, bd}, *outs[3] = {fdx, fdg, fdb};
        int ns[3] = {M * E, E, E};
        for (int t = 0; t < 3; t++)
            for (int i = 0; i < ns[t]; i++) {
                double x0 = vars[t][i];
                vars[t][i] = x0 + h;
                double lp = ln_loss(xd, gd, bd, dy, M, E, 1e-5);
                vars[t][i] = x0 - h;
                double lm = ln_loss(xd, gd, bd, dy, M, E, 1e-5);
                vars[t][i] = x0;
                outs[t][i] = (lp - lm) / (2 * h);
            }
        attn_tensor tx = attn_tensor_f32_2d(x, M, E), tg = attn_tensor_f32_1d(g, E), tdy = attn_tensor_f32_2d(dy, M, E);
        attn_tensor tdx = attn_tensor_f32_2d(dx, M, E), tdg = attn_tensor_f32_1d(dg, E), tdb = attn_tensor_f32_1d(db, E);
        CHECK_OK(attn_layernorm_backward(&tdx, &tdg, &tdb, &tdy, &tx, &tg, 1e-5f, 0));
        double e1 = rel64(dx, fdx, M * E), e2 = rel64(dg, fdg, E), e3 = rel64(db, fdb, E);
        note(&worst_fd, e1), note(&worst_fd, e2), note(&worst_fd, e3);
        CHECK(e1 < 2e-6 && e2 < 2e-6 && e3 < 2e-6, "layernorm vs finite differences: %.3g %.3g %.3g", e1, e2, e3);
    }
    { /* rmsnorm: dx, dweight */
        enum { M = 3, E = 8 };
        float x[M * E], w[E], dy[M * E], dx[M * E], dw[E];
        fill(x, M * E, &s, -2, 3), fill(w, E, &s, 0.5f, 1.5f), fill(dy, M * E, &s, -1, 1);
        double xd[M * E], wd[E], fdx[M * E], fdw[E];
        for (int i = 0; i < M * E; i++) xd[i] = x[i];
        for (int i = 0; i < E; i++) wd[i] = w[i];
        double *vars[2] = {xd, wd}, *outs[2] = {fdx, fdw};
        int ns[2] = {M * E, E};
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < ns[t]; i++) {
                double f[2], x0 = vars[t][i];
                for (int sg = 0; sg < 2; sg++) {
                    vars[t][i] = x0 + (sg ? -h : h);
                    double L = 0;
                    for (int m = 0; m < M; m++) {
                        double ms = 0;
                        for (int e = 0; e < E; e++) ms += xd[m * E + e] * xd[m * E + e];
                        const double r = 1 / sqrt(ms / E + 1e-6);
                        for (int e = 0; e < E; e++) L += xd[m * E + e] * r * wd[e] * dy[m * E + e];
                    }
                    f[sg] = L;
                }
                vars[t][i] = x0;
                outs[t][i] = (f[0] - f[1]) / (2 * h);
            }
        attn_tensor tx = attn_tensor_f32_2d(x, M, E), tw = attn_tensor_f32_1d(w, E), tdy = attn_tensor_f32_2d(dy, M, E);
        attn_tensor tdx = attn_tensor_f32_2d(dx, M, E), tdw = attn_tensor_f32_1d(dw, E);
        CHECK_OK(attn_rmsnorm_backward(&tdx, &tdw, &tdy, &tx, &tw, 1e-6f, 0));
        double e1 = rel64(dx, fdx, M * E), e2 = rel64(dw, fdw, E);
        note(&worst_fd, e1), note(&worst_fd, e2);
        CHECK(e1 < 2e-6 && e2 < 2e-6, "rmsnorm vs finite differences: %.3g %.3g", e1, e2);
    }
    { /* activations (x away from relu's kink) */
        enum { N = 64 };
        float x[N], dy[N], dx[N];
        fill(x, N, &s, -4, 4), fill(dy, N, &s, -1, 1);
        for (int i = 0; i < N; i++)
            if (fabsf(x[i]) < 1e-3f) x[i] = 0.5f;
        attn_tensor tx = attn_tensor_f32_1d(x, N), tdy = attn_tensor_f32_1d(dy, N), tdx = attn_tensor_f32_1d(dx, N);
        const attn_activation acts[5] = {ATTN_ACT_RELU, ATTN_ACT_GELU, ATTN_ACT_GELU_TANH, ATTN_ACT_SILU, ATTN_ACT_IDENTITY};
        for (int a = 0; a < 5; a++) {
            double fd[N];
            for (int i = 0; i < N; i++) fd[i] = dy[i] * (act_f64(x[i] + h, a) - act_f64(x[i] - h, a)) / (2 * h);
            CHECK_OK(attn_activation_backward(&tdx, &tdy, &tx, acts[a]));
            double e = rel64(dx, fd, N);
            note(&worst_fd, e);
            CHECK(e < 2e-6, "activation %d vs finite differences: %.3g", a, e);
        }
    }
    { /* cross entropy with smoothing 0.2: dlogits */
        enum { N = 4, C = 6 };
        float z[N * C], d[N * C];
        int64_t lab[N] = {0, 5, 2, 2};
        fill(z, N * C, &s, -3, 3);
        attn_tensor tz = attn_tensor_f32_2d(z, N, C), td = attn_tensor_f32_2d(d, N, C);
        attn_tensor tl = {lab, ATTN_I64, 1, {N}, {1}};
        double loss, fd[N * C];
        CHECK_OK(attn_cross_entropy(&loss, &td, &tz, &tl, 0.2));
        for (int i = 0; i < N * C; i++) {
            double acc[2];
            for (int sg = 0; sg < 2; sg++) {
                double tot = 0;
                for (int n = 0; n < N; n++) {
                    double zz[C], mx = -INFINITY, sum = 0, zs = 0;
                    for (int c = 0; c < C; c++) zz[c] = z[n * C + c] + (n * C + c == i ? (sg ? -h : h) : 0), mx = fmax(mx, zz[c]);
                    for (int c = 0; c < C; c++) sum += exp(zz[c] - mx), zs += zz[c];
                    tot += mx + log(sum) - 0.8 * zz[lab[n]] - 0.2 / C * zs;
                }
                acc[sg] = tot / N;
            }
            fd[i] = (acc[0] - acc[1]) / (2 * h);
        }
        double e = rel64(d, fd, N * C);
        note(&worst_fd, e);
        CHECK(e < 2e-6, "cross entropy vs finite differences: %.3g", e);
    }
}

static void test_edges_and_errors(void) {
    /* a constant row with eps = 0: dx = 0, not NaN; and the row's dgamma is 0 */
    float x[4] = {2, 2, 2, 2}, dy[4] = {1, -2, 3, 0.5f}, dx[4], dg[4], db[4];
    attn_tensor tx = attn_tensor_f32_2d(x, 1, 4), tdy = attn_tensor_f32_2d(dy, 1, 4), tdx = attn_tensor_f32_2d(dx, 1, 4);
    attn_tensor tdg = attn_tensor_f32_1d(dg, 4), tdb = attn_tensor_f32_1d(db, 4);
    CHECK_OK(attn_layernorm_backward(&tdx, &tdg, &tdb, &tdy, &tx, NULL, 0.0f, 0));
    CHECK(dx[0] == 0 && dx[1] == 0 && dx[2] == 0 && dx[3] == 0 && dg[1] == 0 && db[1] == -2, "constant row, eps 0");
    CHECK_ERR(attn_layernorm_backward(&tdx, NULL, NULL, &tdy, &tx, NULL, -1.0f, 0), ATTN_E_INVALID);
    /* cross entropy errors */
    float z[6] = {0, 1, 2, 3, 4, 5};
    int32_t lab[2] = {1, 3};
    attn_tensor tz = attn_tensor_f32_2d(z, 2, 3), tl = {lab, ATTN_I32, 1, {2}, {1}};
    double loss;
    CHECK_ERR(attn_cross_entropy(&loss, NULL, &tz, &tl, 0), ATTN_E_RANGE);
    CHECK(strstr(attn_last_error(), "labels[1] = 3") != NULL, "names the bad label: %s", attn_last_error());
    lab[1] = 2;
    CHECK_ERR(attn_cross_entropy(&loss, NULL, &tz, &tl, 1.0), ATTN_E_INVALID);
    CHECK_ERR(attn_cross_entropy(&loss, NULL, &tz, &tl, NAN), ATTN_E_INVALID);
    z[4] = NAN;
    CHECK_ERR(attn_cross_entropy(&loss, NULL, &tz, &tl, 0), ATTN_E_RANGE);
    z[4] = 4;
    CHECK_OK(attn_cross_entropy(&loss, NULL, &tz, &tl, 0));
    /* labels 1 and 2 of rows [0,1,2], [3,4,5]: mean of (lse - z_y) */
    const double want = (log(exp(0.) + exp(1.) + exp(2.)) - 1 + log(exp(3.) + exp(4.) + exp(5.)) - 5) / 2;
    CHECK_NEAR(loss, want, 1e-12, "cross entropy by hand");
    /* linear errors */
    float w[6], y[4];
    attn_tensor tw = attn_tensor_f32_2d(w, 2, 3), ty = attn_tensor_f32_2d(y, 2, 2), tx3 = attn_tensor_f32_2d(z, 2, 3);
    attn_tensor bad = attn_tensor_f32_2d(w, 3, 2); /* in_features 2 != x's 3 */
    CHECK_ERR(attn_linear_backward(NULL, NULL, NULL, &ty, &tx3, &bad, 0), ATTN_E_SHAPE);
    CHECK_ERR(attn_linear_backward(NULL, NULL, NULL, NULL, &tx3, &tw, 0), ATTN_E_INVALID);
    CHECK_ERR(attn_activation_backward(&ty, &ty, &ty, (attn_activation)17), ATTN_E_INVALID);
}

int main(void) {
    attn_test_name = "train_ops";
    test_torch();
    test_finite_differences();
    test_edges_and_errors();
    test_vit_attention_kernels();
    printf("worst relative errors: vs torch %.3g, vs finite differences %.3g\n", worst_torch, worst_fd);
    return attn_test_finish();
}
