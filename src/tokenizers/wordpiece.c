/* BERT WordPiece tokenizer: BertNormalizer + BertPreTokenizer + WordPiece + [CLS]/[SEP].
 *
 * Matches the behaviour of the Hugging Face `tokenizers` library (normalizers/bert.rs,
 * pre_tokenizers/bert.rs, models/wordpiece, processors/template.rs, added_vocabulary.rs);
 * see include/attn_tokenizer.h for the pipeline. The text is processed as a stream: each
 * input character is normalized on its own (every BertNormalizer step is per character,
 * except the canonical reordering of NFD, which holds back a run of combining marks until
 * the next starter), the characters are grouped into words, and each finished word goes
 * through WordPiece. Memory use is therefore bounded (by the longest word WordPiece can
 * still split, max_input_chars_per_word, and the longest reordered run), whatever the input
 * size, and encoding stops as soon as the truncation length is reached. Every character
 * carries the byte span of the input character it came from, which gives HF's offsets. */
#include "attn_tokenizer.h"
#include "core/internal.h"

#include <cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ------------------------------------------------------------------ types */

#define TOK_MAX_AFFIX 8            /* special ids before / after the sequence */
#define TOK_MAX_WORD_CHARS 1000000 /* accepted max_input_chars_per_word */
#define TOK_MAX_FILE (1u << 30)    /* largest tokenizer.json / vocab.txt accepted */

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

/* ------------------------------------------------------------------ UTF-8 */

/* Decode one code point at s[i..len). Returns its byte length (1..4) or 0 when the bytes
 * there are not well-formed UTF-8 (RFC 3629 / Unicode Table 3-7). */
static int utf8_decode(const unsigned char *s, size_t len, size_t i, int32_t *cp) {
    unsigned c = s[i];
    if (c < 0x80) {
        *cp = (int32_t)c;
        return 1;
    }
    size_t left = len - i;
    if (c >= 0xC2 && c <= 0xDF) {
        if (left < 2 || (s[i + 1] & 0xC0) != 0x80) return 0;
        *cp = (int32_t)(((c & 0x1F) << 6) | (s[i + 1] & 0x3F));
        return 2;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3) return 0;
        unsigned c1 = s[i + 1], c2 = s[i + 2];
        unsigned lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* surrogates */
        if (c1 < lo || c1 > hi || (c2 & 0xC0) != 0x80) return 0;
        *cp = (int32_t)(((c & 0x0F) << 12) | ((c1 & 0x3F) << 6) | (c2 & 0x3F));
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4) return 0;
        unsigned c1 = s[i + 1], c2 = s[i + 2], c3 = s[i + 3];
        unsigned lo = 0x80, hi = 0xBF;
        if (c == 0xF0) lo = 0x90;      /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* > U+10FFFF */
        if (c1 < lo || c1 > hi || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80) return 0;
        *cp = (int32_t)(((c & 0x07) << 18) | ((c1 & 0x3F) << 12) | ((c2 & 0x3F) << 6) | (c3 & 0x3F));
        return 4;
    }
    return 0;
}

static int utf8_encode(int32_t c, char *out) {
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

int attn_tokenizer_validate_utf8(const char *s, size_t len, size_t *bad_offset) {
    if (!s && len) return attn_set_error(ATTN_E_INVALID, "validate_utf8: NULL text with length %zu", len);
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        /* fast path over ASCII */
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        int n = utf8_decode(u, len, i, &cp);
        if (!n) {
            if (bad_offset) *bad_offset = i;
            return attn_set_error(ATTN_E_FORMAT, "invalid UTF-8 at byte offset %zu (byte 0x%02X)", i,
                                  (unsigned)u[i]);
        }
        i += (size_t)n;
    }
    if (bad_offset) *bad_offset = len;
    return ATTN_OK;
}

/* ------------------------------------------------------------------ character classes */

/* Rust's char::is_whitespace (Unicode White_Space). BertNormalizer's is_whitespace adds
 * \t \n \r, which are already in this set. */
static int is_ws(int32_t c) {
    if (c <= 0x7F) return c == ' ' || (c >= 0x09 && c <= 0x0D);
    switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
        return 1;
    default:
        return c >= 0x2000 && c <= 0x200A;
    }
}

/* Character sets for which `tokenizers` uses its own, older Unicode data (general categories
 * from the unicode_categories crate, combining classes from its normalization crate):
 * characters added or re-categorised since then are not punctuation / control / Mn /
 * non-starters for it, so utf8proc's newer data would disagree on about 650 code points.
 * These sets were generated from tokenizers' behaviour over every code point
 * (scripts/gen_tokenizer_fixtures.py --c-tables) and are checked exhaustively by
 * tests/test_tokenizer.c against tests/fixtures/tokenizer_unicode.txt. utf8proc still gives
 * the decompositions, combining-class values and case mappings.
 *   tbl_punct:      non-ASCII characters BertPreTokenizer isolates (categories P*)
 *   tbl_removed:    characters clean_text removes (U+0000, U+FFFD, Cc except \t \n \r, Cf, Co)
 *   tbl_mn:         characters strip_accents removes after NFD (category Mn)
 *   tbl_nonstarter: characters NFD's canonical reordering moves (combining class > 0) */
typedef struct {
    int32_t lo, hi;
} cp_range;

