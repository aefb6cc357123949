/* ViT trainer (include/attn_train.h) against torch.autograd: one training step of a tiny
 * transformers ViTForImageClassification from the same float32 weights and batch, and 20 AdamW
 * steps with gradient clipping and the warm-up + cosine schedule (reference computed in float64
 * by scripts/gen_train_step_fixtures.py; tests/fixtures/train_vit/step.safetensors).
 * Tolerances (float32 here against the float64 reference):
 *   loss: 1e-6 relative (float32 logits of 2 layers: a few ulp; measured ~1e-7);
 *   gradients: per element |a − r| <= 1e-5·|r| + 1e-5·max|r of the tensor| + 1e-7·‖g‖∞ — the
 *     per-tensor term because float32 GEMM sums of up to B·T = 68 terms round at ~1e-7 of the
 *     largest term, and the global floor 1e-7 of the largest gradient of the model for tensors
 *     whose exact gradient is 0 (the key projection's bias: softmax ignores a constant added to a
 *     row's scores, so its float64 gradient is ~1e-17 and any float32 result is rounding noise);
 *   parameters after 20 steps: 1e-4 absolute (the bound; torch's own float32 run is
 *     9.2e-5 from the float64 one: AdamW turns the key bias's noise into steps of up to lr·0.1).
 * Also: a 50-step run on real Fashion-MNIST images whose loss must fall, the schedule, AdamW on
 * a hand-computed case, clipping, shuffling, augmentation, and bad input. */
#include "attn.h"
#include "attn_safetensors.h"
#include "attn_train.h"
#include "attn_vit.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FMNIST "/usr/share/datasets/fashion-mnist/"
static char tmpdir[64];

static attn_vit_train_config tiny_config(void) {
    attn_vit_train_config c = {.image_size = 28, .channels = 1, .patch = 7, .d_model = 32, .n_layers = 2, .n_heads = 4,
                               .d_ff = 64, .n_labels = 10, .eps = 1e-12f, .act = ATTN_ACT_GELU};
    return c;
}

/* copy prefix.NAME of the fixture into every parameter */
static int load_params(attn_vit_trainer *t, attn_safetensors *st, const char *prefix) {
    for (int i = 0; i < attn_vit_trainer_param_count(t); i++) {
        char nm[160];
        snprintf(nm, sizeof nm, "%s%s", prefix, attn_vit_trainer_param_name(t, i));
        attn_tensor p, f;
        if (attn_vit_trainer_tensor(&p, t, i, 0) < 0 || attn_safetensors_get_f32_shape(st, nm, &f, NULL, p.ndim, p.shape) < 0) {
            CHECK(0, "fixture %s: %s", nm, attn_last_error());
            return -1;
        }
        memcpy(p.data, f.data, sizeof(float) * (size_t)attn_tensor_numel(&p));
    }
    return 0;
}

