/*
 * attn_variants.h — efficient attention variants beside exact attention (attn_attention.h):
 *
 *   linear      Katharopoulos et al. 2020, "Transformers are RNNs" — kernel feature map
 *               φ(x) = elu(x) + 1, out_i = φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ / φ(q_i)ᵀ Σ_j φ(k_j).
 *   performer   Choromanski et al. 2021, "Rethinking Attention with Performers" — FAVOR+:
 *               positive orthogonal random features approximating softmax attention.
 *   sliding     exact softmax over a causal sliding window of W keys (Mistral-style local
 *               attention; the same window rule as attn_sdpa_params.window).
 *   longformer  Beltagy et al. 2020 — symmetric window |i - j| <= w plus G global tokens.
 *   bigbird     Zaheer et al. 2020 — block-sparse: sliding, global and random blocks.
 *
 * Shapes and dtypes are those of attn_sdpa (PyTorch order, float32, any strides):
 *   q        [B, H,   Lq, D]
 *   k        [B, Hkv, Lk, D]     H % Hkv == 0 (grouped-query attention: query head h reads
 *   v        [B, Hkv, Lk, Dv]    kv head h / (H / Hkv))
 *   out      [B, H,   Lq, Dv]    (written)
 *   weights  [B, H,   Lq, Lk]    optional (written when not NULL): the dense attention weights
 *                                 the variant uses, zero outside its pattern. For linear and
 *                                 performer these are the implied weights
 *                                 φ(q_i)ᵀφ(k_j) / Σ_j' φ(q_i)ᵀφ(k_j') (costs O(Lq·Lk)).
 *
 * Positions. As in attn_sdpa, query i sits at key position i + Lk - Lq (bottom-right
 * alignment), so Lq == Lk is self-attention and Lq < Lk a continuation over a cache.
 *
 * Key padding. key_lengths ([B], right padding) and key_padding_mask (bool [B, Lk], true =
 * real token; any padding, e.g. left padding) remove keys from the numerator and the
 * normaliser of every variant. For the position-dependent patterns the real tokens of batch
 * row b form the span [s_b, e_b) from its first to its last real key; the pattern is laid out
 * on positions relative to s_b (so "the first G tokens" of longformer are the first G real
 * tokens, and bigbird's blocks and random draws are those of the unpadded sequence of length
 * e_b - s_b). Hence a left-padded batch row gives, at its real positions, the outputs of the
 * unpadded sequence. Keys outside the span, or false in the mask, are never attended.
 *
 * A query row that sees no key gets out = 0 and weights = 0 (never NaN), as in attn_sdpa.
 *
 * Errors follow attn_core.h: a negative attn_status and a message in attn_last_error().
 */
#ifndef ATTN_VARIANTS_H
#define ATTN_VARIANTS_H

#include "attn_core.h"
#include "attn_attention.h"
#include "attn_layers.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ATTN_VARIANT_EXACT = 0,      /* attn_sdpa (exact softmax attention; a passthrough) */
    ATTN_VARIANT_LINEAR = 1,     /* Katharopoulos et al. 2020 */
    ATTN_VARIANT_PERFORMER = 2,  /* Choromanski et al. 2021 (FAVOR+) */
    ATTN_VARIANT_SLIDING = 3,    /* causal sliding window of W keys */
    ATTN_VARIANT_LONGFORMER = 4, /* Beltagy et al. 2020 */
    ATTN_VARIANT_BIGBIRD = 5     /* Zaheer et al. 2020 */
} attn_variant_kind;