/* BEGIN GENERATED TABLES: python3 scripts/gen_tokenizer_fixtures.py --c-tables (tokenizers 0.23.3) */
static const cp_range tbl_punct[152] = {
    {0xA1, 0xA1}, {0xA7, 0xA7}, {0xAB, 0xAB}, {0xB6, 0xB7}, {0xBB, 0xBB},
    {0xBF, 0xBF}, {0x37E, 0x37E}, {0x387, 0x387}, {0x55A, 0x55F}, {0x589, 0x58A},
    {0x5BE, 0x5BE}, {0x5C0, 0x5C0}, {0x5C3, 0x5C3}, {0x5C6, 0x5C6}, {0x5F3, 0x5F4},
    {0x609, 0x60A}, {0x60C, 0x60D}, {0x61B, 0x61B}, {0x61E, 0x61F}, {0x66A, 0x66D},
    {0x6D4, 0x6D4}, {0x700, 0x70D}, {0x7F7, 0x7F9}, {0x830, 0x83E}, {0x85E, 0x85E},
    {0x964, 0x965}, {0x970, 0x970}, {0xAF0, 0xAF0}, {0xDF4, 0xDF4}, {0xE4F, 0xE4F},
    {0xE5A, 0xE5B}, {0xF04, 0xF12}, {0xF14, 0xF14}, {0xF3A, 0xF3D}, {0xF85, 0xF85},
    {0xFD0, 0xFD4}, {0xFD9, 0xFDA}, {0x104A, 0x104F}, {0x10FB, 0x10FB}, {0x1360, 0x1368},
    {0x1400, 0x1400}, {0x166D, 0x166E}, {0x169B, 0x169C}, {0x16EB, 0x16ED}, {0x1735, 0x1736},
    {0x17D4, 0x17D6}, {0x17D8, 0x17DA}, {0x1800, 0x180A}, {0x1944, 0x1945}, {0x1A1E, 0x1A1F},
    {0x1AA0, 0x1AA6}, {0x1AA8, 0x1AAD}, {0x1B5A, 0x1B60}, {0x1BFC, 0x1BFF}, {0x1C3B, 0x1C3F},
    {0x1C7E, 0x1C7F}, {0x1CC0, 0x1CC7}, {0x1CD3, 0x1CD3}, {0x2010, 0x2027}, {0x2030, 0x2043},
    {0x2045, 0x2051}, {0x2053, 0x205E}, {0x207D, 0x207E}, {0x208D, 0x208E}, {0x2308, 0x230B},
    {0x2329, 0x232A}, {0x2768, 0x2775}, {0x27C5, 0x27C6}, {0x27E6, 0x27EF}, {0x2983, 0x2998},
    {0x29D8, 0x29DB}, {0x29FC, 0x29FD}, {0x2CF9, 0x2CFC}, {0x2CFE, 0x2CFF}, {0x2D70, 0x2D70},
    {0x2E00, 0x2E2E}, {0x2E30, 0x2E42}, {0x3001, 0x3003}, {0x3008, 0x3011}, {0x3014, 0x301F},
    {0x3030, 0x3030}, {0x303D, 0x303D}, {0x30A0, 0x30A0}, {0x30FB, 0x30FB}, {0xA4FE, 0xA4FF},
    {0xA60D, 0xA60F}, {0xA673, 0xA673}, {0xA67E, 0xA67E}, {0xA6F2, 0xA6F7}, {0xA874, 0xA877},
    {0xA8CE, 0xA8CF}, {0xA8F8, 0xA8FA}, {0xA8FC, 0xA8FC}, {0xA92E, 0xA92F}, {0xA95F, 0xA95F},
    {0xA9C1, 0xA9CD}, {0xA9DE, 0xA9DF}, {0xAA5C, 0xAA5F}, {0xAADE, 0xAADF}, {0xAAF0, 0xAAF1},
    {0xABEB, 0xABEB}, {0xFD3E, 0xFD3F}, {0xFE10, 0xFE19}, {0xFE30, 0xFE52}, {0xFE54, 0xFE61},
    {0xFE63, 0xFE63}, {0xFE68, 0xFE68}, {0xFE6A, 0xFE6B}, {0xFF01, 0xFF03}, {0xFF05, 0xFF0A},
    {0xFF0C, 0xFF0F}, {0xFF1A, 0xFF1B}, {0xFF1F, 0xFF20}, {0xFF3B, 0xFF3D}, {0xFF3F, 0xFF3F},
    {0xFF5B, 0xFF5B}, {0xFF5D, 0xFF5D}, {0xFF5F, 0xFF65}, {0x10100, 0x10102}, {0x1039F, 0x1039F},
    {0x103D0, 0x103D0}, {0x1056F, 0x1056F}, {0x10857, 0x10857}, {0x1091F, 0x1091F}, {0x1093F, 0x1093F},
    {0x10A50, 0x10A58}, {0x10A7F, 0x10A7F}, {0x10AF0, 0x10AF6}, {0x10B39, 0x10B3F}, {0x10B99, 0x10B9C},
    {0x11047, 0x1104D}, {0x110BB, 0x110BC}, {0x110BE, 0x110C1}, {0x11140, 0x11143}, {0x11174, 0x11175},
    {0x111C5, 0x111C9}, {0x111CD, 0x111CD}, {0x111DB, 0x111DB}, {0x111DD, 0x111DF}, {0x11238, 0x1123D},
    {0x112A9, 0x112A9}, {0x114C6, 0x114C6}, {0x115C1, 0x115D7}, {0x11641, 0x11643}, {0x1173C, 0x1173E},
    {0x12470, 0x12474}, {0x16A6E, 0x16A6F}, {0x16AF5, 0x16AF5}, {0x16B37, 0x16B3B}, {0x16B44, 0x16B44},
    {0x1BC9F, 0x1BC9F}, {0x1DA87, 0x1DA8B},
};
static const cp_range tbl_removed[25] = {
    {0x0, 0x8}, {0xB, 0xC}, {0xE, 0x1F}, {0x7F, 0x9F}, {0xAD, 0xAD},
    {0x600, 0x605}, {0x61C, 0x61C}, {0x6DD, 0x6DD}, {0x70F, 0x70F}, {0x180E, 0x180E},
    {0x200B, 0x200F}, {0x202A, 0x202E}, {0x2060, 0x2064}, {0x2066, 0x206F}, {0xE000, 0xF8FF},
    {0xFEFF, 0xFEFF}, {0xFFF9, 0xFFFB}, {0xFFFD, 0xFFFD}, {0x110BD, 0x110BD}, {0x1BCA0, 0x1BCA3},
    {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xF0000, 0xFFFFD}, {0x100000, 0x10FFFD},
};
static const cp_range tbl_mn[266] = {
    {0x300, 0x36F}, {0x483, 0x487}, {0x591, 0x5BD}, {0x5BF, 0x5BF}, {0x5C1, 0x5C2},
    {0x5C4, 0x5C5}, {0x5C7, 0x5C7}, {0x610, 0x61A}, {0x64B, 0x65F}, {0x670, 0x670},
    {0x6D6, 0x6DC}, {0x6DF, 0x6E4}, {0x6E7, 0x6E8}, {0x6EA, 0x6ED}, {0x711, 0x711},
    {0x730, 0x74A}, {0x7A6, 0x7B0}, {0x7EB, 0x7F3}, {0x816, 0x819}, {0x81B, 0x823},
    {0x825, 0x827}, {0x829, 0x82D}, {0x859, 0x85B}, {0x8E3, 0x902}, {0x93A, 0x93A},
    {0x93C, 0x93C}, {0x941, 0x948}, {0x94D, 0x94D}, {0x951, 0x957}, {0x962, 0x963},
    {0x981, 0x981}, {0x9BC, 0x9BC}, {0x9C1, 0x9C4}, {0x9CD, 0x9CD}, {0x9E2, 0x9E3},
    {0xA01, 0xA02}, {0xA3C, 0xA3C}, {0xA41, 0xA42}, {0xA47, 0xA48}, {0xA4B, 0xA4D},
    {0xA51, 0xA51}, {0xA70, 0xA71}, {0xA75, 0xA75}, {0xA81, 0xA82}, {0xABC, 0xABC},
    {0xAC1, 0xAC5}, {0xAC7, 0xAC8}, {0xACD, 0xACD}, {0xAE2, 0xAE3}, {0xB01, 0xB01},
    {0xB3C, 0xB3C}, {0xB3F, 0xB3F}, {0xB41, 0xB44}, {0xB4D, 0xB4D}, {0xB56, 0xB56},
    {0xB62, 0xB63}, {0xB82, 0xB82}, {0xBC0, 0xBC0}, {0xBCD, 0xBCD}, {0xC00, 0xC00},
    {0xC3E, 0xC40}, {0xC46, 0xC48}, {0xC4A, 0xC4D}, {0xC55, 0xC56}, {0xC62, 0xC63},
    {0xC81, 0xC81}, {0xCBC, 0xCBC}, {0xCBF, 0xCBF}, {0xCC6, 0xCC6}, {0xCCC, 0xCCD},
    {0xCE2, 0xCE3}, {0xD01, 0xD01}, {0xD41, 0xD44}, {0xD4D, 0xD4D}, {0xD62, 0xD63},
    {0xDCA, 0xDCA}, {0xDD2, 0xDD4}, {0xDD6, 0xDD6}, {0xE31, 0xE31}, {0xE34, 0xE3A},
    {0xE47, 0xE4E}, {0xEB1, 0xEB1}, {0xEB4, 0xEB9}, {0xEBB, 0xEBC}, {0xEC8, 0xECD},
    {0xF18, 0xF19}, {0xF35, 0xF35}, {0xF37, 0xF37}, {0xF39, 0xF39}, {0xF71, 0xF7E},
    {0xF80, 0xF84}, {0xF86, 0xF87}, {0xF8D, 0xF97}, {0xF99, 0xFBC}, {0xFC6, 0xFC6},
    {0x102D, 0x1030}, {0x1032, 0x1037}, {0x1039, 0x103A}, {0x103D, 0x103E}, {0x1058, 0x1059},
    {0x105E, 0x1060}, {0x1071, 0x1074}, {0x1082, 0x1082}, {0x1085, 0x1086}, {0x108D, 0x108D},
    {0x109D, 0x109D}, {0x135D, 0x135F}, {0x1712, 0x1714}, {0x1732, 0x1734}, {0x1752, 0x1753},
    {0x1772, 0x1773}, {0x17B4, 0x17B5}, {0x17B7, 0x17BD}, {0x17C6, 0x17C6}, {0x17C9, 0x17D3},
    {0x17DD, 0x17DD}, {0x180B, 0x180D}, {0x18A9, 0x18A9}, {0x1920, 0x1922}, {0x1927, 0x1928},
    {0x1932, 0x1932}, {0x1939, 0x193B}, {0x1A17, 0x1A18}, {0x1A1B, 0x1A1B}, {0x1A56, 0x1A56},
    {0x1A58, 0x1A5E}, {0x1A60, 0x1A60}, {0x1A62, 0x1A62}, {0x1A65, 0x1A6C}, {0x1A73, 0x1A7C},
    {0x1A7F, 0x1A7F}, {0x1AB0, 0x1ABD}, {0x1B00, 0x1B03}, {0x1B34, 0x1B34}, {0x1B36, 0x1B3A},
    {0x1B3C, 0x1B3C}, {0x1B42, 0x1B42}, {0x1B6B, 0x1B73}, {0x1B80, 0x1B81}, {0x1BA2, 0x1BA5},
    {0x1BA8, 0x1BA9}, {0x1BAB, 0x1BAD}, {0x1BE6, 0x1BE6}, {0x1BE8, 0x1BE9}, {0x1BED, 0x1BED},
    {0x1BEF, 0x1BF1}, {0x1C2C, 0x1C33}, {0x1C36, 0x1C37}, {0x1CD0, 0x1CD2}, {0x1CD4, 0x1CE0},
    {0x1CE2, 0x1CE8}, {0x1CED, 0x1CED}, {0x1CF4, 0x1CF4}, {0x1CF8, 0x1CF9}, {0x1DC0, 0x1DF5},
    {0x1DFC, 0x1DFF}, {0x20D0, 0x20DC}, {0x20E1, 0x20E1}, {0x20E5, 0x20F0}, {0x2CEF, 0x2CF1},
    {0x2D7F, 0x2D7F}, {0x2DE0, 0x2DFF}, {0x302A, 0x302D}, {0x3099, 0x309A}, {0xA66F, 0xA66F},
    {0xA674, 0xA67D}, {0xA69E, 0xA69F}, {0xA6F0, 0xA6F1}, {0xA802, 0xA802}, {0xA806, 0xA806},
    {0xA80B, 0xA80B}, {0xA825, 0xA826}, {0xA8C4, 0xA8C4}, {0xA8E0, 0xA8F1}, {0xA926, 0xA92D},
    {0xA947, 0xA951}, {0xA980, 0xA982}, {0xA9B3, 0xA9B3}, {0xA9B6, 0xA9B9}, {0xA9BC, 0xA9BC},
    {0xA9E5, 0xA9E5}, {0xAA29, 0xAA2E}, {0xAA31, 0xAA32}, {0xAA35, 0xAA36}, {0xAA43, 0xAA43},
    {0xAA4C, 0xAA4C}, {0xAA7C, 0xAA7C}, {0xAAB0, 0xAAB0}, {0xAAB2, 0xAAB4}, {0xAAB7, 0xAAB8},
    {0xAABE, 0xAABF}, {0xAAC1, 0xAAC1}, {0xAAEC, 0xAAED}, {0xAAF6, 0xAAF6}, {0xABE5, 0xABE5},
    {0xABE8, 0xABE8}, {0xABED, 0xABED}, {0xFB1E, 0xFB1E}, {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F},
    {0x101FD, 0x101FD}, {0x102E0, 0x102E0}, {0x10376, 0x1037A}, {0x10A01, 0x10A03}, {0x10A05, 0x10A06},
    {0x10A0C, 0x10A0F}, {0x10A38, 0x10A3A}, {0x10A3F, 0x10A3F}, {0x10AE5, 0x10AE6}, {0x11001, 0x11001},
    {0x11038, 0x11046}, {0x1107F, 0x11081}, {0x110B3, 0x110B6}, {0x110B9, 0x110BA}, {0x11100, 0x11102},
    {0x11127, 0x1112B}, {0x1112D, 0x11134}, {0x11173, 0x11173}, {0x11180, 0x11181}, {0x111B6, 0x111BE},
    {0x111CA, 0x111CC}, {0x1122F, 0x11231}, {0x11234, 0x11234}, {0x11236, 0x11237}, {0x112DF, 0x112DF},
    {0x112E3, 0x112EA}, {0x11300, 0x11301}, {0x1133C, 0x1133C}, {0x11340, 0x11340}, {0x11366, 0x1136C},
    {0x11370, 0x11374}, {0x114B3, 0x114B8}, {0x114BA, 0x114BA}, {0x114BF, 0x114C0}, {0x114C2, 0x114C3},
    {0x115B2, 0x115B5}, {0x115BC, 0x115BD}, {0x115BF, 0x115C0}, {0x115DC, 0x115DD}, {0x11633, 0x1163A},
    {0x1163D, 0x1163D}, {0x1163F, 0x11640}, {0x116AB, 0x116AB}, {0x116AD, 0x116AD}, {0x116B0, 0x116B5},
    {0x116B7, 0x116B7}, {0x1171D, 0x1171F}, {0x11722, 0x11725}, {0x11727, 0x1172B}, {0x16AF0, 0x16AF4},
    {0x16B30, 0x16B36}, {0x16F8F, 0x16F92}, {0x1BC9D, 0x1BC9E}, {0x1D167, 0x1D169}, {0x1D17B, 0x1D182},
    {0x1D185, 0x1D18B}, {0x1D1AA, 0x1D1AD}, {0x1D242, 0x1D244}, {0x1DA00, 0x1DA36}, {0x1DA3B, 0x1DA6C},
    {0x1DA75, 0x1DA75}, {0x1DA84, 0x1DA84}, {0x1DA9B, 0x1DA9F}, {0x1DAA1, 0x1DAAF}, {0x1E8D0, 0x1E8D6},
    {0xE0100, 0xE01EF},
};
static const cp_range tbl_nonstarter[160] = {
    {0x300, 0x34E}, {0x350, 0x36F}, {0x483, 0x487}, {0x591, 0x5BD}, {0x5BF, 0x5BF},
    {0x5C1, 0x5C2}, {0x5C4, 0x5C5}, {0x5C7, 0x5C7}, {0x610, 0x61A}, {0x64B, 0x65F},
    {0x670, 0x670}, {0x6D6, 0x6DC}, {0x6DF, 0x6E4}, {0x6E7, 0x6E8}, {0x6EA, 0x6ED},
    {0x711, 0x711}, {0x730, 0x74A}, {0x7EB, 0x7F3}, {0x816, 0x819}, {0x81B, 0x823},
    {0x825, 0x827}, {0x829, 0x82D}, {0x859, 0x85B}, {0x8D4, 0x8E1}, {0x8E3, 0x8FF},
    {0x93C, 0x93C}, {0x94D, 0x94D}, {0x951, 0x954}, {0x9BC, 0x9BC}, {0x9CD, 0x9CD},
    {0xA3C, 0xA3C}, {0xA4D, 0xA4D}, {0xABC, 0xABC}, {0xACD, 0xACD}, {0xB3C, 0xB3C},
    {0xB4D, 0xB4D}, {0xBCD, 0xBCD}, {0xC4D, 0xC4D}, {0xC55, 0xC56}, {0xCBC, 0xCBC},
    {0xCCD, 0xCCD}, {0xD4D, 0xD4D}, {0xDCA, 0xDCA}, {0xE38, 0xE3A}, {0xE48, 0xE4B},
    {0xEB8, 0xEB9}, {0xEC8, 0xECB}, {0xF18, 0xF19}, {0xF35, 0xF35}, {0xF37, 0xF37},
    {0xF39, 0xF39}, {0xF71, 0xF75}, {0xF7A, 0xF7D}, {0xF80, 0xF84}, {0xF86, 0xF87},
    {0xFC6, 0xFC6}, {0x1037, 0x1037}, {0x1039, 0x103A}, {0x108D, 0x108D}, {0x135D, 0x135F},
    {0x1714, 0x1714}, {0x1734, 0x1734}, {0x17D2, 0x17D2}, {0x17DD, 0x17DD}, {0x18A9, 0x18A9},
    {0x1939, 0x193B}, {0x1A17, 0x1A18}, {0x1A60, 0x1A60}, {0x1A75, 0x1A7C}, {0x1A7F, 0x1A7F},
    {0x1AB0, 0x1ABD}, {0x1B34, 0x1B34}, {0x1B44, 0x1B44}, {0x1B6B, 0x1B73}, {0x1BAA, 0x1BAB},
    {0x1BE6, 0x1BE6}, {0x1BF2, 0x1BF3}, {0x1C37, 0x1C37}, {0x1CD0, 0x1CD2}, {0x1CD4, 0x1CE0},
    {0x1CE2, 0x1CE8}, {0x1CED, 0x1CED}, {0x1CF4, 0x1CF4}, {0x1CF8, 0x1CF9}, {0x1DC0, 0x1DF5},
    {0x1DFB, 0x1DFF}, {0x20D0, 0x20DC}, {0x20E1, 0x20E1}, {0x20E5, 0x20F0}, {0x2CEF, 0x2CF1},
    {0x2D7F, 0x2D7F}, {0x2DE0, 0x2DFF}, {0x302A, 0x302F}, {0x3099, 0x309A}, {0xA66F, 0xA66F},
    {0xA674, 0xA67D}, {0xA69E, 0xA69F}, {0xA6F0, 0xA6F1}, {0xA806, 0xA806}, {0xA8C4, 0xA8C4},
    {0xA8E0, 0xA8F1}, {0xA92B, 0xA92D}, {0xA953, 0xA953}, {0xA9B3, 0xA9B3}, {0xA9C0, 0xA9C0},
    {0xAAB0, 0xAAB0}, {0xAAB2, 0xAAB4}, {0xAAB7, 0xAAB8}, {0xAABE, 0xAABF}, {0xAAC1, 0xAAC1},
    {0xAAF6, 0xAAF6}, {0xABED, 0xABED}, {0xFB1E, 0xFB1E}, {0xFE20, 0xFE2F}, {0x101FD, 0x101FD},
    {0x102E0, 0x102E0}, {0x10376, 0x1037A}, {0x10A0D, 0x10A0D}, {0x10A0F, 0x10A0F}, {0x10A38, 0x10A3A},
    {0x10A3F, 0x10A3F}, {0x10AE5, 0x10AE6}, {0x11046, 0x11046}, {0x1107F, 0x1107F}, {0x110B9, 0x110BA},
    {0x11100, 0x11102}, {0x11133, 0x11134}, {0x11173, 0x11173}, {0x111C0, 0x111C0}, {0x111CA, 0x111CA},
    {0x11235, 0x11236}, {0x112E9, 0x112EA}, {0x1133C, 0x1133C}, {0x1134D, 0x1134D}, {0x11366, 0x1136C},
    {0x11370, 0x11374}, {0x11442, 0x11442}, {0x11446, 0x11446}, {0x114C2, 0x114C3}, {0x115BF, 0x115C0},
    {0x1163F, 0x1163F}, {0x116B6, 0x116B7}, {0x1172B, 0x1172B}, {0x11C3F, 0x11C3F}, {0x16AF0, 0x16AF4},
    {0x16B30, 0x16B36}, {0x1BC9E, 0x1BC9E}, {0x1D165, 0x1D169}, {0x1D16D, 0x1D172}, {0x1D17B, 0x1D182},
    {0x1D185, 0x1D18B}, {0x1D1AA, 0x1D1AD}, {0x1D242, 0x1D244}, {0x1E000, 0x1E006}, {0x1E008, 0x1E018},
    {0x1E01B, 0x1E021}, {0x1E023, 0x1E024}, {0x1E026, 0x1E02A}, {0x1E8D0, 0x1E8D6}, {0x1E944, 0x1E94A},
};
/* END GENERATED TABLES */