static void test_fidelity(void) {
    attn_safetensors *st = NULL;
    CHECK_OK(attn_safetensors_open(&st, attn_test_fixture("train_vit/step.safetensors")));
    if (!st) return;
    attn_vit_train_config c = tiny_config();
    attn_vit_trainer *t = NULL;
    CHECK_OK(attn_vit_trainer_new(&t, &c, 4, 1));
    CHECK(attn_vit_trainer_param_count(t) == 4 + 2 * 16 + 4, "param count %d", attn_vit_trainer_param_count(t));
    if (!t || load_params(t, st, "init.") < 0) goto out;
    attn_tensor px;
    const void *lab;
    uint64_t nb;
    CHECK_OK(attn_safetensors_get_f32(st, "pixels", &px, NULL));
    CHECK_OK(attn_safetensors_data(&lab, &nb, st, attn_safetensors_find(st, "labels")));
    int32_t labels[4];
    memcpy(labels, lab, sizeof labels);
    const double want = strtod(attn_safetensors_metadata(st, "loss"), NULL);
    const double max_norm = strtod(attn_safetensors_metadata(st, "max_norm"), NULL);
    const double want_norm = strtod(attn_safetensors_metadata(st, "grad_norm"), NULL);
    const int steps = atoi(attn_safetensors_metadata(st, "steps")), warmup = atoi(attn_safetensors_metadata(st, "warmup"));
    const double lr = strtod(attn_safetensors_metadata(st, "lr"), NULL), wd = strtod(attn_safetensors_metadata(st, "weight_decay"), NULL);
    double loss = 0;
    CHECK_OK(attn_vit_trainer_loss_backward(t, &loss, NULL, (const float *)px.data, labels, 4, 0.0));
    CHECK(fabs(loss - want) <= 1e-6 * want, "loss %.10g want %.10g (rel %.2e)", loss, want, fabs(loss - want) / want);
    /* gradients */
    double ginf = 0, worst = 0;
    const int np = attn_vit_trainer_param_count(t);
    for (int i = 0; i < np; i++) {
        attn_tensor r;
        char nm[160];
        snprintf(nm, sizeof nm, "grad.%s", attn_vit_trainer_param_name(t, i));
        if (attn_safetensors_get_f32(st, nm, &r, NULL) == 0)
            for (int64_t e = 0; e < attn_tensor_numel(&r); e++) ginf = fmax(ginf, fabs(((float *)r.data)[e]));
    }
    for (int i = 0; i < np; i++) {
        attn_tensor g, r;
        char nm[160];
        snprintf(nm, sizeof nm, "grad.%s", attn_vit_trainer_param_name(t, i));
        CHECK_OK(attn_vit_trainer_tensor(&g, t, i, 1));
        CHECK_OK(attn_safetensors_get_f32_shape(st, nm, &r, NULL, g.ndim, g.shape));
        const int64_t n = attn_tensor_numel(&g);
        const float *a = (const float *)g.data, *b = (const float *)r.data;
        const double rmax = attn_test_max_abs(b, (size_t)n);
        int bad = 0;
        double wr = 0;
        for (int64_t e = 0; e < n; e++) {
            const double d = fabs((double)a[e] - b[e]), tol = 1e-5 * fabs(b[e]) + 1e-5 * rmax + 1e-7 * ginf;
            if (!(d <= tol)) bad++;
            wr = fmax(wr, d / tol);
        }
        worst = fmax(worst, wr);
        CHECK(!bad, "%s: %d of %lld gradients off (max |diff| %.3g, max |ref| %.3g)", nm, bad, (long long)n,
              attn_test_max_abs_diff(a, b, (size_t)n), rmax);
    }
    printf("# loss rel %.2e; gradients: worst |diff| / tolerance %.2e\n", fabs(loss - want) / want, worst);
    /* 20 steps: clip, AdamW, schedule (the first backward is above) */
    attn_adamw_config ac = {0.9, 0.999, 1e-8, wd};
    for (int s = 0; s < steps; s++) {
        if (s > 0) CHECK_OK(attn_vit_trainer_loss_backward(t, &loss, NULL, (const float *)px.data, labels, 4, 0.0));
        const double norm = attn_vit_trainer_clip_grad_norm(t, max_norm);
        if (s == 0) CHECK(fabs(norm - want_norm) <= 1e-5 * want_norm, "grad norm %.8g want %.8g", norm, want_norm);
        CHECK_OK(attn_vit_trainer_adamw_step(t, attn_lr_warmup_cosine(s, warmup, steps, lr), &ac));
    }
    CHECK(attn_vit_trainer_step_count(t) == steps, "step count");
    double pw = 0;
    for (int i = 0; i < np; i++) {
        attn_tensor p, r;
        char nm[160];
        snprintf(nm, sizeof nm, "after.%s", attn_vit_trainer_param_name(t, i));
        CHECK_OK(attn_vit_trainer_tensor(&p, t, i, 0));
        CHECK_OK(attn_safetensors_get_f32_shape(st, nm, &r, NULL, p.ndim, p.shape));
        const double d = attn_test_max_abs_diff((const float *)p.data, (const float *)r.data, (size_t)attn_tensor_numel(&p));
        pw = fmax(pw, d);
        CHECK(d <= 1e-4, "%s after %d steps: max |diff| %.3g", nm, steps, d);
    }
    printf("# parameters after %d steps: max |diff| %.2e\n", steps, pw);
out:
    attn_vit_trainer_free(t);
    attn_safetensors_close(st);
}


