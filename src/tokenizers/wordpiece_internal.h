/* Private to the WordPiece tokenizer (src/tokenizers/wordpiece*.c, bert_normalizer.c; not
 * installed): the tokenizer's state, the streaming BertNormalizer and the table builder shared
 * by the vocab.txt / token-list loaders (wordpiece.c) and the tokenizer.json loader
 * (wordpiece_json.c). */
#ifndef ATTN_WORDPIECE_INTERNAL_H
#define ATTN_WORDPIECE_INTERNAL_H

#include "attn_wordpiece.h"
#include "tokenizers/tok_json.h"

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ types */

#define TOK_MAX_AFFIX 8            /* special ids before / after the sequence */
#define TOK_MAX_WORD_CHARS 1000000 /* accepted max_input_chars_per_word */

typedef struct {
    char *s;
    size_t len;
    int32_t id;
} tok_added;

struct attn_tokenizer {
    /* vocabulary: hash of (string -> id) plus id -> string */
    char *blob;          /* all token strings, NUL-separated */
    const char **id_tok; /* [vocab_size], NULL for unused ids */
    int64_t vocab_size;
    const char **key;   /* hash slots: key string (NULL = empty) */
    uint32_t *key_len;
    int32_t *key_id;    /* id for token_to_id (an added token wins, as in HF) */
    int32_t *key_model; /* id in the WordPiece model vocab, or -1 (added token only) */
    size_t n_slots; /* power of two */
    size_t max_key_len;

    tok_added *added;
    int n_added;
    unsigned char added_first[32]; /* bitset of first bytes of added tokens */

    /* normalizer */
    int clean_text, chinese, strip_accents, lowercase;
    /* model */
    char *prefix;
    size_t prefix_len;
    int32_t unk_id;
    int max_chars;
    /* post-processor */
    int template_ok; /* 0: add_special requested on a vocabulary without [CLS]/[SEP] */
    int32_t pre_ids[TOK_MAX_AFFIX], post_ids[TOK_MAX_AFFIX];
    int n_pre, n_post;
    int32_t cls_id, sep_id, pad_id, mask_id;
};

/* ------------------------------------------------------------------ streaming normalizer
 *
 * BertNormalizer as a stream of characters, each carrying the byte span [s, e) of the input
 * character it came from (HF's "alignments"). clean_text, handle_chinese_chars and lowercase
 * work on one character at a time. strip_accents is NFD followed by dropping Mn; NFD also
 * puts every run of non-starters (combining class > 0) into canonical order, which can move
 * characters across input characters. As in tokenizers (NormalizedString::transform), spans
 * stay positional when a run is reordered: the k-th decomposition-initial character of the
 * sorted run gets the span of the k-th input character of the run, and the other characters
 * of a decomposition get the span of the last such character before them. The run is held
 * until the next starter; a run longer than NORM_RUN_MAX characters (never seen in real text)
 * is sorted and released in pieces. */

#define NORM_DECOMP_MAX 32     /* NFD of one character is at most 18 characters */
#define NORM_RUN_MAX (1 << 16) /* longest run of non-starters sorted as one */

typedef void (*norm_sink)(void *ctx, int32_t c, size_t s, size_t e);

typedef struct {
    int32_t c;
    int ccc;
    int inserted; /* not the first character of its decomposition */
    size_t idx;   /* arrival order, for a stable sort */
    size_t s, e;  /* span of the input character (for !inserted) */
} norm_item;

typedef struct {
    const attn_tokenizer *t;
    norm_sink sink;
    void *ctx;
    norm_item *run;
    size_t run_n, run_cap;
    size_t last_s, last_e; /* span of the last decomposition-initial character */
    int nomem;
} norm_stream;

/* Start a stream that hands every normalized character of t's BertNormalizer to sink. */
void attn__norm_init(norm_stream *ns, const attn_tokenizer *t, norm_sink sink, void *ctx);
void attn__norm_free(norm_stream *ns);
/* Feed one input character with its byte span [s, e). ns->nomem is set on allocation failure. */
void attn__norm_feed(norm_stream *ns, int32_t c, size_t s, size_t e);
/* End of a normalized piece (end of text, or an added token follows): releases the held run. */
void attn__norm_end(norm_stream *ns);

/* Entries gathered by a loader before the tokenizer is built (s points into caller-owned storage
 * until build copies it). */
typedef attn__tok_json_entry tok_entry;

typedef struct {
    const char *content;
} tok_added_spec;

/* The start of the WordPiece file loaders (fn: the public name for messages): *out = NULL, then
 * the whole file at path into *data[*len] (free with free()). Errors: ATTN_E_INVALID "FN: NULL out" /
 * "FN: NULL path", attn__read_file's (ATTN_E_FORMAT for a file over TOK_MAX_FILE). */
int attn__wp_read(const char *fn, attn_tokenizer **out, const char *path, char **data, size_t *len);
/* The defaults of a BertNormalizer / WordPiece tokenizer before a loader sets its options. */
void attn__wp_init_defaults(attn_tokenizer *t);
/* Build the hash / id table from the model vocab entries e[0..n) and the added tokens; unk names
 * the unk token, prefix the continuation prefix (see wordpiece.c). Errors: ATTN_E_FORMAT,
 * ATTN_E_NOMEM. */
int attn__wp_build(attn_tokenizer *t, const tok_entry *e, size_t n, const tok_added_spec *add, int n_add, const char *unk,
                   const char *prefix);

#endif
