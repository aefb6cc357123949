/* attn bench: kernel and model throughput, in-process (like llama-bench).
 *
 *   attn bench sdpa [--B N] [--H N] [--Hkv N] [--L N] [--Lq N] [--D N] [--causal]
 *                   [--dtype fp32|bf16|fp16] [--threads N] [--impl fused|reference]
 *                   [--min-time S] [--reps N] [--backward]
 *   attn bench embed --model DIR [--threads N] [--batch N] [--sentences N] [--min-time S]
 *
 * sdpa: --L, --Lq, --D, --H, --threads and --dtype take comma-separated lists; every combination
 * is one configuration and one output line. Each configuration: inputs uniform in [-1, 1) (then
 * rounded to the dtype), one untimed warm-up call, then timed calls until --min-time seconds
 * (default 1) and at least 3 calls (at most --reps); the best time is reported with the median.
 * Useful FLOPs = 4·B·H·D·(number of visible (query, key) pairs): Lq·Lk without a mask; with
 * --causal (bottom-right) only the visible pairs, so causal and non-causal rates compare
 * directly. The last line is "GFLOP/s: X" for the last configuration.
 * --backward times attn_sdpa_backward instead (float32 only; one forward with the log-sum-exp
 * first, untimed), lines start "sdpa_backward"; useful FLOPs = 10·B·H·D·pairs (the five
 * products of FlashAttention-2's backward, 2.5x the forward; attn's kernel does 7, recomputing
 * P for dq).
 * embed: embeds a built-in set of sentences (deterministic, 8-40 words each) with the model, one
 * warm-up pass over the first batch, then passes over the whole set until --min-time; prints the
 * best sentences/s; last line "sentences/s: X". Model loading is not timed. */
#include "cli.h"

#include "attn_attention.h"
#include "attn_bert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* up to 16 comma-separated values of an option */
typedef struct {
    int64_t v[16];
    int n;
} int_list;

typedef struct {
    /* sdpa */
    int64_t B, Hkv, reps;
    int_list H, L, Lq, D, T;
    attn_dtype dts[16];
    int nDt, causal, impl, backward;
    float min_time;
    /* embed */
    const char *model;
    int64_t threads, batch, nsent;
} bench_opts;

/* parse "a,b,c" into up to 16 integers in [lo, hi] */
static int parse_list(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *v, int *n) {
    char buf[256];
    if (strlen(s) >= sizeof buf) return cli_usage_error("bench", "%s: list too long", opt);
    if (!*s || s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
        return cli_usage_error("bench", "%s: empty value in '%s'", opt, s);
    strcpy(buf, s);
    *n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (*n >= 16) return cli_usage_error("bench", "%s: at most 16 values", opt);
        if (cli_parse_i64("bench", opt, tok, lo, hi, &v[*n]) != CLI_OK) return CLI_USAGE;
        (*n)++;
    }
    if (*n == 0) return cli_usage_error("bench", "%s: no value", opt);
    return CLI_OK;
}

static int list_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    int_list *l = (int_list *)field;
    return parse_list(o->name, val, o->lo, o->hi, l->v, &l->n) != CLI_OK ? CLI_USAGE : CLI_OK;
}

static int dtype_list_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    bench_opts *b = (bench_opts *)base;
    char buf[128];
    if (strlen(val) >= sizeof buf) return cli_usage_error("bench", "--dtype: list too long");
    if (!*val || val[0] == ',' || val[strlen(val) - 1] == ',' || strstr(val, ",,"))
        return cli_usage_error("bench", "--dtype: empty value in '%s'", val);
    strcpy(buf, val);
    b->nDt = 0;
    for (char *tok = strtok(buf, ","); tok && b->nDt < 16; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "fp32") || !strcmp(tok, "float32")) b->dts[b->nDt++] = ATTN_F32;
        else if (!strcmp(tok, "bf16") || !strcmp(tok, "bfloat16")) b->dts[b->nDt++] = ATTN_BF16;
        else if (!strcmp(tok, "fp16") || !strcmp(tok, "float16")) b->dts[b->nDt++] = ATTN_F16;
        else return cli_usage_error("bench", "--dtype must be fp32, bf16 or fp16, got '%s'", tok);
    }
    if (b->nDt == 0) return cli_usage_error("bench", "--dtype: no value");
    return CLI_OK;
}

