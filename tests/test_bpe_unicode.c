/* The byte-level BPE pre-tokenizers (src/tokenizers/bpe.c, "gpt2" and "smollm") on every code
 * point U+0000..U+10FFFF but the surrogates, against Hugging Face tokenizers 0.23.3
 * (tests/fixtures/bpe_unicode.txt, written by scripts/gen_bpe_unicode.py). Each code point c is
 * classed by the word counts of four probes, "a"+c, "1"+c, "."+c and " "+c: letter (\p{L}),
 * number (\p{N}), whitespace (\s) or other; the class seen through attn's pre-tokenizer
 * (attn__bpe_pretokenize, the split attn_bpe_encode uses) must equal the fixture's.
 * Issue 23 item 8: PCRE2's \s matched U+180E (MONGOLIAN VOWEL SEPARATOR, White_Space until
 * Unicode 6.2, Cf since 6.3) where tokenizers (and llama.cpp) do not. */
#include "bpe_probe.h"

#include <stdlib.h>
#include <string.h>

/* the class of code point cp under t: 'L', 'N', 'S', 'O', or '?' for another signature */
static char classify(const attn_bpe *t, int smollm, int32_t cp) {
    static const char pre[4] = {'a', '1', '.', ' '};
    int sig[4];
    char s[8];
    size_t ends[8];
    for (int k = 0; k < 4; k++) {
        s[0] = pre[k];
        int n = attn__utf8_encode(cp, s + 1);
        int64_t nw = 0;
        if (attn__bpe_pretokenize(t, s, (size_t)n + 1, ends, 8, &nw) < 0) return 'E';
        sig[k] = (int)nw;
    }
    if (sig[0] == 1 && sig[1] == 2 && sig[2] == 2 && sig[3] == 1) return 'L';
    if (!smollm && sig[0] == 2 && sig[1] == 1 && sig[2] == 2 && sig[3] == 1) return 'N';
    if (smollm && sig[0] == 2 && sig[1] == 2 && sig[2] == 2 && sig[3] == 2) return 'N';
    if (sig[0] == 2 && sig[1] == 2 && sig[2] == 2 && sig[3] == 1) return 'S';
    if (sig[0] == 2 && sig[1] == 2 && sig[2] == 1 && sig[3] == 1) return 'O';
    return '?';
}

static void sweep(const char *pre, const char *fix) {
    const int smollm = strcmp(pre, "smollm") == 0;
    attn_bpe *t = byte_vocab(pre);
    if (!t) return;
    int64_t checked = 0, differ = 0, ws_differ = 0, version = 0;
    char line[128];
    char first[512] = "";
    for (const char *p = fix; *p;) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l >= sizeof line) l = sizeof line - 1;
        memcpy(line, p, l);
        line[l] = 0;
        p = e ? e + 1 : p + l;
        char name[16], cls;
        unsigned lo, hi;
        if (line[0] == '#' || sscanf(line, "%15s %x %x %c", name, &lo, &hi, &cls) != 4 || strcmp(name, pre) != 0) continue;
        for (unsigned cp = lo; cp <= hi; cp++) {
            char got = classify(t, smollm, (int32_t)cp);
            checked++;
            if (got != cls) {
                if (got == 'S' || cls == 'S') ws_differ++;
                /* a letter / number of a later Unicode than PCRE2's, unassigned there */
                if (got == 'O' && (cls == 'L' || cls == 'N') && pcre2_unassigned((int32_t)cp)) {
                    version++;
                    continue;
                }
                differ++;
                if (strlen(first) < 400)
                    snprintf(first + strlen(first), sizeof first - strlen(first), " U+%04X %c (tokenizers %c)", cp, got, cls);
            }
        }
    }
    char uv[32] = "?";
    pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, uv);
    printf("%s: %lld code points; classed differently from tokenizers 0.23.3: %lld, and %lld letters / numbers that PCRE2 "
           "(Unicode %s) has unassigned%s\n",
           pre, (long long)checked, (long long)differ, (long long)version, uv, first);
    CHECK(checked == 0x110000 - 0x800, "%s: the fixture covers every code point but the surrogates (%lld)", pre, (long long)checked);
    /* whitespace must agree exactly (U+180E was 'S' here) */
    CHECK(ws_differ == 0, "%s: %lld whitespace differences:%s", pre, (long long)ws_differ, first);
    CHECK(classify(t, smollm, 0x180E) == 'O', "%s: U+180E is not whitespace", pre);
    /* letters / numbers: Debian's PCRE2 10.42 (Unicode 14.0.0) and tokenizers' regex engine
     * (Unicode 16: U+1C89, U+A7CB, U+105C0.., Garay, Todhri, ...) follow different Unicode
     * versions. The code points assigned only in the later one are counted apart (9392 for
     * gpt2, 9405 for smollm, whose Digits step uses Rust's char::is_numeric); every other code
     * point must agree. */
    CHECK(differ == 0, "%s: %lld differences beyond the Unicode version:%s", pre, (long long)differ, first);
    CHECK(version < 20000, "%s: %lld Unicode-version differences (Unicode 15.0-16.0 added ~10300 characters; more means a wrong class)", pre,
          (long long)version);
    attn_bpe_free(t);
}

/* the real encode path splits U+180E like tokenizers: "a\u180Eb" is a, U+180E, b (three words)
 * — with \s it was "a", "\u180E", "b" too, but " \u180E" and "\u180E\u180E x" differ */
static void test_encode_path(void) {
    attn_bpe *t = byte_vocab("gpt2");
    if (!t) return;
    size_t ends[8];
    int64_t n = 0;
    /* ".\u180E": one word when U+180E is "other" (as tokenizers), two when it is \s */
    CHECK_OK(attn__bpe_pretokenize(t, ".\xe1\xa0\x8e", 4, ends, 8, &n));
    CHECK(n == 1 && ends[0] == 4, "'.' U+180E: %lld words (tokenizers: 1)", (long long)n);
    /* a real space still splits: "a b" -> "a", " b" */
    CHECK_OK(attn__bpe_pretokenize(t, "a b", 3, ends, 8, &n));
    CHECK(n == 2 && ends[0] == 1 && ends[1] == 3, "'a b': %lld words", (long long)n);
    /* trailing whitespace run before a word: "a   b" -> "a", "  ", " b" */
    CHECK_OK(attn__bpe_pretokenize(t, "a   b", 5, ends, 8, &n));
    CHECK(n == 3 && ends[0] == 1 && ends[1] == 3 && ends[2] == 5, "'a   b': %lld words", (long long)n);
    /* ids through attn_bpe_encode equal one byte token per byte (no merges) */
    int32_t ids[8];
    int64_t k = 0;
    CHECK_OK(attn_bpe_encode(t, ".\xe1\xa0\x8e", 4, 0, ids, 8, &k));
    CHECK(k == 4, "encode: %lld ids", (long long)k);
    attn_bpe_free(t);
}

int main(void) {
    attn_test_name = "bpe_unicode";
    static char fix[1 << 17];
    attn_test_read_file(attn_test_fixture("bpe_unicode.txt"), fix, sizeof fix);
    CHECK(strlen(fix) > 1000, "fixture bpe_unicode.txt missing");
    sweep("gpt2", fix);
    sweep("smollm", fix);
    test_encode_path();
    return attn_test_finish();
}
