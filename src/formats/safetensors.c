/* safetensors reader (see include/attn_safetensors.h for the format and the checks). */
#include "attn_safetensors.h"
#include "core/internal.h"

#include <cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Integers in the header are JSON numbers (doubles in cJSON); below 2^53 they are exact. */
#define ST_MAX_INT 9007199254740992.0 /* 2^53 */
/* Upper bound on JSON values in a header (cJSON needs ~64 bytes per value). */
#define ST_MAX_JSON_VALUES ((uint64_t)1 << 22)
/* Names are cut to this many bytes in error messages. */
#define NM "%.200s"

typedef struct {
    const char *name;
    int attn_dtype; /* -1 when attn has none */
    size_t size;
} st_dtype_desc;

/* dtype names of the safetensors format with byte sizes. */
static const st_dtype_desc st_dtypes[] = {
    {"BOOL", ATTN_BOOL, 1}, {"U8", -1, 1},      {"I8", -1, 1},       {"F8_E5M2", -1, 1},
    {"F8_E4M3", -1, 1},     {"F8_E8M0", -1, 1}, {"I16", -1, 2},      {"U16", -1, 2},
    {"F16", ATTN_F16, 2},   {"BF16", ATTN_BF16, 2}, {"I32", ATTN_I32, 4}, {"U32", -1, 4},
    {"F32", ATTN_F32, 4},   {"F64", ATTN_F64, 8}, {"I64", ATTN_I64, 8}, {"U64", -1, 8},
    {"C64", -1, 8},         {"F8_E4M3FNUZ", -1, 1}, {"F8_E5M2FNUZ", -1, 1},
};
#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

typedef struct {
    const char *name;
    int dt; /* index into st_dtypes */
    int ndim;
    const int64_t *shape;
    int64_t numel;
    uint64_t begin, end; /* relative to the data section */
} st_entry;

struct attn_safetensors {
    const unsigned char *data; /* start of the data section */
    uint64_t data_size;
    void *map; /* mmap'ed file or NULL */
    size_t map_size;
    cJSON *root; /* owns every name / metadata string */
    st_entry *entries;
    int n;
    int *by_name; /* entry indices sorted by name (strcmp) */
    int64_t *dims;
    const char **meta_keys, **meta_vals;
    int *meta_sorted; /* metadata indices sorted by key */
    int n_meta;
};

/* ---------------------------------------------------------------- helpers */

static uint64_t st_read_u64le(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int st_host_is_le(void) {
    const uint32_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}

static int st_is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Upper bound on the number of values cJSON would create for header text p[0..n). */
static uint64_t st_count_json_values(const unsigned char *p, size_t n) {
    uint64_t count = 1;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            count += 2;
        } else if (c == ',') {
            count += 1;
        }
    }
    return count;
}

/* A JSON number that is an integer in [0, 2^53). */
static int st_get_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0.0) || !(d < ST_MAX_INT)) return 0;
    uint64_t u = (uint64_t)d;
    if ((double)u != d) return 0;
    *out = u;
    return 1;
}

/* qsort has no context argument in C11: a small stable merge sort of int indices. */
typedef int (*st_cmp_fn)(int a, int b, const void *ctx);

