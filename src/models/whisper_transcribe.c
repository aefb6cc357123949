/* Whisper's transcription rules (see include/attn_whisper.h), as faster-whisper 1.2.1 and
 * CTranslate2 4.8.5 apply them: the prompt (previous text), OpenAI's timestamp rules, beam search
 * and sampling with temperature fallback, the compression and no-speech rules, and the 30 s
 * windows with seek-by-last-timestamp. The model itself is in whisper.c. */
#include "models/whisper_internal.h"
#include "attn_attention.h"
#include "attn_audio.h"
#include "attn_beam.h"
#include "attn_bpe.h"
#include "attn_sampling.h"
#include "core/internal.h"
#include "formats/hf_config.h"
#include "models/ct2_layers.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* OpenAI's timestamp rules as CTranslate2 applies them (ApplyTimestampRules), after the other
 * processors: logits of disabled tokens are -inf already. */
static int attn__wtimestamps(void *ctx, float *logits, int64_t n_rows, int64_t V, int64_t step, const int32_t *const *seqs, int64_t seq_len,
                             const int64_t *row_item) {
    attn__wstate *s = (attn__wstate *)ctx;
    (void)row_item;
    (void)seq_len;
    const int32_t eot = s->m->cfg.eot, tb = s->m->cfg.timestamp_begin, te = (int32_t)V - 1;
    const int32_t max_initial = tb + 50; /* max_initial_timestamp_index 50 (1.0 s) */
    for (int64_t r = 0; r < n_rows; r++) {
        float *l = logits + r * V;
        int check = 0;
        l[s->m->cfg.no_timestamps] = -INFINITY;
        if (step == 0) {
            for (int32_t i = 0; i < tb; i++) l[i] = -INFINITY;
            for (int32_t i = max_initial + 1; i <= te; i++) l[i] = -INFINITY;
        } else {
            int32_t last = seqs[r][step - 1];
            if (last >= tb) {
                int32_t pen = step - 1 > 0 ? seqs[r][step - 2] : last;
                if (pen >= tb) {
                    for (int32_t i = tb; i <= te; i++) l[i] = -INFINITY;
                } else {
                    for (int32_t i = 0; i < eot; i++) l[i] = -INFINITY;
                    check = 1;
                }
            } else {
                check = 1;
            }
            /* timestamps never decrease; after text they must move on (the last one + 1);
             * only the timestamp closing a segment may repeat the one opening it (OpenAI
             * Whisper's ApplyTimestampRules, as CTranslate2 4.8.5 applies it) */
            for (int64_t t = step - 1; t >= 0; t--)
                if (seqs[r][t] >= tb) {
                    const int32_t lim = last >= tb ? seqs[r][t] : seqs[r][t] + 1;
                    for (int32_t i = tb; i < lim && i <= te; i++) l[i] = -INFINITY;
                    break;
                }
        }
        if (check) {
            /* log-softmax; timestamps win when their total probability beats every text token */
            float mx = -INFINITY;
            for (int64_t j = 0; j < V; j++)
                if (l[j] > mx) mx = l[j];
            if (mx == -INFINITY) continue;
            double sum = 0;
            for (int64_t j = 0; j < V; j++) sum += exp((double)l[j] - mx);
            double lse = mx + log(sum);
            double text_max = -INFINITY;
            for (int32_t j = 0; j < tb; j++)
                if (l[j] - lse > text_max) text_max = l[j] - lse;
            double tmax = -INFINITY;
            for (int32_t j = tb; j <= te; j++)
                if (l[j] > tmax) tmax = l[j];
            double ts = -INFINITY;
            if (tmax > -INFINITY) {
                double t2 = 0;
                for (int32_t j = tb; j <= te; j++) t2 += exp((double)l[j] - tmax);
                ts = tmax + log(t2) - lse;
            }
            if (ts > text_max)
                for (int32_t i = 0; i < tb; i++) l[i] = -INFINITY;
        }
    }
    return ATTN_OK;
}

