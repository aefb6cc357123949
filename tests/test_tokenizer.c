/* Tests for the BERT WordPiece tokenizer (include/attn_wordpiece.h).
 *   - toy vocabularies (written by this test) for WordPiece splitting, specials, truncation,
 *     offsets, buffer handling and loader errors;
 *   - normalisation and invalid UTF-8;
 *   - tests/fixtures/tokenizer_unicode.txt: every code point, normalised and pre-tokenised,
 *     against hashes / counts produced by Hugging Face tokenizers;
 *   - tests/fixtures/tokenizer_cases.tsv: ids and byte offsets of Hugging Face tokenizers for
 *     all-MiniLM-L6-v2 (needs models/all-MiniLM-L6-v2 from scripts/fetch_minilm.sh; fails
 *     when it is missing). */
#include "attn_wordpiece.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXIDS 4096

static const char *model_dir(void) {
    const char *d = getenv("ATTN_MINILM_DIR");
    return d ? d : "models/all-MiniLM-L6-v2";
}

/* Encode and compare with an expected id list (n_want ids). */
static void check_ids(const attn_tokenizer *t, const char *text, int add_special, int64_t max_len,
                      const int32_t *want, int64_t n_want, const char *what) {
    int32_t ids[MAXIDS];
    int64_t n = -1;
    int rc = attn_tokenizer_encode(t, text, strlen(text), add_special, max_len, ids, &n, MAXIDS, NULL);
    CHECK(rc == 0, "%s: encode returned %d (%s)", what, rc, attn_last_error());
    if (rc) return;
    int same = n == n_want;
    for (int64_t i = 0; same && i < n; i++) same = ids[i] == want[i];
    CHECK(same, "%s: got %lld ids, want %lld", what, (long long)n, (long long)n_want);
    if (!same) {
        for (int64_t i = 0; i < n && i < 64; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
}

static void check_norm(const attn_tokenizer *t, const char *in, size_t in_len, const char *want, const char *what) {
    char out[1024];
    size_t n = 0;
    int rc = attn_tokenizer_normalize(t, in, in_len, out, sizeof out, &n);
    CHECK(rc == 0 && n == strlen(want) && memcmp(out, want, n) == 0, "%s: normalize gave rc %d \"%.*s\", want \"%s\"",
          what, rc, (int)n, out, want);
}

/* ------------------------------------------------------------------ toy vocabulary */

enum { T_PAD, T_UNK, T_CLS, T_SEP, T_MASK, T_WANT, T_HWANT, T_HED, T_UN, T_RUNN, T_HING, T_A, T_HA, T_COMMA, T_N };
static const char *const toy_tokens[T_N] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "want", "##want", "##ed",
                                            "un",    "runn",  "##ing", "a",     "##a",    ","};

static char toy_path[64];

static int write_toy_vocab(void) {
    strcpy(toy_path, "/tmp/attn_toy_vocab_XXXXXX");
    int fd = mkstemp(toy_path);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "wb");
    if (!f) return -1;
    for (int i = 0; i < T_N; i++)
        fprintf(f, "%s%s\n", toy_tokens[i], i == T_RUNN ? " \r" : (i == T_UN ? "\r" : "")); /* trailing ws is trimmed */
    fclose(f);
    return 0;
}