static int in_ranges(const cp_range *r, size_t n, int32_t c) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < r[mid].lo) hi = mid;
        else if (c > r[mid].hi) lo = mid + 1;
        else return 1;
    }
    return 0;
}
#define IN_TABLE(t, c) in_ranges(t, sizeof t / sizeof t[0], c)

/* BertNormalizer clean_text: the removed characters (NUL, U+FFFD and is_control). */
static int is_removed(int32_t c) {
    if (c < 0x80) return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F;
    return IN_TABLE(tbl_removed, c);
}

/* BertPreTokenizer's is_bert_punc: ASCII punctuation or Unicode punctuation. */
static int is_punct(int32_t c) {
    if (c < 0x80)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    return IN_TABLE(tbl_punct, c);
}

static int is_mn(int32_t c) { return c >= 0x300 && IN_TABLE(tbl_mn, c); }

/* Lowercase: utf8proc's simple mapping, plus the Unicode 16 case pairs that Rust's
 * char::to_lowercase (used by tokenizers) knows and utf8proc 2.8 (Unicode 15) does not. */
static int32_t to_lower(int32_t c) {
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    int32_t l = utf8proc_tolower(c);
    if (l != c) return l;
    switch (c) {
    case 0x1C89: return 0x1C8A;
    case 0xA7CB: return 0x0264;
    case 0xA7CC: case 0xA7CE: case 0xA7D2: case 0xA7D4: case 0xA7DA: return c + 1;
    case 0xA7DC: return 0x019B;
    default: break;
    }
    if (c >= 0x10D50 && c <= 0x10D65) return c + 0x20;
    if (c >= 0x16EA0 && c <= 0x16EB8) return c + 0x1B;
    return c;
}

