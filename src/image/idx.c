/* IDX files (LeCun et al.'s MNIST format), plain or gzip'd (zlib). See attn_image.h. */
#include "attn_image.h"
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

void attn_idx_free(attn_idx *idx) {
    if (!idx) return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}

/* A byte source: either plain memory or a gzip stream inflated on demand. */
typedef struct {
    const uint8_t *plain;
    size_t plain_len, plain_pos;
    int gz;
    z_stream zs;
    const uint8_t *gz_in;
    size_t gz_len;
    int gz_end; /* 1 when the last member ended and no input remains */
} attn__src;

/* Read up to n bytes into dst; *got receives the count. Corrupt gzip data is an error;
 * the end of the data gives *got < n without error. */
static int attn__src_read(attn__src *s, uint8_t *dst, size_t n, size_t *got) {
    *got = 0;
    if (!s->gz) {
        size_t avail = s->plain_len - s->plain_pos;
        size_t k = n < avail ? n : avail;
        if (k) memcpy(dst, s->plain + s->plain_pos, k);
        s->plain_pos += k;
        *got = k;
        return ATTN_OK;
    }
    while (*got < n && !s->gz_end) {
        size_t want = n - *got;
        uInt chunk = want > (1u << 30) ? (1u << 30) : (uInt)want;
        s->zs.next_out = dst + *got;
        s->zs.avail_out = chunk;
        int zr = inflate(&s->zs, Z_NO_FLUSH);
        *got += chunk - s->zs.avail_out;
        if (zr == Z_STREAM_END) {
            /* concatenated gzip members (RFC 1952 §2.2) continue the data */
            if (s->zs.avail_in > 0) {
                if (inflateReset(&s->zs) != Z_OK) return attn_set_error(ATTN_E_FORMAT, "IDX: gzip: cannot restart");
            } else {
                s->gz_end = 1;
            }
        } else if (zr == Z_BUF_ERROR) {
            if (s->zs.avail_in == 0)
                return attn_set_error(ATTN_E_FORMAT, "IDX: gzip stream is truncated (ends before its end marker)");
            /* no progress with input left and output space left cannot happen; guard anyway */
            if (chunk - s->zs.avail_out == 0) return attn_set_error(ATTN_E_FORMAT, "IDX: gzip stream is corrupt");
        } else if (zr != Z_OK) {
            return attn_set_error(ATTN_E_FORMAT, "IDX: gzip stream is corrupt (%s)", s->zs.msg ? s->zs.msg : "inflate error");
        }
    }
    return ATTN_OK;
}

static const char *attn__idx_type_name(int t) {
    switch (t) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return NULL;
    }
}

