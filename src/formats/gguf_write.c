/* GGUF writer and the quantizer driver (llama-quantize's rules); see include/attn_gguf.h. */
#include "attn_gguf.h"
#include "attn_io.h"
#include "core/internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    char *key;
    int type;
    unsigned char *val;
    size_t len;
} wkv;

typedef struct {
    char *name;
    attn_qtype type;
    int n_dims;
    int64_t ne[4];
    size_t nbytes, offset;
} wtensor;

struct attn_gguf_writer {
    attn_out *out;
    FILE *f;
    uint32_t alignment;
    wkv *kv;
    int64_t n_kv, cap_kv;
    wtensor *t;
    int64_t n_t, cap_t;
    int started;     /* header written */
    int64_t cur;     /* tensor receiving data */
    size_t cur_done; /* its bytes so far */
    size_t pos;      /* bytes written */
};

int attn_gguf_writer_open(attn_gguf_writer **w, const char *path, uint32_t alignment) {
    if (!w || !path) return attn_set_error(ATTN_E_INVALID, "gguf writer: NULL argument");
    *w = NULL;
    if (alignment == 0) alignment = 32;
    if ((alignment & (alignment - 1)) || alignment > (1u << 20))
        return attn_set_error(ATTN_E_INVALID, "gguf writer: alignment %u is not a power of two up to 2^20", alignment);
    attn_gguf_writer *g = (attn_gguf_writer *)calloc(1, sizeof *g);
    if (!g) return attn_set_error(ATTN_E_NOMEM, "gguf writer: out of memory");
    int rc = attn_out_open(&g->out, path, ATTN_OUT_BINARY);
    if (rc < 0) {
        free(g);
        return rc;
    }
    g->f = attn_out_file(g->out);
    g->alignment = alignment;
    *w = g;
    if (alignment != 32 && (rc = attn_gguf_writer_kv_u32(g, "general.alignment", alignment)) < 0) {
        attn_gguf_writer_abort(g);
        *w = NULL;
        return rc;
    }
    return ATTN_OK;
}

static void writer_free(attn_gguf_writer *w) {
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (int64_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

void attn_gguf_writer_abort(attn_gguf_writer *w) {
    if (!w) return;
    attn_out_abort(w->out);
    writer_free(w);
}

/* the bytes a value of `type` takes at d (n bytes there), or 0 when it does not fit or is not one
 * (a string: uint64 length + bytes; an array: uint32 element type + uint64 count + elements) */
static size_t kv_value_size(int type, const unsigned char *d, size_t n, int depth) {
    static const unsigned char fixed[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type < 0 || type > ATTN_GGUF_FLOAT64) return 0;
    if (fixed[type]) return fixed[type] <= n ? fixed[type] : 0;
    uint64_t count;
    if (type == ATTN_GGUF_STRING) {
        if (n < 8) return 0;
        memcpy(&count, d, 8);
        return count <= n - 8 ? (size_t)(8 + count) : 0;
    }
    uint32_t et;
    if (n < 12 || depth >= 4) return 0; /* the reader's nesting limit */
    memcpy(&et, d, 4);
    memcpy(&count, d + 4, 8);
    if (et > ATTN_GGUF_FLOAT64) return 0; /* checked even when the array is empty, as the reader does */
    size_t at = 12;
    for (uint64_t i = 0; i < count; i++) {
        const size_t k = kv_value_size((int)et, d + at, n - at, depth + 1);
        if (!k) return 0;
        at += k;
    }
    return at;
}

int attn_gguf_writer_kv(attn_gguf_writer *w, const char *key, int type, const void *data, size_t len) {
    if (!w || !key || (!data && len)) return attn_set_error(ATTN_E_INVALID, "gguf writer: NULL argument");
    if (w->started) return attn_set_error(ATTN_E_INVALID, "gguf writer: metadata '%s' after the tensor data began", key);
    if (type < 0 || type > ATTN_GGUF_FLOAT64) return attn_set_error(ATTN_E_INVALID, "gguf writer: '%s': bad value type %d", key, type);
    const size_t vs = kv_value_size(type, (const unsigned char *)data, len, 0);
    if (vs == 0 || vs != len)
        return attn_set_error(ATTN_E_INVALID, "gguf writer: '%s': %zu bytes are not one encoded value of type %d", key, len, type);
    if (strcmp(key, "general.alignment") == 0 && (type != ATTN_GGUF_UINT32 || len != 4 || memcmp(data, &w->alignment, 4) != 0))
        return attn_set_error(ATTN_E_INVALID, "gguf writer: general.alignment must be the writer's alignment (uint32 %u)", w->alignment);
    unsigned char *v = (unsigned char *)malloc(len ? len : 1);
    if (!v) return attn_set_error(ATTN_E_NOMEM, "gguf writer: out of memory");
    if (len) memcpy(v, data, len);
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].val);
            w->kv[i].val = v;
            w->kv[i].len = len;
            w->kv[i].type = type;
            return ATTN_OK;
        }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *n = (wkv *)realloc(w->kv, sizeof(wkv) * (size_t)cap);
        if (!n) {
            free(v);
            return attn_set_error(ATTN_E_NOMEM, "gguf writer: out of memory");
        }
        w->kv = n;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return attn_set_error(ATTN_E_NOMEM, "gguf writer: out of memory");
    }
    w->kv[w->n_kv++] = (wkv){k, type, v, len};
    return ATTN_OK;
}

