/*
 * attn_bpe.h — byte-pair-encoding tokenizers for decoder models:
 *
 *  - byte-level BPE (GPT-2, Radford et al. 2019; SmolLM2, Whisper): the text is split out at
 *    special-token strings (leftmost, longest first; those become their own ids), each other
 *    span is cut into words by a pre-tokenizer regex (PCRE2 with Unicode properties), each
 *    word's UTF-8 bytes are mapped to printable characters by GPT-2's bytes_to_unicode table
 *    and merged by merge rank (lowest rank first, leftmost first among equal ranks).
 *    Pre-tokenizers: "gpt2" = the GPT-2 pattern
 *        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *    "smollm" = every \p{N} character isolated first, then the GPT-2 pattern on each piece
 *    (Hugging Face pre_tokenizers Sequence[Digits(individual_digits), ByteLevel]),
 *    "llama-bpe" = Llama 3's pattern (its tokenizer.json Split, behavior Isolated)
 *        (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *    and "qwen2" = the same with \p{N} in place of \p{N}{1,3} (Qwen2's tokenizer.json; its NFC
 *    normalizer is not applied, as llama.cpp does not). \s: Unicode White_Space.
 *  - SentencePiece-style BPE by piece score with byte fallback (llama2.c's tokenizer.bin,
 *    Kudo & Richardson 2018): a dummy space is put before non-empty text, each UTF-8 character
 *    becomes its piece or, when the vocabulary lacks it, one <0xXX> piece per byte; then the
 *    adjacent pair whose concatenation is a piece with the highest score is merged (leftmost
 *    among equal scores) until no pair merges. This is llama2.c's encode() (run.c).
 *
 * Decoding: attn_bpe_token_bytes gives the bytes a token stands for (byte-level: the inverse
 * byte map; SentencePiece: <0xXX> -> that byte, a leading space dropped right after BOS as
 * llama2.c does). The streaming decoder holds back the bytes of an incomplete UTF-8 character
 * until it is complete, so that a token-by-token printer never prints half a character; a byte
 * sequence that cannot become valid UTF-8 is written as U+FFFD per bad byte (as Python's
 * bytes.decode(errors="replace") does for lone bytes).
 *
 * A tokenizer is immutable after creation; encode/decode may run on several threads at once.
 */
#ifndef ATTN_BPE_H
#define ATTN_BPE_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ATTN_BPE_BYTE_LEVEL = 0, ATTN_BPE_SENTENCEPIECE = 1 } attn_bpe_kind;

/* Token types (the GGUF / SentencePiece numbering). Control and user-defined tokens are
 * "special": matched as whole strings in the text before BPE when parse_special is set. */
enum { ATTN_TOK_NORMAL = 1, ATTN_TOK_UNKNOWN = 2, ATTN_TOK_CONTROL = 3, ATTN_TOK_USER = 4, ATTN_TOK_UNUSED = 5, ATTN_TOK_BYTE = 6 };

typedef struct {
    attn_bpe_kind kind;
    const char *const *tokens; /* [n_tokens] token strings (byte-level: in the mapped alphabet) */
    const uint32_t *token_lens;/* [n_tokens] byte lengths, or NULL (NUL-terminated strings) */
    int64_t n_tokens;
    const int32_t *token_types;/* [n_tokens] ATTN_TOK_*, or NULL (all normal) */
    const float *scores;       /* SentencePiece: [n_tokens] piece scores (required) */
    const char *const *merges; /* byte-level: [n_merges] "left right", rank = index */
    const uint32_t *merge_lens;/* [n_merges] or NULL */
    int64_t n_merges;
    const char *pretokenizer;  /* byte-level: "gpt2", "smollm", "llama-bpe" or "qwen2" (NULL = "gpt2") */
    int32_t bos_id, eos_id;    /* -1 when absent */
} attn_bpe_spec;

typedef struct attn_bpe attn_bpe;

/* attn_bpe_create: build a tokenizer from in-memory tables (copied).
 * Errors: ATTN_E_INVALID (NULL fields, n_tokens outside 1..2^31-1, bos/eos out of range),
 * ATTN_E_FORMAT (a merge that is not two tokens of the vocabulary separated by one space, a
 * byte-level vocabulary without the characters of " " and "a" (a byte the vocabulary lacks is
 * dropped from the text, as HF BPE without an unk token does), invalid UTF-8 in a token),
 * ATTN_E_UNSUPPORTED (an unknown pre-tokenizer name), ATTN_E_NOMEM. Duplicate token strings:
 * the lowest id wins for encoding. */
int attn_bpe_create(attn_bpe **out, const attn_bpe_spec *spec);