static void test_toy(attn_tokenizer *t, const char *label) {
    char what[128];
    snprintf(what, sizeof what, "%s unwanted running", label);
    int32_t w1[] = {T_UN, T_HWANT, T_HED, T_RUNN, T_HING};
    check_ids(t, "unwanted running", 0, 0, w1, 5, what);
    int32_t w1s[] = {T_CLS, T_UN, T_HWANT, T_HED, T_RUNN, T_HING, T_SEP};
    check_ids(t, "unwanted running", 1, 0, w1s, 7, what);
    snprintf(what, sizeof what, "%s unwantedX running", label);
    int32_t w2[] = {T_UNK, T_RUNN, T_HING};
    check_ids(t, "unwantedX running", 0, 0, w2, 3, what);
    /* lowercase + accents: "UnWäntéd" -> un ##want ##ed */
    check_ids(t, "UnW\xC3\xA4nt\xC3\xA9" "d", 0, 0, w1, 3, "uppercase+accents");
    int32_t w3[] = {T_CLS, T_SEP};
    check_ids(t, "", 1, 0, w3, 2, "empty text");
    check_ids(t, " \t\n\r ", 1, 0, w3, 2, "whitespace only");
    check_ids(t, "\x01\x02", 1, 256, w3, 2, "controls only");
    /* punctuation isolates, [UNK] for an unknown punctuation */
    int32_t w4[] = {T_A, T_COMMA, T_A, T_UNK, T_A};
    check_ids(t, "a,a!a", 0, 0, w4, 5, "punctuation split");
    /* added special tokens are matched in the raw text, not normalised */
    int32_t w5[] = {T_CLS, T_A, T_MASK, T_A, T_UNK, T_UNK, T_UNK, T_SEP};
    check_ids(t, "a[MASK]a [mask]", 1, 0, w5, 8, "special tokens in text");
    /* 100 characters are still split, 101 are [UNK] */
    char word[102];
    memset(word, 'a', 101);
    word[100] = '\0';
    int32_t w100[100];
    w100[0] = T_A;
    for (int i = 1; i < 100; i++) w100[i] = T_HA;
    check_ids(t, word, 0, 0, w100, 100, "100-char word");
    word[100] = 'a';
    word[101] = '\0';
    int32_t wunk[] = {T_UNK};
    check_ids(t, word, 0, 0, wunk, 1, "101-char word");
    /* truncation: [CLS] ... [SEP] within max_len */
    int32_t w6[] = {T_CLS, T_UN, T_HWANT, T_SEP};
    check_ids(t, "unwanted running", 1, 4, w6, 4, "truncate to 4");
    int32_t w7[] = {T_CLS, T_SEP};
    check_ids(t, "unwanted running", 1, 2, w7, 2, "truncate to 2");
    int32_t w8[] = {T_UN, T_HWANT, T_HED};
    check_ids(t, "unwanted running", 0, 3, w8, 3, "truncate to 3 without specials");
}

static void test_toy_api(attn_tokenizer *t) {
    int32_t ids[16];
    int64_t off[32], n = -1;
    const char *s = "unwanted running";
    CHECK_OK(attn_tokenizer_encode(t, s, strlen(s), 1, 0, ids, &n, 16, off));
    int64_t want_off[] = {0, 0, 0, 2, 2, 6, 6, 8, 9, 13, 13, 16, 0, 0};
    CHECK(n == 7 && memcmp(off, want_off, sizeof want_off) == 0, "offsets of unwanted running");
    /* accents: byte offsets span the original (two-byte) characters */
    s = "UnW\xC3\xA4nt\xC3\xA9" "d";
    CHECK_OK(attn_tokenizer_encode(t, s, strlen(s), 0, 0, ids, &n, 16, off));
    int64_t want_off2[] = {0, 2, 2, 7, 7, 10};
    CHECK(n == 3 && memcmp(off, want_off2, sizeof want_off2) == 0, "offsets with accents");
    /* size query, too-small buffer */
    s = "unwanted running";
    CHECK_OK(attn_tokenizer_encode(t, s, strlen(s), 1, 0, NULL, &n, 0, NULL));
    CHECK(n == 7, "size query gives %lld", (long long)n);
    CHECK_ERR(attn_tokenizer_encode(t, s, strlen(s), 1, 0, ids, &n, 3, NULL), ATTN_E_RANGE);
    CHECK(n == 7 && ids[0] == T_CLS && ids[1] == T_UN && ids[2] == T_HWANT, "partial output on ATTN_E_RANGE");
    CHECK_ERR(attn_tokenizer_encode(t, s, strlen(s), 1, 1, ids, &n, 16, NULL), ATTN_E_INVALID);
    CHECK_ERR(attn_tokenizer_encode(NULL, s, strlen(s), 1, 0, ids, &n, 16, NULL), ATTN_E_INVALID);
    CHECK_ERR(attn_tokenizer_encode(t, NULL, 3, 1, 0, ids, &n, 16, NULL), ATTN_E_INVALID);
    CHECK_OK(attn_tokenizer_encode(t, NULL, 0, 1, 0, ids, &n, 16, NULL));
    CHECK(n == 2, "NULL empty text gives [CLS] [SEP]");
    /* vocabulary queries */
    CHECK(attn_tokenizer_vocab_size(t) == T_N, "vocab size %lld", (long long)attn_tokenizer_vocab_size(t));
    CHECK(attn_tokenizer_token_to_id(t, "##want") == T_HWANT, "token_to_id ##want");
    CHECK(attn_tokenizer_token_to_id(t, "runn") == T_RUNN, "token_to_id runn (trailing space trimmed)");
    CHECK(attn_tokenizer_token_to_id(t, "un") == T_UN, "token_to_id un (CR trimmed)");
    CHECK(attn_tokenizer_token_to_id(t, "nope") == -1, "token_to_id unknown");
    const char *tk = attn_tokenizer_id_to_token(t, T_HING);
    CHECK(tk && strcmp(tk, "##ing") == 0, "id_to_token ##ing");
    CHECK(attn_tokenizer_id_to_token(t, T_N) == NULL, "id_to_token out of range");
    CHECK(attn_tokenizer_id_to_token(t, -1) == NULL, "id_to_token negative");
    CHECK(attn_tokenizer_cls_id(t) == T_CLS && attn_tokenizer_sep_id(t) == T_SEP && attn_tokenizer_pad_id(t) == T_PAD &&
              attn_tokenizer_unk_id(t) == T_UNK && attn_tokenizer_mask_id(t) == T_MASK,
          "special ids");
}

