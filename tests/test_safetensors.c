/* Tests for the safetensors reader: values for F32/F16/BF16, metadata, zero-copy,
 * a fixture written by Python's safetensors package, and rejection of malformed files. */
#include "attn_safetensors.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- a tiny writer */

typedef struct {
    char json[8192];
    size_t jlen;
    unsigned char data[4096];
    size_t dlen;
    int first;
} writer;

static void w_init(writer *w) {
    memset(w, 0, sizeof *w);
    w->jlen = (size_t)snprintf(w->json, sizeof w->json, "{");
    w->first = 1;
}

/* Raw JSON member text, e.g. "\"a\":{...}". */
static void w_raw(writer *w, const char *member) {
    w->jlen += (size_t)snprintf(w->json + w->jlen, sizeof w->json - w->jlen, "%s%s", w->first ? "" : ",",
                                member);
    w->first = 0;
}

/* Append a tensor: its bytes go at the end of the data section; shape is JSON text. */
static void w_tensor(writer *w, const char *name, const char *dtype, const char *shape, const void *bytes,
                     size_t n) {
    char m[512];
    snprintf(m, sizeof m, "\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}", name, dtype, shape,
             w->dlen, w->dlen + n);
    w_raw(w, m);
    if (n) memcpy(w->data + w->dlen, bytes, n);
    w->dlen += n;
}

/* The file image: u64 header length, header (padded with spaces to a multiple of 8 so the
 * data section is 8-aligned in an aligned buffer), data. Caller frees. */
static unsigned char *w_finish(writer *w, size_t *size) {
    w->jlen += (size_t)snprintf(w->json + w->jlen, sizeof w->json - w->jlen, "}");
    while (w->jlen % 8) w->json[w->jlen++] = ' ';
    *size = 8 + w->jlen + w->dlen;
    unsigned char *buf = (unsigned char *)malloc(*size + 16);
    uint64_t n = w->jlen;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, w->json, w->jlen);
    memcpy(buf + 8 + w->jlen, w->data, w->dlen);
    return buf;
}

/* A file image from header text and data given directly (header length as given). */
static unsigned char *raw_file(size_t *size, uint64_t hlen_field, const char *header, const void *data,
                               size_t dlen) {
    size_t hl = strlen(header);
    *size = 8 + hl + dlen;
    unsigned char *buf = (unsigned char *)malloc(*size + 1);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hlen_field >> (8 * i));
    memcpy(buf + 8, header, hl);
    if (dlen) memcpy(buf + 8 + hl, data, dlen);
    return buf;
}

/* open_memory on header text + data with the correct length field; returns the status and
 * closes the handle on success. */
static int try_header(const char *header, const void *data, size_t dlen) {
    size_t size;
    unsigned char *buf = raw_file(&size, strlen(header), header, data, dlen);
    attn_safetensors *st = NULL;
    int rc = attn_safetensors_open_memory(&st, buf, size);
    if (rc == 0) CHECK(st != NULL, "handle set on success");
    else CHECK(st == NULL, "handle NULL on failure");
    attn_safetensors_close(st);
    free(buf);
    return rc;
}

static int msg_has(const char *needle) { return strstr(attn_last_error(), needle) != NULL; }

static const char *tmp_path(const char *tag) {
    static char buf[256];
    snprintf(buf, sizeof buf, "/tmp/attn_test_safetensors_%ld_%s.safetensors", (long)getpid(), tag);
    return buf;
}

static int write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* ---------------------------------------------------------------- values */

