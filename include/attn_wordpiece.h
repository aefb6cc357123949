/*
 * attn_wordpiece.h — BERT WordPiece tokenizer (uncased BERT / all-MiniLM-L6-v2 style).
 *
 * Reference behaviour: the Hugging Face `tokenizers` library (Rust core, as used by
 * transformers' BertTokenizerFast and sentence-transformers) for a tokenizer.json with
 *   normalizer     BertNormalizer {clean_text, handle_chinese_chars, strip_accents, lowercase}
 *   pre_tokenizer  BertPreTokenizer
 *   model          WordPiece {unk_token, continuing_subword_prefix, max_input_chars_per_word}
 *   post_processor TemplateProcessing "[CLS] $A [SEP]" (or BertProcessing)
 * The pipeline for one text is:
 *   1. added (special) tokens whose "normalized" flag is false — "[CLS]", "[SEP]", "[PAD]",
 *      "[MASK]", "[UNK]" — are found in the raw text (leftmost, longest match) and become
 *      their own ids; the text between them goes through steps 2-4;
 *   2. BertNormalizer, applied per character in this order:
 *      clean_text: U+0000, U+FFFD and control characters (general categories Cc, Cf, Co,
 *        except TAB, LF, CR) are removed; whitespace characters become ' ';
 *      handle_chinese_chars: a CJK ideograph (U+4E00-9FFF, 3400-4DBF, 20000-2A6DF,
 *        2A700-2B73F, 2B740-2B81F, 2B920-2CEAF, F900-FAFF, 2F800-2FA1F — the ranges of the
 *        Rust implementation) is surrounded by spaces;
 *      strip_accents (when unset it follows lowercase): canonical decomposition (NFD, with
 *        canonical reordering of combining marks) and removal of non-spacing marks (Mn);
 *      lowercase: Unicode lowercase mapping (U+0130 becomes "i" + U+0307 as in Rust);
 *   3. BertPreTokenizer: split on whitespace (Unicode White_Space, removed) and on
 *      punctuation (ASCII 33-47, 58-64, 91-96, 123-126 and Unicode categories P*), each
 *      punctuation character being a word of its own;
 *   4. WordPiece: a word longer than max_input_chars_per_word (100) characters becomes the
 *      unk token; otherwise greedy longest-match-first from the left, pieces after the first
 *      carrying the "##" prefix; a word that cannot be fully split becomes the unk token.
 *   5. post-processing: [CLS] ... [SEP] when add_special is set; truncation keeps the first
 *      pieces so that the whole sequence (specials included) fits in max_len.
 * Character data: decompositions, combining-class values and case mappings come from
 * utf8proc. The punctuation / control / Mn / non-starter sets are tables generated from
 * `tokenizers` 0.23.3 itself, because it uses older Unicode data than utf8proc for them (see
 * src/tokenizers/wordpiece.c); tests/test_tokenizer.c checks every code point against
 * tokenizers. Regenerate the tables if a later tokenizers release updates its Unicode data.
 *
 * Input text must be UTF-8. Invalid UTF-8 (stray continuation bytes, truncated or overlong
 * sequences, surrogates U+D800-DFFF, code points above U+10FFFF) is rejected with
 * ATTN_E_FORMAT and a message naming the byte offset of the first bad byte, before any
 * token is produced. The text may contain NUL bytes (U+0000 is removed by clean_text).
 *
 * A tokenizer is immutable after loading; encode may be called from several threads on the
 * same handle at once.
 */
#ifndef ATTN_WORDPIECE_H
#define ATTN_WORDPIECE_H

#include "attn_core.h"
#include "attn_utf8.h" /* attn_tokenizer_validate_utf8 */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_tokenizer attn_tokenizer;

