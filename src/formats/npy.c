/* NumPy .npy reader and writer (format versions 1.0, 2.0 and 3.0).
 *
 * File layout (NumPy format specification, numpy/lib/format.py):
 *   6 bytes  magic "\x93NUMPY"
 *   1 byte   major version (1, 2 or 3), 1 byte minor version (0)
 *   2 bytes  (v1) or 4 bytes (v2, v3) little-endian header length HLEN
 *   HLEN     bytes of header: a Python dict literal with the keys 'descr',
 *            'fortran_order' and 'shape', padded with spaces and ended by '\n'
 *            (latin-1 in v1/v2, UTF-8 in v3)
 *   data     the array bytes, C order when fortran_order is False
 */
#include "attn_npy.h"
#include "attn_io.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* Headers longer than this are refused as hostile. NumPy itself refuses more than
 * 10000 bytes unless told otherwise; a legal header with 8 dims needs ~200. */
#define NPY_MAX_HEADER_LEN (1u << 20)

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

static int host_is_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void swap_bytes(unsigned char *p, size_t elsize, size_t n) {
    for (size_t i = 0; i < n; i++, p += elsize)
        for (size_t a = 0, b = elsize - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* ------------------------------------------------------------------ header parser */

typedef struct {
    const char *p, *end;
    const char *path;
} hparser;

static void hp_skip_ws(hparser *h) {
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
        h->p++;
}

static int hp_fail(const hparser *h, const char *what) {
    return attn_set_error(ATTN_E_FORMAT, "%s: malformed .npy header: %s", h->path, what);
}

/* A quoted Python string without escapes, copied (truncated) into buf. */
static int hp_string(hparser *h, char *buf, size_t bufsize) {
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return hp_fail(h, "expected a quoted string");
    char q = *h->p++;
    size_t n = 0;
    while (h->p < h->end && *h->p != q) {
        if (*h->p == '\\') return hp_fail(h, "escape sequences in strings are not supported");
        if (*h->p == '\n') return hp_fail(h, "unterminated string");
        if (n + 1 < bufsize) buf[n++] = *h->p;
        else return hp_fail(h, "string too long");
        h->p++;
    }
    if (h->p >= h->end) return hp_fail(h, "unterminated string");
    h->p++;
    buf[n] = '\0';
    return ATTN_OK;
}

static int hp_word(hparser *h, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(h->end - h->p) < n || memcmp(h->p, w, n) != 0) return 0;
    /* the word must not continue as an identifier ("Falsey") */
    if ((size_t)(h->end - h->p) > n) {
        char c = h->p[n];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
            return 0;
    }
    h->p += n;
    return 1;
}

/* A non-negative decimal integer (optionally with the Python 2 'L' suffix). */
static int hp_extent(hparser *h, int64_t *out) {
    if (h->p >= h->end || *h->p < '0' || *h->p > '9') {
        if (h->p < h->end && *h->p == '-') return hp_fail(h, "negative extent in 'shape'");
        return hp_fail(h, "expected an integer in 'shape'");
    }
    int64_t v = 0;
    while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
        int d = *h->p - '0';
        if (v > (INT64_MAX - d) / 10) return hp_fail(h, "extent in 'shape' overflows int64");
        v = v * 10 + d;
        h->p++;
    }
    if (h->p < h->end && (*h->p == 'L' || *h->p == 'l')) h->p++;
    *out = v;
    return ATTN_OK;
}

/* '(' [int (',' int)* [',']] ')'; a bare "(5)" is accepted as 1-d too. */
static int hp_shape(hparser *h, int *ndim, int64_t *shape) {
    if (h->p >= h->end || *h->p != '(') return hp_fail(h, "'shape' is not a tuple");
    h->p++;
    int n = 0;
    hp_skip_ws(h);
    while (h->p < h->end && *h->p != ')') {
        int64_t v = 0;
        int rc = hp_extent(h, &v);
        if (rc < 0) return rc;
        if (n >= ATTN_MAX_DIMS)
            return attn_set_error(ATTN_E_FORMAT, "%s: .npy array has more than %d dims", h->path,
                                  ATTN_MAX_DIMS);
        shape[n++] = v;
        hp_skip_ws(h);
        if (h->p < h->end && *h->p == ',') {
            h->p++;
            hp_skip_ws(h);
        } else if (h->p < h->end && *h->p != ')') {
            return hp_fail(h, "expected ',' or ')' in 'shape'");
        }
    }
    if (h->p >= h->end) return hp_fail(h, "unterminated 'shape' tuple");
    h->p++;
    *ndim = n;
    return ATTN_OK;
}