int attn_gguf_writer_kv_u32(attn_gguf_writer *w, const char *key, uint32_t v) {
    return attn_gguf_writer_kv(w, key, ATTN_GGUF_UINT32, &v, 4);
}

int attn_gguf_writer_tensor(attn_gguf_writer *w, const char *name, attn_qtype t, int n_dims, const int64_t *ne) {
    if (!w || !name || !ne) return attn_set_error(ATTN_E_INVALID, "gguf writer: NULL argument");
    if (w->started) return attn_set_error(ATTN_E_INVALID, "gguf writer: tensor '%s' declared after the data began", name);
    if (n_dims < 1 || n_dims > 4 || attn_ggml_type_of(t) < 0)
        return attn_set_error(ATTN_E_INVALID, "gguf writer: tensor '%s': bad rank %d or type", name, n_dims);
    uint64_t numel = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] <= 0 || ne[d] >= (1LL << 40) || numel > (1ull << 62) / (uint64_t)ne[d])
            return attn_set_error(ATTN_E_INVALID, "gguf writer: tensor '%s': extent %lld", name, (long long)ne[d]);
        numel *= (uint64_t)ne[d];
    }
    size_t rb = attn_qtype_row_bytes(t, ne[0]);
    if (!rb) return attn_set_error(ATTN_E_INVALID, "gguf writer: tensor '%s': %lld columns is not a multiple of the %s block", name,
                                   (long long)ne[0], attn_qtype_name(t));
    for (int64_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) return attn_set_error(ATTN_E_INVALID, "gguf writer: duplicate tensor '%s'", name);
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *n = (wtensor *)realloc(w->t, sizeof(wtensor) * (size_t)cap);
        if (!n) return attn_set_error(ATTN_E_NOMEM, "gguf writer: out of memory");
        w->t = n;
        w->cap_t = cap;
    }
    wtensor *e = &w->t[w->n_t];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name) return attn_set_error(ATTN_E_NOMEM, "gguf writer: out of memory");
    e->type = t;
    e->n_dims = n_dims;
    for (int d = 0; d < 4; d++) e->ne[d] = d < n_dims ? ne[d] : 1;
    e->nbytes = rb * (size_t)(numel / (uint64_t)ne[0]);
    w->n_t++;
    return ATTN_OK;
}

static void put(attn_gguf_writer *w, const void *p, size_t n) {
    if (n) fwrite(p, 1, n, w->f);
    w->pos += n;
}
static void put_u32(attn_gguf_writer *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(attn_gguf_writer *w, uint64_t v) { put(w, &v, 8); }
static void put_str(attn_gguf_writer *w, const char *s) {
    put_u64(w, strlen(s));
    put(w, s, strlen(s));
}
static void pad(attn_gguf_writer *w) {
    static const unsigned char zeros[64];
    size_t n = (w->alignment - w->pos % w->alignment) % w->alignment;
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        put(w, zeros, k);
        n -= k;
    }
}