static int attn__wcheck_opts(const attn_whisper_opts *o) {
    if (o->beam_size < 1 || o->beam_size > 64) return attn_set_error(ATTN_E_INVALID, "the beam size must be between 1 and 64 (got %lld)", (long long)o->beam_size);
    if (o->n_temperatures == 0) return ATTN_OK; /* the rules are off: the other fields are unused */
    if (o->n_temperatures < 0 || o->n_temperatures > 32)
        return attn_set_error(ATTN_E_INVALID, "whisper: n_temperatures must be between 0 and 32 (got %lld)", (long long)o->n_temperatures);
    if (!o->temperatures) return attn_set_error(ATTN_E_INVALID, "whisper: NULL temperatures");
    for (int64_t i = 0; i < o->n_temperatures; i++)
        if (!(o->temperatures[i] >= 0.0f) || !isfinite(o->temperatures[i]))
            return attn_set_error(ATTN_E_INVALID, "whisper: temperature %g must be finite and >= 0", (double)o->temperatures[i]);
    if (o->best_of < 1 || o->best_of > 64) return attn_set_error(ATTN_E_INVALID, "whisper: best_of must be between 1 and 64 (got %lld)", (long long)o->best_of);
    if (!(o->no_speech_threshold >= 0.0f && o->no_speech_threshold <= 1.0f))
        return attn_set_error(ATTN_E_INVALID, "whisper: the no-speech threshold must be in [0, 1] (got %g)", (double)o->no_speech_threshold);
    if (isnan(o->log_prob_threshold) || o->log_prob_threshold == INFINITY)
        return attn_set_error(ATTN_E_INVALID, "whisper: the log-probability threshold must be a number or -inf (got %g)", (double)o->log_prob_threshold);
    if (!(o->compression_ratio_threshold > 0.0f))
        return attn_set_error(ATTN_E_INVALID, "whisper: the compression-ratio threshold must be > 0 (got %g)", (double)o->compression_ratio_threshold);
    return ATTN_OK;
}

static const float attn__wtemperatures[6] = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};

attn_whisper_opts attn_whisper_opts_default(void) {
    attn_whisper_opts o;
    memset(&o, 0, sizeof o);
    o.beam_size = 5;
    o.timestamps = 0;
    o.temperatures = attn__wtemperatures;
    o.n_temperatures = 6;
    o.best_of = 5;
    o.no_speech_threshold = 0.6f;
    o.log_prob_threshold = -1.0f;
    o.compression_ratio_threshold = 2.4f;
    o.seed = 0;
    o.condition_on_previous_text = 1;
    return o;
}

/* the previous window's text tokens a decoding is conditioned on (faster-whisper's
 * condition_on_previous_text): n = 0 for none */
typedef struct {
    const int32_t *ids;
    int64_t n;
} attn__wprev;

/* the prompt, as faster-whisper's get_prompt builds it: [<|startofprev|> previous tokens]
 * <|startoftranscript|> [<|notimestamps|>] for rows [0, N); all but its last token prime the
 * cache (CTranslate2's forward_prompt) and the last is the first decoding input (*start). The
 * no-speech probability is that of the logits at <|startoftranscript|>: taken here when it is
 * fed with the prompt; when it is the start token after a previous text (timestamps), it is fed
 * here once for its logits, the cache is rewound by that position, and the first decoding step
 * feeds it again (the same computation); with no prompt at all, the first step takes it
 * (attn__wstep). */
