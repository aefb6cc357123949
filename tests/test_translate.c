/* Translation with the aren-transliteration CTranslate2 models (float32 and int8) against
 * CTranslate2 4.8.5's outputs (tests/fixtures/aren, written by scripts/gen_aren_fixtures.py):
 * 275 words, greedy and beam search with n-best, length penalties 0 / 1 / 2, target prefix,
 * min / max length, repetition penalty, suppressed tokens and sequences, end-token override.
 * Hypotheses must be identical and scores within 1e-5, float32 and int8 alike (CTranslate2's own
 * greedy and beam paths differ by ~1e-7 on the same word; float32 rounding in a 12-layer model
 * is ~1e-6).
 * Cross-attention (greedy, float32, 20 words) within 1e-5. Then the CLI on bad input. */
#include "attn_ct2_transformer.h"
#include "testutil.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MODEL_F32 "../shared/models/aren-transliteration"
#define MODEL_I8 "../shared/models/aren-transliteration-int8"

static char **read_lines(const char *path, int64_t *n) {
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    char **lines = NULL;
    int64_t cap = 0;
    char *line = NULL;
    size_t lc = 0;
    ssize_t len;
    while ((len = getline(&line, &lc, f)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') line[len - 1] = 0;
        if (*n == cap) {
            cap = cap ? cap * 2 : 256;
            lines = (char **)realloc(lines, sizeof(char *) * (size_t)cap);
        }
        lines[(*n)++] = strdup(line);
    }
    free(line);
    fclose(f);
    return lines;
}

static void free_lines(char **l, int64_t n) {
    for (int64_t i = 0; i < n; i++) free(l[i]);
    free(l);
}

static char **words;
static int64_t n_words;

/* attn_translate with default translation options around decoding options o. */
static int translate_d(attn_translator *m, attn_translation *out, const char *const *sources, int64_t n, const attn_decode_opts *o,
                       int replace_unknowns) {
    attn_translate_opts to = attn_translate_opts_default();
    to.decode = *o;
    to.replace_unknowns = replace_unknowns;
    return attn_translate(m, out, sources, n, &to);
}

/* Compare attn_translate with the fixture file for one case. */
/* min_same: words that must be identical (n_words for exact cases); n_use: words decoded. */
static void run_case_n(attn_translator *m, const char *file, attn_decode_opts o, int n_prefix_a_l, int64_t n_use, int64_t min_same,
                       double tol) {
    int64_t n_ref;
    char path[512];
    snprintf(path, sizeof path, "aren/%s", file);
    char **ref = read_lines(attn_test_fixture(path), &n_ref);
    CHECK(ref != NULL && n_ref > 0, "%s: fixture readable", file);
    if (!ref) return;
    int32_t prefix[2];
    if (n_prefix_a_l) {
        prefix[0] = attn_translator_target_id(m, "a");
        prefix[1] = attn_translator_target_id(m, "l");
        o.prefix = prefix;
        o.prefix_len = 2;
    }
    o.return_prefix = 1;
    attn_translation *out = (attn_translation *)calloc((size_t)n_words, sizeof *out);
    int64_t li = 0, words_same = 0, hyps = 0, bad_tok = 0;
    double max_diff = 0;
    char first_bad[512] = "";
    /* as the fixtures were made: translate_batch(max_batch_size=32), which sorts the sources by
     * length before batching (the int8 model's attention arithmetic depends on the padding) */
    attn_translate_opts to = attn_translate_opts_default();
    to.decode = o;
    to.max_batch_size = 32;
    int rc = attn_translate(m, out, (const char *const *)words, n_use, &to);
    CHECK(rc == 0, "%s: attn_translate: %s", file, attn_last_error());
    for (int64_t w = 0; w < n_use; w++) {
        int same = 1;
        int64_t h = 0;
        for (; li < n_ref && strcmp(ref[li], "#") != 0; li++, h++) {
            char *tab = strchr(ref[li], '\t');
            float s = strtof(ref[li], NULL);
            const char *toks = tab ? tab + 1 : "";
            char got[1024] = "";
            if (h < out[w].n) {
                size_t o2 = 0;
                for (int64_t k = 0; k < out[w].hyps[h].len && o2 < sizeof got - 64; k++)
                    o2 += (size_t)snprintf(got + o2, sizeof got - o2, k ? " %s" : "%s", out[w].hyps[h].tokens[k]);
                double d = fabs((double)out[w].hyps[h].score - (double)s);
                if (d > max_diff) max_diff = d;
                hyps++;
            }
            if (h >= out[w].n || strcmp(got, toks) != 0) {
                same = 0;
                bad_tok++;
                if (!first_bad[0])
                    snprintf(first_bad, sizeof first_bad, "word %lld hyp %lld: got '%s' want '%s'", (long long)w, (long long)h, got, toks);
            }
        }
        if (h != out[w].n) {
            same = 0;
            if (!first_bad[0]) snprintf(first_bad, sizeof first_bad, "word %lld: %lld hypotheses, want %lld", (long long)w, (long long)out[w].n, (long long)h);
        }
        li++; /* "#" */
        words_same += same;
    }
    CHECK(words_same >= min_same, "%s: %lld/%lld words identical, want >= %lld (%s)", file, (long long)words_same, (long long)n_use,
          (long long)min_same, first_bad);
    if (tol > 0) CHECK(max_diff <= tol, "%s: max |score - CTranslate2| = %.3g over %lld hypotheses (tol %g)", file, max_diff, (long long)hyps, tol);
    printf("  %-24s %lld/%lld words identical, %lld hypotheses, max score diff %.2g\n", file, (long long)words_same, (long long)n_use,
           (long long)hyps, max_diff);
    attn_translations_free(out, n_use);
    free(out);
    free_lines(ref, n_ref);
}

/* every word identical, scores within 1e-5 (the issue asks 1e-4; measured max 3e-6: the
 * fixtures' 7 decimals, float32 sums in another order, attn's log-softmax against CTranslate2's
 * vectorised one, accumulated over up to ~12 steps) */
static void run_case(attn_translator *m, const char *file, attn_decode_opts o, int n_prefix_a_l) {
    run_case_n(m, file, o, n_prefix_a_l, n_words, n_words, 1e-5);
}

/* decoding options on the first 64 words (keeps the suite fast) */
static void run_case64(attn_translator *m, const char *file, attn_decode_opts o, int n_prefix_a_l) {
    run_case_n(m, file, o, n_prefix_a_l, 64, 64, 1e-5);
}

/* int8: attn computes as CTranslate2 4.8.5 does on an AVX2 machine: its activation quantisation,
 * int16-saturating u8 x s8 GEMM and rescaling (scripts/probe_ct2_int8.c), its LayerNorm and
 * sin / cos rounding, its attention arithmetic (oneDNN's per-shape summation orders, its exp
 * and softmax: scripts/probe_ct2_attention.c) and its batching (longest first, its sort's
 * order of equal lengths, beams' cross-attention queries multiplied together). So every word is
 * identical and scores are held to the same 1e-5 as float32 (measured max 8e-7). */
static void run_case_int8(attn_translator *m, const char *file, attn_decode_opts o, int n_prefix_a_l) {
    run_case_n(m, file, o, n_prefix_a_l, n_words, n_words, 1e-5);
}

static void test_attention(attn_translator *m) {
    int64_t n_ref;
    char **ref = read_lines(attn_test_fixture("aren/attention.txt"), &n_ref);
    CHECK(ref != NULL, "attention fixture");
    if (!ref) return;
    attn_decode_opts o = attn_decode_opts_default();
    o.min_length = 1;
    o.return_attention = 1;
    attn_translation out[20];
    CHECK_OK(translate_d(m, out, (const char *const *)words, 20, &o, 0));
    int64_t li = 0, rows = 0;
    double md = 0, row_sum_err = 0;
    int shape_ok = 1;
    for (int w = 0; w < 20; w++) {
        int64_t t = 0;
        for (; li < n_ref && strcmp(ref[li], "#") != 0; li++, t++) {
            char *p = ref[li];
            for (int64_t s = 0; s < out[w].src_len; s++) {
                char *e;
                double v = strtod(p, &e);
                p = e;
                if (t < out[w].hyps[0].len) {
                    double d = fabs(v - out[w].hyps[0].attention[t * out[w].src_len + s]);
                    if (d > md) md = d;
                }
            }
            if (t < out[w].hyps[0].len) {
                double sum = 0;
                for (int64_t s = 0; s < out[w].src_len; s++) sum += out[w].hyps[0].attention[t * out[w].src_len + s];
                if (fabs(sum - 1) > row_sum_err) row_sum_err = fabs(sum - 1);
                rows++;
            }
        }
        if (t != out[w].hyps[0].len) shape_ok = 0;
        li++;
    }
    CHECK(shape_ok, "attention: one row per target token");
    CHECK(md <= 1e-5, "attention: max |a - CTranslate2| = %.3g over %lld rows (tol 1e-5)", md, (long long)rows);
    CHECK(row_sum_err <= 1e-5, "attention rows sum to 1 (max err %.3g)", row_sum_err);
    attn_translations_free(out, 20);
    free_lines(ref, n_ref);
}

/* replace_unknowns: a source token missing from the vocabulary, forced as <unk> in the output
 * through the prefix, is replaced by the most attended source token. */
static void test_replace_unknowns(attn_translator *m) {
    attn_decode_opts o = attn_decode_opts_default();
    o.min_length = 1;
    int32_t unk = attn_translator_target_id(m, "<unk>");
    o.prefix = &unk;
    o.prefix_len = 1;
    o.return_prefix = 1;
    o.return_attention = 1;
    const char *src[1] = {"ك ت ا ب"};
    attn_translation a, b;
    CHECK_OK(translate_d(m, &a, src, 1, &o, 0));
    CHECK_OK(translate_d(m, &b, src, 1, &o, 1));
    if (a.n > 0 && b.n > 0 && a.hyps[0].len > 0) {
        CHECK(strcmp(a.hyps[0].tokens[0], "<unk>") == 0, "forced <unk> kept without replacement: %s", a.hyps[0].tokens[0]);
        int64_t best = 0;
        for (int64_t s = 1; s < a.src_len; s++)
            if (a.hyps[0].attention[s] > a.hyps[0].attention[best]) best = s;
        CHECK(strcmp(b.hyps[0].tokens[0], a.src_tokens[best]) == 0, "replaced by the most attended source token %s (got %s)",
              a.src_tokens[best], b.hyps[0].tokens[0]);
    }
    attn_translations_free(&a, 1);
    attn_translations_free(&b, 1);
}

/* max_input_length: CTranslate2 4.8.5 (translate_batch, max_input_length=4, beam 1 or 2)
 * translates the 10-token source below as "b o u n z" (score -0.3436081), exactly as its first
 * 4 tokens with no limit: the first N tokens are kept (no end token is added to this model's
 * source). The default limit is 1024 tokens: CTranslate2 gives the same "m e r m e r" (score
 * -0.2749818, max_decoding_length 6) for 1100 tokens "ر م ر م ..." as for their first 1024. */
static void test_max_input_length(attn_translator *m) {
    attn_translate_opts o = attn_translate_opts_default();
    o.decode.min_length = 1;
    o.decode.return_attention = 1;
    CHECK(o.max_input_length == 1024, "default max_input_length 1024 (got %lld)", (long long)o.max_input_length);
    const char *src[2] = {"\xd8\xa8 \xd8\xa4 \xd9\x86 \xd8\xb2 \xd8\xaa \xd8\xb0 \xd8\xa2 \xd9\x89 \xd8\xab \xd8\xb4",
                          "\xd8\xa8 \xd8\xa4 \xd9\x86 \xd8\xb2"};
    attn_translation t[2];
    o.max_input_length = 4;
    int r = attn_translate(m, t, src, 2, &o);
    CHECK(r == 0, "translate with max_input_length 4: %s", attn_last_error());
    if (r == 0) {
        CHECK(t[0].src_len == 4 && t[0].n == 1 && t[0].hyps[0].len == 5, "truncated to 4 tokens (src_len %lld)", (long long)t[0].src_len);
        char got[64] = "";
        for (int64_t k = 0; k < t[0].hyps[0].len && k < 8; k++) {
            if (k) strcat(got, " ");
            strncat(got, t[0].hyps[0].tokens[k], 4);
        }
        CHECK(strcmp(got, "b o u n z") == 0 && fabsf(t[0].hyps[0].score - -0.3436081f) < 2e-6f,
              "truncated source gives CTranslate2's 'b o u n z', -0.3436081 (got '%s', %.7f; tolerance 2e-6: f32 sums)", got,
              (double)t[0].hyps[0].score);
        CHECK(t[1].n == 1 && t[1].hyps[0].len == t[0].hyps[0].len && t[1].hyps[0].score == t[0].hyps[0].score,
              "same result as the 4-token source (scores %g %g)", (double)t[0].hyps[0].score, (double)t[1].hyps[0].score);
        attn_translations_free(t, 2);
    }
    /* 1100 tokens, default limit: encoded as the first 1024 */
    static char longsrc[1100 * 3 + 1], cut[1024 * 3 + 1];
    for (int i = 0; i < 1100; i++) memcpy(longsrc + 3 * i, i % 2 ? "\xd9\x85 " : "\xd8\xb1 ", 3);
    longsrc[1100 * 3 - 1] = 0;
    memcpy(cut, longsrc, 1024 * 3);
    cut[1024 * 3 - 1] = 0;
    const char *two[2] = {longsrc, cut};
    o = attn_translate_opts_default();
    o.decode.max_length = 6;
    r = attn_translate(m, t, two, 2, &o);
    CHECK(r == 0, "translate 1100 tokens: %s", attn_last_error());
    if (r == 0) {
        CHECK(t[0].src_len == 1024 && t[1].src_len == 1024, "1100 tokens truncated to 1024 (got %lld)", (long long)t[0].src_len);
        char got[64] = "";
        for (int64_t k = 0; k < t[0].hyps[0].len && k < 8; k++) {
            if (k) strcat(got, " ");
            strncat(got, t[0].hyps[0].tokens[k], 4);
        }
        CHECK(strcmp(got, "m e r m e r") == 0 && fabsf(t[0].hyps[0].score - t[1].hyps[0].score) < 1e-6f &&
                  fabsf(t[0].hyps[0].score - -0.2749818f) < 1e-3f, /* measured 3.6e-4 at 1024 positions (vs ~1e-7 on short words) */
              "1100 tokens: CTranslate2's 'm e r m e r' -0.2749818 (got '%s' %.7f; the 1024-token source %.7f)", got,
              (double)t[0].hyps[0].score, (double)t[1].hyps[0].score);
        attn_translations_free(t, 2);
    }
    o.max_input_length = -1;
    CHECK_ERR(attn_translate(m, t, two, 1, &o), ATTN_E_INVALID);
}

/* GNMT length penalty: beam 1 gives the same hypothesis as the power form; its score is the raw
 * log-probability divided by ((5 + len) / 6)^alpha instead of len^alpha. */
static void test_gnmt(attn_translator *m) {
    attn_decode_opts o = attn_decode_opts_default();
    o.min_length = 1;
    const char *src[1] = {"م ر ح ب ا"};
    attn_translation p, g;
    CHECK_OK(translate_d(m, &p, src, 1, &o, 0));
    o.length_penalty_form = ATTN_LP_GNMT;
    o.length_penalty = 0.6f;
    CHECK_OK(translate_d(m, &g, src, 1, &o, 0));
    if (p.n && g.n) {
        double len = (double)p.hyps[0].len + 1; /* the end token counts */
        double raw = (double)p.hyps[0].score * len;
        CHECK_NEAR(g.hyps[0].score, raw / pow((5 + len) / 6, 0.6), 1e-5, "GNMT score");
    }
    attn_translations_free(&p, 1);
    attn_translations_free(&g, 1);
}

static void test_bad_options(attn_translator *m) {
    attn_decode_opts o = attn_decode_opts_default();
    attn_translation t;
    const char *src[1] = {"م"};
    o.beam_size = 0;
    CHECK_ERR(translate_d(m, &t, src, 1, &o, 0), ATTN_E_INVALID);
    o = attn_decode_opts_default();
    o.n_best = 3;
    CHECK_ERR(translate_d(m, &t, src, 1, &o, 0), ATTN_E_INVALID);
    o = attn_decode_opts_default();
    int32_t bad = 1000;
    o.suppress = &bad;
    o.n_suppress = 1;
    CHECK_ERR(translate_d(m, &t, src, 1, &o, 0), ATTN_E_INVALID);
    o = attn_decode_opts_default();
    o.min_length = 300;
    CHECK_ERR(translate_d(m, &t, src, 1, &o, 0), ATTN_E_INVALID);
    o = attn_decode_opts_default();
    o.repetition_penalty = 0;
    CHECK_ERR(translate_d(m, &t, src, 1, &o, 0), ATTN_E_INVALID);
    /* empty source and whitespace-only source: n_best empty hypotheses with score 0
     * (CTranslate2 4.8.5: translate_batch([[]], beam_size=4, num_hypotheses=3) -> [[], [], []]) */
    o = attn_decode_opts_default();
    const char *empty[2] = {"", "   "};
    attn_translation e[2];
    CHECK_OK(translate_d(m, e, empty, 2, &o, 0));
    CHECK(e[0].n == 1 && e[0].hyps[0].len == 0 && e[1].n == 1 && e[1].hyps[0].len == 0, "empty sources give empty hypotheses");
    attn_translations_free(e, 2);
    o.beam_size = 4;
    o.n_best = 3;
    CHECK_OK(translate_d(m, e, empty, 1, &o, 0));
    CHECK(e[0].n == 3 && e[0].hyps[0].len == 0 && e[0].hyps[2].len == 0 && e[0].hyps[2].score == 0.0f,
          "an empty source gives n_best (3) empty hypotheses, got %lld", (long long)e[0].n);
    attn_translations_free(e, 1);
    /* a source that is not UTF-8 is refused (it would silently become <unk>) */
    const char *bad_utf8[2] = {"\xd9\x83 \xd8\xaa", "\xd9\x83 \xff\xfe"};
    CHECK_ERR(translate_d(m, e, bad_utf8, 2, &o, 0), ATTN_E_INVALID);
    CHECK(strstr(attn_last_error(), "source 2 is not valid UTF-8 (byte offset 3, byte 0xFF)") != NULL, "UTF-8 message: %s", attn_last_error());
}

/* ---- CLI */
static char tmpdir[256], out_text[16384], err_text[8192];
static int run_attn(const char *first, ...) {
    const char *args[64];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *)) args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return attn_test_run(attn_test_cli_path(), tmpdir, out_text, sizeof out_text, err_text, sizeof err_text, args);
}

