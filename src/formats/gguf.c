/* GGUF reader (see include/attn_gguf.h). Parsing is a bounds-checked cursor over the mapping;
 * each key/value and tensor info is recorded by offset, so accessors never re-validate. */
#include "attn_gguf.h"
#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAX_DEPTH 4

typedef struct {
    char *key;
    int type;
    size_t off;      /* offset of the value (for arrays: of the first element) */
    int elem_type;   /* arrays */
    uint64_t n;      /* arrays: count */
    size_t *str_off; /* arrays of strings: offset of each element (its length field) */
    size_t raw_off, raw_len; /* the encoded value (arrays: from the element type on) */
} gguf_kv;

struct attn_gguf {
    const uint8_t *base;
    size_t size;
    int mapped;
    uint32_t version, alignment;
    int64_t n_kv, n_tensors;
    gguf_kv *kv;
    attn_gguf_tensor *tensors;
};

typedef struct {
    const uint8_t *b;
    size_t size, pos;
} cur;

static int need(cur *c, size_t n, const char *what) {
    if (n > c->size - c->pos)
        return attn_set_error(ATTN_E_FORMAT, "gguf: truncated: %s needs %zu bytes at offset %zu, the file has %zu", what, n, c->pos,
                              c->size);
    return 0;
}
static int rd_u32(cur *c, uint32_t *v, const char *what) {
    ATTN_TRY(need(c, 4, what));
    memcpy(v, c->b + c->pos, 4);
    c->pos += 4;
    return 0;
}
static int rd_u64(cur *c, uint64_t *v, const char *what) {
    ATTN_TRY(need(c, 8, what));
    memcpy(v, c->b + c->pos, 8);
    c->pos += 8;
    return 0;
}
static int rd_str(cur *c, size_t *off, uint64_t *len, const char *what) {
    uint64_t n;
    ATTN_TRY(rd_u64(c, &n, what));
    if (n > c->size - c->pos)
        return attn_set_error(ATTN_E_FORMAT, "gguf: %s: string of %llu bytes at offset %zu runs past the end of the file", what,
                              (unsigned long long)n, c->pos - 8);
    *off = c->pos;
    *len = n;
    c->pos += (size_t)n;
    return 0;
}

static size_t scalar_size(int t) {
    switch (t) {
    case ATTN_GGUF_UINT8: case ATTN_GGUF_INT8: case ATTN_GGUF_BOOL: return 1;
    case ATTN_GGUF_UINT16: case ATTN_GGUF_INT16: return 2;
    case ATTN_GGUF_UINT32: case ATTN_GGUF_INT32: case ATTN_GGUF_FLOAT32: return 4;
    case ATTN_GGUF_UINT64: case ATTN_GGUF_INT64: case ATTN_GGUF_FLOAT64: return 8;
    }
    return 0;
}

