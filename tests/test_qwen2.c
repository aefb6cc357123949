/* The Qwen2 and Llama-3 variants of the Llama decoder (src/models/qwen2.c, llama.c) against
 * Hugging Face transformers on tiny random-weight models written as GGUF the way llama.cpp's
 * converter writes them (tests/fixtures/qwen2/, scripts/gen_qwen2_fixtures.py):
 *   - qwen2_tiny: q/k/v biases, NeoX RoPE (rotate halves), rope_theta 1e6 from the file, tied
 *     output, pre-tokenizer "qwen2";
 *   - llama3_tiny: adjacent-pair RoPE on permuted Wq / Wk, Llama 3.1 rope scaling through the
 *     rope_freqs tensor, separate output, pre-tokenizer "llama-bpe", BOS.
 * For each: tokenizer ids equal to HF tokenizers', logits of the prompt (one causal pass) and of
 * 16 greedy decode steps (one token a step) against transformers' float32 logits, greedy tokens
 * equal; the Q8_0 copies against transformers on the dequantized weights (and 8-bit
 * activations); llama.cpp on the same files (token ids, greedy tokens, top-1 logits); linear
 * RoPE scaling; bad files refused. */
#include "attn.h"
#include "attn_bpe.h"
#include "attn_gguf.h"
#include "attn_llama.h"
#include "attn_npy.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIR "tests/fixtures/qwen2/"

static int parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    while (*s && *s != '\t' && *s != '\n' && n < cap) {
        char *e;
        long v = strtol(s, &e, 10);
        if (e == s) break;
        ids[n++] = (int32_t)v;
        s = e;
        while (*s == ' ') s++;
    }
    return n;
}

static int hexdecode(const char *h, char *out, size_t cap) {
    size_t n = 0;
    while (h[0] && h[0] != '\t' && h[1] && n + 1 < cap) {
        unsigned v;
        if (sscanf(h, "%2x", &v) != 1) break;
        out[n++] = (char)v;
        h += 2;
    }
    out[n] = 0;
    return (int)n;
}

static const char *next_line(const char *p) {
    const char *e = strchr(p, '\n');
    return e ? e + 1 : p + strlen(p);
}

/* the tokenizer in the GGUF file gives HF tokenizers' ids on the fixture's texts */
static void check_tokenizer(const attn_llama *m, const char *name) {
    char path[256];
    static char buf[1 << 16];
    snprintf(path, sizeof path, DIR "%s_tok.tsv", name);
    attn_test_read_file(path, buf, sizeof buf);
    const attn_bpe *t = attn_llama_tokenizer(m);
    int lines = 0, same = 0;
    for (const char *p = buf; *p; p = next_line(p)) {
        if (*p == '#') continue;
        char text[1024];
        int32_t want[256], got[256];
        int len = hexdecode(p, text, sizeof text);
        const char *tab = strchr(p, '\t');
        if (!tab) break;
        int nw = parse_ids(tab + 1, want, 256);
        int64_t ng = 0;
        CHECK_OK(attn_bpe_encode(t, text, (size_t)len, 0, got, 256, &ng));
        lines++;
        if (ng == nw && memcmp(got, want, sizeof(int32_t) * (size_t)nw) == 0) same++;
        else CHECK(0, "%s: tokenizer differs from HF tokenizers on '%s' (%lld ids, want %d)", name, text, (long long)ng, nw);
    }
    printf("%s: tokenizer %d/%d texts identical to HF tokenizers\n", name, same, lines);
    CHECK(lines >= 15 && same == lines, "%s: %d/%d tokenizer texts", name, same, lines);
}

/* one sequence of the fixture: prompt, transformers' greedy tokens and their margins */
typedef struct {
    int32_t prompt[64], gen[64];
    double margin[64];
    int np, ng;
} seq;

static int read_seqs(const char *name, seq *out, int cap) {
    char path[256];
    static char buf[1 << 14];
    snprintf(path, sizeof path, DIR "%s.tsv", name);
    attn_test_read_file(path, buf, sizeof buf);
    int n = 0;
    for (const char *p = buf; *p && n < cap; p = next_line(p)) {
        if (*p == '#') continue;
        seq *q = &out[n];
        q->np = parse_ids(p, q->prompt, 64);
        const char *t1 = strchr(p, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t1 || !t2) break;
        q->ng = parse_ids(t1 + 1, q->gen, 64);
        char *e = (char *)t2 + 1;
        for (int i = 0; i < q->ng; i++) q->margin[i] = strtod(e, &e);
        n++;
    }
    return n;
}