typedef struct {
    attn_dtype dtype;
    int swap; /* data must be byte-swapped on this host */
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
} npy_header;

static int parse_descr(const char *path, const char *d, npy_header *hd) {
    static const struct {
        char kind;
        int size;
        attn_dtype dt;
    } table[] = {{'f', 4, ATTN_F32}, {'f', 8, ATTN_F64}, {'f', 2, ATTN_F16},
                 {'i', 4, ATTN_I32}, {'i', 8, ATTN_I64}, {'b', 1, ATTN_BOOL}};
    char order = d[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return attn_set_error(ATTN_E_DTYPE, "%s: unsupported .npy dtype '%s'", path, d);
    char kind = d[1];
    if (kind == '\0' || d[2] < '1' || d[2] > '9' || d[3] != '\0')
        return attn_set_error(ATTN_E_DTYPE, "%s: unsupported .npy dtype '%s'", path, d);
    int size = d[2] - '0';
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].kind != kind || table[i].size != size) continue;
        if (size > 1 && order == '>')
            return attn_set_error(ATTN_E_DTYPE,
                                  "%s: big-endian .npy dtype '%s' is not supported (save it as '<%c%d')",
                                  path, d, kind, size);
        if (size > 1 && order == '|')
            return attn_set_error(ATTN_E_DTYPE, "%s: .npy dtype '%s' lacks a byte order", path, d);
        hd->dtype = table[i].dt;
        /* '<' data is little-endian; '=' means the writer's native order, which we can only
         * take to be ours. */
        hd->swap = (size > 1 && order == '<' && !host_is_little_endian());
        return ATTN_OK;
    }
    return attn_set_error(ATTN_E_DTYPE,
                          "%s: unsupported .npy dtype '%s' (supported: <f4 <f8 <f2 <i4 <i8 |b1)",
                          path, d);
}

static int parse_header(const char *path, const char *text, size_t len, npy_header *hd) {
    hparser h = {text, text + len, path};
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    char descr[32] = {0};
    memset(hd, 0, sizeof *hd);

    hp_skip_ws(&h);
    if (h.p >= h.end || *h.p != '{') return hp_fail(&h, "does not start with '{'");
    h.p++;
    for (;;) {
        hp_skip_ws(&h);
        if (h.p >= h.end) return hp_fail(&h, "unterminated dict");
        if (*h.p == '}') {
            h.p++;
            break;
        }
        char key[32];
        int rc = hp_string(&h, key, sizeof key);
        if (rc < 0) return rc;
        hp_skip_ws(&h);
        if (h.p >= h.end || *h.p != ':') return hp_fail(&h, "expected ':' after a key");
        h.p++;
        hp_skip_ws(&h);
        if (strcmp(key, "descr") == 0) {
            if (have_descr++) return hp_fail(&h, "duplicate key 'descr'");
            if (h.p < h.end && (*h.p == '[' || *h.p == '{'))
                return attn_set_error(ATTN_E_DTYPE, "%s: structured .npy dtypes are not supported",
                                      path);
            rc = hp_string(&h, descr, sizeof descr);
            if (rc < 0) return rc;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (have_fortran++) return hp_fail(&h, "duplicate key 'fortran_order'");
            if (hp_word(&h, "True"))
                return attn_set_error(ATTN_E_FORMAT,
                                      "%s: .npy array is in Fortran order; only C order is supported",
                                      path);
            if (!hp_word(&h, "False")) return hp_fail(&h, "'fortran_order' is neither True nor False");
        } else if (strcmp(key, "shape") == 0) {
            if (have_shape++) return hp_fail(&h, "duplicate key 'shape'");
            rc = hp_shape(&h, &hd->ndim, hd->shape);
            if (rc < 0) return rc;
        } else {
            return attn_set_error(ATTN_E_FORMAT, "%s: malformed .npy header: unexpected key '%s'",
                                  path, key);
        }
        hp_skip_ws(&h);
        if (h.p < h.end && *h.p == ',') {
            h.p++;
        } else if (h.p < h.end && *h.p != '}') {
            return hp_fail(&h, "expected ',' or '}' after a value");
        }
    }
    /* Only padding may follow the dict (NumPy pads with spaces and ends with '\n'; some
     * writers pad with NULs). */
    for (; h.p < h.end; h.p++)
        if (*h.p != ' ' && *h.p != '\n' && *h.p != '\r' && *h.p != '\t' && *h.p != '\0')
            return hp_fail(&h, "unexpected text after the dict");
    if (!have_descr) return hp_fail(&h, "missing key 'descr'");
    if (!have_fortran) return hp_fail(&h, "missing key 'fortran_order'");
    if (!have_shape) return hp_fail(&h, "missing key 'shape'");
    return parse_descr(path, descr, hd);
}