#define EXPECT_FAIL(code, needle, what, ...)                                                                 \
    do {                                                                                                     \
        int rc_ = run_attn(__VA_ARGS__, (const char *)NULL);                                                 \
        CHECK(rc_ == (code), "%s: exit %d, want %d; stderr: %s", what, rc_, (code), err_text);              \
        CHECK(strstr(err_text, "attn: error: ") == err_text && strstr(err_text, needle), "%s: message: %s", \
              what, err_text);                                                                               \
    } while (0)

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

static void test_cli(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_translate_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    int rc = run_attn("translate", "--model", MODEL_F32, "--beam", "4", "--scores", "م ر ح ب ا", "", "ك ت ا ب", (const char *)NULL);
    CHECK(rc == 0, "translate: exit %d (%s)", rc, err_text);
    CHECK(strcmp(out_text, "-0.185435\tm a r h a b a\n0.000000\t\n-0.254568\tk a t t a b\n") == 0 || 0, "translate output (CTranslate2: -0.1854348 / -0.2545682): %s", out_text);
    char npy[512], png[512];
    snprintf(npy, sizeof npy, "%s/a.npy", tmpdir);
    snprintf(png, sizeof png, "%s/a.png", tmpdir);
    rc = run_attn("translate", "--model", MODEL_F32, "--attention", npy, "م ر ح ب ا", (const char *)NULL);
    CHECK(rc == 0 && access(npy, F_OK) == 0, "--attention .npy: exit %d %s", rc, err_text);
    rc = run_attn("translate", "--model", MODEL_F32, "--attention", png, "م ر ح ب ا", (const char *)NULL);
    CHECK(rc == 0 && access(png, F_OK) == 0, "--attention .png: exit %d %s", rc, err_text);
    EXPECT_FAIL(2, "--beam", "--beam 0", "translate", "--model", MODEL_F32, "--beam", "0", "م");
    EXPECT_FAIL(2, "--n-best", "n-best > beam", "translate", "--model", MODEL_F32, "--n-best", "3", "م");
    EXPECT_FAIL(1, "not in the target vocabulary", "end token", "translate", "--model", MODEL_F32, "--end-token", "ZZ", "م");
    EXPECT_FAIL(1, "not in the target vocabulary", "suppressed token", "translate", "--model", MODEL_F32, "--suppress", "a QQ", "م");
    rc = run_attn("translate", "--model", MODEL_F32, "--max-input-length", "4", "--beam", "2",
                  "\xd8\xa8 \xd8\xa4 \xd9\x86 \xd8\xb2 \xd8\xaa \xd8\xb0 \xd8\xa2 \xd9\x89 \xd8\xab \xd8\xb4", (const char *)NULL);
    CHECK(rc == 0 && strcmp(out_text, "b o u n z\n") == 0 && strstr(err_text, "truncated"),
          "--max-input-length 4: exit %d, '%s' (CTranslate2: 'b o u n z'), note: %s", rc, out_text, err_text);
    EXPECT_FAIL(1, "source 2 is not valid UTF-8", "a sentence that is not UTF-8", "translate", "--model", MODEL_F32, "\xd9\x85", "\xd9");
    {
        /* a NUL byte inside a line of standard input: refused, nothing printed */
        char in[512];
        snprintf(in, sizeof in, "%s/nul.txt", tmpdir);
        write_file(in, "\xd9\x85\n\xd9\x83 \xd8\xaa\0\xd8\xa8\n", 12);
        const char *args[] = {"translate", "--model", MODEL_F32, NULL};
        int r = attn_test_run_stdin(attn_test_cli_path(), tmpdir, in, out_text, sizeof out_text, err_text, sizeof err_text, args);
        CHECK(r == 1 && out_text[0] == '\0' && strstr(err_text, "sentence 2 holds a NUL byte"), "NUL byte in a line: exit %d, out '%s', %s", r,
              out_text, err_text);
    }
    EXPECT_FAIL(2, "--max-input-length", "--max-input-length -1", "translate", "--model", MODEL_F32, "--max-input-length", "-1", "م");
    EXPECT_FAIL(2, "exactly one input sentence (got 2)", "--attention with two sentences", "translate", "--model", MODEL_F32, "--attention", npy, "م", "ب");
    EXPECT_FAIL(1, "model.bin", "missing model", "translate", "--model", "/nonexistent", "م");
    /* corrupted and truncated model files, wrong vocabulary size */
    char dir[512], p[600];
    snprintf(dir, sizeof dir, "%s/m", tmpdir);
    mkdir(dir, 0755);
    FILE *f = fopen(MODEL_F32 "/model.bin", "rb");
    static unsigned char buf[800000];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    CHECK(n > 1000, "read model.bin");
    snprintf(p, sizeof p, "%s/source_vocabulary.txt", dir);
    {
        FILE *s = fopen(MODEL_F32 "/source_vocabulary.txt", "rb");
        static char vb[4096];
        size_t vn = s ? fread(vb, 1, sizeof vb, s) : 0;
        if (s) fclose(s);
        write_file(p, vb, vn);
        snprintf(p, sizeof p, "%s/target_vocabulary.txt", dir);
        s = fopen(MODEL_F32 "/target_vocabulary.txt", "rb");
        vn = s ? fread(vb, 1, sizeof vb, s) : 0;
        if (s) fclose(s);
        write_file(p, vb, vn);
    }
    snprintf(p, sizeof p, "%s/model.bin", dir);
    write_file(p, buf, n / 2);
    EXPECT_FAIL(1, "truncated", "truncated model.bin", "translate", "--model", dir, "م");
    unsigned char spec[64];
    memcpy(spec, buf, sizeof spec);
    memcpy(buf + 6, "Whisper", 7); /* spec name "TransformerBase" -> "WhisperormerBase" */
    write_file(p, buf, n);
    EXPECT_FAIL(1, "not a Transformer", "unknown spec", "translate", "--model", dir, "م");
    memcpy(buf, spec, sizeof spec);
    write_file(p, buf, n);
    snprintf(p, sizeof p, "%s/target_vocabulary.txt", dir);
    write_file(p, "<s>\n</s>\na\n", 11);
    EXPECT_FAIL(1, "vocabulary", "vocabulary size", "translate", "--model", dir, "م");
    write_file(p, "not a vocabulary", 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("translate: could not remove %s\n", tmpdir);
}

/* issue 23 item 13: a model directory with model.bin but no vocabulary named only
 * shared_vocabulary.txt (the fallback); now both layouts are named */
static void test_missing_vocabulary(void) {
    char dir[] = "/tmp/attn_test_vocab_XXXXXX", link[600], real[PATH_MAX];
    if (!mkdtemp(dir) || !realpath(MODEL_F32 "/model.bin", real)) {
        CHECK(0, "mkdtemp / model.bin");
        return;
    }
    snprintf(link, sizeof link, "%s/model.bin", dir);
    CHECK(symlink(real, link) == 0, "symlink model.bin");
    attn_translator *t = NULL;
    CHECK_ERR(attn_translator_load(&t, dir), ATTN_E_IO);
    const char *e = attn_last_error();
    CHECK(strstr(e, "source_vocabulary.txt") && strstr(e, "target_vocabulary.txt") && strstr(e, "shared_vocabulary.txt") &&
              !strstr(e, "cannot open"),
          "names every vocabulary file looked for: %s", e);
    unlink(link);
    rmdir(dir);
}

int main(void) {
    attn_test_name = "translate";
    test_missing_vocabulary();
    words = read_lines(attn_test_fixture("aren/words.txt"), &n_words);
    CHECK(words != NULL && n_words >= 200, "at least 200 fixture words (%lld)", (long long)n_words);
    attn_translator *m = NULL, *q = NULL;
    CHECK_OK(attn_translator_load(&m, MODEL_F32));
    CHECK_OK(attn_translator_load(&q, MODEL_I8));
    if (m && q && words) {
        const attn_translator_config *c = attn_translator_get_config(m);
        CHECK(c->d_model == 32 && c->n_heads == 8 && c->n_encoder_layers == 6 && c->n_decoder_layers == 6 && c->d_ff == 128 &&
                  c->source_vocab == 51 && c->target_vocab == 43 && c->pre_norm && !c->int8,
              "aren config");
        CHECK(attn_translator_get_config(q)->int8, "int8 model detected");
        attn_decode_opts o = attn_decode_opts_default();
        o.min_length = 1; /* CTranslate2's default min_decoding_length */
        attn_decode_opts b4 = o;
        b4.beam_size = 4;
        b4.n_best = 4;
        run_case(m, "greedy_f32.txt", o, 0);
        run_case(m, "beam4_f32.txt", b4, 0);
        run_case_int8(q, "greedy_int8.txt", o, 0);
        run_case_int8(q, "beam4_int8.txt", b4, 0);
        {
            /* the int8 GEMM's portable C path and its AVX2 path are the same integer sums:
             * beam-4 outputs and scores of 64 words bit-identical */
            attn_translation *a = (attn_translation *)calloc(64, sizeof *a), *pb = (attn_translation *)calloc(64, sizeof *pb);
            int same = 1;
            CHECK_OK(translate_d(q, a, (const char *const *)words, 32, &b4, 0));
            CHECK_OK(translate_d(q, a + 32, (const char *const *)words + 32, 32, &b4, 0));
            setenv("ATTN_QUANT_KERNEL", "portable", 1);
            CHECK_OK(translate_d(q, pb, (const char *const *)words, 32, &b4, 0));
            CHECK_OK(translate_d(q, pb + 32, (const char *const *)words + 32, 32, &b4, 0));
            unsetenv("ATTN_QUANT_KERNEL");
            for (int w = 0; w < 64 && same; w++) {
                same = a[w].n == pb[w].n;
                for (int64_t h = 0; h < a[w].n && same; h++) {
                    same = a[w].hyps[h].len == pb[w].hyps[h].len && memcmp(&a[w].hyps[h].score, &pb[w].hyps[h].score, sizeof(float)) == 0;
                    for (int64_t k = 0; k < a[w].hyps[h].len && same; k++) same = strcmp(a[w].hyps[h].tokens[k], pb[w].hyps[h].tokens[k]) == 0;
                }
            }
            CHECK(same, "int8: portable GEMM path bit-identical to the SIMD path (64 words, beam 4)");
            attn_translations_free(a, 64);
            attn_translations_free(pb, 64);
            free(a);
            free(pb);
        }
        attn_decode_opts x = b4;
        x.n_best = 2;
        x.length_penalty = 0;
        run_case64(m, "beam4_lp0_f32.txt", x, 0);
        run_case_int8(q, "beam4_lp0_int8.txt", x, 0);
        x = b4;
        x.n_best = 1;
        x.length_penalty = 2;
        run_case64(m, "beam4_lp2_f32.txt", x, 0);
        x = b4;
        x.beam_size = 3;
        x.n_best = 3;
        run_case64(m, "beam3_prefix_f32.txt", x, 1);
        run_case_int8(q, "beam3_prefix_int8.txt", x, 1);
        run_case64(m, "greedy_prefix_f32.txt", o, 1);
        x = b4;
        x.n_best = 2;
        x.min_length = 6;
        x.max_length = 8;
        run_case64(m, "beam4_minmax_f32.txt", x, 0);
        x = o;
        x.repetition_penalty = 1.5f;
        run_case64(m, "greedy_rep_f32.txt", x, 0);
        x.repetition_penalty = 0.8f; /* below 1: rewards repeats (CTranslate2 accepts it) */
        run_case64(m, "greedy_rep08_f32.txt", x, 0);
        x = b4;
        x.n_best = 2;
        x.repetition_penalty = 1.5f;
        run_case64(m, "beam4_rep_f32.txt", x, 0);
        x = b4;
        x.n_best = 2;
        int32_t sa = attn_translator_target_id(m, "a"), ha[2] = {attn_translator_target_id(m, "h"), sa};
        const int32_t *seqs[1] = {ha};
        int64_t lens[1] = {2};
        x.suppress = &sa;
        x.n_suppress = 1;
        x.suppress_seqs = seqs;
        x.suppress_seq_lens = lens;
        x.n_suppress_seqs = 1;
        run_case64(m, "beam4_suppress_f32.txt", x, 0);
        x = o;
        x.end_ids = &sa;
        x.n_end = 1;
        x.max_length = 20;
        run_case64(m, "greedy_end_f32.txt", x, 0);
        test_attention(m);
        test_replace_unknowns(m);
        test_gnmt(m);
        test_max_input_length(m);
        test_bad_options(m);
    }
    attn_translator_free(m);
    attn_translator_free(q);
    free_lines(words, n_words);
    test_cli();
    return attn_test_finish();
}