static void test_loaders(void) {
    attn_tokenizer *t = NULL;
    CHECK_ERR(attn_tokenizer_load_vocab(&t, "/nonexistent/vocab.txt", 1, -1), ATTN_E_IO);
    CHECK(t == NULL, "out stays NULL on error");
    const char *no_unk[] = {"a", "b"};
    CHECK_ERR(attn_tokenizer_from_tokens(&t, no_unk, 2, 1, -1), ATTN_E_FORMAT);
    const char *bad_utf8[] = {"[UNK]", "\xff"};
    CHECK_ERR(attn_tokenizer_from_tokens(&t, bad_utf8, 2, 1, -1), ATTN_E_FORMAT);
    CHECK_ERR(attn_tokenizer_from_tokens(&t, no_unk, 0, 1, -1), ATTN_E_INVALID);
    /* without [CLS]/[SEP]: add_special is refused, plain encoding works */
    const char *small[] = {"[UNK]", "hello"};
    CHECK_OK(attn_tokenizer_from_tokens(&t, small, 2, 1, -1));
    int32_t ids[8];
    int64_t n;
    CHECK_ERR(attn_tokenizer_encode(t, "hello", 5, 1, 0, ids, &n, 8, NULL), ATTN_E_INVALID);
    CHECK_OK(attn_tokenizer_encode(t, "Hello x", 7, 0, 0, ids, &n, 8, NULL));
    CHECK(n == 2 && ids[0] == 1 && ids[1] == 0, "hello [UNK]");
    attn_tokenizer_free(t);
    attn_tokenizer_free(NULL);

    /* tokenizer.json loader on hostile / minimal buffers */
    const char *bad[] = {"", "{", "[]", "{\"model\": 3}", "{\"model\": {\"type\": \"BPE\", \"vocab\": {}}}",
                         "{\"model\": {\"vocab\": {\"[UNK]\": -1}}, \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}",
                         "{\"model\": {\"vocab\": {\"[UNK]\": 2000000000}}, \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}",
                         "{\"model\": {\"vocab\": {\"a\": 0}}, \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}",
                         "{\"model\": {\"vocab\": {\"[UNK]\": 0}}, \"pre_tokenizer\": {\"type\": \"Whitespace\"}}",
                         "{\"model\": {\"vocab\": {\"[UNK]\": 0}}, \"normalizer\": {\"type\": \"NFC\"},"
                         " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}"};
    int want[] = {ATTN_E_FORMAT, ATTN_E_FORMAT, ATTN_E_FORMAT, ATTN_E_FORMAT, ATTN_E_UNSUPPORTED,
                  ATTN_E_FORMAT, ATTN_E_FORMAT, ATTN_E_FORMAT, ATTN_E_UNSUPPORTED, ATTN_E_UNSUPPORTED};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = attn_tokenizer_load_json_buffer(&t, bad[i], strlen(bad[i]));
        CHECK(rc == want[i] && t == NULL, "bad json %zu: rc %d want %d (%s)", i, rc, want[i], attn_last_error());
    }
    const char *ok = "{\"added_tokens\": [{\"id\": 3, \"content\": \"<s>\", \"special\": true, \"normalized\": false}],"
                     " \"normalizer\": {\"type\": \"BertNormalizer\", \"lowercase\": false, \"strip_accents\": null},"
                     " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
                     " \"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"</s>\", 4], \"cls\": [\"<s>\", 3]},"
                     " \"model\": {\"type\": \"WordPiece\", \"unk_token\": \"?\", \"continuing_subword_prefix\": \"@@\","
                     " \"max_input_chars_per_word\": 5, \"vocab\": {\"?\": 0, \"Ab\": 1, \"@@c\": 2, \"<s>\": 3, \"</s>\": 4}}}";
    CHECK_OK(attn_tokenizer_load_json_buffer(&t, ok, strlen(ok)));
    if (t) {
        int32_t w[] = {3, 1, 2, 0, 3, 0, 4};
        check_ids(t, "Abc ab<s>Abccccc", 1, 0, w, 7, "custom json (no lowercase, @@ prefix, max 5 chars)");
        attn_tokenizer_free(t);
    }
    /* an added token missing from the model vocab gets the next id (tokenizers ignores the
     * "id" in the file) and is only matched in raw text, never by WordPiece; reference values
     * from tokenizers 0.23.3 */
    const char *added = "{\"added_tokens\": [{\"id\": 5, \"content\": \"zz\", \"special\": false, \"normalized\": false}],"
                        " \"normalizer\": {\"type\": \"BertNormalizer\"}, \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
                        " \"post_processor\": null, \"model\": {\"type\": \"WordPiece\","
                        " \"vocab\": {\"[UNK]\": 0, \"a\": 1, \"z\": 2, \"##z\": 3}}}";
    CHECK_OK(attn_tokenizer_load_json_buffer(&t, added, strlen(added)));
    if (t) {
        int32_t ids2[8];
        int64_t off[16], n2 = 0;
        CHECK_OK(attn_tokenizer_encode(t, "ZZ zz azzb", 10, 1, 0, ids2, &n2, 8, off));
        int32_t w[] = {2, 3, 4, 1, 4, 0};
        int64_t wo[] = {0, 1, 1, 2, 3, 5, 6, 7, 7, 9, 9, 10};
        CHECK(n2 == 6 && memcmp(ids2, w, sizeof w) == 0 && memcmp(off, wo, sizeof wo) == 0,
              "added token outside the model vocab");
        CHECK(attn_tokenizer_token_to_id(t, "zz") == 4 && attn_tokenizer_vocab_size(t) == 5, "added token id 4");
        const char *z = attn_tokenizer_id_to_token(t, 4);
        CHECK(z && strcmp(z, "zz") == 0, "id_to_token of an added token");
        attn_tokenizer_free(t);
    }
}

