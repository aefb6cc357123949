/* CTranslate2 model.bin reader (see include/attn_ct2.h for the layout and the checks). */
#include "attn_ct2.h"
#include "core/internal.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct attn_ct2_file {
    void *map;
    size_t map_size;
    const unsigned char *data;
    size_t size;
    uint32_t version, revision;
    char *spec;
    attn_ct2_var *vars;
    int64_t n_vars;
    char **alias_names, **alias_targets;
    int64_t *alias_index; /* variable index of each alias target */
    int64_t n_aliases;
    char *names; /* one block for every variable name */
};

typedef struct {
    const unsigned char *p;
    size_t size, off;
} attn__rd;

static int attn__need(attn__rd *r, size_t n, const char *what) {
    if (r->size - r->off < n)
        return attn_set_error(ATTN_E_FORMAT, "model.bin truncated: %s needs %zu bytes at offset %zu, file has %zu",
                              what, n, r->off, r->size);
    return ATTN_OK;
}

static int attn__u8(attn__rd *r, uint32_t *v, const char *what) {
    ATTN_TRY(attn__need(r, 1, what));
    *v = r->p[r->off++];
    return ATTN_OK;
}

static int attn__u16(attn__rd *r, uint32_t *v, const char *what) {
    ATTN_TRY(attn__need(r, 2, what));
    *v = (uint32_t)r->p[r->off] | (uint32_t)r->p[r->off + 1] << 8;
    r->off += 2;
    return ATTN_OK;
}

static int attn__u32(attn__rd *r, uint32_t *v, const char *what) {
    ATTN_TRY(attn__need(r, 4, what));
    const unsigned char *b = r->p + r->off;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    r->off += 4;
    return ATTN_OK;
}

/* A string: u16 length including the NUL, bytes, NUL. *s points into the data (NUL-terminated). */
static int attn__str(attn__rd *r, const char **s, size_t *len, const char *what) {
    uint32_t n;
    size_t at = r->off;
    ATTN_TRY(attn__u16(r, &n, what));
    if (n == 0) return attn_set_error(ATTN_E_FORMAT, "model.bin: %s at offset %zu has length 0 (the NUL is counted)", what, at);
    ATTN_TRY(attn__need(r, n, what));
    const char *b = (const char *)r->p + r->off;
    if (b[n - 1] != 0) return attn_set_error(ATTN_E_FORMAT, "model.bin: %s at offset %zu is not NUL-terminated", what, at);
    if (memchr(b, 0, n - 1)) return attn_set_error(ATTN_E_FORMAT, "model.bin: %s at offset %zu contains a NUL byte", what, at);
    *s = b;
    *len = n - 1;
    r->off += n;
    return ATTN_OK;
}

static size_t attn__ct2_item_size(int dt) {
    switch (dt) {
    case ATTN_CT2_F32: case ATTN_CT2_I32: return 4;
    case ATTN_CT2_I16: case ATTN_CT2_F16: case ATTN_CT2_BF16: return 2;
    case ATTN_CT2_I8: return 1;
    default: return 0;
    }
}

const char *attn_ct2_dtype_name(int dt) {
    switch (dt) {
    case ATTN_CT2_F32: return "float32";
    case ATTN_CT2_I8: return "int8";
    case ATTN_CT2_I16: return "int16";
    case ATTN_CT2_I32: return "int32";
    case ATTN_CT2_F16: return "float16";
    case ATTN_CT2_BF16: return "bfloat16";
    default: return "unknown";
    }
}

static int attn__cmp_name(const void *a, const void *b) {
    const attn_ct2_var *x = *(const attn_ct2_var *const *)a, *y = *(const attn_ct2_var *const *)b;
    return strcmp(x->name, y->name);
}

