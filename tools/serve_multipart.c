/* attn serve: multipart/form-data bodies (RFC 7578 over RFC 2046's multipart syntax) for
 * POST /v1/audio/transcriptions, as OpenAI's clients send them: a boundary from the
 * Content-Type header, parts of headers and content separated by CRLF "--boundary", the
 * last followed by "--". A pure function of the header and the body (no server state),
 * fuzzed by tests/fuzz/fuzz_serve_request.c. Every limit is explicit: at most MAX_PARTS
 * parts, MAX_HEADER bytes of headers per part, text fields of at most MAX_FIELD bytes. */
#include "serve.h"

#include "attn_wordpiece.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_PARTS 16
#define MAX_HEADER 4096
#define MAX_FIELD 1024

typedef struct {
    char name[64];
    char filename[256];
    int has_filename;
    const char *data;
    size_t len;
} part;

/* the value of parameter key in a header value ("multipart/form-data; boundary=x",
 * "form-data; name=\"file\"; filename=\"a.wav\""), quoted or not, into out[n]; 1 found, 0
 * absent, -1 malformed or too long */
static int header_param(const char *v, size_t vlen, const char *key, char *out, size_t n) {
    const size_t kl = strlen(key);
    size_t i = 0;
    /* skip the first token (the type / disposition), then ';'-separated parameters */
    while (i < vlen && v[i] != ';') {
        if (v[i] == '"') return -1;
        i++;
    }
    while (i < vlen) {
        i++; /* ';' */
        while (i < vlen && (v[i] == ' ' || v[i] == '\t')) i++;
        size_t ks = i;
        while (i < vlen && v[i] != '=' && v[i] != ';') i++;
        size_t ke = i;
        while (ke > ks && (v[ke - 1] == ' ' || v[ke - 1] == '\t')) ke--;
        const int match = ke - ks == kl && strncasecmp(v + ks, key, kl) == 0;
        if (i >= vlen || v[i] == ';') {
            if (match) return -1; /* "name" without a value */
            continue;
        }
        i++; /* '=' */
        while (i < vlen && (v[i] == ' ' || v[i] == '\t')) i++;
        size_t k = 0;
        if (i < vlen && v[i] == '"') {
            i++;
            for (; i < vlen && v[i] != '"'; i++) {
                char ch = v[i];
                if (ch == '\\' && i + 1 < vlen) ch = v[++i];
                if (match) {
                    if (k + 1 >= n) return -1;
                    out[k++] = ch;
                }
            }
            if (i >= vlen) return -1; /* no closing quote */
            i++;
            while (i < vlen && (v[i] == ' ' || v[i] == '\t')) i++;
            if (i < vlen && v[i] != ';') return -1;
        } else {
            for (; i < vlen && v[i] != ';'; i++) {
                if (v[i] == '"') return -1;
                if (match && v[i] != ' ' && v[i] != '\t') {
                    if (k + 1 >= n) return -1;
                    out[k++] = v[i];
                }
            }
        }
        if (match) {
            out[k] = 0;
            return 1;
        }
    }
    return 0;
}

/* the header lines of one part (h[0..hlen), CRLF-separated, without the blank line) */
static int part_headers(part *p, const char *h, size_t hlen, serve_err *e) {
    int have_disp = 0;
    size_t i = 0;
    while (i < hlen) {
        const char *eol = (const char *)memmem(h + i, hlen - i, "\r\n", 2);
        size_t le = eol ? (size_t)(eol - h) : hlen;
        const char *line = h + i;
        size_t ll = le - i;
        i = eol ? le + 2 : hlen;
        const char *colon = (const char *)memchr(line, ':', ll);
        if (!colon) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "a part's header line has no ':'");
        size_t nl = (size_t)(colon - line);
        const char *v = colon + 1;
        size_t vl = ll - nl - 1;
        while (vl && (*v == ' ' || *v == '\t')) v++, vl--;
        if (nl == 19 && strncasecmp(line, "Content-Disposition", 19) == 0) {
            if (have_disp++) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "a part has two Content-Disposition headers");
            if (vl < 9 || strncasecmp(v, "form-data", 9) != 0 || (vl > 9 && v[9] != ';' && v[9] != ' '))
                return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "a part's Content-Disposition is not form-data");
            int rn = header_param(v, vl, "name", p->name, sizeof p->name);
            if (rn <= 0) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "a part's Content-Disposition has no (or a malformed) name");
            int rf = header_param(v, vl, "filename", p->filename, sizeof p->filename);
            if (rf < 0) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "a part's filename is malformed or longer than 255 bytes");
            p->has_filename = rf;
        }
        /* Content-Type and others: the audio's format is found from its bytes (libsndfile) */
    }
    if (!have_disp) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "a part has no Content-Disposition header");
    return 0;
}

