/* ViT image classifier against transformers (fixtures by scripts/gen_vit_fixtures.py from the
 * committed checkpoint models/vit-fashion-mnist and the Debian dataset-fashion-mnist test
 * set): logits of 1000 test images, interpolated position embeddings, attention weights,
 * last hidden state, attention rollout; config / weight mismatches; the classify CLI. */
#include "attn_image.h"
#include "attn_npy.h"
#include "attn_rollout.h"
#include "attn_vit.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define FMNIST "/usr/share/datasets/fashion-mnist/"
#define MODEL "models/vit-fashion-mnist"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k = 0;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_text(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(s, f);
    fclose(f);
}

/* logits of the first 1000 test images: max |diff| <= 1e-4 (the bound; measured
 * ~1e-6: float32 GEMMs in another order), argmax identical on every image */
static void test_logits(attn_vit *m) {
    const attn_vit_config *c = attn_vit_get_config(m);
    attn_idx im;
    attn_tensor ref;
    CHECK_OK(attn_idx_load(&im, FMNIST "t10k-images-idx3-ubyte.gz"));
    CHECK_OK(attn_npy_load(&ref, attn_test_fixture("vit/logits_first1000.npy")));
    if (!im.data || !ref.data || ref.ndim != 2 || ref.shape[0] != 1000 || ref.shape[1] != c->n_labels) {
        CHECK(0, "fixtures missing");
        attn_idx_free(&im);
        attn_npy_free(&ref);
        return;
    }
    const int64_t N = 1000, B = 100, L = c->n_labels, C = c->channels, H = c->image_h, W = c->image_w;
    float *px = (float *)malloc(sizeof(float) * (size_t)(B * C * H * W));
    float *lg = (float *)malloc(sizeof(float) * (size_t)(N * L));
    attn_arena arena;
    attn_arena_init(&arena, 0);
    int ok = 1;
    for (int64_t s = 0; s < N && ok; s += B) {
        for (int64_t b = 0; b < B && ok; b++) {
            attn_image img;
            int64_t h, w;
            ok = attn_idx_image(&img, &im, s + b) == 0 &&
                 attn_vit_preprocess(m, px + b * C * H * W, C * H * W, &h, &w, &img, 0) == 0 && h == H && w == W;
        }
        ok = ok && attn_vit_forward(m, lg + s * L, NULL, px, B, H, W, &arena) == 0;
    }
    CHECK(ok, "forward on 1000 images: %s", attn_last_error());
    if (ok) {
        const float *r = (const float *)ref.data;
        double d = attn_test_max_abs_diff(lg, r, (size_t)(N * L));
        int mism = 0;
        for (int64_t i = 0; i < N; i++) {
            int64_t a = 0, b = 0;
            for (int64_t j = 1; j < L; j++) {
                if (lg[i * L + j] > lg[i * L + a]) a = j;
                if (r[i * L + j] > r[i * L + b]) b = j;
            }
            mism += a != b;
        }
        printf("logits of 1000 test images vs transformers: max |diff| %.3g, argmax disagreements %d\n", d, mism);
        CHECK(d <= 1e-4, "logits max |diff| %.3g > 1e-4", d);
        CHECK(mism == 0, "%d argmax disagreements", mism);
        CHECK(!attn_test_has_nonfinite(lg, (size_t)(N * L)), "finite logits");
    }
    attn_arena_free(&arena);
    free(px);
    free(lg);
    attn_idx_free(&im);
    attn_npy_free(&ref);
}

/* interpolate_pos_encoding=True on a 42 x 35 input (6 x 5 patches for the 4 x 4 grid) */
static void test_interpolation(attn_vit *m) {
    attn_tensor px, ref;
    CHECK_OK(attn_npy_load(&px, attn_test_fixture("vit/interp_pixels.npy")));
    CHECK_OK(attn_npy_load(&ref, attn_test_fixture("vit/interp_logits.npy")));
    if (!px.data || !ref.data || px.ndim != 4) return;
    int64_t B = px.shape[0], H = px.shape[2], W = px.shape[3], L = attn_vit_get_config(m)->n_labels;
    float lg[64];
    attn_arena arena;
    attn_arena_init(&arena, 0);
    CHECK_OK(attn_vit_forward(m, lg, NULL, (const float *)px.data, B, H, W, &arena));
    double d = attn_test_max_abs_diff(lg, (const float *)ref.data, (size_t)(B * L));
    printf("interpolated positions (%lldx%lld input): max |logit diff| %.3g\n", (long long)W, (long long)H, d);
    CHECK(d <= 1e-4, "interpolated logits max |diff| %.3g > 1e-4", d);
    attn_arena_free(&arena);
    attn_npy_free(&px);
    attn_npy_free(&ref);
}

