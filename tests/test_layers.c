/* Multi-head attention and encoder/decoder layers against PyTorch (fixtures from
 * scripts/gen_layer_fixtures.py: torch.nn.MultiheadAttention, TransformerEncoderLayer,
 * TransformerDecoderLayer computed in float64 from float32-exact inputs), the KV-cache
 * step-by-step contract, and GQA + RoPE consistency. */
#include "attn.h"
#include "attn_layers.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 128
static attn_tensor loaded[MAXT];
static int nloaded = 0;

static attn_tensor *fx(const char *cas, const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "layers/%s.%s.npy", cas, name);
    attn_tensor *t = &loaded[nloaded];
    int rc = attn_npy_load(t, attn_test_fixture(rel));
    CHECK(rc == 0, "load fixture %s: %s", rel, attn_last_error());
    if (rc != 0) {
        fprintf(stderr, "fixtures missing: regenerate with python3 scripts/gen_layer_fixtures.py\n");
        exit(attn_test_finish() ? 1 : 1);
    }
    nloaded++;
    return t;
}

static void free_all(void) {
    for (int i = 0; i < nloaded; i++) attn_npy_free(&loaded[i]);
    nloaded = 0;
}

static attn_mha_weights load_mha(const char *cas, const char *prefix) {
    attn_mha_weights w;
    char n[64];
#define L(field)                                         \
    snprintf(n, sizeof n, "%s%s", prefix, #field);       \
    w.field = *fx(cas, n);
    L(wq) L(wk) L(wv) L(bq) L(bk) L(bv) L(wo) L(bo)
#undef L
    return w;
}

/* max |got - want| relative to max |want| (want is float64) */
static double rel_err(const float *got, const attn_tensor *want) {
    size_t n = (size_t)attn_tensor_numel(want);
    const double *w = (const double *)want->data;
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(w[i]));
    return attn_test_max_abs_diff_f64(got, w, n) / (mx > 0 ? mx : 1);
}

static attn_arena arena;

static void test_mha_torch(void) {
    attn_tensor *xq = fx("mha", "x_q"), *xkv = fx("mha", "x_kv"), *lens = fx("mha", "lengths");
    attn_mha_weights w = load_mha("mha", "");
    attn_mha_config cfg = {.d_model = 16, .n_heads = 4};
    attn_sdpa_params p = attn_sdpa_params_default();
    p.key_lengths = (const int64_t *)lens->data;
    float out[2 * 5 * 16], out2[2 * 5 * 16], wa[2 * 5 * 7], wh[2 * 4 * 5 * 7];
    attn_tensor to = attn_tensor_f32_3d(out, 2, 5, 16), to2 = attn_tensor_f32_3d(out2, 2, 5, 16);
    attn_tensor twa = attn_tensor_f32_3d(wa, 2, 5, 7), twh = attn_tensor_f32_4d(wh, 2, 4, 5, 7);
    CHECK_OK(attn_mha_forward(&to, &twa, xq, xkv, &cfg, &w, &p, &arena));
    /* tolerance 2e-6 relative: float32 activations through 2 projections + attention */
    double e = rel_err(out, fx("mha", "out"));
    CHECK(e < 2e-6, "mha vs torch.nn.MultiheadAttention: rel err %.3g", e);
    e = rel_err(wa, fx("mha", "w_avg"));
    CHECK(e < 2e-6, "mha averaged weights vs torch: rel err %.3g", e);
    CHECK_OK(attn_mha_forward(&to2, &twh, xq, xkv, &cfg, &w, &p, &arena));
    e = rel_err(wh, fx("mha", "w_head"));
    CHECK(e < 2e-6, "mha per-head weights vs torch: rel err %.3g", e);
    CHECK(memcmp(out, out2, sizeof out) == 0, "per-head and averaged weight paths give identical outputs");
    CHECK_OK(attn_mha_forward(&to2, NULL, xq, xkv, &cfg, &w, &p, &arena));
    CHECK(memcmp(out, out2, sizeof out) == 0, "weights and no-weights paths give identical outputs");
    /* error: wrong weights tensor shape */
    float bad[10];
    attn_tensor tb = attn_tensor_f32_2d(bad, 2, 5);
    CHECK_ERR(attn_mha_forward(&to2, &tb, xq, xkv, &cfg, &w, &p, &arena), ATTN_E_SHAPE);
    attn_mha_config bcfg = cfg;
    bcfg.n_heads = 3;
    CHECK_ERR(attn_mha_forward(&to2, NULL, xq, xkv, &bcfg, &w, &p, &arena), ATTN_E_SHAPE);
    CHECK(arena.used_bytes == 0, "arena released after mha (used %zu)", arena.used_bytes);
    free_all();
}

