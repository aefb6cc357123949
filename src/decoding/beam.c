/* Greedy and beam-search decoding (see include/attn_beam.h for the semantics). */
#include "attn_beam.h"
#include "attn_sampling.h"
#include "core/internal.h"
#include "core/pool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

attn_decode_opts attn_decode_opts_default(void) {
    attn_decode_opts o;
    memset(&o, 0, sizeof o);
    o.beam_size = 1;
    o.n_best = 1;
    o.length_penalty = 1.0f;
    o.length_penalty_form = ATTN_LP_POWER;
    o.max_length = 256;
    o.repetition_penalty = 1.0f;
    return o;
}

typedef struct {
    float *x;
    int64_t n;
} attn__lsm_job;

/* rows [lo, hi) of attn_log_softmax_rows, each whole on one thread (the same bits on any split) */
static void attn__lsm_rows(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__lsm_job *jb = (const attn__lsm_job *)p;
    const int64_t n = jb->n;
    (void)tid;
    for (int64_t r = lo; r < hi; r++) {
        float *v = jb->x + r * n;
        float mx = -INFINITY;
        for (int64_t j = 0; j < n; j++)
            if (v[j] > mx) mx = v[j];
        if (mx == -INFINITY) continue;
        double s = 0;
        for (int64_t j = 0; j < n; j++) s += expf(v[j] - mx);
        float lse = mx + (float)log(s);
        for (int64_t j = 0; j < n; j++) v[j] -= lse;
    }
}

void attn_log_softmax_rows(float *x, int64_t rows, int64_t n) {
    attn__lsm_job jb = {x, n};
    if (rows <= 0) return;
    /* rows on attn's pool when they are long (a beam's rows over Whisper's 51864 tokens: an
     * exp per element, serial between two parallel products) */
    const double cost = (double)rows * (double)n;
    attn__pool_rows(rows, 1, cost, 0, attn__lsm_rows, &jb);
}

void attn_decode_results_free(attn_decode_result *results, int64_t n) {
    if (!results) return;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t h = 0; h < results[i].n; h++) {
            free(results[i].hyps[h].ids);
            free(results[i].hyps[h].attention);
        }
        free(results[i].hyps);
        results[i].hyps = NULL;
        results[i].n = 0;
    }
}

static int attn__is_end(int32_t id, const attn_decode_opts *o) {
    for (int64_t i = 0; i < o->n_end; i++)
        if (o->end_ids[i] == id) return 1;
    return 0;
}

static float attn__lp(const attn_decode_opts *o, int64_t len) {
    if (o->length_penalty == 0.0f) return 1.0f;
    if (o->length_penalty_form == ATTN_LP_GNMT) return powf((5.0f + (float)len) / 6.0f, o->length_penalty);
    return powf((float)len, o->length_penalty);
}

/* Working state shared by greedy and beam search. */
typedef struct {
    const attn_decoder_iface *dec;
    const attn_decode_opts *o;
    int64_t V, W, max_step;
    int32_t **seq;      /* per row: generated tokens (step entries) */
    float **att;        /* per row: [max_step, W] attention history, or NULL */
    int32_t **seq_new;  /* scratch for reordering */
    float **att_new;
    int64_t cap;        /* rows allocated */
} attn__dstate;