/* skip (validate) one value of type t; depth for nested arrays */
static int skip_value(cur *c, int t, int depth, const char *key) {
    if (t == ATTN_GGUF_STRING) {
        size_t o;
        uint64_t l;
        return rd_str(c, &o, &l, key);
    }
    if (t == ATTN_GGUF_ARRAY) {
        if (depth >= GGUF_MAX_DEPTH) return attn_set_error(ATTN_E_FORMAT, "gguf: %s: arrays nested deeper than %d", key, GGUF_MAX_DEPTH);
        uint32_t et;
        uint64_t n;
        ATTN_TRY(rd_u32(c, &et, key));
        ATTN_TRY(rd_u64(c, &n, key));
        if (et > ATTN_GGUF_FLOAT64) return attn_set_error(ATTN_E_FORMAT, "gguf: %s: unknown array element type %u", key, et);
        size_t es = scalar_size((int)et);
        if (es) {
            if (n > (c->size - c->pos) / es)
                return attn_set_error(ATTN_E_FORMAT, "gguf: %s: array of %llu elements runs past the end of the file", key,
                                      (unsigned long long)n);
            c->pos += (size_t)n * es;
            return 0;
        }
        if (n > (c->size - c->pos) / 8 + 1)
            return attn_set_error(ATTN_E_FORMAT, "gguf: %s: array of %llu elements cannot fit in the file", key, (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) ATTN_TRY(skip_value(c, (int)et, depth + 1, key));
        return 0;
    }
    size_t s = scalar_size(t);
    if (!s) return attn_set_error(ATTN_E_FORMAT, "gguf: %s: unknown value type %d", key, t);
    ATTN_TRY(need(c, s, key));
    c->pos += s;
    return 0;
}

const char *attn_ggml_type_name(uint32_t t) {
    static const char *names[] = {"f32",     "f16",    "q4_0",    "q4_1",  "q4_2",  "q4_3",   "q5_0",   "q5_1",  "q8_0",
                                  "q8_1",    "q2_k",   "q3_k",    "q4_k",  "q5_k",  "q6_k",   "q8_k",   "iq2_xxs", "iq2_xs",
                                  "iq3_xxs", "iq1_s",  "iq4_nl",  "iq3_s", "iq2_s", "iq4_xs", "i8",     "i16",   "i32",
                                  "i64",     "f64",    "iq1_m",   "bf16",  "q4_0_4_4", "q4_0_4_8", "q4_0_8_8", "tq1_0", "tq2_0",
                                  "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4"};
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static int map_type(uint32_t t, attn_qtype *q) {
    switch (t) {
    case 0: *q = ATTN_QT_F32; return 0;
    case 1: *q = ATTN_QT_F16; return 0;
    case 2: *q = ATTN_QT_Q4_0; return 0;
    case 3: *q = ATTN_QT_Q4_1; return 0;
    case 6: *q = ATTN_QT_Q5_0; return 0;
    case 7: *q = ATTN_QT_Q5_1; return 0;
    case 8: *q = ATTN_QT_Q8_0; return 0;
    case 10: *q = ATTN_QT_Q2_K; return 0;
    case 11: *q = ATTN_QT_Q3_K; return 0;
    case 12: *q = ATTN_QT_Q4_K; return 0;
    case 13: *q = ATTN_QT_Q5_K; return 0;
    case 14: *q = ATTN_QT_Q6_K; return 0;
    case 30: *q = ATTN_QT_BF16; return 0;
    }
    return -1;
}

void attn_gguf_close(attn_gguf *g) {
    if (!g) return;
    if (g->kv)
        for (int64_t i = 0; i < g->n_kv; i++) {
            free(g->kv[i].key);
            free(g->kv[i].str_off);
        }
    free(g->kv);
    if (g->tensors)
        for (int64_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->tensors);
    if (g->mapped && g->base) munmap((void *)g->base, g->size);
    free(g);
}

static char *dup_n(const uint8_t *s, size_t n) {
    char *p = (char *)malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

static uint64_t numel_of(const attn_gguf_tensor *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= (uint64_t)t->ne[d];
    return n;
}

static int parse(attn_gguf *g) {
    cur c = {g->base, g->size, 0};
    uint32_t magic;
    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0) return attn_set_error(ATTN_E_FORMAT, "gguf: not a GGUF file (bad magic)");
    ATTN_TRY(rd_u32(&c, &magic, "magic"));
    ATTN_TRY(rd_u32(&c, &g->version, "version"));
    if (g->version != 2 && g->version != 3)
        return attn_set_error(ATTN_E_FORMAT, "gguf: version %u is not supported (2 and 3 are)", g->version);
    uint64_t nt, nkv;
    ATTN_TRY(rd_u64(&c, &nt, "tensor count"));
    ATTN_TRY(rd_u64(&c, &nkv, "metadata count"));
    /* each kv needs >= 12 bytes, each tensor info >= 24 */
    if (nkv > g->size / 12 || nt > g->size / 24)
        return attn_set_error(ATTN_E_FORMAT, "gguf: %llu tensors / %llu metadata entries cannot fit in %zu bytes", (unsigned long long)nt,
                              (unsigned long long)nkv, g->size);
    g->kv = (gguf_kv *)calloc((size_t)nkv + 1, sizeof(gguf_kv));
    g->tensors = (attn_gguf_tensor *)calloc((size_t)nt + 1, sizeof(attn_gguf_tensor));
    if (!g->kv || !g->tensors) return attn_set_error(ATTN_E_NOMEM, "gguf: out of memory");
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < nkv; i++) {
        size_t ko;
        uint64_t kl;
        ATTN_TRY(rd_str(&c, &ko, &kl, "metadata key"));
        gguf_kv *kv = &g->kv[i];
        kv->key = dup_n(c.b + ko, (size_t)kl);
        if (!kv->key) return attn_set_error(ATTN_E_NOMEM, "gguf: out of memory");
        g->n_kv = (int64_t)i + 1;
        if (strlen(kv->key) != kl) return attn_set_error(ATTN_E_FORMAT, "gguf: metadata key %llu contains a NUL byte", (unsigned long long)i);
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(g->kv[j].key, kv->key) == 0) return attn_set_error(ATTN_E_FORMAT, "gguf: duplicate metadata key '%s'", kv->key);
        uint32_t t;
        ATTN_TRY(rd_u32(&c, &t, kv->key));
        if (t > ATTN_GGUF_FLOAT64) return attn_set_error(ATTN_E_FORMAT, "gguf: key '%s' has unknown value type %u", kv->key, t);
        kv->type = (int)t;
        kv->raw_off = c.pos;
        if (t == ATTN_GGUF_ARRAY) {
            size_t start = c.pos;
            uint32_t et;
            uint64_t n;
            ATTN_TRY(rd_u32(&c, &et, kv->key));
            ATTN_TRY(rd_u64(&c, &n, kv->key));
            kv->elem_type = (int)et;
            kv->n = n;
            kv->off = c.pos;
            c.pos = start;
            ATTN_TRY(skip_value(&c, ATTN_GGUF_ARRAY, 0, kv->key));
            if (et == ATTN_GGUF_STRING) {
                kv->str_off = (size_t *)malloc(sizeof(size_t) * (size_t)(n ? n : 1));
                if (!kv->str_off) return attn_set_error(ATTN_E_NOMEM, "gguf: out of memory");
                cur s = {g->base, g->size, kv->off};
                for (uint64_t j = 0; j < n; j++) {
                    kv->str_off[j] = s.pos;
                    size_t o;
                    uint64_t l;
                    ATTN_TRY(rd_str(&s, &o, &l, kv->key));
                }
            }
        } else {
            kv->off = c.pos;
            ATTN_TRY(skip_value(&c, (int)t, 0, kv->key));
        }
        kv->raw_len = c.pos - kv->raw_off;
        if (strcmp(kv->key, "general.alignment") == 0) {
            uint32_t a;
            if (t != ATTN_GGUF_UINT32) return attn_set_error(ATTN_E_FORMAT, "gguf: general.alignment must be uint32");
            memcpy(&a, g->base + kv->off, 4);
            if (a == 0 || (a & (a - 1)) || a > (1u << 20))
                return attn_set_error(ATTN_E_FORMAT, "gguf: general.alignment %u is not a power of two up to 2^20", a);
            alignment = a;
        }
    }
    for (uint64_t i = 0; i < nt; i++) {
        attn_gguf_tensor *t = &g->tensors[i];
        size_t no;
        uint64_t nl;
        ATTN_TRY(rd_str(&c, &no, &nl, "tensor name"));
        t->name = dup_n(c.b + no, (size_t)nl);
        if (!t->name) return attn_set_error(ATTN_E_NOMEM, "gguf: out of memory");
        g->n_tensors = (int64_t)i + 1;
        uint32_t nd;
        ATTN_TRY(rd_u32(&c, &nd, t->name));
        if (nd < 1 || nd > 4) return attn_set_error(ATTN_E_FORMAT, "gguf: tensor '%s' has %u dimensions (1 to 4 allowed)", t->name, nd);
        t->n_dims = (int)nd;
        uint64_t numel = 1;
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t e;
            ATTN_TRY(rd_u64(&c, &e, t->name));
            if (e == 0 || e >= (1ull << 40) || numel > (1ull << 62) / e)
                return attn_set_error(ATTN_E_FORMAT, "gguf: tensor '%s' has extent %llu in dimension %u", t->name, (unsigned long long)e, d);
            t->ne[d] = (int64_t)e;
            numel *= e;
        }
        uint32_t ty;
        uint64_t off;
        ATTN_TRY(rd_u32(&c, &ty, t->name));
        ATTN_TRY(rd_u64(&c, &off, t->name));
        if (map_type(ty, &t->type) < 0)
            return attn_set_error(ATTN_E_UNSUPPORTED, "gguf: tensor '%s' has type %s (%u); attn reads f32, f16, bf16, q8_0, q4_0, q4_1, "
                                  "q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k",
                                  t->name, attn_ggml_type_name(ty), ty);
        if (t->ne[0] % attn_qtype_block(t->type))
            return attn_set_error(ATTN_E_FORMAT, "gguf: tensor '%s': %lld columns is not a multiple of the %s block (%lld values)", t->name,
                                  (long long)t->ne[0], attn_qtype_name(t->type), (long long)attn_qtype_block(t->type));
        size_t rb = attn_qtype_row_bytes(t->type, t->ne[0]);
        uint64_t rows = numel / (uint64_t)t->ne[0];
        if (rows > (1ull << 62) / rb) return attn_set_error(ATTN_E_FORMAT, "gguf: tensor '%s' is too large", t->name);
        t->nbytes = (size_t)(rows * rb);
        if (off % alignment) return attn_set_error(ATTN_E_FORMAT, "gguf: tensor '%s' offset %llu is not aligned to %llu", t->name,
                                                    (unsigned long long)off, (unsigned long long)alignment);
        t->data = (const void *)(uintptr_t)off; /* relative until the data section is known */
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(g->tensors[j].name, t->name) == 0) return attn_set_error(ATTN_E_FORMAT, "gguf: duplicate tensor '%s'", t->name);
    }
    g->alignment = (uint32_t)alignment;
    size_t data_start = (c.pos + (size_t)alignment - 1) / (size_t)alignment * (size_t)alignment;
    if (data_start > g->size && nt > 0) return attn_set_error(ATTN_E_FORMAT, "gguf: truncated before the tensor data");
    for (uint64_t i = 0; i < nt; i++) {
        attn_gguf_tensor *t = &g->tensors[i];
        uint64_t off = (uint64_t)(uintptr_t)t->data;
        if (off > g->size - data_start || t->nbytes > g->size - data_start - off)
            return attn_set_error(ATTN_E_FORMAT, "gguf: tensor '%s' (%zu bytes at data offset %llu) runs past the end of the file (%zu bytes)",
                                  t->name, t->nbytes, (unsigned long long)off, g->size);
        t->data = g->base + data_start + off;
        /* block scales that decode to NaN / Inf would turn every product with the row into NaN */
        attn_qmatrix qm = {t->type, t->data, (int64_t)(numel_of(t) / (uint64_t)t->ne[0]), t->ne[0]};
        if (attn_qmatrix_check(&qm) < 0) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            return attn_set_error(ATTN_E_FORMAT, "gguf: tensor '%s': %s", t->name, msg);
        }
    }
    return 0;
}