/* attention weights, last hidden state and rollout of test image 0 */
static void test_attention(attn_vit *m) {
    const attn_vit_config *c = attn_vit_get_config(m);
    attn_tensor ra, rh, rr;
    CHECK_OK(attn_npy_load(&ra, attn_test_fixture("vit/attn_item0.npy")));
    CHECK_OK(attn_npy_load(&rh, attn_test_fixture("vit/hidden_item0.npy")));
    CHECK_OK(attn_npy_load(&rr, attn_test_fixture("vit/rollout_item0.npy")));
    attn_image png;
    CHECK_OK(attn_image_load(&png, attn_test_fixture("vit/test_0_ankle_boot.png")));
    int64_t T = attn_vit_tokens(m, c->image_h, c->image_w), L = c->n_layers, H = c->n_heads, E = c->d_model;
    if (!ra.data || !rh.data || !rr.data || !png.data || attn_tensor_numel(&ra) != L * H * T * T) {
        CHECK(0, "fixtures missing or of another shape");
        goto out;
    }
    float *px = (float *)malloc(sizeof(float) * (size_t)(c->channels * c->image_h * c->image_w));
    float *att = (float *)malloc(sizeof(float) * (size_t)(L * H * T * T));
    float *hid = (float *)malloc(sizeof(float) * (size_t)(T * E));
    float *roll = (float *)malloc(sizeof(float) * (size_t)(T * T));
    int64_t h, w;
    attn_arena arena;
    attn_arena_init(&arena, 0);
    CHECK_OK(attn_vit_preprocess(m, px, c->channels * c->image_h * c->image_w, &h, &w, &png, 0));
    attn_vit_extra ex = {hid, NULL, att};
    CHECK_OK(attn_vit_forward(m, NULL, &ex, px, 1, h, w, &arena));
    double da = attn_test_max_abs_diff(att, (const float *)ra.data, (size_t)(L * H * T * T));
    double dh = attn_test_max_abs_diff(hid, (const float *)rh.data, (size_t)(T * E));
    CHECK_OK(attn_attention_rollout(roll, att, L, 1, H, T));
    double dr = attn_test_max_abs_diff_f64(roll, (const double *)rr.data, (size_t)(T * T));
    printf("image 0: attentions max |diff| %.3g, last_hidden %.3g, rollout %.3g\n", da, dh, dr);
    CHECK(da <= 1e-5, "attention weights max |diff| %.3g > 1e-5", da);
    CHECK(dh <= 1e-4, "last hidden state max |diff| %.3g > 1e-4", dh);
    CHECK(dr <= 1e-5, "rollout max |diff| %.3g > 1e-5", dr);
    /* rollout rows are distributions */
    double worst = 0;
    for (int64_t i = 0; i < T; i++) {
        double s = 0;
        for (int64_t j = 0; j < T; j++) s += roll[i * T + j];
        worst = fabs(s - 1) > worst ? fabs(s - 1) : worst;
    }
    CHECK(worst < 1e-5, "rollout rows sum to 1 (worst %.3g)", worst);
    attn_arena_free(&arena);
    free(px);
    free(att);
    free(hid);
    free(roll);
out:
    attn_image_free(&png);
    attn_npy_free(&ra);
    attn_npy_free(&rh);
    attn_npy_free(&rr);
}

/* a random 3-channel ViT, non-square 12 x 8 image, no qkv bias, gelu_new: the channel order
 * of the patch GEMM, the config's pair sizes, and the unprefixed ViTModel names */