static int attn__dstate_init(attn__dstate *s, int64_t cap) {
    s->cap = cap;
    s->seq = (int32_t **)calloc((size_t)cap, sizeof(int32_t *));
    s->seq_new = (int32_t **)calloc((size_t)cap, sizeof(int32_t *));
    s->att = (float **)calloc((size_t)cap, sizeof(float *));
    s->att_new = (float **)calloc((size_t)cap, sizeof(float *));
    if (!s->seq || !s->seq_new || !s->att || !s->att_new) return attn_set_error(ATTN_E_NOMEM, "decode: out of memory");
    for (int64_t r = 0; r < cap; r++) {
        s->seq[r] = (int32_t *)malloc(sizeof(int32_t) * (size_t)(s->max_step + 1));
        s->seq_new[r] = (int32_t *)malloc(sizeof(int32_t) * (size_t)(s->max_step + 1));
        if (!s->seq[r] || !s->seq_new[r]) return attn_set_error(ATTN_E_NOMEM, "decode: out of memory");
        if (s->o->return_attention && s->W > 0) {
            s->att[r] = (float *)calloc((size_t)((s->max_step + 1) * s->W), sizeof(float));
            s->att_new[r] = (float *)calloc((size_t)((s->max_step + 1) * s->W), sizeof(float));
            if (!s->att[r] || !s->att_new[r]) return attn_set_error(ATTN_E_NOMEM, "decode: out of memory");
        }
    }
    return ATTN_OK;
}

static void attn__dstate_free(attn__dstate *s) {
    for (int64_t r = 0; r < s->cap; r++) {
        if (s->seq) free(s->seq[r]);
        if (s->seq_new) free(s->seq_new[r]);
        if (s->att) free(s->att[r]);
        if (s->att_new) free(s->att_new[r]);
    }
    ATTN_FREE_ALL(s->seq, s->seq_new, s->att, s->att_new);
}

/* Built-in logits processors (before the softmax). */
static int attn__process(attn__dstate *s, float *logits, int64_t n_rows, int64_t step, const int64_t *row_item) {
    const attn_decode_opts *o = s->o;
    const int64_t V = s->V;
    int64_t free_step = o->prefix ? o->prefix_len : 0; /* first unconstrained step */
    /* repetition penalty on every distinct token generated so far (prefix included), and the
     * bans, through the shared logits processors (attn_sampling.h): CTranslate2's penalty is
     * the same CTRL rule (negative logits times P, others divided by P) */
    for (int64_t r = 0; r < n_rows; r++) {
        float *l = logits + r * V;
        if (o->repetition_penalty != 1.0f && step > 0) ATTN_TRY(attn_logits_repetition_penalty(l, V, s->seq[r], step, o->repetition_penalty));
        if (step < (o->return_prefix ? 0 : free_step) + o->min_length) ATTN_TRY(attn_logits_ban(l, V, o->end_ids, o->n_end));
        ATTN_TRY(attn_logits_ban(l, V, o->suppress, o->n_suppress));
        if (step == free_step) ATTN_TRY(attn_logits_ban(l, V, o->suppress_begin, o->n_suppress_begin));
        for (int64_t q = 0; q < o->n_suppress_seqs; q++) {
            const int32_t *ss = o->suppress_seqs[q];
            int64_t n = o->suppress_seq_lens[q];
            if (n <= 0) continue;
            if (n - 1 > step) continue;
            int match = 1;
            for (int64_t k = 0; k < n - 1 && match; k++) match = s->seq[r][step - (n - 1) + k] == ss[k];
            if (match) l[ss[n - 1]] = -INFINITY;
        }
    }
    if (o->hook) {
        int rc = o->hook(o->hook_ctx, logits, n_rows, V, step, (const int32_t *const *)s->seq, step, row_item);
        if (rc < 0) return rc;
    }
    return ATTN_OK;
}

static int attn__add_hyp(attn_decode_result *res, const int32_t *ids, int64_t len, float score, const float *att,
                         int64_t W, int ended) {
    attn_hypothesis *grown = (attn_hypothesis *)realloc(res->hyps, sizeof(attn_hypothesis) * (size_t)(res->n + 1));
    if (!grown) return attn_set_error(ATTN_E_NOMEM, "decode: out of memory");
    res->hyps = grown;
    attn_hypothesis *h = &res->hyps[res->n];
    memset(h, 0, sizeof *h);
    h->ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(len > 0 ? len : 1));
    if (!h->ids) return attn_set_error(ATTN_E_NOMEM, "decode: out of memory");
    if (len > 0) memcpy(h->ids, ids, sizeof(int32_t) * (size_t)len);
    h->len = len;
    h->score = score;
    h->ended = ended;
    if (att) {
        h->attention = (float *)malloc(sizeof(float) * (size_t)((len > 0 ? len : 1) * W));
        if (!h->attention) {
            free(h->ids);
            h->ids = NULL;
            return attn_set_error(ATTN_E_NOMEM, "decode: out of memory");
        }
        if (len > 0) memcpy(h->attention, att, sizeof(float) * (size_t)(len * W));
    }
    res->n++;
    return ATTN_OK;
}