typedef struct {
    double worst;       /* max |attn - reference| over every logit checked */
    double sum;         /* sum of |attn - reference| (for the mean) */
    double far;         /* max |attn - other reference| (NaN: none given) */
    int same, total;    /* greedy steps that agree / that were compared */
    int close;          /* steps left out: transformers' top-2 margin under the floor */
    int64_t rows;       /* positions checked */
} run_result;

static void diff_rows(run_result *r, const float *lg, const float *ref, const float *other, int64_t n, int64_t V) {
    for (int64_t k = 0; k < n * V; k++) {
        r->worst = fmax(r->worst, fabs((double)lg[k] - ref[k]));
        r->sum += fabs((double)lg[k] - ref[k]);
        if (other) r->far = fmax(r->far, fabs((double)lg[k] - other[k]));
    }
}

/* argmax of row x [V] and its top-1 - top-2 margin */
static int32_t argmax(const float *x, int64_t V, double *margin) {
    int32_t a = 0, b = -1;
    for (int32_t v = 1; v < V; v++) {
        if (x[v] > x[a]) b = a, a = v;
        else if (b < 0 || x[v] > x[b]) b = v;
    }
    if (margin) *margin = (double)x[a] - (double)x[b];
    return a;
}

/* each sequence: the prompt in one causal pass (all logits), then transformers' greedy
 * continuation fed one token a step (decode); logits against ref [positions, V] (and other,
 * when given); before each step attn's argmax against the reference's where the reference's
 * top-2 margin is at least margin_floor, and the reference's argmax against transformers'
 * greedy token (the fixture is consistent) */
static run_result run_sequences(const attn_llama *m, const char *name, const float *ref, int64_t ref_rows, const float *other,
                                double margin_floor) {
    run_result r = {0, 0, other ? 0 : NAN, 0, 0, 0, 0};
    seq sq[8];
    const int ns = read_seqs(name, sq, 8);
    CHECK(ns >= 3, "%s: %d sequences in the fixture", name, ns);
    const int64_t V = attn_llama_get_config(m)->vocab_size;
    float *lg = (float *)malloc(sizeof(float) * (size_t)(64 * V));
    for (int k = 0; k < ns && lg; k++) {
        const seq *q = &sq[k];
        if (r.rows + q->np + q->ng > ref_rows) {
            CHECK(0, "%s: the reference has %lld positions", name, (long long)ref_rows);
            break;
        }
        attn_llama_state *s = NULL;
        CHECK_OK(attn_llama_state_create(&s, m, 128));
        if (!s) break;
        CHECK_OK(attn_llama_forward(s, lg, q->prompt, q->np, 1, 0));
        diff_rows(&r, lg, ref + r.rows * V, other ? other + r.rows * V : NULL, q->np, V);
        r.rows += q->np;
        const float *last = lg + (q->np - 1) * V;
        for (int i = 0; i < q->ng; i++) {
            double mg;
            const int32_t best = argmax(last, V, NULL), want = argmax(ref + (r.rows - 1) * V, V, &mg);
            if (margin_floor == 0 && want != q->gen[i])
                CHECK(0, "%s: sequence %d step %d: the reference logits' argmax %d is not the greedy token %d", name, k, i, want, q->gen[i]);
            if (mg >= margin_floor) {
                r.total++;
                if (best == want) r.same++;
                else CHECK(0, "%s: sequence %d greedy step %d: attn %d, reference %d (margin %.4f)", name, k, i, best, want, mg);
            } else {
                r.close++;
            }
            /* transformers' token goes in, so that the positions stay those of the reference */
            CHECK_OK(attn_llama_forward(s, lg, &q->gen[i], 1, 0, 0));
            diff_rows(&r, lg, ref + r.rows * V, other ? other + r.rows * V : NULL, 1, V);
            last = lg;
            r.rows++;
        }
        attn_llama_state_free(s);
    }
    free(lg);
    return r;
}

