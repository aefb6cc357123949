/* attn_sampler_sample without top-k (the path attn serve takes: the OpenAI API has no top-k)
 * sorts its candidates only as far as top-p, min-p and the draw read them (src/decoding/
 * sampling.c, attn__sample_lazy). Reference: steps 4-8 of attn_sampling.h written out here the
 * plain way — every candidate sorted (probability descending, id ascending), the softmax, top-p,
 * min-p and the draw over that list — fed the same random numbers (an attn_rng seeded as the
 * sampler is). The picks must be equal: the two differ only in the order of the sums over all
 * candidates (id order here and there, not the list's), so no tolerance is involved; a random
 * draw landing within rounding of a boundary would be the one exception, and none does among
 * these fixed seeds (134400 draws against the previous full-sort code gave no difference). */
#include "attn_sampling.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const float *ref_key;
static int ref_cmp(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (ref_key[x] > ref_key[y]) return -1;
    if (ref_key[x] < ref_key[y]) return 1;
    return (x > y) - (x < y);
}

/* the reference draw (logits already free of NaN; -inf = excluded) */
static int32_t ref_sample(const float *logits, int64_t V, const attn_sampler_params *p, attn_rng *rng, float *x, int32_t *idx) {
    int64_t best = attn_logits_argmax(logits, V), n = 0;
    double sum = 0, sum_f = 0;
    for (int64_t i = 0; i < V; i++) {
        if (logits[i] == -INFINITY) continue;
        x[i] = (float)(((double)logits[i] - (double)logits[best]) / (double)p->temperature);
        const double e = exp((double)x[i]);
        sum += e, sum_f += (double)(float)e;
        idx[n++] = (int32_t)i;
    }
    ref_key = x;
    qsort(idx, (size_t)n, sizeof(int32_t), ref_cmp);
    const int64_t all = n;
    if (p->top_p < 1.0f) {
        double acc = 0;
        int64_t k = 0;
        while (k < n) {
            acc += (float)exp((double)x[idx[k++]]) / sum;
            if (acc >= p->top_p) break;
        }
        n = k;
    }
    if (p->min_p > 0.0f) {
        const float thr = p->min_p * (float)exp((double)x[idx[0]]);
        int64_t k = 1;
        while (k < n && (float)exp((double)x[idx[k]]) >= thr) k++;
        n = k;
    }
    if (n < all) {
        sum_f = 0;
        for (int64_t i = 0; i < n; i++) sum_f += (double)(float)exp((double)x[idx[i]]);
    }
    const double u = attn_rng_uniform(rng) * sum_f;
    double acc = 0;
    for (int64_t i = 0; i < n; i++) {
        acc += (double)(float)exp((double)x[idx[i]]);
        if (u < acc) return idx[i];
    }
    return idx[n - 1];
}

static void test_against_full_sort(void) {
    const float temps[] = {0.3f, 1.0f, 1.7f}, top_ps[] = {1.0f, 0.9f, 0.5f}, min_ps[] = {0.0f, 0.05f};
    const int64_t Vs[] = {7, 1000, 49152};
    uint64_t seed = 12345;
    int64_t draws = 0, differ = 0, distinct = 0;
    for (int vi = 0; vi < 3; vi++) {
        const int64_t V = Vs[vi];
        float *lg = malloc(sizeof(float) * (size_t)V), *l = malloc(sizeof(float) * (size_t)V), *x = malloc(sizeof(float) * (size_t)V);
        int32_t *idx = malloc(sizeof(int32_t) * (size_t)V);
        const int reps = V > 5000 ? 3 : 30;
        for (int rep = 0; rep < reps; rep++) {
            /* logits of several spreads, with exact ties (rounded values) and excluded ids (-inf) */
            const float spread = 0.5f + 2.0f * (float)rep / (float)reps;
            attn_test_fill_uniform(lg, (size_t)V, -4.0f * spread, 4.0f * spread, &seed);
            for (int64_t i = 0; i < V; i += 7) lg[i] = roundf(lg[i]);
            for (int64_t i = 3; i < V; i += 61) lg[i] = -INFINITY;
            for (int t = 0; t < 3; t++)
                for (int q = 0; q < 3; q++)
                    for (int m = 0; m < 2; m++) {
                        attn_sampler_params p = attn_sampler_params_default();
                        p.temperature = temps[t];
                        p.top_p = top_ps[q];
                        p.min_p = min_ps[m];
                        p.top_k = 0;
                        p.seed = (uint64_t)(rep * 97 + t * 13 + q * 5 + m);
                        attn_sampler *s = NULL;
                        CHECK_OK(attn_sampler_create(&s, &p, V));
                        if (!s) continue;
                        attn_rng rng;
                        attn_rng_seed(&rng, p.seed);
                        int32_t first = -1;
                        for (int d = 0; d < 4; d++) {
                            memcpy(l, lg, sizeof(float) * (size_t)V);
                            int32_t got = -1;
                            const int rc = attn_sampler_sample(s, &got, l, NULL, 0);
                            const int32_t want = ref_sample(lg, V, &p, &rng, x, idx);
                            draws++;
                            differ += rc != 0 || got != want;
                            if (d == 0) first = got;
                            else distinct += got != first;
                        }
                        attn_sampler_free(s);
                    }
        }
        free(lg), free(l), free(x), free(idx);
    }
    CHECK(differ == 0, "top-k off: %lld of %lld draws differ from the fully sorted reference", (long long)differ, (long long)draws);
    CHECK(distinct > draws / 8, "the draws are random (%lld repeats differ from the first draw)", (long long)distinct);
}

