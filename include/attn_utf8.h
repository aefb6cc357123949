/*
 * attn_utf8.h — UTF-8 validation shared by every text input of the library (tokenizers,
 * translation sources, prompts). Source: src/tokenizers/utf8.c.
 */
#ifndef ATTN_UTF8_H
#define ATTN_UTF8_H

#include "attn_core.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* attn_tokenizer_validate_utf8: 0 when s[0..len) is well-formed UTF-8 (RFC 3629 / Unicode
 * Table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF), else ATTN_E_FORMAT
 * with the message "invalid UTF-8 at byte offset N (byte 0xXX)"; *bad_offset (if not NULL)
 * receives N (len when valid). ATTN_E_INVALID for NULL s with len > 0. */
int attn_tokenizer_validate_utf8(const char *s, size_t len, size_t *bad_offset);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_UTF8_H */