static float *load_npy(attn_tensor *a, const char *name, const char *suffix, int64_t V, int64_t *rows) {
    char path[256];
    snprintf(path, sizeof path, DIR "%s%s", name, suffix);
    memset(a, 0, sizeof *a);
    if (attn_npy_load(a, path) < 0) {
        CHECK(0, "%s: %s", path, attn_last_error());
        return NULL;
    }
    CHECK(a->ndim == 2 && a->shape[1] == V && a->dtype == ATTN_F32, "%s: float32 [n, %lld]", path, (long long)V);
    *rows = a->shape[0];
    return (float *)a->data;
}

/* Tolerances.
 * float32 files: attn and transformers both compute in float32 with different summation
 * orders (OpenBLAS sgemm vs PyTorch, float64 RMSNorm sums and RoPE angles in attn); with
 * hidden 32 / FFN 64 and logits of magnitude < 10 that is a few float32 ulps (measured:
 * see the printed numbers, ~1e-6). 1e-4 is far above that and far below what any wiring error
 * gives: a missing bias, the wrong RoPE layout or no rope scaling moves logits by > 0.1 (the
 * Llama-3 test measures the last: 3.6 at its largest).
 * Q8_0 files: the reference is transformers on the dequantized weights with the input of every
 * matrix product rounded to 8-bit blocks as attn's kernels round it (d = max|x| / 127 in
 * float32, q = roundf(x / d)); the integer block products are exact, so what is left is float32
 * summation order (measured ~1e-6) — unless a summation difference upstream moves an
 * activation across a rounding boundary, which changes it by a whole step d (these tiny random
 * models amplify: a 5e-4 relative change of the activation scales moves their logits by 0.12).
 * 1e-3 allows a few float32 steps and no flip (none happens on these sequences). Greedy tokens
 * are compared where the reference's top-2 margin exceeds twice that and must then be equal. */
#define TOL_F32 1e-4
#define TOL_Q8 1e-3

static void test_model(const char *name, const char *arch, int tied, float theta, int add_bos) {
    char path[256];
    attn_llama *m = NULL;
    snprintf(path, sizeof path, DIR "%s.f32.gguf", name);
    CHECK_OK(attn_llama_load_gguf(&m, path));
    if (!m) return;
    const attn_llama_config *c = attn_llama_get_config(m);
    CHECK(strcmp(c->arch, arch) == 0, "%s: arch '%s'", name, c->arch);
    CHECK(c->tied_output == tied && c->add_bos == add_bos, "%s: tied %d add_bos %d", name, c->tied_output, c->add_bos);
    CHECK(c->rope_theta == theta, "%s: rope_theta %g from the file", name, c->rope_theta);
    CHECK(c->dim == 32 && c->n_layers == 2 && c->n_kv_heads < c->n_heads, "%s: hyper-parameters", name);
    check_tokenizer(m, name);
    attn_tensor ra, rb;
    int64_t rows = 0, orow = 0;
    const float *ref = load_npy(&ra, name, "_logits.npy", c->vocab_size, &rows);
    const float *other = NULL;
    memset(&rb, 0, sizeof rb);
    if (strcmp(arch, "llama") == 0) other = load_npy(&rb, name, "_noscale_logits.npy", c->vocab_size, &orow);
    if (ref && (!other || orow == rows)) {
        run_result r = run_sequences(m, name, ref, rows, other, 0);
        printf("%s f32: %lld positions, max |attn - transformers| = %.3g (tol %.0e); greedy %d/%d equal\n", name, (long long)r.rows,
               r.worst, TOL_F32, r.same, r.total);
        CHECK(r.rows == rows, "%s: %lld of %lld positions", name, (long long)r.rows, (long long)rows);
        CHECK(r.worst <= TOL_F32, "%s f32: max logit difference %.3g > %.0e", name, r.worst, TOL_F32);
        CHECK(r.total == 48 && r.same == r.total, "%s f32: greedy %d/%d", name, r.same, r.total);
        if (other) {
            printf("%s: without rope scaling transformers' logits are up to %.3f away\n", name, r.far);
            CHECK(r.far > 1000 * TOL_F32, "%s: the rope scaling changes the logits (%.3g)", name, r.far);
        }
    }
    attn_npy_free(&ra);
    attn_npy_free(&rb);
    attn_llama_free(m);
    /* Q8_0 */
    m = NULL;
    snprintf(path, sizeof path, DIR "%s.q8_0.gguf", name);
    CHECK_OK(attn_llama_load_gguf(&m, path));
    if (!m) return;
    c = attn_llama_get_config(m); /* the F32 model's config went with it */
    CHECK(strcmp(attn_llama_get_config(m)->weight_type, "q8_0") == 0, "%s: weight type %s", name, attn_llama_get_config(m)->weight_type);
    ref = load_npy(&ra, name, "_q8_0_logits.npy", c->vocab_size, &rows);
    if (ref) {
        run_result r = run_sequences(m, name, ref, rows, NULL, 2 * TOL_Q8);
        printf("%s q8_0: |attn - transformers on Q8_0 weights and activations| max %.3g (tol %.0e), mean %.2g; greedy %d/%d equal, "
               "%d steps with a margin under %.0e left out\n",
               name, r.worst, TOL_Q8, r.sum / (double)(r.rows * c->vocab_size), r.same, r.total, r.close, 2 * TOL_Q8);
        CHECK(r.worst <= TOL_Q8, "%s q8_0: max logit difference %.3g > %.0e", name, r.worst, TOL_Q8);
        CHECK(r.total >= 46 && r.same == r.total, "%s q8_0: greedy %d/%d", name, r.same, r.total);
    }
    attn_npy_free(&ra);
    attn_llama_free(m);
}

