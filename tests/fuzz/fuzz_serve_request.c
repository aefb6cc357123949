/* libFuzzer target: attn serve's request parsing (tools/serve_parse.c) on arbitrary bodies, for
 * every endpoint kind; the first byte picks the kind. A parsed request or an error with a
 * status and message, never a crash or leak. */
#include "../../tools/serve_parse.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    serve_req r;
    serve_err e;
    memset(&e, 0, sizeof e);
    const serve_kind k = (serve_kind)(data[0] % 5);
    if (serve_parse(&r, k, (const char *)data + 1, size - 1, &e) < 0) {
        if (e.status < 400 || e.status > 599 || !e.message[0]) __builtin_trap();
        char *j = serve_error_json(&e);
        free(j);
    }
    serve_req_free(&r);
    return 0;
}
