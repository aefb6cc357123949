/* attn_sdpa's short-sequence kernel (src/attention/sdpa_short.c: unmasked float32, Lq, Lk <= 64) against
 * a float64 oracle written here, on its AVX2 and portable compilations: self-attention at a ViT's
 * 17 tokens, GQA with Lq != Lk and Dv != D, one query row, the largest head size, views into a fused
 * [B·L, 3·E] projection buffer with strided output rows, the log-sum-exp output, a negative and a zero
 * scale, the weights output; the same bits for 1 and 2 threads and with or without weights; the fused
 * kernel's errors for NaN / inf / overflow; and the cases it declines (masks, causal, Lq or Lk > 64,
 * float16), which attn_sdpa hands on.
 * Tolerance 2e-6 of max |v| (2) on out and weights, 2e-6 of max(1, |lse|) on lse: float32 sums of <= 256
 * products (a few ulp) and the exp polynomial's 1.5e-7 relative error; a dropped key, row or lane is
 * off by > 1e-2. */
#include "attn.h"
#include "attention/fused_internal.h"
#include "attention/short_internal.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 7;
static float urand(float lo, float hi) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (float)((double)(rng >> 40) / (double)(1ULL << 24));
}

/* element (b, h, i, d) of a 4-D float32 view */
static float at(const attn_tensor *t, int64_t b, int64_t h, int64_t i, int64_t d) {
    return ((const float *)t->data)[b * t->stride[0] + h * t->stride[1] + i * t->stride[2] + d * t->stride[3]];
}

/* out64 [B, H, Lq, Dv], lse64 [B, H, Lq] and w64 [B, H, Lq, Lk] of unmasked attention, in float64 */
static void oracle(double *out64, double *lse64, double *w64, const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, double scale) {
    const int64_t B = q->shape[0], H = q->shape[1], Lq = q->shape[2], D = q->shape[3], Hkv = k->shape[1], Lk = k->shape[2],
                  Dv = v->shape[3];
    double *s = malloc(sizeof(double) * (size_t)Lk);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < Lq; i++) {
                const int64_t hk = h / (H / Hkv), row = (b * H + h) * Lq + i;
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < Lk; j++) {
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++) dot += (double)at(q, b, h, i, d) * at(k, b, hk, j, d);
                    s[j] = dot * scale;
                    m = fmax(m, s[j]);
                }
                for (int64_t j = 0; j < Lk; j++) l += exp(s[j] - m);
                lse64[row] = m + log(l);
                for (int64_t j = 0; j < Lk; j++) w64[row * Lk + j] = exp(s[j] - m) / l;
                for (int64_t e = 0; e < Dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < Lk; j++) acc += exp(s[j] - m) / l * at(v, b, hk, j, e);
                    out64[row * Dv + e] = acc;
                }
            }
    free(s);
}

typedef struct {
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    int fused_buffer; /* q, k, v as views into one [B·L, 3·E] buffer (Lq = Lk, H = Hkv, D = Dv) */
    int has_scale;
    float scale;
} shape;

