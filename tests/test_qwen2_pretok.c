/* The Qwen2 and Llama 3 ("llama-bpe") pre-tokenizers (src/tokenizers/bpe.c, PCRE2) against
 * Hugging Face tokenizers 0.23.3 running the same regexes (their tokenizer.json Split,
 * behavior Isolated), fixtures by scripts/gen_qwen2_pretok.py:
 *   - tests/fixtures/qwen2/pretok_cases.tsv: the word boundaries of 81 texts (multilingual,
 *     combining marks, emoji sequences, digit runs, whitespace runs with \r \n, contractions in
 *     both cases) must be equal;
 *   - tests/fixtures/qwen2/pretok_unicode.txt: every code point c but the surrogates, by the
 *     word counts of five probes "a"+c, "1"+c, "."+c, " "+c, c+"a": letters, numbers (one per
 *     word in Qwen2, runs of three in Llama 3), whitespace, \r / \n and the rest must split as
 *     tokenizers splits them, except letters / numbers of a later Unicode version than Debian's
 *     PCRE2 (unassigned there: counted apart, as tests/test_bpe_unicode.c does for gpt2). */
#include "bpe_probe.h"

#include <stdlib.h>
#include <string.h>

static const char *next_line(const char *p) {
    const char *e = strchr(p, '\n');
    return e ? e + 1 : p + strlen(p);
}

static void test_cases(attn_bpe *const *tk, const char *const *names, int n_pre, const char *fix) {
    int lines[2] = {0, 0}, same[2] = {0, 0};
    for (const char *p = fix; *p; p = next_line(p)) {
        if (*p == '#') continue;
        const char *t1 = strchr(p, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t1 || !t2) break;
        int k = 0;
        while (k < n_pre && !(strlen(names[k]) == (size_t)(t1 - p) && memcmp(p, names[k], (size_t)(t1 - p)) == 0)) k++;
        if (k == n_pre) continue;
        char text[512];
        size_t len = 0;
        for (const char *h = t1 + 1; h + 1 < t2 && len + 1 < sizeof text; h += 2) {
            unsigned v;
            sscanf(h, "%2x", &v);
            text[len++] = (char)v;
        }
        text[len] = 0;
        size_t want[256], got[256];
        int nw = 0;
        for (char *e = (char *)t2 + 1; *e && *e != '\n' && nw < 256;) {
            char *f;
            want[nw] = (size_t)strtoul(e, &f, 10);
            if (f == e) break;
            nw++;
            e = f;
        }
        int64_t ng = 0;
        CHECK_OK(attn__bpe_pretokenize(tk[k], text, len, got, 256, &ng));
        lines[k]++;
        if (ng == nw && memcmp(got, want, sizeof(size_t) * (size_t)nw) == 0) {
            same[k]++;
        } else {
            char g[256] = "", w[256] = "";
            for (int64_t i = 0; i < ng && i < 20; i++) snprintf(g + strlen(g), sizeof g - strlen(g), " %zu", got[i]);
            for (int i = 0; i < nw && i < 20; i++) snprintf(w + strlen(w), sizeof w - strlen(w), " %zu", want[i]);
            CHECK(0, "%s: '%s' splits at%s, tokenizers at%s", names[k], text, g, w);
        }
    }
    for (int k = 0; k < n_pre; k++) {
        printf("%s: %d/%d texts split as tokenizers splits them\n", names[k], same[k], lines[k]);
        CHECK(lines[k] >= 80 && same[k] == lines[k], "%s: %d/%d texts", names[k], same[k], lines[k]);
    }
}

/* the probe signature of cp under t: word counts of "a"+c, "1"+c, "."+c, " "+c, c+"a" */
static void signature(const attn_bpe *t, int32_t cp, char sig[6]) {
    static const char pre[5] = {'a', '1', '.', ' ', 0};
    char s[8];
    size_t ends[8];
    for (int k = 0; k < 5; k++) {
        int n = 0;
        if (pre[k]) s[n++] = pre[k];
        n += attn__utf8_encode(cp, s + n);
        if (!pre[k]) s[n++] = 'a';
        int64_t nw = 0;
        sig[k] = attn__bpe_pretokenize(t, s, (size_t)n, ends, 8, &nw) < 0 ? 'E' : (char)('0' + (nw > 9 ? 9 : nw));
    }
    sig[5] = 0;
}