static int attn__wprompt(attn__wstate *s, int64_t N, int timestamps, const attn__wprev *prev, int32_t *start) {
    attn_whisper *m = s->m;
    s->pos0 = 0;
    attn_kv_clear(s->d.kv);
    s->no_speech = 0.0f;
    s->timestamps = timestamps;
    const int64_t np = prev ? prev->n : 0;
    int32_t sop = np > 0 && m->tok ? attn_bpe_token_to_id(m->tok, "<|startofprev|>") : -1;
    const int64_t P = (sop >= 0 ? 1 + np : 0) + 1 + (timestamps ? 0 : 1);
    *start = timestamps ? m->cfg.sot : m->cfg.no_timestamps;
    if (P == 1) return ATTN_OK;
    if (P > m->cfg.n_text_ctx)
        return attn_set_error(ATTN_E_RANGE, "whisper: a prompt of %lld tokens is longer than the %lld text positions", (long long)P,
                              (long long)m->cfg.n_text_ctx);
    const int64_t V = m->cfg.vocab_size;
    float *logits = (float *)malloc(sizeof(float) * (size_t)(N * V));
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)N);
    int rc = logits && ids ? ATTN_OK : attn_set_error(ATTN_E_NOMEM, "out of memory");
    /* fed: every prompt token but the last; with timestamps after a previous text, also
     * <|startoftranscript|> (for its logits; the first decoding step feeds it again) */
    const int64_t fed = timestamps ? P : P - 1;
    for (int64_t i = 0; rc == 0 && i < fed; i++) {
        int32_t tok = sop >= 0 ? (i == 0 ? sop : i <= np ? prev->ids[i - 1] : m->cfg.sot) : m->cfg.sot;
        for (int64_t r = 0; r < N; r++) ids[r] = tok;
        const int is_sot = tok == m->cfg.sot && i == P - (timestamps ? 1 : 2);
        rc = attn__wforward(s, is_sot ? logits : NULL, ids, N, i);
        if (rc == 0 && is_sot) s->no_speech = attn__wno_speech(m, logits);
    }
    for (int64_t r = 0; rc == 0 && timestamps && r < N; r++) rc = attn_kv_set_len(s->d.kv, r, P - 1);
    free(logits);
    free(ids);
    s->pos0 = P - 1;
    return rc;
}

static int64_t attn__wmax_steps(const attn__wstate *s) {
    const int64_t T = s->m->cfg.n_text_ctx;
    return T / 2 < T - s->pos0 ? T / 2 : T - s->pos0;
}

/* beam search (greedy at beam 1) of CTranslate2's Whisper.generate */
static int attn__wbeam(attn__wstate *s, int64_t beam, int timestamps, const attn__wprev *prev, int32_t **ids, int64_t *n, float *score) {
    attn_whisper *m = s->m;
    int32_t start;
    attn_decode_result res;
    memset(&res, 0, sizeof res);
    int rc = attn__wprompt(s, 1, timestamps, prev, &start);
    if (rc == 0) {
        attn_decode_opts d = attn_decode_opts_default();
        d.beam_size = beam;
        d.n_best = 1;
        d.max_length = attn__wmax_steps(s);
        d.min_length = 0;
        d.end_ids = &m->cfg.eot;
        d.n_end = 1;
        d.suppress = m->suppress;
        d.n_suppress = m->n_suppress;
        d.suppress_begin = m->suppress_begin;
        d.n_suppress_begin = m->n_suppress_begin;
        d.length_excludes_end = 1; /* CTranslate2's Whisper scores: sum / n_tokens */
        if (timestamps) {
            d.hook = attn__wtimestamps;
            d.hook_ctx = s;
        }
        attn_decoder_iface dec = {s, m->cfg.vocab_size, 0, attn__wstep, attn__wreorder};
        rc = attn_decode(&res, &dec, &start, 1, &d);
    }
    if (rc == 0 && res.n > 0) {
        *ids = res.hyps[0].ids;
        *n = res.hyps[0].len;
        res.hyps[0].ids = NULL;
        if (score) *score = res.hyps[0].score;
    }
    attn_decode_results_free(&res, 1);
    return rc;
}

/* best_of sequences sampled at temperature t > 0, as CTranslate2's sampling (beam 1,
 * num_hypotheses best_of, sampling_topk 0): the same suppression and timestamp rules, tokens
 * drawn from softmax(logits / t), scored by their log-probability at temperature 1; the
 * sequence with the best length-normalised score is kept */