static void test_normalize(void) {
    const char *tok1[] = {"[UNK]"};
    attn_tokenizer *lo = NULL, *plain = NULL, *strip = NULL, *lonly = NULL;
    CHECK_OK(attn_tokenizer_from_tokens(&lo, tok1, 1, 1, -1));
    CHECK_OK(attn_tokenizer_from_tokens(&plain, tok1, 1, 0, 0));
    CHECK_OK(attn_tokenizer_from_tokens(&strip, tok1, 1, 0, 1));
    CHECK_OK(attn_tokenizer_from_tokens(&lonly, tok1, 1, 1, 0));
    if (!lo || !plain || !strip || !lonly) return;
    const char *doc = "H\xC3\xA9ll\xC3\xB2 h\xC3\xB4w are \xC3\xBC?";
    check_norm(lo, doc, strlen(doc), "hello how are u?", "BERT uncased");
    check_norm(plain, doc, strlen(doc), doc, "no lowercase, no strip");
    check_norm(strip, doc, strlen(doc), "Hello how are u?", "strip only");
    check_norm(lonly, doc, strlen(doc), "h\xC3\xA9ll\xC3\xB2 h\xC3\xB4w are \xC3\xBC?", "lowercase only");
    check_norm(lo, "\xE4\xB8\xAD\xE6\x96\x87x", 7, " \xE4\xB8\xAD  \xE6\x96\x87 x", "CJK padding");
    check_norm(lo, "a\0b\x01" "c\xEF\xBF\xBD" "d\x7F", 10, "abcd", "NUL, control, U+FFFD removed");
    check_norm(lo, "a\tb\nc\rd\xC2\xA0" "e\xE3\x80\x80" "f", 14, "a b c d e f", "whitespace to space");
    check_norm(lo, "a\xC2\x85" "b\x0B" "c", 6, "abc", "U+0085 and VT are controls");
    check_norm(lonly, "\xC4\xB0", 2, "i\xCC\x87", "U+0130 lowercase -> i + U+0307");
    check_norm(lo, "\xC4\xB0stanbul", 9, "istanbul", "U+0130 with strip_accents");
    check_norm(lo, "\xEF\xAC\x81", 3, "\xEF\xAC\x81", "ligature kept (NFD, not NFKD)");
    check_norm(lo, "\xED\x95\x9C", 3, "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB", "Hangul decomposed by NFD");
    check_norm(lo, "", 0, "", "empty");
    char small[4];
    size_t n;
    CHECK_ERR(attn_tokenizer_normalize(lo, "hello", 5, small, sizeof small, &n), ATTN_E_RANGE);
    CHECK(n == 5, "normalize reports the needed length");
    CHECK_OK(attn_tokenizer_normalize(lo, "hello", 5, NULL, 0, &n));
    attn_tokenizer_free(lo);
    attn_tokenizer_free(plain);
    attn_tokenizer_free(strip);
    attn_tokenizer_free(lonly);
}