/* ------------------------------------------------------------------ load */

static int read_exact(FILE *f, void *buf, size_t n) { return fread(buf, 1, n, f) == n; }

/* Read and check the preamble and header of the .npy file open as f: *hdp, the data's offset
 * *off, its size *nbytes (numel elements), and the file's size (-1 when not a regular file). */
static int npy_read_header(FILE *f, const char *path, npy_header *hdp, int64_t *off, size_t *nbytes, size_t *numel_out, int64_t *size) {
    int rc = ATTN_OK;
    char *header = NULL;

    /* File size, when it is a regular file, lets us refuse lengths that cannot fit
     * before allocating anything. */
    int64_t fsize = -1;
    struct stat st;
    if (fstat(fileno(f), &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            rc = attn_set_error(ATTN_E_IO, "%s: is a directory", path);
            goto done;
        }
        if (S_ISREG(st.st_mode)) fsize = (int64_t)st.st_size;
    }

    unsigned char pre[12];
    size_t got = fread(pre, 1, 8, f);
    if (ferror(f)) {
        rc = attn_set_error(ATTN_E_IO, "%s: read error: %s", path, strerror(errno));
        goto done;
    }
    if (got < 6 || memcmp(pre, npy_magic, 6) != 0) {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: not a .npy file (bad magic)", path);
        goto done;
    }
    if (got < 8) {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: truncated .npy preamble", path);
        goto done;
    }
    int major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0) {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: unsupported .npy format version %d.%d", path, major,
                            minor);
        goto done;
    }
    size_t lenbytes = major == 1 ? 2 : 4;
    if (!read_exact(f, pre + 8, lenbytes)) {
        rc = ferror(f) ? attn_set_error(ATTN_E_IO, "%s: read error: %s", path, strerror(errno))
                       : attn_set_error(ATTN_E_FORMAT, "%s: truncated .npy preamble", path);
        goto done;
    }
    uint32_t hlen = (uint32_t)pre[8] | ((uint32_t)pre[9] << 8);
    if (lenbytes == 4) hlen |= ((uint32_t)pre[10] << 16) | ((uint32_t)pre[11] << 24);
    int64_t data_off = 8 + (int64_t)lenbytes + (int64_t)hlen;
    if (hlen > NPY_MAX_HEADER_LEN) {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: .npy header length %u exceeds the %u-byte limit",
                            path, (unsigned)hlen, (unsigned)NPY_MAX_HEADER_LEN);
        goto done;
    }
    if (fsize >= 0 && data_off > fsize) {
        rc = attn_set_error(ATTN_E_FORMAT,
                            "%s: truncated .npy header (header says %u bytes, file has %lld)", path,
                            (unsigned)hlen, (long long)fsize);
        goto done;
    }
    header = malloc((size_t)hlen + 1);
    if (!header) {
        rc = attn_set_error(ATTN_E_NOMEM, "%s: out of memory reading the .npy header", path);
        goto done;
    }
    if (!read_exact(f, header, hlen)) {
        rc = ferror(f) ? attn_set_error(ATTN_E_IO, "%s: read error: %s", path, strerror(errno))
                       : attn_set_error(ATTN_E_FORMAT, "%s: truncated .npy header", path);
        goto done;
    }
    header[hlen] = '\0';

    rc = parse_header(path, header, hlen, hdp);
    if (rc < 0) goto done;
    const npy_header hd = *hdp;

    size_t elsize = attn_dtype_size(hd.dtype);
    uint64_t numel = 1;
    int overflow = 0, empty = 0;
    for (int i = 0; i < hd.ndim; i++) {
        uint64_t e = (uint64_t)hd.shape[i];
        if (e == 0) empty = 1;
        else if (numel > UINT64_MAX / e) overflow = 1;
        else numel *= e;
    }
    if (empty) numel = 0;
    else if (overflow || numel > (uint64_t)INT64_MAX / elsize || numel * elsize > (uint64_t)SIZE_MAX) {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: .npy shape is too large (byte count overflows)", path);
        goto done;
    }
    *nbytes = (size_t)(numel * elsize);
    *numel_out = (size_t)numel;
    *off = data_off;
    *size = fsize;
    if (fsize >= 0 && (uint64_t)(fsize - data_off) < (uint64_t)*nbytes) {
        rc = attn_set_error(ATTN_E_FORMAT,
                            "%s: .npy data is truncated (shape needs %llu bytes, file has %lld)", path,
                            (unsigned long long)*nbytes, (long long)(fsize - data_off));
        goto done;
    }