/* a peaked distribution over a large vocabulary (the case the partial sort is for: the draw
 * reads the first bucket only) still follows the softmax */
static void test_peaked(void) {
    const int64_t V = 49152;
    float *lg = malloc(sizeof(float) * (size_t)V), *l = malloc(sizeof(float) * (size_t)V);
    uint64_t seed = 7;
    attn_test_fill_uniform(lg, (size_t)V, -10.0f, 0.0f, &seed);
    lg[123] = 12.0f;
    lg[4567] = 11.5f;
    attn_sampler_params p = attn_sampler_params_default();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    attn_sampler *s = NULL;
    CHECK_OK(attn_sampler_create(&s, &p, V));
    int top2 = 0;
    for (int d = 0; d < 200 && s; d++) {
        memcpy(l, lg, sizeof(float) * (size_t)V);
        int32_t got = -1;
        CHECK_OK(attn_sampler_sample(s, &got, l, NULL, 0));
        top2 += got == 123 || got == 4567;
    }
    /* p(123) + p(4567) = (e^12 + e^11.5) / (that + ~49150 · E[e^u], u ~ U(-10, 0)) ~ 0.96 */
    CHECK(top2 >= 170, "the two dominant ids are drawn most of the time (%d of 200)", top2);
    attn_sampler_free(s);
    free(lg), free(l);
}

/* attn_logits_argmax (two vectorized passes) against the one-pass definition: the first index
 * of the largest non-NaN logit, -1 when all are NaN; ties, NaN, -inf and signed zeros at every
 * length 1..40 and long rows (the 16-lane and 256-value blocks and their tails) */
static uint64_t xs64(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static int64_t ref_argmax(const float *l, int64_t V) {
    int64_t b = -1;
    for (int64_t i = 0; i < V; i++) {
        if (isnan(l[i])) continue;
        if (b < 0 || l[i] > l[b]) b = i;
    }
    return b;
}

static void test_argmax(void) {
    float *l = (float *)malloc(sizeof(float) * 50000);
    uint64_t st = 5;
    int bad = 0, n = 0;
    for (int t = 0; t < 6000; t++) {
        const int64_t V = t < 3000 ? 1 + t % 40 : 1 + (int64_t)(xs64(&st) % 50000);
        const int mode = t % 6;
        for (int64_t i = 0; i < V; i++) {
            const uint64_t r = xs64(&st);
            float x = (float)(r % 7) - 3.0f; /* many ties */
            if (mode == 1 && (r >> 8) % 3 == 0) x = NAN;
            if (mode == 2) x = (r >> 8) % 2 ? -INFINITY : NAN;
            if (mode == 3) x = (r >> 8) % 2 ? -0.0f : 0.0f;
            if (mode == 4) x = NAN;
            if (mode == 5 && (r >> 8) % 5 == 0) x = -INFINITY;
            l[i] = x;
        }
        bad += attn_logits_argmax(l, V) != ref_argmax(l, V);
        n++;
    }
    CHECK(bad == 0, "attn_logits_argmax == the first largest non-NaN index on %d rows with ties, NaN, -inf, +-0 (%d differ)", n, bad);
    free(l);
}

int main(void) {
    attn_test_name = "sampling_sorted";
    test_against_full_sort();
    test_peaked();
    test_argmax();
    return attn_test_finish();
}