static void test_encoder_torch(const char *cas, int norm_first, attn_activation act) {
    attn_tensor *x = fx(cas, "x"), *lens = fx(cas, "lengths");
    attn_encoder_weights w;
    memset(&w, 0, sizeof w);
    w.attn = load_mha(cas, "attn.");
    w.ff_w1 = *fx(cas, "ff_w1"); w.ff_b1 = *fx(cas, "ff_b1");
    w.ff_w2 = *fx(cas, "ff_w2"); w.ff_b2 = *fx(cas, "ff_b2");
    w.ln1_g = *fx(cas, "ln1_g"); w.ln1_b = *fx(cas, "ln1_b");
    w.ln2_g = *fx(cas, "ln2_g"); w.ln2_b = *fx(cas, "ln2_b");
    attn_layer_config cfg = {.attn = {.d_model = 16, .n_heads = 4}, .d_ff = 32, .act = act, .norm_first = norm_first, .eps = 1e-5f};
    attn_sdpa_params p = attn_sdpa_params_default();
    p.key_lengths = (const int64_t *)lens->data;
    float y[2 * 6 * 16];
    attn_tensor ty = attn_tensor_f32_3d(y, 2, 6, 16);
    CHECK_OK(attn_encoder_layer(&ty, NULL, x, &cfg, &w, &p, &arena));
    /* 1e-5 relative: LayerNorm divides by small std-devs, amplifying float32 rounding */
    double e = rel_err(y, fx(cas, "y"));
    CHECK(e < 1e-5, "%s: encoder layer vs torch.nn.TransformerEncoderLayer rel err %.3g", cas, e);
    free_all();
}

static void load_dec(const char *cas, attn_decoder_weights *w) {
    memset(w, 0, sizeof *w);
    w->self_attn = load_mha(cas, "self.");
    w->cross_attn = load_mha(cas, "cross.");
    w->ff_w1 = *fx(cas, "ff_w1"); w->ff_b1 = *fx(cas, "ff_b1");
    w->ff_w2 = *fx(cas, "ff_w2"); w->ff_b2 = *fx(cas, "ff_b2");
    w->ln1_g = *fx(cas, "ln1_g"); w->ln1_b = *fx(cas, "ln1_b");
    w->ln2_g = *fx(cas, "ln2_g"); w->ln2_b = *fx(cas, "ln2_b");
    w->ln3_g = *fx(cas, "ln3_g"); w->ln3_b = *fx(cas, "ln3_b");
}