/* 50 AdamW steps on real Fashion-MNIST images (5 passes over 10 shuffled batches of 32, cropped and
 * flipped):
 * the mean loss of the last 10 steps must be below 0.9 x that of the first 10 (measured 2.223 -> 1.913,
 * 0.86: a ViT from scratch leaves its initial plateau slowly; a wrong sign or a broken gradient leaves
 * it near ln 10 = 2.30 or makes it grow). The gradients of a batch equal the mean of its images'
 * gradients to 5e-8 (checked while writing this; the fidelity test above checks them against torch). */
static void test_real_steps(void) {
    attn_idx img, lab;
    memset(&img, 0, sizeof img), memset(&lab, 0, sizeof lab);
    CHECK_OK(attn_idx_load(&img, FMNIST "train-images-idx3-ubyte.gz"));
    CHECK_OK(attn_idx_load(&lab, FMNIST "train-labels-idx1-ubyte.gz"));
    attn_vit_train_config c = tiny_config();
    attn_vit_trainer *t = NULL;
    CHECK_OK(attn_vit_trainer_new(&t, &c, 32, 7));
    if (!t || !img.data || !lab.data) goto out;
    enum { N = 320, B = 32, STEPS = 50 }; /* 10 batches, 5 passes */
    int64_t perm[N];
    float px[B * 28 * 28];
    int32_t y[B];
    attn_rng r;
    attn_train_rng_seed(&r, 7, 1);
    attn_shuffle(perm, N, &r);
    attn_adamw_config ac = {0.9, 0.999, 1e-8, 0.05};
    double first = 0, last = 0;
    for (int s = 0; s < STEPS; s++) {
        attn_train_make_batch(px, img.data, 28, perm + (s % 10) * B, B, 0.286f, 0.353f, 2, &r);
        for (int k = 0; k < B; k++) y[k] = lab.data[perm[(s % 10) * B + k]];
        double loss = 0;
        CHECK_OK(attn_vit_trainer_loss_backward(t, &loss, NULL, px, y, B, 0.0));
        attn_vit_trainer_clip_grad_norm(t, 1.0);
        CHECK_OK(attn_vit_trainer_adamw_step(t, attn_lr_warmup_cosine(s, 5, 2 * STEPS, 1e-2), &ac));
        if (s < 10) first += loss / 10;
        if (s >= STEPS - 10) last += loss / 10;
    }
    printf("# 50 steps on Fashion-MNIST: mean loss %.3f (steps 1-10) -> %.3f (steps 41-50)\n", first, last);
    CHECK(last < 0.9 * first && isfinite(last), "loss did not fall: %.4f -> %.4f", first, last);
out:
    attn_vit_trainer_free(t);
    attn_idx_free(&img);
    attn_idx_free(&lab);
}