static int min_time_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    float *t = (float *)field;
    if (cli_parse_f32("bench", "--min-time", val, t) != CLI_OK) return CLI_USAGE;
    if (*t < 0 || *t > 3600) return cli_usage_error("bench", "--min-time must be in 0..3600");
    return CLI_OK;
}

#define F(f) offsetof(bench_opts, f)
static const char *const impls[] = {"fused", "reference", NULL};
static const int impl_ids[] = {ATTN_IMPL_FUSED, ATTN_IMPL_REFERENCE};
static const cli_option sdpa_options[] = {
    {"--B", NULL, CLI_I64, F(B), 1, 1 << 20, .help = "  --B N            batch (default 1)\n"},
    {"--H", NULL, CLI_CALL, F(H), 1, 1 << 16, .fn = list_opt, .takes_value = 1, .help = "  --H N[,N..]      query heads (default 8)\n"},
    {"--Hkv", NULL, CLI_I64, F(Hkv), 1, 1 << 16, .help = "  --Hkv N          key/value heads (default H; must divide H)\n"},
    {"--L", NULL, CLI_CALL, F(L), 1, (int64_t)1 << 24, .fn = list_opt, .takes_value = 1,
     .help = "  --L N[,N..]      key length Lk (default 4096)\n"},
    {"--Lq", NULL, CLI_CALL, F(Lq), 1, (int64_t)1 << 24, .fn = list_opt, .takes_value = 1,
     .help = "  --Lq N[,N..]     query length (default L; 1 = decode against a KV cache of L)\n"},
    {"--D", NULL, CLI_CALL, F(D), 1, 1 << 16, .fn = list_opt, .takes_value = 1, .help = "  --D N[,N..]      head_dim (default 64)\n"},
    {"--causal", NULL, CLI_FLAG, F(causal), 1, .help = "  --causal         bottom-right causal mask\n"},
    {"--dtype", NULL, CLI_CALL, 0, .fn = dtype_list_opt, .takes_value = 1,
     .help = "  --dtype LIST     fp32 | bf16 | fp16 for q, k, v (out is float32; default fp32)\n"},
    {"--threads", NULL, CLI_CALL, F(T), 1, 4096, .fn = list_opt, .takes_value = 1,
     .help = "  --threads N[,N..] threads (default: all cores)\n"},
    {"--impl", NULL, CLI_CHOICE, F(impl), .choices = impls, .values = impl_ids,
     .help = "  --impl NAME      fused (default) | reference\n"},
    {"--min-time", NULL, CLI_CALL, F(min_time), .fn = min_time_opt, .takes_value = 1,
     .help = "  --min-time S     seconds of timed calls per configuration (default 1)\n"},
    {"--reps", NULL, CLI_I64, F(reps), 3, 1000000, .help = "  --reps N         at most N timed calls (default 100)\n"},
    {"--backward", NULL, CLI_FLAG, F(backward), 1, .help = "  --backward       time attn_sdpa_backward (fp32; FLOPs = 10*B*H*D*pairs)\n"},
    {0}};
static const cli_option embed_options[] = {
    {"--model", NULL, CLI_STR, F(model), .help = "  --model DIR      sentence-transformers BERT model directory (required)\n"},
    {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = "  --threads N      threads (default: all cores)\n"},
    {"--batch", NULL, CLI_I64, F(batch), 1, 4096, .help = "  --batch N        sentences per forward pass (default 32)\n"},
    {"--sentences", NULL, CLI_I64, F(nsent), 1, 100000, .help = "  --sentences N    size of the built-in set (default 256)\n"},
    {"--min-time", NULL, CLI_CALL, F(min_time), .fn = min_time_opt, .takes_value = 1,
     .help = "  --min-time S     seconds of timed passes (default 2)\n"},
    {0}};

