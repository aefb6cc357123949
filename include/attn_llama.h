/*
 * attn_llama.h — Llama-architecture decoder-only language models (Touvron et al. 2023):
 * token embedding, n_layers pre-norm blocks of
 *     x += Wo · attention(RoPE(Wq·rmsnorm(x)), RoPE(Wk·rmsnorm(x)), Wv·rmsnorm(x))   (causal, GQA)
 *     x += W2 · (silu(W1·rmsnorm(x)) ⊙ W3·rmsnorm(x))                                  (SwiGLU)
 * then rmsnorm and the output matrix (tied to the embedding when the file has no separate one).
 * RMSNorm: x / sqrt(mean(x²) + eps) · w (Zhang & Sennrich 2019). RoPE (Su et al. 2021) rotates
 * adjacent pairs (x[2i], x[2i+1]) of each head by pos · theta^(-2i/head_dim): the llama2.c
 * layout, and GGUF's (its converter permutes Wq / Wk rows for it).
 * Attention runs on attn's fused SDPA kernel (attn_sdpa, bottom-right causal mask) over a KV
 * cache: prefill of n tokens is one causal pass; decode (n = 1) uses its split-K row path.
 * Positions continue after the cache: a state fed tokens one at a time gives the same logits as
 * one pass over all of them (tests/test_llama.c).
 *
 * Files:
 *   - llama2.c checkpoints (Karpathy, run.c "legacy" version 0 format): 7 int32 header
 *     (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative
 *     vocab_size means a separate classifier follows), float32 weights, then the legacy
 *     freq_cis tables (skipped). RoPE theta 10000, eps 1e-5.
 *   - GGUF, architectures "llama" (Llama 1-3, SmolLM2) and "qwen2" (Qwen2 / Qwen2.5:
 *     src/models/qwen2.c): hyper-parameters from the <arch>.* keys (rope.freq_base included),
 *     tensors in any type attn_gguf reads used in place from the mmap'ed file (never expanded to
 *     float32); q / k / v / output biases where the file has them (Qwen2: q, k, v required);
 *     RoPE on adjacent pairs for llama (llama.cpp's converter permutes Wq / Wk for it), on the
 *     two halves of each head for qwen2 (NeoX); RoPE scaling: <arch>.rope.scaling.type none /
 *     linear (factor), and Llama 3.1's frequency-dependent scaling through the rope_freqs.weight
 *     tensor (divisors of theta^(-2i/D), as llama.cpp); other scaling types (YaRN, ...) are
 *     refused. The tokenizer (tokenizer.ggml.*: byte-level BPE "gpt2", pre-tokenizer gpt2,
 *     smollm, llama-bpe or qwen2) and chat template come with it; the end-of-turn token is
 *     tokenizer.ggml.eot_token_id, else <|im_end|> or <|eot_id|>.
 * Memory: the file is mmap'ed read-only; a state holds the KV cache (2 · n_layers · n_kv_heads ·
 * max_len · head_dim float32) and activations for one chunk of at most 256 tokens.
 */
#ifndef ATTN_LLAMA_H
#define ATTN_LLAMA_H

#include "attn_bpe.h"
#include "attn_core.h"
#include "attn_ops.h"
#include "attn_sampling.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t dim;         /* d_model */
    int64_t hidden_dim;  /* feed-forward width */
    int64_t n_layers;
    int64_t n_heads;
    int64_t n_kv_heads;  /* query head h reads KV head h / (n_heads / n_kv_heads) */
    int64_t head_dim;
    int64_t vocab_size;
    int64_t context;     /* largest position + 1 the model was trained for */
    float rope_theta;
    float norm_eps;
    int tied_output;     /* 1: logits use the embedding matrix */
    int32_t bos_id, eos_id, eot_id; /* -1 when absent; eot = end of turn (ChatML <|im_end|>) */
    int add_bos;         /* 1 when prompts start with BOS (llama2.c: yes; SmolLM2 GGUF: no) */
    const char *arch;    /* "llama" or "qwen2" */
    const char *weight_type; /* type of the attention/FFN matrices, e.g. "q4_1", "f32" */
} attn_llama_config;

typedef struct attn_llama attn_llama;

/* attn_llama_load_llama2c: mmap a llama2.c checkpoint. No tokenizer is attached (load it with
 * attn_bpe_load_llama2c). Errors: ATTN_E_IO, ATTN_E_FORMAT (header values out of range, file
 * size not the one the header implies — truncated or with extra bytes), ATTN_E_NOMEM. */
int attn_llama_load_llama2c(attn_llama **out, const char *path);

