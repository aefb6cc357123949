/* Helpers shared by the byte-level BPE pre-tokenizer tests (test_bpe_unicode.c,
 * test_qwen2_pretok.c): a tokenizer of the 256 GPT-2 byte tokens with no merges, so that its
 * words are exactly the pre-tokenizer's split, and PCRE2's view of which code points its
 * Unicode version leaves unassigned. Static functions: include in one test file each. */
#ifndef ATTN_TESTS_BPE_PROBE_H
#define ATTN_TESTS_BPE_PROBE_H

#include "attn_bpe.h"
#include "testutil.h"
#include "tokenizers/tok_common.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <string.h>

/* 1 when Debian's PCRE2 has no character at cp (\p{Cn}: unassigned in its Unicode version) */
static int pcre2_unassigned(int32_t cp) {
    static pcre2_code *re = NULL;
    static pcre2_match_data *md = NULL;
    if (!re) {
        int err;
        PCRE2_SIZE off;
        re = pcre2_compile((PCRE2_SPTR) "^\\p{Cn}$", PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
        md = re ? pcre2_match_data_create(2, NULL) : NULL;
        if (!re || !md) return 0;
    }
    char s[5];
    int n = attn__utf8_encode(cp, s);
    return pcre2_match(re, (PCRE2_SPTR)s, (size_t)n, 0, 0, md, NULL) >= 0;
}

/* GPT-2's bytes_to_unicode */
static int32_t byte_cp(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    int k = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) k++;
    return 256 + k;
}

/* a byte-level tokenizer of the 256 byte tokens (no merges) with pre-tokenizer pre */
static attn_bpe *byte_vocab(const char *pre) {
    static char tok[256][4];
    static const char *toks[256];
    for (int b = 0; b < 256; b++) {
        int n = attn__utf8_encode(byte_cp(b), tok[b]);
        tok[b][n] = 0;
        toks[b] = tok[b];
    }
    attn_bpe_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.kind = ATTN_BPE_BYTE_LEVEL;
    sp.tokens = toks;
    sp.n_tokens = 256;
    sp.pretokenizer = pre;
    sp.bos_id = sp.eos_id = -1;
    attn_bpe *t = NULL;
    CHECK_OK(attn_bpe_create(&t, &sp));
    return t;
}

#endif