/* attn_tokenizer_load_json: load a Hugging Face tokenizer.json (e.g.
 * models/all-MiniLM-L6-v2/tokenizer.json). Reads model.vocab (token -> id), model.unk_token,
 * model.continuing_subword_prefix, model.max_input_chars_per_word, the BertNormalizer flags
 * (strip_accents null = follow lowercase), added_tokens, and the [CLS]/[SEP] tokens of the
 * post_processor. The file's "truncation" and "padding" sections are ignored: the caller
 * passes max_len to attn_tokenizer_encode (note that all-MiniLM-L6-v2's tokenizer.json says
 * 128 while sentence-transformers uses max_seq_length 256 from sentence_bert_config.json).
 * On success *out is a new handle to release with attn_tokenizer_free.
 * A null normalizer means no normalization; a null post_processor adds nothing.
 * Errors: ATTN_E_INVALID (NULL argument), ATTN_E_IO (cannot open/read), ATTN_E_FORMAT (not
 * JSON, file over 1 GiB, missing/ill-typed fields, ids negative, non-integer or far beyond
 * the number of entries, a vocab token that is not UTF-8, unk token absent from the
 * vocabulary), ATTN_E_UNSUPPORTED (a model other than WordPiece, a normalizer other than
 * BertNormalizer, a pre_tokenizer other than BertPreTokenizer, a post_processor other than
 * TemplateProcessing (specials around one $A) or BertProcessing, an added token with
 * normalized/lstrip/rstrip/single_word set, max_input_chars_per_word outside 1..1000000),
 * ATTN_E_NOMEM. */
int attn_tokenizer_load_json(attn_tokenizer **out, const char *path);

/* attn_tokenizer_load_json_buffer: as attn_tokenizer_load_json, from `len` bytes of JSON
 * text in memory (need not be NUL-terminated). Same errors except ATTN_E_IO. */
int attn_tokenizer_load_json_buffer(attn_tokenizer **out, const char *json, size_t len);

/* attn_tokenizer_load_vocab: load a BERT vocab.txt (one token per line, the line number
 * counted from 0 is the id; trailing whitespace, "\r" included, is removed as Rust's
 * str::trim_end does; an empty line is the token ""; when a token appears twice the later
 * id wins for token_to_id — all as tokenizers' WordPiece::read_file). The normalizer is BertNormalizer with
 * clean_text and handle_chinese_chars on, the given `lowercase` (0/1) and `strip_accents`
 * (0 off, 1 on, -1 = follow lowercase, like null in tokenizer.json); the unk token is
 * "[UNK]", the prefix "##", max_input_chars_per_word 100. "[PAD]", "[UNK]", "[CLS]",
 * "[SEP]" and "[MASK]", when present in the vocabulary, are added special tokens (matched
 * in raw text), as BertWordPieceTokenizer / BertTokenizerFast set them up.
 * Errors: ATTN_E_INVALID, ATTN_E_IO, ATTN_E_FORMAT (empty file, file over 1 GiB, invalid
 * UTF-8 (the message gives the byte offset), no "[UNK]" line), ATTN_E_NOMEM. */
int attn_tokenizer_load_vocab(attn_tokenizer **out, const char *vocab_path, int lowercase,
                              int strip_accents);

/* attn_tokenizer_from_tokens: as attn_tokenizer_load_vocab, from an in-memory list:
 * tokens[i] (NUL-terminated UTF-8) gets id i. Convenient for toy vocabularies in tests.
 * Errors: as attn_tokenizer_load_vocab (n_tokens must be 1..2^31-1). */
int attn_tokenizer_from_tokens(attn_tokenizer **out, const char *const *tokens, int64_t n_tokens,
                               int lowercase, int strip_accents);

/* attn_tokenizer_free: release a tokenizer. NULL-safe. */
void attn_tokenizer_free(attn_tokenizer *tok);

