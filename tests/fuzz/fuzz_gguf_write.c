/* libFuzzer target for the GGUF writer (formats/gguf_write.c): the input is a program of writer
 * calls — metadata entries of any value type and bytes, tensors of any attn_qtype and shape, data
 * chunks, an alignment — run against a file in a private directory. Whatever the writer accepts
 * and commits must be a file the reader (attn_gguf_open) accepts with the declared tensor count;
 * a refused call or commit must leave no file behind. Any crash or sanitizer report is a bug. */
#include "attn_gguf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

typedef struct {
    const uint8_t *p;
    size_t n;
} reader;

static unsigned take(reader *r, unsigned bytes) {
    unsigned v = 0;
    for (unsigned i = 0; i < bytes; i++) v = v << 8 | (r->n ? (r->n--, *r->p++) : 0u);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/attn_fuzz_gw_XXXXXX");
        if (!mkdtemp(dir)) return 0;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    unlink(path);
    reader r = {data, size};
    attn_gguf_writer *w = NULL;
    const unsigned al = take(&r, 1);
    if (attn_gguf_writer_open(&w, path, al & 1 ? 1u << (al >> 1 & 15) : 0) != ATTN_OK) return 0;
    int64_t tensors = 0, ok = 1;
    static uint8_t zeros[4096];
    while (r.n > 0 && ok) {
        char name[24];
        snprintf(name, sizeof name, "t.%u", take(&r, 1));
        switch (take(&r, 1) % 4) {
        case 0: { /* a metadata entry: type, then up to 64 bytes of encoded value */
            const int type = (int)take(&r, 1) % 14;
            const size_t want = take(&r, 1) % 65, len = want < r.n ? want : r.n;
            ok = attn_gguf_writer_kv(w, name, type, r.p, len) == ATTN_OK;
            r.p += len, r.n -= len;
            break;
        }
        case 1: { /* a tensor: type, dims, extents */
            const attn_qtype t = (attn_qtype)(take(&r, 1) % 14);
            const int nd = 1 + (int)take(&r, 1) % 4;
            int64_t ne[4];
            for (int i = 0; i < nd; i++) ne[i] = 1 + (int64_t)take(&r, 2) % 512;
            if (attn_gguf_writer_tensor(w, name, t, nd, ne) == ATTN_OK) tensors++;
            break;
        }
        case 2: /* data bytes (zeros: finite values of every type) */
            (void)attn_gguf_writer_data(w, zeros, take(&r, 2) % sizeof zeros);
            break;
        default:
            (void)attn_gguf_writer_kv_u32(w, name, take(&r, 4));
        }
    }
    if (!ok) {
        attn_gguf_writer_abort(w);
        if (access(path, F_OK) == 0) __builtin_trap(); /* refused: nothing written */
        return 0;
    }
    if (attn_gguf_writer_commit(w) != ATTN_OK) {
        if (access(path, F_OK) == 0) __builtin_trap();
        return 0;
    }
    attn_gguf *g = NULL;
    if (attn_gguf_open(&g, path) != ATTN_OK) { /* the writer wrote what the reader refuses */
        fprintf(stderr, "reader: %s\n", attn_last_error());
        __builtin_trap();
    }
    if (attn_gguf_n_tensors(g) != tensors) __builtin_trap();
    attn_gguf_close(g);
    unlink(path);
    return 0;
}