int attn_gguf_open_buffer(attn_gguf **out, const void *data, size_t len) {
    if (!out || (!data && len)) return attn_set_error(ATTN_E_INVALID, "gguf: NULL argument");
    *out = NULL;
    attn_gguf *g = (attn_gguf *)calloc(1, sizeof *g);
    if (!g) return attn_set_error(ATTN_E_NOMEM, "gguf: out of memory");
    g->base = (const uint8_t *)data;
    g->size = len;
    int rc = parse(g);
    if (rc < 0) {
        attn_gguf_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

int attn_gguf_open(attn_gguf **out, const char *path) {
    if (!out || !path) return attn_set_error(ATTN_E_INVALID, "gguf: NULL argument");
    *out = NULL;
    void *p;
    size_t size;
    ATTN_TRY(attn__map_readonly(path, &p, &size));
    if (size < 24) {
        if (p) munmap(p, size);
        return attn_set_error(ATTN_E_FORMAT, "%s: not a GGUF file (%zu bytes)", path, size);
    }
    attn_gguf *g = (attn_gguf *)calloc(1, sizeof *g);
    if (!g) {
        munmap(p, size);
        return attn_set_error(ATTN_E_NOMEM, "gguf: out of memory");
    }
    g->base = (const uint8_t *)p;
    g->size = size;
    g->mapped = 1;
    int rc = parse(g);
    if (rc < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        attn_gguf_close(g);
        return attn_set_error(rc, "%s: %s", path, msg);
    }
    *out = g;
    return 0;
}

uint32_t attn_gguf_version(const attn_gguf *g) { return g ? g->version : 0; }
int64_t attn_gguf_n_kv(const attn_gguf *g) { return g ? g->n_kv : 0; }
int64_t attn_gguf_n_tensors(const attn_gguf *g) { return g ? g->n_tensors : 0; }
const char *attn_gguf_kv_key(const attn_gguf *g, int64_t i) { return (g && i >= 0 && i < g->n_kv) ? g->kv[i].key : NULL; }
int attn_gguf_kv_type(const attn_gguf *g, int64_t i) { return (g && i >= 0 && i < g->n_kv) ? g->kv[i].type : -1; }

int64_t attn_gguf_find_kv(const attn_gguf *g, const char *key) {
    if (!g || !key) return -1;
    for (int64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return i;
    return -1;
}

static int get_kv(const attn_gguf *g, const char *key, const gguf_kv **kv) {
    int64_t i = attn_gguf_find_kv(g, key);
    if (i < 0) return attn_set_error(ATTN_E_FORMAT, "gguf: metadata key '%s' is missing", key ? key : "(null)");
    *kv = &g->kv[i];
    return 0;
}

static int num_at(const uint8_t *p, int t, double *d, int64_t *iv, int *is_int) {
    *is_int = 1;
    switch (t) {
    case ATTN_GGUF_UINT8: *iv = p[0]; break;
    case ATTN_GGUF_INT8: *iv = (int8_t)p[0]; break;
    case ATTN_GGUF_BOOL: *iv = p[0] != 0; break;
    case ATTN_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *iv = v; break; }
    case ATTN_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); *iv = v; break; }
    case ATTN_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *iv = v; break; }
    case ATTN_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); *iv = v; break; }
    case ATTN_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); *iv = v; break; }
    case ATTN_GGUF_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > (uint64_t)INT64_MAX) return -1;
        *iv = (int64_t)v;
        break;
    }
    case ATTN_GGUF_FLOAT32: { float v; memcpy(&v, p, 4); *d = v; *is_int = 0; return 0; }
    case ATTN_GGUF_FLOAT64: { double v; memcpy(&v, p, 8); *d = v; *is_int = 0; return 0; }
    default: return -2;
    }
    *d = (double)*iv;
    return 0;
}