done:
    free(header);
    return rc;
}

int attn_npy_load(attn_tensor *out, const char *path) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "attn_npy_load: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return attn_set_error(ATTN_E_INVALID, "attn_npy_load: path is NULL");

    FILE *f = fopen(path, "rb");
    if (!f) return attn_set_error(ATTN_E_IO, "%s: cannot open: %s", path, strerror(errno));
    void *data = NULL;
    npy_header hd;
    int64_t data_off, fsize;
    size_t nbytes, numel;
    int rc = npy_read_header(f, path, &hd, &data_off, &nbytes, &numel, &fsize);
    if (rc < 0) goto done;
    const size_t elsize = attn_dtype_size(hd.dtype);
    data = malloc(nbytes ? nbytes : 1);
    if (!data) {
        rc = attn_set_error(ATTN_E_NOMEM, "%s: out of memory (%llu bytes)", path,
                            (unsigned long long)nbytes);
        goto done;
    }
    if (nbytes && !read_exact(f, data, nbytes)) {
        if (ferror(f))
            rc = attn_set_error(ATTN_E_IO, "%s: read error: %s", path, strerror(errno));
        else
            rc = attn_set_error(ATTN_E_FORMAT, "%s: .npy data is truncated", path);
        goto done;
    }
    if (hd.swap) swap_bytes(data, elsize, (size_t)numel);
    rc = attn_tensor_make(out, data, hd.dtype, hd.ndim, hd.shape);
    if (rc == ATTN_OK) data = NULL; /* owned by out now */

done:
    free(data);
    fclose(f);
    if (rc < 0) memset(out, 0, sizeof *out);
    return rc;
}

void attn_npy_free(attn_tensor *t) {
    if (!t) return;
    free(t->data);
    memset(t, 0, sizeof *t);
}

int attn_npy_map(attn_npy_mapped *m, const char *path) {
    if (!m) return attn_set_error(ATTN_E_INVALID, "attn_npy_map: m is NULL");
    memset(m, 0, sizeof *m);
    if (!path) return attn_set_error(ATTN_E_INVALID, "attn_npy_map: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return attn_set_error(ATTN_E_IO, "%s: cannot open: %s", path, strerror(errno));
    npy_header hd;
    int64_t off, fsize;
    size_t nbytes, numel;
    int rc = npy_read_header(f, path, &hd, &off, &nbytes, &numel, &fsize);
    const size_t elsize = rc == ATTN_OK ? attn_dtype_size(hd.dtype) : 1;
    if (rc == ATTN_OK && fsize >= 0 && nbytes > 0 && !hd.swap && off % (int64_t)elsize == 0 && (uint64_t)off + nbytes <= (uint64_t)SIZE_MAX) {
        /* the page cache's copy, read-only: nothing is read or copied up front beyond the
         * header; MAP_POPULATE maps every page now rather than on a kernel thread's first touch */
        const size_t len = (size_t)off + nbytes;
        void *base = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fileno(f), 0);
        if (base != MAP_FAILED) {
            fclose(f);
            rc = attn_tensor_make(&m->t, (char *)base + off, hd.dtype, hd.ndim, hd.shape);
            if (rc < 0) {
                munmap(base, len);
                memset(m, 0, sizeof *m);
                return rc;
            }
            m->map = base;
            m->map_len = len;
            return ATTN_OK;
        }
    }
    fclose(f);
    if (rc < 0) return rc;
    /* not mappable (a pipe, byte-swapped or unaligned data, no elements): read it */
    return attn_npy_load(&m->t, path);
}