static void test_tiny_rgb(void) {
    attn_vit *m = NULL, *base = NULL;
    attn_tensor px, rl, rh;
    CHECK_OK(attn_vit_load(&m, attn_test_fixture("vit/tiny_rgb")));
    CHECK_OK(attn_vit_load(&base, attn_test_fixture("vit/tiny_rgb_base")));
    CHECK_OK(attn_npy_load(&px, attn_test_fixture("vit/tiny_rgb_pixels.npy")));
    CHECK_OK(attn_npy_load(&rl, attn_test_fixture("vit/tiny_rgb_logits.npy")));
    CHECK_OK(attn_npy_load(&rh, attn_test_fixture("vit/tiny_rgb_hidden.npy")));
    if (m && base && px.data && rl.data && rh.data) {
        const attn_vit_config *c = attn_vit_get_config(m);
        CHECK(c->channels == 3 && c->image_h == 12 && c->image_w == 8 && c->qkv_bias == 0 && c->act == ATTN_ACT_GELU_TANH &&
                  c->n_labels == 3,
              "tiny config parsed");
        CHECK(strcmp(attn_vit_label(m, 2), "blue") == 0, "labels");
        CHECK(attn_vit_get_config(base)->n_labels == 0, "ViTModel has no classifier");
        float lg[6], hid[2 * 7 * 16], hid2[2 * 7 * 16];
        attn_arena arena;
        attn_arena_init(&arena, 0);
        attn_vit_extra ex = {hid, NULL, NULL}, ex2 = {hid2, NULL, NULL};
        CHECK_OK(attn_vit_forward(m, lg, &ex, (const float *)px.data, 2, 12, 8, &arena));
        CHECK_OK(attn_vit_forward(base, NULL, &ex2, (const float *)px.data, 2, 12, 8, &arena));
        CHECK_ERR(attn_vit_forward(base, lg, NULL, (const float *)px.data, 2, 12, 8, &arena), ATTN_E_INVALID);
        double dl = attn_test_max_abs_diff(lg, (const float *)rl.data, 6);
        double dh = attn_test_max_abs_diff(hid, (const float *)rh.data, 2 * 7 * 16);
        double db = attn_test_max_abs_diff(hid2, (const float *)rh.data, 2 * 7 * 16);
        printf("tiny RGB ViT: logits max |diff| %.3g, hidden %.3g, ViTModel hidden %.3g\n", dl, dh, db);
        CHECK(dl <= 1e-4 && dh <= 1e-4 && db <= 1e-4, "tiny RGB ViT matches transformers");
        /* a grey image for an RGB model: the three channels are the grey values */
        unsigned char g[12 * 8];
        for (int i = 0; i < 12 * 8; i++) g[i] = (unsigned char)(i * 2);
        attn_image img = {g, 8, 12, 1};
        float p3[3 * 12 * 8];
        int64_t h, w;
        CHECK_OK(attn_vit_preprocess(m, p3, 3 * 12 * 8, &h, &w, &img, 0));
        CHECK(h == 12 && w == 8 && p3[5] == p3[96 + 5] && p3[5] == p3[192 + 5] && p3[5] == (10 * (1.0f / 255.0f) - 0.5f) / 0.5f,
              "grey -> RGB: channels equal, default normalisation");
        attn_arena_free(&arena);
    }
    attn_vit_free(m);
    attn_vit_free(base);
    attn_npy_free(&px);
    attn_npy_free(&rl);
    attn_npy_free(&rh);
}

/* float64 reference of the rollout written here: the full product R = A_{L-1} ... A_0 of
 * A_l = rownorm(0.5 mean_h W_l + 0.5 I), item b */
static void rollout_ref(double *R, const float *att, int L, int B, int H, int T, int b) {
    double *A = (double *)malloc(sizeof(double) * (size_t)(T * T)), *N = (double *)malloc(sizeof(double) * (size_t)(T * T));
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < T; i++) {
            double s = 0;
            for (int j = 0; j < T; j++) {
                double m = 0;
                for (int h = 0; h < H; h++) m += att[((((size_t)l * B + b) * H + h) * T + i) * T + j];
                A[i * T + j] = 0.5 * m / H + (i == j ? 0.5 : 0);
                s += A[i * T + j];
            }
            for (int j = 0; j < T; j++) A[i * T + j] /= s;
        }
        if (l == 0) {
            memcpy(R, A, sizeof(double) * (size_t)(T * T));
            continue;
        }
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                double s = 0;
                for (int k = 0; k < T; k++) s += A[i * T + k] * R[k * T + j];
                N[i * T + j] = s;
            }
        memcpy(R, N, sizeof(double) * (size_t)(T * T));
    }
    free(A);
    free(N);
}

/* issue 23 item 4: the CLS row alone (attn_attention_rollout_row) and the full rollout against
 * the float64 product above, on random softmax weights. Tolerance: both compute in float64
 * (differences ~1e-16) and round once to float32, so |out - ref| <= 2^-24 |ref| + 1e-15. */