static void test_decoder_torch(const char *cas, int norm_first, attn_activation act) {
    attn_tensor *x = fx(cas, "x"), *enc = fx(cas, "enc"), *lens = fx(cas, "lengths");
    attn_decoder_weights w;
    load_dec(cas, &w);
    attn_layer_config cfg = {.attn = {.d_model = 16, .n_heads = 4}, .d_ff = 32, .act = act, .norm_first = norm_first, .eps = 1e-5f};
    attn_mha_config ccfg = {.d_model = 16, .n_heads = 4};
    const int64_t *el = (const int64_t *)lens->data;
    enum { B = 2, T = 5, S = 7, E = 16 };
    float y[B * T * E];
    attn_tensor ty = attn_tensor_f32_3d(y, B, T, E);
    CHECK_OK(attn_decoder_layer(&ty, x, enc, el, &cfg, &ccfg, &w, NULL, &arena));
    double e = rel_err(y, fx(cas, "y"));
    CHECK(e < 1e-5, "%s: decoder layer (full pass) vs torch.nn.TransformerDecoderLayer rel err %.3g", cas, e);

    /* KV cache: one token at a time equals the full pass (1e-5 relative) */
    attn_decoder_state st;
    CHECK_OK(attn_decoder_state_init(&st, &cfg, &ccfg, B, T, S));
    float ys[B * T * E], step_in[B * E], step_out[B * E];
    for (int t = 0; t < T; t++) {
        for (int b = 0; b < B; b++) memcpy(step_in + b * E, (float *)x->data + (b * T + t) * E, sizeof(float) * E);
        attn_tensor ti = attn_tensor_f32_3d(step_in, B, 1, E), to = attn_tensor_f32_3d(step_out, B, 1, E);
        CHECK_OK(attn_decoder_layer(&to, &ti, t == 0 ? enc : NULL, el, &cfg, &ccfg, &w, &st, &arena));
        for (int b = 0; b < B; b++) memcpy(ys + (b * T + t) * E, step_out + b * E, sizeof(float) * E);
    }
    double mx = attn_test_max_abs(y, B * T * E);
    double d = attn_test_max_abs_diff(ys, y, B * T * E);
    CHECK(d <= 1e-5 * mx, "%s: step-by-step KV cache equals the full pass (max diff %.3g)", cas, d);
    /* two steps of 2 and 3 tokens */
    attn_decoder_state_reset(&st);
    float part[B * 3 * E], pout[B * 3 * E];
    int off = 0, sizes[2] = {2, 3};
    double d2 = 0;
    for (int s = 0; s < 2; s++) {
        int n = sizes[s];
        for (int b = 0; b < B; b++) memcpy(part + b * n * E, (float *)x->data + (b * T + off) * E, sizeof(float) * n * E);
        attn_tensor ti = attn_tensor_f32_3d(part, B, n, E), to = attn_tensor_f32_3d(pout, B, n, E);
        CHECK_OK(attn_decoder_layer(&to, &ti, enc, el, &cfg, &ccfg, &w, &st, &arena));
        for (int b = 0; b < B; b++) d2 = fmax(d2, attn_test_max_abs_diff(pout + b * n * E, y + (b * T + off) * E, (size_t)n * E));
        off += n;
    }
    CHECK(d2 <= 1e-5 * mx, "%s: chunked (2 + 3) decoding equals the full pass (max diff %.3g)", cas, d2);
    /* cache full -> clear error */
    attn_tensor ti = attn_tensor_f32_3d(step_in, B, 1, E), to = attn_tensor_f32_3d(step_out, B, 1, E);
    CHECK_ERR(attn_decoder_layer(&to, &ti, NULL, el, &cfg, &ccfg, &w, &st, &arena), ATTN_E_RANGE);
    attn_decoder_state_reset(&st);
    CHECK_ERR(attn_decoder_layer(&to, &ti, NULL, el, &cfg, &ccfg, &w, &st, &arena), ATTN_E_INVALID);
    attn_decoder_state_free(&st);
    free_all();
}

/* GQA + RoPE self-attention through a KV cache: incremental equals full causal pass, and
 * the full pass equals an explicit computation (project, rotate, repeat kv heads, sdpa). */