static void test_optim(void) {
    /* AdamW by hand: p 1, g 0.5, lr 0.1, wd 0.1, t 1: m 0.05, v 2.5e-4, bias corrections 0.1 and
     * 1e-3: p = 1·(1 − 0.01) − (0.1/0.1)·0.05/(sqrt(2.5e-4)/sqrt(1e-3) + 1e-8) = 0.89 + 2e-9 */
    float p = 1, g = 0.5f, m = 0, v = 0;
    attn_adamw_config ac = {0.9, 0.999, 1e-8, 0.1};
    attn_adamw_update(&p, &g, &m, &v, 1, 1, 0.1, &ac, 1);
    CHECK_NEAR(p, 0.89, 1e-7, "adamw p");
    CHECK_NEAR(m, 0.05, 1e-9, "adamw m");
    CHECK_NEAR(v, 2.5e-4, 1e-10, "adamw v"); /* float32 rounding of 2.5e-4: 1.2e-11 */
    p = 1, m = 0, v = 0;
    attn_adamw_update(&p, &g, &m, &v, 1, 1, 0.1, &ac, 0); /* no decay */
    CHECK_NEAR(p, 0.9, 1e-7, "adamw p without decay");
    /* schedule: warm-up 4 of 10 steps, base 1 */
    CHECK_NEAR(attn_lr_warmup_cosine(0, 4, 10, 1.0), 0.25, 1e-15, "lr step 0");
    CHECK_NEAR(attn_lr_warmup_cosine(3, 4, 10, 1.0), 1.0, 1e-15, "lr step 3");
    CHECK_NEAR(attn_lr_warmup_cosine(4, 4, 10, 1.0), 1.0, 1e-15, "lr step 4");
    CHECK_NEAR(attn_lr_warmup_cosine(7, 4, 10, 1.0), 0.5, 1e-15, "lr step 7 (half way down)");
    CHECK_NEAR(attn_lr_warmup_cosine(10, 4, 10, 1.0), 0.0, 1e-15, "lr at the end");
    /* clipping and errors */
    attn_vit_train_config c = tiny_config();
    attn_vit_trainer *t = NULL;
    CHECK_OK(attn_vit_trainer_new(&t, &c, 2, 3));
    if (t) {
        const int64_t n = attn_vit_trainer_numel(t);
        attn_tensor g0;
        attn_vit_trainer_tensor(&g0, t, 0, 1);
        float *gp = (float *)g0.data; /* the gradients are one block, parameter 0 first */
        for (int64_t i = 0; i < n; i++) gp[i] = i % 2 ? 3.0f : -4.0f;
        const double want = sqrt((double)(n / 2) * 9 + (double)(n - n / 2) * 16);
        CHECK_NEAR(attn_vit_trainer_clip_grad_norm(t, 2.0), want, 1e-9 * want, "global norm");
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += (double)gp[i] * gp[i];
        CHECK_NEAR(sqrt(s), 2.0, 1e-5, "clipped norm");
        CHECK_NEAR(attn_vit_trainer_clip_grad_norm(t, 10.0), 2.0, 1e-5, "no clipping below max_norm");
        CHECK(gp[0] == (float)(-4.0 * 2.0 / (want + 1e-6)), "scale max_norm / (norm + 1e-6)");
        CHECK_ERR(attn_vit_trainer_adamw_step(t, NAN, &ac), ATTN_E_INVALID);
        CHECK_ERR(attn_vit_trainer_adamw_step(t, -1e-3, &ac), ATTN_E_INVALID);
        CHECK(attn_vit_trainer_step_count(t) == 0, "a refused step does not count");
        float px[2 * 784] = {0};
        int32_t bad[2] = {3, 10};
        double loss;
        CHECK_ERR(attn_vit_trainer_loss_backward(t, &loss, NULL, px, bad, 2, 0.0), ATTN_E_RANGE);
        CHECK(strstr(attn_last_error(), "10") != NULL, "names the label: %s", attn_last_error());
        CHECK_ERR(attn_vit_trainer_loss_backward(t, &loss, NULL, px, bad, 3, 0.0), ATTN_E_INVALID); /* > max_batch */
    }
    attn_vit_trainer_free(t);
    /* bad configs */
    attn_vit_train_config b = tiny_config();
    b.d_model = 30;
    CHECK_ERR(attn_vit_trainer_new(&t, &b, 4, 1), ATTN_E_INVALID);
    CHECK(strstr(attn_last_error(), "not a multiple of 4 heads") != NULL, "heads message: %s", attn_last_error());
    b = tiny_config();
    CHECK_ERR(attn_vit_trainer_new(&t, &b, 0, 1), ATTN_E_INVALID);
    b.patch = 5;
    CHECK_ERR(attn_vit_trainer_new(&t, &b, 4, 1), ATTN_E_INVALID);
    /* the arena of the Fashion-MNIST model at batch 128, as attn_train.h states */
    attn_vit_train_config fm = {.image_size = 28, .channels = 1, .patch = 7, .d_model = 96, .n_layers = 4, .n_heads = 3,
                                .d_ff = 192, .n_labels = 10, .eps = 1e-12f, .act = ATTN_ACT_GELU};
    CHECK(attn_vit_train_arena_bytes(&fm, 128) == 55861248, "arena %zu bytes", attn_vit_train_arena_bytes(&fm, 128));
}