static void run_case(const shape *c, const char *path) {
    const int64_t B = c->B, H = c->H, Hkv = c->Hkv, Lq = c->Lq, Lk = c->Lk, D = c->D, Dv = c->Dv;
    float *buf = NULL, *qb = NULL, *kb = NULL, *vb = NULL;
    attn_tensor q, k, v;
    if (c->fused_buffer) { /* [B, L, 3, H, D] as the encoder layer's projection writes it */
        const int64_t E = H * D, L = Lq;
        buf = malloc(sizeof(float) * (size_t)(B * L * 3 * E));
        for (int64_t i = 0; i < B * L * 3 * E; i++) buf[i] = urand(-2, 2);
        q = (attn_tensor){buf, ATTN_F32, 4, {B, H, L, D}, {L * 3 * E, D, 3 * E, 1}};
        k = (attn_tensor){buf + E, ATTN_F32, 4, {B, H, L, D}, {L * 3 * E, D, 3 * E, 1}};
        v = (attn_tensor){buf + 2 * E, ATTN_F32, 4, {B, H, L, D}, {L * 3 * E, D, 3 * E, 1}};
    } else {
        qb = malloc(sizeof(float) * (size_t)(B * H * Lq * D));
        kb = malloc(sizeof(float) * (size_t)(B * Hkv * Lk * D));
        vb = malloc(sizeof(float) * (size_t)(B * Hkv * Lk * Dv));
        for (int64_t i = 0; i < B * H * Lq * D; i++) qb[i] = urand(-2, 2);
        for (int64_t i = 0; i < B * Hkv * Lk * D; i++) kb[i] = urand(-2, 2);
        for (int64_t i = 0; i < B * Hkv * Lk * Dv; i++) vb[i] = urand(-2, 2);
        q = attn_tensor_f32_4d(qb, B, H, Lq, D);
        k = attn_tensor_f32_4d(kb, B, Hkv, Lk, D);
        v = attn_tensor_f32_4d(vb, B, Hkv, Lk, Dv);
    }
    /* out rows [B·Lq, H·Dv] (heads side by side, as layers want them): a strided view */
    float *ob = calloc((size_t)(B * Lq * H * Dv), sizeof(float)), *o1 = calloc((size_t)(B * Lq * H * Dv), sizeof(float));
    float *lb = calloc((size_t)(B * H * Lq), sizeof(float));
    attn_tensor out = {ob, ATTN_F32, 4, {B, H, Lq, Dv}, {Lq * H * Dv, Dv, H * Dv, 1}}, out1 = out;
    out1.data = o1;
    attn_tensor lse = attn_tensor_f32_3d(lb, B, H, Lq);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.has_scale = c->has_scale, p.scale = c->scale, p.lse = &lse, p.n_threads = 2;
    CHECK(attn__sdpa_short(&out, NULL, &q, &k, &v, &p) == ATTN_OK, "%s: the short kernel takes B %lld H %lld/%lld Lq %lld Lk %lld D %lld/%lld: %s",
          path, (long long)B, (long long)H, (long long)Hkv, (long long)Lq, (long long)Lk, (long long)D, (long long)Dv, attn_last_error());
    p.n_threads = 1;
    p.lse = NULL;
    float *wb = calloc((size_t)(B * H * Lq * Lk), sizeof(float));
    attn_tensor wt = attn_tensor_f32_4d(wb, B, H, Lq, Lk);
    CHECK_OK(attn_sdpa(&out1, &wt, &q, &k, &v, &p)); /* with the weights: the same out */
    CHECK(memcmp(ob, o1, sizeof(float) * (size_t)(B * Lq * H * Dv)) == 0, "%s: 1 and 2 threads give the same bits", path);
    double *o64 = malloc(sizeof(double) * (size_t)(B * H * Lq * Dv)), *l64 = malloc(sizeof(double) * (size_t)(B * H * Lq));
    double *w64 = malloc(sizeof(double) * (size_t)(B * H * Lq * Lk));
    oracle(o64, l64, w64, &q, &k, &v, c->has_scale ? (double)c->scale : 1.0 / sqrt((double)D));
    double eo = 0, el = 0, ew = 0;
    for (int64_t e = 0; e < B * H * Lq * Lk; e++) ew = fmax(ew, fabs(wb[e] - w64[e]));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < Lq; i++) {
                const int64_t row = (b * H + h) * Lq + i;
                for (int64_t e = 0; e < Dv; e++) eo = fmax(eo, fabs(at(&out, b, h, i, e) - o64[row * Dv + e]));
                el = fmax(el, fabs(lb[row] - l64[row]));
            }
    CHECK(eo <= 2e-6 * 2 && el <= 2e-6 * fmax(1.0, fabs(l64[0])) && ew <= 2e-6, "%s: Lq %lld Lk %lld D %lld Dv %lld: out %.2e lse %.2e weights %.2e",
          path, (long long)Lq, (long long)Lk, (long long)D, (long long)Dv, eo, el, ew);
    free(o64), free(l64), free(w64), free(wb), free(ob), free(o1), free(lb), free(buf), free(qb), free(kb), free(vb);
}