/* ------------------------------------------------------------------ llama.cpp */

/* llama.cpp (llama-cpp-python 0.3.36, KV cache float32) on the same files
 * (<model>_llamacpp.tsv, scripts/gen_qwen2_llamacpp.py): its token ids for the tokenizer texts
 * must be attn's; on each prompt attn continues greedily by itself for 16 steps and must give
 * llama.cpp's tokens until the two part, and part only where llama.cpp's own top-2 margin is
 * under the bound; until then attn's top-1 logit is compared with llama.cpp's.
 * Bounds: float32 files 1e-3 (both float32 throughout; measured ~1e-5). Q8_0 files 0.3: llama.cpp
 * rounds each activation block's scale to float16 where attn keeps it in float32 (see TOL_Q8),
 * which on these tiny random models alone moves logits by up to 0.12 (measured against
 * transformers with either rounding); the greedy tokens part only at margins under 0.3. */
static void test_llamacpp(const char *name) {
    char path[256];
    static char buf[1 << 15];
    snprintf(path, sizeof path, DIR "%s_llamacpp.tsv", name);
    attn_test_read_file(path, buf, sizeof buf);
    attn_llama *m[2] = {NULL, NULL};
    static const char *const kinds[2] = {"f32", "q8_0"};
    static const double bound[2] = {1e-3, 0.3};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, DIR "%s.%s.gguf", name, kinds[k]);
        CHECK_OK(attn_llama_load_gguf(&m[k], path));
    }
    if (!m[0] || !m[1]) goto done;
    const int64_t V = attn_llama_get_config(m[0])->vocab_size;
    float *lg = (float *)malloc(sizeof(float) * (size_t)(64 * V));
    int toks = 0, toks_same = 0, seqs[2] = {0, 0}, steps[2] = {0, 0}, parted[2] = {0, 0};
    double worst[2] = {0, 0};
    for (const char *p = buf; *p && lg; p = next_line(p)) {
        if (*p == '#') continue;
        const char *t1 = strchr(p, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t1 || !t2) break;
        if (strncmp(p, "tok\t", 4) == 0) {
            char text[1024];
            int32_t want[256], got[256];
            int len = hexdecode(t1 + 1, text, sizeof text), nw = parse_ids(t2 + 1, want, 256);
            int64_t ng = 0;
            CHECK_OK(attn_bpe_encode(attn_llama_tokenizer(m[0]), text, (size_t)len, 0, got, 256, &ng));
            toks++;
            if (ng == nw && memcmp(got, want, sizeof(int32_t) * (size_t)nw) == 0) toks_same++;
            else CHECK(0, "%s: attn's ids differ from llama.cpp's on '%s'", name, text);
            continue;
        }
        const int k = strncmp(p, "q8_0\t", 5) == 0 ? 1 : 0;
        int32_t prompt[64], gen[64];
        double margin[64], top[64];
        const int np = parse_ids(t1 + 1, prompt, 64), ng = parse_ids(t2 + 1, gen, 64);
        const char *t3 = strchr(t2 + 1, '\t'), *t4 = t3 ? strchr(t3 + 1, '\t') : NULL;
        if (!t3 || !t4 || ng != 16) break;
        char *e = (char *)t3 + 1;
        for (int i = 0; i < ng; i++) margin[i] = strtod(e, &e);
        e = (char *)t4 + 1;
        for (int i = 0; i < ng; i++) top[i] = strtod(e, &e);
        attn_llama_state *s = NULL;
        CHECK_OK(attn_llama_state_create(&s, m[k], 128));
        if (!s) break;
        seqs[k]++;
        CHECK_OK(attn_llama_forward(s, lg, prompt, np, 0, 0));
        for (int i = 0; i < ng; i++) {
            double mg;
            const int32_t best = argmax(lg, V, &mg);
            if (best != gen[i]) {
                parted[k]++;
                CHECK(margin[i] <= bound[k], "%s %s: attn parts from llama.cpp at step %d (%d, llama.cpp %d) where llama.cpp's margin is %.4f",
                      name, kinds[k], i, best, gen[i], margin[i]);
                break;
            }
            steps[k]++;
            worst[k] = fmax(worst[k], fabs((double)lg[best] - top[i]));
            CHECK_OK(attn_llama_forward(s, lg, &best, 1, 0, 0));
        }
        attn_llama_state_free(s);
    }
    free(lg);
    printf("%s vs llama.cpp: token ids %d/%d texts identical; f32: %d sequences, %d greedy steps equal, %d parted, top-1 logit within %.3g; "
           "q8_0: %d sequences, %d steps equal, %d parted, top-1 logit within %.3g\n",
           name, toks_same, toks, seqs[0], steps[0], parted[0], worst[0], seqs[1], steps[1], parted[1], worst[1]);
    CHECK(toks >= 15 && toks_same == toks, "%s: llama.cpp token ids %d/%d", name, toks_same, toks);
    CHECK(seqs[0] == 3 && seqs[1] == 3, "%s: %d / %d llama.cpp sequences", name, seqs[0], seqs[1]);
    for (int k = 0; k < 2; k++) CHECK(worst[k] <= bound[k], "%s %s: top-1 logit %.3g from llama.cpp's (bound %.0e)", name, kinds[k], worst[k], bound[k]);
    CHECK(steps[0] == 48, "%s f32: %d of 48 greedy steps equal to llama.cpp's", name, steps[0]);