static void test_invalid_utf8(attn_tokenizer *t) {
    static const struct {
        const char *s;
        size_t len, off;
    } bad[] = {
        {"\xFF", 1, 0},                 {"abc\x80", 4, 3},          {"ab\xC3", 3, 2},
        {"\xC0\xAF", 2, 0},             {"x\xE0\x80\xAF", 4, 1},    {"\xED\xA0\x80", 3, 0},
        {"ok \xF4\x90\x80\x80", 7, 3}, {"\xF8\x88\x80\x80\x80", 5, 0}, {"\xE2\x82", 2, 0},
        {"a\xC3\xA9\xC3", 4, 3},        {"\xC3\x28", 2, 0},         {"[MASK]\xFE", 7, 6},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t ids[16];
        int64_t n;
        int rc = attn_tokenizer_encode(t, bad[i].s, bad[i].len, 1, 0, ids, &n, 16, NULL);
        char want[64];
        snprintf(want, sizeof want, "byte offset %zu", bad[i].off);
        CHECK(rc == ATTN_E_FORMAT && strstr(attn_last_error(), want), "invalid utf8 case %zu: rc %d, message \"%s\"", i, rc,
              attn_last_error());
        char out[64];
        size_t ol;
        CHECK_ERR(attn_tokenizer_normalize(t, bad[i].s, bad[i].len, out, sizeof out, &ol), ATTN_E_FORMAT);
        size_t off = 99;
        CHECK_ERR(attn_tokenizer_validate_utf8(bad[i].s, bad[i].len, &off), ATTN_E_FORMAT);
        CHECK(off == bad[i].off, "validate offset %zu want %zu", off, bad[i].off);
    }
    /* max-length valid sequences pass */
    const char *good = "\x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF";
    CHECK_OK(attn_tokenizer_validate_utf8(good, strlen(good), NULL));
}

/* Long hostile inputs: a huge single word, many short words with truncation, deep runs of
 * combining marks. Checks only that they finish with sane results. */
static void test_huge(attn_tokenizer *t) {
    size_t len = 4u << 20;
    char *s = malloc(len);
    if (!s) return;
    memset(s, 'a', len);
    int32_t ids[8];
    int64_t n;
    CHECK_OK(attn_tokenizer_encode(t, s, len, 1, 0, ids, &n, 8, NULL));
    CHECK(n == 3 && ids[1] == T_UNK, "4 MiB word -> [CLS] [UNK] [SEP]");
    for (size_t i = 0; i < len; i += 2) s[i] = ' ';
    CHECK_OK(attn_tokenizer_encode(t, s, len, 1, 0, NULL, &n, 0, NULL));
    CHECK(n == (int64_t)(len / 2) + 2, "2M one-letter words counted: %lld", (long long)n);
    int32_t big[256];
    CHECK_OK(attn_tokenizer_encode(t, s, len, 1, 256, big, &n, 256, NULL));
    CHECK(n == 256 && big[0] == T_CLS && big[255] == T_SEP && big[254] == T_A, "truncated to 256");
    /* 1M combining marks (U+0301, Mn, stripped) then U+1D165 / U+1D16D runs (Mc, reordered) */
    size_t k = 0;
    while (k + 8 <= len) {
        memcpy(s + k, "\xF0\x9D\x85\xAD\xF0\x9D\x85\xA5", 8);
        k += 8;
    }
    CHECK_OK(attn_tokenizer_encode(t, s, k, 1, 0, ids, &n, 8, NULL));
    CHECK(n == 3 && ids[1] == T_UNK, "long mark run -> [UNK]");
    char *out = malloc(len + 1);
    size_t ol;
    if (out) {
        CHECK_OK(attn_tokenizer_normalize(t, s, k, out, len + 1, &ol));
        CHECK(ol == k && memcmp(out, "\xF0\x9D\x85\xA5", 4) == 0, "canonical reordering of a long run");
        free(out);
    }
    free(s);
}

/* ------------------------------------------------------------------ fixtures */

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    size_t got;
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, 2 * cap + 1);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (b) b[n] = '\0';
    *len = n;
    return b;
}

static size_t put_utf8(char *o, uint32_t c) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Undo the escaping of gen_tokenizer_fixtures.py (in place; the result is never longer). */
static size_t unescape(char *s) {
    char *o = s, *p = s;
    while (*p) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        p++;
        char c = *p ? *p++ : '\\';
        if (c == 't') *o++ = '\t';
        else if (c == 'n') *o++ = '\n';
        else if (c == 'r') *o++ = '\r';
        else if (c == 'u' || c == 'U') {
            int nd = c == 'u' ? 4 : 8;
            char hex[9] = {0};
            for (int i = 0; i < nd && *p; i++) hex[i] = *p++;
            o += put_utf8(o, (uint32_t)strtoul(hex, NULL, 16));
        } else *o++ = c;
    }
    *o = '\0';
    return (size_t)(o - s);
}