static void test_values(void) {
    static const shape cases[] = {
        {2, 4, 4, 17, 17, 32, 32, 1, 0, 0},     /* a ViT layer: views into the fused projection */
        {1, 6, 2, 5, 9, 12, 20, 0, 0, 0},       /* GQA, Lq != Lk, Dv != D */
        {3, 2, 1, 1, 64, 64, 64, 0, 0, 0},      /* one query row, the longest keys */
        {1, 1, 1, 64, 1, 256, 8, 0, 0, 0},      /* one key, the largest head */
        {1, 2, 1, 64, 64, 256, 256, 0, 0, 0},   /* the largest item: the whole forward scratch */
        {8, 4, 4, 17, 17, 32, 32, 0, 0, 0},     /* enough work for 2 threads (the bit check below) */
        {2, 3, 3, 23, 23, 40, 40, 1, 0, 0},     /* remainders: 23 % 4, 40 % 16, 23 -> 24 columns */
        {2, 3, 3, 23, 40, 40, 40, 0, 0, 0},     /* Lq != Lk with remainders */
        {1, 2, 2, 7, 7, 16, 16, 0, 1, -0.3f},   /* a negative scale */
        {1, 2, 2, 6, 11, 8, 8, 0, 1, 0.0f},     /* scale 0: the mean of v */
    };
    static const char *const paths[] = {"avx2", "portable"};
    for (size_t pi = 0; pi < 2; pi++) {
        if (pi == 0 && !attn__fused_path_supported(ATTN__SIMD_AVX2)) continue;
        setenv("ATTN_SIMD", paths[pi], 1);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], paths[pi]);
    }
    unsetenv("ATTN_SIMD");
}

/* NaN / inf / overflow: the same error codes as the fused kernel, which sees the same inputs */
static void test_errors(void) {
    const int64_t L = 9, D = 16;
    float q[9 * 16], k[9 * 16], v[9 * 16], o[9 * 16], o2[9 * 16];
    attn_tensor tq = attn_tensor_f32_4d(q, 1, 1, L, D), tk = attn_tensor_f32_4d(k, 1, 1, L, D), tv = attn_tensor_f32_4d(v, 1, 1, L, D);
    attn_tensor to = attn_tensor_f32_4d(o, 1, 1, L, D), to2 = attn_tensor_f32_4d(o2, 1, 1, L, D);
    struct {
        float *t;
        int64_t at;
        float val;
        const char *what;
    } cases[] = {{q, 5, NAN, "NaN in q"}, {k, 20, NAN, "NaN in k"}, {k, 3, INFINITY, "inf in k"}, {v, 40, INFINITY, "inf in v"},
                 {q, 0, 1e30f, "a score past float32"}, {NULL, 0, 0, "a scale past float32 (scores finite)"},
                 {NULL, 0, 0, "a raw score past float32, scale 0 (no error: scores 0)"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int64_t i = 0; i < L * D; i++) q[i] = urand(-1, 1), k[i] = urand(-1, 1), v[i] = urand(-1, 1);
        if (cases[c].t) cases[c].t[cases[c].at] = cases[c].val;
        if (c == 4) k[0] = 1e30f;
        attn_sdpa_params sp = attn_sdpa_params_default();
        if (c == 5) {
            for (int64_t i = 0; i < L * D; i++) q[i] = 1.0f, k[i] = 1.0f;
            sp.has_scale = 1, sp.scale = 1e38f; /* each score 16e38 */
        }
        if (c == 6) {
            for (int64_t d = 0; d < D; d++) q[d] = 1e30f, k[d] = 1e30f;
            sp.has_scale = 1, sp.scale = 0.0f;
        }
        attn_sdpa_params fp = sp;
        fp.impl = ATTN_IMPL_FUSED;
        const int want = attn_sdpa(&to2, NULL, &tq, &tk, &tv, &fp);
        char msg[256];
        snprintf(msg, sizeof msg, "%s", want < 0 ? attn_last_error() : "");
        const int got = attn_sdpa(&to, NULL, &tq, &tk, &tv, &sp);
        CHECK(got == want && (want == 0 || strcmp(msg, attn_last_error()) == 0) && (c == 6) == (want == 0),
              "%s: short %d (%s), fused %d (%s)", cases[c].what, got, got < 0 ? attn_last_error() : "", want, msg);
    }
}