static void test_data(void) {
    int64_t a[100], b[100], c[100];
    attn_rng r;
    attn_train_rng_seed(&r, 5, 1);
    attn_shuffle(a, 100, &r);
    attn_train_rng_seed(&r, 5, 1);
    attn_shuffle(b, 100, &r);
    attn_train_rng_seed(&r, 5, 2);
    attn_shuffle(c, 100, &r);
    int seen[100] = {0}, same = 1, differ = 0;
    for (int i = 0; i < 100; i++) seen[a[i]]++, same &= a[i] == b[i], differ |= a[i] != c[i];
    int perm = 1;
    for (int i = 0; i < 100; i++) perm &= seen[i] == 1;
    CHECK(perm && same && differ, "shuffle: permutation %d, reproducible %d, streams differ %d", perm, same, differ);
    /* batches: 4x4 images; without augmentation the exact normalisation; with pad 1 each output is
     * the image shifted by (dy, dx) in [-1, 1]², then mirrored or not, with 0 pixels outside */
    uint8_t img[2 * 16];
    for (int i = 0; i < 32; i++) img[i] = (uint8_t)(i * 7 + 3);
    int64_t idx[2] = {1, 0};
    float out[2 * 16];
    attn_train_make_batch(out, img, 4, idx, 2, 0.25f, 0.5f, 1, NULL);
    CHECK(out[0] == ((float)img[16] * (1.0f / 255.0f) - 0.25f) / 0.5f && out[16 + 5] == ((float)img[5] * (1.0f / 255.0f) - 0.25f) / 0.5f,
          "plain batch");
    int flips = 0, shifts = 0, all_ok = 1;
    attn_train_rng_seed(&r, 9, 0);
    for (int trial = 0; trial < 40; trial++) {
        attn_train_make_batch(out, img, 4, idx, 1, 0.0f, 1.0f, 1, &r);
        int found = 0;
        for (int f = 0; f < 2 && !found; f++)
            for (int dy = -1; dy <= 1 && !found; dy++)
                for (int dx = -1; dx <= 1 && !found; dx++) {
                    int ok = 1;
                    for (int y = 0; y < 4 && ok; y++)
                        for (int x = 0; x < 4 && ok; x++) {
                            const int sy = y + dy, sx = (f ? 3 - x : x) + dx;
                            const float want = sy < 0 || sy > 3 || sx < 0 || sx > 3 ? 0.0f : (float)img[16 + sy * 4 + sx] * (1.0f / 255.0f);
                            ok = out[y * 4 + x] == want;
                        }
                    if (ok) found = 1, flips += f, shifts += dy || dx;
                }
        all_ok &= found;
    }
    CHECK(all_ok && flips > 5 && flips < 35 && shifts > 20, "augmentation: all crops/flips valid %d, flips %d/40, shifted %d/40",
          all_ok, flips, shifts);
}

static void read_all(const char *path, char **buf, size_t *n) {
    FILE *f = fopen(path, "rb");
    *buf = NULL, *n = 0;
    if (!f) return;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc(*n + 1);
    if (*buf && fread(*buf, 1, *n, f) != *n) *n = 0;
    fclose(f);
}

/* save -> attn_vit_load gives the trainer's logits; load restores every tensor; a full disk keeps
 * the previous checkpoint */
