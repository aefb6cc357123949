/* CTranslate2 model.bin reader: hand-built files of binary versions 2, 3 and 6 (every dtype,
 * aliases, scalars) read back value for value; every truncation and a list of corruptions give
 * ATTN_E_FORMAT with a message, never a crash; the real aren-transliteration files parse with the
 * header and variables that scripts-free inspection of the bytes gives (version 2,
 * TransformerBase, 200 / 269 variables). */
#include "attn_ct2.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned char b[4096];
    size_t n;
} buf;

static void put(buf *w, const void *p, size_t n) {
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void u8(buf *w, unsigned v) {
    unsigned char c = (unsigned char)v;
    put(w, &c, 1);
}
static void u16(buf *w, unsigned v) {
    u8(w, v & 255);
    u8(w, v >> 8);
}
static void u32(buf *w, uint32_t v) {
    for (int i = 0; i < 4; i++) u8(w, (v >> (8 * i)) & 255);
}
static void str(buf *w, const char *s) {
    u16(w, (unsigned)strlen(s) + 1);
    put(w, s, strlen(s) + 1);
}
/* version >= 4 variable */
static void var4(buf *w, const char *name, int rank, const uint32_t *dims, int dtype, const void *data, uint32_t nbytes) {
    str(w, name);
    u8(w, (unsigned)rank);
    for (int i = 0; i < rank; i++) u32(w, dims[i]);
    u8(w, (unsigned)dtype);
    u32(w, nbytes);
    put(w, data, nbytes);
}
/* version 2-3 variable */
static void var2(buf *w, const char *name, int rank, const uint32_t *dims, int item, const void *data, uint32_t count) {
    str(w, name);
    u8(w, (unsigned)rank);
    for (int i = 0; i < rank; i++) u32(w, dims[i]);
    u8(w, (unsigned)item);
    u32(w, count);
    put(w, data, (size_t)item * count);
}

static const float A[6] = {1, -2, 3.5f, 0.25f, -1e-3f, 65504};

static void build_v6(buf *w) {
    w->n = 0;
    u32(w, 6);
    str(w, "TestSpec");
    u32(w, 3);
    u32(w, 7);
    uint32_t d23[2] = {2, 3}, d2[1] = {2};
    var4(w, "a", 2, d23, 0, A, 24);
    uint16_t h[2] = {0x3c00, 0xc000}; /* f16 1, -2 */
    var4(w, "b", 1, d2, 4, h, 4);
    uint16_t bf[2] = {0x3f80, 0x4049}; /* bf16 1, 3.140625 */
    var4(w, "c", 1, d2, 5, bf, 4);
    int8_t q[2] = {-127, 64};
    var4(w, "d/weight", 1, d2, 1, q, 2);
    float sc[2] = {2, 4};
    var4(w, "d/weight_scale", 1, d2, 0, sc, 8);
    int16_t s16[2] = {-300, 7};
    var4(w, "e", 1, d2, 2, s16, 4);
    int32_t i32 = 42;
    var4(w, "f", 0, NULL, 3, &i32, 4);
    u32(w, 1);
    str(w, "g");
    str(w, "a");
}

static void test_v6(void) {
    buf w;
    build_v6(&w);
    attn_ct2_file *f = NULL;
    CHECK_OK(attn_ct2_parse(&f, w.b, w.n));
    if (!f) return;
    CHECK(attn_ct2_binary_version(f) == 6 && strcmp(attn_ct2_spec_name(f), "TestSpec") == 0 && attn_ct2_spec_revision(f) == 3,
          "v6 header");
    CHECK(attn_ct2_num_variables(f) == 7 && attn_ct2_num_aliases(f) == 1, "v6 counts");
    const attn_ct2_var *a = attn_ct2_find(f, "a"), *g = attn_ct2_find(f, "g");
    CHECK(a && g == a && a->rank == 2 && a->shape[0] == 2 && a->shape[1] == 3 && a->dtype == ATTN_CT2_F32, "alias g -> a");
    float x[6];
    if (a) {
        attn_ct2_read_f32(x, a);
        CHECK(memcmp(x, A, sizeof A) == 0, "f32 values");
    }
    const attn_ct2_var *b = attn_ct2_find(f, "b"), *c = attn_ct2_find(f, "c"), *d = attn_ct2_find(f, "d/weight"), *e = attn_ct2_find(f, "e"),
                       *i = attn_ct2_find(f, "f");
    if (b && c && d && e && i) {
        attn_ct2_read_f32(x, b);
        CHECK(x[0] == 1 && x[1] == -2, "f16 values %g %g", x[0], x[1]);
        attn_ct2_read_f32(x, c);
        CHECK(x[0] == 1 && x[1] == 3.140625f, "bf16 values %g %g", x[0], x[1]);
        attn_ct2_read_f32(x, d);
        CHECK(x[0] == -127 && x[1] == 64 && d->dtype == ATTN_CT2_I8, "int8 values");
        attn_ct2_read_f32(x, e);
        CHECK(x[0] == -300 && x[1] == 7, "int16 values");
        attn_ct2_read_f32(x, i);
        CHECK(i->rank == 0 && i->numel == 1 && x[0] == 42, "int32 scalar");
    } else {
        CHECK(0, "variables present");
    }
    CHECK(attn_ct2_find(f, "missing") == NULL, "absent variable");
    attn_ct2_close(f);
    /* every truncation fails cleanly */
    int all_fail = 1;
    for (size_t n = 0; n < w.n; n++) {
        unsigned char *p = (unsigned char *)malloc(n ? n : 1);
        memcpy(p, w.b, n);
        attn_ct2_file *t = NULL;
        int rc = attn_ct2_parse(&t, p, n);
        if (rc != ATTN_E_FORMAT || t) all_fail = 0;
        attn_ct2_close(t);
        free(p);
    }
    CHECK(all_fail, "every truncated prefix is ATTN_E_FORMAT");
}

static void test_v2_v3(void) {
    buf w = {{0}, 0};
    u32(&w, 2);
    str(&w, "TransformerBase");
    u32(&w, 2);
    u32(&w, 2);
    uint32_t d3[1] = {3};
    float v[3] = {1, 2, 3};
    var2(&w, "x", 1, d3, 4, v, 3);
    int8_t q[3] = {1, -1, 5};
    var2(&w, "y", 1, d3, 1, q, 3);
    attn_ct2_file *f = NULL;
    CHECK_OK(attn_ct2_parse(&f, w.b, w.n));
    if (f) {
        CHECK(attn_ct2_num_aliases(f) == 0 && attn_ct2_find(f, "y") && attn_ct2_find(f, "y")->dtype == ATTN_CT2_I8, "v2: int8 from item size 1");
        attn_ct2_close(f);
    }
    /* the same bytes as version 3 need an alias table */
    w.b[0] = 3;
    CHECK_ERR(attn_ct2_parse(&f, w.b, w.n), ATTN_E_FORMAT);
    u32(&w, 1);
    str(&w, "z");
    str(&w, "x");
    CHECK_OK(attn_ct2_parse(&f, w.b, w.n));
    if (f) {
        CHECK(attn_ct2_find(f, "z") == attn_ct2_find(f, "x"), "v3 alias");
        attn_ct2_close(f);
    }
}

#define CORRUPT(what, off, byte)                                                   \
    do {                                                                           \
        buf c;                                                                     \
        build_v6(&c);                                                              \
        c.b[off] = (unsigned char)(byte);                                          \
        attn_ct2_file *t = NULL;                                                   \
        int rc = attn_ct2_parse(&t, c.b, c.n);                                     \
        CHECK(rc == ATTN_E_FORMAT && !t && attn_last_error()[0], "%s: rc %d (%s)", \
              what, rc, attn_last_error());                                        \
        attn_ct2_close(t);                                                         \
    } while (0)

static void test_corrupt(void) {
    CORRUPT("version 1", 0, 1);
    CORRUPT("version 7", 0, 7);
    /* layout of build_v6: 4 version, 2+9 spec, 4 revision, 4 count, then "a": 2+2 name */
    size_t a = 4 + 11 + 4 + 4;
    CORRUPT("spec name without NUL", 4 + 2 + 8, 'x');
    CORRUPT("rank 9", a + 4, 9);
    CORRUPT("dtype 9", a + 4 + 1 + 8, 9);
    CORRUPT("byte count mismatch", a + 4 + 1 + 8 + 1, 23);
    CORRUPT("variable count too large", 4 + 11 + 4, 200);
    {
        buf c;
        build_v6(&c);
        c.b[a + 2] = 'b'; /* rename "a" -> "b": duplicate, and the alias target disappears */
        attn_ct2_file *t = NULL;
        CHECK_ERR(attn_ct2_parse(&t, c.b, c.n), ATTN_E_FORMAT);
        CHECK(strstr(attn_last_error(), "twice") != NULL, "duplicate named: %s", attn_last_error());
        c.b[c.n - 2] = 'q'; /* alias target "a" -> "q" on the good file */
        build_v6(&c);
        c.b[c.n - 2] = 'q';
        CHECK_ERR(attn_ct2_parse(&t, c.b, c.n), ATTN_E_FORMAT);
        CHECK(strstr(attn_last_error(), "not a stored variable") != NULL, "alias to a missing variable: %s", attn_last_error());
        build_v6(&c);
        c.b[c.n++] = 0;
        CHECK_ERR(attn_ct2_parse(&t, c.b, c.n), ATTN_E_FORMAT);
        CHECK(strstr(attn_last_error(), "unexpected bytes") != NULL, "trailing bytes: %s", attn_last_error());
    }
    attn_ct2_file *t = NULL;
    CHECK_ERR(attn_ct2_open(&t, "/nonexistent/model.bin"), ATTN_E_IO);
    CHECK_ERR(attn_ct2_parse(NULL, "", 0), ATTN_E_INVALID);
}

static void test_real(void) {
    attn_ct2_file *f = NULL;
    CHECK_OK(attn_ct2_open(&f, "../shared/models/aren-transliteration/model.bin"));
    if (f) {
        CHECK(attn_ct2_binary_version(f) == 2 && strcmp(attn_ct2_spec_name(f), "TransformerBase") == 0 &&
                  attn_ct2_num_variables(f) == 200,
              "aren float32 header (%u %s %lld)", attn_ct2_binary_version(f), attn_ct2_spec_name(f), (long long)attn_ct2_num_variables(f));
        const attn_ct2_var *e = attn_ct2_find(f, "encoder/embeddings/weight");
        CHECK(e && e->shape[0] == 51 && e->shape[1] == 32 && e->dtype == ATTN_CT2_F32, "encoder embeddings [51, 32]");
        attn_ct2_close(f);
    }
    CHECK_OK(attn_ct2_open(&f, "../shared/models/aren-transliteration-int8/model.bin"));
    if (f) {
        const attn_ct2_var *w = attn_ct2_find(f, "decoder/projection/weight");
        CHECK(attn_ct2_num_variables(f) == 269 && w && w->dtype == ATTN_CT2_I8 && attn_ct2_find(f, "decoder/projection/weight_scale"),
              "aren int8: 269 variables, int8 projection with scale");
        attn_ct2_close(f);
    }
}

int main(void) {
    attn_test_name = "ct2";
    test_v6();
    test_v2_v3();
    test_corrupt();
    test_real();
    return attn_test_finish();
}