static int parse_list(char *s, int64_t *v, int64_t cap, int pairs) {
    int64_t n = 0;
    char *p = s;
    while (*p && n < cap) {
        v[n++] = strtoll(p, &p, 10);
        if (*p == ',' || *p == ':') p++;
    }
    return pairs ? (int)(n / 2) : (int)n;
}

static void test_cases(const attn_tokenizer *tj, const attn_tokenizer *tv) {
    size_t len;
    char *data = slurp(attn_test_fixture("tokenizer_cases.tsv"), &len);
    CHECK(data != NULL, "cannot read %s (run scripts/gen_tokenizer_fixtures.py)", attn_test_fixture("tokenizer_cases.tsv"));
    if (!data) return;
    static int64_t want[2 * MAXIDS], woff[4 * MAXIDS], off[2 * MAXIDS];
    static int32_t ids[MAXIDS];
    int n_cases = 0, n_ok = 0;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        char *f[6];
        int nf = 0;
        char *p = line;
        while (nf < 6) {
            f[nf++] = p;
            char *tab = strchr(p, '\t');
            if (!tab) break;
            *tab = '\0';
            p = tab + 1;
        }
        if (nf != 6) {
            CHECK(0, "malformed fixture line %d", n_cases);
            continue;
        }
        n_cases++;
        int64_t max_len = strtoll(f[1], NULL, 10);
        int add = atoi(f[2]);
        size_t tl = unescape(f[3]);
        int nw = parse_list(f[4], want, 2 * MAXIDS, 0);
        int no = parse_list(f[5], woff, 4 * MAXIDS, 1);
        for (int which = 0; which < 2; which++) {
            const attn_tokenizer *t = which ? tv : tj;
            if (!t) continue;
            int64_t n = -1;
            int rc = attn_tokenizer_encode(t, f[3], tl, add, max_len, ids, &n, MAXIDS, off);
            int same = rc == 0 && n == nw;
            for (int64_t i = 0; same && i < n; i++) same = ids[i] == want[i];
            int same_off = same && no == nw;
            for (int64_t i = 0; same_off && i < 2 * n; i++) same_off = off[i] == woff[i];
            CHECK(same, "case %s (%s): rc %d, %lld ids, want %d ids", f[0], which ? "vocab.txt" : "tokenizer.json", rc,
                  (long long)n, nw);
            if (!same && rc == 0) {
                int64_t i = 0;
                while (i < n && i < nw && ids[i] == want[i]) i++;
                fprintf(stderr, "  first difference at %lld: got %d want %lld\n", (long long)i, i < n ? ids[i] : -1,
                        i < nw ? (long long)want[i] : -1LL);
            }
            if (which == 0) {
                CHECK(same_off || !same, "case %s: byte offsets differ from tokenizers", f[0]);
                n_ok += same && same_off;
            }
        }
    }
    CHECK(n_cases >= 100, "only %d fixture cases", n_cases);
    printf("tokenizer fixtures: %d/%d cases identical (ids and offsets)\n", n_ok, n_cases);
    free(data);
}

static uint64_t fnv64(const char *s, size_t n) {
    uint64_t h = 0xCBF29CE484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001B3ULL;
    }
    return h;
}

/* Normalize into a static buffer; returns the length (or -1). */
static long norm_to(const attn_tokenizer *t, const char *s, size_t n, char *out, size_t cap) {
    size_t ol = 0;
    return attn_tokenizer_normalize(t, s, n, out, cap, &ol) == 0 ? (long)ol : -1;
}