static void test_values(void) {
    float f32[6] = {1, 2, 3, 4, 5, 6};
    uint16_t f16[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF};     /* 1, -2, 2^-24, 65504 */
    uint16_t bf16[4] = {0x3F80, 0xC040, 0x4049, 0x8000};    /* 1, -3, 3.140625, -0 */
    int64_t ids[3] = {7, -1, 1LL << 40};
    float scalar = 42.5f;
    float nine[1] = {9};
    writer w;
    w_init(&w);
    w_raw(&w, "\"__metadata__\":{\"format\":\"pt\",\"note\":\"tiny test\"}");
    w_tensor(&w, "w", "F32", "[2,3]", f32, sizeof f32);
    w_tensor(&w, "h", "F16", "[4]", f16, sizeof f16);
    w_tensor(&w, "b", "BF16", "[2,2]", bf16, sizeof bf16);
    w_tensor(&w, "ids", "I64", "[3]", ids, sizeof ids);
    w_tensor(&w, "empty", "F32", "[0,5]", NULL, 0);
    w_tensor(&w, "scalar", "F32", "[]", &scalar, sizeof scalar);
    w_tensor(&w, "nine", "F32", "[1,1,1,1,1,1,1,1,1]", nine, sizeof nine);
    w_tensor(&w, "empty_f16", "F16", "[3,0]", NULL, 0);
    size_t size;
    unsigned char *buf = w_finish(&w, &size);

    attn_safetensors *st = NULL;
    CHECK_OK(attn_safetensors_open_memory(&st, buf, size));
    if (!st) {
        free(buf);
        return;
    }
    attn_arena arena;
    attn_arena_init(&arena, 0);

    CHECK(attn_safetensors_count(st) == 8, "count %d", attn_safetensors_count(st));
    CHECK(strcmp(attn_safetensors_name(st, 0), "w") == 0, "name 0 is w (header order)");
    CHECK(strcmp(attn_safetensors_name(st, 2), "b") == 0, "name 2 is b");
    CHECK(attn_safetensors_name(st, 8) == NULL && attn_safetensors_name(st, -1) == NULL, "name out of range");
    CHECK(attn_safetensors_find(st, "ids") == 3, "find ids");
    CHECK(attn_safetensors_find(st, "empty_f16") == 7, "find empty_f16");
    CHECK(attn_safetensors_find(st, "nope") == -1, "find missing");
    CHECK(attn_safetensors_find(st, "__metadata__") == -1, "metadata is not a tensor");
    for (int i = 0; i < attn_safetensors_count(st); i++)
        CHECK(attn_safetensors_find(st, attn_safetensors_name(st, i)) == i, "find(name(%d))", i);

    /* info */
    attn_safetensors_info info;
    CHECK_OK(attn_safetensors_info_at(&info, st, 0));
    CHECK(info.dtype == ATTN_F32 && strcmp(info.dtype_name, "F32") == 0 && info.elem_size == 4, "info w dtype");
    CHECK(info.ndim == 2 && info.shape[0] == 2 && info.shape[1] == 3 && info.numel == 6, "info w shape");
    CHECK(info.data_offset == 0 && info.nbytes == 24, "info w offsets");
    CHECK_OK(attn_safetensors_info_at(&info, st, 3));
    CHECK(info.dtype == ATTN_I64 && strcmp(info.dtype_name, "I64") == 0 && info.nbytes == 24, "info ids");
    CHECK_OK(attn_safetensors_info_at(&info, st, 5));
    CHECK(info.ndim == 0 && info.numel == 1, "info scalar");
    CHECK_ERR(attn_safetensors_info_at(&info, st, 8), ATTN_E_RANGE);
    CHECK_ERR(attn_safetensors_info_at(NULL, st, 0), ATTN_E_INVALID);

    /* F32: zero-copy into the (8-aligned) buffer */
    attn_tensor t;
    CHECK_OK(attn_safetensors_get_f32(st, "w", &t, NULL));
    CHECK(t.dtype == ATTN_F32 && t.ndim == 2 && t.shape[0] == 2 && t.shape[1] == 3, "w view shape");
    CHECK(t.stride[0] == 3 && t.stride[1] == 1, "w view strides");
    CHECK((unsigned char *)t.data >= buf && (unsigned char *)t.data < buf + size, "w is zero-copy");
    CHECK(attn_test_max_abs_diff((const float *)t.data, f32, 6) == 0, "w values");

    /* F16, exact */
    CHECK_OK(attn_safetensors_get_f32(st, "h", &t, &arena));
    const float *h = (const float *)t.data;
    CHECK(t.ndim == 1 && t.shape[0] == 4, "h shape");
    CHECK(h[0] == 1.0f && h[1] == -2.0f && h[3] == 65504.0f, "h values %g %g %g", h[0], h[1], h[3]);
    CHECK(h[2] == ldexpf(1.0f, -24), "f16 subnormal 0x0001 = %.9g", h[2]);
    CHECK_NEAR(h[2], 5.960464e-08, 1e-13, "f16 0x0001");

    /* BF16 */
    CHECK_OK(attn_safetensors_get_f32(st, "b", &t, &arena));
    const float *b = (const float *)t.data;
    CHECK(t.ndim == 2 && t.shape[0] == 2 && t.shape[1] == 2, "b shape");
    CHECK(b[0] == 1.0f && b[1] == -3.0f && b[2] == 3.140625f, "bf16 values %g %g %g", b[0], b[1], b[2]);
    CHECK(b[3] == 0.0f && signbit(b[3]), "bf16 -0");

    /* BF16 / F16 need an arena */
    CHECK_ERR(attn_safetensors_get_f32(st, "b", &t, NULL), ATTN_E_INVALID);

    /* other dtypes: ATTN_E_DTYPE, raw bytes available */
    CHECK_ERR(attn_safetensors_get_f32(st, "ids", &t, &arena), ATTN_E_DTYPE);
    CHECK(msg_has("dtype I64 not supported") && msg_has("'ids'"), "dtype message: %s", attn_last_error());
    const void *raw;
    uint64_t nb;
    CHECK_OK(attn_safetensors_data(&raw, &nb, st, 3));
    int64_t ids_back[3];
    memcpy(ids_back, raw, sizeof ids_back);
    CHECK(nb == 24 && ids_back[0] == 7 && ids_back[1] == -1 && ids_back[2] == (1LL << 40), "raw I64 bytes");
    CHECK_ERR(attn_safetensors_data(&raw, &nb, st, 99), ATTN_E_RANGE);

    /* zero-size and scalar */
    CHECK_OK(attn_safetensors_get_f32(st, "empty", &t, NULL));
    CHECK(t.ndim == 2 && t.shape[0] == 0 && t.shape[1] == 5 && attn_tensor_numel(&t) == 0, "empty view");
    CHECK_OK(attn_safetensors_get_f32(st, "empty_f16", &t, &arena));
    CHECK(t.ndim == 2 && t.shape[0] == 3 && t.shape[1] == 0, "empty f16 view");
    CHECK_OK(attn_safetensors_get_f32(st, "scalar", &t, NULL));
    CHECK(t.ndim == 0 && *(const float *)t.data == 42.5f, "scalar");

    /* more dims than attn_tensor holds */
    CHECK_ERR(attn_safetensors_get_f32(st, "nine", &t, &arena), ATTN_E_UNSUPPORTED);
    CHECK_OK(attn_safetensors_info_at(&info, st, 6));
    CHECK(info.ndim == 9, "9-dim info");

    /* missing name */
    CHECK_ERR(attn_safetensors_get_f32(st, "nope", &t, &arena), ATTN_E_INVALID);
    CHECK(strcmp(attn_last_error(), "tensor 'nope' not found") == 0, "missing message: %s", attn_last_error());
    CHECK_ERR(attn_safetensors_get_f32(NULL, "w", &t, &arena), ATTN_E_INVALID);

    /* expected shape */
    int64_t good[2] = {2, 3}, bad[2] = {2, 2}, bad3[3] = {2, 3, 1};
    CHECK_OK(attn_safetensors_get_f32_shape(st, "w", &t, &arena, 2, good));
    CHECK(((const float *)t.data)[5] == 6.0f, "get_f32_shape values");
    CHECK_ERR(attn_safetensors_get_f32_shape(st, "w", &t, &arena, 2, bad), ATTN_E_SHAPE);
    CHECK(strcmp(attn_last_error(), "w: expected [2, 2], got [2, 3]") == 0, "shape message: %s",
          attn_last_error());
    CHECK_ERR(attn_safetensors_get_f32_shape(st, "w", &t, &arena, 3, bad3), ATTN_E_SHAPE);
    CHECK(strcmp(attn_last_error(), "w: expected [2, 3, 1], got [2, 3]") == 0, "rank message: %s",
          attn_last_error());
    CHECK_OK(attn_safetensors_get_f32_shape(st, "scalar", &t, &arena, 0, NULL));
    CHECK_ERR(attn_safetensors_get_f32_shape(st, "w", &t, &arena, 9, good), ATTN_E_INVALID);
    CHECK_ERR(attn_safetensors_get_f32_shape(st, "w", &t, &arena, 2, NULL), ATTN_E_INVALID);
    CHECK_ERR(attn_safetensors_get_f32_shape(st, "nope", &t, &arena, 2, good), ATTN_E_INVALID);

    /* metadata */
    CHECK(attn_safetensors_metadata_count(st) == 2, "metadata count");
    CHECK(attn_safetensors_metadata(st, "format") && strcmp(attn_safetensors_metadata(st, "format"), "pt") == 0,
          "metadata format");
    CHECK(attn_safetensors_metadata(st, "note") && strcmp(attn_safetensors_metadata(st, "note"), "tiny test") == 0,
          "metadata note");
    CHECK(attn_safetensors_metadata(st, "missing") == NULL, "metadata missing");
    const char *k = NULL, *v = NULL;
    CHECK_OK(attn_safetensors_metadata_at(&k, &v, st, 1));
    CHECK(k && v && strcmp(k, "note") == 0 && strcmp(v, "tiny test") == 0, "metadata_at 1");
    CHECK_ERR(attn_safetensors_metadata_at(&k, &v, st, 2), ATTN_E_RANGE);

    attn_safetensors_close(st);

    /* The same image at an odd address: F32 is no longer 4-aligned and gets copied. */
    unsigned char *odd = (unsigned char *)malloc(size + 1);
    memcpy(odd + 1, buf, size);
    CHECK_OK(attn_safetensors_open_memory(&st, odd + 1, size));
    if (st) {
        CHECK_ERR(attn_safetensors_get_f32(st, "w", &t, NULL), ATTN_E_INVALID);
        CHECK_OK(attn_safetensors_get_f32(st, "w", &t, &arena));
        CHECK(((uintptr_t)t.data % 4) == 0 && !((unsigned char *)t.data > odd && (unsigned char *)t.data < odd + size + 1),
              "unaligned F32 copied into the arena");
        CHECK(attn_test_max_abs_diff((const float *)t.data, f32, 6) == 0, "unaligned w values");
        attn_safetensors_close(st);
    }
    free(odd);

    /* On disk (mmap): zero-copy F32 and converted BF16. */
    const char *path = tmp_path("values");
    CHECK(write_file(path, buf, size) == 0, "write temp file");
    CHECK_OK(attn_safetensors_open(&st, path));
    if (st) {
        CHECK_OK(attn_safetensors_get_f32(st, "w", &t, NULL));
        CHECK(attn_test_max_abs_diff((const float *)t.data, f32, 6) == 0, "mmap w values");
        CHECK_OK(attn_safetensors_get_f32(st, "b", &t, &arena));
        CHECK(((const float *)t.data)[2] == 3.140625f, "mmap bf16 value");
        CHECK(strcmp(attn_safetensors_metadata(st, "format"), "pt") == 0, "mmap metadata");
        attn_safetensors_close(st);
    }
    unlink(path);

    attn_arena_free(&arena);
    free(buf);
}