/* Parameters of a variant. Fields a variant does not use are ignored (see each field). */
typedef struct {
    attn_variant_kind kind;
    /* is_causal: key j visible to query i only if j <= i + Lk - Lq. linear and performer
     * then run as a recurrence / prefix sum; for longformer and bigbird the causal bound is
     * combined (AND) with the pattern; sliding is always causal. */
    int is_causal;
    /* sliding:    W >= 1 keys ending at the query's position: i+Lk-Lq-W < j <= i+Lk-Lq.
     * longformer: one-sided width w >= 1: |pos_i - j| <= w. */
    int64_t window;
    int64_t n_global;      /* longformer: G >= 0 (G <= Lk): the first G tokens attend to all keys
                              and are attended by all queries */
    int64_t block;         /* bigbird: block size b >= 1; must divide Lk */
    int64_t global_blocks; /* bigbird: g >= 0 (g <= Lk / b) first blocks that are global */
    int64_t random_blocks; /* bigbird: r >= 0 random key blocks per query block row */
    int64_t features;      /* performer: M >= 1 random features */
    uint64_t seed;         /* performer (random projection) and bigbird (random blocks) */
    /* mask: NULL, or bool / float32 broadcastable to [B, H, Lq, Lk] with attn_sdpa's rules
     * (bool false or float <= -FLT_MAX masks; other float values are additive biases).
     * Exact and the sparse variants (sliding, longformer, bigbird) only; linear and
     * performer reject it (ATTN_E_UNSUPPORTED): use key padding and is_causal there. */
    const attn_tensor *mask;
    const attn_tensor *key_padding_mask; /* NULL, or bool [B, Lk] (true = real key), any strides */
    const int64_t *key_lengths;          /* NULL, or [B] counts in 0..Lk (right padding) */
    /* has_scale / scale: softmax scale (default 1/sqrt(D)) for exact, sparse variants and
     * performer (there it must be > 0). linear has no scale: has_scale is an error there. */
    int has_scale;
    float scale;
    int n_threads; /* <= 0: attn_get_num_threads() */
} attn_variant_params;

/* attn_variant_params_default: defaults for `kind`: not causal, no masks, default scale and
 * threads, seed 0, and the recommended sizes window = 256 (sliding) or 128 (longformer),
 * n_global = 1, block = 64, global_blocks = 1, random_blocks = 3, features = 256. */
attn_variant_params attn_variant_params_default(attn_variant_kind kind);

/* attn_variant_name: "exact", "linear", "performer", "sliding", "longformer", "bigbird", or
 * "unknown" for a value outside the enum. Never NULL. */
const char *attn_variant_name(attn_variant_kind kind);

/* attn_variant_from_name: *kind = the variant called `name` (the names of attn_variant_name,
 * ASCII case-insensitive). Errors: ATTN_E_INVALID (NULL argument or unknown name; the
 * message lists the valid names). */
int attn_variant_from_name(const char *name, attn_variant_kind *kind);

/* attn_variant_validate: the checks that do not depend on tensor shapes (kind known,
 * window >= 1 for sliding / longformer, n_global >= 0, block >= 1, global_blocks >= 0,
 * random_blocks >= 0, features >= 1, finite scale (> 0 for performer), no scale for linear,
 * no general mask for linear / performer).
 * Errors: ATTN_E_INVALID (message names the variant and the parameter), ATTN_E_UNSUPPORTED. */
int attn_variant_validate(const attn_variant_params *p);

/* attn_variant_check: validate tensors and parameters as attn_variant_attention does, without
 * computing: everything attn_sdpa_check checks (shapes, dtypes, finite inputs, key_lengths,
 * mask), attn_variant_validate, the key_padding_mask ([B, Lk] bool), and the shape-dependent
 * rules: longformer n_global <= Lk; bigbird Lk % block == 0 and global_blocks <= Lk / block.
 * On success fills the sizes (any pointer may be NULL). Errors: as attn_sdpa_check,
 * ATTN_E_INVALID / ATTN_E_SHAPE / ATTN_E_DTYPE for the rules above. */
int attn_variant_check(const attn_tensor *out, const attn_tensor *weights, const attn_tensor *q,
                       const attn_tensor *k, const attn_tensor *v, const attn_variant_params *p,
                       int64_t *B, int64_t *H, int64_t *Hkv, int64_t *Lq, int64_t *Lk, int64_t *D,
                       int64_t *Dv);