static void usage_sdpa(FILE *f) {
    fprintf(f,
            "Usage: attn bench sdpa [options]\n"
            "       attn bench embed --model DIR [options]\n"
            "\n"
            "sdpa: times attn_sdpa on random [B, H, L, D] tensors and prints, per configuration,\n"
            "the best and median time and the useful GFLOP/s (4*B*H*D*visible pairs / best time).\n");
    cli_print_options(f, sdpa_options);
    fprintf(f,
            "ATTN_SIMD=avx512|avx2|portable forces the fused kernel's path; the line names the path.\n"
            "The last line is 'GFLOP/s: X' (the last configuration).\n"
            "\n"
            "embed: embeds a built-in set of sentences and prints sentences/s (best pass).\n");
    cli_print_options(f, embed_options);
    fprintf(f, "The last line is 'sentences/s: X'.\n");
}

static void fill_uniform(float *x, size_t n, uint64_t *s) {
    for (size_t i = 0; i < n; i++) {
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        uint64_t r = *s * 0x2545F4914F6CDD1DULL;
        x[i] = (float)((double)(r >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f;
    }
}

static const char *dtype_short(attn_dtype dt) { return dt == ATTN_BF16 ? "bf16" : dt == ATTN_F16 ? "fp16" : "fp32"; }

/* one configuration; returns GFLOP/s (or -1 on failure, message printed) */
static double bench_sdpa_one(int64_t B, int64_t H, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t D, int causal,
                             attn_dtype dt, int threads, attn_impl impl, double min_time, int64_t max_reps) {
    const size_t nq = (size_t)(B * H * Lq * D), nk = (size_t)(B * Hkv * Lk * D), no = (size_t)(B * H * Lq * D);
    const size_t es = attn_dtype_size(dt);
    float *tmp = malloc(sizeof(float) * (nq > nk ? nq : nk));
    void *q = malloc(es * nq + 1), *k = malloc(es * nk + 1), *v = malloc(es * nk + 1);
    float *o = malloc(sizeof(float) * no + 1);
    if (!tmp || !q || !k || !v || !o) {
        free(tmp), free(q), free(k), free(v), free(o);
        cli_error("bench sdpa: out of memory");
        return -1;
    }
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    fill_uniform(tmp, nq, &s);
    attn_convert(q, dt, tmp, ATTN_F32, nq);
    fill_uniform(tmp, nk, &s);
    attn_convert(k, dt, tmp, ATTN_F32, nk);
    fill_uniform(tmp, nk, &s);
    attn_convert(v, dt, tmp, ATTN_F32, nk);
    free(tmp);
    int64_t sq[4] = {B, H, Lq, D}, sk[4] = {B, Hkv, Lk, D};
    attn_tensor tq, tk, tv, to;
    attn_tensor_make(&tq, q, dt, 4, sq);
    attn_tensor_make(&tk, k, dt, 4, sk);
    attn_tensor_make(&tv, v, dt, 4, sk);
    attn_tensor_make(&to, o, ATTN_F32, 4, sq);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.is_causal = causal;
    p.n_threads = threads;
    p.impl = impl;
    double pairs = 0; /* visible (query, key) pairs */
    for (int64_t i = 0; i < Lq; i++) {
        int64_t hi = causal ? i + Lk - Lq + 1 : Lk;
        pairs += (double)(hi < 0 ? 0 : hi > Lk ? Lk : hi);
    }
    const double flops = 4.0 * (double)B * (double)H * (double)D * pairs;
    double *times = malloc(sizeof(double) * (size_t)(max_reps + 1));
    double res = -1;
    const char *kname = attn_sdpa_kernel_name(impl, dt);
    if (!times || !kname || attn_sdpa(&to, NULL, &tq, &tk, &tv, &p) < 0) { /* warm-up */
        if (!times) cli_error("bench sdpa: out of memory");
        else cli_lib_error("bench sdpa");
        goto done;
    }
    int64_t n = 0;
    const double t_start = now_s();
    while (n < max_reps && (n < 3 || now_s() - t_start < min_time)) {
        double t0 = now_s();
        if (attn_sdpa(&to, NULL, &tq, &tk, &tv, &p) < 0) {
            cli_lib_error("bench sdpa");
            goto done;
        }
        times[n++] = now_s() - t0;
    }
    qsort(times, (size_t)n, sizeof(double), cmp_d);
    res = flops / times[0] * 1e-9;
    printf("sdpa B=%lld H=%lld Hkv=%lld Lq=%lld Lk=%lld D=%lld causal=%d dtype=%s threads=%d kernel=\"%s\" reps=%lld "
           "best_ms=%.4f median_ms=%.4f GFLOP/s=%.1f\n",
           (long long)B, (long long)H, (long long)Hkv, (long long)Lq, (long long)Lk, (long long)D, causal, dtype_short(dt),
           threads > 0 ? threads : attn_get_num_threads(), kname, (long long)n, times[0] * 1e3, times[n / 2] * 1e3, res);
    fflush(stdout);
done:
    free(times), free(q), free(k), free(v), free(o);
    return res;
}

/* one --backward configuration; returns GFLOP/s (or -1 on failure, message printed) */
static double bench_sdpa_backward_one(int64_t B, int64_t H, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t D, int causal,
                                      int threads, attn_impl impl, double min_time, int64_t max_reps) {
    const size_t nq = (size_t)(B * H * Lq * D), nk = (size_t)(B * Hkv * Lk * D), nl = (size_t)(B * H * Lq);
    float *buf[8];
    const size_t sz[8] = {nq, nk, nk, nq, nq, nq, nk, nk}; /* q k v out dout dq dk dv */
    float *lse = malloc(sizeof(float) * nl + 1);
    int ok = lse != NULL;
    for (int i = 0; i < 8; i++) ok &= (buf[i] = malloc(sizeof(float) * sz[i] + 1)) != NULL;
    double *times = malloc(sizeof(double) * (size_t)(max_reps + 1));
    double res = -1;
    if (!ok || !times) {
        cli_error("bench sdpa: out of memory");
        goto done;
    }
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    fill_uniform(buf[0], nq, &s), fill_uniform(buf[1], nk, &s), fill_uniform(buf[2], nk, &s), fill_uniform(buf[4], nq, &s);
    int64_t sq[4] = {B, H, Lq, D}, sk[4] = {B, Hkv, Lk, D}, sl[3] = {B, H, Lq};
    attn_tensor t[8], tl;
    for (int i = 0; i < 8; i++) attn_tensor_make(&t[i], buf[i], ATTN_F32, 4, (i == 1 || i == 2 || i >= 6) ? sk : sq);
    attn_tensor_make(&tl, lse, ATTN_F32, 3, sl);
    attn_sdpa_params p = attn_sdpa_params_default();
    p.is_causal = causal;
    p.n_threads = threads;
    p.impl = impl;
    p.lse = &tl;
    if (attn_sdpa(&t[3], NULL, &t[0], &t[1], &t[2], &p) < 0 ||
        attn_sdpa_backward(&t[5], &t[6], &t[7], &t[0], &t[1], &t[2], &t[3], &tl, &t[4], &p) < 0) { /* warm-up */
        cli_lib_error("bench sdpa");
        goto done;
    }
    double pairs = 0;
    for (int64_t i = 0; i < Lq; i++) {
        int64_t hi = causal ? i + Lk - Lq + 1 : Lk;
        pairs += (double)(hi < 0 ? 0 : hi > Lk ? Lk : hi);
    }
    int64_t n = 0;
    const double t_start = now_s();
    while (n < max_reps && (n < 3 || now_s() - t_start < min_time)) {
        double t0 = now_s();
        if (attn_sdpa_backward(&t[5], &t[6], &t[7], &t[0], &t[1], &t[2], &t[3], &tl, &t[4], &p) < 0) {
            cli_lib_error("bench sdpa");
            goto done;
        }
        times[n++] = now_s() - t0;
    }
    qsort(times, (size_t)n, sizeof(double), cmp_d);
    res = 10.0 * (double)B * (double)H * (double)D * pairs / times[0] * 1e-9;
    printf("sdpa_backward B=%lld H=%lld Hkv=%lld Lq=%lld Lk=%lld D=%lld causal=%d dtype=fp32 threads=%d kernel=\"%s\" "
           "reps=%lld best_ms=%.4f median_ms=%.4f GFLOP/s=%.1f\n",
           (long long)B, (long long)H, (long long)Hkv, (long long)Lq, (long long)Lk, (long long)D, causal,
           threads > 0 ? threads : attn_get_num_threads(), impl == ATTN_IMPL_REFERENCE ? "reference" : "tiled",
           (long long)n, times[0] * 1e3, times[n / 2] * 1e3, res);
    fflush(stdout);
done:
    for (int i = 0; i < 8; i++) free(buf[i]);
    free(lse), free(times);
    return res;
}

static int bench_sdpa(int argc, char **argv) {
    bench_opts b = {.B = 1, .reps = 100, .H = {{8}, 1}, .L = {{4096}, 1}, .Lq = {{0}, 1}, .D = {{64}, 1}, .T = {{0}, 1},
                    .dts = {ATTN_F32}, .nDt = 1, .impl = ATTN_IMPL_FUSED, .min_time = 1.0f};
    int rc = cli_parse(argc, argv, "bench", sdpa_options, &b, NULL, NULL, NULL, usage_sdpa);
    if (rc != CLI_OK) return cli_parsed(rc);
    const int64_t Bv = b.B, Hkv = b.Hkv, reps = b.reps, *Hs = b.H.v, *Ls = b.L.v, *Lqs = b.Lq.v, *Ds = b.D.v, *Ts = b.T.v;
    const int nH = b.H.n, nL = b.L.n, nLq = b.Lq.n, nD = b.D.n, nT = b.T.n, nDt = b.nDt, causal = b.causal;
    const attn_dtype *dts = b.dts;
    const attn_impl impl = (attn_impl)b.impl;
    const float min_time = b.min_time;
    if (b.backward)
        for (int i = 0; i < nDt; i++)
            if (dts[i] != ATTN_F32) return cli_usage_error("bench", "--backward takes --dtype fp32 only");
    double last = -1;
    for (int iL = 0; iL < nL; iL++)
        for (int iLq = 0; iLq < nLq; iLq++)
            for (int iD = 0; iD < nD; iD++)
                for (int iH = 0; iH < nH; iH++)
                    for (int iDt = 0; iDt < nDt; iDt++)
                        for (int iT = 0; iT < nT; iT++) {
                            const int64_t H = Hs[iH], hk = Hkv ? Hkv : H;
                            if (H % hk) return cli_usage_error("bench", "--Hkv %lld does not divide --H %lld", (long long)hk, (long long)H);
                            const int64_t Lq = Lqs[iLq] ? Lqs[iLq] : Ls[iL];
                            last = b.backward ? bench_sdpa_backward_one(Bv, H, hk, Lq, Ls[iL], Ds[iD], causal, (int)Ts[iT],
                                                                        impl, min_time, reps)
                                              : bench_sdpa_one(Bv, H, hk, Lq, Ls[iL], Ds[iD], causal, dts[iDt], (int)Ts[iT],
                                                               impl, min_time, reps);
                            if (last < 0) return CLI_FAIL;
                        }
    printf("GFLOP/s: %.1f\n", last);
    return CLI_OK;
}

/* Built-in sentence set: deterministic word sequences (a fixed word list and an LCG), 8-40 words. */
static const char *const bench_words[] = {
    "the", "attention", "model", "reads", "every", "token", "of", "a", "sentence", "and", "weighs", "its",
    "neighbours", "by", "similarity", "between", "queries", "keys", "values", "are", "mixed", "into", "new",
    "vectors", "that", "carry", "context", "from", "far", "away", "words", "in", "text", "translation",
    "summary", "question", "answer", "library", "written", "C", "fast", "on", "small", "machines", "with",
    "two", "cores", "memory", "bandwidth", "matters", "more", "than", "arithmetic", "for", "long", "caches",
    "when", "decoding", "one", "step", "at", "time", "people", "often", "ask", "whether", "it", "works",
    "well", "today", "yesterday", "tomorrow", "river", "mountain", "city", "music", "science", "history",
    "language", "numbers", "quickly", "slowly", "carefully", "because", "although", "while", "after",
    "before", "under", "over", "through", "beautiful", "difficult", "simple", "important", "red", "blue",
};

static int bench_embed(int argc, char **argv) {
    bench_opts b = {.batch = 32, .nsent = 256, .min_time = 2.0f};
    int prc = cli_parse(argc, argv, "bench", embed_options, &b, NULL, NULL, NULL, usage_sdpa);
    if (prc != CLI_OK) return cli_parsed(prc);
    const char *model = b.model;
    const int64_t threads = b.threads, batch = b.batch, nsent = b.nsent;
    const float min_time = b.min_time;
    if (!model) return cli_usage_error("bench", "bench embed needs --model DIR");
    if (threads > 0) attn_set_num_threads((int)threads);
    attn_bert *m = NULL;
    if (attn_bert_load(&m, model) < 0) return cli_lib_error(model);
    const size_t nw = sizeof bench_words / sizeof bench_words[0];
    char **texts = calloc((size_t)nsent, sizeof(char *));
    float *emb = malloc(sizeof(float) * (size_t)nsent * (size_t)attn_bert_get_config(m)->d_model);
    int rc = CLI_OK;
    if (!texts || !emb) {
        rc = cli_error("bench embed: out of memory");
        goto done;
    }
    uint32_t st = 12345u;
    size_t total_words = 0;
    for (int64_t i = 0; i < nsent; i++) {
        st = st * 1664525u + 1013904223u;
        const int words = 8 + (int)((st >> 16) % 33);
        texts[i] = malloc((size_t)words * 16 + 2);
        if (!texts[i]) {
            rc = cli_error("bench embed: out of memory");
            goto done;
        }
        char *p = texts[i];
        for (int w = 0; w < words; w++) {
            st = st * 1664525u + 1013904223u;
            p += sprintf(p, w ? " %s" : "%s", bench_words[(st >> 16) % nw]);
        }
        strcpy(p, ".");
        total_words += (size_t)words;
    }
    if (attn_bert_embed(m, emb, (const char *const *)texts, batch < nsent ? batch : nsent, batch, NULL, NULL) < 0) {
        rc = cli_lib_error("bench embed");
        goto done;
    }
    double best = 1e30;
    int passes = 0;
    const double t_start = now_s();
    while (passes < 1 || now_s() - t_start < min_time) {
        double t0 = now_s();
        if (attn_bert_embed(m, emb, (const char *const *)texts, nsent, batch, NULL, NULL) < 0) {
            rc = cli_lib_error("bench embed");
            goto done;
        }
        double t = now_s() - t0;
        if (t < best) best = t;
        passes++;
    }
    printf("embed model=%s sentences=%lld words=%zu batch=%lld threads=%d passes=%d best_s=%.4f sentences/s=%.1f\n", model,
           (long long)nsent, total_words, (long long)batch, attn_get_num_threads(), passes, best, (double)nsent / best);
    printf("sentences/s: %.1f\n", (double)nsent / best);
done:
    if (texts)
        for (int64_t i = 0; i < nsent; i++) free(texts[i]);
    free(texts);
    free(emb);
    attn_bert_free(m);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage_sdpa(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    if (!strcmp(argv[1], "sdpa")) return bench_sdpa(argc - 1, argv + 1);
    if (!strcmp(argv[1], "embed")) return bench_embed(argc - 1, argv + 1);
    return cli_usage_error("bench", "unknown benchmark '%s' (sdpa or embed)", argv[1]);
}