static void st_merge_sort(int *v, int *tmp, int n, st_cmp_fn cmp, const void *ctx) {
    for (int width = 1; width < n; width *= 2) {
        for (int lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n;
            int hi = lo + 2 * width < n ? lo + 2 * width : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp(v[j], v[i], ctx) < 0 ? v[j++] : v[i++];
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        memcpy(v, tmp, (size_t)n * sizeof *v);
    }
}

static int st_by_name(int a, int b, const void *ctx) {
    const st_entry *e = (const st_entry *)ctx;
    return strcmp(e[a].name, e[b].name);
}

static int st_by_begin(int a, int b, const void *ctx) {
    const st_entry *e = (const st_entry *)ctx;
    if (e[a].begin != e[b].begin) return e[a].begin < e[b].begin ? -1 : 1;
    if (e[a].end != e[b].end) return e[a].end < e[b].end ? -1 : 1;
    return 0;
}

static int st_by_key(int a, int b, const void *ctx) {
    const char *const *keys = (const char *const *)ctx;
    return strcmp(keys[a], keys[b]);
}

/* "[2, 3, 4]" into buf (cut with "..." when too long). */
static void st_format_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf + len, cap - len, "[");
    for (int i = 0; i < ndim; i++) {
        if (len + 32 >= cap) {
            snprintf(buf + len, cap - len, "...");
            len = strlen(buf);
            break;
        }
        len += (size_t)snprintf(buf + len, cap - len, i ? ", %lld" : "%lld", (long long)shape[i]);
    }
    if (len + 2 <= cap) snprintf(buf + len, cap - len, "]");
}

/* ---------------------------------------------------------------- parsing */

static int st_parse_entry(attn_safetensors *st, st_entry *e, const cJSON *item, int64_t *dims) {
    const char *name = item->string;
    e->name = name;
    if (!cJSON_IsObject(item))
        return attn_set_error(ATTN_E_FORMAT, "safetensors: tensor '" NM "': entry is not an object", name);

    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!dtype || !shape || !offs)
        return attn_set_error(ATTN_E_FORMAT, "safetensors: tensor '" NM "': missing \"%s\"", name,
                              !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!cJSON_IsString(dtype) || !dtype->valuestring)
        return attn_set_error(ATTN_E_FORMAT, "safetensors: tensor '" NM "': \"dtype\" is not a string", name);
    e->dt = -1;
    for (int i = 0; i < ST_NDTYPES; i++)
        if (strcmp(dtype->valuestring, st_dtypes[i].name) == 0) e->dt = i;
    if (e->dt < 0) {
        const char *s = dtype->valuestring;
        if (!strcmp(s, "F4") || !strcmp(s, "F6_E2M3") || !strcmp(s, "F6_E3M2"))
            return attn_set_error(ATTN_E_DTYPE, "safetensors: tensor '" NM "': sub-byte dtype %s not supported",
                                  name, s);
        return attn_set_error(ATTN_E_DTYPE, "safetensors: tensor '" NM "': unknown dtype '%.40s'", name, s);
    }

    if (!cJSON_IsArray(shape))
        return attn_set_error(ATTN_E_FORMAT, "safetensors: tensor '" NM "': \"shape\" is not an array", name);
    int ndim = 0;
    uint64_t numel = 1;
    int has_zero = 0, overflow = 0;
    for (const cJSON *d = shape->child; d; d = d->next) {
        uint64_t v;
        if (!st_get_uint(d, &v))
            return attn_set_error(ATTN_E_FORMAT,
                                  "safetensors: tensor '" NM "': shape[%d] is not an integer in [0, 2^53)",
                                  name, ndim);
        dims[ndim++] = (int64_t)v;
        /* The product of the non-zero extents must fit in int64 even when another extent
         * is 0, so that row-major strides of any accepted shape can be computed. */
        if (v == 0) has_zero = 1;
        else if (numel > (uint64_t)INT64_MAX / v) overflow = 1;
        else numel *= v;
    }
    if (overflow)
        return attn_set_error(ATTN_E_FORMAT, "safetensors: tensor '" NM "': shape product overflows", name);
    if (has_zero) numel = 0;
    e->ndim = ndim;
    e->shape = dims;
    e->numel = (int64_t)numel;

    uint64_t begin = 0, end = 0;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !st_get_uint(offs->child, &begin) ||
        !st_get_uint(offs->child->next, &end))
        return attn_set_error(ATTN_E_FORMAT,
                              "safetensors: tensor '" NM "': \"data_offsets\" is not two integers [begin, end]",
                              name);
    if (begin > end)
        return attn_set_error(ATTN_E_FORMAT,
                              "safetensors: tensor '" NM "': data_offsets begin %llu > end %llu", name,
                              (unsigned long long)begin, (unsigned long long)end);
    if (end > st->data_size)
        return attn_set_error(ATTN_E_FORMAT,
                              "safetensors: tensor '" NM "': data_offsets end %llu is beyond the data "
                              "section (%llu bytes)",
                              name, (unsigned long long)end, (unsigned long long)st->data_size);
    size_t esize = st_dtypes[e->dt].size;
    if (numel > UINT64_MAX / esize || numel * esize != end - begin)
        return attn_set_error(ATTN_E_FORMAT,
                              "safetensors: tensor '" NM "': %llu bytes of data, but shape and dtype %s "
                              "need %llu elements x %zu bytes",
                              name, (unsigned long long)(end - begin), st_dtypes[e->dt].name,
                              (unsigned long long)numel, esize);
    e->begin = begin;
    e->end = end;
    return ATTN_OK;
}