static void test_rollout_row(void) {
    enum { L = 3, B = 2, H = 2, T = 17 };
    static float att[L * B * H * T * T];
    uint64_t seed = 2323;
    attn_test_fill_uniform(att, sizeof att / sizeof att[0], 0.0f, 1.0f, &seed);
    for (int r = 0; r < L * B * H * T; r++) { /* softmax-like rows: positive, sum 1, some zeros */
        float *w = att + (size_t)r * T, s = 0;
        for (int j = 0; j < T; j++) s += w[j] = w[j] < 0.3f ? 0.0f : w[j] * w[j] * w[j];
        for (int j = 0; j < T; j++) w[j] = s > 0 ? w[j] / s : 1.0f / T;
    }
    static double R[T * T];
    static float full[B * T * T], row[B * T];
    CHECK_OK(attn_attention_rollout(full, att, L, B, H, T));
    int rows[2] = {0, 5};
    double worst_full = 0, worst_row = 0, excess = 0;
    for (int ri = 0; ri < 2; ri++) {
        CHECK_OK(attn_attention_rollout_row(row, att, L, B, H, T, rows[ri]));
        for (int b = 0; b < B; b++) {
            rollout_ref(R, att, L, B, H, T, b);
            for (int j = 0; j < T; j++) {
                double want = R[rows[ri] * T + j];
                double dr = fabs(row[b * T + j] - want), df = fabs(full[((size_t)b * T + rows[ri]) * T + j] - want);
                double tol = ldexp(fabs(want), -24) + 1e-15;
                worst_row = fmax(worst_row, dr);
                worst_full = fmax(worst_full, df);
                excess = fmax(excess, fmax(dr, df) - tol);
            }
        }
    }
    printf("rollout against float64: row %.3g, full %.3g\n", worst_row, worst_full);
    CHECK(excess <= 0, "rollout row/full within 2^-24 relative of the float64 product (row %.3g, full %.3g)", worst_row,
          worst_full);
    CHECK_ERR(attn_attention_rollout_row(row, att, L, B, H, T, T), ATTN_E_RANGE);
    CHECK_ERR(attn_attention_rollout_row(row, att, L, B, H, T, -1), ATTN_E_RANGE);
    CHECK_ERR(attn_attention_rollout_row(NULL, att, L, B, H, T, 0), ATTN_E_INVALID);
    /* the first bad weight in layer order is named, as by the full rollout */
    att[((size_t)2 * B * H) * T * T + 3] = NAN;
    att[((size_t)0 * B * H + 1) * T * T + 7] = -1.0f;
    CHECK_ERR(attn_attention_rollout_row(row, att, L, B, H, T, 0), ATTN_E_RANGE);
    CHECK(strstr(attn_last_error(), "layer 0, item 0, head 1") != NULL, "names layer 0 head 1: %s", attn_last_error());
    CHECK_ERR(attn_attention_rollout(full, att, L, B, H, T), ATTN_E_RANGE);
    CHECK(strstr(attn_last_error(), "layer 0, item 0, head 1") != NULL, "full: names layer 0 head 1: %s", attn_last_error());
}

static void test_rollout_cases(void) {
    /* identity attention: the rollout is the identity; uniform attention over T tokens for two
     * layers: A = 0.5 U + 0.5 I, A·A = 0.25 U·U + 0.5 U + 0.25 I = 0.75 U + 0.25 I */
    enum { T = 3 };
    float att[2 * 1 * 2 * T * T], out[T * T];
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++) att[((l * 2 + h) * T + i) * T + j] = 1.0f / T;
    CHECK_OK(attn_attention_rollout(out, att, 2, 1, 2, T));
    int ok = 1;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) ok &= fabs(out[i * T + j] - (0.75 / T + (i == j ? 0.25 : 0))) < 1e-6;
    CHECK(ok, "uniform attention rollout = 0.75 U + 0.25 I");
    att[4] = NAN;
    CHECK_ERR(attn_attention_rollout(out, att, 2, 1, 2, T), ATTN_E_RANGE);
    att[4] = -0.5f;
    CHECK_ERR(attn_attention_rollout(out, att, 2, 1, 2, T), ATTN_E_RANGE);
    CHECK_ERR(attn_attention_rollout(out, att, 0, 1, 2, T), ATTN_E_INVALID);
}