void attn_npy_unmap(attn_npy_mapped *m) {
    if (!m) return;
    if (m->map) munmap(m->map, m->map_len);
    else free(m->t.data);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------ save */

static const char *descr_of(attn_dtype dt) {
    switch (dt) {
    case ATTN_F32: return "<f4";
    case ATTN_F64: return "<f8";
    case ATTN_F16: return "<f2";
    case ATTN_I32: return "<i4";
    case ATTN_I64: return "<i8";
    case ATTN_BOOL: return "|b1";
    default: return NULL;
    }
}

int attn_npy_save(const char *path, const attn_tensor *t) {
    if (!path || !t) return attn_set_error(ATTN_E_INVALID, "attn_npy_save: NULL argument");
    const char *descr = descr_of(t->dtype);
    if (!descr)
        return attn_set_error(ATTN_E_DTYPE, "%s: cannot save dtype %s as .npy", path,
                              attn_dtype_name(t->dtype));
    if (t->ndim < 0 || t->ndim > ATTN_MAX_DIMS)
        return attn_set_error(ATTN_E_INVALID, "%s: bad ndim %d", path, t->ndim);
    int64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return attn_set_error(ATTN_E_INVALID, "%s: negative extent %lld", path,
                                  (long long)t->shape[i]);
        numel *= t->shape[i];
    }
    if (numel > 0 && !t->data) return attn_set_error(ATTN_E_INVALID, "%s: tensor data is NULL", path);

    /* Header text, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } */
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->ndim; i++)
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%s), }", t->ndim == 1 ? "," : "");
    /* pad with spaces so that magic + len + header (ending in '\n') is a multiple of 64 */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    memset(hdr + n, ' ', pad);
    hdr[n + pad] = '\n';
    size_t hlen = (size_t)n + pad + 1;

    attn_out *out;
    if (attn_out_open(&out, path, ATTN_OUT_BINARY) < 0) return ATTN_E_IO;
    FILE *f = attn_out_file(out);
    unsigned char pre[10];
    memcpy(pre, npy_magic, 6);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (unsigned char)(hlen & 0xff);
    pre[9] = (unsigned char)(hlen >> 8);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, hlen, f) == hlen;

    /* Data: walk the view in C order, copying runs of the innermost dim through a buffer. */
    size_t elsize = attn_dtype_size(t->dtype);
    int swap = elsize > 1 && !host_is_little_endian();
    int contiguous = 1;
    int64_t want = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != want) contiguous = 0;
        want *= t->shape[d] > 0 ? t->shape[d] : 1;
    }
    if (ok && numel > 0 && contiguous && !swap && t->dtype != ATTN_BOOL) {
        /* the common case: one write of the tensor's bytes, no copy through a buffer */
        ok = fwrite(t->data, elsize, (size_t)numel, f) == (size_t)numel;
    } else if (ok && numel > 0) {
        int nd = t->ndim;
        int64_t inner = nd ? t->shape[nd - 1] : 1;
        int64_t istride = nd ? t->stride[nd - 1] : 1;
        int64_t idx[ATTN_MAX_DIMS] = {0};
        unsigned char buf[4096];
        size_t per = sizeof buf / elsize;
        for (int64_t done_rows = 0, rows = numel / inner; ok && done_rows < rows; done_rows++) {
            int64_t base = 0;
            for (int d = 0; d < nd - 1; d++) base += idx[d] * t->stride[d];
            for (int64_t j = 0; ok && j < inner;) {
                size_t cnt = 0;
                for (; cnt < per && j < inner; cnt++, j++) {
                    const unsigned char *src =
                        (const unsigned char *)t->data + (size_t)((base + j * istride) * (int64_t)elsize);
                    memcpy(buf + cnt * elsize, src, elsize);
                    if (t->dtype == ATTN_BOOL) buf[cnt] = buf[cnt] != 0;
                }
                if (swap) swap_bytes(buf, elsize, cnt);
                ok = fwrite(buf, elsize, cnt, f) == cnt;
            }
            for (int d = nd - 2; d >= 0; d--) {
                if (++idx[d] < t->shape[d]) break;
                idx[d] = 0;
            }
        }
    }
    /* a failed fwrite leaves the stream's error flag set: commit reports it (with errno) and
     * removes the temporary file */
    (void)ok;
    return attn_out_commit(out);
}