/* Zero-size tensors anywhere (even inside another tensor's range) are fine; an empty
 * header object is a valid file; trailing spaces are padding. */
static void test_accepts(void) {
    float d[4] = {1, 2, 3, 4};
    CHECK_OK(try_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                        "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
                        "\"z2\":{\"dtype\":\"BF16\",\"shape\":[2,0],\"data_offsets\":[0,0]},"
                        "\"z3\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,16]}}",
                        d, sizeof d));
    CHECK_OK(try_header("{}", NULL, 0));
    CHECK_OK(try_header("{}      ", NULL, 0));
    CHECK_OK(try_header("{\"__metadata__\":{}}", NULL, 0));
    CHECK_OK(try_header("{\"__metadata__\":null}", NULL, 0));
    /* adjacent ranges in reverse header order; extra keys in an entry are ignored */
    CHECK_OK(try_header("{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16],\"extra\":1},"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                        d, sizeof d));
    /* a gap and trailing bytes are accepted (documented leniency) */
    CHECK_OK(try_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", d, sizeof d));
    /* every named dtype opens */
    static const char *names[] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16", "U16",
                                  "I32", "U32", "F64", "U64", "C64", "F8_E4M3FNUZ", "F8_E5M2FNUZ"};
    static const int sizes[] = {1, 1, 1, 1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 1, 1};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char hdr[256];
        snprintf(hdr, sizeof hdr, "{\"t\":{\"dtype\":\"%s\",\"shape\":[2],\"data_offsets\":[0,%d]}}", names[i],
                 2 * sizes[i]);
        int rc = try_header(hdr, d, sizeof d);
        CHECK(rc == 0, "dtype %s opens (%s)", names[i], attn_last_error());
    }
    /* I8 reads as ATTN_E_DTYPE with its name */
    size_t size;
    const char *q = "{\"q\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[0,4]}}";
    unsigned char *buf = raw_file(&size, strlen(q), q, d, 4);
    attn_safetensors *st = NULL;
    CHECK_OK(attn_safetensors_open_memory(&st, buf, size));
    if (st) {
        attn_tensor t;
        attn_arena arena;
        attn_arena_init(&arena, 0);
        attn_safetensors_info info;
        CHECK_OK(attn_safetensors_info_at(&info, st, 0));
        CHECK(info.dtype == -1 && strcmp(info.dtype_name, "I8") == 0, "I8 has no attn dtype");
        CHECK_ERR(attn_safetensors_get_f32(st, "q", &t, &arena), ATTN_E_DTYPE);
        CHECK(msg_has("dtype I8 not supported"), "I8 message: %s", attn_last_error());
        attn_arena_free(&arena);
        attn_safetensors_close(st);
    }
    free(buf);
}

