/* stories260K (llama2.c) against the NumPy float64 reference (scripts/llama2c_ref.py, fixtures by
 * scripts/gen_llama2c_fixtures.py): tokenizer ids, logits at several positions, cached decode vs
 * one pass, greedy continuations token for token; llama2.c bad input; the samplers. */
#include "attn.h"
#include "attn_bpe.h"
#include "attn_llama.h"
#include "attn_llama2c.h"
#include "attn_npy.h"
#include "attn_sampling.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL "../shared/models/stories260K/stories260K.bin"
#define TOKBIN "../shared/models/stories260K/tok512.bin"

static int parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    while (*s && n < cap) {
        char *e;
        long v = strtol(s, &e, 10);
        if (e == s) break;
        ids[n++] = (int32_t)v;
        s = e;
    }
    return n;
}

static size_t unhex(const char *h, char *out) {
    if (strcmp(h, "-") == 0) return 0;
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (char)v;
    }
    return n;
}

static void test_stories(void) {
    attn_llama *m = NULL;
    attn_bpe *tok = NULL;
    CHECK_OK(attn_llama_load_llama2c(&m, MODEL));
    if (!m) return;
    const attn_llama_config *c = attn_llama_get_config(m);
    CHECK(c->dim == 64 && c->hidden_dim == 172 && c->n_layers == 5 && c->n_heads == 8 && c->n_kv_heads == 4 && c->vocab_size == 512 &&
              c->context == 512 && c->tied_output == 1,
          "stories260K config");
    CHECK_OK(attn_bpe_load_llama2c(&tok, TOKBIN, c->vocab_size));
    FILE *f = fopen(attn_test_fixture("llama/stories260K.tsv"), "r");
    CHECK(f != NULL, "fixture stories260K.tsv");
    if (!f || !tok) return;
    static char line[65536];
    int n_tok_ok = 0, n_tok = 0, n_greedy_ok = 0, n_greedy = 0;
    float *logits = (float *)malloc(sizeof(float) * 512 * 600);
    attn_llama_state *st = NULL;
    CHECK_OK(attn_llama_state_create(&st, m, 0));
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *kind = strtok(line, "\t"), *a = strtok(NULL, "\t"), *b = strtok(NULL, "\t"), *cc = strtok(NULL, "\t");
        if (!kind || !a) continue;
        if (strcmp(kind, "tok") == 0) {
            char text[4096];
            size_t tl = unhex(a, text);
            int32_t want[4096], got[4096];
            int nw = parse_ids(b ? b : "", want, 4096);
            int64_t ng = 0;
            got[0] = 1;
            int rc = attn_bpe_encode(tok, text, tl, 0, got + 1, 4095, &ng);
            n_tok++;
            int ok = rc == 0 && ng + 1 == nw && memcmp(got, want, sizeof(int32_t) * (size_t)nw) == 0;
            n_tok_ok += ok;
            CHECK(ok, "llama2.c tokenizer case '%.*s': %lld ids vs %d", (int)tl, text, (long long)ng + 1, nw);
            /* decode round trip (after BOS the dummy space is dropped) */
            if (ok && tl > 0) {
                char dec[8192];
                size_t dl;
                CHECK_OK(attn_bpe_decode(tok, got, ng + 1, 0, dec, sizeof dec, &dl));
                CHECK(dl == tl && memcmp(dec, text, tl) == 0, "decode(encode(x)) == x for '%.*s' (got '%.*s')", (int)tl, text, (int)dl, dec);
            }
        } else if (strcmp(kind, "greedy") == 0 && b && cc) {
            int32_t ids[256], want[128];
            int ni = parse_ids(b, ids, 256), nw = parse_ids(cc, want, 128);
            attn_llama_state_reset(st);
            int rc = attn_llama_forward(st, logits, ids, ni, 0, 0);
            int same = 0;
            for (int s = 0; rc == 0 && s < nw; s++) {
                int32_t next = (int32_t)attn_logits_argmax(logits, 512);
                if (next != want[s]) break;
                same++;
                rc = attn_llama_forward(st, logits, &next, 1, 0, 0);
            }
            n_greedy++;
            n_greedy_ok += same == nw;
            CHECK(same == nw, "greedy continuation: %d of %d tokens equal the float64 reference", same, nw);
        } else if (strcmp(kind, "positions") == 0 && b) {
            int32_t pos[64], seq[600];
            int np_ = parse_ids(a, pos, 64), ns = parse_ids(b, seq, 600);
            attn_tensor ref;
            CHECK_OK(attn_npy_load(&ref, attn_test_fixture("llama/stories260K_logits.npy")));
            CHECK(ref.dtype == ATTN_F64 && ref.shape[0] == np_ && ref.shape[1] == 512, "logits fixture shape");
            attn_llama_state_reset(st);
            CHECK_OK(attn_llama_forward(st, logits, seq, ns, 1, 0));
            double worst = 0;
            for (int i = 0; i < np_; i++)
                for (int v = 0; v < 512; v++) {
                    double d = fabs((double)logits[(size_t)pos[i] * 512 + v] - ((double *)ref.data)[i * 512 + v]);
                    if (d > worst) worst = d;
                }
            /* float32 pass vs float64: 5 layers of width 64, logits of magnitude ~10: measured 4e-6 */
            CHECK(worst < 1e-4, "stories260K logits vs NumPy float64 at %d positions: max |diff| %.3g (tol 1e-4)", np_, worst);
            printf("stories260K: max |logit - float64 reference| = %.3g over %d positions\n", worst, np_);
            free(ref.data);
            /* cached decode, one token at a time, equals the single pass */
            float *one = (float *)malloc(sizeof(float) * 512);
            attn_llama_state_reset(st);
            double wc = 0;
            for (int i = 0; i < ns; i++) {
                if (attn_llama_forward(st, one, &seq[i], 1, 0, 0) != 0) wc = INFINITY;
                for (int v = 0; v < 512; v++) wc = fmax(wc, fabs((double)one[v] - logits[(size_t)i * 512 + v]));
            }
            CHECK(wc < 2e-5, "cached one-token steps vs one causal pass over %d positions: max |diff| %.3g (tol 2e-5)", ns, wc);
            /* context full */
            attn_llama_state *small = NULL;
            CHECK_OK(attn_llama_state_create(&small, m, 4));
            CHECK_OK(attn_llama_forward(small, one, seq, 4, 0, 0));
            CHECK_ERR(attn_llama_forward(small, one, seq, 1, 0, 0), ATTN_E_RANGE);
            CHECK(strstr(attn_last_error(), "context full") != NULL, "context-full message: %s", attn_last_error());
            CHECK(attn_llama_state_len(small) == 4, "state unchanged after a refused step");
            int32_t bad = 512;
            attn_llama_state_reset(small);
            CHECK_ERR(attn_llama_forward(small, one, &bad, 1, 0, 0), ATTN_E_RANGE);
            attn_llama_state_free(small);
            free(one);
        }
    }
    fclose(f);
    CHECK(n_tok >= 20 && n_tok_ok == n_tok, "tokenizer cases %d/%d", n_tok_ok, n_tok);
    CHECK(n_greedy == 4 && n_greedy_ok == 4, "greedy prompts %d/%d", n_greedy_ok, n_greedy);
    printf("stories260K: tokenizer %d/%d cases, greedy %d/%d prompts x 64 tokens identical\n", n_tok_ok, n_tok, n_greedy_ok, n_greedy);
    /* streaming decode of byte-fallback pieces: "日本語" arrives byte by byte, printed whole */
    {
        int32_t ids[32];
        int64_t n = 0;
        CHECK_OK(attn_bpe_encode(tok, "日本語", strlen("日本語"), 0, ids, 32, &n));
        attn_bpe_stream s;
        attn_bpe_stream_init(&s, 0);
        s.prev_id = 1;
        char out[64], acc[64];
        size_t al = 0, ol;
        int partial = 0;
        for (int64_t i = 0; i < n; i++) {
            CHECK_OK(attn_bpe_stream_push(tok, &s, ids[i], out, sizeof out, &ol));
            if (ol % 3 != 0) partial = 1; /* each CJK character is 3 bytes: never a part */
            memcpy(acc + al, out, ol);
            al += ol;
        }
        CHECK_OK(attn_bpe_stream_flush(&s, out, sizeof out, &ol));
        CHECK(!partial && ol == 0 && al == strlen("日本語") && memcmp(acc, "日本語", al) == 0, "streamed byte pieces form whole characters");
        /* an invalid lone byte is shown as U+FFFD, not passed through */
        attn_bpe_stream_init(&s, 0);
        int32_t lone = 3 + 0xE6; /* <0xE6> then 'a' */
        CHECK_OK(attn_bpe_stream_push(tok, &s, lone, out, sizeof out, &ol));
        CHECK(ol == 0, "an incomplete character is held back");
        int32_t a_id = attn_bpe_token_to_id(tok, "a");
        CHECK_OK(attn_bpe_stream_push(tok, &s, a_id, out, sizeof out, &ol));
        CHECK(ol == 4 && memcmp(out, "\xEF\xBF\xBD" "a", 4) == 0, "a broken sequence becomes U+FFFD");
        /* a reply cut inside a character: the two bytes held back of "日" end as ONE U+FFFD, as
         * Python's bytes(...).decode("utf-8", "replace") gives (issue 23 item 12; was one per byte) */
        attn_bpe_stream_init(&s, 0);
        CHECK_OK(attn_bpe_stream_push(tok, &s, 3 + 0xE6, out, sizeof out, &ol));
        CHECK_OK(attn_bpe_stream_push(tok, &s, 3 + 0x97, out, sizeof out, &ol));
        CHECK_OK(attn_bpe_stream_flush(&s, out, sizeof out, &ol));
        CHECK(ol == 3 && memcmp(out, "\xEF\xBF\xBD", 3) == 0, "a cut character ends as one U+FFFD (got %zu bytes)", ol);
    }
    free(logits);
    attn_llama_state_free(st);
    attn_bpe_free(tok);
    attn_llama_free(m);
}

