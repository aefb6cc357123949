/* quality_variants: how far each attention variant moves all-MiniLM-L6-v2's sentence
 * embeddings from those of exact attention (attn_bert_set_attention swaps the variant into
 * all 6 layers; nothing is retrained).
 *
 *   quality_variants MODEL_DIR SHORT_TEXTS LONG_TEXT OUT.csv
 *     SHORT_TEXTS  one sentence per line (tests/fixtures/parity_sentences.txt, else the
 *                  first 50 lines of /usr/share/common-licenses/GPL-3)
 *     LONG_TEXT    a long text cut into 24 passages of 180 words (~230 word pieces, close to
 *                  MiniLM's 256 limit), so that windows and blocks really cut the attention
 *
 * For each variant and set: cosine(embedding_variant, embedding_exact) per text, reported
 * as mean / median / min, and the pattern's coverage: the fraction of (query, key) pairs of
 * the real tokens that the pattern keeps (1 for linear / performer, which approximate all
 * pairs). A baseline row gives the cosine between the exact embeddings of different texts
 * (text i and text i+1), the scale against which the variants' cosines can be read.
 * CSV columns: set,label,variant,params,n_texts,mean_tokens,max_tokens,coverage,
 * mean_cos,median_cos,min_cos */
#include "attn.h"
#include "attn_variants.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char **t;
    int64_t n;
} texts;

static void add_text(texts *s, const char *p, size_t len) {
    s->t = realloc(s->t, sizeof(char *) * (size_t)(s->n + 1));
    s->t[s->n] = malloc(len + 1);
    memcpy(s->t[s->n], p, len);
    s->t[s->n][len] = 0;
    s->n++;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    b[n] = 0;
    fclose(f);
    return b;
}

/* non-empty lines, at most max_n */
static texts read_lines(const char *path, int64_t max_n) {
    texts s = {0};
    char *b = slurp(path);
    if (!b) return s;
    for (char *p = b; *p && s.n < max_n;) {
        char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int blank = 1;
        for (size_t i = 0; i < len; i++) blank &= isspace((unsigned char)p[i]) != 0;
        if (!blank) add_text(&s, p, len);
        if (!e) break;
        p = e + 1;
    }
    free(b);
    return s;
}

/* passages of `words` whitespace-separated words */
static texts read_passages(const char *path, int64_t words, int64_t max_n) {
    texts s = {0};
    char *b = slurp(path);
    if (!b) return s;
    char *buf = malloc(strlen(b) + 1);
    char *p = b;
    while (*p && s.n < max_n) {
        size_t len = 0;
        int64_t w = 0;
        while (*p && w < words) {
            while (*p && isspace((unsigned char)*p)) p++;
            if (!*p) break;
            if (len) buf[len++] = ' ';
            while (*p && !isspace((unsigned char)*p)) buf[len++] = *p++;
            w++;
        }
        if (w == words) add_text(&s, buf, len);
    }
    free(buf);
    free(b);
    return s;
}

static double cosine(const float *a, const float *b, int64_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return ab / sqrt(aa * bb);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    const char *label;
    attn_variant_params p;
} setting;

/* fraction of real (query, key) pairs kept by the pattern, over texts of the given lengths */
static double coverage(const attn_variant_params *p, const int64_t *len, int64_t n) {
    if (p->kind == ATTN_VARIANT_LINEAR || p->kind == ATTN_VARIANT_PERFORMER || p->kind == ATTN_VARIANT_EXACT) return 1.0;
    double kept = 0, total = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t L = len[i], Lp = L;
        if (p->kind == ATTN_VARIANT_BIGBIRD && L % p->block) Lp = (L / p->block + 1) * p->block;
        unsigned char *m = malloc((size_t)(Lp * Lp));
        attn_tensor t;
        int64_t s[2] = {Lp, Lp};
        attn_tensor_make(&t, m, ATTN_BOOL, 2, s);
        attn_variant_params q = *p;
        int64_t kl = L;
        q.key_lengths = &kl;
        if (attn_variant_mask(&t, &q, 1, 1, Lp, Lp) == 0)
            for (int64_t a = 0; a < L; a++)
                for (int64_t b = 0; b < L; b++) kept += m[a * Lp + b];
        total += (double)L * L;
        free(m);
    }
    return kept / total;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: quality_variants MODEL_DIR SHORT_TEXTS LONG_TEXT OUT.csv\n");
        return 2;
    }
    attn_bert *m = NULL;
    if (attn_bert_load(&m, argv[1]) < 0) {
        fprintf(stderr, "quality_variants: %s\n", attn_last_error());
        return 1;
    }
    texts sets[2];
    sets[0] = read_lines(argv[2], 1000);
    if (sets[0].n == 0) sets[0] = read_lines("/usr/share/common-licenses/GPL-3", 50);
    sets[1] = read_passages(argv[3], 180, 24);
    const char *set_names[2] = {"sentences", "passages"};
    FILE *out = fopen(argv[4], "w");
    if (!out || sets[0].n == 0 || sets[1].n == 0) {
        fprintf(stderr, "quality_variants: cannot read the texts or write %s\n", argv[4]);
        return 1;
    }
    fprintf(out, "set,label,variant,params,n_texts,mean_tokens,max_tokens,coverage,mean_cos,median_cos,min_cos\n");
    setting st[16];
    int ns = 0;
