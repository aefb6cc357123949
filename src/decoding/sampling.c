/* Next-token selection: logit processors, greedy and seeded sampling (see attn_sampling.h). */
#include "attn_sampling.h"
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct attn_sampler {
    attn_sampler_params p;
    int64_t V;
    unsigned char *banned; /* [V] */
    int64_t n_banned;
    int32_t *idx;          /* [V] candidate ids */
    float *prob;           /* [V] */
    unsigned char *seen;   /* [V] scratch for the penalty */
    attn_rng rng;
};

attn_sampler_params attn_sampler_params_default(void) {
    attn_sampler_params p;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repetition_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.seed = 0;
    return p;
}

int attn_sampler_params_check(const attn_sampler_params *p) {
    if (!p) return attn_set_error(ATTN_E_INVALID, "sampler: params is NULL");
    if (!isfinite(p->temperature) || p->temperature < 0)
        return attn_set_error(ATTN_E_INVALID, "sampler: temperature must be a finite value >= 0 (got %g)", p->temperature);
    if (p->top_k < 0) return attn_set_error(ATTN_E_INVALID, "sampler: top_k must be >= 0 (got %d)", (int)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return attn_set_error(ATTN_E_INVALID, "sampler: top_p must be in (0, 1] (got %g)", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p < 1.0f))
        return attn_set_error(ATTN_E_INVALID, "sampler: min_p must be in [0, 1) (got %g)", p->min_p);
    if (!(p->repetition_penalty >= 1.0f) || !isfinite(p->repetition_penalty))
        return attn_set_error(ATTN_E_INVALID, "sampler: repetition penalty must be a finite value >= 1 (got %g)",
                              p->repetition_penalty);
    return ATTN_OK;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void attn_rng_seed(attn_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t attn_rng_next(attn_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double attn_rng_uniform(attn_rng *r) { return (double)(attn_rng_next(r) >> 11) * 0x1.0p-53; }

int attn_sampler_create(attn_sampler **out, const attn_sampler_params *p, int64_t V) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "sampler: out is NULL");
    *out = NULL;
    ATTN_TRY(attn_sampler_params_check(p));
    if (V <= 0 || V > INT32_MAX) return attn_set_error(ATTN_E_INVALID, "sampler: vocabulary size %lld out of range", (long long)V);
    attn_sampler *s = (attn_sampler *)calloc(1, sizeof *s);
    if (!s) return attn_set_error(ATTN_E_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->V = V;
    s->banned = (unsigned char *)calloc((size_t)V, 1);
    s->seen = (unsigned char *)calloc((size_t)V, 1);
    s->idx = (int32_t *)malloc(sizeof(int32_t) * (size_t)V);
    s->prob = (float *)malloc(sizeof(float) * (size_t)V);
    if (!s->banned || !s->seen || !s->idx || !s->prob) {
        attn_sampler_free(s);
        return attn_set_error(ATTN_E_NOMEM, "sampler: out of memory");
    }
    attn_rng_seed(&s->rng, p->seed);
    *out = s;
    return ATTN_OK;
}

void attn_sampler_free(attn_sampler *s) {
    if (!s) return;
    ATTN_FREE_ALL(s->banned, s->seen, s->idx, s->prob);
    free(s);
}

int attn_sampler_ban(attn_sampler *s, int32_t id) {
    if (!s) return attn_set_error(ATTN_E_INVALID, "sampler: NULL");
    if (id < 0 || id >= s->V) return attn_set_error(ATTN_E_RANGE, "sampler: banned id %d outside [0, %lld)", (int)id, (long long)s->V);
    if (!s->banned[id]) s->n_banned++;
    s->banned[id] = 1;
    return ATTN_OK;
}

static int penalty_apply(float *logits, int64_t V, const int32_t *ids, int64_t n, float penalty, unsigned char *seen) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return attn_set_error(ATTN_E_RANGE, "repetition penalty: id %d outside [0, %lld)", (int)ids[i], (long long)V);
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (seen[id]) continue;
        seen[id] = 1;
        logits[id] = logits[id] > 0 ? logits[id] / penalty : logits[id] * penalty;
    }
    for (int64_t i = 0; i < n; i++) seen[ids[i]] = 0;
    return ATTN_OK;
}