/* attn_llama_load_gguf: mmap a GGUF file of architecture "llama" or "qwen2". Errors: those of
 * attn_gguf_open, ATTN_E_UNSUPPORTED (another architecture, a tensor type attn_gguf does not
 * read, a tokenizer model other than gpt2, an unknown pre-tokenizer, a RoPE scaling type other
 * than none / linear — each named in the message), ATTN_E_FORMAT (missing keys or tensors — a
 * Qwen2 bias included —, shapes that do not fit the hyper-parameters, a rope_freqs factor <= 0). */
int attn_llama_load_gguf(attn_llama **out, const char *path);

/* attn_llama_free: NULL-safe (unmaps the file). */
void attn_llama_free(attn_llama *m);
/* attn_llama_get_config: the hyper-parameters (owned by m). */
const attn_llama_config *attn_llama_get_config(const attn_llama *m);
/* attn_llama_tokenizer: the tokenizer that came with a GGUF file (owned by m), NULL for llama2.c. */
const attn_bpe *attn_llama_tokenizer(const attn_llama *m);
/* attn_llama_chat_template: tokenizer.chat_template of a GGUF file (owned by m), or NULL. */
const char *attn_llama_chat_template(const attn_llama *m);

typedef struct attn_llama_state attn_llama_state;

/* attn_llama_state_create: a KV cache for up to max_len positions (<= 0 or > context: the
 * model's context). Errors: ATTN_E_INVALID, ATTN_E_NOMEM. */
int attn_llama_state_create(attn_llama_state **out, const attn_llama *m, int64_t max_len);
/* attn_llama_state_free: NULL-safe. */
void attn_llama_state_free(attn_llama_state *s);
/* attn_llama_state_reset: forget every position. */
void attn_llama_state_reset(attn_llama_state *s);
/* attn_llama_state_len: positions in the cache; attn_llama_state_max_len: its capacity. */
int64_t attn_llama_state_len(const attn_llama_state *s);
/* attn_llama_state_max_len: capacity of the cache in positions. */
int64_t attn_llama_state_max_len(const attn_llama_state *s);
/* attn_llama_state_truncate: keep only the first len positions (len <= current length). */
int attn_llama_state_truncate(attn_llama_state *s, int64_t len);

/* attn_llama_forward: run tokens[0..n) at positions len .. len+n-1 of the state (appending their
 * keys and values to the cache) and write logits float32: [n, vocab_size] when all_logits, else
 * [vocab_size] for the last token only. n_threads <= 0: attn_get_num_threads().
 * Errors: ATTN_E_INVALID (NULL, n < 1), ATTN_E_RANGE (a token id outside [0, vocab_size), or
 * len + n > max_len: "context full"; the state is unchanged), ATTN_E_NOMEM, and those of
 * attn_sdpa (a non-finite activation is reported, never returned as logits). */
int attn_llama_forward(attn_llama_state *s, float *logits, const int32_t *tokens, int64_t n, int all_logits, int n_threads);

/* attn_llama_state_model: the model a state was created for (NULL for NULL). */
const attn_llama *attn_llama_state_model(const attn_llama_state *s);

/* ------------------------------------------------------------------ batches of sequences
 * Continuous batching (a server): one KV cache (attn_kv) with a slot per sequence; each forward
 * step runs rows of different slots together through every layer (attn_decoder_block), e.g.
 * the next token of each running sequence and a chunk of a new prompt, so the weights are read
 * once for all of them. A row's result is the one attn_llama_forward gives for its sequence
 * alone up to the weight kernel's summation order: the projections see N rows instead of 1.
 * float32 weights: within 1e-5 on stories260K's logits. GGML blocks (Q8_0, Q4_0, Q4_1): every
 * tile of the block kernels computes a row with the same float operations, so a row's logits
 * are bit-identical to the sequence alone when its prompt was fed in the same pieces
 * (attn_llama_forward's 256-token chunks: the attention of a prompt row depends on its piece;
 * tests/test_llama_batch.c, tests/test_quant_rows.c). */
typedef struct attn_llama_batch attn_llama_batch;

/* attn_llama_batch_create: n_slots sequences (1..4096) of up to max_len positions (<= 0 or >
 * context: the model's context) each, at most max_rows (1..65536) rows per step. Memory: the KV
 * cache (2 · n_layers · n_slots · max_len · n_kv_heads · head_dim float32) and activations
 * [max_rows, dim]. Errors: ATTN_E_INVALID, ATTN_E_NOMEM. */
int attn_llama_batch_create(attn_llama_batch **out, const attn_llama *m, int64_t n_slots, int64_t max_len, int64_t max_rows);
/* attn_llama_batch_free: NULL-safe. */
void attn_llama_batch_free(attn_llama_batch *b);
/* attn_llama_batch_slot_len: positions held by a slot (0 out of range). */
int64_t attn_llama_batch_slot_len(const attn_llama_batch *b, int64_t slot);
/* attn_llama_batch_max_len: the capacity of each slot in positions. */
int64_t attn_llama_batch_max_len(const attn_llama_batch *b);
/* attn_llama_batch_clear_slot: forget a slot's positions (a new sequence may use it).
 * Errors: ATTN_E_INVALID (no such slot). */