/* The checkpoint reader on a hand-built file: every tensor is filled with its own number (1 =
 * token embedding ... 12 = classifier, in llama2.c's export order), so each view must start and
 * end on its number; the legacy RoPE tables (value 99) must be skipped. */
static void test_llama2c_reader(void) {
    const int64_t D = 4, F = 6, L = 2, H = 2, KV = 1, V = 3, T = 2, hd = D / H, kvd = KV * hd;
    const int64_t counts[13] = {V * D, L * D, L * D * D, L * kvd * D, L * kvd * D, L * D * D, L * D,
                                L * F * D, L * D * F, L * F * D, D, T * hd, V * D};
    const float values[13] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 99, 12};
    int64_t total = 0;
    for (int i = 0; i < 13; i++) total += counts[i];
    size_t size = 28 + 4 * (size_t)total;
    float *file = (float *)malloc(size);
    CHECK(file != NULL, "alloc");
    if (!file) return;
    int32_t h[7] = {(int32_t)D, (int32_t)F, (int32_t)L, (int32_t)H, (int32_t)KV, -(int32_t)V, (int32_t)T}; /* < 0: own classifier */
    memcpy(file, h, sizeof h);
    float *w = file + 7;
    for (int i = 0; i < 13; i++)
        for (int64_t j = 0; j < counts[i]; j++) *w++ = values[i];
    attn_llama2c c;
    CHECK_OK(attn_llama2c_parse(&c, file, size, "hand.bin"));
    CHECK(c.dim == D && c.hidden_dim == F && c.n_layers == L && c.n_heads == H && c.n_kv_heads == KV && c.vocab_size == V &&
              c.context == T && c.head_dim == hd && c.shared_classifier == 0,
          "hand-built header");
    const float *views[12] = {c.tok_embd, c.attn_norm, c.wq, c.wk, c.wv, c.wo, c.ffn_norm, c.w1, c.w2, c.w3, c.final_norm, c.output};
    const int idx[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12};
    for (int i = 0; i < 12; i++)
        CHECK(views[i] && views[i][0] == values[idx[i]] && views[i][counts[idx[i]] - 1] == values[idx[i]],
              "view %d holds tensor %g at both ends", i, (double)values[idx[i]]);
    CHECK(c.output + V * D == (const float *)((const char *)file + size), "the classifier ends the file");
    /* shared classifier: the same bytes without the last tensor, vocab_size > 0 */
    h[5] = (int32_t)V;
    memcpy(file, h, sizeof h);
    CHECK_OK(attn_llama2c_parse(&c, file, size - 4 * (size_t)(V * D), "hand.bin"));
    CHECK(c.shared_classifier == 1 && c.output == c.tok_embd, "shared classifier is the embedding");
    CHECK_ERR(attn_llama2c_parse(&c, file, size, "hand.bin"), ATTN_E_FORMAT); /* one tensor too many */
    CHECK(strstr(attn_last_error(), "hand.bin: the header implies") != NULL, "size message: %s", attn_last_error());
    CHECK(c.tok_embd == NULL && c.dim == 0, "output zeroed on error");
    h[3] = 3; /* 4 is not a multiple of 3 heads */
    memcpy(file, h, sizeof h);
    CHECK_ERR(attn_llama2c_parse(&c, file, size, "hand.bin"), ATTN_E_FORMAT);
    CHECK(strstr(attn_last_error(), "hyper-parameters") != NULL || strstr(attn_last_error(), "multiple") != NULL, "heads message: %s",
          attn_last_error());
    CHECK_ERR(attn_llama2c_parse(&c, file, 27, "hand.bin"), ATTN_E_FORMAT);
    CHECK_ERR(attn_llama2c_parse(NULL, file, size, "hand.bin"), ATTN_E_INVALID);
    free(file);
}