int attn_logits_repetition_penalty(float *logits, int64_t V, const int32_t *ids, int64_t n, float penalty) {
    if (!logits || V <= 0 || (n > 0 && !ids) || n < 0) return attn_set_error(ATTN_E_INVALID, "repetition penalty: bad arguments");
    if (!(penalty > 0.0f) || !isfinite(penalty)) return attn_set_error(ATTN_E_INVALID, "repetition penalty must be > 0");
    if (penalty == 1.0f || n == 0) return ATTN_OK;
    unsigned char *seen = (unsigned char *)calloc((size_t)V, 1);
    if (!seen) return attn_set_error(ATTN_E_NOMEM, "repetition penalty: out of memory");
    int rc = penalty_apply(logits, V, ids, n, penalty, seen);
    free(seen);
    return rc;
}

int attn_logits_ban(float *logits, int64_t V, const int32_t *ids, int64_t n) {
    if (!logits || V <= 0 || (n > 0 && !ids) || n < 0) return attn_set_error(ATTN_E_INVALID, "ban: bad arguments");
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V) return attn_set_error(ATTN_E_RANGE, "ban: id %d outside [0, %lld)", (int)ids[i], (long long)V);
    for (int64_t i = 0; i < n; i++) logits[ids[i]] = -INFINITY;
    return ATTN_OK;
}

/* Two passes the compiler vectorizes: the largest non-NaN value in 16 running maxima (a max is
 * exact in any order; `x > m` is false for NaN), then the first index holding it, looked for 256
 * values at a time (the scalar loop with its data-dependent branch was ~2% of an 8-sequence
 * decode step: 49152 logits a row). -0.0 == +0.0, so of zeros the first wins, as the one-pass
 * loop's strict > did. */
int64_t attn_logits_argmax(const float *logits, int64_t V) {
    float mk[16];
    int ok[16];
    for (int k = 0; k < 16; k++) mk[k] = -INFINITY, ok[k] = 0;
    int64_t i = 0;
    for (; i + 16 <= V; i += 16)
        for (int k = 0; k < 16; k++) {
            const float x = logits[i + k];
            ok[k] |= x == x;
            mk[k] = x > mk[k] ? x : mk[k];
        }
    for (; i < V; i++) {
        const float x = logits[i];
        ok[0] |= x == x;
        mk[0] = x > mk[0] ? x : mk[0];
    }
    float m = -INFINITY;
    int any = 0;
    for (int k = 0; k < 16; k++) m = mk[k] > m ? mk[k] : m, any |= ok[k];
    if (!any) return -1;
    for (int64_t i0 = 0; i0 < V; i0 += 256) {
        const int64_t n = V - i0 < 256 ? V - i0 : 256;
        int hit = 0;
        for (int64_t j = 0; j < n; j++) hit |= logits[i0 + j] == m;
        if (hit)
            for (int64_t j = 0; j < n; j++)
                if (logits[i0 + j] == m) return i0 + j;
    }
    return -1; /* not reached: m is one of the values */
}

/* descending by probability, ascending id on ties (a total order: results do not depend on qsort) */
static _Thread_local const float *g_sort_key;
static int cand_cmp(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float px = g_sort_key[x], py = g_sort_key[y];
    if (px > py) return -1;
    if (px < py) return 1;
    return (x > y) - (x < y);
}

/* Steps 4-8 without top-k (the OpenAI API has none, so attn serve samples this way), with
 * the list sorted only as far as it is read. The candidates (finite logits) are bucketed by
 * their scaled logit x = (logit - max) / T in one counting pass (bucket b holds
 * -4(b+1) < x <= -4b; the last one everything lower), ids ascending inside a bucket; a bucket
 * is sorted (cand_cmp: the full sort's order) when top-p, min-p or the draw first reaches it, so
 * the concatenated buckets are the fully sorted list and every step reads the same values in
 * the same order as a full sort would. A peaked distribution reads one or two buckets instead
 * of sorting V ids (8.5 ms a token for V = 49152); a flat one sorts them all, as before. The
 * one difference: the sums over all candidates (the softmax's normaliser, and the draw's total
 * when nothing is cut) are taken in id order, so a draw can differ from the full sort's only
 * where rounding in the last bits of a sum moves a boundary. */