/* attn_tokenizer_encode: tokenize `text_len` bytes of UTF-8 `text` (text may be NULL when
 * text_len is 0) and write the ids. Memory use is bounded whatever the text length, and
 * work stops once max_len ids are produced (the whole text is still checked for valid UTF-8
 * first).
 *   add_special: 1 = wrap as [CLS] ... [SEP] (TemplateProcessing single), 0 = pieces only.
 *   max_len: > 0 truncates so that the result (specials included) has at most max_len ids,
 *     keeping the first pieces (HF truncation, direction right); <= 0 means no truncation.
 *     Use 256 for all-MiniLM-L6-v2 as sentence-transformers does. (HF silently skips
 *     truncation when max_len is smaller than the number of special tokens; attn refuses.)
 *   ids, cap: output buffer of cap ids. Passing ids == NULL and cap == 0 only computes the
 *     count into *n_ids.
 *   n_ids: receives the number of ids of the encoding (also on ATTN_E_RANGE).
 *   offsets: NULL, or room for 2*cap int64 values: for id k, offsets[2k] and offsets[2k+1]
 *     are the [start, end) BYTE offsets of the piece in `text` (HF reports the same spans in
 *     characters; converted to bytes they are identical, including HF's positional
 *     alignment after canonical reordering); special tokens added by add_special get (0, 0).
 * Errors: ATTN_E_INVALID (NULL tok/n_ids, NULL text with text_len > 0, cap < 0, NULL ids
 * with cap > 0, offsets without ids, add_special with 0 < max_len < number of special
 * tokens (2 for BERT), add_special on a vocab.txt / token list without [CLS] and [SEP]),
 * ATTN_E_FORMAT (invalid
 * UTF-8; the message gives the byte offset), ATTN_E_RANGE (more than cap ids; *n_ids says
 * how many are needed and the first cap ids are written), ATTN_E_NOMEM.
 * Source: tokenizers' Tokenizer::encode(text, add_special_tokens) with TruncationParams
 * {max_length, strategy LongestFirst, stride 0} and no padding. */
int attn_tokenizer_encode(const attn_tokenizer *tok, const char *text, size_t text_len,
                          int add_special, int64_t max_len, int32_t *ids, int64_t *n_ids,
                          int64_t cap, int64_t *offsets);

/* attn_tokenizer_normalize: apply only the normalizer (step 2 above) to UTF-8 text and write
 * the result as UTF-8 plus a terminating NUL into out[0..cap). *out_len receives the length
 * without the NUL (also on ATTN_E_RANGE, when cap is too small; out may be NULL with cap 0 to
 * query the length). Matches tokenizers' `normalizer.normalize_str(text)`; added tokens are
 * not treated specially here. Errors: ATTN_E_INVALID, ATTN_E_FORMAT (invalid UTF-8),
 * ATTN_E_RANGE, ATTN_E_NOMEM. */
int attn_tokenizer_normalize(const attn_tokenizer *tok, const char *text, size_t text_len,
                             char *out, size_t cap, size_t *out_len);

/* attn_tokenizer_vocab_size: 1 + the largest id of the vocabulary and added tokens (30522 for
 * all-MiniLM-L6-v2); 0 for NULL. */
int64_t attn_tokenizer_vocab_size(const attn_tokenizer *tok);

/* attn_tokenizer_id_to_token: the token string of `id` (NUL-terminated, owned by the
 * tokenizer), or NULL when id is out of range or unused (attn_last_error is then set,
 * ATTN_E_RANGE). Continuation pieces keep their "##" prefix. */
const char *attn_tokenizer_id_to_token(const attn_tokenizer *tok, int64_t id);

/* attn_tokenizer_token_to_id: the id of an exact token string (NUL-terminated, no
 * normalization applied), or -1 when it is not in the vocabulary or added tokens. */
int32_t attn_tokenizer_token_to_id(const attn_tokenizer *tok, const char *token);

/* Special token ids: the ids of the tokens named "[CLS]" (101 for all-MiniLM-L6-v2), "[SEP]"
 * (102), "[PAD]" (0), "[MASK]" (103), and of the model's unk token (model.unk_token, "[UNK]",
 * 100). -1 when the tokenizer has no such token (or tok is NULL). The ids that add_special
 * inserts are those of the tokenizer.json post-processor (the same ones for BERT files). */
int32_t attn_tokenizer_cls_id(const attn_tokenizer *tok);
/* attn_tokenizer_sep_id: id of [SEP], or -1 when the vocabulary has none. */
int32_t attn_tokenizer_sep_id(const attn_tokenizer *tok);
/* attn_tokenizer_pad_id: id of [PAD], or -1 when the vocabulary has none. */
int32_t attn_tokenizer_pad_id(const attn_tokenizer *tok);
/* attn_tokenizer_unk_id: id of [UNK], or -1 when the vocabulary has none. */
int32_t attn_tokenizer_unk_id(const attn_tokenizer *tok);
/* attn_tokenizer_mask_id: id of [MASK], or -1 when the vocabulary has none. */
int32_t attn_tokenizer_mask_id(const attn_tokenizer *tok);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_WORDPIECE_H */