int attn_gguf_get_int(const attn_gguf *g, const char *key, int64_t *v) {
    const gguf_kv *kv = NULL;
    ATTN_TRY(get_kv(g, key, &kv));
    double d;
    int is_int;
    int r = num_at(g->base + kv->off, kv->type, &d, v, &is_int);
    if (r == -1) return attn_set_error(ATTN_E_RANGE, "gguf: '%s' does not fit in int64", key);
    if (r < 0 || !is_int || kv->type == ATTN_GGUF_BOOL) return attn_set_error(ATTN_E_FORMAT, "gguf: '%s' is not an integer", key);
    return 0;
}

int attn_gguf_get_float(const attn_gguf *g, const char *key, double *v) {
    const gguf_kv *kv = NULL;
    ATTN_TRY(get_kv(g, key, &kv));
    int64_t iv;
    int is_int;
    if (kv->type != ATTN_GGUF_FLOAT32 && kv->type != ATTN_GGUF_FLOAT64) return attn_set_error(ATTN_E_FORMAT, "gguf: '%s' is not a float", key);
    num_at(g->base + kv->off, kv->type, v, &iv, &is_int);
    return 0;
}

int attn_gguf_get_bool(const attn_gguf *g, const char *key, int *v) {
    const gguf_kv *kv = NULL;
    ATTN_TRY(get_kv(g, key, &kv));
    if (kv->type != ATTN_GGUF_BOOL) return attn_set_error(ATTN_E_FORMAT, "gguf: '%s' is not a bool", key);
    *v = g->base[kv->off] != 0;
    return 0;
}