/* ---------------------------------------------------------------- rejections */

static void test_rejects(void) {
    float d[8] = {0};
    attn_safetensors *st = (attn_safetensors *)(uintptr_t)1;
    unsigned char small[5] = {1, 0, 0, 0, 0};

    /* truncated: shorter than 8 bytes */
    CHECK_ERR(attn_safetensors_open_memory(&st, small, sizeof small), ATTN_E_FORMAT);
    CHECK(st == NULL, "out cleared on failure");
    CHECK(msg_has("shorter than"), "short message: %s", attn_last_error());
    CHECK_ERR(attn_safetensors_open_memory(&st, NULL, 0), ATTN_E_FORMAT);
    CHECK_ERR(attn_safetensors_open_memory(&st, NULL, 10), ATTN_E_INVALID);
    CHECK_ERR(attn_safetensors_open_memory(NULL, small, 5), ATTN_E_INVALID);

    /* header length 2^64 - 1 and just beyond the file */
    const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t size;
    unsigned char *buf = raw_file(&size, UINT64_MAX, hdr, d, 8);
    CHECK_ERR(attn_safetensors_open_memory(&st, buf, size), ATTN_E_FORMAT);
    CHECK(msg_has("18446744073709551615"), "2^64-1 message: %s", attn_last_error());
    free(buf);
    buf = raw_file(&size, strlen(hdr) + 8 + 1, hdr, d, 8);
    CHECK_ERR(attn_safetensors_open_memory(&st, buf, size), ATTN_E_FORMAT);
    CHECK(msg_has("larger than the rest of the file"), "beyond message: %s", attn_last_error());
    free(buf);
    /* header length cuts the JSON short: truncated header */
    buf = raw_file(&size, strlen(hdr) - 3, hdr, d, 8);
    CHECK_ERR(attn_safetensors_open_memory(&st, buf, size), ATTN_E_FORMAT);
    free(buf);
    /* the file cut inside the data section: end beyond the data */
    buf = raw_file(&size, strlen(hdr), hdr, d, 8);
    CHECK_ERR(attn_safetensors_open_memory(&st, buf, size - 1), ATTN_E_FORMAT);
    CHECK(msg_has("'a'") && msg_has("beyond the data section"), "truncated data message: %s", attn_last_error());
    free(buf);

#define REJ(header, code, needle)                                                                  \
    do {                                                                                           \
        CHECK_ERR(try_header(header, d, sizeof d), code);                                          \
        CHECK(msg_has(needle), "message for %s lacks '%s': %s", header, needle, attn_last_error()); \
    } while (0)

    /* overlaps (reported with both names), in either header order */
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
        ATTN_E_FORMAT, "overlap");
    REJ("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
        ATTN_E_FORMAT, "'b'");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        ATTN_E_FORMAT, "overlap");
    /* a range nested in an earlier, longer one after a short one */
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]}}",
        ATTN_E_FORMAT, "overlap");
    /* size not matching shape x dtype */
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", ATTN_E_FORMAT, "'a'");
    REJ("{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", ATTN_E_FORMAT, "need 2 elements");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,4]}}", ATTN_E_FORMAT, "'a'");
    /* begin > end, end beyond */
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", ATTN_E_FORMAT, "begin 8 > end 4");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[9],\"data_offsets\":[0,36]}}", ATTN_E_FORMAT, "beyond the data");
    /* data_offsets malformed */
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", ATTN_E_FORMAT, "data_offsets");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", ATTN_E_FORMAT, "data_offsets");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", ATTN_E_FORMAT, "data_offsets");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0.5,8]}}", ATTN_E_FORMAT, "data_offsets");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":\"0,8\"}}", ATTN_E_FORMAT, "data_offsets");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,1e300]}}", ATTN_E_FORMAT, "data_offsets");
    /* shape malformed */
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", ATTN_E_FORMAT, "shape[0]");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1.5],\"data_offsets\":[0,8]}}", ATTN_E_FORMAT, "shape[1]");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", ATTN_E_FORMAT, "shape[0]");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", ATTN_E_FORMAT, "not an array");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[9007199254740992],\"data_offsets\":[0,8]}}", ATTN_E_FORMAT,
        "shape[0]");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,0]}}", ATTN_E_FORMAT,
        "overflow");
    REJ("{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387,2048],\"data_offsets\":[0,0]}}", ATTN_E_FORMAT,
        "overflow");
    /* missing fields / wrong types */
    REJ("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", ATTN_E_FORMAT, "missing \"dtype\"");
    REJ("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", ATTN_E_FORMAT, "missing \"shape\"");
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", ATTN_E_FORMAT, "missing \"data_offsets\"");
    REJ("{\"a\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", ATTN_E_FORMAT, "not a string");
    REJ("{\"a\":[1,2]}", ATTN_E_FORMAT, "'a': entry is not an object");
    /* unknown dtypes */
    REJ("{\"a\":{\"dtype\":\"Q4_K\",\"shape\":[2],\"data_offsets\":[0,8]}}", ATTN_E_DTYPE, "unknown dtype 'Q4_K'");
    REJ("{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", ATTN_E_DTYPE, "'a'");
    REJ("{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", ATTN_E_DTYPE, "sub-byte");
    /* duplicate tensor names, duplicate metadata */
    REJ("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        ATTN_E_FORMAT, "'a' appears twice");
    REJ("{\"__metadata__\":{},\"__metadata__\":{}}", ATTN_E_FORMAT, "twice");
    REJ("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", ATTN_E_FORMAT, "repeated");
    /* metadata not string -> string */
    REJ("{\"__metadata__\":{\"k\":1}}", ATTN_E_FORMAT, "'k' is not a string");
    REJ("{\"__metadata__\":[\"k\"]}", ATTN_E_FORMAT, "not an object");
    /* not JSON / not an object / trailing junk */
    REJ("not json at all", ATTN_E_FORMAT, "not valid JSON");
    REJ("{\"a\":{\"dtype\":\"F32\",", ATTN_E_FORMAT, "not valid JSON");
    REJ("[1,2,3]", ATTN_E_FORMAT, "not a JSON object");
    REJ("\"str\"", ATTN_E_FORMAT, "not a JSON object");
    REJ("{}x", ATTN_E_FORMAT, "after the JSON");
    REJ("{} {}", ATTN_E_FORMAT, "after the JSON");
    REJ("", ATTN_E_FORMAT, "not valid JSON");
#undef REJ
    /* a NUL byte inside the header (cJSON would stop there) */
    unsigned char nul[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', 0, ' ', ' ', ' ', ' ', ' '};
    CHECK_ERR(attn_safetensors_open_memory(&st, nul, sizeof nul), ATTN_E_FORMAT);
    CHECK(msg_has("0x00"), "NUL message: %s", attn_last_error());
    nul[10] = ' ';
    CHECK_OK(attn_safetensors_open_memory(&st, nul, sizeof nul));
    attn_safetensors_close(st);
}

/* Header length over 100 MB is refused before reading it (sparse file on disk), and I/O
 * errors. */
static void test_disk_errors(void) {
    attn_safetensors *st = NULL;
    const char *path = tmp_path("big");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "create sparse file");
    if (f) {
        uint64_t n = 100000001;
        unsigned char len[8];
        for (int i = 0; i < 8; i++) len[i] = (unsigned char)(n >> (8 * i));
        fwrite(len, 1, 8, f);
        fclose(f);
        CHECK(truncate(path, 8 + 100000001 + 16) == 0, "grow sparse file");
        CHECK_ERR(attn_safetensors_open(&st, path), ATTN_E_FORMAT);
        CHECK(msg_has("100 MB"), "100 MB message: %s", attn_last_error());
        CHECK(msg_has(path), "message names the file: %s", attn_last_error());
        CHECK(st == NULL, "no handle");
    }
    unlink(path);

    path = tmp_path("short");
    CHECK(write_file(path, "abc", 3) == 0, "write short file");
    CHECK_ERR(attn_safetensors_open(&st, path), ATTN_E_FORMAT);
    unlink(path);
    path = tmp_path("empty");
    CHECK(write_file(path, "", 0) == 0, "write empty file");
    CHECK_ERR(attn_safetensors_open(&st, path), ATTN_E_FORMAT);
    unlink(path);

    CHECK_ERR(attn_safetensors_open(&st, "/nonexistent/dir/x.safetensors"), ATTN_E_IO);
    CHECK(msg_has("/nonexistent/dir/x.safetensors"), "io message: %s", attn_last_error());
    CHECK_ERR(attn_safetensors_open(&st, "/tmp"), ATTN_E_IO);
    CHECK_ERR(attn_safetensors_open(&st, NULL), ATTN_E_INVALID);
    CHECK_ERR(attn_safetensors_open(NULL, path), ATTN_E_INVALID);
    attn_safetensors_close(NULL);
    CHECK(attn_safetensors_count(NULL) == 0 && attn_safetensors_find(NULL, "a") == -1 &&
              attn_safetensors_metadata(NULL, "a") == NULL,
          "NULL handle queries");
}