/* attn_bpe_load_llama2c: read a llama2.c tokenizer.bin (int32 max_token_length, then per token
 * float32 score, int32 length, bytes) for a model of vocab_size tokens; BOS = 1, EOS = 2.
 * Pieces named <0xXX> are byte-fallback tokens; <unk>, <s>, </s> are control tokens.
 * Errors: ATTN_E_IO, ATTN_E_FORMAT (truncated file, negative or oversized length, NaN score,
 * bytes after the last token), ATTN_E_INVALID, ATTN_E_NOMEM. */
int attn_bpe_load_llama2c(attn_bpe **out, const char *path, int64_t vocab_size);

/* attn_bpe_free: NULL-safe. */
void attn_bpe_free(attn_bpe *t);

/* attn_bpe_encode: token ids of text[0..len) (UTF-8). No BOS is added (callers add it).
 *   parse_special: 1 = control / user-defined token strings in the text become their ids;
 *                  0 = they are ordinary text.
 *   ids[0..cap): output; *n_ids receives the count (also with ATTN_E_RANGE when cap is too
 *   small, the first cap ids written). ids may be NULL with cap 0 to count.
 * Errors: ATTN_E_INVALID, ATTN_E_FORMAT (invalid UTF-8: the message gives the byte offset),
 * ATTN_E_RANGE (more than cap ids), ATTN_E_NOMEM. Source: see the header comment; checked
 * against Hugging Face tokenizers (byte-level) and llama2.c's encode (SentencePiece). */
int attn_bpe_encode(const attn_bpe *t, const char *text, size_t len, int parse_special, int32_t *ids, int64_t cap,
                    int64_t *n_ids);

/* attn_bpe_vocab_size: n_tokens (0 for NULL). */
int64_t attn_bpe_vocab_size(const attn_bpe *t);
/* attn_bpe_kind_of: the kind given at creation. */
attn_bpe_kind attn_bpe_kind_of(const attn_bpe *t);
/* attn_bpe_bos_id / attn_bpe_eos_id: -1 when absent. */
int32_t attn_bpe_bos_id(const attn_bpe *t);
/* attn_bpe_eos_id: end-of-sequence id, -1 when absent. */
int32_t attn_bpe_eos_id(const attn_bpe *t);
/* attn_bpe_token_to_id: id of an exact token string (NUL-terminated), -1 when absent. */
int32_t attn_bpe_token_to_id(const attn_bpe *t, const char *token);
/* attn_bpe_id_to_token: the stored token string (NUL-terminated; *len its length if len is not
 * NULL), NULL for an id out of range. */
const char *attn_bpe_id_to_token(const attn_bpe *t, int32_t id, size_t *len);
/* attn_bpe_token_type: ATTN_TOK_* of id (0 for an id out of range). */
int attn_bpe_token_type(const attn_bpe *t, int32_t id);

/* attn_bpe_token_bytes: the bytes token `id` decodes to, written to out[0..cap) (no NUL);
 * *len receives the count. prev_id: the token before it (-1 at the start): a SentencePiece piece
 * right after BOS loses its leading space. Control tokens decode to "" unless render_special is
 * set (then to their text).
 * Errors: ATTN_E_RANGE (id out of range, or cap too small: *len says how much is needed). */
int attn_bpe_token_bytes(const attn_bpe *t, int32_t id, int32_t prev_id, int render_special, char *out, size_t cap,
                         size_t *len);

/* Streaming decoder state (plain struct; zero it with attn_bpe_stream_init). */
typedef struct {
    unsigned char pend[8]; /* bytes of a character not yet complete */
    int n_pend;
    int32_t prev_id;
    int render_special;
} attn_bpe_stream;

/* attn_bpe_stream_init: start a stream; render_special as in attn_bpe_token_bytes. */
void attn_bpe_stream_init(attn_bpe_stream *s, int render_special);
/* attn_bpe_stream_push: feed token `id`; the complete UTF-8 text now available is written to
 * out[0..cap) (no NUL), *len its length. cap >= 3 * attn_bpe_max_token_bytes(t) + 32 always suffices.
 * Errors: ATTN_E_RANGE (id out of range or cap too small). */
int attn_bpe_stream_push(const attn_bpe *t, attn_bpe_stream *s, int32_t id, char *out, size_t cap, size_t *len);
/* attn_bpe_stream_flush: at the end, write what is still held back: the start of a character
 * that never ended becomes one U+FFFD (Unicode's maximal-subpart replacement). */
int attn_bpe_stream_flush(attn_bpe_stream *s, char *out, size_t cap, size_t *len);
/* attn_bpe_max_token_bytes: the longest byte string one token decodes to. */
size_t attn_bpe_max_token_bytes(const attn_bpe *t);

/* attn_bpe_decode: the text of ids[0..n) (the stream above run to its end), NUL-terminated in
 * out[0..cap); *len (optional) receives the length without the NUL.
 * Errors: ATTN_E_RANGE (id out of range, cap too small), ATTN_E_INVALID. */
int attn_bpe_decode(const attn_bpe *t, const int32_t *ids, int64_t n, int render_special, char *out, size_t cap,
                    size_t *len);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_BPE_H */