/* Normalise by the length penalty, sort best first (stable for equal scores), keep n_best. */
static void attn__finalize(attn_decode_result *res, const attn_decode_opts *o, int64_t n_best) {
    for (int64_t i = 0; i < res->n; i++) {
        int64_t len = res->hyps[i].len + (res->hyps[i].ended && !o->include_end && !o->length_excludes_end);
        res->hyps[i].score /= attn__lp(o, len > 0 ? len : 1);
    }
    for (int64_t i = 1; i < res->n; i++) {
        attn_hypothesis h = res->hyps[i];
        int64_t j = i;
        while (j > 0 && res->hyps[j - 1].score < h.score) {
            res->hyps[j] = res->hyps[j - 1];
            j--;
        }
        res->hyps[j] = h;
    }
    for (int64_t i = n_best; i < res->n; i++) {
        free(res->hyps[i].ids);
        free(res->hyps[i].attention);
        memset(&res->hyps[i], 0, sizeof res->hyps[i]);
    }
    if (res->n > n_best) res->n = n_best;
}

static int attn__check_opts(const attn_decoder_iface *dec, const attn_decode_opts *o, const int32_t *start_ids, int64_t batch) {
    if (!dec || !dec->step || !dec->reorder || !o || (!start_ids && batch > 0))
        return attn_set_error(ATTN_E_INVALID, "decode: NULL argument");
    if (batch < 0) return attn_set_error(ATTN_E_INVALID, "decode: batch %lld < 0", (long long)batch);
    if (dec->vocab_size <= 0) return attn_set_error(ATTN_E_INVALID, "decode: vocabulary size must be > 0");
    if (o->beam_size < 1) return attn_set_error(ATTN_E_INVALID, "the beam size must be >= 1 (got %lld)", (long long)o->beam_size);
    if (o->beam_size > 4096) return attn_set_error(ATTN_E_INVALID, "the beam size %lld is too large (at most 4096)", (long long)o->beam_size);
    if (o->n_best < 1 || o->n_best > o->beam_size)
        return attn_set_error(ATTN_E_INVALID, "n-best must be between 1 and the beam size %lld (got %lld)", (long long)o->beam_size,
                              (long long)o->n_best);
    if (o->max_length < 1) return attn_set_error(ATTN_E_INVALID, "the maximum length must be >= 1 (got %lld)", (long long)o->max_length);
    if (o->max_length > 1000000) return attn_set_error(ATTN_E_INVALID, "the maximum length %lld is too large", (long long)o->max_length);
    if (o->min_length < 0 || o->min_length > o->max_length)
        return attn_set_error(ATTN_E_INVALID, "the minimum length %lld must be between 0 and the maximum length %lld",
                              (long long)o->min_length, (long long)o->max_length);
    if (!(o->repetition_penalty > 0) || !isfinite(o->repetition_penalty))
        return attn_set_error(ATTN_E_INVALID, "the repetition penalty must be > 0 (got %g)", (double)o->repetition_penalty);
    if (!(o->length_penalty >= 0) || !isfinite(o->length_penalty))
        return attn_set_error(ATTN_E_INVALID, "the length penalty must be >= 0 (got %g)", (double)o->length_penalty);
    if (!o->end_ids || o->n_end < 1) return attn_set_error(ATTN_E_INVALID, "decode: at least one end token is required");
    const int64_t V = dec->vocab_size;
#define ATTN__CHECK_IDS(arr, n, what)                                                                                    \
    for (int64_t i_ = 0; i_ < (n); i_++)                                                                                 \
        if ((arr)[i_] < 0 || (arr)[i_] >= V)                                                                             \
            return attn_set_error(ATTN_E_INVALID, "decode: %s id %d is outside the vocabulary (0..%lld)", what, (arr)[i_], \
                                  (long long)(V - 1));
    ATTN__CHECK_IDS(o->end_ids, o->n_end, "end token");
    ATTN__CHECK_IDS(start_ids, batch, "start token");
    if (o->prefix_len < 0 || (o->prefix_len > 0 && !o->prefix)) return attn_set_error(ATTN_E_INVALID, "decode: bad prefix");
    if (o->prefix) ATTN__CHECK_IDS(o->prefix, o->prefix_len, "prefix token");
    if (o->n_suppress > 0 && !o->suppress) return attn_set_error(ATTN_E_INVALID, "decode: suppress is NULL");
    if (o->suppress) ATTN__CHECK_IDS(o->suppress, o->n_suppress, "suppressed token");
    if (o->n_suppress_begin > 0 && !o->suppress_begin) return attn_set_error(ATTN_E_INVALID, "decode: suppress_begin is NULL");
    if (o->suppress_begin) ATTN__CHECK_IDS(o->suppress_begin, o->n_suppress_begin, "suppressed token");
    if (o->n_suppress_seqs > 0 && (!o->suppress_seqs || !o->suppress_seq_lens))
        return attn_set_error(ATTN_E_INVALID, "decode: suppressed sequences are NULL");
    for (int64_t q = 0; q < o->n_suppress_seqs; q++) {
        if (o->suppress_seq_lens[q] < 0 || (o->suppress_seq_lens[q] > 0 && !o->suppress_seqs[q]))
            return attn_set_error(ATTN_E_INVALID, "decode: bad suppressed sequence %lld", (long long)q);
        ATTN__CHECK_IDS(o->suppress_seqs[q], o->suppress_seq_lens[q], "suppressed sequence");
    }
#undef ATTN__CHECK_IDS
    return ATTN_OK;
}