/* config / preprocessing / bad input */
static void test_config_and_errors(attn_vit *m) {
    const attn_vit_config *c = attn_vit_get_config(m);
    CHECK(c->channels == 1 && c->image_h == 28 && c->image_w == 28 && c->n_labels == 10, "config: 1 channel, 28x28, 10 labels");
    CHECK(strcmp(attn_vit_label(m, 9), "Ankle boot") == 0 && strcmp(attn_vit_label(m, 0), "T-shirt/top") == 0, "id2label");
    CHECK(attn_vit_label(m, 10) == NULL && attn_vit_label(m, -1) == NULL, "label out of range is NULL");
    attn_arena arena;
    attn_arena_init(&arena, 0);
    float px[64 * 64];
    float lg[10];
    memset(px, 0, sizeof px);
    /* an image smaller than a patch */
    CHECK_ERR(attn_vit_forward(m, lg, NULL, px, 1, (int64_t)c->patch_h - 1, 28, &arena), ATTN_E_RANGE);
    CHECK(strstr(attn_last_error(), "smaller than") != NULL, "message: %s", attn_last_error());
    CHECK_ERR(attn_vit_forward(m, lg, NULL, px, 0, 28, 28, &arena), ATTN_E_INVALID);
    CHECK(attn_vit_tokens(m, 3, 3) == 0, "no tokens for a 3x3 image");
    /* colour image for a grey model: converted (luma) and resized */
    attn_image png, g, s;
    CHECK_OK(attn_image_load(&png, attn_test_fixture("vit/color_112.png")));
    float *a = (float *)malloc(sizeof(float) * 28 * 28), *b = (float *)malloc(sizeof(float) * 28 * 28);
    int64_t h = 0, w = 0;
    CHECK_OK(attn_vit_preprocess(m, a, 28 * 28, &h, &w, &png, 0));
    CHECK(h == 28 && w == 28, "resized to the model's size");
    CHECK_OK(attn_image_convert(&g, &png, 1));
    CHECK_OK(attn_image_resize(&s, &g, 28, 28));
    if (s.data) {
        for (int i = 0; i < 28 * 28; i++) b[i] = ((float)s.data[i] * c->rescale_factor - c->mean[0]) / c->std[0];
        CHECK(attn_test_max_abs_diff(a, b, 28 * 28) == 0, "preprocess = luma, resize, rescale, normalise");
    }
    CHECK_ERR(attn_vit_preprocess(m, a, 100, &h, &w, &png, 0), ATTN_E_RANGE);
    float *big = (float *)malloc(sizeof(float) * 112 * 96);
    CHECK_OK(attn_vit_preprocess(m, big, 112 * 96, &h, &w, &g, 1)); /* keep_size: no resize */
    free(big);
    CHECK(h == 96 && w == 112, "keep_size keeps 112x96 (got %lldx%lld)", (long long)w, (long long)h);
    attn_image_free(&png);
    attn_image_free(&g);
    attn_image_free(&s);
    free(a);
    free(b);
    attn_arena_free(&arena);

    /* model directories that disagree with their weights */
    char real[4096], link[600];
    CHECK(realpath(MODEL "/model.safetensors", real) != NULL, "model.safetensors present");
    snprintf(link, sizeof link, "%s", tmp_path("model.safetensors"));
    unlink(link);
    CHECK(symlink(real, link) == 0, "symlink");
    char cfg[8192];
    attn_test_read_file(MODEL "/config.json", cfg, sizeof cfg);
    attn_vit *bad = NULL;
    struct { /* a key's value replaced (whatever the file's spacing: transformers indents, attn train tabs) */
        const char *key, *to;
        int want;
        const char *msg;
    } cases[] = {
        {"image_size", "56", ATTN_E_SHAPE, "position_embeddings"},
        {"hidden_size", "192", ATTN_E_SHAPE, "expected"},
        {"num_channels", "3", ATTN_E_SHAPE, "patch_embeddings"},
        {"intermediate_size", "1", ATTN_E_SHAPE, "expected"},
        {"num_attention_heads", "5", ATTN_E_FORMAT, "multiple"},
        {"model_type", "\"deit\"", ATTN_E_UNSUPPORTED, "deit"},
        {"hidden_act", "\"swish9\"", ATTN_E_UNSUPPORTED, "swish9"},
        {"patch_size", "0", ATTN_E_FORMAT, "patch_size"},
        {NULL, "[", ATTN_E_FORMAT, "JSON"}, /* the opening brace */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char key[64], mod[8300];
        const char *v0 = cfg, *v1 = cfg + 1; /* the value's span [v0, v1) */
        if (cases[i].key) {
            snprintf(key, sizeof key, "\"%s\"", cases[i].key);
            const char *p = strstr(cfg, key);
            CHECK(p != NULL, "config.json has %s", key);
            if (!p) continue;
            v0 = p + strlen(key);
            while (*v0 == ' ' || *v0 == '\t' || *v0 == ':') v0++;
            v1 = v0;
            while (*v1 && *v1 != ',' && *v1 != '\n' && *v1 != '}') v1++;
        }
        snprintf(mod, sizeof mod, "%.*s%s%s", (int)(v0 - cfg), cfg, cases[i].to, v1);
        write_text(tmp_path("config.json"), mod);
        int rc = attn_vit_load(&bad, tmpdir);
        CHECK(rc == cases[i].want && bad == NULL, "config case %zu (%s): rc %d want %d (%s)", i, cases[i].to, rc,
              cases[i].want, attn_last_error());
        CHECK(strstr(attn_last_error(), cases[i].msg) != NULL, "message mentions '%s': %s", cases[i].msg, attn_last_error());
    }
    /* a bad preprocessor_config.json: 3 means for a 1-channel model */
    write_text(tmp_path("config.json"), cfg);
    write_text(tmp_path("preprocessor_config.json"), "{\"image_mean\": [0.5, 0.5, 0.5], \"image_std\": [0.5]}");
    CHECK_ERR(attn_vit_load(&bad, tmpdir), ATTN_E_FORMAT);
    write_text(tmp_path("preprocessor_config.json"), "{\"image_mean\": [0.5], \"image_std\": [0]}");
    CHECK_ERR(attn_vit_load(&bad, tmpdir), ATTN_E_FORMAT);
    /* a resize filter other than bilinear would change every pixel: refused, not ignored */
    write_text(tmp_path("preprocessor_config.json"), "{\"resample\": 3}");
    CHECK_ERR(attn_vit_load(&bad, tmpdir), ATTN_E_UNSUPPORTED);
    CHECK(strstr(attn_last_error(), "bicubic") != NULL, "resample 3 named: %s", attn_last_error());
    write_text(tmp_path("preprocessor_config.json"), "{\"resample\": 2}");
    CHECK_OK(attn_vit_load(&bad, tmpdir));
    attn_vit_free(bad);
    bad = NULL;
    unlink(tmp_path("preprocessor_config.json"));
    /* id2label must name each of the classifier's outputs once (as transformers requires) */
    {
        char *p = strstr(cfg, "\"id2label\""), *brace = p ? strchr(p, '{') : NULL; /* any spacing before the brace */
        CHECK(p != NULL && brace != NULL, "config.json has id2label");
        const char *tos[2] = {"\"id2label\": {\"-1\": \"x\", ", "\"id2label\": {\"10\": \"extra\", "};
        const char *msgs[2] = {"is not a class index", "is not a class index"};
        for (int i = 0; brace && i < 2; i++) {
            char mod[8400];
            snprintf(mod, sizeof mod, "%.*s%s%s", (int)(p - cfg), cfg, tos[i], brace + 1);
            write_text(tmp_path("config.json"), mod);
            CHECK_ERR(attn_vit_load(&bad, tmpdir), ATTN_E_FORMAT);
            CHECK(strstr(attn_last_error(), msgs[i]) != NULL, "id2label case %d: %s", i, attn_last_error());
        }
        char one[8400];
        char *q = brace ? strchr(brace, '}') : NULL;
        if (q) {
            snprintf(one, sizeof one, "%.*s\"id2label\": {\"0\": \"only\"%s", (int)(p - cfg), cfg, q);
            write_text(tmp_path("config.json"), one);
            CHECK_ERR(attn_vit_load(&bad, tmpdir), ATTN_E_FORMAT);
            CHECK(strstr(attn_last_error(), "has 1 labels but the classifier has 10") != NULL, "id2label short: %s",
                  attn_last_error());
        }
        write_text(tmp_path("config.json"), cfg);
    }
    CHECK_OK(attn_vit_load(&bad, tmpdir)); /* defaults without a preprocessor config */
    if (bad) CHECK(attn_vit_get_config(bad)->mean[0] == 0.5f && attn_vit_get_config(bad)->resize_h == 28, "defaults");
    attn_vit_free(bad);
    unlink(tmp_path("config.json"));
    CHECK_ERR(attn_vit_load(&bad, tmpdir), ATTN_E_IO);
    unlink(link);
}