/* split body into parts[<= MAX_PARTS] */
static int split_parts(const char *content_type, const char *body, size_t len, part *parts, int *np, serve_err *e) {
    *np = 0;
    if (!content_type) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "the request has no Content-Type (multipart/form-data expected)");
    const size_t ctl = strlen(content_type);
    if (ctl < 19 || strncasecmp(content_type, "multipart/form-data", 19) != 0 || (ctl > 19 && content_type[19] != ';' && content_type[19] != ' '))
        return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "the Content-Type must be multipart/form-data (with the file in a part named 'file')");
    char bnd[80] = "\r\n--";
    int rb = header_param(content_type, ctl, "boundary", bnd + 4, sizeof bnd - 4);
    const size_t bl = strlen(bnd + 4);
    if (rb <= 0 || bl < 1 || bl > 70) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "the multipart boundary is missing or not 1 to 70 characters");
    const size_t dl = bl + 4; /* "\r\n--" + boundary */
    if (!body) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "the request has no body");
    /* the first delimiter may start the body (no preamble, no leading CRLF) */
    size_t pos;
    if (len >= dl - 2 && memcmp(body, bnd + 2, dl - 2) == 0) pos = dl - 2;
    else {
        const char *f = (const char *)memmem(body, len, bnd, dl);
        if (!f) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "the body holds no multipart boundary");
        pos = (size_t)(f - body) + dl;
    }
    for (;;) {
        /* after a delimiter: "--" ends the body, else transport padding and CRLF start a part */
        if (len - pos >= 2 && body[pos] == '-' && body[pos + 1] == '-') return 0;
        while (pos < len && (body[pos] == ' ' || body[pos] == '\t')) pos++;
        if (len - pos < 2 || body[pos] != '\r' || body[pos + 1] != '\n')
            return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "the body is truncated or malformed after a boundary");
        pos += 2;
        if (*np == MAX_PARTS) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "the body has more than %d parts", MAX_PARTS);
        part *p = &parts[*np];
        memset(p, 0, sizeof *p);
        const char *hend;
        if (len - pos >= 2 && body[pos] == '\r' && body[pos + 1] == '\n') hend = body + pos; /* no headers */
        else {
            size_t look = len - pos < MAX_HEADER + 4 ? len - pos : MAX_HEADER + 4;
            const char *f = (const char *)memmem(body + pos, look, "\r\n\r\n", 4);
            if (!f) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "a part's headers are unterminated or longer than %d bytes", MAX_HEADER);
            hend = f + 2;
        }
        if (part_headers(p, body + pos, (size_t)(hend - (body + pos)) - (hend == body + pos ? 0 : 2), e) < 0) return -1;
        pos = (size_t)(hend - body) + 2;
        const char *f = (const char *)memmem(body + pos, len - pos, bnd, dl);
        if (!f) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "the body is truncated: the part '%s' has no closing boundary", p->name);
        p->data = body + pos;
        p->len = (size_t)(f - (body + pos));
        (*np)++;
        pos = (size_t)(f - body) + dl;
    }
}

/* a text field: valid UTF-8 without NUL, at most MAX_FIELD bytes, copied into out */
static int field_text(const part *p, char *out, size_t n, serve_err *e) {
    size_t bad;
    if (p->len >= n || p->len > MAX_FIELD) return serve_fail(e, 400, NULL, p->name, "invalid_value", "'%s' is longer than %zu bytes", p->name, n - 1);
    if (memchr(p->data, 0, p->len) || attn_tokenizer_validate_utf8(p->data, p->len, &bad) < 0)
        return serve_fail(e, 400, NULL, p->name, "invalid_value", "'%s' is not UTF-8 text", p->name);
    memcpy(out, p->data, p->len);
    out[p->len] = 0;
    return 0;
}

