/* libFuzzer target: attn serve's request parsing on arbitrary bodies, for every endpoint kind;
 * the first byte picks the kind. JSON bodies go through serve_parse (tools/serve_parse.c);
 * transcriptions through serve_parse_multipart (tools/serve_multipart.c), whose Content-Type
 * header is the input's bytes up to the first newline (after the kind byte) and whose body is
 * the rest. A parsed request or an error with a status and message, never a crash or leak. */
#include "../../tools/serve_multipart.c"
#include "../../tools/serve_parse.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    serve_req r;
    serve_err e;
    memset(&e, 0, sizeof e);
    const serve_kind k = (serve_kind)(data[0] % SERVE_NKINDS);
    int rc;
    if (k == SERVE_TRANSCRIBE) {
        const char *body = (const char *)data + 1, *nl = (const char *)memchr(body, '\n', size - 1);
        const size_t hl = nl ? (size_t)(nl - body) : size - 1;
        char *ct = (char *)malloc(hl + 1); /* a header value is a C string */
        if (!ct) return 0;
        memcpy(ct, body, hl);
        ct[hl] = 0;
        rc = serve_parse_multipart(&r, ct, nl ? nl + 1 : body + hl, nl ? size - 1 - hl - 1 : 0, &e);
        if (rc == 0 && (!r.audio || r.audio_len == 0 || !r.filename)) __builtin_trap();
        free(ct);
    } else
        rc = serve_parse(&r, k, (const char *)data + 1, size - 1, &e);
    if (rc < 0) {
        if (e.status < 400 || e.status > 599 || !e.message[0]) __builtin_trap();
        char *j = serve_error_json(&e);
        free(j);
    }
    serve_req_free(&r);
    return 0;
}