static int attn__parse(attn_ct2_file *f) {
    attn__rd r = {f->data, f->size, 0};
    const char *s;
    size_t len;
    uint32_t v;
    ATTN_TRY(attn__u32(&r, &f->version, "the binary version"));
    if (f->version < 2 || f->version > 6)
        return attn_set_error(ATTN_E_FORMAT, "model.bin: binary version %u is not supported (2 to 6 are)", f->version);
    ATTN_TRY(attn__str(&r, &s, &len, "the spec name"));
    f->spec = strndup(s, len);
    if (!f->spec) return attn_set_error(ATTN_E_NOMEM, "model.bin: out of memory");
    ATTN_TRY(attn__u32(&r, &f->revision, "the spec revision"));
    ATTN_TRY(attn__u32(&r, &v, "the variable count"));
    /* every variable takes at least 2 (name) + 1 + 1 + 4 + 1 bytes: reject absurd counts early */
    if ((uint64_t)v * 9 > r.size - r.off)
        return attn_set_error(ATTN_E_FORMAT, "model.bin: %u variables cannot fit in the %zu bytes left", v, r.size - r.off);
    f->n_vars = v;
    f->vars = (attn_ct2_var *)calloc(v ? v : 1, sizeof *f->vars);
    size_t names_cap = r.size - r.off + 1;
    f->names = (char *)malloc(names_cap);
    if (!f->vars || !f->names) return attn_set_error(ATTN_E_NOMEM, "model.bin: out of memory");
    size_t names_used = 0;
    for (int64_t i = 0; i < f->n_vars; i++) {
        attn_ct2_var *x = &f->vars[i];
        size_t at = r.off;
        ATTN_TRY(attn__str(&r, &s, &len, "a variable name"));
        if (len == 0) return attn_set_error(ATTN_E_FORMAT, "model.bin: variable %lld at offset %zu has an empty name", (long long)i, at);
        memcpy(f->names + names_used, s, len + 1);
        x->name = f->names + names_used;
        names_used += len + 1;
        uint32_t rank;
        ATTN_TRY(attn__u8(&r, &rank, "a variable rank"));
        if (rank > ATTN_MAX_DIMS)
            return attn_set_error(ATTN_E_FORMAT, "model.bin: variable '%s' has rank %u (at most %d supported)", x->name, rank,
                                  ATTN_MAX_DIMS);
        x->rank = (int)rank;
        uint64_t numel = 1;
        for (uint32_t d = 0; d < rank; d++) {
            ATTN_TRY(attn__u32(&r, &v, "a variable dimension"));
            x->shape[d] = v;
            if (v != 0 && numel > ((uint64_t)1 << 40) / v)
                return attn_set_error(ATTN_E_FORMAT, "model.bin: variable '%s' is too large", x->name);
            numel *= v;
        }
        x->numel = (int64_t)numel;
        uint32_t a, b;
        ATTN_TRY(attn__u8(&r, &a, "a variable dtype"));
        ATTN_TRY(attn__u32(&r, &b, "a variable size"));
        uint64_t nbytes;
        if (f->version >= 4) {
            if (attn__ct2_item_size((int)a) == 0)
                return attn_set_error(ATTN_E_FORMAT, "model.bin: variable '%s' has unknown dtype %u", x->name, a);
            x->dtype = (attn_ct2_dtype)a;
            nbytes = b;
            if (nbytes != numel * attn__ct2_item_size((int)a))
                return attn_set_error(ATTN_E_FORMAT, "model.bin: variable '%s' (%s, %llu elements) stores %llu bytes, expected %llu",
                                      x->name, attn_ct2_dtype_name((int)a), (unsigned long long)numel,
                                      (unsigned long long)nbytes, (unsigned long long)(numel * attn__ct2_item_size((int)a)));
        } else {
            if (a == 4) x->dtype = ATTN_CT2_F32;
            else if (a == 2) x->dtype = ATTN_CT2_I16;
            else if (a == 1) x->dtype = ATTN_CT2_I8;
            else return attn_set_error(ATTN_E_FORMAT, "model.bin: variable '%s' has item size %u (1, 2 or 4 expected)", x->name, a);
            if (b != numel)
                return attn_set_error(ATTN_E_FORMAT, "model.bin: variable '%s' stores %u elements, its shape has %llu", x->name, b,
                                      (unsigned long long)numel);
            nbytes = (uint64_t)b * a;
        }
        if (nbytes > r.size - r.off)
            return attn_set_error(ATTN_E_FORMAT, "model.bin truncated: variable '%s' needs %llu bytes at offset %zu, %zu left",
                                  x->name, (unsigned long long)nbytes, r.off, r.size - r.off);
        x->nbytes = (size_t)nbytes;
        x->data = r.p + r.off;
        r.off += x->nbytes;
    }
    /* duplicate names */
    if (f->n_vars > 1) {
        const attn_ct2_var **idx = (const attn_ct2_var **)malloc(sizeof *idx * (size_t)f->n_vars);
        if (!idx) return attn_set_error(ATTN_E_NOMEM, "model.bin: out of memory");
        for (int64_t i = 0; i < f->n_vars; i++) idx[i] = &f->vars[i];
        qsort(idx, (size_t)f->n_vars, sizeof *idx, attn__cmp_name);
        for (int64_t i = 1; i < f->n_vars; i++)
            if (strcmp(idx[i - 1]->name, idx[i]->name) == 0) {
                int rc = attn_set_error(ATTN_E_FORMAT, "model.bin: variable '%s' is stored twice", idx[i]->name);
                free(idx);
                return rc;
            }
        free(idx);
    }
    if (f->version >= 3) {
        ATTN_TRY(attn__u32(&r, &v, "the alias count"));
        if ((uint64_t)v * 4 > r.size - r.off)
            return attn_set_error(ATTN_E_FORMAT, "model.bin: %u aliases cannot fit in the %zu bytes left", v, r.size - r.off);
        f->n_aliases = v;
        f->alias_names = (char **)calloc(v ? v : 1, sizeof(char *));
        f->alias_targets = (char **)calloc(v ? v : 1, sizeof(char *));
        f->alias_index = (int64_t *)calloc(v ? v : 1, sizeof(int64_t));
        if (!f->alias_names || !f->alias_targets || !f->alias_index) return attn_set_error(ATTN_E_NOMEM, "model.bin: out of memory");
        for (int64_t i = 0; i < f->n_aliases; i++) {
            const char *t;
            size_t tl;
            ATTN_TRY(attn__str(&r, &s, &len, "an alias name"));
            ATTN_TRY(attn__str(&r, &t, &tl, "an alias target"));
            f->alias_names[i] = strndup(s, len);
            f->alias_targets[i] = strndup(t, tl);
            if (!f->alias_names[i] || !f->alias_targets[i]) return attn_set_error(ATTN_E_NOMEM, "model.bin: out of memory");
            f->alias_index[i] = -1;
            for (int64_t j = 0; j < f->n_vars; j++)
                if (strcmp(f->vars[j].name, f->alias_targets[i]) == 0) {
                    f->alias_index[i] = j;
                    break;
                }
            if (f->alias_index[i] < 0)
                return attn_set_error(ATTN_E_FORMAT, "model.bin: alias '%s' points to '%s', which is not a stored variable",
                                      f->alias_names[i], f->alias_targets[i]);
            for (int64_t j = 0; j < f->n_vars; j++)
                if (strcmp(f->vars[j].name, f->alias_names[i]) == 0)
                    return attn_set_error(ATTN_E_FORMAT, "model.bin: alias '%s' has the name of a stored variable", f->alias_names[i]);
        }
    }
    if (r.off != r.size)
        return attn_set_error(ATTN_E_FORMAT, "model.bin: %zu unexpected bytes after the last %s (offset %zu)", r.size - r.off,
                              f->version >= 3 ? "alias" : "variable", r.off);
    return ATTN_OK;
}