static int st_parse_metadata(attn_safetensors *st, const cJSON *meta) {
    if (cJSON_IsNull(meta)) return ATTN_OK;
    if (!cJSON_IsObject(meta))
        return attn_set_error(ATTN_E_FORMAT, "safetensors: \"__metadata__\" is not an object");
    int n = 0;
    for (const cJSON *c = meta->child; c; c = c->next) {
        if (!cJSON_IsString(c) || !c->valuestring)
            return attn_set_error(ATTN_E_FORMAT, "safetensors: \"__metadata__\" value of '" NM "' is not a string",
                                  c->string ? c->string : "");
        n++;
    }
    if (n == 0) return ATTN_OK;
    st->meta_keys = (const char **)malloc((size_t)n * sizeof *st->meta_keys);
    st->meta_vals = (const char **)malloc((size_t)n * sizeof *st->meta_vals);
    if (!st->meta_keys || !st->meta_vals)
        return attn_set_error(ATTN_E_NOMEM, "safetensors: out of memory for metadata");
    int i = 0;
    for (const cJSON *c = meta->child; c; c = c->next, i++) {
        st->meta_keys[i] = c->string ? c->string : "";
        st->meta_vals[i] = c->valuestring;
    }
    st->meta_sorted = (int *)malloc((size_t)n * sizeof *st->meta_sorted);
    int *tmp = (int *)malloc((size_t)n * sizeof *tmp);
    if (!st->meta_sorted || !tmp) {
        free(tmp);
        return attn_set_error(ATTN_E_NOMEM, "safetensors: out of memory for metadata");
    }
    for (i = 0; i < n; i++) st->meta_sorted[i] = i;
    st_merge_sort(st->meta_sorted, tmp, n, st_by_key, st->meta_keys);
    free(tmp);
    for (i = 1; i < n; i++)
        if (strcmp(st->meta_keys[st->meta_sorted[i - 1]], st->meta_keys[st->meta_sorted[i]]) == 0)
            return attn_set_error(ATTN_E_FORMAT, "safetensors: \"__metadata__\" key '" NM "' is repeated",
                                  st->meta_keys[st->meta_sorted[i]]);
    st->n_meta = n;
    return ATTN_OK;
}

/* The size checks on the 8-byte prefix, done before anything is allocated; the header
 * length on success. */
static int st_check_prefix(uint64_t *hlen_out, const unsigned char *base, size_t size) {
    if (size < 8)
        return attn_set_error(ATTN_E_FORMAT, "safetensors: file is %zu bytes, shorter than the 8-byte header length",
                              size);
    uint64_t hlen = st_read_u64le(base);
    if (hlen > (uint64_t)(size - 8))
        return attn_set_error(ATTN_E_FORMAT,
                              "safetensors: header length %llu is larger than the rest of the file (%llu bytes)",
                              (unsigned long long)hlen, (unsigned long long)(size - 8));
    if (hlen > ATTN_SAFETENSORS_MAX_HEADER)
        return attn_set_error(ATTN_E_FORMAT, "safetensors: header length %llu is over the 100 MB limit",
                              (unsigned long long)hlen);
    *hlen_out = hlen;
    return ATTN_OK;
}