int serve_parse_multipart(serve_req *r, const char *content_type, const char *body, size_t len, serve_err *e) {
    memset(r, 0, sizeof *r);
    r->kind = SERVE_TRANSCRIBE;
    r->temperature = 0;
    part parts[MAX_PARTS];
    int np = 0;
    if (split_parts(content_type, body, len, parts, &np, e) < 0) return -1;
    static const char *const names[] = {"file", "model", "response_format", "language", "temperature", NULL};
    for (int i = 0; i < np; i++) {
        int k = 0;
        while (names[k] && strcmp(names[k], parts[i].name) != 0) k++;
        if (!names[k]) {
            if (strcmp(parts[i].name, "stream") == 0) { /* the client sends "false" for the default */
                char v[8];
                if (field_text(&parts[i], v, sizeof v, e) < 0) return -1;
                if (strcmp(v, "false") == 0) continue;
            }
            return serve_fail(e, 400, NULL, parts[i].name, "unsupported_parameter", "'%.60s' is not supported by attn serve's transcriptions", parts[i].name);
        }
        for (int j = 0; j < i; j++)
            if (strcmp(parts[j].name, parts[i].name) == 0) return serve_fail(e, 400, NULL, parts[i].name, "invalid_value", "'%s' is given twice", parts[i].name);
    }
    char v[MAX_FIELD + 1];
    const part *file = NULL;
    for (int i = 0; i < np; i++) {
        const part *p = &parts[i];
        if (strcmp(p->name, "file") == 0) file = p;
        else if (strcmp(p->name, "stream") == 0) continue;
        else if (field_text(p, v, sizeof v, e) < 0) return -1;
        else if (strcmp(p->name, "model") == 0) {
            if (!(r->model = strdup(v))) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        } else if (strcmp(p->name, "response_format") == 0) {
            static const char *const fmts[] = {"json", "text", "verbose_json", "srt", "vtt"};
            int f = 0;
            while (f < 5 && strcmp(fmts[f], v) != 0) f++;
            if (f == 5) return serve_fail(e, 400, NULL, "response_format", "invalid_value", "'response_format' must be json, text, verbose_json, srt or vtt");
            r->format = (serve_format)f;
        } else if (strcmp(p->name, "language") == 0) {
            if (strcmp(v, "en") != 0 && strcasecmp(v, "english") != 0)
                return serve_fail(e, 400, NULL, "language", "unsupported_value", "'language' must be en: attn's Whisper models are English-only");
        } else if (strcmp(p->name, "temperature") == 0) {
            char *end = NULL;
            double t = v[0] && !isspace((unsigned char)v[0]) ? strtod(v, &end) : NAN;
            if (end && !*end && isinf(t)) /* 1e309: beyond a double's range, a value out of range */
                return serve_fail(e, 400, NULL, "temperature", "invalid_value", "'temperature' must be in [0, 1], got %.40s", v);
            if (!end || *end || !isfinite(t)) return serve_fail(e, 400, NULL, "temperature", "invalid_type", "'temperature' must be a number");
            if (t < 0 || t > 1) return serve_fail(e, 400, NULL, "temperature", "invalid_value", "'temperature' must be in [0, 1], got %.17g", t);
            r->temperature = t;
        }
    }
    if (!file) return serve_fail(e, 400, NULL, "file", "missing_required_parameter", "'file' is required (the audio, as a multipart file part)");
    if (file->len == 0) return serve_fail(e, 400, NULL, "file", "invalid_value", "the uploaded file is empty");
    r->audio = (char *)malloc(file->len);
    const char *fn = file->has_filename && file->filename[0] ? file->filename : "file";
    size_t bad;
    if (attn_tokenizer_validate_utf8(fn, strlen(fn), &bad) < 0) fn = "file";
    r->filename = strdup(fn);
    if (!r->audio || !r->filename) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    memcpy(r->audio, file->data, file->len);
    r->audio_len = file->len;
    return 0;
}