/* attn_variant_attention: out (and optionally weights) for the variant p->kind; shapes and
 * masks as described at the top of this file.
 *   exact:      attn_sdpa (key_padding_mask becomes a [B, 1, 1, Lk] bool mask; it cannot be
 *               combined with p->mask there: ATTN_E_UNSUPPORTED).
 *   linear:     φ(x) = elu(x) + 1 on raw q and k (no 1/sqrt(D)). Non-causal: S = Σ φ(k_j)v_jᵀ
 *               and z = Σ φ(k_j) over the real keys, then out_i = φ(q_i)ᵀS / φ(q_i)ᵀz:
 *               O((Lq + Lk)·D·Dv) time. Causal: the running state (S, z) is updated per key
 *               position (float64) and read out at each query position (attn_linear_state):
 *               O(Lk·D·Dv) time, O(D·Dv) state. Source: Katharopoulos et al. 2020, eq. 4-9.
 *   performer:  softmax attention with scale s ≈ φ(q_i)ᵀ Σ φ(k_j)v_jᵀ / φ(q_i)ᵀ Σ φ(k_j) with
 *               φ(x) = exp(ω_mᵀx' - |x'|²/2 - c) / sqrt(M), x' = sqrt(s)·x, m = 1..M, ω from
 *               attn_performer_projection(M, D, seed) (shared by all heads); c is a per-query
 *               row max, and one max over all real keys of a (batch, kv head), so that exp
 *               never overflows (the constants cancel in the ratio). Causal via prefix sums
 *               (float64). O((Lq + Lk)·M·(D + Dv)) time. Choromanski et al. 2021, eq. 5-7 and
 *               Lemma 1 (positive random features, orthogonal ω).
 *   sliding / longformer / bigbird: exact softmax (float32 scores by SGEMM over tiles of
 *               query rows, float64 normaliser) over the pattern only, never an Lq×Lk matrix
 *               (unless weights are asked for): O(Lq·(pattern keys per row)·(D + Dv)) time,
 *               O(tile·(W + tile)) scratch per thread for sliding.
 *               Pattern: see attn_variant_mask.
 * Errors: as attn_variant_check; ATTN_E_SHAPE for performer with D = 0; ATTN_E_NOMEM.
 * Source: the papers above. */
int attn_variant_attention(attn_tensor *out, attn_tensor *weights, const attn_tensor *q,
                           const attn_tensor *k, const attn_tensor *v, const attn_variant_params *p);

/* attn_variant_mask: materialise which keys each query sees under p (pattern, is_causal, key
 * padding, and the keys masked by p->mask) as a bool tensor:
 *   mask  bool [B, H, Lq, Lk] (contiguous or not), or [Lq, Lk] (batch row 0, head 0).
 *   B, H: the batch and query-head counts (a 2-D mask needs B >= 1; key_lengths /
 *   key_padding_mask must then have B rows).
 * For batch row b with real span [s, e) (see top; n = e - s), query i at local position
 * i' = i + Lk - Lq - s sees real key j (j' = j - s, 0 <= j' < n) when
 *   exact, linear, performer:  always (then causal / masks apply)
 *   sliding:     i' - W < j' <= i'
 *   longformer:  |i' - j'| <= w, or j' < G, or 0 <= i' < G
 *   bigbird:     with nb = ceil(n / b), qb = floor(i' / b), kb = floor(j' / b):
 *                |qb - kb| <= 1, or kb < g, or 0 <= qb < g, or kb is one of the r random
 *                blocks of row qb (0 <= qb < nb): drawn without replacement from the blocks
 *                outside the other three sets with a generator seeded by (seed, head, qb, nb)
 *                (all of them when fewer than r remain).
 * and, when is_causal, j <= i + Lk - Lq. Useful as the oracle mask for attn_sdpa_reference
 * and to draw the pattern. Errors: ATTN_E_DTYPE (mask not bool), ATTN_E_SHAPE, those of
 * attn_variant_validate and the shape rules of attn_variant_check. */
int attn_variant_mask(attn_tensor *mask, const attn_variant_params *p, int64_t B, int64_t H, int64_t Lq,
                      int64_t Lk);