/* Parse and validate the file image base[0..size) into st (st->map already set). */
static int st_parse(attn_safetensors *st, const unsigned char *base, size_t size) {
    uint64_t hlen = 0;
    ATTN_TRY(st_check_prefix(&hlen, base, size));
    const unsigned char *htext = base + 8;
    st->data = htext + hlen;
    st->data_size = (uint64_t)(size - 8) - hlen;
    if (st_count_json_values(htext, (size_t)hlen) > ST_MAX_JSON_VALUES)
        return attn_set_error(ATTN_E_FORMAT, "safetensors: header has more than %llu JSON values",
                              (unsigned long long)ST_MAX_JSON_VALUES);

    /* cJSON gets a NUL-terminated private copy so it can never read past the header. */
    char *copy = (char *)malloc((size_t)hlen + 1);
    if (!copy) return attn_set_error(ATTN_E_NOMEM, "safetensors: out of memory for a %llu-byte header",
                                     (unsigned long long)hlen);
    memcpy(copy, htext, (size_t)hlen);
    copy[hlen] = '\0';
    const char *end = NULL;
    st->root = cJSON_ParseWithOpts(copy, &end, 0);
    int rc = ATTN_OK;
    if (!st->root) {
        const char *at = end; /* cJSON sets it to the error position on failure */
        size_t pos = (at && at >= copy && at <= copy + hlen) ? (size_t)(at - copy) : 0;
        rc = attn_set_error(ATTN_E_FORMAT, "safetensors: header is not valid JSON (near byte %zu)", pos);
    } else {
        for (const char *p = end; p && p < copy + hlen; p++)
            if (!st_is_ws((unsigned char)*p)) {
                rc = attn_set_error(ATTN_E_FORMAT, "safetensors: unexpected byte 0x%02x after the JSON header "
                                    "(at byte %zu)", (unsigned char)*p, (size_t)(p - copy));
                break;
            }
    }
    free(copy);
    if (rc < 0) return rc;
    if (!cJSON_IsObject(st->root)) return attn_set_error(ATTN_E_FORMAT, "safetensors: header is not a JSON object");

    /* First pass: count tensors and dims, find the metadata. */
    size_t n = 0, total_dims = 0;
    const cJSON *meta = NULL;
    for (const cJSON *c = st->root->child; c; c = c->next) {
        if (!c->string) return attn_set_error(ATTN_E_FORMAT, "safetensors: header object has a key that is not a string");
        if (strcmp(c->string, "__metadata__") == 0) {
            if (meta) return attn_set_error(ATTN_E_FORMAT, "safetensors: \"__metadata__\" appears twice");
            meta = c;
            continue;
        }
        n++;
        const cJSON *shape = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, "shape") : NULL;
        if (cJSON_IsArray(shape)) total_dims += (size_t)cJSON_GetArraySize(shape);
    }
    if (meta) ATTN_TRY(st_parse_metadata(st, meta));

    st->entries = (st_entry *)calloc(n ? n : 1, sizeof *st->entries);
    st->by_name = (int *)malloc((n ? n : 1) * sizeof *st->by_name);
    st->dims = (int64_t *)malloc((total_dims ? total_dims : 1) * sizeof *st->dims);
    int *tmp = (int *)malloc((n ? n : 1) * sizeof *tmp);
    if (!st->entries || !st->by_name || !st->dims || !tmp) {
        free(tmp);
        return attn_set_error(ATTN_E_NOMEM, "safetensors: out of memory for %zu tensors", n);
    }

    /* Second pass: each entry. */
    size_t i = 0, d = 0;
    for (const cJSON *c = st->root->child; c; c = c->next) {
        if (c == meta) continue;
        rc = st_parse_entry(st, &st->entries[i], c, st->dims + d);
        if (rc < 0) break;
        d += (size_t)st->entries[i].ndim;
        st->by_name[i] = (int)i;
        i++;
        st->n = (int)i;
    }

    /* Repeated names (JSON allows them; cJSON keeps both). */
    if (rc == ATTN_OK && n > 1) {
        st_merge_sort(st->by_name, tmp, (int)n, st_by_name, st->entries);
        for (size_t k = 1; k < n; k++)
            if (strcmp(st->entries[st->by_name[k - 1]].name, st->entries[st->by_name[k]].name) == 0) {
                rc = attn_set_error(ATTN_E_FORMAT, "safetensors: tensor '" NM "' appears twice",
                                    st->entries[st->by_name[k]].name);
                break;
            }
    }

    /* Overlaps: sort non-empty ranges by begin; each must start at or after the furthest end so far. */
    if (rc == ATTN_OK && n > 1) {
        int *order = (int *)malloc(n * sizeof *order);
        if (!order) {
            rc = attn_set_error(ATTN_E_NOMEM, "safetensors: out of memory");
        } else {
            int m = 0;
            for (size_t k = 0; k < n; k++)
                if (st->entries[k].end > st->entries[k].begin) order[m++] = (int)k;
            st_merge_sort(order, tmp, m, st_by_begin, st->entries);
            int last = -1;
            for (int k = 0; k < m; k++) {
                const st_entry *e = &st->entries[order[k]];
                if (last >= 0 && e->begin < st->entries[last].end) {
                    rc = attn_set_error(ATTN_E_FORMAT,
                                        "safetensors: tensors '" NM "' [%llu, %llu) and '" NM "' [%llu, %llu) overlap",
                                        st->entries[last].name, (unsigned long long)st->entries[last].begin,
                                        (unsigned long long)st->entries[last].end, e->name,
                                        (unsigned long long)e->begin, (unsigned long long)e->end);
                    break;
                }
                if (last < 0 || e->end > st->entries[last].end) last = order[k];
            }
            free(order);
        }
    }
    free(tmp);
    return rc;
}