/* BertNormalizer::is_chinese_char (the Rust ranges; note 0x2B920, not 0x2B820). */
static int is_cjk(int32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Canonical combining class as tokenizers' NFD sees it: utf8proc's value for the characters
 * in tbl_nonstarter, 0 (a starter) for everything else, including marks added to Unicode
 * after tokenizers' normalization tables were made. */
static int ccc(int32_t c) {
    if (c < 0x300 || !IN_TABLE(tbl_nonstarter, c)) return 0;
    return (int)utf8proc_get_property(c)->combining_class;
}

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

static void ns_init(norm_stream *ns, const attn_tokenizer *t, norm_sink sink, void *ctx) {
    memset(ns, 0, sizeof *ns);
    ns->t = t;
    ns->sink = sink;
    ns->ctx = ctx;
}

static void ns_free(norm_stream *ns) { free(ns->run); }

/* After NFD: drop Mn (strip_accents), lowercase, hand to the sink. */
static void ns_out(norm_stream *ns, int32_t c, size_t s, size_t e) {
    if (ns->t->strip_accents && is_mn(c)) return;
    if (ns->t->lowercase) {
        if (c == 0x130) { /* Rust's char::to_lowercase: U+0130 -> "i\u0307" */
            ns->sink(ns->ctx, 'i', s, e);
            ns->sink(ns->ctx, 0x307, s, e);
            return;
        }
        c = to_lower(c);
    }
    ns->sink(ns->ctx, c, s, e);
}

static int item_cmp(const void *a, const void *b) {
    const norm_item *x = a, *y = b;
    if (x->ccc != y->ccc) return x->ccc < y->ccc ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

static void ns_flush_run(norm_stream *ns) {
    size_t n = ns->run_n;
    if (n == 0) return;
    ns->run_n = 0;
    norm_item *r = ns->run;
    int sorted = 1;
    for (size_t i = 1; i < n && sorted; i++) sorted = r[i - 1].ccc <= r[i].ccc;
    if (sorted) {
        for (size_t i = 0; i < n; i++) {
            if (!r[i].inserted) {
                ns->last_s = r[i].s;
                ns->last_e = r[i].e;
            }
            ns_out(ns, r[i].c, ns->last_s, ns->last_e);
        }
        return;
    }
    /* the spans of the decomposition-initial characters in arrival order; after the sort they
     * are handed out again in this order (positional alignment) */
    size_t *sp = malloc(2 * n * sizeof *sp);
    if (!sp) {
        ns->nomem = 1;
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!r[i].inserted) {
            sp[2 * k] = r[i].s;
            sp[2 * k + 1] = r[i].e;
            k++;
        }
    for (size_t i = 0; i < n; i++) r[i].idx = i;
    qsort(r, n, sizeof *r, item_cmp);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (!r[i].inserted) {
            ns->last_s = sp[2 * j];
            ns->last_e = sp[2 * j + 1];
            j++;
        }
        ns_out(ns, r[i].c, ns->last_s, ns->last_e);
    }
    free(sp);
}

static void ns_nfd_char(norm_stream *ns, int32_t d, int inserted, size_t s, size_t e) {
    int cc = ccc(d);
    if (cc == 0) {
        ns_flush_run(ns);
        if (!inserted) {
            ns->last_s = s;
            ns->last_e = e;
        }
        ns_out(ns, d, ns->last_s, ns->last_e);
        return;
    }
    if (ns->run_n == ns->run_cap) {
        if (ns->run_cap >= NORM_RUN_MAX) {
            ns_flush_run(ns);
        } else {
            size_t nc = ns->run_cap ? 2 * ns->run_cap : 16;
            norm_item *nr = realloc(ns->run, nc * sizeof *nr);
            if (!nr) {
                ns->nomem = 1;
                return;
            }
            ns->run = nr;
            ns->run_cap = nc;
        }
    }
    norm_item *it = &ns->run[ns->run_n++];
    it->c = d;
    it->ccc = cc;
    it->inserted = inserted;
    it->idx = 0;
    it->s = s;
    it->e = e;
}

/* Feed one input character with its byte span. */
static void ns_feed(norm_stream *ns, int32_t c, size_t s, size_t e) {
    const attn_tokenizer *t = ns->t;
    if (t->clean_text) {
        if (is_removed(c)) return;
        if (is_ws(c)) c = ' ';
    }
    int32_t xs[3];
    int nx = 0;
    if (t->chinese && is_cjk(c)) {
        xs[nx++] = ' ';
        xs[nx++] = c;
        xs[nx++] = ' ';
    } else {
        xs[nx++] = c;
    }
    for (int i = 0; i < nx; i++) {
        if (!t->strip_accents) {
            ns_out(ns, xs[i], s, e);
            continue;
        }
        int32_t d[NORM_DECOMP_MAX];
        int last = 0;
        /* U+11938: tokenizers' NFD tables predate Unicode 13 and keep it whole */
        utf8proc_ssize_t k = (xs[i] < 0xC0 || xs[i] == 0x11938)
                                 ? 0
                                 : utf8proc_decompose_char(xs[i], d, NORM_DECOMP_MAX, UTF8PROC_DECOMPOSE, &last);
        if (k <= 0 || k > NORM_DECOMP_MAX) { /* no decomposition (or defensive) */
            d[0] = xs[i];
            k = 1;
        }
        for (utf8proc_ssize_t j = 0; j < k; j++) ns_nfd_char(ns, d[j], j > 0, s, e);
    }
}

/* End of a normalized piece (end of text, or an added token follows). */
static void ns_end(norm_stream *ns) { ns_flush_run(ns); }

/* ------------------------------------------------------------------ vocabulary hash */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

/* Slot of string s[0..n), or -1. */
static int64_t vocab_slot(const attn_tokenizer *t, const char *s, size_t n) {
    if (!t->n_slots || n > t->max_key_len) return -1;
    size_t mask = t->n_slots - 1, i = (size_t)hash_bytes(s, n) & mask;
    while (t->key[i]) {
        if (t->key_len[i] == n && memcmp(t->key[i], s, n) == 0) return (int64_t)i;
        i = (i + 1) & mask;
    }
    return -1;
}

/* Id of a token among the model vocab and the added tokens (Tokenizer::token_to_id). */
static int32_t vocab_lookup(const attn_tokenizer *t, const char *s, size_t n) {
    int64_t i = vocab_slot(t, s, n);
    return i < 0 ? -1 : t->key_id[i];
}

/* Id of a token in the WordPiece model vocab only (what WordPiece::tokenize looks up). */
static int32_t model_lookup(const attn_tokenizer *t, const char *s, size_t n) {
    int64_t i = vocab_slot(t, s, n);
    return i < 0 ? -1 : t->key_model[i];
}

/* Insert or overwrite (later entries win, like a Rust HashMap insert); model = 1 for the
 * WordPiece vocab, 0 for an added token. */
static void vocab_insert(attn_tokenizer *t, const char *s, size_t n, int32_t id, int model) {
    size_t mask = t->n_slots - 1, i = (size_t)hash_bytes(s, n) & mask;
    while (t->key[i]) {
        if (t->key_len[i] == n && memcmp(t->key[i], s, n) == 0) break;
        i = (i + 1) & mask;
    }
    if (!t->key[i]) {
        t->key[i] = s;
        t->key_len[i] = (uint32_t)n;
        t->key_model[i] = -1;
        if (n > t->max_key_len) t->max_key_len = n;
    }
    t->key_id[i] = id;
    if (model) t->key_model[i] = id;
}

/* Entries gathered by a loader before the tokenizer is built. */
typedef struct {
    const char *s; /* points into caller-owned storage until build copies it */
    size_t len;
    int32_t id;
} tok_entry;

typedef struct {
    const char *content;
} tok_added_spec;

static void tokenizer_init_defaults(attn_tokenizer *t) {
    t->clean_text = 1;
    t->chinese = 1;
    t->strip_accents = 1;
    t->lowercase = 1;
    t->unk_id = t->cls_id = t->sep_id = t->pad_id = t->mask_id = -1;
    t->max_chars = 100;
}

/* Build the hash / id table from the model vocab entries and the added tokens. unk names the
 * unk token, prefix the continuation prefix. As in tokenizers' AddedVocabulary::add_tokens,
 * an added token takes the id of the same string in the model vocab; one that is not there
 * gets the next id after the model vocab (entry count) and the previous new added tokens —
 * the "id" written in tokenizer.json is not used. */
static int tokenizer_build(attn_tokenizer *t, const tok_entry *e, size_t n, const tok_added_spec *add,
                           int n_add, const char *unk, const char *prefix) {
    size_t total = 0;
    int64_t max_id = -1;
    for (size_t i = 0; i < n; i++) {
        if (e[i].len > UINT32_MAX - 1 || total > SIZE_MAX / 2 - e[i].len)
            return attn_set_error(ATTN_E_FORMAT, "tokenizer: vocabulary too large");
        total += e[i].len + 1;
        if (e[i].id > max_id) max_id = e[i].id;
    }
    for (int i = 0; i < n_add; i++) {
        size_t l = strlen(add[i].content);
        if (l == 0) return attn_set_error(ATTN_E_FORMAT, "tokenizer: empty added token");
        if (l > UINT32_MAX - 1 || total > SIZE_MAX / 2 - l)
            return attn_set_error(ATTN_E_FORMAT, "tokenizer: vocabulary too large");
        total += l + 1;
    }
    if (n == 0) return attn_set_error(ATTN_E_FORMAT, "tokenizer: empty vocabulary");
    /* bound the id table by the entry count so a hostile file cannot ask for gigabytes */
    if ((uint64_t)max_id > 16 * (uint64_t)n + 1024)
        return attn_set_error(ATTN_E_FORMAT, "tokenizer: id %lld is far beyond the %zu vocabulary entries",
                              (long long)max_id, n);
    size_t slots = 16;
    while (slots < 2 * (n + (size_t)n_add) + 2) slots *= 2;
    t->n_slots = slots;
    t->blob = malloc(total ? total : 1);
    t->key = calloc(slots, sizeof *t->key);
    t->key_len = calloc(slots, sizeof *t->key_len);
    t->key_id = calloc(slots, sizeof *t->key_id);
    t->key_model = calloc(slots, sizeof *t->key_model);
    t->added = n_add ? calloc((size_t)n_add, sizeof *t->added) : NULL;
    if (!t->blob || !t->key || !t->key_len || !t->key_id || !t->key_model || (n_add && !t->added))
        return attn_set_error(ATTN_E_NOMEM, "tokenizer: out of memory for %zu tokens", n);
    char *p = t->blob;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, e[i].s, e[i].len);
        p[e[i].len] = '\0';
        vocab_insert(t, p, e[i].len, e[i].id, 1);
        p += e[i].len + 1;
    }
    size_t n_model = 0; /* distinct strings of the model vocab (WordPiece::get_vocab_size) */
    for (size_t i = 0; i < slots; i++) n_model += t->key[i] != NULL;
    int64_t max_added = -1;
    for (int i = 0; i < n_add; i++) {
        size_t l = strlen(add[i].content);
        memcpy(p, add[i].content, l + 1);
        int32_t id = vocab_lookup(t, p, l);
        if (id < 0) {
            if (max_added >= 0 && (max_added >= (int64_t)n_model || n_model == 0)) id = (int32_t)(max_added + 1);
            else id = (int32_t)n_model;
        }
        if (id > max_added) max_added = id;
        vocab_insert(t, p, l, id, 0);
        t->added[i].s = p;
        t->added[i].len = l;
        t->added[i].id = id;
        t->added_first[(unsigned char)p[0] >> 3] |= (unsigned char)(1u << ((unsigned char)p[0] & 7));
        if (id > max_id) max_id = id;
        p += l + 1;
    }
    t->n_added = n_add;
    t->vocab_size = max_id + 1;
    t->id_tok = calloc((size_t)t->vocab_size, sizeof *t->id_tok);
    if (!t->id_tok) return attn_set_error(ATTN_E_NOMEM, "tokenizer: out of memory for %zu tokens", n);
    for (size_t i = 0; i < slots; i++) /* id -> string; with duplicate ids the first slot wins */
        if (t->key[i] && t->key_model[i] >= 0 && !t->id_tok[t->key_model[i]]) t->id_tok[t->key_model[i]] = t->key[i];
    for (int i = 0; i < n_add; i++)
        if (!t->id_tok[t->added[i].id]) t->id_tok[t->added[i].id] = t->added[i].s;
    t->unk_id = model_lookup(t, unk, strlen(unk));
    if (t->unk_id < 0)
        return attn_set_error(ATTN_E_FORMAT, "tokenizer: unk token \"%s\" is not in the vocabulary", unk);
    t->prefix = strdup(prefix);
    if (!t->prefix) return attn_set_error(ATTN_E_NOMEM, "tokenizer: out of memory");
    t->prefix_len = strlen(prefix);
    t->cls_id = vocab_lookup(t, "[CLS]", 5);
    t->sep_id = vocab_lookup(t, "[SEP]", 5);
    t->pad_id = vocab_lookup(t, "[PAD]", 5);
    t->mask_id = vocab_lookup(t, "[MASK]", 6);
    return ATTN_OK;
}