static void test_gqa_rope_cache(void) {
    enum { B = 2, L = 6, E = 24, H = 6, HKV = 2, D = 4 };
    static float wq[H * D * E], wk[HKV * D * E], wv[HKV * D * E], wo[E * H * D], x[B * L * E];
    uint64_t s = 77;
    attn_test_fill_uniform(wq, sizeof wq / 4, -0.3f, 0.3f, &s);
    attn_test_fill_uniform(wk, sizeof wk / 4, -0.3f, 0.3f, &s);
    attn_test_fill_uniform(wv, sizeof wv / 4, -0.3f, 0.3f, &s);
    attn_test_fill_uniform(wo, sizeof wo / 4, -0.3f, 0.3f, &s);
    attn_test_fill_uniform(x, sizeof x / 4, -1, 1, &s);
    attn_mha_weights w;
    memset(&w, 0, sizeof w);
    w.wq = attn_tensor_f32_2d(wq, H * D, E);
    w.wk = attn_tensor_f32_2d(wk, HKV * D, E);
    w.wv = attn_tensor_f32_2d(wv, HKV * D, E);
    w.wo = attn_tensor_f32_2d(wo, E, H * D);
    attn_mha_config cfg = {.d_model = E, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .rope_theta = 10000.0f,
                           .rope_layout = ATTN_ROPE_HALF};
    attn_sdpa_params p = attn_sdpa_params_default();
    p.is_causal = 1;
    float full[B * L * E], inc[B * L * E];
    attn_tensor tx = attn_tensor_f32_3d(x, B, L, E), tf = attn_tensor_f32_3d(full, B, L, E);
    CHECK_OK(attn_mha_forward(&tf, NULL, &tx, NULL, &cfg, &w, &p, &arena));
    attn_kv_cache c;
    CHECK_OK(attn_kv_cache_init(&c, B, HKV, L, D));
    for (int t = 0; t < L; t++) {
        float xi[B * E], oi[B * E];
        for (int b = 0; b < B; b++) memcpy(xi + b * E, x + (b * L + t) * E, sizeof(float) * E);
        attn_tensor ti = attn_tensor_f32_3d(xi, B, 1, E), to = attn_tensor_f32_3d(oi, B, 1, E);
        CHECK_OK(attn_mha_append_kv(&c, &ti, &cfg, &w, &arena));
        CHECK_OK(attn_mha_attend(&to, NULL, &ti, &cfg, &w, &c, &p, &arena));
        for (int b = 0; b < B; b++) memcpy(inc + (b * L + t) * E, oi + b * E, sizeof(float) * E);
    }
    double mx = attn_test_max_abs(full, B * L * E);
    CHECK(attn_test_max_abs_diff(inc, full, B * L * E) <= 1e-5 * mx, "GQA+RoPE: cached decoding equals full pass");
    attn_kv_cache_free(&c);

    /* explicit: float64 projections, rotation (half layout), kv head h / (H/HKV), causal softmax */
    double maxerr = 0;
    for (int b = 0; b < B; b++) {
        static double q[H][L][D], k[HKV][L][D], v[HKV][L][D], o[L][H * D];
        for (int l = 0; l < L; l++) {
            const float *xr = x + (b * L + l) * E;
            for (int r = 0; r < H * D; r++) {
                double a = 0;
                for (int e = 0; e < E; e++) a += (double)wq[r * E + e] * xr[e];
                q[r / D][l][r % D] = a;
            }
            for (int r = 0; r < HKV * D; r++) {
                double a = 0, c2 = 0;
                for (int e = 0; e < E; e++) {
                    a += (double)wk[r * E + e] * xr[e];
                    c2 += (double)wv[r * E + e] * xr[e];
                }
                k[r / D][l][r % D] = a;
                v[r / D][l][r % D] = c2;
            }
            for (int i = 0; i < D / 2; i++) {
                double ang = l * pow(10000.0, -2.0 * i / D), cs = cos(ang), sn = sin(ang);
                for (int h = 0; h < H; h++) {
                    double a0 = q[h][l][i], a1 = q[h][l][i + D / 2];
                    q[h][l][i] = a0 * cs - a1 * sn;
                    q[h][l][i + D / 2] = a1 * cs + a0 * sn;
                }
                for (int h = 0; h < HKV; h++) {
                    double a0 = k[h][l][i], a1 = k[h][l][i + D / 2];
                    k[h][l][i] = a0 * cs - a1 * sn;
                    k[h][l][i + D / 2] = a1 * cs + a0 * sn;
                }
            }
        }
        for (int h = 0; h < H; h++) {
            int hk = h / (H / HKV);
            for (int i = 0; i < L; i++) {
                double sc[L], mxs = -1e300, sum = 0;
                for (int j = 0; j <= i; j++) {
                    sc[j] = 0;
                    for (int d = 0; d < D; d++) sc[j] += q[h][i][d] * k[hk][j][d];
                    sc[j] /= sqrt((double)D);
                    mxs = fmax(mxs, sc[j]);
                }
                for (int j = 0; j <= i; j++) sum += exp(sc[j] - mxs);
                for (int d = 0; d < D; d++) {
                    double a = 0;
                    for (int j = 0; j <= i; j++) a += exp(sc[j] - mxs) / sum * v[hk][j][d];
                    o[i][h * D + d] = a;
                }
            }
        }
        for (int l = 0; l < L; l++)
            for (int e = 0; e < E; e++) {
                double a = 0;
                for (int r = 0; r < H * D; r++) a += (double)wo[e * H * D + r] * o[l][r];
                maxerr = fmax(maxerr, fabs(a - full[(b * L + l) * E + e]));
            }
    }
    CHECK(maxerr <= 1e-5 * mx, "GQA+RoPE mha equals the explicit float64 computation (err %.3g)", maxerr);
}

