/* Llama-architecture decoder (see include/attn_llama.h): the llama2.c and GGUF loaders, the
 * finiteness check of their weights and the packing of block weights for the VNNI kernel; the
 * forward passes are llama_forward.c's. */
#include "attn_llama.h"
#include "attn_attention.h"
#include "attn_gguf.h"
#include "attn_layers.h"
#include "attn_llama2c.h"
#include "attn_quant.h"
#include "core/internal.h"
#include "models/llama_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


/* the "llama" architecture: RoPE on adjacent pairs (GGUF's converter permutes Wq / Wk rows for
 * it, llama2.c's export too), biases only where a file has them */
static const attn__llama_variant llama_variant = {.arch = "llama", .rope = ATTN_ROPE_INTERLEAVED, .qkv_bias = 0};



const attn_llama_config *attn_llama_get_config(const attn_llama *m) { return m ? &m->cfg : NULL; }
const attn_bpe *attn_llama_tokenizer(const attn_llama *m) { return m ? m->tok : NULL; }
const char *attn_llama_chat_template(const attn_llama *m) { return m ? m->chat_template : NULL; }

void attn_llama_free(attn_llama *m) {
    if (!m) return;
    free(m->layers);
    free(m->strips);
    if (m->map) munmap(m->map, m->map_size);
    attn_gguf_close(m->gguf);
    attn_bpe_free(m->tok);
    free(m->chat_template);
    free(m->inv_freq);
    free(m->path);
    free(m);
}

static int config_check(const attn_llama_config *c, const char *src) {
    if (c->dim < 1 || c->dim > 65536 || c->hidden_dim < 1 || c->hidden_dim > 1 << 20 || c->n_layers < 1 || c->n_layers > 1024 ||
        c->n_heads < 1 || c->n_heads > 1024 || c->n_kv_heads < 1 || c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads ||
        c->head_dim < 2 || c->head_dim % 2 || c->head_dim > 4096 || c->vocab_size < 1 || c->vocab_size > (1 << 24) ||
        c->context < 1 || c->context > (1 << 24))
        return attn_set_error(ATTN_E_FORMAT,
                              "%s: hyper-parameters out of range (dim %lld, hidden %lld, layers %lld, heads %lld, kv heads %lld, "
                              "head_dim %lld, vocab %lld, context %lld)",
                              src, (long long)c->dim, (long long)c->hidden_dim, (long long)c->n_layers, (long long)c->n_heads,
                              (long long)c->n_kv_heads, (long long)c->head_dim, (long long)c->vocab_size, (long long)c->context);
    if (!(c->rope_theta > 0) || !isfinite(c->rope_theta) || !(c->norm_eps > 0) || !isfinite(c->norm_eps))
        return attn_set_error(ATTN_E_FORMAT, "%s: rope theta %g / norm eps %g out of range", src, c->rope_theta, c->norm_eps);
    return 0;
}

static int init_rope(attn_llama *m) {
    int64_t half = m->cfg.head_dim / 2;
    m->inv_freq = (double *)malloc(sizeof(double) * (size_t)half);
    if (!m->inv_freq) return attn_set_error(ATTN_E_NOMEM, "llama: out of memory");
    /* llama.cpp's ggml_rope_ext: theta_i = pos · freq_scale · base^(-2i/D) / freq_factor[i]
     * (Llama 3: the factors of Hugging Face's _compute_llama3_parameters, written by the converter) */
    for (int64_t i = 0; i < half; i++) {
        m->inv_freq[i] = pow((double)m->cfg.rope_theta, -2.0 * (double)i / (double)m->cfg.head_dim) * m->rope_freq_scale;
        if (m->rope_factors) m->inv_freq[i] /= (double)m->rope_factors[i];
    }
    return 0;
}

/* ------------------------------------------------------------------ llama2.c */

/* ------------------------------------------------------------------ non-finite weights */

/* A NaN or infinite weight surfaces only as a bad activation at the first forward (after the
 * prompt was printed), far from its cause: the loaders look for one and name the tensor.
 * float32 / float16 / bfloat16 tensors are scanned whole; quantized blocks (Q8_0, Q4_0/1, Q5_0/1
 * and the K-quants: integer quants and float16 scales) through their float16 scales, the only
 * place a NaN or inf can be.
 * Cost: one read of every weight page (what the first forward reads anyway): the 98 MB
 * SmolLM2-135M Q4_1 file in the page cache loads in 0.29-0.32 s instead of 0.21-0.25 s (2-core
 * machine under load); float32 weights are scanned at memory speed (stories260K: < 1 ms).
 * Returns the index of the first non-finite value (of a block's scale: the block's
 * first value), or -1. */