void attn_tokenizer_free(attn_tokenizer *t) {
    if (!t) return;
    free(t->blob);
    free((void *)t->id_tok);
    free((void *)t->key);
    free(t->key_len);
    free(t->key_id);
    free(t->key_model);
    free(t->added);
    free(t->prefix);
    free(t);
}

/* ------------------------------------------------------------------ files */

static int read_file(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return attn_set_error(ATTN_E_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return attn_set_error(ATTN_E_NOMEM, "out of memory reading %s", path);
    }
    errno = 0;
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if (n == cap) {
            if (cap >= TOK_MAX_FILE) {
                free(buf);
                fclose(f);
                return attn_set_error(ATTN_E_FORMAT, "%s is larger than %u bytes", path, TOK_MAX_FILE);
            }
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return attn_set_error(ATTN_E_NOMEM, "out of memory reading %s", path);
            }
            buf = nb;
            cap *= 2;
        }
    }
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (err) {
        free(buf);
        return attn_set_error(ATTN_E_IO, "error reading %s: %s", path, strerror(err));
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return ATTN_OK;
}

/* ------------------------------------------------------------------ vocab.txt / token list */

static const char *const std_specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

/* Shared tail of the vocab.txt and token-list loaders. */
static int finish_plain(attn_tokenizer **out, attn_tokenizer *t, tok_entry *e, size_t n, int lowercase,
                        int strip_accents) {
    tok_added_spec add[5];
    int n_add = 0;
    /* like BertWordPieceTokenizer: the standard special tokens present in the vocabulary */
    for (int k = 0; k < 5; k++) {
        int found = 0;
        for (size_t i = 0; i < n && !found; i++)
            found = e[i].len == strlen(std_specials[k]) && memcmp(e[i].s, std_specials[k], e[i].len) == 0;
        if (found) add[n_add++].content = std_specials[k];
    }
    int rc = tokenizer_build(t, e, n, add, n_add, "[UNK]", "##");
    if (rc < 0) {
        attn_tokenizer_free(t);
        return rc;
    }
    t->lowercase = lowercase ? 1 : 0;
    t->strip_accents = strip_accents < 0 ? t->lowercase : (strip_accents ? 1 : 0);
    t->template_ok = t->cls_id >= 0 && t->sep_id >= 0;
    if (t->template_ok) {
        t->pre_ids[0] = t->cls_id;
        t->post_ids[0] = t->sep_id;
        t->n_pre = t->n_post = 1;
    }
    *out = t;
    return ATTN_OK;
}