/* ------------------------------------------------------------------ CLI */

static int run_cli(const char *const *args, char *out, size_t on, char *err, size_t en) {
    return attn_test_run(attn_test_cli_path(), tmpdir, out, on, err, en, args);
}

static void test_cli(void) {
    static char out[1 << 16], err[1 << 14];
    char img[600];
    snprintf(img, sizeof img, "%s", attn_test_fixture("vit/test_0_ankle_boot.png"));
    {
        const char *args[] = {"classify", "--model", MODEL, img, NULL};
        int rc = run_cli(args, out, sizeof out, err, sizeof err);
        CHECK(rc == 0, "classify exit %d: %s", rc, err);
        /* the path line, then 5 lines "  P  LABEL", the best first */
        CHECK(strstr(out, "test_0_ankle_boot.png\n  ") == out || strstr(out, "test_0_ankle_boot.png\n  ") != NULL, "path line");
        const char *first = strchr(out, '\n');
        double p = -1;
        char label[64] = "";
        CHECK(first && sscanf(first + 1, " %lf %63[^\n]", &p, label) == 2 && strcmp(label, "Ankle boot") == 0 && p > 0.2 &&
                  p <= 1,
              "top label Ankle boot: %s", out);
        int lines = 0;
        for (const char *p = out; *p; p++) lines += *p == '\n';
        CHECK(lines == 6, "6 lines (got %d)", lines);
    }
    {
        /* eval on the first 1000 items: equals the accuracy of the reference logits */
        attn_tensor ref;
        attn_idx lb;
        int want = -1;
        if (attn_npy_load(&ref, attn_test_fixture("vit/logits_first1000.npy")) == 0 &&
            attn_idx_load(&lb, FMNIST "t10k-labels-idx1-ubyte.gz") == 0) {
            want = 0;
            const float *r = (const float *)ref.data;
            for (int i = 0; i < 1000; i++) {
                int a = 0;
                for (int j = 1; j < 10; j++)
                    if (r[i * 10 + j] > r[i * 10 + a]) a = j;
                want += a == lb.data[i];
            }
            attn_npy_free(&ref);
            attn_idx_free(&lb);
        }
        const char *cpng = tmp_path("confusion.png");
        const char *args[] = {"classify", "--model", MODEL, "--eval", FMNIST "t10k-images-idx3-ubyte.gz",
                              FMNIST "t10k-labels-idx1-ubyte.gz", "--limit", "1000", "--confusion", cpng, NULL};
        int rc = run_cli(args, out, sizeof out, err, sizeof err);
        CHECK(rc == 0, "eval exit %d: %s", rc, err);
        char line[64];
        snprintf(line, sizeof line, "accuracy: %.4f (%d/1000)\n", want / 1000.0, want);
        size_t ol = strlen(out), ll = strlen(line);
        CHECK(ol >= ll && strcmp(out + ol - ll, line) == 0, "last line '%s' (output ends: %s)", line, ol > 80 ? out + ol - 80 : out);
        CHECK(strstr(out, "confusion matrix") != NULL && strstr(out, "Ankle boot") != NULL, "table printed");
        char sig[9] = {0};
        attn_test_read_file(cpng, sig, 9);
        CHECK(memcmp(sig, "\x89PNG", 4) == 0, "confusion PNG written");
        unlink(cpng);
    }
    {
        const char *ap = tmp_path("att.svg"), *hp = tmp_path("att-heads.svg");
        const char *args[] = {"classify", "--model", MODEL, img, "--attention", ap, NULL};
        int rc = run_cli(args, out, sizeof out, err, sizeof err);
        CHECK(rc == 0, "--attention exit %d: %s", rc, err);
        static char sv1[1 << 16], sv2[1 << 16];
        attn_test_read_file(ap, sv1, sizeof sv1);
        attn_test_read_file(hp, sv2, sizeof sv2);
        CHECK(strstr(sv1, "<svg") && strstr(sv2, "<svg"), "overlay and heads SVGs written");
        unlink(ap);
        unlink(hp);
    }
    {
        /* IDX input with --index, colour JPEG for a grey model */
        const char *args[] = {"classify", "--model", MODEL, "--index", "2", FMNIST "t10k-images-idx3-ubyte.gz",
                              attn_test_fixture("vit/color_112.jpg"), "--top", "2", NULL};
        int rc = run_cli(args, out, sizeof out, err, sizeof err);
        CHECK(rc == 0, "IDX + JPEG exit %d: %s", rc, err);
        CHECK(strstr(out, "t10k-images-idx3-ubyte.gz[2]\n") != NULL && strstr(out, "color_112.jpg\n") != NULL, "names: %s", out);
    }
    /* bad input: exit 1 with a clear message; usage: exit 2 */
    struct {
        const char *args[12];
        int code;
        const char *msg;
    } bad[] = {
        {{"classify", "--model", MODEL, "--eval", FMNIST "t10k-images-idx3-ubyte.gz", FMNIST "train-labels-idx1-ubyte.gz"},
         1, "10000 images but"},
        {{"classify", "--model", MODEL, "--eval", FMNIST "t10k-labels-idx1-ubyte.gz", FMNIST "t10k-labels-idx1-ubyte.gz"},
         1, "3-D"},
        {{"classify", "--model", MODEL, "tests/fixtures/vit/cmyk.jpg"}, 1, "CMYK"},
        {{"classify", "--model", MODEL, "tests/fixtures/vit/missing.png"}, 1, "missing.png"},
        {{"classify", "--model", MODEL, "tests/fixtures/vit/logits_first1000.npy"}, 1, "not a PNG or JPEG"},
        {{"classify", "--model", "tests/fixtures/vit", "x.png"}, 1, "config.json"},
        {{"classify", "--model", MODEL, "--native-size", "--index", "0", "tests/fixtures/vit/tiny.idx"}, 1, "smaller than one"},
        {{"classify", "--model", MODEL}, 2, "IMAGE"},
        {{"classify", MODEL, "x.png"}, 2, "--model"},
        {{"classify", "--model", MODEL, "--eval", FMNIST "t10k-images-idx3-ubyte.gz"}, 2, "two files"},
        {{"classify", "--model", MODEL, "--top", "0", img}, 2, "--top"},
        {{"classify", "--model", MODEL, "--attention", "a.png", img, img}, 2, "exactly one"},
        {{"classify", "--model", MODEL, "--attention", "a.txt", img}, 2, ".png, .svg or .pdf"},
        {{"classify", "--model", MODEL, "--logits", img, img}, 2, "names the input"},
        /* swapped: the hint (new-user finding) */
        {{"classify", "--model", MODEL, "--eval", FMNIST "t10k-labels-idx1-ubyte.gz", FMNIST "t10k-images-idx3-ubyte.gz"},
         1, "were IMAGES and LABELS swapped? " FMNIST "t10k-labels-idx1-ubyte.gz looks like labels"},
    };
    /* a 3 x 3 IDX image (smaller than a 7 x 7 patch) */
    unsigned char tiny[4 + 12 + 9] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 3};
    FILE *f = fopen("tests/fixtures/vit/tiny.idx", "rb");
    if (!f) {
        f = fopen(tmp_path("tiny.idx"), "wb");
        if (f) {
            fwrite(tiny, 1, sizeof tiny, f);
            fclose(f);
        }
        bad[6].args[6] = tmp_path("tiny.idx");
    } else {
        fclose(f);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run_cli(bad[i].args, out, sizeof out, err, sizeof err);
        CHECK(rc == bad[i].code, "bad case %zu: exit %d want %d (%s)", i, rc, bad[i].code, err);
        CHECK(strstr(err, bad[i].msg) != NULL && strstr(err, "attn: error:") != NULL, "bad case %zu message has '%s': %s", i,
              bad[i].msg, err);
    }
    unlink(tmp_path("tiny.idx"));
}

