/* UTF-8 and file helpers shared by every tokenizer (WordPiece, byte-level BPE, SentencePiece BPE). */
#include "attn_utf8.h"
#include "core/internal.h"
#include "tokenizers/tok_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decode one code point at s[i..len). Returns its byte length (1..4) or 0 when the bytes
 * there are not well-formed UTF-8 (RFC 3629 / Unicode Table 3-7). */
int attn__utf8_decode(const unsigned char *s, size_t len, size_t i, int32_t *cp) {
    unsigned c = s[i];
    if (c < 0x80) {
        *cp = (int32_t)c;
        return 1;
    }
    size_t left = len - i;
    if (c >= 0xC2 && c <= 0xDF) {
        if (left < 2 || (s[i + 1] & 0xC0) != 0x80) return 0;
        *cp = (int32_t)(((c & 0x1F) << 6) | (s[i + 1] & 0x3F));
        return 2;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3) return 0;
        unsigned c1 = s[i + 1], c2 = s[i + 2];
        unsigned lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* surrogates */
        if (c1 < lo || c1 > hi || (c2 & 0xC0) != 0x80) return 0;
        *cp = (int32_t)(((c & 0x0F) << 12) | ((c1 & 0x3F) << 6) | (c2 & 0x3F));
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4) return 0;
        unsigned c1 = s[i + 1], c2 = s[i + 2], c3 = s[i + 3];
        unsigned lo = 0x80, hi = 0xBF;
        if (c == 0xF0) lo = 0x90;      /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* > U+10FFFF */
        if (c1 < lo || c1 > hi || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80) return 0;
        *cp = (int32_t)(((c & 0x07) << 18) | ((c1 & 0x3F) << 12) | ((c2 & 0x3F) << 6) | (c3 & 0x3F));
        return 4;
    }
    return 0;
}

int attn__utf8_encode(int32_t c, char *out) {
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

int attn_tokenizer_validate_utf8(const char *s, size_t len, size_t *bad_offset) {
    if (!s && len) return attn_set_error(ATTN_E_INVALID, "validate_utf8: NULL text with length %zu", len);
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        /* fast path over ASCII */
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        int n = attn__utf8_decode(u, len, i, &cp);
        if (!n) {
            if (bad_offset) *bad_offset = i;
            return attn_set_error(ATTN_E_FORMAT, "invalid UTF-8 at byte offset %zu (byte 0x%02X)", i,
                                  (unsigned)u[i]);
        }
        i += (size_t)n;
    }
    if (bad_offset) *bad_offset = len;
    return ATTN_OK;
}