static void test_bad_llama2c(void) {
    char dir[] = "/tmp/attn_llama_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    char path[256];
    snprintf(path, sizeof path, "%s/trunc.bin", dir);
    FILE *in = fopen(MODEL, "rb");
    static char buf[1 << 20];
    size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (in) fclose(in);
    attn_llama *m = NULL;
    size_t cuts[] = {0, 10, 28, 1000, n / 2, n - 4};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        FILE *f = fopen(path, "wb");
        fwrite(buf, 1, cuts[i], f);
        fclose(f);
        int rc = attn_llama_load_llama2c(&m, path);
        CHECK(rc == ATTN_E_FORMAT && m == NULL, "truncated llama2.c file (%zu bytes) refused: %d %s", cuts[i], rc, attn_last_error());
    }
    /* corrupted header: zero heads, huge dim */
    int32_t h[7] = {64, 172, 5, 0, 4, 512, 512};
    memcpy(buf, h, sizeof h);
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    CHECK_ERR(attn_llama_load_llama2c(&m, path), ATTN_E_FORMAT);
    h[3] = 8;
    h[0] = 1 << 30;
    memcpy(buf, h, sizeof h);
    f = fopen(path, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    CHECK_ERR(attn_llama_load_llama2c(&m, path), ATTN_E_FORMAT);
    CHECK_ERR(attn_llama_load_llama2c(&m, "/nonexistent/x.bin"), ATTN_E_IO);
    /* tokenizer: wrong vocabulary size, truncated file */
    attn_bpe *t = NULL;
    CHECK_ERR(attn_bpe_load_llama2c(&t, TOKBIN, 511), ATTN_E_FORMAT);
    CHECK_ERR(attn_bpe_load_llama2c(&t, TOKBIN, 513), ATTN_E_FORMAT);
    in = fopen(TOKBIN, "rb");
    n = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (in) fclose(in);
    f = fopen(path, "wb");
    fwrite(buf, 1, n - 3, f);
    fclose(f);
    CHECK_ERR(attn_bpe_load_llama2c(&t, path, 512), ATTN_E_FORMAT);
    unlink(path);
    rmdir(dir);
}