/* what the short kernel declines (attn_sdpa then runs the fused kernel) */
static void test_declines(void) {
    float *a = calloc(65 * 16 * 2, sizeof(float)), *o = calloc(65 * 16 * 2, sizeof(float)), *w = calloc(65 * 65, sizeof(float));
    attn_tensor q = attn_tensor_f32_4d(a, 1, 1, 8, 16), out = attn_tensor_f32_4d(o, 1, 1, 8, 16);
    attn_tensor long_k = attn_tensor_f32_4d(a, 1, 1, 65, 16), long_q = attn_tensor_f32_4d(a, 1, 1, 65, 16);
    attn_tensor long_out = attn_tensor_f32_4d(o, 1, 1, 65, 16), weights = attn_tensor_f32_4d(w, 1, 1, 8, 8);
    unsigned char mb[64];
    memset(mb, 1, sizeof mb);
    attn_tensor mask;
    int64_t ms[2] = {8, 8};
    CHECK_OK(attn_tensor_make(&mask, mb, ATTN_BOOL, 2, ms));
    attn_sdpa_params p = attn_sdpa_params_default();
    CHECK(attn__sdpa_short(&out, NULL, &q, &q, &q, &p) == ATTN_OK, "the plain case is taken");
    CHECK(attn__sdpa_short(&out, &weights, &q, &q, &q, &p) == ATTN_OK, "a weights output is taken");
    attn_tensor hw = weights;
    hw.dtype = ATTN_F16;
    CHECK(attn__sdpa_short(&out, &hw, &q, &q, &q, &p) == ATTN__SHORT_DECLINED, "float16 weights declined");
    CHECK(attn__sdpa_short(&out, NULL, &q, &long_k, &long_k, &p) == ATTN__SHORT_DECLINED, "Lk 65 declined");
    CHECK(attn__sdpa_short(&long_out, NULL, &long_q, &q, &q, &p) == ATTN__SHORT_DECLINED, "Lq 65 declined");
    p.is_causal = 1;
    CHECK(attn__sdpa_short(&out, NULL, &q, &q, &q, &p) == ATTN__SHORT_DECLINED, "causal declined");
    p = attn_sdpa_params_default(), p.mask = &mask;
    CHECK(attn__sdpa_short(&out, NULL, &q, &q, &q, &p) == ATTN__SHORT_DECLINED, "a mask declined");
    p = attn_sdpa_params_default(), p.window = 2;
    CHECK(attn__sdpa_short(&out, NULL, &q, &q, &q, &p) == ATTN__SHORT_DECLINED, "a window declined");
    p = attn_sdpa_params_default(), p.impl = ATTN_IMPL_FUSED;
    CHECK(attn__sdpa_short(&out, NULL, &q, &q, &q, &p) == ATTN__SHORT_DECLINED, "impl fused declined");
    attn_tensor h = q;
    h.dtype = ATTN_F16;
    p = attn_sdpa_params_default();
    CHECK(attn__sdpa_short(&out, NULL, &h, &h, &h, &p) == ATTN__SHORT_DECLINED, "float16 declined");
    /* bad shapes are the checker's errors, as from the fused kernel */
    attn_tensor bad_out = attn_tensor_f32_4d(o, 1, 1, 7, 16);
    CHECK_ERR(attn_sdpa(&bad_out, NULL, &q, &q, &q, NULL), ATTN_E_SHAPE);
    free(a), free(o), free(w);
}

int main(void) {
    attn_test_name = "sdpa_short";
    test_values();
    test_errors();
    test_declines();
    return attn_test_finish();
}