done:
    attn_llama_free(m[0]);
    attn_llama_free(m[1]);
}

/* ------------------------------------------------------------------ bad files */

static char tmpdir[] = "/tmp/attn_qwen2_XXXXXX";

/* a copy of src with tensor `drop` left out, string metadata `key` set to sval and float32
 * metadata `fkey` to fval (each added when absent, NULL: none), and element 0 of float32 tensor
 * `zero` set to 0 */
static int copy_gguf_f(const char *src, const char *dst, const char *drop, const char *key, const char *sval, const char *fkey,
                       float fval, const char *zero) {
    attn_gguf *g = NULL;
    attn_gguf_writer *w = NULL;
    int rc = attn_gguf_open(&g, src);
    if (rc == 0) rc = attn_gguf_writer_open(&w, dst, 0);
    unsigned char enc[264];
    size_t sl = sval ? strlen(sval) : 0;
    if (sval) {
        uint64_t n = sl;
        memcpy(enc, &n, 8);
        memcpy(enc + 8, sval, sl);
    }
    for (int64_t i = 0; rc == 0 && i < attn_gguf_n_kv(g); i++) {
        const char *k = attn_gguf_kv_key(g, i);
        int type;
        const void *d;
        size_t len;
        if ((key && strcmp(k, key) == 0) || (fkey && strcmp(k, fkey) == 0)) continue;
        rc = attn_gguf_kv_raw(g, i, &type, &d, &len);
        if (rc == 0) rc = attn_gguf_writer_kv(w, k, type, d, len);
    }
    if (rc == 0 && key) rc = attn_gguf_writer_kv(w, key, ATTN_GGUF_STRING, enc, 8 + sl);
    if (rc == 0 && fkey) rc = attn_gguf_writer_kv(w, fkey, ATTN_GGUF_FLOAT32, &fval, 4);
    attn_gguf_tensor t;
    for (int64_t i = 0; rc == 0 && i < attn_gguf_n_tensors(g); i++)
        if ((rc = attn_gguf_tensor_at(g, i, &t)) == 0 && !(drop && strcmp(t.name, drop) == 0))
            rc = attn_gguf_writer_tensor(w, t.name, t.type, t.n_dims, t.ne);
    for (int64_t i = 0; rc == 0 && i < attn_gguf_n_tensors(g); i++) {
        if ((rc = attn_gguf_tensor_at(g, i, &t)) < 0 || (drop && strcmp(t.name, drop) == 0)) continue;
        if (zero && strcmp(t.name, zero) == 0) {
            unsigned char *b = (unsigned char *)malloc(t.nbytes);
            if (!b) return -1;
            memcpy(b, t.data, t.nbytes);
            memset(b, 0, 4);
            rc = attn_gguf_writer_data(w, b, t.nbytes);
            free(b);
        } else {
            rc = attn_gguf_writer_data(w, t.data, t.nbytes);
        }
    }
    if (rc == 0) {
        rc = attn_gguf_writer_commit(w);
        w = NULL;
    }
    attn_gguf_writer_abort(w);
    attn_gguf_close(g);
    return rc;
}