/* ---------------------------------------------------------------- open / close */

static attn_safetensors *st_new(void) {
    attn_safetensors *st = (attn_safetensors *)calloc(1, sizeof *st);
    if (!st) attn_set_error(ATTN_E_NOMEM, "safetensors: out of memory");
    return st;
}

int attn_safetensors_open_memory(attn_safetensors **out, const void *data, size_t size) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "attn_safetensors_open_memory: out is NULL");
    *out = NULL;
    if (!data && size) return attn_set_error(ATTN_E_INVALID, "attn_safetensors_open_memory: data is NULL");
    uint64_t hlen;
    ATTN_TRY(st_check_prefix(&hlen, (const unsigned char *)(data ? data : ""), data ? size : 0));
    attn_safetensors *st = st_new();
    if (!st) return ATTN_E_NOMEM;
    int rc = st_parse(st, (const unsigned char *)(data ? data : ""), data ? size : 0);
    if (rc < 0) {
        attn_safetensors_close(st);
        return rc;
    }
    *out = st;
    return ATTN_OK;
}

/* Append " (in 'path')" to the current error message (copied first: the message buffer
 * is also the destination). */
static int st_error_in(int rc, const char *path) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", attn_last_error());
    return attn_set_error(rc, "%.300s (in '" NM "')", msg, path);
}

int attn_safetensors_open(attn_safetensors **out, const char *path) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "attn_safetensors_open: out is NULL");
    *out = NULL;
    if (!path) return attn_set_error(ATTN_E_INVALID, "attn_safetensors_open: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return attn_set_error(ATTN_E_IO, "safetensors: cannot open '" NM "': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return attn_set_error(ATTN_E_IO, "safetensors: cannot stat '" NM "': %s", path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return attn_set_error(ATTN_E_IO, "safetensors: '" NM "' is not a regular file", path);
    }
    if (sb.st_size < 8) {
        close(fd);
        return attn_set_error(ATTN_E_FORMAT, "safetensors: '" NM "' is %lld bytes, shorter than the 8-byte header "
                              "length", path, (long long)sb.st_size);
    }
    size_t size = (size_t)sb.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED)
        return attn_set_error(ATTN_E_IO, "safetensors: cannot map '" NM "': %s", path, strerror(err));
    uint64_t hlen;
    int rc = st_check_prefix(&hlen, (const unsigned char *)map, size);
    if (rc < 0) {
        munmap(map, size);
        return st_error_in(rc, path);
    }
    attn_safetensors *st = st_new();
    if (!st) {
        munmap(map, size);
        return ATTN_E_NOMEM;
    }
    st->map = map;
    st->map_size = size;
    rc = st_parse(st, (const unsigned char *)map, size);
    if (rc < 0) {
        attn_safetensors_close(st);
        return st_error_in(rc, path);
    }
    *out = st;
    return ATTN_OK;
}