int attn_tokenizer_from_tokens(attn_tokenizer **out, const char *const *tokens, int64_t n_tokens,
                               int lowercase, int strip_accents) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "tokenizer_from_tokens: NULL out");
    *out = NULL;
    if (!tokens || n_tokens <= 0 || n_tokens > INT32_MAX)
        return attn_set_error(ATTN_E_INVALID, "tokenizer_from_tokens: need 1..2^31-1 tokens, got %lld",
                              (long long)n_tokens);
    tok_entry *e = malloc((size_t)n_tokens * sizeof *e);
    attn_tokenizer *t = calloc(1, sizeof *t);
    if (!e || !t) {
        free(e);
        free(t);
        return attn_set_error(ATTN_E_NOMEM, "tokenizer_from_tokens: out of memory");
    }
    tokenizer_init_defaults(t);
    for (int64_t i = 0; i < n_tokens; i++) {
        if (!tokens[i]) {
            free(e);
            free(t);
            return attn_set_error(ATTN_E_INVALID, "tokenizer_from_tokens: token %lld is NULL", (long long)i);
        }
        size_t l = strlen(tokens[i]);
        size_t bad;
        if (attn_tokenizer_validate_utf8(tokens[i], l, &bad) < 0) {
            free(e);
            free(t);
            return attn_set_error(ATTN_E_FORMAT, "tokenizer_from_tokens: token %lld: invalid UTF-8 at byte %zu",
                                  (long long)i, bad);
        }
        e[i].s = tokens[i];
        e[i].len = l;
        e[i].id = (int32_t)i;
    }
    int rc = finish_plain(out, t, e, (size_t)n_tokens, lowercase, strip_accents);
    free(e);
    return rc;
}

int attn_tokenizer_load_vocab(attn_tokenizer **out, const char *vocab_path, int lowercase, int strip_accents) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "tokenizer_load_vocab: NULL out");
    *out = NULL;
    if (!vocab_path) return attn_set_error(ATTN_E_INVALID, "tokenizer_load_vocab: NULL path");
    char *data;
    size_t len;
    int rc = read_file(vocab_path, &data, &len);
    if (rc < 0) return rc;
    size_t bad;
    if (attn_tokenizer_validate_utf8(data, len, &bad) < 0) {
        free(data);
        return attn_set_error(ATTN_E_FORMAT, "%s: invalid UTF-8 at byte offset %zu", vocab_path, bad);
    }
    /* count lines: Rust's BufRead::lines (a final line without '\n' counts; a final '\n'
     * does not start another line) */
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (data[i] == '\n') n++;
    if (len && data[len - 1] != '\n') n++;
    if (n == 0 || n > INT32_MAX) {
        free(data);
        return attn_set_error(ATTN_E_FORMAT, "%s: %s", vocab_path, n ? "too many lines" : "empty vocabulary");
    }
    tok_entry *e = malloc(n * sizeof *e);
    attn_tokenizer *t = calloc(1, sizeof *t);
    if (!e || !t) {
        free(e);
        free(t);
        free(data);
        return attn_set_error(ATTN_E_NOMEM, "tokenizer_load_vocab: out of memory");
    }
    tokenizer_init_defaults(t);
    size_t start = 0, k = 0;
    while (start < len && k < n) {
        size_t end = start;
        while (end < len && data[end] != '\n') end++;
        /* str::trim_end: drop trailing White_Space characters (\r included) */
        size_t l = end - start;
        for (;;) {
            if (l == 0) break;
            size_t b = l - 1;
            while (b > 0 && ((unsigned char)data[start + b] & 0xC0) == 0x80) b--;
            int32_t cp;
            int m = utf8_decode((const unsigned char *)data + start, l, b, &cp);
            if (m <= 0 || !is_ws(cp)) break;
            l = b;
        }
        e[k].s = data + start;
        e[k].len = l;
        e[k].id = (int32_t)k;
        k++;
        start = end + 1;
    }
    rc = finish_plain(out, t, e, k, lowercase, strip_accents);
    if (rc < 0 && rc != ATTN_E_NOMEM) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        attn_set_error(rc, "%s: %s", vocab_path, msg);
    }
    free(e);
    free(data);
    return rc;
}

/* ------------------------------------------------------------------ tokenizer.json */

static int json_bool(const cJSON *obj, const char *name, int dflt, int *out, const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return ATTN_OK;
    }
    if (!cJSON_IsBool(v)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: %s.%s is not a boolean", where, name);
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return ATTN_OK;
}

static int json_id(const cJSON *v, int32_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= (double)INT32_MAX) || d != (double)(int64_t)d) return 0;
    *out = (int32_t)d;
    return 1;
}

static const char *json_type(const cJSON *obj) {
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(ty) ? ty->valuestring : NULL;
}

/* Ids of one TemplateProcessing special token (special_tokens[name].ids). */
static int template_special(const cJSON *pp, const char *name, int32_t *ids, int *n) {
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
    const cJSON *tk = cJSON_IsObject(st) ? cJSON_GetObjectItemCaseSensitive(st, name) : NULL;
    const cJSON *arr = cJSON_IsObject(tk) ? cJSON_GetObjectItemCaseSensitive(tk, "ids") : NULL;
    if (!cJSON_IsArray(arr))
        return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: post_processor.special_tokens has no ids for \"%s\"", name);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        if (*n >= TOK_MAX_AFFIX)
            return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: more than %d special ids around the sequence",
                                  TOK_MAX_AFFIX);
        if (!json_id(it, &ids[*n])) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: bad id for \"%s\"", name);
        (*n)++;
    }
    return ATTN_OK;
}

static int parse_post_processor(attn_tokenizer *t, const cJSON *pp) {
    t->template_ok = 1;
    if (!pp || cJSON_IsNull(pp)) return ATTN_OK; /* no post-processor: nothing is added */
    const char *ty = json_type(pp);
    if (ty && strcmp(ty, "TemplateProcessing") == 0) {
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
        if (!cJSON_IsArray(single))
            return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: post_processor.single is not an array");
        int seen_seq = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, single) {
            const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
            const cJSON *sq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
            if (cJSON_IsObject(sp)) {
                const cJSON *id = cJSON_GetObjectItemCaseSensitive(sp, "id");
                if (!cJSON_IsString(id)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: SpecialToken without id");
                int rc = seen_seq ? template_special(pp, id->valuestring, t->post_ids, &t->n_post)
                                  : template_special(pp, id->valuestring, t->pre_ids, &t->n_pre);
                if (rc < 0) return rc;
            } else if (cJSON_IsObject(sq)) {
                const cJSON *id = cJSON_GetObjectItemCaseSensitive(sq, "id");
                if (seen_seq || !cJSON_IsString(id) || strcmp(id->valuestring, "A") != 0)
                    return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: single template must hold sequence A once");
                seen_seq = 1;
            } else {
                return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: bad item in post_processor.single");
            }
        }
        if (!seen_seq) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: single template without $A");
    } else if (ty && strcmp(ty, "BertProcessing") == 0) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(pp, "cls");
        const cJSON *sep = cJSON_GetObjectItemCaseSensitive(pp, "sep");
        if (!cJSON_IsArray(cls) || !cJSON_IsArray(sep) || cJSON_GetArraySize(cls) != 2 || cJSON_GetArraySize(sep) != 2 ||
            !json_id(cJSON_GetArrayItem(cls, 1), &t->pre_ids[0]) || !json_id(cJSON_GetArrayItem(sep, 1), &t->post_ids[0]))
            return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: BertProcessing needs cls/sep as [token, id]");
        t->n_pre = t->n_post = 1;
    } else {
        return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: post_processor type %s is not supported",
                              ty ? ty : "(missing)");
    }
    for (int i = 0; i < t->n_pre; i++)
        if (t->pre_ids[i] >= t->vocab_size) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: special id out of range");
    for (int i = 0; i < t->n_post; i++)
        if (t->post_ids[i] >= t->vocab_size) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: special id out of range");
    return ATTN_OK;
}