static int copy_gguf(const char *src, const char *dst, const char *drop, const char *key, const char *sval, const char *zero) {
    return copy_gguf_f(src, dst, drop, key, sval, NULL, 0, zero);
}

static void expect_refused(const char *src, const char *drop, const char *key, const char *sval, const char *zero, int code, const char *needle,
                           const char *what) {
    char dst[128];
    snprintf(dst, sizeof dst, "%s/bad.gguf", tmpdir);
    int rc = copy_gguf(src, dst, drop, key, sval, zero);
    CHECK(rc == 0, "%s: copy: %s", what, attn_last_error());
    if (rc < 0) return;
    attn_llama *m = NULL;
    rc = attn_llama_load_gguf(&m, dst);
    CHECK(rc == code && m == NULL, "%s: load returned %d (want %d): %s", what, rc, code, attn_last_error());
    CHECK(strstr(attn_last_error(), needle) != NULL, "%s: message names '%s': %s", what, needle, attn_last_error());
    attn_llama_free(m);
    unlink(dst);
}

/* linear RoPE scaling (qwen2.rope.scaling.type "linear", factor 2, written into a copy of the
 * Qwen2 file) against transformers' rope_type "linear" factor 2 on the third sequence */
static void test_linear_scaling(void) {
    char dst[128];
    snprintf(dst, sizeof dst, "%s/linear2.gguf", tmpdir);
    CHECK_OK(copy_gguf_f(DIR "qwen2_tiny.f32.gguf", dst, NULL, "qwen2.rope.scaling.type", "linear", "qwen2.rope.scaling.factor", 2.0f, NULL));
    attn_llama *m = NULL;
    CHECK_OK(attn_llama_load_gguf(&m, dst));
    unlink(dst);
    seq sq[8];
    const int ns = read_seqs("qwen2_tiny", sq, 8);
    attn_tensor a, b;
    int64_t rows = 0, brows = 0;
    const float *ref = m ? load_npy(&a, "qwen2_tiny", "_linear2_logits.npy", 355, &rows) : NULL;
    const float *plain = ref ? load_npy(&b, "qwen2_tiny", "_logits.npy", 355, &brows) : NULL;
    if (ns == 3 && plain && rows == sq[2].np + sq[2].ng && brows >= rows) {
        int32_t ids[128];
        memcpy(ids, sq[2].prompt, sizeof(int32_t) * (size_t)sq[2].np);
        memcpy(ids + sq[2].np, sq[2].gen, sizeof(int32_t) * (size_t)sq[2].ng);
        float *lg = (float *)malloc(sizeof(float) * (size_t)(rows * 355));
        attn_llama_state *s = NULL;
        CHECK_OK(attn_llama_state_create(&s, m, 128));
        if (s && lg) {
            CHECK_OK(attn_llama_forward(s, lg, ids, rows, 1, 0));
            run_result r = {0, 0, 0, 0, 0, 0, 0};
            diff_rows(&r, lg, ref, plain + (brows - rows) * 355, rows, 355);
            printf("qwen2_tiny linear rope scaling 2: max |attn - transformers| = %.3g over %lld positions (unscaled: %.3f away)\n", r.worst,
                   (long long)rows, r.far);
            CHECK(r.worst <= TOL_F32, "linear scaling: max logit difference %.3g > %.0e", r.worst, TOL_F32);
            CHECK(r.far > 1000 * TOL_F32, "linear scaling changes the logits (%.3g)", r.far);
        }
        attn_llama_state_free(s);
        free(lg);
    } else {
        CHECK(0, "linear scaling fixture: %d sequences, %lld rows", ns, (long long)rows);
    }
    if (ref) attn_npy_free(&a);
    if (plain) attn_npy_free(&b);
    attn_llama_free(m);
}

