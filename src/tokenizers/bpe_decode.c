/* BPE decoding (see include/attn_bpe.h): the vocabulary queries, one token's bytes, the
 * UTF-8-safe stream and whole-sequence decoding. */
#include "attn_bpe.h"
#include "core/internal.h"
#include "tokenizers/bpe_internal.h"
#include "tokenizers/tok_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ decoding */

int64_t attn_bpe_vocab_size(const attn_bpe *t) { return t ? t->n : 0; }
attn_bpe_kind attn_bpe_kind_of(const attn_bpe *t) { return t ? t->kind : ATTN_BPE_BYTE_LEVEL; }
int32_t attn_bpe_bos_id(const attn_bpe *t) { return t ? t->bos : -1; }
int32_t attn_bpe_eos_id(const attn_bpe *t) { return t ? t->eos : -1; }
size_t attn_bpe_max_token_bytes(const attn_bpe *t) { return t ? t->max_bytes : 0; }

int32_t attn_bpe_token_to_id(const attn_bpe *t, const char *token) {
    if (!t || !token) return -1;
    return attn__bpe_lookup(t, token, strlen(token));
}

const char *attn_bpe_id_to_token(const attn_bpe *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n) return NULL;
    if (len) *len = t->tlen[id];
    return t->tok[id];
}

int attn_bpe_token_type(const attn_bpe *t, int32_t id) { return (!t || id < 0 || id >= t->n) ? 0 : t->type[id]; }

int attn_bpe_token_bytes(const attn_bpe *t, int32_t id, int32_t prev_id, int render_special, char *out, size_t cap, size_t *len) {
    if (!t || !len || (!out && cap)) return attn_set_error(ATTN_E_INVALID, "bpe: bad arguments");
    *len = 0;
    if (id < 0 || id >= t->n) return attn_set_error(ATTN_E_RANGE, "bpe: token id %d outside [0, %lld)", (int)id, (long long)t->n);
    const char *s = t->tok[id];
    size_t n = t->tlen[id], k = 0;
    int ty = t->type[id];
    if (ty == ATTN_TOK_CONTROL || ty == ATTN_TOK_UNKNOWN) {
        if (!render_special) return ATTN_OK;
    } else if (ty == ATTN_TOK_BYTE) {
        if (cap < 1) return *len = 1, attn_set_error(ATTN_E_RANGE, "bpe: output buffer too small");
        for (int b = 0; b < 256; b++)
            if (t->byte_id[b] == id) {
                out[0] = (char)b;
                break;
            }
        *len = 1;
        return ATTN_OK;
    } else if (t->kind == ATTN_BPE_BYTE_LEVEL && ty != ATTN_TOK_USER) {
        /* inverse byte map; a character outside the map (not produced by BPE) is copied */
        size_t i = 0;
        while (i < n) {
            int32_t cp;
            int cl = attn__utf8_decode((const unsigned char *)s, n, i, &cp);
            if (cl <= 0) cl = 1, cp = -1;
            if (cp >= 0 && cp < 324 && t->cp_to_byte[cp] >= 0) {
                if (k < cap) out[k] = (char)t->cp_to_byte[cp];
                k++;
            } else {
                for (int j = 0; j < cl; j++, k++)
                    if (k < cap) out[k] = s[i + j];
            }
            i += (size_t)cl;
        }
        *len = k;
        if (k > cap) return attn_set_error(ATTN_E_RANGE, "bpe: output buffer too small");
        return ATTN_OK;
    } else if (t->kind == ATTN_BPE_SENTENCEPIECE && prev_id >= 0 && prev_id == t->bos && n > 0 && s[0] == ' ') {
        s++;
        n--;
    }
    *len = n;
    if (n > cap) return attn_set_error(ATTN_E_RANGE, "bpe: output buffer too small");
    memcpy(out, s, n);
    return ATTN_OK;
}

void attn_bpe_stream_init(attn_bpe_stream *s, int render_special) {
    memset(s, 0, sizeof *s);
    s->prev_id = -1;
    s->render_special = render_special;
}

/* expected length of a UTF-8 sequence from its lead byte; 0 = never valid as a lead */
static int lead_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

