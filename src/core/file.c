/* Whole-file reading for the small text files of model directories and tokenizers (see
 * attn__read_file in core/internal.h). */
#include "core/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int attn__read_file(const char *path, size_t max_bytes, int too_large, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return attn_set_error(ATTN_E_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return attn_set_error(ATTN_E_IO, "cannot read %s: %s", path, strerror(EISDIR));
    }
    size_t cap = (size_t)1 << 16, n = 0;
    if (cap > max_bytes) cap = max_bytes;
    char *buf = (char *)malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return attn_set_error(ATTN_E_NOMEM, "out of memory reading %s", path);
    }
    for (;;) {
        if (n == cap) {
            /* full: one more byte tells a file of exactly max_bytes from a larger one */
            int c = cap >= max_bytes ? fgetc(f) : 0;
            if (c == EOF) break;
            if (cap >= max_bytes) {
                free(buf);
                fclose(f);
                return attn_set_error(too_large, "%s is larger than %zu bytes", path, max_bytes);
            }
            size_t nc = cap * 2 > max_bytes ? max_bytes : cap * 2;
            char *nb = (char *)realloc(buf, nc + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return attn_set_error(ATTN_E_NOMEM, "out of memory reading %s", path);
            }
            buf = nb;
            cap = nc;
        }
        errno = 0;
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (err) {
        free(buf);
        return attn_set_error(ATTN_E_IO, "cannot read %s: %s", path, strerror(err));
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return ATTN_OK;
}

int attn__decode_file(const char *path, size_t max_bytes, int (*decode)(void *out, const void *data, size_t size),
                      void *out) {
    char *buf;
    size_t len;
    ATTN_TRY(attn__read_file(path, max_bytes, ATTN_E_RANGE, &buf, &len));
    int rc = decode(out, buf, len);
    free(buf);
    return rc < 0 ? attn__error_prefix(rc, path) : rc;
}
