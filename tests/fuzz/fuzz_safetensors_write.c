/* libFuzzer target for the safetensors writer (formats/safetensors_write.c): the input is a
 * program — metadata entries and tensors whose names and values are arbitrary bytes (empty,
 * duplicated, "__metadata__", invalid UTF-8, control characters), dtypes of every attn_dtype,
 * shapes of 0..5 dims with 0 extents, contiguous or transposed views — written to memory.
 * Whatever the writer accepts must be a file the reader (attn_safetensors_open_memory) accepts
 * with every tensor back under its name, dtype, shape and bytes, and every metadata entry back;
 * a refused call must have set an error message. Any crash or sanitizer report is a bug. */
#include "attn_safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    const uint8_t *p;
    size_t n;
} reader;

static unsigned take(reader *r, unsigned bytes) {
    unsigned v = 0;
    for (unsigned i = 0; i < bytes; i++) v = v << 8 | (r->n ? (r->n--, *r->p++) : 0u);
    return v;
}

/* a NUL-terminated string of up to 15 bytes of the input (a NUL byte in it ends it early) */
static void take_str(reader *r, char *s) {
    const unsigned len = take(r, 1) % 16;
    for (unsigned i = 0; i < len; i++) s[i] = (char)take(r, 1);
    s[len] = 0;
}

enum { MAXT = 8, MAXM = 4 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    static char names[MAXT][16], keys[MAXM][16], vals[MAXM][16];
    static uint8_t bytes[MAXT][2048]; /* 3^5 elements x 8 bytes fit */
    attn_tensor t[MAXT];
    const attn_tensor *tp[MAXT];
    const char *np[MAXT], *kp[MAXM], *vp[MAXM];
    const int n = (int)take(&r, 1) % (MAXT + 1), n_meta = (int)take(&r, 1) % (MAXM + 1);
    for (int i = 0; i < n_meta; i++) take_str(&r, keys[i]), take_str(&r, vals[i]), kp[i] = keys[i], vp[i] = vals[i];
    for (int i = 0; i < n; i++) {
        take_str(&r, names[i]);
        const unsigned how = take(&r, 1);
        const attn_dtype dt = (attn_dtype)(how % 7);
        const int nd = (int)(how >> 3) % 6;
        int64_t shape[5];
        for (int d = 0; d < nd; d++) shape[d] = (int64_t)take(&r, 1) % 4;
        for (int b = 0; b < 2048; b++) bytes[i][b] = (uint8_t)(b * 7 + i);
        if (attn_tensor_make(&t[i], bytes[i], dt, nd, shape) != ATTN_OK) __builtin_trap();
        if ((how & 0x80) && t[i].ndim >= 2 && t[i].shape[0] > 1 && t[i].shape[1] > 1)
            (void)attn_tensor_transpose(&t[i], &t[i], 0, 1); /* a non-contiguous view: must be refused */
        tp[i] = &t[i];
        np[i] = names[i];
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return 0;
    const int rc = attn_safetensors_write(f, n, np, tp, n_meta, kp, vp);
    fclose(f);
    if (rc != ATTN_OK) {
        if (!attn_last_error()[0]) __builtin_trap(); /* a refusal says why */
        free(buf);
        return 0;
    }
    attn_safetensors *st = NULL;
    if (attn_safetensors_open_memory(&st, buf, len) != ATTN_OK) { /* the writer wrote what the reader refuses */
        fprintf(stderr, "reader: %s\n", attn_last_error());
        __builtin_trap();
    }
    if (attn_safetensors_count(st) != n || attn_safetensors_metadata_count(st) != n_meta) __builtin_trap();
    for (int i = 0; i < n; i++) {
        const int k = attn_safetensors_find(st, names[i]);
        attn_safetensors_info in;
        if (k < 0 || attn_safetensors_info_at(&in, st, k) != ATTN_OK) __builtin_trap();
        if (in.dtype != (int)t[i].dtype || in.ndim != t[i].ndim) __builtin_trap();
        for (int d = 0; d < in.ndim; d++)
            if (in.shape[d] != t[i].shape[d]) __builtin_trap();
        const void *p = NULL;
        uint64_t nb = 0;
        if (attn_safetensors_data(&p, &nb, st, k) != ATTN_OK || nb != in.nbytes || (nb && memcmp(p, bytes[i], nb))) __builtin_trap();
    }
    for (int i = 0; i < n_meta; i++) {
        const char *key = NULL, *val = NULL;
        int found = 0;
        for (int j = 0; j < n_meta && !found; j++)
            found = attn_safetensors_metadata_at(&key, &val, st, j) == ATTN_OK && !strcmp(key, keys[i]) && !strcmp(val, vals[i]);
        if (!found) __builtin_trap();
    }
    attn_safetensors_close(st);
    free(buf);
    return 0;
}