int attn_ct2_parse(attn_ct2_file **out, const void *data, size_t size) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "ct2_parse: out is NULL");
    *out = NULL;
    if (!data && size) return attn_set_error(ATTN_E_INVALID, "ct2_parse: data is NULL");
    attn_ct2_file *f = (attn_ct2_file *)calloc(1, sizeof *f);
    if (!f) return attn_set_error(ATTN_E_NOMEM, "ct2_parse: out of memory");
    f->data = (const unsigned char *)data;
    f->size = size;
    int rc = attn__parse(f);
    if (rc < 0) {
        attn_ct2_close(f);
        return rc;
    }
    *out = f;
    return ATTN_OK;
}

int attn_ct2_open(attn_ct2_file **out, const char *path) {
    if (!out || !path) return attn_set_error(ATTN_E_INVALID, "ct2_open: NULL argument");
    *out = NULL;
    void *map;
    size_t size;
    ATTN_TRY(attn__map_readonly(path, &map, &size));
    attn_ct2_file *f = (attn_ct2_file *)calloc(1, sizeof *f);
    if (!f) {
        if (map) munmap(map, size);
        return attn_set_error(ATTN_E_NOMEM, "ct2_open: out of memory");
    }
    f->map = map;
    f->map_size = size;
    f->data = (const unsigned char *)map;
    f->size = size;
    int rc = attn__parse(f);
    if (rc < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        attn_ct2_close(f);
        return attn_set_error(rc, "%s: %s", path, msg);
    }
    *out = f;
    return ATTN_OK;
}

