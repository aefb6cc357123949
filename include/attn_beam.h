/*
 * attn_beam.h — greedy and beam-search decoding for autoregressive decoders (encoder-decoder
 * translation, Whisper), independent of the model: the model is reached through a step
 * callback that turns the next token of each live row into logits.
 *
 * Semantics follow CTranslate2 4.x's decoding (src/decoding.cc, src/decoding_utils.cc), so
 * that the same model gives the same hypotheses and scores:
 *   - scores are sums of log-softmax probabilities of the generated tokens (the end token
 *     included, prefix tokens excluded), divided by a length penalty lp(len) when the
 *     hypothesis is finalised, len = number of returned tokens plus the end token when it
 *     stopped there (as CTranslate2's Translator counts it):
 *       ATTN_LP_POWER: lp = len^alpha            (CTranslate2's length_penalty)
 *       ATTN_LP_GNMT:  lp = ((5 + len) / 6)^alpha (Wu et al. 2016, GNMT, eq. 14)
 *   - beam search keeps 2 x beam candidates per step; the first step expands only the start
 *     row; a finished candidate is replaced by the next unfinished one; with alpha == 0 the
 *     search stops as soon as the best beam has finished and n_best hypotheses exist, with
 *     alpha != 0 (early stopping that respects the length penalty) it stops once beam_size
 *     hypotheses have finished, since a longer hypothesis can still overtake a shorter one;
 *   - logits processors run before the softmax in this order: minimum length (end tokens
 *     disabled), repetition penalty (CTRL, Keskar et al. 2019: a logit of an already
 *     generated token is divided by P when positive, multiplied by P when negative),
 *     suppressed tokens, tokens suppressed at the first free step, suppressed sequences
 *     (the last token of a sequence whose other tokens end the hypothesis), then the user
 *     hook. A disabled token gets -inf.
 *   - a target prefix is forced token by token (its tokens score 0); at the first free step
 *     only the first beam may produce the end token.
 */
#ifndef ATTN_BEAM_H
#define ATTN_BEAM_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ATTN_LP_POWER = 0, /* score / len^alpha (CTranslate2) */
    ATTN_LP_GNMT = 1   /* score / ((5 + len) / 6)^alpha (GNMT) */
} attn_length_penalty_form;

/* The model side of decoding. Rows are the live sequences (batch items x beams); rows of one
 * batch item are always contiguous and ordered by item. */
typedef struct {
    void *ctx;
    int64_t vocab_size; /* V */
    int64_t attn_width; /* source positions of the returned cross-attention (0: none) */
    /* step: feed ids[n_rows] at target position `step` (0-based, the same for every row) and
     * write logits[n_rows, V] and, when attn != NULL, the cross-attention of each row over the
     * source [n_rows, attn_width] (zeros past the row's source length). Returns 0 or an error. */
    int (*step)(void *ctx, float *logits, float *attn, const int32_t *ids, int64_t n_rows, int64_t step);
    /* reorder: the next rows are old rows src[0..n_new) (repeats allowed: beam expansion);
     * row_item[i] is the batch item of new row i. Returns 0 or an error. */
    int (*reorder)(void *ctx, const int64_t *src, int64_t n_new, const int64_t *row_item);
} attn_decoder_iface;

/* A logits hook (e.g. Whisper's timestamp rules): called after the built-in processors with
 * logits[n_rows, V] (modifiable; set -INFINITY to disable), the generated tokens of each row
 * seqs[n_rows][seq_len] (prefix included, start token excluded), and each row's batch item. */
typedef int (*attn_logits_hook)(void *ctx, float *logits, int64_t n_rows, int64_t vocab, int64_t step,
                                const int32_t *const *seqs, int64_t seq_len, const int64_t *row_item);

typedef struct {
    int64_t beam_size;        /* >= 1; 1 = greedy search */
    int64_t n_best;           /* hypotheses returned per item, 1 .. beam_size */
    float length_penalty;     /* alpha (>= 0) */
    attn_length_penalty_form length_penalty_form;
    int64_t max_length;       /* >= 1: decoding steps (end token included); with return_prefix the
                                 prefix counts, otherwise the steps after the prefix */
    int64_t min_length;       /* 0 .. max_length: end tokens disabled before this many steps
                                 (counted like max_length) */
    const int32_t *prefix;    /* forced first tokens (same for every item) or NULL */
    int64_t prefix_len;
    int return_prefix;        /* 1: hypotheses start with the prefix */
    const int32_t *end_ids;   /* end tokens (>= 1) */
    int64_t n_end;
    int include_end;          /* 1: the end token is part of the returned hypothesis */
    const int32_t *suppress;  /* token ids never generated */
    int64_t n_suppress;
    const int32_t *suppress_begin; /* token ids not generated at the first free step */
    int64_t n_suppress_begin;
    const int32_t *const *suppress_seqs; /* token sequences never generated */
    const int64_t *suppress_seq_lens;
    int64_t n_suppress_seqs;
    float repetition_penalty; /* > 0; 1 = off */
    int return_attention;     /* fill attn_hypothesis.attention */
    attn_logits_hook hook;    /* NULL or a hook (see above) */
    void *hook_ctx;
    int length_excludes_end;  /* 1: an ended hypothesis's length penalty counts only its returned
                                 tokens, not the end token, as CTranslate2 4.8.5's
                                 Whisper.generate scores (checked: its score * n_tokens equals the
                                 log-probability sum with the end token); 0 (default): the end
                                 token counts (its Translator). A length below 1 counts as 1. */
} attn_decode_opts;

/* attn_decode_opts_default: greedy, n_best 1, alpha 1 (power form, CTranslate2's default),
 * max_length 256, min_length 0, repetition penalty 1, no prefix / suppression. end_ids must
 * still be set. (Translation's batching and input-length options: attn_translate_opts,
 * attn_ct2_transformer.h.) */
attn_decode_opts attn_decode_opts_default(void);

typedef struct {
    int32_t *ids;      /* [len] */
    int64_t len;
    float score;       /* normalised by the length penalty */
    int ended;         /* 1 when the hypothesis stopped at an end token */
    float *attention;  /* [len, attn_width] or NULL */
} attn_hypothesis;

typedef struct {
    attn_hypothesis *hyps; /* best first */
    int64_t n;
} attn_decode_result;

/* attn_decode: decode `batch` items whose decoder has been prepared (one row per item;
 * start_ids[b] is the first input of item b). results[batch] are written (free them with
 * attn_decode_results_free). The iface's step/reorder are called with the live rows.
 * Errors: ATTN_E_INVALID (beam_size < 1, n_best out of 1..beam_size, max_length < 1,
 * min_length > max_length, repetition_penalty <= 0, no end token, an id outside 0..V-1),
 * ATTN_E_NOMEM, and any error of the callbacks (results are then freed and zeroed). */
int attn_decode(attn_decode_result *results, const attn_decoder_iface *dec, const int32_t *start_ids, int64_t batch,
                const attn_decode_opts *o);

/* attn_decode_results_free: free n results (NULL-safe) and zero them. */
void attn_decode_results_free(attn_decode_result *results, int64_t n);

/* attn_log_softmax_rows: x[rows, n] <- log_softmax(x) per row (stable: max subtracted; -inf
 * stays -inf; an all -inf row stays -inf). */
void attn_log_softmax_rows(float *x, int64_t rows, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_BEAM_H */