static void test_sampling(void) {
    attn_sampler_params p = attn_sampler_params_default();
    float lg[6] = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f};
    attn_sampler *s = NULL;
    int32_t tok = -1;
    /* greedy: the first of the two 3.0 */
    p.temperature = 0;
    CHECK_OK(attn_sampler_create(&s, &p, 6));
    float l[6];
    memcpy(l, lg, sizeof l);
    CHECK_OK(attn_sampler_sample(s, &tok, l, NULL, 0));
    CHECK(tok == 1, "greedy picks the lowest id among equal maxima (got %d)", tok);
    CHECK_OK(attn_sampler_ban(s, 1));
    memcpy(l, lg, sizeof l);
    CHECK_OK(attn_sampler_sample(s, &tok, l, NULL, 0));
    CHECK(tok == 3 && isinf(l[1]) && l[1] < 0, "a banned id gets -inf before any softmax (got %d)", tok);
    attn_sampler_free(s);
    /* sampled frequencies match softmax(l / T) within 4 sigma (20000 draws) */
    p.temperature = 0.7f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 42;
    CHECK_OK(attn_sampler_create(&s, &p, 6));
    int counts[6] = {0};
    const int N = 20000;
    int fails = 0;
    for (int i = 0; i < N; i++) {
        memcpy(l, lg, sizeof l);
        fails += attn_sampler_sample(s, &tok, l, NULL, 0) != 0;
        if (tok >= 0 && tok < 6) counts[tok]++;
    }
    CHECK(fails == 0, "20000 draws succeed");
    double z = 0, pr[6];
    for (int i = 0; i < 6; i++) z += exp((lg[i] - 3.0) / 0.7);
    int ok = 1;
    for (int i = 0; i < 6; i++) {
        pr[i] = exp((lg[i] - 3.0) / 0.7) / z;
        double sd = sqrt(N * pr[i] * (1 - pr[i]));
        if (fabs(counts[i] - N * pr[i]) > 4 * sd + 1) ok = 0;
    }
    CHECK(ok, "sampled frequencies follow softmax(logits/T): %d %d %d %d %d %d", counts[0], counts[1], counts[2], counts[3], counts[4], counts[5]);
    attn_sampler_free(s);
    /* the same seed gives the same sequence; top-k 2 only ever returns the two best (ties at 3.0) */
    p.top_k = 2;
    attn_sampler *s1 = NULL, *s2 = NULL;
    CHECK_OK(attn_sampler_create(&s1, &p, 6));
    CHECK_OK(attn_sampler_create(&s2, &p, 6));
    int same = 1, only_top = 1;
    for (int i = 0; i < 200; i++) {
        int32_t t1, t2;
        float l1[6], l2[6];
        memcpy(l1, lg, sizeof l1);
        memcpy(l2, lg, sizeof l2);
        attn_sampler_sample(s1, &t1, l1, NULL, 0);
        attn_sampler_sample(s2, &t2, l2, NULL, 0);
        same &= t1 == t2;
        only_top &= t1 == 1 || t1 == 3;
    }
    CHECK(same, "equal seeds give equal samples");
    CHECK(only_top, "top-k 2 keeps only ids 1 and 3");
    attn_sampler_free(s1);
    attn_sampler_free(s2);
    /* top-p: p(1) = p(3) = 0.32 at T = 1; top_p 0.5 keeps {1, 3}; min-p 0.5 drops id 2 (p 0.12 < 0.16) */
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 0.5f;
    CHECK_OK(attn_sampler_create(&s, &p, 6));
    only_top = 1;
    for (int i = 0; i < 300; i++) {
        memcpy(l, lg, sizeof l);
        attn_sampler_sample(s, &tok, l, NULL, 0);
        only_top &= tok == 1 || tok == 3;
    }
    CHECK(only_top, "top-p 0.5 keeps the two most likely");
    attn_sampler_free(s);
    p.top_p = 1.0f;
    p.min_p = 0.5f;
    CHECK_OK(attn_sampler_create(&s, &p, 6));
    only_top = 1;
    for (int i = 0; i < 300; i++) {
        memcpy(l, lg, sizeof l);
        attn_sampler_sample(s, &tok, l, NULL, 0);
        only_top &= tok == 1 || tok == 3;
    }
    CHECK(only_top, "min-p 0.5 drops tokens under half the top probability");
    attn_sampler_free(s);
    /* repetition penalty (CTRL): 3.0 -> 1.5, -1.0 -> -2.0, each id once */
    memcpy(l, lg, sizeof l);
    int32_t hist[3] = {1, 4, 1};
    CHECK_OK(attn_logits_repetition_penalty(l, 6, hist, 3, 2.0f));
    CHECK(l[1] == 1.5f && l[4] == -2.0f && l[3] == 3.0f, "repetition penalty values %g %g %g", l[1], l[4], l[3]);
    /* invalid parameters and NaN */
    p = attn_sampler_params_default();
    p.temperature = -1;
    CHECK_ERR(attn_sampler_create(&s, &p, 6), ATTN_E_INVALID);
    p.temperature = 1;
    p.top_p = 0;
    CHECK_ERR(attn_sampler_create(&s, &p, 6), ATTN_E_INVALID);
    p.top_p = 1.5f;
    CHECK_ERR(attn_sampler_create(&s, &p, 6), ATTN_E_INVALID);
    p.top_p = 1;
    p.min_p = 1;
    CHECK_ERR(attn_sampler_create(&s, &p, 6), ATTN_E_INVALID);
    p.min_p = 0;
    p.repetition_penalty = 0.5f;
    CHECK_ERR(attn_sampler_create(&s, &p, 6), ATTN_E_INVALID);
    p.repetition_penalty = 1;
    CHECK_OK(attn_sampler_create(&s, &p, 6));
    memcpy(l, lg, sizeof l);
    l[2] = NAN;
    CHECK_ERR(attn_sampler_sample(s, &tok, l, NULL, 0), ATTN_E_RANGE);
    for (int i = 0; i < 6; i++) attn_sampler_ban(s, i);
    memcpy(l, lg, sizeof l);
    CHECK_ERR(attn_sampler_sample(s, &tok, l, NULL, 0), ATTN_E_RANGE);
    attn_sampler_free(s);
}