/* an IDX [1, h, w] of one grey image (gzip'd), pixel (y, x) = (x + y) & 255 */
static int write_idx_gz(const char *path, int h, int w) {
    gzFile f = gzopen(path, "wb1");
    if (!f) return -1;
    unsigned char hd[16] = {0, 0, 8, 3, 0, 0, 0, 1};
    for (int i = 0; i < 4; i++) {
        hd[8 + i] = (unsigned char)(h >> (24 - 8 * i));
        hd[12 + i] = (unsigned char)(w >> (24 - 8 * i));
    }
    int ok = gzwrite(f, hd, 16) == 16;
    unsigned char *line = (unsigned char *)malloc((size_t)w);
    for (int y = 0; y < h && ok; y++) {
        for (int x = 0; x < w; x++) line[x] = (unsigned char)((x + y) & 255);
        ok = gzwrite(f, line, (unsigned)w) == w;
    }
    free(line);
    return gzclose(f) == Z_OK && ok ? 0 : -1;
}

/* issue 23 items 4 and 5 through the CLI. A 392 x 392 image at native size is 3137 tokens:
 * the full T x T rollout took ~100 s here (3 naive T^3 products); the CLS row takes well
 * under a second, so 60 s (run under timeout(1)) only fails on the old path. A 16384 x 8192
 * image (2,737,800 patches of 7 x 7) said "out of memory for a batch"; now the patch limit. */