/* ---------------------------------------------------------------- greedy */

/* Swap hypothesis row i of (seq, att) with row j of (seq2, att2): the token rows, and the
 * attention rows too unless att is NULL (attention not kept). */
static void attn__swap_rows(int32_t **seq, float **att, int64_t i, int32_t **seq2, float **att2, int64_t j) {
    int32_t *t = seq[i];
    seq[i] = seq2[j];
    seq2[j] = t;
    if (att) {
        float *a = att[i];
        att[i] = att2[j];
        att2[j] = a;
    }
}

static int attn__greedy(attn_decode_result *results, attn__dstate *s, const int32_t *start_ids, int64_t batch) {
    const attn_decode_opts *o = s->o;
    const attn_decoder_iface *dec = s->dec;
    const int64_t V = s->V, W = s->W;
    const int64_t P = o->prefix ? o->prefix_len : 0;
    int rc = ATTN_OK;
    float *logits = (float *)malloc(sizeof(float) * (size_t)(batch * V));
    float *attn = (o->return_attention && W > 0) ? (float *)malloc(sizeof(float) * (size_t)(batch * W)) : NULL;
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)batch);
    int64_t *item = (int64_t *)malloc(sizeof(int64_t) * (size_t)batch);
    int64_t *keep = (int64_t *)malloc(sizeof(int64_t) * (size_t)batch);
    int64_t *keep_item = (int64_t *)malloc(sizeof(int64_t) * (size_t)batch);
    float *score = (float *)calloc((size_t)batch, sizeof(float));
    int64_t *hlen = (int64_t *)calloc((size_t)batch, sizeof(int64_t)); /* returned tokens so far per row */
    if (!logits || (o->return_attention && W > 0 && !attn) || !ids || !item || !keep || !keep_item || !score || !hlen) {
        rc = attn_set_error(ATTN_E_NOMEM, "decode: out of memory");
        goto done;
    }
    int64_t N = batch;
    for (int64_t i = 0; i < batch; i++) {
        ids[i] = start_ids[i];
        item[i] = i;
    }
    for (int64_t step = 0; step < s->max_step && N > 0; step++) {
        rc = dec->step(dec->ctx, logits, attn, ids, N, step);
        if (rc < 0) goto done;
        rc = attn__process(s, logits, N, step, item);
        if (rc < 0) goto done;
        attn_log_softmax_rows(logits, N, V);
        int64_t n_keep = 0;
        for (int64_t r = 0; r < N; r++) {
            const float *l = logits + r * V;
            int32_t best = 0;
            for (int64_t j = 1; j < V; j++)
                if (l[j] > l[best]) best = (int32_t)j;
            float lp = l[best];
            if (step < P) {
                best = o->prefix[step];
                lp = 0.0f;
            }
            int end = attn__is_end(best, o);
            s->seq[r][step] = best;
            if ((!end || o->include_end) && (o->return_prefix || step >= P)) {
                if (attn) memcpy(s->att[r] + hlen[r] * W, attn + r * W, sizeof(float) * (size_t)W);
                hlen[r]++;
            }
            score[r] += lp;
            int finished = (end && step >= P) || step + 1 == o->max_length + (o->return_prefix ? 0 : P);
            if (finished) {
                int64_t start = o->return_prefix ? 0 : P;
                attn_decode_result *res = &results[item[r]];
                rc = attn__add_hyp(res, s->seq[r] + start, hlen[r], score[r], attn ? s->att[r] : NULL, W, end && step >= P);
                if (rc < 0) goto done;
                attn__finalize(res, o, 1);
            } else {
                keep[n_keep] = r;
                keep_item[n_keep] = item[r];
                n_keep++;
            }
        }
        if (n_keep == 0) break;
        if (n_keep != N) {
            for (int64_t i = 0; i < n_keep; i++) {
                int64_t r = keep[i];
                /* rows only move towards the front: copy in place */
                attn__swap_rows(s->seq, attn ? s->att : NULL, i, s->seq, s->att, r);
                score[i] = score[r];
                hlen[i] = hlen[r];
                item[i] = keep_item[i];
            }
            rc = dec->reorder(dec->ctx, keep, n_keep, item);
            if (rc < 0) goto done;
        }
        for (int64_t i = 0; i < n_keep; i++) ids[i] = s->seq[i][step];
        N = n_keep;
    }