static void sweep(const attn_bpe *t, const char *pre, const char *fix) {
    int64_t checked = 0, differ = 0, ws_differ = 0, version = 0;
    char first[512] = "";
    for (const char *p = fix; *p; p = next_line(p)) {
        char name[16], want[8];
        unsigned lo, hi;
        if (*p == '#' || sscanf(p, "%15s %x %x %7s", name, &lo, &hi, want) != 4 || strcmp(name, pre) != 0) continue;
        for (unsigned cp = lo; cp <= hi; cp++) {
            char got[6];
            signature(t, (int32_t)cp, got);
            checked++;
            if (strcmp(got, want) == 0) continue;
            /* whitespace is 22211 (22112 for \r, \n) in both pre-tokenizers */
            if (strcmp(got, "22211") == 0 || strcmp(want, "22211") == 0 || strcmp(got, "22112") == 0 || strcmp(want, "22112") == 0) ws_differ++;
            /* a letter / number of a later Unicode than PCRE2's, "other" (22111) there */
            if (strcmp(got, "22111") == 0 && strcmp(want, "22211") != 0 && pcre2_unassigned((int32_t)cp)) {
                version++;
                continue;
            }
            differ++;
            if (strlen(first) < 400) snprintf(first + strlen(first), sizeof first - strlen(first), " U+%04X %s (tokenizers %s)", cp, got, want);
        }
    }
    char uv[32] = "?";
    pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, uv);
    printf("%s: %lld code points; split differently from tokenizers: %lld, and %lld letters / numbers that PCRE2 (Unicode %s) has "
           "unassigned%s\n",
           pre, (long long)checked, (long long)differ, (long long)version, uv, first);
    CHECK(checked == 0x110000 - 0x800, "%s: the fixture covers every code point but the surrogates (%lld)", pre, (long long)checked);
    CHECK(ws_differ == 0, "%s: %lld whitespace differences:%s", pre, (long long)ws_differ, first);
    CHECK(differ == 0, "%s: %lld differences beyond the Unicode version:%s", pre, (long long)differ, first);
    /* Unicode 15.0-16.0 added ~10300 characters: more means a wrong class */
    CHECK(version < 20000, "%s: %lld Unicode-version differences", pre, (long long)version);
}

/* a control token whose string holds a NUL byte (a GGUF string may; fuzz_gguf found the
 * special-token table keeping only the bytes before it, then comparing all 17): found whole in
 * the text, and the text around it still byte tokens */
static void test_special_with_nul(void) {
    static char tok[257][8];
    static const char *toks[257];
    static uint32_t lens[257];
    static int32_t types[257];
    for (int b = 0; b < 256; b++) {
        int n = attn__utf8_encode(byte_cp(b), tok[b]);
        tok[b][n] = 0;
        toks[b] = tok[b];
        lens[b] = (uint32_t)n;
        types[b] = ATTN_TOK_NORMAL;
    }
    memcpy(tok[256], "<\0end>", 6);
    toks[256] = tok[256];
    lens[256] = 6;
    types[256] = ATTN_TOK_CONTROL;
    attn_bpe_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.kind = ATTN_BPE_BYTE_LEVEL;
    sp.tokens = toks;
    sp.token_lens = lens;
    sp.token_types = types;
    sp.n_tokens = 257;
    sp.pretokenizer = "qwen2";
    sp.bos_id = sp.eos_id = -1;
    attn_bpe *t = NULL;
    CHECK_OK(attn_bpe_create(&t, &sp));
    if (!t) return;
    int32_t ids[16];
    int64_t n = 0;
    CHECK_OK(attn_bpe_encode(t, "a<\0end>b", 8, 1, ids, 16, &n));
    CHECK(n == 3 && ids[1] == 256, "control token with a NUL byte: %lld ids, the second %d (want 3, 256)", (long long)n, n > 1 ? ids[1] : -1);
    CHECK_OK(attn_bpe_encode(t, "a<\0enX>b", 8, 1, ids, 16, &n));
    CHECK(n == 8, "a near miss stays bytes: %lld ids (want 8)", (long long)n);
    attn_bpe_free(t);
}

int main(void) {
    attn_test_name = "qwen2_pretok";
    static const char *const names[2] = {"qwen2", "llama-bpe"};
    attn_bpe *tk[2] = {byte_vocab(names[0]), byte_vocab(names[1])};
    static char cases[1 << 15], uni[1 << 17];
    attn_test_read_file(attn_test_fixture("qwen2/pretok_cases.tsv"), cases, sizeof cases);
    attn_test_read_file(attn_test_fixture("qwen2/pretok_unicode.txt"), uni, sizeof uni);
    CHECK(strlen(cases) > 1000 && strlen(uni) > 10000, "fixtures qwen2/pretok_* missing");
    if (tk[0] && tk[1]) {
        test_cases(tk, names, 2, cases);
        sweep(tk[0], "qwen2", uni);
        sweep(tk[1], "llama-bpe", uni);
    }
    /* the two patterns differ where they should: digits one a word (Qwen2) or three (Llama 3) */
    size_t ends[8];
    int64_t n = 0;
    if (tk[0] && tk[1]) {
        CHECK_OK(attn__bpe_pretokenize(tk[0], "12345", 5, ends, 8, &n));
        CHECK(n == 5, "qwen2 '12345': %lld words (5)", (long long)n);
        CHECK_OK(attn__bpe_pretokenize(tk[1], "12345", 5, ends, 8, &n));
        CHECK(n == 2 && ends[0] == 3, "llama-bpe '12345': %lld words (123, 45)", (long long)n);
    }
    attn_bpe_free(tk[0]);
    attn_bpe_free(tk[1]);
    test_special_with_nul();
    return attn_test_finish();
}