static void test_bad_files(void) {
    const char *q = DIR "qwen2_tiny.f32.gguf", *l = DIR "llama3_tiny.f32.gguf";
    /* the copy itself loads (the helper changes nothing by itself) */
    char dst[128];
    snprintf(dst, sizeof dst, "%s/same.gguf", tmpdir);
    attn_llama *m = NULL;
    CHECK_OK(copy_gguf(q, dst, NULL, NULL, NULL, NULL));
    CHECK_OK(attn_llama_load_gguf(&m, dst));
    attn_llama_free(m);
    unlink(dst);
    expect_refused(q, "blk.1.attn_k.bias", NULL, NULL, NULL, ATTN_E_FORMAT, "blk.1.attn_k.bias", "qwen2 without a k bias");
    expect_refused(q, NULL, "qwen2.rope.scaling.type", "yarn", NULL, ATTN_E_UNSUPPORTED, "yarn", "YaRN rope scaling");
    expect_refused(q, NULL, "tokenizer.ggml.pre", "deepseek-llm", NULL, ATTN_E_UNSUPPORTED, "deepseek-llm", "unknown pre-tokenizer");
    expect_refused(q, NULL, "general.architecture", "qwen3", NULL, ATTN_E_UNSUPPORTED, "qwen3", "architecture qwen3");
    expect_refused(q, NULL, "general.architecture", "qwen3", NULL, ATTN_E_UNSUPPORTED, "qwen2", "the message lists qwen2");
    expect_refused(l, NULL, NULL, NULL, "rope_freqs.weight", ATTN_E_FORMAT, "rope_freqs.weight[0]", "a rope_freqs factor of 0");
    expect_refused(l, "rope_freqs.weight", "llama.rope.scaling.type", "longrope", NULL, ATTN_E_UNSUPPORTED, "longrope", "LongRoPE");
    /* a negative linear factor */
    snprintf(dst, sizeof dst, "%s/neg.gguf", tmpdir);
    CHECK_OK(copy_gguf_f(q, dst, NULL, "qwen2.rope.scaling.type", "linear", "qwen2.rope.scaling.factor", -2.0f, NULL));
    m = NULL;
    CHECK_ERR(attn_llama_load_gguf(&m, dst), ATTN_E_FORMAT);
    CHECK(m == NULL && strstr(attn_last_error(), "qwen2.rope.scaling.factor"), "negative factor named: %s", attn_last_error());
    unlink(dst);
}

int main(void) {
    attn_test_name = "qwen2";
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp");
        return attn_test_finish();
    }
    test_model("qwen2_tiny", "qwen2", 1, 1e6f, 0);
    test_model("llama3_tiny", "llama", 0, 5e5f, 1);
    test_llamacpp("qwen2_tiny");
    test_llamacpp("llama3_tiny");
    test_linear_scaling();
    test_bad_files();
    rmdir(tmpdir);
    return attn_test_finish();
}