done:
    ATTN_FREE_ALL(logits, attn, ids, item, keep, keep_item, score, hlen);
    return rc;
}

/* ---------------------------------------------------------------- beam search */

typedef struct {
    float score;
    int32_t id;
    int64_t origin; /* row */
    int64_t flat;   /* index among the item's rows x V, for tie-breaking */
} attn__cand;

/* insert c into top[0..*n) sorted by score descending (ties: lower flat index first), k max */
static void attn__topk_push(attn__cand *top, int64_t *n, int64_t k, attn__cand c) {
    int64_t m = *n;
    if (m == k) {
        attn__cand *last = &top[k - 1];
        if (c.score < last->score || (c.score == last->score && c.flat > last->flat) || c.score != c.score) return;
        m = k - 1;
    }
    int64_t j = m;
    while (j > 0 && (top[j - 1].score < c.score || (top[j - 1].score == c.score && top[j - 1].flat > c.flat))) {
        top[j] = top[j - 1];
        j--;
    }
    top[j] = c;
    *n = m + 1;
}

static int attn__beam(attn_decode_result *results, attn__dstate *s, const int32_t *start_ids, int64_t batch) {
    const attn_decode_opts *o = s->o;
    const attn_decoder_iface *dec = s->dec;
    const int64_t V = s->V, W = s->W, K = o->beam_size, C = 2 * o->beam_size;
    const int64_t P = o->prefix ? o->prefix_len : 0;
    const int early_exit = o->length_penalty == 0.0f;
    const int64_t rows_cap = batch * K;
    int rc = ATTN_OK;
    float *logits = (float *)malloc(sizeof(float) * (size_t)(rows_cap * V));
    float *attn = (o->return_attention && W > 0) ? (float *)malloc(sizeof(float) * (size_t)(rows_cap * W)) : NULL;
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)rows_cap);
    int64_t *row_item = (int64_t *)malloc(sizeof(int64_t) * (size_t)rows_cap);
    float *cum = (float *)calloc((size_t)rows_cap, sizeof(float));
    float *cum_new = (float *)calloc((size_t)rows_cap, sizeof(float));
    int64_t *src = (int64_t *)malloc(sizeof(int64_t) * (size_t)rows_cap);
    int64_t *new_item = (int64_t *)malloc(sizeof(int64_t) * (size_t)rows_cap);
    int32_t *new_ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)rows_cap);
    attn__cand *cand = (attn__cand *)malloc(sizeof(attn__cand) * (size_t)(batch * C));
    int64_t *items = (int64_t *)malloc(sizeof(int64_t) * (size_t)batch); /* live items in row order */
    unsigned char *top_done = (unsigned char *)calloc((size_t)batch, 1);
    if (!logits || (o->return_attention && W > 0 && !attn) || !ids || !row_item || !cum || !cum_new || !src || !new_item ||
        !new_ids || !cand || !items || !top_done) {
        rc = attn_set_error(ATTN_E_NOMEM, "decode: out of memory");
        goto done;
    }
    int64_t n_items = batch, N = batch;
    for (int64_t i = 0; i < batch; i++) {
        ids[i] = start_ids[i];
        row_item[i] = i;
        items[i] = i;
    }
    for (int64_t step = 0; step < s->max_step && n_items > 0; step++) {
        const int expanded = step > 0;
        const int64_t rows_per_item = expanded ? K : 1;
        rc = dec->step(dec->ctx, logits, attn, ids, N, step);
        if (rc < 0) goto done;
        rc = attn__process(s, logits, N, step, row_item);
        if (rc < 0) goto done;
        attn_log_softmax_rows(logits, N, V);
        /* candidates */
        for (int64_t it = 0; it < n_items; it++) {
            attn__cand *top = cand + it * C;
            int64_t nt = 0;
            for (int64_t k = 0; k < rows_per_item; k++) {
                int64_t r = it * rows_per_item + k;
                const float *l = logits + r * V;
                float base = expanded ? cum[r] : 0.0f;
                for (int64_t j = 0; j < V; j++) {
                    attn__cand c = {expanded ? l[j] + base : l[j], (int32_t)j, r, k * V + j};
                    attn__topk_push(top, &nt, C, c);
                }
            }
            for (int64_t k = nt; k < C; k++) top[k] = (attn__cand){-INFINITY, 0, it * rows_per_item, INT64_MAX};
            if (step < P) {
                for (int64_t k = 0; k < C; k++) {
                    top[k].id = o->prefix[step];
                    top[k].score = k == 0 ? 0.0f : -1e10f;
                    top[k].origin = it * rows_per_item;
                }
            } else if (step == P) {
                for (int64_t k = 1; k < C; k++)
                    if (attn__is_end(top[k].id, o)) {
                        top[k].id = 0;
                        top[k].score = -1e10f;
                    }
            }
        }
        /* finished hypotheses and next rows */
        int64_t n_new = 0, n_items_new = 0;
        const int last_step = step + 1 == o->max_length + (o->return_prefix ? 0 : P);
        for (int64_t it = 0; it < n_items; it++) {
            attn__cand *top = cand + it * C;
            int64_t b = row_item[it * rows_per_item];
            attn_decode_result *res = &results[b];
            int64_t active[4096];
            int64_t secondary = K;
            for (int64_t k = 0; k < K; k++) {
                int64_t next = k;
                int end = attn__is_end(top[k].id, o);
                if ((end && step >= P) || last_step) {
                    if (k == 0) top_done[b] = 1;
                    int ignore_last = end && !o->include_end;
                    int64_t start = o->return_prefix ? 0 : P;
                    int64_t stop = ignore_last ? step : step + 1;
                    /* the hypothesis is the origin row's tokens plus this candidate */
                    int64_t r = top[k].origin;
                    s->seq[r][step] = top[k].id; /* scratch: restored below from candidates */
                    int64_t len = stop - start;
                    float *att_h = NULL;
                    if (attn) {
                        memcpy(s->att[r] + step * W, attn + r * W, sizeof(float) * (size_t)W);
                        att_h = s->att[r] + start * W;
                    }
                    rc = attn__add_hyp(res, s->seq[r] + start, len, top[k].score, att_h, W, end && step >= P);
                    if (rc < 0) goto done;
                    for (int64_t j = secondary; j < C; j++)
                        if (!attn__is_end(top[j].id, o)) {
                            next = j;
                            secondary = j + 1;
                            break;
                        }
                }
                active[k] = next;
            }
            int finished;
            if (last_step) finished = 1;
            else if (early_exit) finished = top_done[b] && res->n >= o->n_best;
            else finished = res->n >= K;
            if (finished) {
                attn__finalize(res, o, o->n_best);
                continue;
            }
            for (int64_t k = 0; k < K; k++) {
                attn__cand *c = &top[active[k]];
                src[n_new] = c->origin;
                new_item[n_new] = b;
                new_ids[n_new] = c->id;
                cum_new[n_new] = c->score;
                n_new++;
            }
            n_items_new++;
        }
        if (n_new == 0) break;
        /* new rows: copy histories from their origins, then append this step's token */
        for (int64_t i = 0; i < n_new; i++) {
            int64_t r = src[i];
            memcpy(s->seq_new[i], s->seq[r], sizeof(int32_t) * (size_t)step);
            s->seq_new[i][step] = new_ids[i];
            if (attn) {
                memcpy(s->att_new[i], s->att[r], sizeof(float) * (size_t)(step * W));
                memcpy(s->att_new[i] + step * W, attn + r * W, sizeof(float) * (size_t)W);
            }
        }
        for (int64_t i = 0; i < n_new; i++) {
            attn__swap_rows(s->seq, attn ? s->att : NULL, i, s->seq_new, s->att_new, i);
            ids[i] = new_ids[i];
            cum[i] = cum_new[i];
            row_item[i] = new_item[i];
        }
        rc = dec->reorder(dec->ctx, src, n_new, row_item);
        if (rc < 0) goto done;
        N = n_new;
        n_items = n_items_new;
        (void)items;
    }
