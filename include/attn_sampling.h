/*
 * attn_sampling.h — choosing the next token from a logits vector: logit processors
 * (repetition penalty, banned tokens, temperature, top-k, top-p, min-p), greedy argmax and
 * seeded random sampling. Shared by every decoder (attn_llama, seq2seq models).
 *
 * logits: float32 [V] (one step, one sequence), V = vocabulary size. Processors work in place.
 * Order used by attn_sampler_sample (the order of Hugging Face transformers' generate()):
 *   1. repetition penalty over the previous tokens (Keskar et al. 2019, CTRL §4.1: a positive
 *      logit is divided by the penalty, a negative one multiplied; each distinct id once);
 *   2. banned ids -> -inf (before any softmax, so they never receive probability);
 *   3. temperature == 0: greedy argmax (lowest id wins a tie) — steps 4-7 are skipped;
 *   4. logits / temperature;
 *   5. top-k: keep the k largest (ties at the k-th value kept as well);
 *   6. softmax; top-p (nucleus, Holtzman et al. 2020): keep the smallest prefix of the
 *      descending-probability list whose mass reaches p (at least one token);
 *   7. min-p (Nguyen et al. 2024): drop tokens with probability < min_p · max probability;
 *   8. draw from the renormalised distribution with the sampler's RNG (xoshiro256** seeded by
 *      splitmix64 from `seed`; the same seed gives the same tokens on every machine).
 * NaN in the logits is an error (ATTN_E_RANGE), never silently sampled.
 */
#ifndef ATTN_SAMPLING_H
#define ATTN_SAMPLING_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float temperature;        /* 0 = greedy; > 0 scales the logits; negative is invalid */
    int32_t top_k;            /* 0 = off; > 0 keep the k most likely */
    float top_p;              /* in (0, 1]; 1 = off */
    float min_p;              /* in [0, 1); 0 = off */
    float repetition_penalty; /* >= 1 (1 = off); applied over the last repeat_last_n ids */
    int64_t repeat_last_n;    /* window of previous tokens for the penalty (<= 0: all) */
    uint64_t seed;            /* RNG seed */
} attn_sampler_params;

/* attn_sampler_params_default: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, penalty 1
 * (off), repeat_last_n 64, seed 0. */
attn_sampler_params attn_sampler_params_default(void);

/* attn_sampler_params_check: ATTN_E_INVALID with a message naming the field for a negative or
 * non-finite temperature, top_k < 0, top_p outside (0, 1], min_p outside [0, 1), a repetition
 * penalty < 1 or non-finite; 0 when valid. */
int attn_sampler_params_check(const attn_sampler_params *p);

typedef struct attn_sampler attn_sampler;

/* attn_sampler_create: a sampler for vocabulary size V (> 0) with the given parameters (copied).
 * Errors: ATTN_E_INVALID (as attn_sampler_params_check, V <= 0, NULL out), ATTN_E_NOMEM. */
int attn_sampler_create(attn_sampler **out, const attn_sampler_params *p, int64_t V);
/* attn_sampler_free: NULL-safe. */
void attn_sampler_free(attn_sampler *s);
/* attn_sampler_ban: never choose token `id` again (e.g. a BOS or padding id).
 * Errors: ATTN_E_RANGE (id outside [0, V)). */
int attn_sampler_ban(attn_sampler *s, int32_t id);
/* attn_sampler_sample: pick the next token. logits [V] float32 is modified in place (processed).
 * history[0..n_history) are the ids so far (prompt + generated), used by the repetition penalty.
 * Errors: ATTN_E_INVALID (NULL), ATTN_E_RANGE (NaN in logits, every token banned or -inf, a
 * history id outside [0, V)). */
int attn_sampler_sample(attn_sampler *s, int32_t *token, float *logits, const int32_t *history, int64_t n_history);

/* ---- the processors, usable on their own (logits [V] float32, in place) ---- */

/* attn_logits_repetition_penalty: CTRL penalty (see above) for each distinct id of ids[0..n).
 * A penalty below 1 rewards repeats (CTranslate2 accepts any penalty > 0; the sampler's
 * parameters still require >= 1). Errors: ATTN_E_RANGE (an id outside [0, V)),
 * ATTN_E_INVALID (penalty <= 0 or not finite). */
int attn_logits_repetition_penalty(float *logits, int64_t V, const int32_t *ids, int64_t n, float penalty);
/* attn_logits_ban: logits[id] = -inf for every ids[i]. Errors: ATTN_E_RANGE. */
int attn_logits_ban(float *logits, int64_t V, const int32_t *ids, int64_t n);
/* attn_logits_argmax: index of the largest logit (lowest index on a tie; NaN never wins);
 * -1 when V <= 0 or every value is NaN. */
int64_t attn_logits_argmax(const float *logits, int64_t V);

/* attn_rng: xoshiro256** state (Blackman & Vigna 2018), seeded by splitmix64. */
typedef struct {
    uint64_t s[4];
} attn_rng;
/* attn_rng_seed: initialise from a 64-bit seed. */
void attn_rng_seed(attn_rng *r, uint64_t seed);
/* attn_rng_next: next 64 random bits. */
uint64_t attn_rng_next(attn_rng *r);
/* attn_rng_uniform: a double in [0, 1) with 53 random bits. */
double attn_rng_uniform(attn_rng *r);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_SAMPLING_H */