/* A file written by Python's safetensors package (scripts/make_safetensors_fixture.py). */
static void test_python_fixture(void) {
    attn_safetensors *st = NULL;
    CHECK_OK(attn_safetensors_open(&st, attn_test_fixture("tiny_numpy.safetensors")));
    if (!st) return;
    attn_arena arena;
    attn_arena_init(&arena, 0);
    attn_tensor t;
    CHECK(attn_safetensors_count(st) == 4, "fixture count");

    int64_t ws[2] = {2, 3};
    CHECK_OK(attn_safetensors_get_f32_shape(st, "layer.weight", &t, &arena, 2, ws));
    float want_w[6] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
    if (t.data) CHECK(attn_test_max_abs_diff((const float *)t.data, want_w, 6) == 0, "fixture layer.weight");

    int64_t bs[1] = {4};
    CHECK_OK(attn_safetensors_get_f32_shape(st, "layer.bias", &t, &arena, 1, bs));
    float want_b[4] = {1.0f, -2.0f, 0.5f, 65504.0f};
    if (t.data) CHECK(attn_test_max_abs_diff((const float *)t.data, want_b, 4) == 0, "fixture layer.bias");

    int i = attn_safetensors_find(st, "position_ids");
    attn_safetensors_info info;
    CHECK_OK(attn_safetensors_info_at(&info, st, i));
    CHECK(info.dtype == ATTN_I64 && info.ndim == 2 && info.shape[0] == 1 && info.shape[1] == 4, "fixture ids info");
    const void *raw;
    uint64_t nb;
    CHECK_OK(attn_safetensors_data(&raw, &nb, st, i));
    int64_t ids[4];
    if (nb == sizeof ids) memcpy(ids, raw, sizeof ids);
    CHECK(nb == 32 && ids[0] == 0 && ids[3] == 3, "fixture ids values");

    int64_t es[2] = {0, 3};
    CHECK_OK(attn_safetensors_get_f32_shape(st, "empty", &t, &arena, 2, es));

    CHECK(attn_safetensors_metadata_count(st) == 2, "fixture metadata count");
    const char *fmt = attn_safetensors_metadata(st, "format");
    CHECK(fmt && strcmp(fmt, "np") == 0, "fixture metadata format");
    attn_arena_free(&arena);
    attn_safetensors_close(st);
}

int main(void) {
    attn_test_name = "safetensors";
    test_values();
    test_accepts();
    test_rejects();
    test_disk_errors();
    test_python_fixture();
    return attn_test_finish();
}