static int attn__wsample(attn__wstate *s, int64_t N, int timestamps, const attn__wprev *prev, float t, uint64_t seed, int32_t **ids, int64_t *n,
                         float *score) {
    attn_whisper *m = s->m;
    const int64_t V = m->cfg.vocab_size;
    int32_t start;
    int rc = attn__wprompt(s, N, timestamps, prev, &start);
    if (rc < 0) return rc;
    const int64_t S = attn__wmax_steps(s);
    float *logits = (float *)malloc(sizeof(float) * (size_t)(N * V));
    float *lp = (float *)malloc(sizeof(float) * (size_t)V);
    int32_t *seq = (int32_t *)calloc((size_t)(N * S), sizeof(int32_t));
    const int32_t **seqp = (const int32_t **)malloc(sizeof(int32_t *) * (size_t)N);
    int32_t *cur = (int32_t *)malloc(sizeof(int32_t) * (size_t)N);
    int64_t *len = (int64_t *)calloc((size_t)N, sizeof(int64_t)), *item = (int64_t *)calloc((size_t)N, sizeof(int64_t));
    int *ended = (int *)calloc((size_t)N, sizeof(int));
    float *sum = (float *)calloc((size_t)N, sizeof(float));
    attn_sampler *smp = NULL;
    if (!logits || !lp || !seq || !seqp || !cur || !len || !item || !ended || !sum) rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
    if (rc == 0) {
        attn_sampler_params sp = attn_sampler_params_default();
        sp.temperature = t;
        sp.top_k = 0;
        sp.top_p = 1.0f;
        sp.min_p = 0.0f;
        sp.repetition_penalty = 1.0f;
        sp.seed = seed;
        rc = attn_sampler_create(&smp, &sp, V);
    }
    for (int64_t r = 0; rc == 0 && r < N; r++) {
        cur[r] = start;
        seqp[r] = seq + r * S;
    }
    for (int64_t step = 0; rc == 0 && step < S; step++) {
        if ((rc = attn__wforward(s, logits, cur, N, s->pos0 + step)) < 0) break;
        if (step == 0 && s->pos0 == 0) s->no_speech = attn__wno_speech(m, logits);
        for (int64_t r = 0; r < N; r++) {
            float *l = logits + r * V;
            for (int64_t i = 0; i < m->n_suppress; i++) l[m->suppress[i]] = -INFINITY;
            if (step == 0)
                for (int64_t i = 0; i < m->n_suppress_begin; i++) l[m->suppress_begin[i]] = -INFINITY;
        }
        if (timestamps && (rc = attn__wtimestamps(s, logits, N, V, step, seqp, step, item)) < 0) break;
        int live = 0;
        for (int64_t r = 0; r < N && rc == 0; r++) {
            int32_t tok = m->cfg.eot;
            if (!ended[r]) {
                memcpy(lp, logits + r * V, sizeof(float) * (size_t)V);
                attn_log_softmax_rows(lp, 1, V);
                if ((rc = attn_sampler_sample(smp, &tok, logits + r * V, NULL, 0)) < 0) break;
                sum[r] += lp[tok];
                if (tok == m->cfg.eot) ended[r] = 1;
                else {
                    len[r]++;
                    live = 1;
                }
            }
            seq[r * S + step] = tok; /* finished rows repeat the end token (never returned) */
            cur[r] = tok;
        }
        if (!live) break;
    }
    if (rc == 0) {
        int64_t best = -1;
        float best_score = 0;
        for (int64_t r = 0; r < N; r++) {
            /* length-normalised as the beam search's (end token not counted) */
            float sc = sum[r] / (float)(len[r] > 0 ? len[r] : 1);
            if (best < 0 || sc > best_score) {
                best = r;
                best_score = sc;
            }
        }
        *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(len[best] > 0 ? len[best] : 1));
        if (!*ids) rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
        else {
            if (len[best]) memcpy(*ids, seq + best * S, sizeof(int32_t) * (size_t)len[best]);
            *n = len[best];
            if (score) *score = best_score;
        }
    }
    attn_sampler_free(smp);
    free(logits);
    free(lp);
    free(seq);
    free(seqp);
    free(cur);
    free(len);
    free(item);
    free(ended);
    free(sum);
    return rc;
}