int attn_gguf_get_str(const attn_gguf *g, const char *key, const char **s, size_t *len) {
    const gguf_kv *kv = NULL;
    ATTN_TRY(get_kv(g, key, &kv));
    if (kv->type != ATTN_GGUF_STRING) return attn_set_error(ATTN_E_FORMAT, "gguf: '%s' is not a string", key);
    uint64_t n;
    memcpy(&n, g->base + kv->off, 8);
    *s = (const char *)g->base + kv->off + 8;
    *len = (size_t)n;
    return 0;
}

int attn_gguf_get_arr(const attn_gguf *g, const char *key, int *elem_type, int64_t *n) {
    const gguf_kv *kv = NULL;
    ATTN_TRY(get_kv(g, key, &kv));
    if (kv->type != ATTN_GGUF_ARRAY) return attn_set_error(ATTN_E_FORMAT, "gguf: '%s' is not an array", key);
    if (elem_type) *elem_type = kv->elem_type;
    if (n) *n = (int64_t)kv->n;
    return 0;
}

int attn_gguf_arr_str(const attn_gguf *g, const char *key, int64_t i, const char **s, size_t *len) {
    const gguf_kv *kv = NULL;
    ATTN_TRY(get_kv(g, key, &kv));
    if (kv->type != ATTN_GGUF_ARRAY || kv->elem_type != ATTN_GGUF_STRING)
        return attn_set_error(ATTN_E_FORMAT, "gguf: '%s' is not an array of strings", key);
    if (i < 0 || (uint64_t)i >= kv->n) return attn_set_error(ATTN_E_RANGE, "gguf: index %lld outside '%s'", (long long)i, key);
    uint64_t n;
    memcpy(&n, g->base + kv->str_off[i], 8);
    *s = (const char *)g->base + kv->str_off[i] + 8;
    *len = (size_t)n;
    return 0;
}