/* attn_kv: a slot is [n_kv_heads, max_len, head_dim]; a beam reorder moves every head's filled
 * positions of every layer (each float named by its layer, slot, head, position and element, so a
 * misplaced one is seen); bad sizes are refused */
static float kv_val(int64_t l, int64_t s, int64_t h, int64_t p, int64_t d) { return (float)(1000 * l + 100 * s + 10 * h + p) + 0.125f * (float)d; }

static void test_kv_layout(void) {
    enum { NL = 2, NS = 3, NH = 2, T = 4, HD = 3 };
    attn_kv *kv = NULL;
    CHECK_ERR(attn_kv_create(&kv, NL, NS, 0, T, HD), ATTN_E_INVALID);
    CHECK_OK(attn_kv_create(&kv, NL, NS, NH, T, HD));
    if (!kv) return;
    CHECK(attn_kv_n_kv_heads(kv) == NH && attn_kv_head_dim(kv) == HD && attn_kv_max_len(kv) == T, "kv sizes");
    const int64_t len[NS] = {2, 4, 1}, src[NS] = {2, 1, 1};
    CHECK_OK(attn_kv_advance(kv, NULL, len, NS));
    for (int64_t l = 0; l < NL; l++)
        for (int64_t s = 0; s < NS; s++)
            for (int64_t h = 0; h < NH; h++)
                for (int64_t p = 0; p < len[s]; p++)
                    for (int64_t d = 0; d < HD; d++) {
                        attn_kv_keys(kv, l, s)[(h * T + p) * HD + d] = kv_val(l, s, h, p, d);
                        attn_kv_values(kv, l, s)[(h * T + p) * HD + d] = -kv_val(l, s, h, p, d);
                    }
    CHECK_OK(attn_kv_reorder(kv, src, NS));
    int bad = 0;
    for (int64_t i = 0; i < NS; i++) {
        bad += attn_kv_len(kv, i) != len[src[i]];
        for (int64_t l = 0; l < NL; l++)
            for (int64_t h = 0; h < NH; h++)
                for (int64_t p = 0; p < len[src[i]]; p++)
                    for (int64_t d = 0; d < HD; d++) {
                        bad += attn_kv_keys(kv, l, i)[(h * T + p) * HD + d] != kv_val(l, src[i], h, p, d);
                        bad += attn_kv_values(kv, l, i)[(h * T + p) * HD + d] != -kv_val(l, src[i], h, p, d);
                    }
    }
    CHECK(bad == 0, "kv reorder: %d lengths or floats out of place", bad);
    /* attn_kv_write: a row with the heads side by side lands head by head; outside the slot: refused */
    float kr[NH * HD], vr[NH * HD];
    for (int64_t h = 0; h < NH; h++)
        for (int64_t d = 0; d < HD; d++) kr[h * HD + d] = kv_val(1, 2, h, 3, d), vr[h * HD + d] = -kv_val(1, 2, h, 3, d);
    CHECK_OK(attn_kv_write(kv, 1, 2, 3, kr, vr));
    bad = 0;
    for (int64_t h = 0; h < NH; h++)
        for (int64_t d = 0; d < HD; d++)
            bad += attn_kv_keys(kv, 1, 2)[(h * T + 3) * HD + d] != kv_val(1, 2, h, 3, d) ||
                   attn_kv_values(kv, 1, 2)[(h * T + 3) * HD + d] != -kv_val(1, 2, h, 3, d);
    CHECK(bad == 0, "kv write: %d floats out of place", bad);
    CHECK_ERR(attn_kv_write(kv, 1, 2, T, kr, vr), ATTN_E_RANGE);
    CHECK_ERR(attn_kv_write(kv, NL, 0, 0, kr, vr), ATTN_E_INVALID);
    attn_kv_free(kv);
}

int main(void) {
    attn_test_name = "layers";
    attn_arena_init(&arena, 0);
    test_mha_torch();
    test_encoder_torch("enc_post", 0, ATTN_ACT_GELU);
    test_encoder_torch("enc_pre", 1, ATTN_ACT_RELU);
    test_decoder_torch("dec_post", 0, ATTN_ACT_RELU);
    test_decoder_torch("dec_pre", 1, ATTN_ACT_GELU);
    test_gqa_rope_cache();
    test_kv_layout();
    attn_arena_free(&arena);
    return attn_test_finish();
}