static void test_native_limits(void) {
    static char out[1 << 14], err[1 << 14];
    const char *idx = tmp_path("big.idx.gz");
    if (write_idx_gz(idx, 392, 392) != 0) {
        CHECK(0, "cannot write %s", idx);
        return;
    }
    {
        const char *ap = tmp_path("native.svg"), *hp = tmp_path("native-heads.svg");
        const char *args[] = {"60", attn_test_cli_path(), "classify", "--model", MODEL, "--native-size", idx, "--attention", ap, NULL};
        int rc = attn_test_run("/usr/bin/timeout", tmpdir, out, sizeof out, err, sizeof err, args);
        CHECK(rc == 0, "--native-size --attention on 392 x 392 (3137 tokens) within 60 s: exit %d: %s", rc, err);
        static char sv[1 << 12];
        attn_test_read_file(ap, sv, sizeof sv);
        CHECK(strstr(sv, "<svg") != NULL, "rollout SVG written");
        unlink(ap);
        unlink(hp);
    }
    if (write_idx_gz(idx, 8192, 16384) != 0) {
        CHECK(0, "cannot write %s", idx);
        return;
    }
    {
        const char *args[] = {"classify", "--model", MODEL, "--native-size", idx, NULL};
        int rc = run_cli(args, out, sizeof out, err, sizeof err);
        CHECK(rc == 1, "16384 x 8192 at native size: exit %d", rc);
        CHECK(strstr(err, "2737800 patches") && strstr(err, "at most 65536") && !strstr(err, "out of memory"),
              "names the patch limit: %s", err);
    }
    unlink(idx);
}

int main(void) {
    attn_test_name = "vit";
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_vit_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp failed");
        return attn_test_finish();
    }
    attn_vit *m = NULL;
    CHECK_OK(attn_vit_load(&m, MODEL));
    if (m) {
        test_logits(m);
        test_interpolation(m);
        test_attention(m);
        test_config_and_errors(m);
    }
    attn_vit_free(m);
    test_tiny_rgb();
    test_rollout_cases();
    test_rollout_row();
    test_cli();
    test_native_limits();
    unlink(tmp_path("stdout.txt"));
    unlink(tmp_path("stderr.txt"));
    rmdir(tmpdir);
    return attn_test_finish();
}