static void start(attn_gguf_writer *w) {
    if (w->started) return;
    w->started = 1;
    put(w, "GGUF", 4);
    put_u32(w, 3);
    put_u64(w, (uint64_t)w->n_t);
    put_u64(w, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv; i++) {
        put_str(w, w->kv[i].key);
        put_u32(w, (uint32_t)w->kv[i].type);
        put(w, w->kv[i].val, w->kv[i].len);
    }
    size_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        wtensor *e = &w->t[i];
        put_str(w, e->name);
        put_u32(w, (uint32_t)e->n_dims);
        for (int d = 0; d < e->n_dims; d++) put_u64(w, (uint64_t)e->ne[d]);
        put_u32(w, (uint32_t)attn_ggml_type_of(e->type));
        put_u64(w, off);
        e->offset = off;
        off += (e->nbytes + w->alignment - 1) / w->alignment * w->alignment;
    }
    pad(w);
    w->cur = 0;
    w->cur_done = 0;
}

int attn_gguf_writer_data(attn_gguf_writer *w, const void *data, size_t n) {
    if (!w || (!data && n)) return attn_set_error(ATTN_E_INVALID, "gguf writer: NULL argument");
    start(w);
    while (n) {
        if (w->cur >= w->n_t) return attn_set_error(ATTN_E_INVALID, "gguf writer: %zu bytes of data beyond the last tensor", n);
        wtensor *e = &w->t[w->cur];
        size_t k = e->nbytes - w->cur_done < n ? e->nbytes - w->cur_done : n;
        put(w, data, k);
        data = (const unsigned char *)data + k;
        n -= k;
        w->cur_done += k;
        if (w->cur_done == e->nbytes) {
            pad(w);
            w->cur++;
            w->cur_done = 0;
        }
    }
    if (ferror(w->f)) return attn_set_error(ATTN_E_IO, "gguf writer: %s: write failed", attn_out_path(w->out));
    return ATTN_OK;
}

int attn_gguf_writer_commit(attn_gguf_writer *w) {
    if (!w) return attn_set_error(ATTN_E_INVALID, "gguf writer: NULL argument");
    start(w);
    if (w->cur < w->n_t) {
        int rc = attn_set_error(ATTN_E_INVALID, "gguf writer: tensor '%s' got %zu of its %zu bytes", w->t[w->cur].name, w->cur_done,
                                w->t[w->cur].nbytes);
        attn_gguf_writer_abort(w);
        return rc;
    }
    int rc = attn_out_commit(w->out);
    writer_free(w);
    return rc;
}

/* ------------------------------------------------------------------ quantize */

typedef struct {
    const char *name;
    int ftype;          /* llama_ftype */
    attn_qtype def;
} ftype_info;

static const ftype_info FTYPES[] = {
    {"F16", 1, ATTN_QT_F16},       {"Q4_0", 2, ATTN_QT_Q4_0},    {"Q4_1", 3, ATTN_QT_Q4_1},    {"Q8_0", 7, ATTN_QT_Q8_0},
    {"Q5_0", 8, ATTN_QT_Q5_0},     {"Q5_1", 9, ATTN_QT_Q5_1},    {"Q2_K", 10, ATTN_QT_Q2_K},   {"Q3_K_S", 11, ATTN_QT_Q3_K},
    {"Q3_K_M", 12, ATTN_QT_Q3_K},  {"Q3_K", 12, ATTN_QT_Q3_K},   {"Q3_K_L", 13, ATTN_QT_Q3_K}, {"Q4_K_S", 14, ATTN_QT_Q4_K},
    {"Q4_K_M", 15, ATTN_QT_Q4_K},  {"Q4_K", 15, ATTN_QT_Q4_K},   {"Q5_K_S", 16, ATTN_QT_Q5_K}, {"Q5_K_M", 17, ATTN_QT_Q5_K},
    {"Q5_K", 17, ATTN_QT_Q5_K},    {"Q6_K", 18, ATTN_QT_Q6_K},
};
#define N_FTYPES (sizeof FTYPES / sizeof FTYPES[0])

static const ftype_info *find_ftype(const char *s) {
    for (size_t i = 0; s && i < N_FTYPES; i++)
        if (strcasecmp(FTYPES[i].name, s) == 0) return &FTYPES[i];
    return NULL;
}

int attn_gguf_ftype_default(const char *ftype) {
    const ftype_info *f = find_ftype(ftype);
    return f ? (int)f->def : -1;
}

enum { FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_S = 16, FT_Q5_K_M = 17 };

static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

typedef struct {
    int has_output, n_gqa, n_attn_v, i_attn_v, n_ffn_down, i_ffn_down;
} mix_state;