/* The reordering code of gen_tokenizer_fixtures.py reorder_codes() for code point c. */
static int reorder_code(const attn_tokenizer *st, uint32_t c) {
    static const char W216[] = "\xF0\x9D\x85\xA5", W226[] = "\xF0\x9D\x85\xAD";
    char cs[4], a[16], b[16], na[64], nb[64], alone[32], want[64];
    size_t lc = put_utf8(cs, c);
    long nl = norm_to(st, cs, lc, alone, sizeof alone);
    int32_t ids[8];
    int64_t off[16], n = 0;
    /* probe A: "a" + c + U+1D165 */
    size_t la = 0;
    a[la++] = 'a';
    memcpy(a + la, cs, lc);
    la += lc;
    memcpy(a + la, W216, 4);
    la += 4;
    int fa = attn_tokenizer_encode(st, a, la, 0, 0, ids, &n, 8, off) != 0 || n < 1 || off[2 * n - 1] != (int64_t)la;
    long l1 = norm_to(st, a, la, na, sizeof na);
    size_t lw = 0;
    want[lw++] = 'a';
    memcpy(want + lw, alone, (size_t)(nl > 0 ? nl : 0));
    lw += (size_t)(nl > 0 ? nl : 0);
    memcpy(want + lw, W216, 4);
    lw += 4;
    fa = fa || l1 != (long)lw || memcmp(na, want, lw) != 0;
    /* probe B: "x " + U+1D16D + c */
    size_t lb = 0;
    b[lb++] = 'x';
    b[lb++] = ' ';
    memcpy(b + lb, W226, 4);
    lb += 4;
    memcpy(b + lb, cs, lc);
    lb += lc;
    int fb = 1;
    if (attn_tokenizer_encode(st, b, lb, 0, 0, ids, &n, 8, off) == 0)
        for (int64_t i = 0; i < n; i++)
            if (off[2 * i] == 2) fb = 0;
    long l2 = norm_to(st, b, lb, nb, sizeof nb);
    memcpy(want, "x ", 2);
    memcpy(want + 2, W226, 4);
    memcpy(want + 6, alone, (size_t)(nl > 0 ? nl : 0));
    lw = 6 + (size_t)(nl > 0 ? nl : 0);
    fb = fb || l2 != (long)lw || memcmp(nb, want, lw) != 0;
    return 2 * fa + fb;
}

/* Every code point: normalisation hashes per block, pre-tokenizer token counts, and
 * canonical-reordering codes. */
static void test_unicode(void) {
    size_t len;
    char *data = slurp(attn_test_fixture("tokenizer_unicode.txt"), &len);
    CHECK(data != NULL, "cannot read %s", attn_test_fixture("tokenizer_unicode.txt"));
    if (!data) return;
    const char *tok1[] = {"[UNK]"}, *tok2[] = {"[UNK]", "a"};
    attn_tokenizer *lo = NULL, *plain = NULL, *pre = NULL, *st = NULL;
    CHECK_OK(attn_tokenizer_from_tokens(&st, tok1, 1, 0, 1));
    CHECK_OK(attn_tokenizer_from_tokens(&lo, tok1, 1, 1, -1));
    CHECK_OK(attn_tokenizer_from_tokens(&plain, tok1, 1, 0, 0));
    CHECK_OK(attn_tokenizer_from_tokens(&pre, tok2, 2, 0, 0));
    char *in = malloc(4096 * 5), *out = malloc(4096 * 40);
    int blocks = 0, bad_blocks = 0, bad_cps = 0, bad_reorder = 0;
    uint32_t cp = 0, rcp = 0;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line && lo && plain && pre && st && in && out;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == 'N') {
            char mode[16];
            unsigned first, last;
            unsigned long long h;
            if (sscanf(line, "N %15s %x %x %llx", mode, &first, &last, &h) != 4) continue;
            size_t k = 0;
            for (uint32_t c = first; c <= last; c++) {
                if (c >= 0xD800 && c <= 0xDFFF) continue;
                if (k) in[k++] = ' ';
                k += put_utf8(in + k, c);
            }
            size_t ol = 0;
            int rc = attn_tokenizer_normalize(strcmp(mode, "lower") == 0 ? lo : plain, in, k, out, 4096 * 40, &ol);
            blocks++;
            if (rc || fnv64(out, ol) != h) {
                bad_blocks++;
                if (bad_blocks < 5) CHECK(0, "normalize block %s %X-%X differs from tokenizers", mode, first, last);
            }
        } else if (line[0] == 'C') {
            char *p = line + 1;
            while (*p) {
                long want = strtol(p, &p, 10);
                if (*p != 'x') break;
                long run = strtol(p + 1, &p, 10);
                for (long r = 0; r < run && cp < 0x110000; r++) {
                    if (cp == 0xD800) cp = 0xE000;
                    char s[8];
                    s[0] = 'a';
                    size_t k = 1 + put_utf8(s + 1, cp);
                    s[k++] = 'a';
                    int32_t ids[8];
                    int64_t n = 0;
                    int rc = attn_tokenizer_encode(pre, s, k, 0, 0, ids, &n, 8, NULL);
                    if (rc || n != want) {
                        bad_cps++;
                        if (bad_cps < 5) CHECK(0, "pre-tokenizer U+%04X: %lld ids, tokenizers %ld", cp, (long long)n, want);
                    }
                    cp++;
                }
            }
        } else if (line[0] == 'S') {
            char *p = line + 1;
            while (*p) {
                long want = strtol(p, &p, 10);
                if (*p != 'x') break;
                long run = strtol(p + 1, &p, 10);
                for (long r = 0; r < run && rcp < 0x110000; r++) {
                    if (rcp == 0xD800) rcp = 0xE000;
                    int got = reorder_code(st, rcp);
                    if (got != want) {
                        bad_reorder++;
                        if (bad_reorder < 5) CHECK(0, "reordering of U+%04X: code %d, tokenizers %ld", rcp, got, want);
                    }
                    rcp++;
                }
            }
        }
    }
    CHECK(blocks == 2 * 272 && bad_blocks == 0, "%d normalisation blocks, %d differ", blocks, bad_blocks);
    CHECK(cp == 0x110000 && bad_cps == 0, "pre-tokenizer classes up to U+%X, %d differ", cp, bad_cps);
    CHECK(rcp == 0x110000 && bad_reorder == 0, "reordering codes up to U+%X, %d differ", rcp, bad_reorder);
    free(in);
    free(out);
    free(data);
    attn_tokenizer_free(lo);
    attn_tokenizer_free(plain);
    attn_tokenizer_free(pre);
    attn_tokenizer_free(st);
}