static int load_json_root(attn_tokenizer *t, const cJSON *root) {
    if (!cJSON_IsObject(root)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: top level is not an object");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: no \"model\" object");
    const char *ty = json_type(model);
    if (ty && strcmp(ty, "WordPiece") != 0)
        return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: model type %s is not supported (WordPiece only)", ty);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: model.vocab is not an object");

    const char *unk = "[UNK]", *prefix = "##";
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: model.unk_token is not a string");
        unk = v->valuestring;
    }
    v = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v))
            return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: model.continuing_subword_prefix is not a string");
        prefix = v->valuestring;
    }
    v = cJSON_GetObjectItemCaseSensitive(model, "max_input_chars_per_word");
    if (v && !cJSON_IsNull(v)) {
        int32_t m;
        if (!json_id(v, &m) || m < 1 || m > TOK_MAX_WORD_CHARS)
            return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: max_input_chars_per_word must be 1..%d",
                                  TOK_MAX_WORD_CHARS);
        t->max_chars = m;
    }

    /* normalizer */
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (!norm || cJSON_IsNull(norm)) {
        t->clean_text = t->chinese = t->strip_accents = t->lowercase = 0;
    } else {
        const char *nt = json_type(norm);
        if (!nt || strcmp(nt, "BertNormalizer") != 0)
            return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: normalizer %s is not supported (BertNormalizer only)",
                                  nt ? nt : "(no type)");
        ATTN_TRY(json_bool(norm, "clean_text", 1, &t->clean_text, "normalizer"));
        ATTN_TRY(json_bool(norm, "handle_chinese_chars", 1, &t->chinese, "normalizer"));
        ATTN_TRY(json_bool(norm, "lowercase", 1, &t->lowercase, "normalizer"));
        ATTN_TRY(json_bool(norm, "strip_accents", t->lowercase, &t->strip_accents, "normalizer"));
    }
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const char *pt = cJSON_IsObject(pre) ? json_type(pre) : NULL;
    if (!pt || strcmp(pt, "BertPreTokenizer") != 0)
        return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: pre_tokenizer %s is not supported (BertPreTokenizer only)",
                              pt ? pt : "(missing)");

    /* vocabulary entries */
    int nv = cJSON_GetArraySize(vocab);
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added))
        return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: added_tokens is not an array");
    int na = cJSON_IsArray(added) ? cJSON_GetArraySize(added) : 0;
    tok_entry *e = malloc(((size_t)nv + 1) * sizeof *e);
    tok_added_spec *add = malloc(((size_t)na + 1) * sizeof *add);
    if (!e || !add) {
        free(e);
        free(add);
        return attn_set_error(ATTN_E_NOMEM, "tokenizer.json: out of memory");
    }
    int rc = ATTN_OK, k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (k >= nv) break;
        if (!it->string || !json_id(it, &e[k].id)) {
            rc = attn_set_error(ATTN_E_FORMAT, "tokenizer.json: vocab entry \"%s\" has no valid id",
                                it->string ? it->string : "?");
            break;
        }
        e[k].s = it->string;
        e[k].len = strlen(it->string);
        k++;
    }
    int ka = 0;
    if (rc == ATTN_OK && na) {
        cJSON_ArrayForEach(it, added) {
            if (ka >= na) break;
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
            const cJSON *idv = cJSON_GetObjectItemCaseSensitive(it, "id");
            int32_t unused_id; /* required by the format, but tokenizers assigns the id itself */
            if (!cJSON_IsString(content) || !json_id(idv, &unused_id)) {
                rc = attn_set_error(ATTN_E_FORMAT, "tokenizer.json: added_tokens[%d] needs content and id", ka);
                break;
            }
            int normalized = 0, ls = 0, rs = 0, sw = 0, special = 0;
            if ((rc = json_bool(it, "special", 0, &special, "added_tokens[]")) < 0) break;
            if ((rc = json_bool(it, "normalized", !special, &normalized, "added_tokens[]")) < 0) break;
            if ((rc = json_bool(it, "lstrip", 0, &ls, "added_tokens[]")) < 0) break;
            if ((rc = json_bool(it, "rstrip", 0, &rs, "added_tokens[]")) < 0) break;
            if ((rc = json_bool(it, "single_word", 0, &sw, "added_tokens[]")) < 0) break;
            if (normalized || ls || rs || sw) {
                rc = attn_set_error(ATTN_E_UNSUPPORTED,
                                    "tokenizer.json: added token \"%s\" uses normalized/lstrip/rstrip/single_word",
                                    content->valuestring);
                break;
            }
            if (!content->valuestring[0]) {
                rc = attn_set_error(ATTN_E_FORMAT, "tokenizer.json: empty added token");
                break;
            }
            add[ka].content = content->valuestring;
            ka++;
        }
    }
    if (rc == ATTN_OK) {
        for (int i = 0; i < k && rc == ATTN_OK; i++) {
            size_t bad;
            if (attn_tokenizer_validate_utf8(e[i].s, e[i].len, &bad) < 0)
                rc = attn_set_error(ATTN_E_FORMAT, "tokenizer.json: vocab token %d is not valid UTF-8", i);
        }
    }
    if (rc == ATTN_OK) rc = tokenizer_build(t, e, (size_t)k, add, ka, unk, prefix);
    free(e);
    free(add);
    if (rc < 0) return rc;
    return parse_post_processor(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"));
}

int attn_tokenizer_load_json_buffer(attn_tokenizer **out, const char *json, size_t len) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "tokenizer_load_json_buffer: NULL out");
    *out = NULL;
    if (!json) return attn_set_error(ATTN_E_INVALID, "tokenizer_load_json_buffer: NULL json");
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *ep = cJSON_GetErrorPtr();
        size_t off = (ep && ep >= json && ep <= json + len) ? (size_t)(ep - json) : 0;
        return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: JSON syntax error near byte %zu", off);
    }
    attn_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        cJSON_Delete(root);
        return attn_set_error(ATTN_E_NOMEM, "tokenizer.json: out of memory");
    }
    tokenizer_init_defaults(t);
    int rc = load_json_root(t, root);
    cJSON_Delete(root);
    if (rc < 0) {
        attn_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return ATTN_OK;
}

int attn_tokenizer_load_json(attn_tokenizer **out, const char *path) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "tokenizer_load_json: NULL out");
    *out = NULL;
    if (!path) return attn_set_error(ATTN_E_INVALID, "tokenizer_load_json: NULL path");
    char *data;
    size_t len;
    int rc = read_file(path, &data, &len);
    if (rc < 0) return rc;
    rc = attn_tokenizer_load_json_buffer(out, data, len);
    free(data);
    if (rc < 0 && rc != ATTN_E_NOMEM) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        attn_set_error(rc, "%s: %s", path, msg);
    }
    return rc;
}

/* ------------------------------------------------------------------ encoding */

typedef struct {
    const attn_tokenizer *t;
    /* output */
    int32_t *ids;
    int64_t *offsets;
    int64_t cap;
    int64_t pos;   /* next output index (specials included) */
    int64_t count; /* content ids emitted so far */
    int64_t limit; /* content ids allowed by truncation */
    int full;      /* limit reached: stop */
    /* current word: normalized characters and their spans in the input; only the first
     * wcap characters are kept (a longer word is the unk token anyway) */
    int32_t *wc;
    size_t *ws, *we;
    size_t wcap;
    int64_t wn;
    size_t wstart, wend;
    /* WordPiece scratch */
    char *wbytes;   /* UTF-8 of the word */
    size_t *wpos;   /* byte position of each character, [wcap + 1] */
    char *cand;     /* prefix + candidate piece */
    int32_t *pid;   /* piece ids */
    int64_t *pchar; /* piece start characters, [wcap + 1] */
} enc_state;

static void enc_put(enc_state *st, int32_t id, size_t s, size_t e) {
    if (st->pos < st->cap) {
        st->ids[st->pos] = id;
        if (st->offsets) {
            st->offsets[2 * st->pos] = (int64_t)s;
            st->offsets[2 * st->pos + 1] = (int64_t)e;
        }
    }
    st->pos++;
}

static void enc_emit(enc_state *st, int32_t id, size_t s, size_t e) {
    if (st->count >= st->limit) {
        st->full = 1;
        return;
    }
    enc_put(st, id, s, e);
    if (++st->count >= st->limit) st->full = 1;
}

static void word_push(enc_state *st, int32_t c, size_t s, size_t e) {
    if (st->wn == 0) st->wstart = s;
    st->wend = e;
    if ((size_t)st->wn < st->wcap) {
        st->wc[st->wn] = c;
        st->ws[st->wn] = s;
        st->we[st->wn] = e;
    }
    st->wn++;
}

/* WordPiece on the current word, then emit its pieces (or the unk token). A piece's span
 * runs from its first character's start to its last character's end, as HF's
 * expand_alignments does. */
static void word_flush(enc_state *st) {
    const attn_tokenizer *t = st->t;
    int64_t n = st->wn;
    st->wn = 0;
    if (n == 0 || st->full) return;
    if (n > t->max_chars) {
        enc_emit(st, t->unk_id, st->wstart, st->wend);
        return;
    }
    size_t b = 0;
    for (int64_t i = 0; i < n; i++) {
        st->wpos[i] = b;
        b += (size_t)utf8_encode(st->wc[i], st->wbytes + b);
    }
    st->wpos[n] = b;
    int64_t np = 0, start = 0;
    while (start < n) {
        size_t plen = start > 0 ? t->prefix_len : 0;
        int64_t end = n;
        /* longer candidates cannot be in the vocabulary */
        while (end > start && plen + (st->wpos[end] - st->wpos[start]) > t->max_key_len) end--;
        int32_t id = -1;
        if (plen) memcpy(st->cand, t->prefix, plen);
        for (; end > start; end--) {
            size_t l = st->wpos[end] - st->wpos[start];
            memcpy(st->cand + plen, st->wbytes + st->wpos[start], l);
            id = model_lookup(t, st->cand, plen + l);
            if (id >= 0) break;
        }
        if (id < 0) {
            enc_emit(st, t->unk_id, st->wstart, st->wend);
            return;
        }
        st->pid[np] = id;
        st->pchar[np] = start;
        np++;
        start = end;
    }
    st->pchar[np] = n;
    for (int64_t p = 0; p < np && !st->full; p++)
        enc_emit(st, st->pid[p], st->ws[st->pchar[p]], st->we[st->pchar[p + 1] - 1]);
}