#define SAMPLE_BUCKETS 32
static double attn__sample_e(const attn_sampler *s, int32_t id) { return (double)(float)exp((double)s->prob[id]); }

typedef struct {
    attn_sampler *s;
    int64_t off[SAMPLE_BUCKETS + 1];
    int64_t sorted_end; /* idx[0, sorted_end) is sorted */
    int next_bucket;
} attn__lazy;

/* the id at position k of the descending list (k < number of candidates) */
static int32_t attn__lazy_at(attn__lazy *z, int64_t k) {
    while (k >= z->sorted_end) {
        const int64_t a = z->off[z->next_bucket], b = z->off[z->next_bucket + 1];
        if (b - a > 1) qsort(z->s->idx + a, (size_t)(b - a), sizeof(int32_t), cand_cmp);
        z->sorted_end = b;
        z->next_bucket++;
    }
    return z->s->idx[k];
}

static int attn__sample_lazy(attn_sampler *s, int32_t *token, const float *logits, float mx) {
    const attn_sampler_params *p = &s->p;
    const int64_t V = s->V;
    attn__lazy z;
    memset(&z, 0, sizeof z);
    z.s = s;
    int64_t cnt[SAMPLE_BUCKETS] = {0}, n = 0;
    double sum = 0, sum_f = 0; /* of exp(x), and of exp(x) rounded to float as the list holds it */
    for (int64_t i = 0; i < V; i++) {
        if (logits[i] == -INFINITY) continue;
        const float x = (float)(((double)logits[i] - (double)mx) / (double)p->temperature); /* <= 0 */
        s->prob[i] = x;
        const float bf = -x * 0.25f;
        cnt[bf < (float)(SAMPLE_BUCKETS - 1) ? (int)bf : SAMPLE_BUCKETS - 1]++;
        const double e = exp((double)x);
        sum += e;
        sum_f += (double)(float)e;
        n++;
    }
    for (int b = 0; b < SAMPLE_BUCKETS; b++) z.off[b + 1] = z.off[b] + cnt[b];
    int64_t pos[SAMPLE_BUCKETS];
    memcpy(pos, z.off, sizeof pos);
    for (int64_t i = 0; i < V; i++) {
        if (logits[i] == -INFINITY) continue;
        const float bf = -s->prob[i] * 0.25f;
        s->idx[pos[bf < (float)(SAMPLE_BUCKETS - 1) ? (int)bf : SAMPLE_BUCKETS - 1]++] = (int32_t)i;
    }
    g_sort_key = s->prob;
    const int64_t all = n;
    if (p->top_p < 1.0f) {
        double acc = 0;
        int64_t k = 0;
        while (k < n) {
            acc += (float)attn__sample_e(s, attn__lazy_at(&z, k)) / sum;
            k++;
            if (acc >= p->top_p) break;
        }
        n = k;
    }
    if (p->min_p > 0.0f) {
        float thr = p->min_p * (float)attn__sample_e(s, attn__lazy_at(&z, 0));
        int64_t k = 1;
        while (k < n && (float)attn__sample_e(s, attn__lazy_at(&z, k)) >= thr) k++;
        n = k;
    }
    sum = sum_f;
    if (n < all) { /* a cut list: its own sum, in the list's order */
        sum = 0;
        for (int64_t i = 0; i < n; i++) sum += attn__sample_e(s, attn__lazy_at(&z, i));
    }
    double u = attn_rng_uniform(&s->rng) * sum, acc = 0;
    for (int64_t i = 0; i < n; i++) {
        const int32_t id = attn__lazy_at(&z, i);
        acc += attn__sample_e(s, id);
        if (u < acc) {
            *token = id;
            return ATTN_OK;
        }
    }
    *token = attn__lazy_at(&z, n - 1);
    return ATTN_OK;
}