static void test_checkpoint(void) {
    attn_vit_train_config c = tiny_config();
    attn_vit_trainer *t = NULL, *u = NULL;
    CHECK_OK(attn_vit_trainer_new(&t, &c, 3, 11));
    CHECK_OK(attn_vit_trainer_new(&u, &c, 3, 12));
    if (!t || !u) goto out;
    float px[3 * 784], lg[30], lg2[30];
    uint64_t seed = 5;
    attn_test_fill_uniform(px, 3 * 784, -1, 2, &seed);
    int32_t y[3] = {1, 5, 9};
    double loss;
    attn_adamw_config ac = {0.9, 0.999, 1e-8, 0.05};
    for (int s = 0; s < 3; s++) { /* moments and step become non-trivial */
        CHECK_OK(attn_vit_trainer_loss_backward(t, &loss, NULL, px, y, 3, 0.1));
        CHECK_OK(attn_vit_trainer_adamw_step(t, 1e-3, &ac));
    }
    char *names[10];
    for (int i = 0; i < 10; i++) {
        names[i] = malloc(16);
        snprintf(names[i], 16, "class %d", i);
    }
    attn_train_epoch hist[1] = {{2.0, 1.9, 0.25, 1.0}};
    attn_vit_train_state st = {.epoch = 1, .epochs = 3, .steps_per_epoch = 3, .warmup_steps = 1, .batch = 3, .seed = 42,
                               .lr = 1e-3, .weight_decay = 0.05, .max_norm = 1, .pad = 2, .flip = 1, .mean = 0.25f,
                               .std = 0.5f, .labels = names, .n_labels = 10, .history = hist};
    CHECK_OK(attn_vit_trainer_save(t, tmpdir, &st));
    CHECK_OK(attn_vit_trainer_forward(t, lg, px, 3));
    attn_vit *m = NULL;
    CHECK_OK(attn_vit_load(&m, tmpdir));
    if (m) {
        attn_arena ar;
        attn_arena_init(&ar, 0);
        CHECK_OK(attn_vit_forward(m, lg2, NULL, px, 3, 28, 28, &ar));
        CHECK(attn_test_max_abs_diff(lg, lg2, 30) <= 1e-5 * attn_test_max_abs(lg, 30), "attn_vit_forward of the checkpoint: %.3g",
              attn_test_max_abs_diff(lg, lg2, 30));
        CHECK(!strcmp(attn_vit_label(m, 7), "class 7"), "id2label");
        CHECK(attn_vit_get_config(m)->mean[0] == 0.25f && attn_vit_get_config(m)->std[0] == 0.5f, "preprocessing");
        attn_arena_free(&ar);
        attn_vit_free(m);
    }
    attn_vit_train_state s2;
    memset(&s2, 0, sizeof s2);
    CHECK_OK(attn_vit_trainer_load(u, tmpdir, &s2));
    int same = attn_vit_trainer_step_count(u) == 3;
    for (int i = 0; i < attn_vit_trainer_param_count(t); i++)
        for (int w = 0; w < 4; w += (w == 0 ? 2 : 1)) {
            attn_tensor a, b;
            attn_vit_trainer_tensor(&a, t, i, w);
            attn_vit_trainer_tensor(&b, u, i, w);
            same &= !memcmp(a.data, b.data, sizeof(float) * (size_t)attn_tensor_numel(&a));
        }
    CHECK(same, "parameters, moments and step restored bit for bit");
    CHECK(s2.epoch == 1 && s2.epochs == 3 && s2.seed == 42 && s2.batch == 3 && s2.lr == 1e-3 && s2.pad == 2 && s2.flip &&
              s2.mean == 0.25f && s2.history && s2.history[0].eval_accuracy == 0.25 && s2.n_labels == 10 &&
              !strcmp(s2.labels[3], "class 3"),
          "state restored");
    attn_vit_train_state_free(&s2);
    /* a full disk: nothing replaced */
    char p[128], *before, *after, *cb, *ca;
    size_t nb, na, ncb, nca;
    snprintf(p, sizeof p, "%s/model.safetensors", tmpdir);
    read_all(p, &before, &nb);
    snprintf(p, sizeof p, "%s/config.json", tmpdir);
    read_all(p, &cb, &ncb);
    CHECK_OK(attn_vit_trainer_adamw_step(t, 1e-2, &ac));
    names[0][0] = 'C';
    setenv("ATTN_FAULT_WRITE_AFTER", "2000", 1);
    CHECK_ERR(attn_vit_trainer_save(t, tmpdir, &st), ATTN_E_IO);
    unsetenv("ATTN_FAULT_WRITE_AFTER");
    CHECK(strstr(attn_last_error(), "model.safetensors") && strstr(attn_last_error(), "previous checkpoint is kept"),
          "message: %s", attn_last_error());
    snprintf(p, sizeof p, "%s/model.safetensors", tmpdir);
    read_all(p, &after, &na);
    snprintf(p, sizeof p, "%s/config.json", tmpdir);
    read_all(p, &ca, &nca);
    CHECK(before && after && nb == na && !memcmp(before, after, nb) && ncb == nca && cb && ca && !memcmp(cb, ca, ncb),
          "the previous checkpoint is intact (config.json, written in full, was not committed either)");
    free(before), free(after), free(cb), free(ca);
    for (int i = 0; i < 10; i++) free(names[i]);
out:
    attn_vit_trainer_free(t);
    attn_vit_trainer_free(u);
}

int main(void) {
    attn_test_name = "train_vit";
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_train_XXXXXX");
    if (!mkdtemp(tmpdir)) CHECK(0, "mkdtemp");
    test_fidelity();
    test_optim();
    test_data();
    test_real_steps();
    test_checkpoint();
    const char *files[] = {"config.json", "model.safetensors", "preprocessor_config.json", "optimizer.safetensors",
                           "trainer_state.json", "curve.png"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    return attn_test_finish();
}