done:
    ATTN_FREE_ALL(logits, attn, ids, row_item, cum, cum_new, src, new_item, new_ids, cand, items, top_done);
    return rc;
}

int attn_decode(attn_decode_result *results, const attn_decoder_iface *dec, const int32_t *start_ids, int64_t batch,
                const attn_decode_opts *o) {
    if (!results && batch > 0) return attn_set_error(ATTN_E_INVALID, "decode: results is NULL");
    ATTN_TRY(attn__check_opts(dec, o, start_ids, batch));
    if (batch == 0) return ATTN_OK;
    memset(results, 0, sizeof *results * (size_t)batch);
    attn__dstate s;
    memset(&s, 0, sizeof s);
    s.dec = dec;
    s.o = o;
    s.V = dec->vocab_size;
    s.W = o->return_attention ? dec->attn_width : 0;
    s.max_step = o->max_length + (o->prefix && !o->return_prefix ? o->prefix_len : 0);
    int64_t cap = o->beam_size == 1 ? batch : batch * o->beam_size;
    int rc = attn__dstate_init(&s, cap);
    if (rc == 0) rc = o->beam_size == 1 ? attn__greedy(results, &s, start_ids, batch) : attn__beam(results, &s, start_ids, batch);
    attn__dstate_free(&s);
    if (rc < 0) attn_decode_results_free(results, batch);
    return rc;
}