int attn_sampler_sample(attn_sampler *s, int32_t *token, float *logits, const int32_t *history, int64_t n_history) {
    if (!s || !token || !logits || (n_history > 0 && !history) || n_history < 0)
        return attn_set_error(ATTN_E_INVALID, "sampler: bad arguments");
    const int64_t V = s->V;
    for (int64_t i = 0; i < V; i++)
        if (isnan(logits[i])) return attn_set_error(ATTN_E_RANGE, "sampler: logit %lld is NaN", (long long)i);
    const attn_sampler_params *p = &s->p;
    if (p->repetition_penalty != 1.0f && n_history > 0) {
        int64_t n = n_history, from = 0;
        if (p->repeat_last_n > 0 && n > p->repeat_last_n) from = n - p->repeat_last_n;
        ATTN_TRY(penalty_apply(logits, V, history + from, n - from, p->repetition_penalty, s->seen));
    }
    if (s->n_banned)
        for (int64_t i = 0; i < V; i++)
            if (s->banned[i]) logits[i] = -INFINITY;
    int64_t best = attn_logits_argmax(logits, V);
    if (best < 0 || logits[best] == -INFINITY) return attn_set_error(ATTN_E_RANGE, "sampler: every token is banned or has logit -inf");
    if (p->temperature == 0.0f) {
        *token = (int32_t)best;
        return ATTN_OK;
    }
    const float mx = logits[best];
    if (p->top_k == 0 || p->top_k >= V - s->n_banned) return attn__sample_lazy(s, token, logits, mx);
    /* candidates: finite-probability tokens, logits / T */
    int64_t n = 0;
    for (int64_t i = 0; i < V; i++) {
        if (logits[i] == -INFINITY) continue;
        s->prob[i] = (float)(((double)logits[i] - (double)mx) / (double)p->temperature); /* <= 0 */
        s->idx[n++] = (int32_t)i;
    }
    g_sort_key = s->prob;
    if (p->top_k > 0 && n > p->top_k) {
        /* select before sorting: the k-th largest value by a bounded insertion list (k is small in
         * practice; V log V sorting of a 50k vocabulary would cost milliseconds per token) */
        int64_t k = p->top_k, m = 0;
        int32_t *top = s->idx; /* compacted in place: top[0..m) sorted descending */
        for (int64_t i = 0; i < n; i++) {
            int32_t id = s->idx[i];
            float v = s->prob[id];
            if (m == k && !(v > s->prob[top[m - 1]])) continue;
            int64_t j = m < k ? m++ : k - 1;
            while (j > 0 && (s->prob[top[j - 1]] < v)) {
                top[j] = top[j - 1];
                j--;
            }
            top[j] = id;
        }
        /* ties with the k-th value are kept too: collect them (rare) */
        float kth = s->prob[top[k - 1]];
        int64_t extra = 0;
        for (int64_t id = 0; id < V; id++)
            if (logits[id] != -INFINITY && s->prob[id] == kth) extra++;
        int64_t in_top = 0;
        for (int64_t j = 0; j < k; j++) in_top += s->prob[top[j]] == kth;
        if (extra > in_top) {
            n = k;
            for (int64_t id = 0; id < V; id++) {
                if (logits[id] == -INFINITY || s->prob[id] != kth) continue;
                int dup = 0;
                for (int64_t j = 0; j < k && !dup; j++) dup = top[j] == id;
                if (!dup) top[n++] = (int32_t)id;
            }
        } else {
            n = k;
        }
        qsort(s->idx, (size_t)n, sizeof(int32_t), cand_cmp);
    } else {
        qsort(s->idx, (size_t)n, sizeof(int32_t), cand_cmp);
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = exp((double)s->prob[s->idx[i]]);
        s->prob[s->idx[i]] = (float)e;
        sum += e;
    }
    if (p->top_p < 1.0f) {
        double acc = 0;
        int64_t k = 0;
        while (k < n) {
            acc += s->prob[s->idx[k]] / sum;
            k++;
            if (acc >= p->top_p) break;
        }
        n = k;
    }
    if (p->min_p > 0.0f) {
        float thr = p->min_p * s->prob[s->idx[0]];
        int64_t k = 1;
        while (k < n && s->prob[s->idx[k]] >= thr) k++;
        n = k;
    }
    sum = 0;
    for (int64_t i = 0; i < n; i++) sum += s->prob[s->idx[i]];
    double u = attn_rng_uniform(&s->rng) * sum, acc = 0;
    int32_t pick = s->idx[n - 1];
    for (int64_t i = 0; i < n; i++) {
        acc += s->prob[s->idx[i]];
        if (u < acc) {
            pick = s->idx[i];
            break;
        }
    }
    *token = pick;
    return ATTN_OK;
}