static const char REPL[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* append bytes b[0..n) to the pending buffer, emitting complete characters into out */
static int stream_bytes(attn_bpe_stream *s, const unsigned char *b, size_t n, char *out, size_t cap, size_t *k) {
    for (size_t i = 0; i < n; i++) {
        s->pend[s->n_pend++] = b[i];
        for (;;) {
            if (s->n_pend == 0) break;
            int need = lead_len(s->pend[0]);
            int32_t cp;
            int bad = 0;
            if (need == 0) {
                bad = 1;
            } else if (s->n_pend >= need) {
                if (attn__utf8_decode(s->pend, (size_t)need, 0, &cp) == need) {
                    if (*k + (size_t)need > cap) return -1;
                    memcpy(out + *k, s->pend, (size_t)need);
                    *k += (size_t)need;
                    memmove(s->pend, s->pend + need, (size_t)(s->n_pend - need));
                    s->n_pend -= need;
                    continue;
                }
                bad = 1;
            } else {
                /* incomplete: is the prefix still valid? decode with the rest padded is not
                 * possible, so check the continuation bytes so far */
                for (int j = 1; j < s->n_pend; j++)
                    if ((s->pend[j] & 0xC0) != 0x80) bad = 1;
                if (!bad && s->n_pend >= 2) {
                    unsigned c = s->pend[0], c1 = s->pend[1];
                    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
                        bad = 1;
                }
                if (!bad) break; /* wait for more bytes */
            }
            /* the first pending byte can never start a valid character: U+FFFD for it */
            if (*k + 3 > cap) return -1;
            memcpy(out + *k, REPL, 3);
            *k += 3;
            memmove(s->pend, s->pend + 1, (size_t)(s->n_pend - 1));
            s->n_pend--;
        }
    }
    return 0;
}

int attn_bpe_stream_push(const attn_bpe *t, attn_bpe_stream *s, int32_t id, char *out, size_t cap, size_t *len) {
    if (!t || !s || !len || (!out && cap)) return attn_set_error(ATTN_E_INVALID, "bpe stream: bad arguments");
    *len = 0;
    if (id < 0 || id >= t->n) return attn_set_error(ATTN_E_RANGE, "bpe: token id %d outside [0, %lld)", (int)id, (long long)t->n);
    char stackbuf[1024];
    size_t need = t->max_bytes + 8, n = 0;
    char *buf = need <= sizeof stackbuf ? stackbuf : (char *)malloc(need);
    if (!buf) return attn_set_error(ATTN_E_NOMEM, "bpe: out of memory");
    int rc = attn_bpe_token_bytes(t, id, s->prev_id, s->render_special, buf, need, &n);
    if (rc == 0) {
        size_t k = 0;
        if (stream_bytes(s, (const unsigned char *)buf, n, out, cap, &k) < 0)
            rc = attn_set_error(ATTN_E_RANGE, "bpe stream: output buffer of %zu bytes too small", cap);
        *len = k;
        s->prev_id = id;
    }
    if (buf != stackbuf) free(buf);
    return rc;
}

int attn_bpe_stream_flush(attn_bpe_stream *s, char *out, size_t cap, size_t *len) {
    if (!s || !len || (!out && cap)) return attn_set_error(ATTN_E_INVALID, "bpe stream: bad arguments");
    /* the held-back bytes are the start of one character that never ended: one U+FFFD for them
     * (Unicode's "maximal subpart" replacement, what Python's and Rust's decoders give) */
    size_t k = 0;
    if (s->n_pend > 0) {
        if (cap < 3) return attn_set_error(ATTN_E_RANGE, "bpe stream: output buffer too small");
        memcpy(out, REPL, 3);
        k = 3;
    }
    s->n_pend = 0;
    *len = k;
    return ATTN_OK;
}

int attn_bpe_decode(const attn_bpe *t, const int32_t *ids, int64_t n, int render_special, char *out, size_t cap, size_t *len) {
    if (!t || (!ids && n) || n < 0 || !out || cap == 0) return attn_set_error(ATTN_E_INVALID, "bpe decode: bad arguments");
    attn_bpe_stream s;
    attn_bpe_stream_init(&s, render_special);
    size_t k = 0, piece;
    size_t bufcap = t->max_bytes * 3 + 32;
    char *buf = (char *)malloc(bufcap);
    if (!buf) return attn_set_error(ATTN_E_NOMEM, "bpe: out of memory");
    int rc = 0;
    for (int64_t i = 0; i <= n && rc == 0; i++) {
        rc = i < n ? attn_bpe_stream_push(t, &s, ids[i], buf, bufcap, &piece) : attn_bpe_stream_flush(&s, buf, bufcap, &piece);
        if (rc) break;
        if (k + piece + 1 > cap) {
            rc = attn_set_error(ATTN_E_RANGE, "bpe decode: output buffer of %zu bytes too small", cap);
            break;
        }
        memcpy(out + k, buf, piece);
        k += piece;
    }
    free(buf);
    out[rc == 0 ? k : 0] = 0;
    if (len) *len = rc == 0 ? k : 0;
    return rc;
}