void attn_ct2_close(attn_ct2_file *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->map_size);
    for (int64_t i = 0; i < f->n_aliases; i++) {
        if (f->alias_names) free(f->alias_names[i]);
        if (f->alias_targets) free(f->alias_targets[i]);
    }
    ATTN_FREE_ALL(f->alias_names, f->alias_targets, f->alias_index, f->vars, f->names, f->spec);
    free(f);
}

uint32_t attn_ct2_binary_version(const attn_ct2_file *f) { return f ? f->version : 0; }
const char *attn_ct2_spec_name(const attn_ct2_file *f) { return f && f->spec ? f->spec : ""; }
uint32_t attn_ct2_spec_revision(const attn_ct2_file *f) { return f ? f->revision : 0; }
int64_t attn_ct2_num_variables(const attn_ct2_file *f) { return f ? f->n_vars : 0; }
int64_t attn_ct2_num_aliases(const attn_ct2_file *f) { return f ? f->n_aliases : 0; }

const attn_ct2_var *attn_ct2_variable(const attn_ct2_file *f, int64_t i) {
    if (!f || i < 0 || i >= f->n_vars) return NULL;
    return &f->vars[i];
}

const char *attn_ct2_alias(const attn_ct2_file *f, int64_t i, const char **target) {
    if (!f || i < 0 || i >= f->n_aliases) return NULL;
    if (target) *target = f->alias_targets[i];
    return f->alias_names[i];
}

const attn_ct2_var *attn_ct2_find(const attn_ct2_file *f, const char *name) {
    if (!f || !name) return NULL;
    for (int64_t i = 0; i < f->n_vars; i++)
        if (strcmp(f->vars[i].name, name) == 0) return &f->vars[i];
    for (int64_t i = 0; i < f->n_aliases; i++)
        if (strcmp(f->alias_names[i], name) == 0) return &f->vars[f->alias_index[i]];
    return NULL;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* float16 -> float32 with the F16C instruction (exact, as the portable path) */
__attribute__((target("f16c,avx"))) static void attn__f16_rows_f16c(float *dst, const unsigned char *p, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h;
        memcpy(&h, p + 2 * i, 16);
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) {
        uint16_t x;
        memcpy(&x, p + 2 * i, 2);
        dst[i] = attn__f16_to_f32(x);
    }
}
#endif

int attn_ct2_read_f32(float *dst, const attn_ct2_var *v) {
    if (!dst || !v) return attn_set_error(ATTN_E_INVALID, "ct2_read_f32: NULL argument");
    const unsigned char *p = (const unsigned char *)v->data;
    if (v->dtype == ATTN_CT2_F32) {
        memcpy(dst, p, sizeof(float) * (size_t)v->numel);
        return ATTN_OK;
    }
#if defined(__x86_64__) && defined(__GNUC__)
    if (v->dtype == ATTN_CT2_F16 && attn__convert_simd_supported() && !getenv("ATTN_NO_F16C")) {
        attn__f16_rows_f16c(dst, p, v->numel);
        return ATTN_OK;
    }
#endif
    for (int64_t i = 0; i < v->numel; i++) {
        switch (v->dtype) {
        case ATTN_CT2_F32: memcpy(&dst[i], p + 4 * i, 4); break;
        case ATTN_CT2_I32: {
            int32_t x;
            memcpy(&x, p + 4 * i, 4);
            dst[i] = (float)x;
            break;
        }
        case ATTN_CT2_I16: {
            int16_t x;
            memcpy(&x, p + 2 * i, 2);
            dst[i] = (float)x;
            break;
        }
        case ATTN_CT2_F16: {
            uint16_t x;
            memcpy(&x, p + 2 * i, 2);
            dst[i] = attn__f16_to_f32(x);
            break;
        }
        case ATTN_CT2_BF16: {
            uint16_t x;
            memcpy(&x, p + 2 * i, 2);
            dst[i] = attn__bf16_to_f32(x);
            break;
        }
        case ATTN_CT2_I8: dst[i] = (float)(int8_t)p[i]; break;
        default: return attn_set_error(ATTN_E_DTYPE, "ct2_read_f32: variable '%s' has unknown dtype", v->name);
        }
    }
    return ATTN_OK;
}