static void test_model(void) {
    char path[512], vpath[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", model_dir());
    snprintf(vpath, sizeof vpath, "%s/vocab.txt", model_dir());
    if (access(path, R_OK) != 0) {
        CHECK(0, "%s is missing: run scripts/fetch_minilm.sh (the tokenizer parity cases need it)", path);
        return;
    }
    attn_tokenizer *tj = NULL, *tv = NULL;
    CHECK_OK(attn_tokenizer_load_json(&tj, path));
    CHECK_OK(attn_tokenizer_load_vocab(&tv, vpath, 1, -1));
    if (!tj) return;
    CHECK(attn_tokenizer_vocab_size(tj) == 30522, "vocab size %lld", (long long)attn_tokenizer_vocab_size(tj));
    CHECK(attn_tokenizer_cls_id(tj) == 101 && attn_tokenizer_sep_id(tj) == 102 && attn_tokenizer_pad_id(tj) == 0 &&
              attn_tokenizer_unk_id(tj) == 100 && attn_tokenizer_mask_id(tj) == 103,
          "special ids of all-MiniLM-L6-v2");
    const char *s = attn_tokenizer_id_to_token(tj, 7592);
    CHECK(s && strcmp(s, "hello") == 0, "id 7592 is hello");
    int32_t w[] = {101, 7592, 2129, 2024, 1057, 1029, 102};
    check_ids(tj, "H\xC3\xA9ll\xC3\xB2 h\xC3\xB4w are \xC3\xBC?", 1, 256, w, 7, "MiniLM doc example");
    test_cases(tj, tv);
    /* NUL inside a text given with its length (issue 11, fault 5): removed as a control character,
     * as HF tokenizers' BertNormalizer does; ids from tokenizers 0.x on this tokenizer.json:
     * Tokenizer.encode("hello\x00world").ids etc. */
    {
        static const struct {
            const char *text;
            size_t len;
            int32_t ids[6];
            int n;
        } nul[] = {{"hello\0world", 11, {101, 7592, 11108, 102}, 4},
                   {"a\0\0b c\0", 7, {101, 11113, 1039, 102}, 4},
                   {"\0", 1, {101, 102}, 2}};
        for (int c = 0; c < 3; c++) {
            int32_t ids[16];
            int64_t n = 0;
            int rc = attn_tokenizer_encode(tj, nul[c].text, nul[c].len, 1, 0, ids, &n, 16, NULL);
            int same = rc == 0 && n == nul[c].n;
            for (int i = 0; same && i < n; i++) same = ids[i] == nul[c].ids[i];
            CHECK(same, "NUL case %d: rc %d, %lld ids (want HF's %d)", c, rc, (long long)n, nul[c].n);
        }
    }
    attn_tokenizer_free(tj);
    attn_tokenizer_free(tv);
}

int main(void) {
    attn_test_name = "tokenizer";
    attn_tokenizer *t = NULL;
    CHECK_OK(attn_tokenizer_from_tokens(&t, toy_tokens, T_N, 1, -1));
    if (t) {
        test_toy(t, "from_tokens");
        test_toy_api(t);
        test_invalid_utf8(t);
        test_huge(t);
        attn_tokenizer_free(t);
    }
    t = NULL;
    CHECK(write_toy_vocab() == 0, "cannot write the toy vocab file");
    CHECK_OK(attn_tokenizer_load_vocab(&t, toy_path, 1, -1));
    unlink(toy_path);
    if (t) {
        test_toy(t, "vocab.txt");
        test_toy_api(t);
        attn_tokenizer_free(t);
    }
    test_loaders();
    test_normalize();
    test_unicode();
    test_model();
    return attn_test_finish();
}
