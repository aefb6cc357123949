/* Private helpers shared by the tokenizers in src/tokenizers/ (not installed):
 * UTF-8 coding, Unicode character classes (whole files: attn__read_file in core/internal.h,
 * at most TOK_MAX_FILE bytes, ATTN_E_FORMAT when larger). */
#ifndef ATTN_TOK_COMMON_H
#define ATTN_TOK_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define TOK_MAX_FILE (1u << 30) /* largest tokenizer file read into memory */

/* Decode one code point at s[i..len): its byte length (1..4), or 0 when the bytes there are
 * not well-formed UTF-8 (RFC 3629 / Unicode Table 3-7). */
int attn__utf8_decode(const unsigned char *s, size_t len, size_t i, int32_t *cp);
/* Encode code point c (<= U+10FFFF) into out[0..4): returns the byte count. */
int attn__utf8_encode(int32_t c, char *out);

/* Rust's char::is_whitespace (Unicode White_Space). */
int attn__uni_is_ws(int32_t c);
/* Lowercase as Rust's char::to_lowercase (single code point mappings). */
int32_t attn__uni_to_lower(int32_t c);
/* BERT character sets as Hugging Face tokenizers 0.23.3 sees them (generated tables). */
int attn__uni_bert_removed(int32_t c);
int attn__uni_bert_punct(int32_t c);
int attn__uni_bert_mn(int32_t c);
int attn__uni_bert_cjk(int32_t c);
int attn__uni_bert_ccc(int32_t c);

/* Byte-level BPE pre-tokenization of text[0..len) (valid UTF-8) as attn_bpe_encode splits it
 * (special tokens not parsed): the end offset of each word, in order, into ends[0..cap); *n =
 * the word count (may exceed cap). For tests of the pre-tokenizer. Errors: ATTN_E_INVALID (not
 * a byte-level tokenizer, bad arguments), ATTN_E_FORMAT (invalid UTF-8), ATTN_E_NOMEM. */
struct attn_bpe;
int attn__bpe_pretokenize(const struct attn_bpe *t, const char *text, size_t len, size_t *ends, int64_t cap, int64_t *n);

#endif