static void test_cli(void) {
    char dir[] = "/tmp/attn_gen_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    const char *bin = attn_test_cli_path();
    static char out[1 << 16], err[1 << 14];
    const char *ok[] = {"generate", "--model", MODEL, "--tokenizer", TOKBIN, "-p", "Once upon a time", "--temp", "0", "-n", "30", "--threads", "1", NULL};
    int rc = attn_test_run(bin, dir, out, sizeof out, err, sizeof err, ok);
    CHECK(rc == 0 && strncmp(out, "Once upon a time, there was a little girl named Lily. She loved to play outside", 79) == 0,
          "attn generate stories260K greedy: rc %d, out '%s'", rc, out);
    CHECK(strstr(err, "tokens/s") != NULL, "speed on stderr: %s", err);
    /* seeded sampling is reproducible */
    static char out2[1 << 16];
    const char *smp[] = {"generate", "--model", MODEL, "--tokenizer", TOKBIN, "-p", "Lily", "--temp", "1", "--seed", "7", "-n", "40", NULL};
    int r1 = attn_test_run(bin, dir, out, sizeof out, NULL, 0, smp);
    int r2 = attn_test_run(bin, dir, out2, sizeof out2, NULL, 0, smp);
    CHECK(r1 == 0 && r2 == 0 && strcmp(out, out2) == 0 && strlen(out) > 20, "same --seed, same text");
    struct {
        const char *args[16];
        int want;
        const char *msg;
    } bad[] = {
        {{"generate", "--model", MODEL, "--tokenizer", TOKBIN, "-p", "x", "-n", "0", NULL}, 2, "-n"},
        {{"generate", "--model", MODEL, "--tokenizer", TOKBIN, "-p", "x", "--temp", "-1", NULL}, 2, "--temp"},
        {{"generate", "--model", MODEL, "--tokenizer", TOKBIN, "-p", "x", "--top-p", "0", NULL}, 2, "--top-p"},
        {{"generate", "--model", MODEL, "--tokenizer", TOKBIN, "-p", "x", "--top-p", "1.5", NULL}, 2, "--top-p"},
        {{"generate", "--model", MODEL, "--tokenizer", TOKBIN, "-p", "bad \xC3\x28 utf8", NULL}, 1, "UTF-8"},
        /* a file that is neither GGUF nor a llama2.c checkpoint, no tokenizer beside it: a bad file (exit 1;
         * a checkpoint alone is the usage error, and the checkpoint itself finds tok512.bin: test_cli) */
        {{"generate", "--model", "/dev/null", "-p", "x", NULL}, 1, "nor is it a GGUF file"},
        {{"generate", "--model", "/nonexistent.gguf", "-p", "x", NULL}, 1, "cannot open"},
        {{"generate", "--model", TOKBIN, "--tokenizer", TOKBIN, "-p", "x", NULL}, 1, "not a llama2.c checkpoint"},
        {{"generate", "-p", "x", NULL}, 2, "--model"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = attn_test_run(bin, dir, out, sizeof out, err, sizeof err, bad[i].args);
        CHECK(rc == bad[i].want && strstr(err, bad[i].msg) != NULL, "bad input %zu: exit %d (want %d), stderr '%s'", i, rc, bad[i].want, err);
    }
    /* a prompt longer than the context (512) */
    static char longp[8192];
    for (int i = 0; i < 700; i++) memcpy(longp + 3 * i, " Ox", 3);
    longp[2100] = 0;
    const char *lp[] = {"generate", "--model", MODEL, "--tokenizer", TOKBIN, "-p", longp, NULL};
    rc = attn_test_run(bin, dir, out, sizeof out, err, sizeof err, lp);
    CHECK(rc == 1 && strstr(err, "context") != NULL, "prompt longer than the context: exit %d, '%s'", rc, err);
    /* the context filling up during generation is said plainly */
    const char *full[] = {"generate", "--model", MODEL, "--tokenizer", TOKBIN, "-p", "Once", "--temp", "0", "-n", "2000", NULL};
    rc = attn_test_run(bin, dir, out, sizeof out, err, sizeof err, full);
    CHECK(rc == 0 && (strstr(err, "context is full") != NULL || strstr(err, "generation:") != NULL), "long generation: exit %d, '%s'", rc, err);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/stdout.txt", dir);
    unlink(tmp);
    snprintf(tmp, sizeof tmp, "%s/stderr.txt", dir);
    unlink(tmp);
    rmdir(dir);
}


/* The library's generation loop (attn_llama_generate / attn_generation_next): greedy text equals
 * the detokenized greedy ids of the float64 fixture path (test_stories checks those ids), stop
 * strings (several; the earliest wins, never printed), and the context-full rule: a prompt of P
 * tokens in a context of C positions gives C - P + 1 tokens (llama2.c's rule; issue 23 item 10:
 * the Python loop gave C - P). */
typedef struct {
    char text[4096];
    size_t len;
    int calls;
} gen_sink;
static int gen_collect(void *ctx, const char *t, size_t n, int32_t token) {
    (void)token;
    gen_sink *k = (gen_sink *)ctx;
    if (k->len + n < sizeof k->text) {
        memcpy(k->text + k->len, t, n);
        k->len += n;
        k->text[k->len] = 0;
    }
    return ++k->calls >= 1000;
}

static void test_generate_api(void) {
    attn_llama *m = NULL;
    attn_bpe *tok = NULL;
    CHECK_OK(attn_llama_load_llama2c(&m, MODEL));
    if (!m) return;
    CHECK_OK(attn_bpe_load_llama2c(&tok, TOKBIN, 512));
    attn_llama_state *st = NULL;
    CHECK_OK(attn_llama_state_create(&st, m, 0));
    int32_t prompt[64];
    int64_t np = 0;
    CHECK_OK(attn_bpe_encode(tok, "Once upon a time", 16, 0, prompt + 1, 63, &np));
    prompt[0] = 1;
    np++;
    attn_generate_opts o = attn_generate_opts_default();
    o.sampling.temperature = 0.0f;
    o.max_tokens = 30;
    gen_sink k;
    memset(&k, 0, sizeof k);
    attn_generate_stats gs;
    attn_token_list hist = {0};
    CHECK_OK(attn_llama_generate(st, tok, prompt, np, &o, &hist, gen_collect, &k, &gs));
    /* the same ids through the plain forward pass and argmax, decoded in one go */
    attn_llama_state *st2 = NULL;
    CHECK_OK(attn_llama_state_create(&st2, m, 0));
    float *lg = (float *)malloc(sizeof(float) * 512);
    int32_t ids[128];
    int64_t n = 0;
    CHECK_OK(attn_llama_forward(st2, lg, prompt, np, 0, 0));
    for (int i = 0; i < 30; i++) {
        int32_t t = attn_logits_argmax(lg, 512);
        if (t == 2) break;
        ids[n++] = t;
        CHECK_OK(attn_llama_forward(st2, lg, &t, 1, 0, 0));
    }
    char want[4096];
    size_t wl = 0;
    CHECK_OK(attn_bpe_decode(tok, ids, n, 0, want, sizeof want, &wl));
    CHECK(gs.n_gen == n && k.len == wl && memcmp(k.text, want, wl) == 0 && gs.finish == ATTN_FINISH_LENGTH && gs.pending_token == ids[n - 1],
          "greedy generation equals argmax decoding: '%s' vs '%.*s'", k.text, (int)wl, want);
    CHECK(hist.n == np + n && hist.ids[np] == ids[0], "history holds the prompt and the generated tokens (%lld)", (long long)hist.n);
    /* stop strings: the earliest of two, not printed */
    const char *w3 = strstr(want, "a little");
    const char *stops[2] = {"zzz", "a little"};
    if (w3) {
        attn_llama_state_reset(st);
        memset(&k, 0, sizeof k);
        o.stop = stops;
        o.n_stop = 2;
        CHECK_OK(attn_llama_generate(st, tok, prompt, np, &o, NULL, gen_collect, &k, &gs));
        CHECK(gs.finish == ATTN_FINISH_STOP && k.len == (size_t)(w3 - want) && memcmp(k.text, want, k.len) == 0,
              "stop string: text cut before it: '%s'", k.text);
        o.stop = NULL;
        o.n_stop = 0;
    }
    /* context rule: C = 12, P = np */
    attn_llama_state *small = NULL;
    CHECK_OK(attn_llama_state_create(&small, m, 12));
    o.max_tokens = 100;
    memset(&k, 0, sizeof k);
    CHECK_OK(attn_llama_generate(small, tok, prompt, np, &o, NULL, gen_collect, &k, &gs));
    CHECK(gs.finish == ATTN_FINISH_CONTEXT && gs.n_gen == 12 - np + 1, "context full after C - P + 1 = %lld tokens (got %lld, finish %d)",
          (long long)(12 - np + 1), (long long)gs.n_gen, (int)gs.finish);
    /* bad input: an empty prompt, a prompt that does not fit, an empty stop string */
    attn_generation *g = NULL;
    CHECK_ERR(attn_generation_start(&g, st, tok, prompt, 0, &o, NULL), ATTN_E_INVALID);
    attn_llama_state_reset(small);
    int32_t big[13] = {1};
    CHECK_ERR(attn_generation_start(&g, small, tok, big, 13, &o, NULL), ATTN_E_RANGE);
    CHECK(strstr(attn_last_error(), "does not fit") != NULL, "too long a prompt: %s", attn_last_error());
    const char *empty[1] = {""};
    o.stop = empty;
    o.n_stop = 1;
    CHECK_ERR(attn_generation_start(&g, st, tok, prompt, np, &o, NULL), ATTN_E_INVALID);
    /* a callback that stops generation */
    o.stop = NULL;
    o.n_stop = 0;
    attn_llama_state_reset(st);
    memset(&k, 0, sizeof k);
    k.calls = 997;
    CHECK_OK(attn_llama_generate(st, tok, prompt, np, &o, NULL, gen_collect, &k, &gs));
    CHECK(gs.finish == ATTN_FINISH_CANCELLED && k.calls == 1000, "the callback stops generation (finish %d)", (int)gs.finish);
    attn_token_list_free(&hist);
    free(lg);
    attn_llama_state_free(small);
    attn_llama_state_free(st2);
    attn_llama_state_free(st);
    attn_bpe_free(tok);
    attn_llama_free(m);
}

/* The chat template: ChatML text with the template's default system turn (issue 23 item 9: one
 * code path for the CLI, Python and the server). */
static void test_chat_format(void) {
    const char *tmpl = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are "
                       "a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + "
                       "message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";
    char *sys = NULL, *text = NULL;
    CHECK_OK(attn_chat_template_system(&sys, tmpl, 0));
    CHECK(sys && strcmp(sys, "You are a helpful AI assistant named SmolLM, trained by Hugging Face") == 0, "default system: '%s'", sys ? sys : "");
    attn_chat_message msgs[3] = {{"user", "hi"}, {"assistant", "hello"}, {"user", "2+2?"}};
    CHECK_OK(attn_chat_format(&text, msgs, 3, sys));
    CHECK(text && strcmp(text, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                               "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
                               "<|im_start|>assistant\n") == 0,
          "ChatML with the default system turn: '%s'", text ? text : "");
    free(text);
    attn_chat_message own[2] = {{"system", "Be brief."}, {"user", "hi"}};
    CHECK_OK(attn_chat_format(&text, own, 2, sys));
    CHECK(text && strncmp(text, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi", 55) == 0, "own system turn kept: '%s'", text ? text : "");
    free(text);
    attn_chat_message bad[1] = {{"tool", "x"}};
    CHECK_ERR(attn_chat_format(&text, bad, 1, NULL), ATTN_E_INVALID);
    attn_chat_message badu[1] = {{"user", "a\xff"}};
    CHECK_ERR(attn_chat_format(&text, badu, 1, NULL), ATTN_E_INVALID);
    CHECK(strstr(attn_last_error(), "message 0") && strstr(attn_last_error(), "offset 1"), "UTF-8 error names the message: %s", attn_last_error());
    char *none = NULL;
    CHECK_ERR(attn_chat_template_system(&none, NULL, 0), ATTN_E_UNSUPPORTED);
    CHECK_ERR(attn_chat_template_system(&none, "{{ bos }}{{ prompt }}", 0), ATTN_E_UNSUPPORTED);
    CHECK_OK(attn_chat_template_system(&none, "{{ bos }}", 1));
    CHECK(none == NULL, "forced ChatML without a system text");
    free(sys);
}

/* issue 23 item 13: a NaN weight in a llama2.c checkpoint was found only at the first forward;
 * now the loader names it (llama2.c's export names). Weights of stories260K: header {dim 64,
 * hidden 172, layers 5, heads 8, kv heads 4, vocab 512, context 512}, then tok_embeddings
 * [512, 64], attention_norm [5, 64], wq [5, 64, 64], ... */
static void test_nan_llama2c(void) {
    FILE *in = fopen(MODEL, "rb");
    static char buf[1 << 21];
    size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (in) fclose(in);
    int32_t h[7];
    memcpy(h, buf, sizeof h);
    CHECK(n > 28 && h[0] == 64 && h[2] == 5 && h[5] == 512, "stories260K header");
    if (n <= 28 || h[0] != 64) return;
    char path[] = "/tmp/attn_llama_nan_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return;
    close(fd);
    const int64_t D = 64, V = 512, L = 5;
    struct {
        int64_t index; /* float index after the header */
        float value;
        const char *want;
    } cases[] = {{V * D + L * D + 1 * D * D + 5, NAN, "'layers.1.attention.wq.weight' holds a non-finite value (NaN or inf) at element 5"},
                 {7, INFINITY, "'tok_embeddings.weight' holds a non-finite value (NaN or inf) at element 7"}};
    for (int k = 0; k < 2; k++) {
        static char c[1 << 21];
        memcpy(c, buf, n);
        memcpy(c + 28 + 4 * cases[k].index, &cases[k].value, 4);
        FILE *f = fopen(path, "wb");
        fwrite(c, 1, n, f);
        fclose(f);
        attn_llama *m = NULL;
        int rc = attn_llama_load_llama2c(&m, path);
        CHECK(rc == ATTN_E_FORMAT && m == NULL && strstr(attn_last_error(), cases[k].want), "%s: %d %s", cases[k].want, rc,
              attn_last_error());
        attn_llama_free(m);
    }
    unlink(path);
}

int main(void) {
    attn_test_name = "llama";
    test_stories();
    test_generate_api();
    test_chat_format();
    test_llama2c_reader();
    test_bad_llama2c();
    test_nan_llama2c();
    test_sampling();
    test_cli();
    return attn_test_finish();
}