int attn_idx_decode(attn_idx *out, const void *data, size_t size, int64_t max_bytes) {
    if (!out || (!data && size)) return attn_set_error(ATTN_E_INVALID, "idx_decode: NULL argument");
    memset(out, 0, sizeof *out);
    if (max_bytes <= 0) max_bytes = (int64_t)1 << 30;
    attn__src s;
    memset(&s, 0, sizeof s);
    const uint8_t *p = (const uint8_t *)data;
    if (size >= 2 && p[0] == 0x1f && p[1] == 0x8b) {
        s.gz = 1;
        s.zs.next_in = (Bytef *)p;
        s.zs.avail_in = size > (size_t)UINT32_MAX ? UINT32_MAX : (uInt)size;
        if (size > (size_t)UINT32_MAX) return attn_set_error(ATTN_E_RANGE, "IDX: gzip file larger than 4 GiB");
        if (inflateInit2(&s.zs, 16 + MAX_WBITS) != Z_OK) return attn_set_error(ATTN_E_NOMEM, "IDX: zlib init failed");
    } else {
        s.plain = p;
        s.plain_len = size;
    }
    int rc = ATTN_OK;
    uint8_t hdr[4 + 4 * 4];
    size_t got = 0;
    rc = attn__src_read(&s, hdr, 4, &got);
    if (rc == 0 && got < 4) rc = attn_set_error(ATTN_E_FORMAT, "IDX: file too short for the 4-byte magic (%zu bytes)", got);
    int type = 0, ndim = 0;
    if (rc == 0) {
        type = hdr[2];
        ndim = hdr[3];
        if (hdr[0] != 0 || hdr[1] != 0)
            rc = attn_set_error(ATTN_E_FORMAT, "IDX: bad magic %02x %02x %02x %02x (want 00 00 TYPE NDIM)", hdr[0], hdr[1], hdr[2], hdr[3]);
        else if (!attn__idx_type_name(type))
            rc = attn_set_error(ATTN_E_FORMAT, "IDX: unknown element type 0x%02x", type);
        else if (type != 0x08)
            rc = attn_set_error(ATTN_E_UNSUPPORTED, "IDX: element type %s (0x%02x) is not supported; only unsigned byte (0x08)",
                                attn__idx_type_name(type), type);
        else if (ndim < 1 || ndim > 4)
            rc = attn_set_error(ATTN_E_FORMAT, "IDX: %d dimensions (1 to 4 supported)", ndim);
    }
    if (rc == 0) {
        rc = attn__src_read(&s, hdr + 4, (size_t)(4 * ndim), &got);
        if (rc == 0 && got < (size_t)(4 * ndim))
            rc = attn_set_error(ATTN_E_FORMAT, "IDX: truncated header (%zu of %d extent bytes)", got, 4 * ndim);
    }
    int64_t total = 1;
    for (int d = 0; rc == 0 && d < ndim; d++) {
        const uint8_t *q = hdr + 4 + 4 * d;
        int64_t e = (int64_t)((uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]);
        out->dims[d] = e;
        if (e > 0 && total > max_bytes / e) {
            rc = attn_set_error(ATTN_E_RANGE, "IDX: data of more than %lld bytes", (long long)max_bytes);
            break;
        }
        total *= e;
    }
    if (rc == 0) {
        out->ndim = ndim;
        out->data = (uint8_t *)malloc((size_t)total + 1);
        if (!out->data) rc = attn_set_error(ATTN_E_NOMEM, "IDX: out of memory for %lld bytes", (long long)total);
    }
    if (rc == 0) {
        rc = attn__src_read(&s, out->data, (size_t)total, &got);
        if (rc == 0 && (int64_t)got < total)
            rc = attn_set_error(ATTN_E_FORMAT, "IDX: truncated: %zu of %lld data bytes", got, (long long)total);
    }
    if (rc == 0) {
        uint8_t extra;
        rc = attn__src_read(&s, &extra, 1, &got);
        if (rc == 0 && got) rc = attn_set_error(ATTN_E_FORMAT, "IDX: data continues past the %lld bytes the header declares", (long long)total);
    }
    if (s.gz) inflateEnd(&s.zs);
    if (rc < 0) attn_idx_free(out);
    return rc;
}

/* attn_idx_decode with its default limit, in attn__decode_file's form */
static int decode_whole(void *out, const void *data, size_t size) {
    return attn_idx_decode((attn_idx *)out, data, size, 0);
}

int attn_idx_load(attn_idx *out, const char *path) {
    if (!out || !path) return attn_set_error(ATTN_E_INVALID, "idx_load: NULL argument");
    memset(out, 0, sizeof *out);
    return attn__decode_file(path, (size_t)1 << 31, decode_whole, out);
}

int attn_idx_image(attn_image *out, const attn_idx *idx, int64_t i) {
    if (!out || !idx || !idx->data) return attn_set_error(ATTN_E_INVALID, "idx_image: NULL argument");
    if (idx->ndim != 3) return attn_set_error(ATTN_E_SHAPE, "idx_image: images must be a 3-D IDX [N, H, W], got %d-D", idx->ndim);
    if (i < 0 || i >= idx->dims[0])
        return attn_set_error(ATTN_E_RANGE, "idx_image: item %lld outside 0..%lld", (long long)i, (long long)idx->dims[0] - 1);
    out->width = idx->dims[2];
    out->height = idx->dims[1];
    out->channels = 1;
    out->data = idx->data + i * idx->dims[1] * idx->dims[2];
    return ATTN_OK;
}