/* attn_performer_projection: the FAVOR+ random matrix ω [M, D] (row-major floats): ceil(M/D)
 * independent blocks of D rows, each an orthonormal basis obtained by Gram-Schmidt from a
 * D×D standard Gaussian matrix, every row then rescaled to the norm of a fresh D-dimensional
 * standard Gaussian vector (chi(D)-distributed), so each row is marginally N(0, I_D) and rows
 * of one block are exactly orthogonal; the last block keeps its first M - (ceil(M/D)-1)·D
 * rows. Gaussians: xoshiro256** seeded by splitmix64(seed), Box-Muller. Deterministic for a
 * given (M, D, seed) on every platform with IEEE float64 libm.
 * Errors: ATTN_E_INVALID (NULL omega, M <= 0, D <= 0). Source: Choromanski et al. 2021 §2.4. */
int attn_performer_projection(float *omega, int64_t M, int64_t D, uint64_t seed);

/* ---------------------------------------------------------------- linear attention RNN */

/* The recurrent state of causal linear attention (Katharopoulos et al. 2020, §3.4 eq. 18-20):
 *   S [B, Hkv, D, Dv] = Σ_{j <= t} φ(k_j) v_jᵀ and z [B, Hkv, D] = Σ_{j <= t} φ(k_j), float64.
 * Memory O(B·Hkv·D·Dv), independent of the sequence length. */
typedef struct {
    double *S;     /* [batch, n_kv_heads, head_dim, value_dim] */
    double *z;     /* [batch, n_kv_heads, head_dim] */
    int64_t batch, n_heads, n_kv_heads, head_dim, value_dim;
    int64_t steps; /* positions consumed so far */
} attn_linear_state;

/* attn_linear_state_init: zero state for B sequences, H query heads, Hkv kv heads
 * (H % Hkv == 0), key dim D and value dim Dv. Errors: ATTN_E_INVALID (NULL, sizes <= 0,
 * H % Hkv != 0), ATTN_E_NOMEM. */
int attn_linear_state_init(attn_linear_state *s, int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t Dv);

/* attn_linear_state_step: one generation step. Adds key/value of the new position to the
 * state (for batch rows whose key_valid[b] != 0; key_valid NULL = all), then reads out
 *   out[b, h, 0, :] = φ(q)ᵀS / φ(q)ᵀz   (0 when the row has consumed no real key yet).
 *   q [B, H, 1, D], k [B, Hkv, 1, D], v [B, Hkv, 1, Dv], out [B, H, 1, Dv]: float32, any strides.
 * Equal (bit for bit) to the causal batch form of attn_variant_attention at that position.
 * Errors: ATTN_E_INVALID (NULL, uninitialised state), ATTN_E_DTYPE, ATTN_E_SHAPE,
 * ATTN_E_RANGE (non-finite input). */
int attn_linear_state_step(attn_linear_state *s, attn_tensor *out, const attn_tensor *q, const attn_tensor *k,
                           const attn_tensor *v, const unsigned char *key_valid);

/* attn_linear_state_reset: forget every position: S = 0, z = 0, steps = 0 (NULL-safe). */
void attn_linear_state_reset(attn_linear_state *s);

/* attn_linear_state_free: release S and z and zero the struct (NULL-safe; it may be
 * initialised again). */
void attn_linear_state_free(attn_linear_state *s);

/* ---------------------------------------------------------------- layers */

/* attn_variant_encoder_layer: attn_encoder_layer (attn_layers.h) with the self-attention
 * computed by attn_variant_attention(p) instead of attn_sdpa:
 *   out, x [B, L, E] float32 contiguous (out must not alias x); cfg, w as attn_encoder_layer;
 *   attn_weights NULL or [B, H, L, L] (the variant's dense weights);
 *   p: the variant; p->key_lengths / key_padding_mask mark padding (p->mask is not allowed).
 * For bigbird with L % block != 0 the heads are padded internally with masked keys up to a
 * multiple of the block (the pattern is unchanged: it is laid out on the real span).
 * RoPE (cfg->attn.rope_theta > 0) is applied at positions 0..L-1.
 * Errors: those of attn_encoder_layer and attn_variant_attention; ATTN_E_INVALID for p->mask. */
int attn_variant_encoder_layer(attn_tensor *out, attn_tensor *attn_weights, const attn_tensor *x,
                               const attn_layer_config *cfg, const attn_encoder_weights *w,
                               const attn_variant_params *p, attn_arena *arena);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_VARIANTS_H */