int attn_whisper_generate(attn_whisper *m, int32_t **ids, int64_t *n, float *score, const float *mel, const attn_whisper_opts *o) {
    if (!m || !ids || !n || !mel || !o) return attn_set_error(ATTN_E_INVALID, "whisper_generate: NULL argument");
    *ids = NULL;
    *n = 0;
    if (o->beam_size < 1 || o->beam_size > 64) return attn_set_error(ATTN_E_INVALID, "the beam size must be between 1 and 64 (got %lld)", (long long)o->beam_size);
    attn__wstate s;
    int rc = attn__wprepare(&s, m, o->beam_size, mel);
    if (rc == 0) rc = attn__wbeam(&s, o->beam_size, o->timestamps, NULL, ids, n, score);
    attn__wstate_free(&s);
    return rc;
}

/* ---------------------------------------------------------------- transcription rules */

/* faster-whisper's get_compression_ratio: UTF-8 bytes of the stripped text / bytes of
 * zlib.compress(text) (level -1 = 6); 0 for an empty text. *ratio = -1 on a zlib failure. */
static int attn__wcompression(float *ratio, const char *text) {
    const char *a = text;
    while (*a == ' ' || *a == '\t' || *a == '\n' || *a == '\r' || *a == '\v' || *a == '\f') a++;
    size_t len = strlen(a);
    while (len > 0 && (a[len - 1] == ' ' || a[len - 1] == '\t' || a[len - 1] == '\n' || a[len - 1] == '\r' || a[len - 1] == '\v' || a[len - 1] == '\f'))
        len--;
    uLongf cap = compressBound((uLong)len);
    Bytef *buf = (Bytef *)malloc(cap ? cap : 1);
    if (!buf) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    int z = compress2(buf, &cap, (const Bytef *)a, (uLong)len, Z_DEFAULT_COMPRESSION);
    free(buf);
    if (z != Z_OK) return attn_set_error(ATTN_E_NOMEM, "zlib compress2 failed (%d)", z);
    *ratio = cap > 0 ? (float)((double)len / (double)cap) : 0.0f;
    return ATTN_OK;
}

void attn_whisper_decoding_free(attn_whisper_decoding *d) {
    if (!d) return;
    free(d->ids);
    memset(d, 0, sizeof *d);
}

/* one decoding at temperature t: ids, score and the statistics */
static int attn__wtry(attn__wstate *s, attn_whisper_decoding *d, const attn_whisper_opts *o, const attn__wprev *prev, float t, uint64_t seed) {
    memset(d, 0, sizeof *d);
    int rc = t > 0.0f ? attn__wsample(s, o->best_of, o->timestamps, prev, t, seed, &d->ids, &d->n, &d->score)
                      : attn__wbeam(s, o->beam_size, o->timestamps, prev, &d->ids, &d->n, &d->score);
    if (rc < 0) {
        attn_whisper_decoding_free(d);
        return rc;
    }
    d->temperature = t;
    d->no_speech_prob = s->no_speech;
    /* faster-whisper: cum_logprob = score * n ** length_penalty; avg = cum / (n + 1) */
    d->avg_logprob = d->n > 0 ? (float)((double)d->score * (double)d->n / (double)(d->n + 1)) : 0.0f;
    char *text = attn_whisper_text(s->m, d->ids, d->n);
    if (!text) rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
    else rc = attn__wcompression(&d->compression_ratio, text);
    free(text);
    if (rc < 0) attn_whisper_decoding_free(d);
    return rc;
}

