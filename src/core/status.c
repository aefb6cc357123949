/* Status codes and the per-thread last-error message. */
#include "attn_core.h"
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char attn__errbuf[512];

const char *attn_status_str(int status) {
    switch (status) {
    case ATTN_OK: return "ok";
    case ATTN_E_INVALID: return "invalid argument";
    case ATTN_E_SHAPE: return "shape mismatch";
    case ATTN_E_DTYPE: return "unsupported dtype";
    case ATTN_E_NOMEM: return "out of memory";
    case ATTN_E_IO: return "i/o error";
    case ATTN_E_FORMAT: return "malformed input";
    case ATTN_E_RANGE: return "value out of range";
    case ATTN_E_UNSUPPORTED: return "unsupported";
    default: return "unknown status";
    }
}

const char *attn_last_error(void) { return attn__errbuf; }

void attn_clear_error(void) { attn__errbuf[0] = '\0'; }

int attn_set_error(int status, const char *fmt, ...) {
    /* formatted apart, then copied: an argument may be attn_last_error() itself */
    char msg[sizeof attn__errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(attn__errbuf, msg, sizeof msg);
    return status;
}

int attn__error_prefix(int status, const char *prefix) {
    char msg[sizeof attn__errbuf];
    snprintf(msg, sizeof msg, "%s", attn__errbuf);
    return attn_set_error(status, "%s: %s", prefix, msg);
}

const char *attn_version(void) { return "0.1.0"; }

const char *attn__printable(char *dst, size_t cap, const char *s) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (o + 4 + 4 > cap) { /* room for one escape, "..." and the NUL */
            memcpy(dst + o, "...", 3);
            o += 3;
            break;
        }
        if (*p == '\\') {
            dst[o++] = '\\';
            dst[o++] = '\\';
        } else if (*p >= 0x20 && *p < 0x7f) {
            dst[o++] = (char)*p;
        } else {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[*p >> 4];
            dst[o++] = hex[*p & 15];
        }
    }
    dst[o] = 0;
    return dst;
}
