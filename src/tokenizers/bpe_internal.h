/* Private to the BPE tokenizer (src/tokenizers/bpe.c, bpe_decode.c; not installed): its state. */
#ifndef ATTN_BPE_INTERNAL_H
#define ATTN_BPE_INTERNAL_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include "attn_bpe.h"

#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t key;   /* (left << 32) | right, +1 so 0 marks an empty slot */
    int32_t rank;   /* merge rank */
    int32_t result; /* id of the merged token */
} pair_slot;

typedef struct {
    char *s;
    size_t len;
    int32_t id;
} special_tok;

struct attn_bpe {
    attn_bpe_kind kind;
    int64_t n;
    char **tok;      /* [n] NUL-terminated */
    uint32_t *tlen;  /* [n] */
    int32_t *type;   /* [n] */
    float *score;    /* [n] SentencePiece */
    /* string -> id hash */
    int32_t *slot_id; /* [n_slots], -1 empty */
    size_t n_slots;
    /* byte-level */
    pair_slot *pairs;
    size_t n_pair_slots;
    int32_t byte_id[256];      /* token of each byte (byte-level: mapped char; SP: <0xXX>) */
    int32_t cp_to_byte[324];   /* byte-level: mapped code point -> byte, -1 */
    pcre2_code *re_main, *re_digits;
    /* specials */
    special_tok *spec;
    int n_spec;
    int32_t bos, eos;
    size_t max_bytes;
};

/* Id of the token s[0..n), or -1. */
int32_t attn__bpe_lookup(const attn_bpe *t, const char *s, size_t n);

#endif