int attn_llama_batch_clear_slot(attn_llama_batch *b, int64_t slot);
/* attn_llama_batch_keep_slot: keep only the first n positions a slot holds (0 <= n <= its
 * length): a new sequence that starts with the same n tokens goes on from there (a server's
 * prompt cache: positions are not recomputed). Its next rows give the bits a fresh slot fed the
 * whole prefix would give when every position ran in prompt pieces of more than
 * ATTN_SDPA_ROW_PATH_MAX_LQ (4) rows (the attention's tile path; smaller pieces take its row path,
 * whose sums differ;
 * tests/test_llama_batch.c). Errors: ATTN_E_INVALID (no such slot, n outside [0, length]). */
int attn_llama_batch_keep_slot(attn_llama_batch *b, int64_t slot, int64_t n);
/* attn_llama_batch_forward: one step of n rows (n <= max_rows): row i runs tokens[i] as the next
 * position of sequence slot[i] (the rows of a slot are consecutive and take consecutive
 * positions after what the slot holds: a prompt chunk, or one decode token). Logits float32
 * [n_logits, vocab_size] are written for rows logit_rows[0..n_logits) (e.g. the last row of each
 * slot). n_threads <= 0: attn_get_num_threads(). Errors: ATTN_E_INVALID (NULL, n < 1, a slot out
 * of range, rows of a slot not consecutive, a logit row outside [0, n)), ATTN_E_RANGE (a token
 * id outside the vocabulary; a slot without room for its rows: "context full"; a non-finite
 * logit), ATTN_E_NOMEM; the slots' lengths are unchanged on error. */
int attn_llama_batch_forward(attn_llama_batch *b, const int32_t *tokens, const int64_t *slot, int64_t n, const int64_t *logit_rows,
                             int64_t n_logits, float *logits, int n_threads);

/* ------------------------------------------------------------------ generation
 * Sampling generation with streamed text, as the CLI (attn generate / chat / summarize), the
 * Python package (attn.LLM) and the server use it: one loop, one context-full rule, one way of
 * holding back text (incomplete UTF-8, a possible stop string). */

typedef struct {
    attn_sampler_params sampling; /* attn_sampling.h (temperature 0 = greedy) */
    int64_t max_tokens;           /* >= 0: at most this many generated tokens */
    const char *const *stop;      /* n_stop non-empty stop strings, or NULL: generation ends
                                   * before the first of them, which is not part of the text */
    int64_t n_stop;
    int n_threads;                /* <= 0: attn_get_num_threads() */
    /* NULL, or called as the prompt is read, after each chunk of up to 256 tokens, with
     * (tokens done, prompt tokens, user) (a long prompt: attn summarize's text) */
    void (*progress)(int64_t done, int64_t total, void *user);
    void *progress_user;
} attn_generate_opts;

/* attn_generate_opts_default: attn_sampler_params_default(), max_tokens 128, no stop string. */
attn_generate_opts attn_generate_opts_default(void);

typedef enum {
    ATTN_FINISH_LENGTH = 0,   /* max_tokens generated */
    ATTN_FINISH_END = 1,      /* the end-of-sequence / end-of-turn token (not part of the text) */
    ATTN_FINISH_STOP = 2,     /* a stop string */
    ATTN_FINISH_CONTEXT = 3,  /* the context is full (the last token was sampled but not run) */
    ATTN_FINISH_CANCELLED = 4 /* the caller stopped it (attn_llama_generate's callback) */
} attn_finish_reason;

typedef struct {
    int64_t n_prompt, n_gen;   /* tokens run as prompt; tokens generated (the end token excluded) */
    double t_prompt, t_gen;    /* seconds */
    attn_finish_reason finish;
    int32_t pending_token;     /* the last generated token, sampled but not yet run through the
                                * model (-1 when none): a conversation that goes on runs it first */
} attn_generate_stats;

/* A growable token list (the generation history that the repetition penalty looks at). */
typedef struct {
    int32_t *ids;
    int64_t n, cap;
} attn_token_list;
/* attn_token_list_free: release the ids (NULL-safe); the list is empty afterwards. */
void attn_token_list_free(attn_token_list *t);

typedef struct attn_generation attn_generation;

/* attn_generation_start: run prompt[0..n_prompt) through the state (which may already hold a
 * conversation: the prompt continues it) and get ready to sample. history: NULL, or a list
 * that the prompt and each generated token are appended to (the repetition penalty sees it;
 * pass the same list across the turns of a conversation). tok: the model's tokenizer (the
 * GGUF file's, or a llama2.c tokenizer.bin).
 * Errors: ATTN_E_INVALID (NULL, n_prompt < 1, bad stop strings, max_tokens < 0), ATTN_E_RANGE
 * (the prompt does not fit in the context: "the prompt has N tokens; with M already in the
 * context it does not fit in the context of C positions"), those of attn_sampler_create and
 * attn_llama_forward. The state is unchanged on error. */