static int64_t first_nonfinite(const void *data, attn_qtype type, int64_t n) {
    const unsigned char *p = (const unsigned char *)data;
    switch (type) {
    case ATTN_QT_F32:
        for (int64_t i = 0; i < n; i++) {
            float x;
            memcpy(&x, p + 4 * i, 4);
            if (!isfinite(x)) return i;
        }
        return -1;
    case ATTN_QT_F16:
    case ATTN_QT_BF16: {
        const uint16_t mask = type == ATTN_QT_F16 ? 0x7C00 : 0x7F80; /* all-ones exponent: inf / NaN */
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            if ((h & mask) == mask) return i;
        }
        return -1;
    }
    default: {
        /* ggml's block layouts: byte offsets of the float16 scales in each block (d, and the
         * minimum dmin / m where the type has one); -1: none */
        int o1, o2;
        switch (type) {
        case ATTN_QT_Q8_0: case ATTN_QT_Q4_0: case ATTN_QT_Q5_0: o1 = 0, o2 = -1; break;
        case ATTN_QT_Q4_1: case ATTN_QT_Q5_1: o1 = 0, o2 = 2; break;
        case ATTN_QT_Q4_K: case ATTN_QT_Q5_K: o1 = 0, o2 = 2; break;   /* d, dmin, then scales */
        case ATTN_QT_Q2_K: o1 = 80, o2 = 82; break;                    /* scales[16], qs[64], d, dmin */
        case ATTN_QT_Q3_K: o1 = 108, o2 = -1; break;                   /* hmask[32], qs[64], scales[12], d */
        case ATTN_QT_Q6_K: o1 = 208, o2 = -1; break;                   /* ql[128], qh[64], scales[16], d */
        default: return -1;
        }
        const int64_t bv = attn_qtype_block(type);
        const size_t bb = attn_qtype_row_bytes(type, bv);
        if (bv < 1 || bb == 0) return -1;
        for (int64_t b = 0; b < n / bv; b++)
            for (int k = 0; k < 2; k++) {
                int off = k ? o2 : o1;
                if (off < 0) continue;
                uint16_t h;
                memcpy(&h, p + (size_t)b * bb + (size_t)off, 2);
                if ((h & 0x7C00) == 0x7C00) return b * bv;
            }
        return -1;
    }
    }
}

static int check_finite(const void *data, attn_qtype type, int64_t n, const char *name) {
    int64_t i = first_nonfinite(data, type, n);
    if (i < 0) return ATTN_OK;
    if (type == ATTN_QT_F32 || type == ATTN_QT_F16 || type == ATTN_QT_BF16)
        return attn_set_error(ATTN_E_FORMAT, "tensor '%s' holds a non-finite value (NaN or inf) at element %lld", name, (long long)i);
    return attn_set_error(ATTN_E_FORMAT, "tensor '%s' has a non-finite scale in the %s block of elements %lld..%lld", name,
                          attn_qtype_name(type), (long long)i, (long long)(i + attn_qtype_block(type) - 1));
}