void attn_safetensors_close(attn_safetensors *st) {
    if (!st) return;
    if (st->map) munmap(st->map, st->map_size);
    cJSON_Delete(st->root);
    ATTN_FREE_ALL(st->entries, st->by_name, st->dims, (void *)st->meta_keys, (void *)st->meta_vals, st->meta_sorted);
    free(st);
}

/* ---------------------------------------------------------------- queries */

int attn_safetensors_count(const attn_safetensors *st) { return st ? st->n : 0; }

const char *attn_safetensors_name(const attn_safetensors *st, int index) {
    if (!st || index < 0 || index >= st->n) return NULL;
    return st->entries[index].name;
}

int attn_safetensors_find(const attn_safetensors *st, const char *name) {
    if (!st || !name) return -1;
    int lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int idx = st->by_name[mid];
        int c = strcmp(name, st->entries[idx].name);
        if (c == 0) return idx;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return -1;
}

int attn_safetensors_info_at(attn_safetensors_info *out, const attn_safetensors *st, int index) {
    if (!out || !st) return attn_set_error(ATTN_E_INVALID, "attn_safetensors_info_at: NULL argument");
    if (index < 0 || index >= st->n)
        return attn_set_error(ATTN_E_RANGE, "attn_safetensors_info_at: index %d out of range [0, %d)", index, st->n);
    const st_entry *e = &st->entries[index];
    out->name = e->name;
    out->dtype_name = st_dtypes[e->dt].name;
    out->dtype = st_dtypes[e->dt].attn_dtype;
    out->elem_size = st_dtypes[e->dt].size;
    out->ndim = e->ndim;
    out->shape = e->shape;
    out->numel = e->numel;
    out->data_offset = e->begin;
    out->nbytes = e->end - e->begin;
    return ATTN_OK;
}

int attn_safetensors_data(const void **data, uint64_t *nbytes, const attn_safetensors *st, int index) {
    if (!data || !nbytes || !st) return attn_set_error(ATTN_E_INVALID, "attn_safetensors_data: NULL argument");
    if (index < 0 || index >= st->n)
        return attn_set_error(ATTN_E_RANGE, "attn_safetensors_data: index %d out of range [0, %d)", index, st->n);
    const st_entry *e = &st->entries[index];
    *data = st->data + e->begin;
    *nbytes = e->end - e->begin;
    return ATTN_OK;
}

/* The entry called name, or NULL with the "not found" error set (status ATTN_E_INVALID). */
static const st_entry *st_lookup(const attn_safetensors *st, const char *name) {
    int idx = attn_safetensors_find(st, name);
    if (idx < 0) {
        attn_set_error(ATTN_E_INVALID, "tensor '" NM "' not found", name);
        return NULL;
    }
    return &st->entries[idx];
}