#define ADD(lbl, kind_, field_assignments)                   \
    do {                                                   \
        st[ns].label = lbl;                                \
        st[ns].p = attn_variant_params_default(kind_);     \
        attn_variant_params *pp = &st[ns].p;               \
        (void)pp;                                          \
        field_assignments;                                 \
        ns++;                                              \
    } while (0)
    ADD("sliding W=32", ATTN_VARIANT_SLIDING, pp->window = 32);
    ADD("sliding W=8", ATTN_VARIANT_SLIDING, pp->window = 8);
    ADD("longformer w=16 G=1", ATTN_VARIANT_LONGFORMER, (pp->window = 16, pp->n_global = 1));
    ADD("longformer w=4 G=1", ATTN_VARIANT_LONGFORMER, (pp->window = 4, pp->n_global = 1));
    ADD("bigbird b=8 g=1 r=3", ATTN_VARIANT_BIGBIRD, (pp->block = 8, pp->global_blocks = 1, pp->random_blocks = 3));
    ADD("bigbird b=4 g=1 r=1", ATTN_VARIANT_BIGBIRD, (pp->block = 4, pp->global_blocks = 1, pp->random_blocks = 1));
    ADD("performer M=64", ATTN_VARIANT_PERFORMER, pp->features = 64);
    ADD("performer M=256", ATTN_VARIANT_PERFORMER, pp->features = 256);
    ADD("performer M=1024", ATTN_VARIANT_PERFORMER, pp->features = 1024);
    ADD("linear", ATTN_VARIANT_LINEAR, (void)0);
#undef ADD
    int64_t E = attn_bert_get_config(m)->d_model, Lmax = attn_bert_get_config(m)->max_seq_len;
    for (int si = 0; si < 2; si++) {
        texts *s = &sets[si];
        int64_t n = s->n;
        int64_t *len = malloc(sizeof(int64_t) * (size_t)n);
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)Lmax);
        double mean_tok = 0;
        int64_t max_tok = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t cnt = 0;
            attn_tokenizer_encode(attn_bert_tokenizer(m), s->t[i], strlen(s->t[i]), 1, Lmax, ids, &cnt, Lmax, NULL);
            len[i] = cnt;
            mean_tok += (double)cnt / (double)n;
            if (cnt > max_tok) max_tok = cnt;
        }
        float *ex = malloc(sizeof(float) * (size_t)(n * E)), *va = malloc(sizeof(float) * (size_t)(n * E));
        double *cs = malloc(sizeof(double) * (size_t)n);
        attn_bert_set_attention(m, NULL);
        if (attn_bert_embed(m, ex, (const char *const *)s->t, n, 16, NULL, NULL) < 0) {
            fprintf(stderr, "quality_variants: %s\n", attn_last_error());
            return 1;
        }
        fprintf(out, "%s,exact,exact,,%lld,%.1f,%lld,1,1,1,1\n", set_names[si], (long long)n, mean_tok, (long long)max_tok);
        /* scale of the cosines: exact embeddings of different texts (text i vs text i+1) */
        for (int64_t i = 0; i < n; i++) cs[i] = cosine(ex + i * E, ex + ((i + 1) % n) * E, E);
        double base = 0;
        for (int64_t i = 0; i < n; i++) base += cs[i] / (double)n;
        qsort(cs, (size_t)n, sizeof cs[0], cmp_d);
        fprintf(out, "%s,other text (baseline),baseline,,%lld,%.1f,%lld,,%.6f,%.6f,%.6f\n", set_names[si], (long long)n, mean_tok,
                (long long)max_tok, base, cs[n / 2], cs[0]);
        for (int k = 0; k < ns; k++) {
            if (attn_bert_set_attention(m, &st[k].p) < 0 ||
                attn_bert_embed(m, va, (const char *const *)s->t, n, 16, NULL, NULL) < 0) {
                fprintf(stderr, "quality_variants: %s: %s\n", st[k].label, attn_last_error());
                return 1;
            }
            double mean = 0;
            for (int64_t i = 0; i < n; i++) {
                cs[i] = cosine(ex + i * E, va + i * E, E);
                mean += cs[i] / (double)n;
            }
            qsort(cs, (size_t)n, sizeof cs[0], cmp_d);
            const char *sp = strchr(st[k].label, ' ');
            fprintf(out, "%s,%s,%s,%s,%lld,%.1f,%lld,%.4f,%.6f,%.6f,%.6f\n", set_names[si], st[k].label,
                    attn_variant_name(st[k].p.kind), sp ? sp + 1 : "", (long long)n, mean_tok, (long long)max_tok,
                    coverage(&st[k].p, len, n), mean, cs[n / 2], cs[0]);
            fprintf(stderr, "%-10s %-22s mean cos %.4f  min %.4f\n", set_names[si], st[k].label, mean, cs[0]);
        }
        free(len);
        free(ids);
        free(ex);
        free(va);
        free(cs);
    }
    fclose(out);
    attn_bert_free(m);
    return 0;
}