/* llama.cpp's llama_tensor_get_type for the ftypes above (no importance matrix, no experts) */
static attn_qtype mix_type(mix_state *s, const char *name, int64_t nx, int ftype, attn_qtype t) {
    const int q = t != ATTN_QT_F16; /* F16 files take no mix */
    if (!q) return t;
    if (strcmp(name, "output.weight") == 0 || (!s->has_output && strcmp(name, "token_embd.weight") == 0)) {
        if (nx % 256) t = ATTN_QT_Q8_0;
        else if (t != ATTN_QT_Q8_0) t = ATTN_QT_Q6_K;
    } else if (strcmp(name, "token_embd.weight") == 0) {
        /* kept at the default type */
    } else if (strstr(name, "attn_v.weight")) {
        if (ftype == FT_Q2_K) t = s->n_gqa >= 4 ? ATTN_QT_Q4_K : ATTN_QT_Q3_K;
        else if (ftype == FT_Q3_K_M) t = s->i_attn_v < 2 ? ATTN_QT_Q5_K : ATTN_QT_Q4_K;
        else if (ftype == FT_Q3_K_L) t = ATTN_QT_Q5_K;
        else if ((ftype == FT_Q4_K_M || ftype == FT_Q5_K_M) && more_bits(s->i_attn_v, s->n_attn_v)) t = ATTN_QT_Q6_K;
        else if (ftype == FT_Q4_K_S && s->i_attn_v < 4) t = ATTN_QT_Q5_K;
        s->i_attn_v++;
    } else if (strstr(name, "ffn_down")) {
        const int i = s->i_ffn_down, n = s->n_ffn_down;
        if (ftype == FT_Q2_K) t = ATTN_QT_Q3_K;
        else if (ftype == FT_Q3_K_M) t = i < n / 16 ? ATTN_QT_Q5_K : ATTN_QT_Q4_K;
        else if (ftype == FT_Q3_K_L) t = ATTN_QT_Q5_K;
        else if (ftype == FT_Q4_K_M) {
            if (more_bits(i, n)) t = ATTN_QT_Q6_K;
        } else if (ftype == FT_Q5_K_M && more_bits(i, n)) t = ATTN_QT_Q6_K;
        else if (ftype == FT_Q4_K_S && i < n / 8) t = ATTN_QT_Q5_K;
        s->i_ffn_down++;
    } else if (strstr(name, "attn_output.weight")) {
        if (ftype == FT_Q2_K) t = ATTN_QT_Q3_K;
        else if (ftype == FT_Q3_K_M) t = ATTN_QT_Q4_K;
        else if (ftype == FT_Q3_K_L) t = ATTN_QT_Q5_K;
    } else if (strstr(name, "attn_qkv.weight")) {
        if (ftype == FT_Q3_K_M || ftype == FT_Q3_K_L) t = ATTN_QT_Q4_K;
        else if (ftype == FT_Q4_K_M) t = ATTN_QT_Q5_K;
        else if (ftype == FT_Q5_K_M) t = ATTN_QT_Q6_K;
    }
    if (nx % attn_qtype_block(t)) { /* llama.cpp's fallbacks for rows the type cannot hold */
        switch (t) {
        case ATTN_QT_Q4_K: t = ATTN_QT_Q5_0; break;
        case ATTN_QT_Q5_K: t = ATTN_QT_Q5_1; break;
        case ATTN_QT_Q6_K: t = ATTN_QT_Q8_0; break;
        default: t = ATTN_QT_Q4_0; break;
        }
        if (nx % attn_qtype_block(t)) t = ATTN_QT_F16;
    }
    return t;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int quantizable(const attn_gguf_tensor *t) {
    int dims = 0;
    for (int d = 0; d < t->n_dims; d++)
        if (t->ne[d] > 1) dims = d + 1;
    return ends_with(t->name, "weight") && dims >= 2 && !strstr(t->name, "_norm.weight") && !strstr(t->name, "ffn_gate_inp.weight") &&
           strcmp(t->name, "position_embd.weight") != 0 && strcmp(t->name, "token_types.weight") != 0 &&
           !strstr(t->name, "rope_freqs.weight");
}

static int head_ratio(const attn_gguf *g) {
    const char *arch;
    size_t len;
    char key[160];
    int64_t h = 0, kv = 0;
    if (attn_gguf_get_str(g, "general.architecture", &arch, &len) < 0 || len > 100) return 1;
    snprintf(key, sizeof key, "%.*s.attention.head_count", (int)len, arch);
    if (attn_gguf_get_int(g, key, &h) < 0) return 1;
    snprintf(key, sizeof key, "%.*s.attention.head_count_kv", (int)len, arch);
    if (attn_gguf_get_int(g, key, &kv) < 0 || kv <= 0) return 1;
    return (int)(h / kv);
}

/* rows of tensor t converted to type dst, written through w, `chunk` rows at a time */
static int convert_tensor(attn_gguf_writer *w, const attn_gguf_tensor *t, attn_qtype dst, int nt) {
    const int64_t cols = t->ne[0], rows = (int64_t)(t->nbytes / attn_qtype_row_bytes(t->type, cols));
    int64_t chunk = (int64_t)((16 << 20) / (size_t)cols);
    if (chunk < 1) chunk = 1;
    if (chunk > rows) chunk = rows;
    const size_t orb = attn_qtype_row_bytes(dst, cols);
    float *x = (float *)malloc(sizeof(float) * (size_t)(chunk * cols));
    unsigned char *o = (unsigned char *)malloc(orb * (size_t)chunk);
    int rc = x && o ? ATTN_OK : attn_set_error(ATTN_E_NOMEM, "quantize: out of memory");
    attn_qmatrix m = {t->type, t->data, rows, cols};
    for (int64_t r = 0; rc == ATTN_OK && r < rows; r += chunk) {
        int64_t n = rows - r < chunk ? rows - r : chunk;
        rc = attn_qmatrix_dequantize_rows(x, &m, r, n);
        if (rc == ATTN_OK) {
            rc = attn_quantize_rows(o, x, n, cols, dst, nt);
            if (rc == ATTN_E_RANGE) {
                char msg[200];
                snprintf(msg, sizeof msg, "%s", attn_last_error());
                rc = attn_set_error(ATTN_E_RANGE, "tensor '%s' rows %lld..: %s", t->name, (long long)r, msg);
            }
        }
        if (rc == ATTN_OK) rc = attn_gguf_writer_data(w, o, orb * (size_t)n);
    }
    free(x);
    free(o);
    return rc;
}

/* a tensor copied as it is must load again: float values finite, block scales finite (what
 * the model loaders check; quantize refused such values only in the tensors it converts) */
static int check_copied(const attn_gguf_tensor *t) {
    const size_t n = t->nbytes / (t->type == ATTN_QT_F32 ? 4 : 2);
    if (t->type == ATTN_QT_F32 || t->type == ATTN_QT_F16 || t->type == ATTN_QT_BF16) {
        for (size_t i = 0; i < n; i++) {
            int bad;
            if (t->type == ATTN_QT_F32) {
                uint32_t b;
                memcpy(&b, (const unsigned char *)t->data + 4 * i, 4);
                bad = (b & 0x7f800000u) == 0x7f800000u;
            } else {
                uint16_t h;
                memcpy(&h, (const unsigned char *)t->data + 2 * i, 2);
                const uint16_t e = t->type == ATTN_QT_F16 ? 0x7c00u : 0x7f80u;
                bad = (h & e) == e;
            }
            if (bad) return attn_set_error(ATTN_E_RANGE, "quantize: tensor '%s' holds a non-finite value (element %zu)", t->name, i);
        }
        return ATTN_OK;
    }
    if (attn_qtype_block(t->type) <= 1 || t->ne[0] <= 0) return ATTN_OK;
    const attn_qmatrix m = {t->type, t->data, (int64_t)(t->nbytes / attn_qtype_row_bytes(t->type, t->ne[0])), t->ne[0]};
    const int rc = attn_qmatrix_check(&m);
    if (rc < 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        return attn_set_error(rc, "quantize: tensor '%s': %s", t->name, msg);
    }
    return ATTN_OK;
}

/* llama.cpp's tensor order (llama_model_loader's weight_name_comparer): by layer number
 * ("blk.N."; other tensors first), then by name; the mix counters and the output follow it */
typedef struct {
    int layer;
    const char *name;
    int64_t index;
} tensor_key;

static int cmp_tensor(const void *a, const void *b) {
    const tensor_key *x = (const tensor_key *)a, *y = (const tensor_key *)b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

int attn_gguf_quantize(const char *in, const char *out, const char *ftype, int n_threads, int64_t *counts) {
    if (!in || !out || !ftype) return attn_set_error(ATTN_E_INVALID, "quantize: NULL argument");
    const ftype_info *ft = find_ftype(ftype);
    if (!ft) {
        char buf[64];
        return attn_set_error(ATTN_E_INVALID,
                              "quantize: unknown type '%s' (F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, "
                              "Q5_K_S, Q5_K_M, Q6_K)",
                              attn__printable(buf, sizeof buf, ftype));
    }
    if (attn_same_file(in, out)) return attn_set_error(ATTN_E_INVALID, "quantize: the output %s is the input file", out);
    if (counts) memset(counts, 0, sizeof(int64_t) * ATTN_QT_COUNT);
    attn_gguf *g = NULL;
    ATTN_TRY(attn_gguf_open(&g, in));
    attn_gguf_writer *w = NULL;
    int rc = attn_gguf_writer_open(&w, out, attn_gguf_alignment(g));
    if (rc < 0) {
        attn_gguf_close(g);
        return rc;
    }
    const int64_t nkv = attn_gguf_n_kv(g), ntn = attn_gguf_n_tensors(g);
    for (int64_t i = 0; rc == ATTN_OK && i < nkv; i++) {
        int type;
        const void *p;
        size_t len;
        rc = attn_gguf_kv_raw(g, i, &type, &p, &len);
        if (rc == ATTN_OK) rc = attn_gguf_writer_kv(w, attn_gguf_kv_key(g, i), type, p, len);
    }
    if (rc == ATTN_OK) rc = attn_gguf_writer_kv_u32(w, "general.quantization_version", 2);
    if (rc == ATTN_OK) rc = attn_gguf_writer_kv_u32(w, "general.file_type", (uint32_t)ft->ftype);
    mix_state s = {0, head_ratio(g), 0, 0, 0, 0};
    attn_qtype *dst = (attn_qtype *)calloc((size_t)ntn + 1, sizeof(attn_qtype));
    tensor_key *ord = (tensor_key *)calloc((size_t)ntn + 1, sizeof(tensor_key));
    if ((!dst || !ord) && rc == ATTN_OK) rc = attn_set_error(ATTN_E_NOMEM, "quantize: out of memory");
    attn_gguf_tensor t;
    for (int64_t i = 0; rc == ATTN_OK && i < ntn; i++) {
        attn_gguf_tensor_at(g, i, &t);
        ord[i].layer = -1;
        if (sscanf(t.name, "blk.%d.", &ord[i].layer) != 1) ord[i].layer = -1;
        ord[i].name = t.name;
        ord[i].index = i;
        if (strcmp(t.name, "output.weight") == 0) s.has_output = 1;
        if (strstr(t.name, "attn_v.weight") || strstr(t.name, "attn_qkv.weight")) s.n_attn_v++;
        if (strstr(t.name, "ffn_down")) s.n_ffn_down++;
    }
    if (rc == ATTN_OK) qsort(ord, (size_t)ntn, sizeof *ord, cmp_tensor);
    for (int64_t i = 0; rc == ATTN_OK && i < ntn; i++) {
        attn_gguf_tensor_at(g, ord[i].index, &t);
        dst[i] = quantizable(&t) ? mix_type(&s, t.name, t.ne[0], ft->ftype, ft->def) : t.type;
        rc = attn_gguf_writer_tensor(w, t.name, dst[i], t.n_dims, t.ne);
        if (rc == ATTN_OK && counts && (int)dst[i] < ATTN_QT_COUNT) counts[dst[i]]++;
    }
    for (int64_t i = 0; rc == ATTN_OK && i < ntn; i++) {
        attn_gguf_tensor_at(g, ord[i].index, &t);
        if (dst[i] == t.type) {
            rc = check_copied(&t);
            if (rc == ATTN_OK) rc = attn_gguf_writer_data(w, t.data, t.nbytes);
        } else
            rc = convert_tensor(w, &t, dst[i], n_threads);
    }
    free(dst);
    free(ord);
    attn_gguf_close(g);
    if (rc < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        attn_gguf_writer_abort(w);
        return attn_set_error(rc, "%s", msg);
    }
    return attn_gguf_writer_commit(w);
}