int attn_llama_load_llama2c(attn_llama **out, const char *path) {
    if (!out || !path) return attn_set_error(ATTN_E_INVALID, "llama: NULL argument");
    *out = NULL;
    void *p;
    size_t size;
    ATTN_TRY(attn__map_readonly(path, &p, &size));
    attn_llama2c ck;
    int rc = attn_llama2c_parse(&ck, p, size, path);
    if (rc < 0) {
        if (p) munmap(p, size);
        return rc;
    }
    attn_llama *m = (attn_llama *)calloc(1, sizeof *m);
    if (!m) {
        munmap(p, size);
        return attn_set_error(ATTN_E_NOMEM, "llama: out of memory");
    }
    m->map = p;
    m->path = strdup(path);
    m->map_size = size;
    m->variant = &llama_variant;
    m->rope_freq_scale = 1.0;
    attn_llama_config *c = &m->cfg;
    c->dim = ck.dim;
    c->hidden_dim = ck.hidden_dim;
    c->n_layers = ck.n_layers;
    c->n_heads = ck.n_heads;
    c->n_kv_heads = ck.n_kv_heads;
    c->vocab_size = ck.vocab_size;
    c->context = ck.context;
    c->head_dim = ck.head_dim;
    c->rope_theta = 10000.0f;
    c->norm_eps = 1e-5f;
    c->tied_output = ck.shared_classifier;
    c->bos_id = 1;
    c->eos_id = 2;
    c->eot_id = -1;
    c->add_bos = 1;
    c->arch = "llama";
    snprintf(m->weight_type, sizeof m->weight_type, "f32");
    c->weight_type = m->weight_type;
    rc = config_check(c, path);
    if (rc < 0) {
        attn_llama_free(m);
        return rc;
    }
    const int64_t D = c->dim, F = c->hidden_dim, L = c->n_layers, kvd = c->n_kv_heads * c->head_dim, V = c->vocab_size;
    m->layers = (llama_layer *)calloc((size_t)L, sizeof(llama_layer));
    if (!m->layers || init_rope(m) < 0) {
        attn_llama_free(m);
        return attn_set_error(ATTN_E_NOMEM, "llama: out of memory");
    }
#define MAT(dst, base, l, r, cc)                         \
    do {                                                 \
        (dst).type = ATTN_QT_F32;                        \
        (dst).data = (base) + (l) * (r) * (cc);          \
        (dst).rows = (r);                                \
        (dst).cols = (cc);                               \
    } while (0)
    MAT(m->tok_embd, ck.tok_embd, 0, V, D);
    for (int64_t l = 0; l < L; l++) {
        llama_layer *y = &m->layers[l];
        y->attn_norm = ck.attn_norm + l * D;
        y->ffn_norm = ck.ffn_norm + l * D;
        MAT(y->wq, ck.wq, l, D, D);
        MAT(y->wk, ck.wk, l, kvd, D);
        MAT(y->wv, ck.wv, l, kvd, D);
        MAT(y->wo, ck.wo, l, D, D);
        MAT(y->w1, ck.w1, l, F, D);
        MAT(y->w2, ck.w2, l, D, F);
        MAT(y->w3, ck.w3, l, F, D);
    }
    m->final_norm = ck.final_norm;
    MAT(m->output, ck.output, 0, V, D);
#undef MAT
    /* non-finite weights, named by llama2.c's export names (see check_finite for the cost) */
    {
        const struct {
            const char *name;
            const float *w;
            int64_t per_layer, layers; /* layers 0: one tensor */
        } sec[] = {{"tok_embeddings.weight", ck.tok_embd, V * D, 0},    {"attention_norm.weight", ck.attn_norm, D, L},
                   {"attention.wq.weight", ck.wq, D * D, L},           {"attention.wk.weight", ck.wk, kvd * D, L},
                   {"attention.wv.weight", ck.wv, kvd * D, L},         {"attention.wo.weight", ck.wo, D * D, L},
                   {"ffn_norm.weight", ck.ffn_norm, D, L},             {"feed_forward.w1.weight", ck.w1, F * D, L},
                   {"feed_forward.w2.weight", ck.w2, D * F, L},        {"feed_forward.w3.weight", ck.w3, F * D, L},
                   {"norm.weight", ck.final_norm, D, 0},               {"output.weight", ck.shared_classifier ? NULL : ck.output, V * D, 0}};
        for (size_t k = 0; k < sizeof sec / sizeof sec[0] && rc == 0; k++) {
            if (!sec[k].w) continue;
            int64_t count = sec[k].layers > 0 ? sec[k].layers : 1;
            for (int64_t l = 0; l < count && rc == 0; l++) {
                int64_t i = first_nonfinite(sec[k].w + l * sec[k].per_layer, ATTN_QT_F32, sec[k].per_layer);
                if (i < 0) continue;
                char nm[96];
                if (sec[k].layers > 0) snprintf(nm, sizeof nm, "layers.%lld.%s", (long long)l, sec[k].name);
                else snprintf(nm, sizeof nm, "%s", sec[k].name);
                rc = attn_set_error(ATTN_E_FORMAT, "%s: weight '%s' holds a non-finite value (NaN or inf) at element %lld", path, nm, (long long)i);
            }
        }
    }
    if (rc < 0) {
        attn_llama_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* The AVX-512 VNNI kernel's packed copy (attn_weight_pack_strips) of every Q8_0 / Q4_0 / Q4_1
 * matrix, in one buffer: a batch of decode rows (attn serve's continuous batching) then reads
 * each weight byte once with nothing to unpack (SmolLM2-135M Q4_1 on one Zen 5 thread,
 * bench/serve/batch_step.c: 8 sequences 424-528 -> 643-818 tokens/s, one 173-195 -> 218-239).
 * The products have the same bits either way. The file's pages of a packed matrix are given back
 * (the mapping is read-only and file-backed: a later read, as the tied embedding's rows or
 * blame_nonfinite's scan, maps them in again), so the process holds the weights once. Nothing is
 * packed on other CPUs, with ATTN_PACK=0 in the environment (A/B runs), or when the memory is not
 * there: the products then read the file's blocks. */
static void pack_strips(attn_llama *m) {
    const char *e = getenv("ATTN_PACK");
    if (e && strcmp(e, "0") == 0) return;
    const int64_t L = m->cfg.n_layers, n = 7 * L + 1;
    attn_weight *w = (attn_weight *)calloc((size_t)n, sizeof *w);
    if (!w) return;
    for (int64_t l = 0; l < L; l++) {
        const llama_layer *y = &m->layers[l];
        const attn_qmatrix *q[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w1, &y->w2, &y->w3};
        for (int i = 0; i < 7; i++) w[7 * l + i] = attn_weight_from_qmatrix(q[i], NULL, ATTN_WKERNEL_BLOCKS);
    }
    w[n - 1] = attn_weight_from_qmatrix(&m->output, NULL, ATTN_WKERNEL_BLOCKS);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) total += (attn_weight_strips_bytes(&w[i]) + 63) / 64 * 64;
    void *buf = NULL;
    if (total == 0 || posix_memalign(&buf, 64, total) != 0) {
        free(w);
        return;
    }
    size_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        const size_t bytes = attn_weight_strips_bytes(&w[i]);
        if (!bytes || attn_weight_pack_strips(&w[i], (char *)buf + off) < 0) continue;
        off += (bytes + 63) / 64 * 64;
        /* a tied output matrix is also the embedding table: the few rows a step reads map in again */
        attn__map_release(w[i].data, bytes);
    }
    for (int64_t l = 0; l < L; l++) {
        llama_layer *y = &m->layers[l];
        const void **s[7] = {&y->sq, &y->sk, &y->sv, &y->so, &y->s1, &y->s2, &y->s3};
        for (int i = 0; i < 7; i++) *s[i] = w[7 * l + i].strips;
    }
    m->output_strips = w[n - 1].strips;
    m->strips = buf;
    free(w);
}

/* ------------------------------------------------------------------ GGUF */

static int gguf_mat(attn_llama *m, attn_qmatrix *dst, const char *name, int64_t rows, int64_t cols) {
    attn_gguf_tensor t;
    ATTN_TRY(attn_gguf_find_tensor(m->gguf, name, &t));
    if (t.n_dims != 2 || t.ne[0] != cols || t.ne[1] != rows)
        return attn_set_error(ATTN_E_FORMAT, "gguf: tensor '%s' is [%lld, %lld] (%d-D), expected [%lld, %lld]", name, (long long)t.ne[1],
                              (long long)t.ne[0], t.n_dims, (long long)rows, (long long)cols);
    dst->type = t.type;
    dst->data = t.data;
    dst->rows = rows;
    dst->cols = cols;
    return check_finite(t.data, t.type, rows * cols, name);
}

static int gguf_vec(attn_llama *m, const float **dst, const char *name, int64_t n) {
    attn_gguf_tensor t;
    ATTN_TRY(attn_gguf_find_tensor(m->gguf, name, &t));
    if (t.n_dims != 1 || t.ne[0] != n || t.type != ATTN_QT_F32)
        return attn_set_error(ATTN_E_FORMAT, "gguf: tensor '%s' must be float32 [%lld]", name, (long long)n);
    if ((uintptr_t)t.data % 4) return attn_set_error(ATTN_E_FORMAT, "gguf: tensor '%s' is not 4-byte aligned", name);
    *dst = (const float *)t.data;
    return check_finite(t.data, ATTN_QT_F32, n, name);
}

/* rope_freqs.weight: float32 [head_dim / 2], finite and > 0, or absent */
static int gguf_rope_freqs(attn_llama *m) {
    attn_gguf_tensor t;
    if (attn_gguf_find_tensor(m->gguf, "rope_freqs.weight", &t) < 0) return 0;
    ATTN_TRY(gguf_vec(m, &m->rope_factors, "rope_freqs.weight", m->cfg.head_dim / 2));
    for (int64_t i = 0; i < m->cfg.head_dim / 2; i++)
        if (!(m->rope_factors[i] > 0))
            return attn_set_error(ATTN_E_FORMAT, "gguf: rope_freqs.weight[%lld] = %g (must be > 0)", (long long)i, m->rope_factors[i]);
    return 0;
}

static int gguf_int(const attn_gguf *g, const char *key, int64_t *v, int64_t dflt) {
    if (attn_gguf_find_kv(g, key) < 0) {
        if (dflt == INT64_MIN) return attn_set_error(ATTN_E_FORMAT, "gguf: metadata key '%s' is missing", key);
        *v = dflt;
        return 0;
    }
    return attn_gguf_get_int(g, key, v);
}

/* RoPE scaling, as llama.cpp reads it: <arch>.rope.scaling.type "none" or "linear" (the default
 * when only a factor is given) with <arch>.rope.scaling.factor (or the older rope.scale_linear):
 * positions divided by the factor; and the rope_freqs.weight tensor [head_dim / 2] (Llama 3.x:
 * convert_hf_to_gguf.py writes the per-frequency divisors of rope_scaling {"rope_type":
 * "llama3"}; Hugging Face _compute_llama3_parameters). YaRN, LongRoPE and other types: refused. */
static int gguf_rope_scaling(attn_llama *m) {
    const attn_gguf *g = m->gguf;
    char key[96];
    const char *s;
    size_t len;
    double factor = 0;
    m->rope_freq_scale = 1.0;
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->cfg.arch);
    if (attn_gguf_find_kv(g, key) >= 0) {
        ATTN_TRY(attn_gguf_get_str(g, key, &s, &len));
        if (len == 4 && memcmp(s, "none", 4) == 0) return gguf_rope_freqs(m);
        if (!(len == 6 && memcmp(s, "linear", 6) == 0))
            return attn_set_error(ATTN_E_UNSUPPORTED, "gguf: RoPE scaling '%.*s' is not supported (none, linear, llama3 rope_freqs)",
                                  (int)(len > 32 ? 32 : len), s);
    }
    snprintf(key, sizeof key, "%s.rope.scaling.factor", m->cfg.arch);
    if (attn_gguf_find_kv(g, key) < 0) snprintf(key, sizeof key, "%s.rope.scale_linear", m->cfg.arch);
    if (attn_gguf_find_kv(g, key) >= 0) ATTN_TRY(attn_gguf_get_float(g, key, &factor));
    if (!isfinite(factor) || factor < 0 || (factor > 0 && factor < 1e-6))
        return attn_set_error(ATTN_E_FORMAT, "gguf: %s %g out of range", key, factor);
    if (factor > 0) m->rope_freq_scale = 1.0 / factor; /* 0: none (llama.cpp) */
    return gguf_rope_freqs(m);
}

int attn_llama_load_gguf(attn_llama **out, const char *path) {
    if (!out || !path) return attn_set_error(ATTN_E_INVALID, "llama: NULL argument");
    *out = NULL;
    attn_llama *m = (attn_llama *)calloc(1, sizeof *m);
    if (!m) return attn_set_error(ATTN_E_NOMEM, "llama: out of memory");
    int rc = attn_gguf_open(&m->gguf, path);
    if (rc < 0) {
        free(m);
        return rc;
    }
    m->path = strdup(path);
    const attn_gguf *g = m->gguf;
    attn_llama_config *c = &m->cfg;
    const char *s;
    size_t len;
    char arch[64];
    rc = attn_gguf_get_str(g, "general.architecture", &s, &len);
    if (rc < 0) goto fail;
    snprintf(arch, sizeof arch, "%.*s", (int)(len > 60 ? 60 : len), s);
    static const attn__llama_variant *const variants[] = {&llama_variant, &attn__qwen2_variant};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        if (strcmp(arch, variants[i]->arch) == 0) m->variant = variants[i];
    if (!m->variant) {
        rc = attn_set_error(ATTN_E_UNSUPPORTED, "%s: architecture '%s' is not supported (attn runs llama, qwen2)", path, arch);
        goto fail;
    }
    c->arch = m->variant->arch;
    int64_t v;
    double d;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, c->arch), key)
    if ((rc = gguf_int(g, KEY("embedding_length"), &c->dim, INT64_MIN)) < 0) goto fail;
    if ((rc = gguf_int(g, KEY("feed_forward_length"), &c->hidden_dim, INT64_MIN)) < 0) goto fail;
    if ((rc = gguf_int(g, KEY("block_count"), &c->n_layers, INT64_MIN)) < 0) goto fail;
    if ((rc = gguf_int(g, KEY("attention.head_count"), &c->n_heads, INT64_MIN)) < 0) goto fail;
    if (c->n_heads <= 0) { /* before head_dim = dim / head_count is derived from it */
        rc = attn_set_error(ATTN_E_FORMAT, "%s: %s must be > 0 (got %lld)", path, key, (long long)c->n_heads);
        goto fail;
    }
    if ((rc = gguf_int(g, KEY("attention.head_count_kv"), &c->n_kv_heads, c->n_heads)) < 0) goto fail;
    if (c->n_kv_heads <= 0) {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: %s must be > 0 (got %lld)", path, key, (long long)c->n_kv_heads);
        goto fail;
    }
    if ((rc = gguf_int(g, KEY("context_length"), &c->context, 2048)) < 0) goto fail;
    c->head_dim = c->n_heads > 0 ? c->dim / c->n_heads : 0;
    if ((rc = gguf_int(g, KEY("rope.dimension_count"), &v, c->head_dim)) < 0) goto fail;
    if (v != c->head_dim) {
        rc = attn_set_error(ATTN_E_UNSUPPORTED, "%s: partial rotary (rope.dimension_count %lld, head_dim %lld) is not supported", path, (long long)v, (long long)c->head_dim);
        goto fail;
    }
    c->rope_theta = 10000.0f;
    if (attn_gguf_find_kv(g, KEY("rope.freq_base")) >= 0) {
        if ((rc = attn_gguf_get_float(g, key, &d)) < 0) goto fail;
        c->rope_theta = (float)d;
    }
    if ((rc = attn_gguf_get_float(g, KEY("attention.layer_norm_rms_epsilon"), &d)) < 0) goto fail;
    c->norm_eps = (float)d;