int attn_safetensors_get_f32(const attn_safetensors *st, const char *name, attn_tensor *out,
                             attn_arena *arena) {
    if (!st || !name || !out) return attn_set_error(ATTN_E_INVALID, "attn_safetensors_get_f32: NULL argument");
    const st_entry *e = st_lookup(st, name);
    if (!e) return ATTN_E_INVALID;
    const char *dtn = st_dtypes[e->dt].name;
    int adt = st_dtypes[e->dt].attn_dtype;
    if (adt != ATTN_F32 && adt != ATTN_F16 && adt != ATTN_BF16)
        return attn_set_error(ATTN_E_DTYPE, "tensor '" NM "': dtype %s not supported (float32 reading takes F32, F16, BF16)",
                              name, dtn);
    if (e->ndim > ATTN_MAX_DIMS)
        return attn_set_error(ATTN_E_UNSUPPORTED, "tensor '" NM "' has %d dims; attn supports at most %d", name,
                              e->ndim, ATTN_MAX_DIMS);
    const unsigned char *src = st->data + e->begin;
    size_t n = (size_t)e->numel;
    float *dst;
    if (adt == ATTN_F32 && ((uintptr_t)src % sizeof(float)) == 0 && st_host_is_le()) {
        dst = (float *)(uintptr_t)src; /* zero-copy view of read-only memory */
    } else {
        if (!arena)
            return attn_set_error(ATTN_E_INVALID, "tensor '" NM "': dtype %s needs a conversion but arena is NULL",
                                  name, dtn);
        dst = (float *)attn_arena_alloc(arena, n * sizeof(float));
        if (!dst) return attn_set_error(ATTN_E_NOMEM, "tensor '" NM "': cannot allocate %zu floats", name, n);
        if (adt == ATTN_F32) {
            for (size_t i = 0; i < n; i++) {
                const unsigned char *p = src + 4 * i;
                uint32_t bits = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                memcpy(&dst[i], &bits, 4);
            }
        } else {
            for (size_t i = 0; i < n; i++) {
                uint16_t h = (uint16_t)(src[2 * i] | (src[2 * i + 1] << 8));
                dst[i] = adt == ATTN_F16 ? attn__f16_to_f32(h) : attn__bf16_to_f32(h);
            }
        }
    }
    return attn_tensor_make(out, dst, ATTN_F32, e->ndim, e->shape);
}

int attn_safetensors_get_f32_shape(const attn_safetensors *st, const char *name, attn_tensor *out,
                                   attn_arena *arena, int ndim, const int64_t *shape) {
    if (!st || !name || !out) return attn_set_error(ATTN_E_INVALID, "attn_safetensors_get_f32_shape: NULL argument");
    if (ndim < 0 || ndim > ATTN_MAX_DIMS || (ndim > 0 && !shape))
        return attn_set_error(ATTN_E_INVALID, "attn_safetensors_get_f32_shape: bad expected shape (ndim %d)", ndim);
    const st_entry *e = st_lookup(st, name);
    if (!e) return ATTN_E_INVALID;
    int same = e->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = e->shape[i] == shape[i];
    if (!same) {
        char want[160], got[160];
        st_format_shape(want, sizeof want, ndim, shape);
        st_format_shape(got, sizeof got, e->ndim, e->shape);
        return attn_set_error(ATTN_E_SHAPE, NM ": expected %s, got %s", name, want, got);
    }
    return attn_safetensors_get_f32(st, name, out, arena);
}

const char *attn_safetensors_metadata(const attn_safetensors *st, const char *key) {
    if (!st || !key) return NULL;
    int lo = 0, hi = st->n_meta - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int idx = st->meta_sorted[mid];
        int c = strcmp(key, st->meta_keys[idx]);
        if (c == 0) return st->meta_vals[idx];
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

int attn_safetensors_metadata_count(const attn_safetensors *st) { return st ? st->n_meta : 0; }

int attn_safetensors_metadata_at(const char **key, const char **value, const attn_safetensors *st, int index) {
    if (!st) return attn_set_error(ATTN_E_INVALID, "attn_safetensors_metadata_at: st is NULL");
    if (index < 0 || index >= st->n_meta)
        return attn_set_error(ATTN_E_RANGE, "attn_safetensors_metadata_at: index %d out of range [0, %d)", index,
                              st->n_meta);
    if (key) *key = st->meta_keys[index];
    if (value) *value = st->meta_vals[index];
    return ATTN_OK;
}
