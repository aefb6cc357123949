/* attn_npy_map (src/formats/npy.c): every NumPy-written fixture maps (or, where it cannot be
 * mapped, loads) to the same dtype, shape and bytes as attn_npy_load; bad files fail with the
 * same status; the fast contiguous path of attn_npy_save writes the same bytes as the strided one. */
#include "attn_npy.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void same_as_load(const char *name, int want_mapped) {
    const char *path = attn_test_fixture(name);
    attn_tensor t;
    attn_npy_mapped m;
    CHECK_OK(attn_npy_load(&t, path));
    CHECK_OK(attn_npy_map(&m, path));
    int same = t.dtype == m.t.dtype && t.ndim == m.t.ndim;
    for (int i = 0; same && i < t.ndim; i++) same = t.shape[i] == m.t.shape[i] && t.stride[i] == m.t.stride[i];
    const size_t n = (size_t)attn_tensor_numel(&t) * attn_dtype_size(t.dtype);
    same = same && (n == 0 || memcmp(t.data, m.t.data, n) == 0);
    CHECK(same, "%s: mapped dtype, shape, strides and %zu bytes equal attn_npy_load's", name, n);
    CHECK((m.map != NULL) == want_mapped, "%s: %s", name, want_mapped ? "mapped, not copied" : "read (cannot be mapped)");
    attn_npy_unmap(&m);
    CHECK(m.map == NULL && m.t.data == NULL, "%s: unmap zeroes the view", name);
    attn_npy_free(&t);
}

int main(void) {
    attn_test_name = "npy_map";
    same_as_load("npy/v1_f4.npy", 1);
    same_as_load("npy/v2_f8.npy", 1);
    same_as_load("npy/v3_i4.npy", 1);
    same_as_load("npy/v1_i8.npy", 1);
    same_as_load("npy/v1_f2.npy", 1);
    same_as_load("npy/v1_b1.npy", 1);
    same_as_load("npy/v1_0d.npy", 1);
    same_as_load("npy/v2_f4_4d.npy", 1);
    same_as_load("npy/v1_empty.npy", 0); /* no elements: nothing to map */
    attn_npy_mapped m;
    CHECK_ERR(attn_npy_map(&m, attn_test_fixture("npy/bad_be_f4.npy")), ATTN_E_DTYPE);
    CHECK_ERR(attn_npy_map(&m, attn_test_fixture("npy/bad_fortran.npy")), ATTN_E_FORMAT);
    CHECK_ERR(attn_npy_map(&m, "/nonexistent/x.npy"), ATTN_E_IO);
    CHECK_ERR(attn_npy_map(NULL, "x.npy"), ATTN_E_INVALID);
    attn_npy_unmap(NULL);

    /* truncated data: the same error as attn_npy_load, never a mapping past the end */
    char dir[] = "/tmp/attn_npy_map_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temporary directory");
    char p1[128], p2[128];
    snprintf(p1, sizeof p1, "%s/a.npy", dir);
    snprintf(p2, sizeof p2, "%s/b.npy", dir);
    float x[6] = {1, -2, 3.5f, 4, 5, 6e-30f};
    attn_tensor tx = attn_tensor_f32_2d(x, 2, 3);
    CHECK_OK(attn_npy_save(p1, &tx));
    FILE *f = fopen(p1, "rb");
    unsigned char buf[256];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    CHECK(n == 128 + 24, "a [2, 3] float32 file is 128 header bytes + 24 data bytes (got %zu)", n);
    f = fopen(p2, "wb");
    if (f) fwrite(buf, 1, n - 4, f), fclose(f);
    attn_tensor t;
    CHECK_ERR(attn_npy_load(&t, p2), ATTN_E_FORMAT);
    CHECK_ERR(attn_npy_map(&m, p2), ATTN_E_FORMAT);
    /* the contiguous save (one write) and a strided save of the same values: same bytes */
    float xt[6] = {1, 4, -2, 5, 3.5f, 6e-30f}; /* x transposed, viewed back as [2, 3] with strides (1, 2) */
    attn_tensor ts = attn_tensor_f32_2d(xt, 2, 3);
    ts.stride[0] = 1, ts.stride[1] = 2;
    CHECK_OK(attn_npy_save(p2, &ts));
    unsigned char buf2[256];
    f = fopen(p2, "rb");
    size_t n2 = f ? fread(buf2, 1, sizeof buf2, f) : 0;
    if (f) fclose(f);
    CHECK(n2 == n && memcmp(buf, buf2, n) == 0, "contiguous and strided saves of the same [2, 3] values are byte-identical");
    CHECK_OK(attn_npy_map(&m, p1));
    CHECK(m.map && memcmp(m.t.data, x, sizeof x) == 0, "the saved file maps back to its values");
    attn_npy_unmap(&m);
    unlink(p1), unlink(p2), rmdir(dir);
    return attn_test_finish();
}