#undef KEY
    attn_gguf_tensor te;
    if ((rc = attn_gguf_find_tensor(g, "token_embd.weight", &te)) < 0) goto fail;
    c->vocab_size = te.ne[1];
    if ((rc = config_check(c, path)) < 0) goto fail;
    if (c->head_dim * c->n_heads != c->dim) {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: embedding %lld is not a multiple of %lld heads", path, (long long)c->dim, (long long)c->n_heads);
        goto fail;
    }
    if ((rc = gguf_rope_scaling(m)) < 0) goto fail;
    c->bos_id = c->eos_id = c->eot_id = -1;
    if (gguf_int(g, "tokenizer.ggml.bos_token_id", &v, -1) == 0 && v >= 0 && v < c->vocab_size) c->bos_id = (int32_t)v;
    if (gguf_int(g, "tokenizer.ggml.eos_token_id", &v, -1) == 0 && v >= 0 && v < c->vocab_size) c->eos_id = (int32_t)v;
    c->add_bos = 0;
    if (attn_gguf_find_kv(g, "tokenizer.ggml.add_bos_token") >= 0 && attn_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &c->add_bos) < 0) c->add_bos = 0;
    if (c->bos_id < 0) c->add_bos = 0;
    const int64_t D = c->dim, F = c->hidden_dim, L = c->n_layers, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    m->layers = (llama_layer *)calloc((size_t)L, sizeof(llama_layer));
    if (!m->layers || init_rope(m) < 0) {
        rc = attn_set_error(ATTN_E_NOMEM, "llama: out of memory");
        goto fail;
    }
    if ((rc = gguf_mat(m, &m->tok_embd, "token_embd.weight", c->vocab_size, D)) < 0) goto fail;
    if (attn_gguf_find_tensor(g, "output.weight", &te) == 0) {
        if ((rc = gguf_mat(m, &m->output, "output.weight", c->vocab_size, D)) < 0) goto fail;
        c->tied_output = 0;
    } else {
        m->output = m->tok_embd;
        c->tied_output = 1;
    }
    if ((rc = gguf_vec(m, &m->final_norm, "output_norm.weight", D)) < 0) goto fail;
    for (int64_t l = 0; l < L; l++) {
        char name[96];
        llama_layer *y = &m->layers[l];
#define T(field, suffix, r, cc)                                                  \
        snprintf(name, sizeof name, "blk.%lld." suffix ".weight", (long long)l); \
        if ((rc = gguf_mat(m, &y->field, name, r, cc)) < 0) goto fail;
        T(wq, "attn_q", qd, D)
        T(wk, "attn_k", kvd, D)
        T(wv, "attn_v", kvd, D)
        T(wo, "attn_output", D, qd)
        T(w1, "ffn_gate", F, D)
        T(w2, "ffn_down", D, F)
        T(w3, "ffn_up", F, D)
#undef T
        snprintf(name, sizeof name, "blk.%lld.attn_norm.weight", (long long)l);
        if ((rc = gguf_vec(m, &y->attn_norm, name, D)) < 0) goto fail;
        snprintf(name, sizeof name, "blk.%lld.ffn_norm.weight", (long long)l);
        if ((rc = gguf_vec(m, &y->ffn_norm, name, D)) < 0) goto fail;
        /* biases: Qwen2's q / k / v (required), any other where the file has them (llama.cpp) */
        const struct {
            const float **dst;
            const char *suffix;
            int64_t n;
            int required;
        } bias[] = {{&y->bq, "attn_q", qd, m->variant->qkv_bias},
                    {&y->bk, "attn_k", kvd, m->variant->qkv_bias},
                    {&y->bv, "attn_v", kvd, m->variant->qkv_bias},
                    {&y->bo, "attn_output", D, 0}};
        for (size_t k = 0; k < sizeof bias / sizeof bias[0]; k++) {
            snprintf(name, sizeof name, "blk.%lld.%s.bias", (long long)l, bias[k].suffix);
            if (!bias[k].required && attn_gguf_find_tensor(g, name, &te) < 0) continue;
            if ((rc = gguf_vec(m, bias[k].dst, name, bias[k].n)) < 0) goto fail;
        }
    }
    snprintf(m->weight_type, sizeof m->weight_type, "%s", attn_qtype_name(m->layers[0].wq.type));
    c->weight_type = m->weight_type;
    pack_strips(m);
    if ((rc = attn__llama_gguf_tokenizer(&m->tok, g, c->vocab_size, c->bos_id, c->eos_id)) < 0) goto fail;
    /* end of turn: the file's id, else ChatML's <|im_end|> (SmolLM2, Qwen2) or Llama 3's <|eot_id|> */
    c->eot_id = attn_bpe_token_to_id(m->tok, "<|im_end|>");
    if (c->eot_id < 0) c->eot_id = attn_bpe_token_to_id(m->tok, "<|eot_id|>");
    if (gguf_int(g, "tokenizer.ggml.eot_token_id", &v, -1) == 0 && v >= 0 && v < c->vocab_size) c->eot_id = (int32_t)v;
    if (attn_gguf_find_kv(g, "tokenizer.chat_template") >= 0 && attn_gguf_get_str(g, "tokenizer.chat_template", &s, &len) == 0) {
        m->chat_template = (char *)malloc(len + 1);
        if (!m->chat_template) {
            rc = attn_set_error(ATTN_E_NOMEM, "llama: out of memory");
            goto fail;
        }
        memcpy(m->chat_template, s, len);
        m->chat_template[len] = 0;
    }
    *out = m;
    return 0;
fail: {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", attn_last_error());
    attn_llama_free(m);
    if (strncmp(msg, path, strlen(path)) == 0) return attn_set_error(rc, "%s", msg);
    return attn_set_error(rc, "%s: %s", path, msg);
}
}