int attn_gguf_arr_num(const attn_gguf *g, const char *key, int64_t i, double *v) {
    const gguf_kv *kv = NULL;
    ATTN_TRY(get_kv(g, key, &kv));
    size_t es = kv->type == ATTN_GGUF_ARRAY ? scalar_size(kv->elem_type) : 0;
    if (!es) return attn_set_error(ATTN_E_FORMAT, "gguf: '%s' is not a numeric array", key);
    if (i < 0 || (uint64_t)i >= kv->n) return attn_set_error(ATTN_E_RANGE, "gguf: index %lld outside '%s'", (long long)i, key);
    int64_t iv;
    int is_int;
    if (num_at(g->base + kv->off + (size_t)i * es, kv->elem_type, v, &iv, &is_int) < 0)
        return attn_set_error(ATTN_E_RANGE, "gguf: '%s'[%lld] out of range", key, (long long)i);
    return 0;
}

int attn_gguf_tensor_at(const attn_gguf *g, int64_t i, attn_gguf_tensor *t) {
    if (!g || !t || i < 0 || i >= g->n_tensors) return attn_set_error(ATTN_E_RANGE, "gguf: tensor index %lld out of range", (long long)i);
    *t = g->tensors[i];
    return 0;
}

int attn_gguf_find_tensor(const attn_gguf *g, const char *name, attn_gguf_tensor *t) {
    if (!g || !name || !t) return attn_set_error(ATTN_E_INVALID, "gguf: NULL argument");
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) {
            *t = g->tensors[i];
            return 0;
        }
    return attn_set_error(ATTN_E_FORMAT, "gguf: tensor '%s' is missing", name);
}

int attn_gguf_kv_raw(const attn_gguf *g, int64_t i, int *type, const void **data, size_t *len) {
    if (!g || i < 0 || i >= g->n_kv || !type || !data || !len) return attn_set_error(ATTN_E_RANGE, "gguf: metadata index %lld out of range", (long long)i);
    *type = g->kv[i].type;
    *data = g->base + g->kv[i].raw_off;
    *len = g->kv[i].raw_len;
    return 0;
}

uint32_t attn_gguf_alignment(const attn_gguf *g) { return g ? g->alignment : 0; }

int attn_ggml_type_of(attn_qtype t) {
    switch (t) {
    case ATTN_QT_F32: return 0;
    case ATTN_QT_F16: return 1;
    case ATTN_QT_Q4_0: return 2;
    case ATTN_QT_Q4_1: return 3;
    case ATTN_QT_Q5_0: return 6;
    case ATTN_QT_Q5_1: return 7;
    case ATTN_QT_Q8_0: return 8;
    case ATTN_QT_Q2_K: return 10;
    case ATTN_QT_Q3_K: return 11;
    case ATTN_QT_Q4_K: return 12;
    case ATTN_QT_Q5_K: return 13;
    case ATTN_QT_Q6_K: return 14;
    case ATTN_QT_BF16: return 30;
    }
    return -1;
}
