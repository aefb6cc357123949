/* Shared by `attn generate`, `attn chat` and `attn summarize`: model loading, option parsing
 * for sampling, and the token-by-token generation loop with streamed UTF-8-safe output. */
#ifndef ATTN_TOOLS_LLM_H
#define ATTN_TOOLS_LLM_H

#include "attn_bpe.h"
#include "attn_llama.h"
#include "attn_sampling.h"
#include "cli.h"

#include <stdio.h>

typedef struct {
    attn_llama *model;
    attn_bpe *own_tok;     /* llama2.c tokenizer (NULL for GGUF) */
    const attn_bpe *tok;
    int is_gguf;
} llm_ctx;

/* llm_load: a GGUF file, or a llama2.c checkpoint with its tokenizer.bin. Prints the error;
 * returns CLI_OK, CLI_FAIL or CLI_USAGE (llama2.c without --tokenizer). */
int llm_load(llm_ctx *c, const char *verb, const char *model, const char *tokenizer);
void llm_free(llm_ctx *c);

typedef struct {
    attn_sampler_params sp;
    int64_t n_predict;
    int64_t threads;
    const char *stop; /* stop string or NULL */
    int progress;     /* a bar while the prompt is read: 0 off (default), 1 on, CLI_PROGRESS_AUTO */
    const char *progress_label; /* the bar's label (the verb) */
} llm_opts;

/* llm_opts_default: greedy-free defaults (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05). */
void llm_opts_default(llm_opts *o, int64_t n_predict);
/* llm_options: the sampling options (-n, --temp, --top-k, --top-p, --min-p, --repeat-penalty,
 * --seed, --threads, --stop) as a cli_parse table over an llm_opts; each verb's own table
 * carries their help lines. */
extern const cli_option llm_options[];

typedef struct {
    int64_t n_prompt, n_gen;
    double t_prompt, t_gen;  /* seconds */
    int stop_reason;         /* 0 -n reached, 1 EOS / end of turn, 2 stop string, 3 context full */
    int32_t pending;         /* the last token, printed but not yet run through the model (-1: none) */
} llm_stats;

/* llm_generate: attn_llama_generate (the library's loop) writing to `out`: run prompt ids[0..n)
 * through the state (which may already hold a conversation), then sample up to o->n_predict tokens, writing the decoded text to `out` as it is produced
 * (never half a UTF-8 character, never the stop string). The generated ids are appended to
 * *hist (grown with realloc; *n_hist / *cap_hist). Returns CLI_OK or CLI_FAIL (printed). */
int llm_generate(llm_ctx *c, attn_llama_state *st, const int32_t *ids, int64_t n, const llm_opts *o, FILE *out,
                 int32_t **hist, int64_t *n_hist, int64_t *cap_hist, llm_stats *stats);

/* llm_generate_print: llm_generate to standard output, then a newline, a check that standard
 * output took everything (CLI_FAIL "writing standard output failed: ..." otherwise) and
 * llm_print_stats. Returns CLI_OK or CLI_FAIL (printed). */
int llm_generate_print(llm_ctx *c, attn_llama_state *st, const int32_t *ids, int64_t n, const llm_opts *o,
                       int32_t **hist, int64_t *n_hist, int64_t *cap_hist);

/* llm_print_stats: "prompt: N tokens, X tokens/s; generation: ..." on stderr, and a plain note
 * when generation stopped because the context was full. */
void llm_print_stats(const llm_stats *s);

/* llm_read_all: read a whole stream (stdin or a file) into a NUL-terminated buffer, its NUL bytes
 * removed (*len counts what is left). */
int llm_read_all(FILE *f, char **buf, size_t *len);

/* llm_chatml: the ChatML text of a conversation (system may be NULL: no system turn):
 * "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n".
 * Returns a malloc'ed string or NULL. */
char *llm_chatml(const char *system, const char *user, int with_system);

/* llm_template_system: for a chat template that attn recognises as ChatML, CLI_OK and the
 * default system message written into *sys (malloc'ed, NULL when the template has none);
 * CLI_FAIL with a message for an unknown template. `force` = "chatml" accepts any template. */
int llm_template_system(const char *tmpl, const char *force, char **sys);

#endif