/* attn_whisper_decode conditioned on prev (NULL: none) */
static int attn__wdecode(attn_whisper *m, attn_whisper_decoding *out, const float *mel, const attn_whisper_opts *o, const attn__wprev *prev) {
    memset(out, 0, sizeof *out);
    ATTN_TRY(attn__wcheck_opts(o));
    const int rules = o->n_temperatures > 0;
    static const float zero = 0.0f;
    const float *temps = rules ? o->temperatures : &zero;
    const int64_t nt = rules ? o->n_temperatures : 1;
    int64_t cap = o->beam_size;
    for (int64_t i = 0; i < nt; i++)
        if (temps[i] > 0.0f && o->best_of > cap) cap = o->best_of;
    attn__wstate s;
    int rc = attn__wprepare(&s, m, cap, mel);
    /* below: the best (highest avg_logprob) decoding under the compression threshold so far;
     * any: the best of all */
    attn_whisper_decoding cur, below, any;
    memset(&cur, 0, sizeof cur);
    memset(&below, 0, sizeof below);
    memset(&any, 0, sizeof any);
    int have_below = 0, have_any = 0, done = 0;
    float last_t = 0.0f;
    for (int64_t i = 0; rc == 0 && i < nt && !done; i++) {
        last_t = temps[i];
        if ((rc = attn__wtry(&s, &cur, o, prev, temps[i], o->seed + ((uint64_t)i << 32))) < 0) break;
        if (!rules) {
            done = 1;
            break;
        }
        int fallback = 0, under_cr = 1;
        if (cur.compression_ratio > o->compression_ratio_threshold) {
            fallback = 1; /* too repetitive */
            under_cr = 0;
        }
        if (cur.avg_logprob < o->log_prob_threshold) fallback = 1;
        if (cur.no_speech_prob > o->no_speech_threshold && cur.avg_logprob < o->log_prob_threshold) fallback = 0; /* silence */
        if (!fallback) {
            done = 1;
            break;
        }
        /* keep a copy of the candidates for the case where every temperature fails */
        attn_whisper_decoding *keep[2] = {under_cr ? &below : NULL, &any};
        int *have[2] = {&have_below, &have_any};
        for (int k = 0; k < 2 && rc == 0; k++) {
            if (!keep[k] || (*have[k] && !(cur.avg_logprob > keep[k]->avg_logprob))) continue;
            attn_whisper_decoding c = cur;
            c.ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(cur.n > 0 ? cur.n : 1));
            if (!c.ids) {
                rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
                break;
            }
            if (cur.n) memcpy(c.ids, cur.ids, sizeof(int32_t) * (size_t)cur.n);
            attn_whisper_decoding_free(keep[k]);
            *keep[k] = c;
            *have[k] = 1;
        }
        attn_whisper_decoding_free(&cur);
    }
    if (rc == 0) {
        if (done) {
            *out = cur;
            memset(&cur, 0, sizeof cur);
        } else {
            attn_whisper_decoding *pick = have_below ? &below : &any;
            *out = *pick;
            memset(pick, 0, sizeof *pick);
            out->temperature = last_t; /* faster-whisper reports the last temperature tried */
        }
        out->no_speech = rules && m->cfg.no_speech >= 0 && out->no_speech_prob > o->no_speech_threshold && !(out->avg_logprob > o->log_prob_threshold);
    }
    attn_whisper_decoding_free(&cur);
    attn_whisper_decoding_free(&below);
    attn_whisper_decoding_free(&any);
    attn__wstate_free(&s);
    return rc;
}

int attn_whisper_decode(attn_whisper *m, attn_whisper_decoding *out, const float *mel, const attn_whisper_opts *o) {
    if (!m || !out || !mel || !o) return attn_set_error(ATTN_E_INVALID, "whisper_decode: NULL argument");
    return attn__wdecode(m, out, mel, o, NULL);
}

/* ---------------------------------------------------------------- transcription */