/* norm_sink of the encoder: BertPreTokenizer (whitespace splits and is dropped, each
 * punctuation character is a word of its own). */
static void pretok_sink(void *ctx, int32_t d, size_t s, size_t e) {
    enc_state *st = ctx;
    if (st->full) return;
    if (is_ws(d)) {
        word_flush(st);
    } else if (is_punct(d)) {
        word_flush(st);
        word_push(st, d, s, e);
        word_flush(st);
    } else {
        word_push(st, d, s, e);
    }
}

/* Longest added token matching at text[i..len), or -1. */
static int added_match(const attn_tokenizer *t, const char *text, size_t len, size_t i) {
    unsigned char c0 = (unsigned char)text[i];
    if (!(t->added_first[c0 >> 3] & (1u << (c0 & 7)))) return -1;
    int best = -1;
    for (int k = 0; k < t->n_added; k++) {
        size_t l = t->added[k].len;
        if (l <= len - i && memcmp(text + i, t->added[k].s, l) == 0 && (best < 0 || l > t->added[best].len))
            best = k;
    }
    return best;
}

int attn_tokenizer_encode(const attn_tokenizer *t, const char *text, size_t text_len, int add_special,
                          int64_t max_len, int32_t *ids, int64_t *n_ids, int64_t cap, int64_t *offsets) {
    if (!t || !n_ids) return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: NULL tokenizer or n_ids");
    *n_ids = 0;
    if (!text && text_len) return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: NULL text with length %zu", text_len);
    if (cap < 0 || (!ids && cap > 0))
        return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: bad output buffer (cap %lld)", (long long)cap);
    if (!ids && offsets) return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: offsets without ids");
    if (add_special && !t->template_ok)
        return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: add_special needs [CLS] and [SEP] in the vocabulary");
    int64_t nspec = add_special ? t->n_pre + t->n_post : 0;
    if (max_len > 0 && max_len < nspec)
        return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: max_len %lld cannot hold the %lld special tokens",
                              (long long)max_len, (long long)nspec);
    ATTN_TRY(attn_tokenizer_validate_utf8(text, text_len, NULL));

    enc_state st;
    memset(&st, 0, sizeof st);
    st.t = t;
    st.ids = ids;
    st.offsets = offsets;
    st.cap = ids ? cap : 0;
    st.limit = max_len > 0 ? max_len - nspec : INT64_MAX;
    st.full = st.limit <= 0;
    st.wcap = (size_t)t->max_chars + 1;
    size_t wc = st.wcap;
    st.wc = malloc(wc * sizeof *st.wc);
    st.ws = malloc(wc * sizeof *st.ws);
    st.we = malloc(wc * sizeof *st.we);
    st.wbytes = malloc(4 * wc);
    st.wpos = malloc((wc + 1) * sizeof *st.wpos);
    st.cand = malloc(t->prefix_len + 4 * wc);
    st.pid = malloc(wc * sizeof *st.pid);
    st.pchar = malloc((wc + 1) * sizeof *st.pchar);
    norm_stream ns;
    ns_init(&ns, t, pretok_sink, &st);
    int rc = ATTN_OK;
    if (!st.wc || !st.ws || !st.we || !st.wbytes || !st.wpos || !st.cand || !st.pid || !st.pchar) {
        rc = attn_set_error(ATTN_E_NOMEM, "tokenizer_encode: out of memory");
        goto done;
    }
    if (add_special)
        for (int k = 0; k < t->n_pre; k++) enc_put(&st, t->pre_ids[k], 0, 0);

    const unsigned char *u = (const unsigned char *)text;
    size_t i = 0;
    while (i < text_len && !st.full && !ns.nomem) {
        if (t->n_added) {
            int k = added_match(t, text, text_len, i);
            if (k >= 0) {
                ns_end(&ns);
                word_flush(&st);
                enc_emit(&st, t->added[k].id, i, i + t->added[k].len);
                i += t->added[k].len;
                continue;
            }
        }
        int32_t c;
        int n = utf8_decode(u, text_len, i, &c);
        if (n <= 0) n = 1, c = 0xFFFD; /* unreachable: the text was validated */
        ns_feed(&ns, c, i, i + (size_t)n);
        i += (size_t)n;
    }
    ns_end(&ns);
    word_flush(&st);
    if (ns.nomem) {
        rc = attn_set_error(ATTN_E_NOMEM, "tokenizer_encode: out of memory");
        goto done;
    }
    if (add_special)
        for (int k = 0; k < t->n_post; k++) enc_put(&st, t->post_ids[k], 0, 0);
    *n_ids = st.pos;
    if (ids && st.pos > cap)
        rc = attn_set_error(ATTN_E_RANGE, "tokenizer_encode: %lld ids do not fit in cap %lld", (long long)st.pos,
                            (long long)cap);
done:
    ns_free(&ns);
    free(st.wc);
    free(st.ws);
    free(st.we);
    free(st.wbytes);
    free(st.wpos);
    free(st.cand);
    free(st.pid);
    free(st.pchar);
    return rc;
}

/* ------------------------------------------------------------------ normalize only */

typedef struct {
    char *out;
    size_t cap, total;
} norm_buf;

static void buf_sink(void *ctx, int32_t c, size_t s, size_t e) {
    norm_buf *b = ctx;
    char tmp[4];
    int l = utf8_encode(c, tmp);
    if (b->total + (size_t)l < b->cap) memcpy(b->out + b->total, tmp, (size_t)l);
    b->total += (size_t)l;
}

int attn_tokenizer_normalize(const attn_tokenizer *t, const char *text, size_t text_len, char *out, size_t cap,
                             size_t *out_len) {
    if (!t || !out_len) return attn_set_error(ATTN_E_INVALID, "tokenizer_normalize: NULL tokenizer or out_len");
    *out_len = 0;
    if (!text && text_len) return attn_set_error(ATTN_E_INVALID, "tokenizer_normalize: NULL text with length %zu", text_len);
    if (!out && cap) return attn_set_error(ATTN_E_INVALID, "tokenizer_normalize: NULL out with cap %zu", cap);
    ATTN_TRY(attn_tokenizer_validate_utf8(text, text_len, NULL));
    norm_buf b = {out, cap, 0};
    norm_stream ns;
    ns_init(&ns, t, buf_sink, &b);
    const unsigned char *u = (const unsigned char *)text;
    size_t i = 0;
    while (i < text_len && !ns.nomem) {
        int32_t c;
        int n = utf8_decode(u, text_len, i, &c);
        if (n <= 0) n = 1, c = 0xFFFD; /* unreachable: the text was validated */
        ns_feed(&ns, c, i, i + (size_t)n);
        i += (size_t)n;
    }
    ns_end(&ns);
    ns_free(&ns);
    if (ns.nomem) return attn_set_error(ATTN_E_NOMEM, "tokenizer_normalize: out of memory");
    *out_len = b.total;
    if (!out && cap == 0) return ATTN_OK; /* length query */
    if (b.total < cap) {
        out[b.total] = '\0';
        return ATTN_OK;
    }
    if (cap) out[cap - 1] = '\0';
    return attn_set_error(ATTN_E_RANGE, "tokenizer_normalize: %zu bytes (+1 NUL) do not fit in cap %zu", b.total, cap);
}

/* ------------------------------------------------------------------ queries */

int64_t attn_tokenizer_vocab_size(const attn_tokenizer *t) { return t ? t->vocab_size : 0; }

const char *attn_tokenizer_id_to_token(const attn_tokenizer *t, int64_t id) {
    if (!t) {
        attn_set_error(ATTN_E_INVALID, "tokenizer_id_to_token: NULL tokenizer");
        return NULL;
    }
    if (id < 0 || id >= t->vocab_size || !t->id_tok[id]) {
        attn_set_error(ATTN_E_RANGE, "tokenizer_id_to_token: no token with id %lld", (long long)id);
        return NULL;
    }
    return t->id_tok[id];
}

int32_t attn_tokenizer_token_to_id(const attn_tokenizer *t, const char *token) {
    if (!t || !token) return -1;
    return vocab_lookup(t, token, strlen(token));
}

int32_t attn_tokenizer_cls_id(const attn_tokenizer *t) { return t ? t->cls_id : -1; }
int32_t attn_tokenizer_sep_id(const attn_tokenizer *t) { return t ? t->sep_id : -1; }
int32_t attn_tokenizer_pad_id(const attn_tokenizer *t) { return t ? t->pad_id : -1; }
int32_t attn_tokenizer_unk_id(const attn_tokenizer *t) { return t ? t->unk_id : -1; }
int32_t attn_tokenizer_mask_id(const attn_tokenizer *t) { return t ? t->mask_id : -1; }