int attn_generation_start(attn_generation **out, attn_llama_state *st, const attn_bpe *tok, const int32_t *prompt, int64_t n_prompt,
                          const attn_generate_opts *o, attn_token_list *history);

/* attn_generation_next: generate one token. Returns 1 with its text in (*text, *len) (valid
 * until the next call; possibly empty while an incomplete UTF-8 character or the start of a
 * stop string is held back) and its id in *token (-1 for the held-back text released at the
 * end); 0 when finished (attn_generation_stats says why; the remaining text was given before);
 * < 0 on error. Context-full rule: a token is sampled while the context has room for the one
 * before it, so a prompt of P tokens in a context of C positions yields at most C - P + 1
 * tokens (as llama2.c and llama.cpp). */
int attn_generation_next(attn_generation *g, const char **text, size_t *len, int32_t *token);

/* attn_generation_start_logits: the same generation for a caller that runs the model itself
 * (a server batching several sequences with attn_llama_batch_forward): the prompt has already
 * been run and `logits` [vocab_size] float32 are those of its last token (copied). Before each
 * attn_generation_next that follows a generated token (stats.pending_token >= 0 and fewer than
 * max_tokens generated) the caller runs that token and hands its logits to attn_generation_feed;
 * when it does not (no room left in the context), next finishes with ATTN_FINISH_CONTEXT.
 * m gives the vocabulary and the end tokens. Errors: ATTN_E_INVALID (NULL, n_prompt < 1, bad
 * options), those of attn_sampler_create, ATTN_E_NOMEM. */
int attn_generation_start_logits(attn_generation **out, const attn_llama *m, const attn_bpe *tok, const int32_t *prompt, int64_t n_prompt,
                                 const float *logits, const attn_generate_opts *o, attn_token_list *history);
/* attn_generation_feed: the logits [vocab_size] of the pending token (see above; copied).
 * Errors: ATTN_E_INVALID (NULL, a generation of attn_generation_start, no pending token). */
int attn_generation_feed(attn_generation *g, const float *logits);

/* attn_generation_stats: counts, times and the finish reason so far. */
const attn_generate_stats *attn_generation_stats(const attn_generation *g);
/* attn_generation_free: NULL-safe. */
void attn_generation_free(attn_generation *g);

/* A piece of generated text (UTF-8, len bytes, not NUL-terminated) and the token it ends with
 * (-1 for text held back until the end); a non-zero return stops generation. */
typedef int (*attn_text_fn)(void *ctx, const char *text, size_t len, int32_t token);
/* attn_llama_generate: the whole loop: start, then next until finished, calling
 * on_text(ctx, text, len, token) for each non-empty piece; a non-zero return stops generation
 * (finish ATTN_FINISH_CANCELLED). stats: NULL or where the statistics go.
 * Errors: those of attn_generation_start / attn_generation_next. */
int attn_llama_generate(attn_llama_state *st, const attn_bpe *tok, const int32_t *prompt, int64_t n_prompt, const attn_generate_opts *o,
                        attn_token_list *history, attn_text_fn on_text, void *ctx, attn_generate_stats *stats);

/* ------------------------------------------------------------------ chat template */

typedef struct {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* UTF-8 */
} attn_chat_message;

/* attn_chat_template_system: the default system message of a ChatML chat template (the literal
 * text of its "<|im_start|>system\n...<|im_end|>" turn, e.g. SmolLM2's "You are a helpful AI
 * assistant named SmolLM, trained by Hugging Face"), malloc'ed in *out, or NULL when it has
 * none. force_chatml: accept a template attn does not recognise (and NULL) as ChatML.
 * Errors: ATTN_E_UNSUPPORTED (NULL template: "the model file has no chat template"; a template
 * that is not ChatML: "the model's chat template is not one attn knows (ChatML)"), ATTN_E_NOMEM. */
int attn_chat_template_system(char **out, const char *tmpl, int force_chatml);

/* attn_chat_format: the prompt text of messages[0..n) with ChatML, the one chat template attn
 * runs: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, then "<|im_start|>assistant\n".
 * default_system: NULL, or a system message put first when messages[0] is not one (the
 * template's default, attn_chat_template_system: what the template itself does; the CLI, the
 * Python package and the server all pass it). Returns a malloc'ed string in *out.
 * Errors: ATTN_E_INVALID (a role other than system / user / assistant, NULL content, content
 * that is not UTF-8: the message names the message index and byte offset), ATTN_E_NOMEM. */
int attn_chat_format(char **out, const attn_chat_message *messages, int64_t n, const char *default_system);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_LLAMA_H */