void attn_whisper_result_free(attn_whisper_result *r) {
    if (!r) return;
    for (int64_t i = 0; i < r->n_segments; i++) free(r->segments[i].text);
    free(r->segments);
    free(r->ids);
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* a segment, unless its text is blank or it has no duration (faster-whisper drops those) */
static int attn__add_segment(attn_whisper_result *r, double t0, double t1, char *text, const attn_whisper_decoding *d) {
    if (!text) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    const char *p = text;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\v' || *p == '\f') p++;
    if (!*p || t0 == t1) {
        free(text);
        return ATTN_OK;
    }
    attn_whisper_segment *g = (attn_whisper_segment *)realloc(r->segments, sizeof *g * (size_t)(r->n_segments + 1));
    if (!g) {
        free(text);
        return attn_set_error(ATTN_E_NOMEM, "out of memory");
    }
    r->segments = g;
    g[r->n_segments].start = t0;
    g[r->n_segments].end = t1;
    g[r->n_segments].text = text;
    g[r->n_segments].avg_logprob = d->avg_logprob;
    g[r->n_segments].no_speech_prob = d->no_speech_prob;
    g[r->n_segments].compression_ratio = d->compression_ratio;
    g[r->n_segments].temperature = d->temperature;
    r->n_segments++;
    return ATTN_OK;
}

/* append a segment's tokens to the transcript's (faster-whisper's all_tokens) */
static int attn__wappend(attn_whisper_result *r, const int32_t *ids, int64_t k) {
    int32_t *all = (int32_t *)realloc(r->ids, sizeof(int32_t) * (size_t)(r->n_ids + k + 1));
    if (!all) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    r->ids = all;
    if (k) memcpy(r->ids + r->n_ids, ids, sizeof(int32_t) * (size_t)k);
    r->n_ids += k;
    return ATTN_OK;
}

/* tokens [i, j) of a window as a segment from t0 to t1 (faster-whisper's generate_segments: a
 * segment with a blank text or no duration is dropped and its tokens are not kept) */
static int attn__wsegment(attn_whisper_result *r, attn_whisper *m, const int32_t *ids, int64_t i, int64_t j, double t0, double t1,
                          const attn_whisper_decoding *d) {
    const int64_t n0 = r->n_segments;
    int rc = attn__add_segment(r, t0, t1, attn_whisper_text(m, ids + i, j - i), d);
    if (rc == 0 && r->n_segments > n0) rc = attn__wappend(r, ids + i, j - i);
    return rc;
}

/* the segments of one window and the next seek, as faster-whisper 1.2.1's
 * _split_segments_by_timestamps: with consecutive timestamp tokens, one segment per slice
 * ending at each such pair (from its first timestamp to its last); the text after the last
 * pair is dropped and seek moves to the last timestamp, unless the tokens end with a single
 * timestamp (then seek moves by the whole window); otherwise one segment from the window's
 * start to its last timestamp (the window's length when there is none or it is <|0.00|>) */
static int attn__wsplit(attn_whisper_result *r, attn_whisper *m, const attn_whisper_decoding *d, int64_t *seek, int64_t size) {
    const int32_t *ids = d->ids, tb = m->cfg.timestamp_begin;
    const int64_t k = d->n;
    const double t0 = (double)*seek * ATTN_WHISPER_HOP / ATTN_WHISPER_RATE, prec = 0.02;
    const int single_end = k >= 2 && ids[k - 2] < tb && ids[k - 1] >= tb;
    int64_t last = 0, npairs = 0;
    int rc = ATTN_OK;
    for (int64_t i = 1; i < k && rc == 0; i++)
        if (ids[i] >= tb && ids[i - 1] >= tb) {
            rc = attn__wsegment(r, m, ids, last, i, t0 + (ids[last] - tb) * prec, t0 + (ids[i - 1] - tb) * prec, d);
            last = i;
            npairs++;
        }
    if (rc < 0) return rc;
    if (npairs > 0) {
        if (single_end) {
            rc = attn__wsegment(r, m, ids, last, k, t0 + (ids[last] - tb) * prec, t0 + (ids[k - 1] - tb) * prec, d);
            *seek += size;
        } else {
            const int64_t step = (int64_t)(ids[last - 1] - tb) * 2; /* 2 frames per timestamp step */
            *seek += step > 0 ? step : size; /* never stay in place (<|0.00|><|0.00|>, which the rules exclude) */
        }
        return rc;
    }
    double dur = (double)size * ATTN_WHISPER_HOP / ATTN_WHISPER_RATE;
    for (int64_t i = k - 1; i >= 0; i--)
        if (ids[i] >= tb) {
            if (ids[i] != tb) dur = (ids[i] - tb) * prec;
            break;
        }
    rc = attn__wsegment(r, m, ids, 0, k, t0, t0 + dur, d);
    *seek += size;
    return rc;
}

int attn_whisper_transcribe(attn_whisper *m, attn_whisper_result *out, const float *samples, int64_t n, const attn_whisper_opts *o) {
    return attn_whisper_transcribe_progress(m, out, samples, n, o, NULL, NULL);
}

int attn_whisper_transcribe_progress(attn_whisper *m, attn_whisper_result *out, const float *samples, int64_t n,
                                     const attn_whisper_opts *o, void (*progress)(int64_t done, int64_t total, void *user),
                                     void *user) {
    if (!m || !out || !o || !samples) return attn_set_error(ATTN_E_INVALID, "whisper_transcribe: NULL argument");
    memset(out, 0, sizeof *out);
    if (n < 0) return attn_set_error(ATTN_E_INVALID, "whisper_transcribe: %lld samples", (long long)n);
    /* no samples at all is taken for a mistake (a failed decode, a wrong file), not for silence
     * (faster-whisper returns no segments): the CLI and Python report it the same way */
    if (n == 0) return attn_set_error(ATTN_E_INVALID, "the audio is empty (no samples)");
    ATTN_TRY(attn__wcheck_opts(o));
    float *feat = NULL, *win = NULL;
    int64_t frames = 0;
    ATTN_TRY(attn_whisper_log_mel(&feat, &frames, samples, n));
    /* the last frame is dropped, as faster-whisper does: audio shorter than one hop (160
     * samples) has no content frame and gives no window, no segment */
    const int64_t content = frames - 1, W = ATTN_WHISPER_FRAMES, C = ATTN_WHISPER_N_MELS;
    win = (float *)malloc(sizeof(float) * (size_t)(C * W));
    int rc = win ? ATTN_OK : attn_set_error(ATTN_E_NOMEM, "out of memory");
    attn_whisper_opts wo = *o;
    /* faster-whisper's previous_tokens: the kept tokens since the last prompt reset, at most
     * n_text_ctx / 2 - 1 (223) of them */
    const int64_t max_prev = m->cfg.n_text_ctx / 2 - 1;
    int64_t reset_since = 0;
    for (int64_t seek = 0, w = 0; rc == 0 && seek < content; w++) {
        int64_t len = content - seek < W ? content - seek : W;
        for (int64_t c = 0; c < C; c++)
            for (int64_t t = 0; t < W; t++) win[c * W + t] = t < len ? feat[c * frames + seek + t] : 0.0f;
        attn_whisper_decoding d;
        wo.seed = o->seed + (uint64_t)w;
        attn__wprev prev = {NULL, 0};
        if (o->condition_on_previous_text && out->n_ids > reset_since) {
            prev.n = out->n_ids - reset_since < max_prev ? out->n_ids - reset_since : max_prev;
            prev.ids = out->ids + out->n_ids - prev.n;
        }
        rc = attn__wdecode(m, &d, win, &wo, &prev);
        if (rc < 0) break;
        if (progress) progress(seek + len, content, user);
        if (d.no_speech) { /* faster-whisper: "No speech threshold is met": skip the window */
            attn_whisper_decoding_free(&d);
            seek += len;
            continue;
        }
        rc = attn__wsplit(out, m, &d, &seek, len);
        /* faster-whisper's prompt_reset_on_temperature (0.5) */
        if (!o->condition_on_previous_text || d.temperature > 0.5f) reset_since = out->n_ids;
        attn_whisper_decoding_free(&d);
    }
    if (rc == 0) {
        out->text = attn_whisper_text(m, out->ids, out->n_ids);
        if (!out->text) rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
    }
    free(feat);
    free(win);
    if (rc < 0) attn_whisper_result_free(out);
    return rc;
}
