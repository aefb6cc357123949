/* Image input: PNG / JPEG decoding against PIL (fixtures by scripts/gen_vit_fixtures.py),
 * IDX files (the Debian dataset-fashion-mnist test set, plain and gzip'd), channel
 * conversion, pixman resizing against PIL's bilinear resize, and corrupt, truncated or
 * oversized files, which must fail with the right status and never crash. */
#include "attn_image.h"
#include "attn_npy.h"
#include "testutil.h"

#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define FMNIST "/usr/share/datasets/fashion-mnist/"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static unsigned char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    unsigned char *b = (unsigned char *)malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

/* ------------------------------------------------------------------ PNG / JPEG */

static void test_png_matches_idx(void) {
    attn_idx idx;
    CHECK_OK(attn_idx_load(&idx, FMNIST "t10k-images-idx3-ubyte.gz"));
    attn_image png, item;
    CHECK_OK(attn_image_load(&png, attn_test_fixture("vit/test_0_ankle_boot.png")));
    CHECK_OK(attn_idx_image(&item, &idx, 0));
    CHECK(png.width == 28 && png.height == 28 && png.channels == 1, "test PNG is 28x28 grey (got %lldx%lld x%d)",
          (long long)png.width, (long long)png.height, png.channels);
    CHECK(png.data && memcmp(png.data, item.data, 28 * 28) == 0, "PNG pixels equal the IDX item");
    attn_image_free(&png);
    attn_idx_free(&idx);
}

static void test_color_and_jpeg(void) {
    attn_image png, jpg;
    CHECK_OK(attn_image_load(&png, attn_test_fixture("vit/color_112.png")));
    CHECK(png.width == 112 && png.height == 96 && png.channels == 3, "color PNG 112x96 RGB");
    CHECK_OK(attn_image_load(&jpg, attn_test_fixture("vit/color_112.jpg")));
    CHECK(jpg.width == 112 && jpg.height == 96 && jpg.channels == 3, "color JPEG 112x96 RGB");
    attn_tensor ref;
    CHECK_OK(attn_npy_load(&ref, attn_test_fixture("vit/color_112_jpg_pil.npy")));
    if (jpg.data && ref.data && attn_tensor_numel(&ref) == 112 * 96 * 3) {
        const int32_t *r = (const int32_t *)ref.data;
        int maxd = 0;
        for (int i = 0; i < 112 * 96 * 3; i++) {
            int d = abs((int)jpg.data[i] - (int)r[i]);
            maxd = d > maxd ? d : maxd;
        }
        /* both decode with libjpeg-turbo's default islow IDCT and fancy upsampling; Pillow
         * bundles its own libjpeg-turbo build, so allow one level of rounding difference */
        printf("JPEG decode vs PIL: max difference %d levels\n", maxd);
        CHECK(maxd <= 1, "JPEG decode vs PIL: max difference %d > 1", maxd);
    }
    attn_npy_free(&ref);
    attn_image_free(&png);
    attn_image_free(&jpg);
    attn_image cm;
    CHECK_ERR(attn_image_load(&cm, attn_test_fixture("vit/cmyk.jpg")), ATTN_E_UNSUPPORTED);
    CHECK(strstr(attn_last_error(), "CMYK") != NULL, "CMYK message: %s", attn_last_error());
}

/* An RGBA PNG written with libpng: alpha is composited onto white. */
static void test_alpha(void) {
    unsigned char px[2 * 4] = {255, 0, 0, 255, 0, 0, 255, 128}; /* opaque red, half-transparent blue */
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = 2;
    img.height = 1;
    img.format = PNG_FORMAT_RGBA;
    png_alloc_size_t n = 0;
    CHECK(png_image_write_to_memory(&img, NULL, &n, 0, px, 0, NULL), "PNG size");
    unsigned char *buf = (unsigned char *)malloc(n);
    CHECK(png_image_write_to_memory(&img, buf, &n, 0, px, 0, NULL), "PNG write");
    attn_image out;
    CHECK_OK(attn_image_decode(&out, buf, n, 0));
    if (out.data) {
        CHECK(out.channels == 3, "RGBA -> RGB");
        CHECK(out.data[0] == 255 && out.data[1] == 0 && out.data[2] == 0, "opaque pixel kept");
        /* (0*128 + 255*127)/255 = 127, (255*128 + 255*127)/255 = 255 */
        CHECK(out.data[3] == 127 && out.data[4] == 127 && out.data[5] == 255, "blue at alpha 128 over white: %d %d %d",
              out.data[3], out.data[4], out.data[5]);
    }
    attn_image_free(&out);
    /* truncated PNG: header intact, image data cut */
    CHECK_ERR(attn_image_decode(&out, buf, n - 20, 0), ATTN_E_FORMAT);
    free(buf);
}

static void test_bad_files(void) {
    attn_image img;
    CHECK_ERR(attn_image_load(&img, tmp_path("does-not-exist.png")), ATTN_E_IO);
    CHECK(strstr(attn_last_error(), "does-not-exist.png") != NULL, "IO message names the file: %s", attn_last_error());
    CHECK_ERR(attn_image_decode(&img, "", 0, 0), ATTN_E_FORMAT);
    CHECK_ERR(attn_image_decode(&img, "GIF89a....", 10, 0), ATTN_E_FORMAT);
    CHECK(img.data == NULL, "output zeroed on error");
    size_t n = 0;
    unsigned char *png = read_file(attn_test_fixture("vit/color_112.png"), &n);
    unsigned char *jpg = NULL;
    size_t nj = 0;
    jpg = read_file(attn_test_fixture("vit/color_112.jpg"), &nj);
    if (png && jpg) {
        size_t cuts[] = {8, 20, 33, 60, n / 2, n - 13};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            int rc = attn_image_decode(&img, png, cuts[i], 0);
            CHECK(rc == ATTN_E_FORMAT, "PNG truncated to %zu bytes: rc %d (%s)", cuts[i], rc, attn_last_error());
            attn_image_free(&img);
        }
        size_t jcuts[] = {3, 20, 200, nj / 2, nj - 2};
        for (size_t i = 0; i < sizeof jcuts / sizeof jcuts[0]; i++) {
            int rc = attn_image_decode(&img, jpg, jcuts[i], 0);
            CHECK(rc == ATTN_E_FORMAT, "JPEG truncated to %zu bytes: rc %d (%s)", jcuts[i], rc, attn_last_error());
            attn_image_free(&img);
        }
        /* corrupt PNG image data (CRC mismatch in IDAT) */
        unsigned char *bad = (unsigned char *)malloc(n);
        memcpy(bad, png, n);
        bad[n / 2] ^= 0x5a;
        CHECK_ERR(attn_image_decode(&img, bad, n, 0), ATTN_E_FORMAT);
        free(bad);
        /* corrupt JPEG entropy data: an error (libjpeg's warning), not a grey picture */
        bad = (unsigned char *)malloc(nj);
        memcpy(bad, jpg, nj);
        for (size_t i = nj / 2; i < nj / 2 + 64; i++) bad[i] = 0xFF;
        int rc = attn_image_decode(&img, bad, nj, 0);
        CHECK(rc == ATTN_E_FORMAT, "corrupt JPEG: rc %d (%s)", rc, attn_last_error());
        attn_image_free(&img);
        free(bad);
        /* size limit from the header, before decoding: 112 x 96 = 10752 pixels > 10000 */
        CHECK_ERR(attn_image_decode(&img, png, n, 10000), ATTN_E_RANGE);
        CHECK_ERR(attn_image_decode(&img, jpg, nj, 10000), ATTN_E_RANGE);
        /* a file on disk that is cut short */
        write_bytes(tmp_path("cut.png"), png, n / 3);
        CHECK_ERR(attn_image_load(&img, tmp_path("cut.png")), ATTN_E_FORMAT);
        CHECK(strstr(attn_last_error(), "cut.png") != NULL, "message names the file: %s", attn_last_error());
    }
    free(png);
    free(jpg);
}

/* ------------------------------------------------------------------ convert / resize */

static void test_convert(void) {
    unsigned char rgb[] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 200, 30};
    attn_image in = {rgb, 4, 1, 3}, g, back;
    CHECK_OK(attn_image_convert(&g, &in, 1));
    /* BT.601 luma, PIL's convert("L"): 76, 150, 29 and round(2.99 + 117.4 + 3.42) = 124 */
    if (g.data)
        CHECK(g.data[0] == 76 && g.data[1] == 150 && g.data[2] == 29 && g.data[3] == 124, "luma %d %d %d %d", g.data[0],
              g.data[1], g.data[2], g.data[3]);
    CHECK_OK(attn_image_convert(&back, &g, 3));
    if (back.data) CHECK(back.data[9] == 124 && back.data[10] == 124 && back.data[11] == 124, "grey -> RGB repeats");
    attn_image_free(&g);
    attn_image_free(&back);
    CHECK_ERR(attn_image_convert(&g, &in, 2), ATTN_E_INVALID);
}

static void test_resize(void) {
    attn_image png, small, same;
    CHECK_OK(attn_image_load(&png, attn_test_fixture("vit/color_112.png")));
    CHECK_OK(attn_image_resize(&small, &png, 28, 28));
    attn_tensor ref;
    CHECK_OK(attn_npy_load(&ref, attn_test_fixture("vit/color_112_pil28.npy")));
    if (small.data && ref.data && attn_tensor_numel(&ref) == 28 * 28 * 3) {
        const int32_t *r = (const int32_t *)ref.data;
        int max_in = 0, max_edge = 0;
        double sum = 0;
        for (int y = 0; y < 28; y++)
            for (int x = 0; x < 28; x++)
                for (int c = 0; c < 3; c++) {
                    int i = (y * 28 + x) * 3 + c, d = abs((int)small.data[i] - (int)r[i]);
                    int edge = y == 0 || x == 0 || y == 27 || x == 27;
                    if (edge) max_edge = d > max_edge ? d : max_edge;
                    else max_in = d > max_in ? d : max_in;
                    sum += d;
                }
        printf("resize 112x96 -> 28x28 vs PIL BILINEAR: interior max %d, border max %d, mean %.3f levels\n", max_in, max_edge,
               sum / (28 * 28 * 3));
        /* documented in attn_image.h: about 1 level inside, a few at the border */
        CHECK(max_in <= 1, "interior max difference %d > 1", max_in);
        CHECK(max_edge <= 8, "border max difference %d > 8", max_edge);
    }
    attn_npy_free(&ref);
    /* the same size is an exact copy; enlarging works */
    CHECK_OK(attn_image_resize(&same, &png, 112, 96));
    CHECK(same.data && memcmp(same.data, png.data, 112 * 96 * 3) == 0, "same-size resize is a copy");
    attn_image_free(&same);
    CHECK_OK(attn_image_resize(&same, &png, 300, 17));
    CHECK(same.width == 300 && same.height == 17, "enlarge/shrink per axis");
    attn_image_free(&same);
    /* a constant image stays constant (weights sum to one, edges padded) */
    unsigned char flat[50 * 40];
    memset(flat, 77, sizeof flat);
    attn_image f = {flat, 50, 40, 1};
    CHECK_OK(attn_image_resize(&same, &f, 13, 29));
    int ok = same.data != NULL;
    for (int i = 0; ok && i < 13 * 29; i++) ok = same.data[i] == 77;
    CHECK(ok, "constant grey image stays 77 after resizing");
    attn_image_free(&same);
    CHECK_ERR(attn_image_resize(&same, &png, 0, 5), ATTN_E_INVALID);
    CHECK_ERR(attn_image_resize(&same, &png, 5, ATTN_IMAGE_MAX_SIDE + 1), ATTN_E_INVALID);
    attn_image_free(&small);
    attn_image_free(&png);
}

/* ------------------------------------------------------------------ IDX */

static void test_idx_dataset(void) {
    attn_idx im, lb;
    CHECK_OK(attn_idx_load(&im, FMNIST "t10k-images-idx3-ubyte.gz"));
    CHECK_OK(attn_idx_load(&lb, FMNIST "t10k-labels-idx1-ubyte.gz"));
    CHECK(im.ndim == 3 && im.dims[0] == 10000 && im.dims[1] == 28 && im.dims[2] == 28, "t10k images [10000, 28, 28]");
    CHECK(lb.ndim == 1 && lb.dims[0] == 10000, "t10k labels [10000]");
    if (lb.data) {
        /* the first labels of the Fashion-MNIST test set: 9 2 1 1 6 1 4 6 5 7 */
        static const int want[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
        int ok = 1;
        for (int i = 0; i < 10; i++) ok &= lb.data[i] == want[i];
        CHECK(ok, "first ten labels");
        int counts[10] = {0}, bad = 0;
        for (int i = 0; i < 10000; i++) {
            if (lb.data[i] < 10) counts[lb.data[i]]++;
            else bad++;
        }
        CHECK(bad == 0 && counts[0] == 1000 && counts[9] == 1000, "1000 test items per class");
    }
    attn_image item;
    CHECK_ERR(attn_idx_image(&item, &im, 10000), ATTN_E_RANGE);
    CHECK_ERR(attn_idx_image(&item, &lb, 0), ATTN_E_SHAPE);
    attn_idx_free(&lb);

    /* the same file uncompressed loads the same */
    if (im.data) {
        size_t n = 16 + (size_t)10000 * 784;
        unsigned char *raw = (unsigned char *)malloc(n);
        memcpy(raw, "\x00\x00\x08\x03\x00\x00\x27\x10\x00\x00\x00\x1c\x00\x00\x00\x1c", 16);
        memcpy(raw + 16, im.data, n - 16);
        attn_idx plain;
        CHECK_OK(attn_idx_decode(&plain, raw, n, 0));
        CHECK(plain.data && memcmp(plain.data, im.data, n - 16) == 0, "plain IDX equals the gzip'd one");
        attn_idx_free(&plain);
        CHECK_ERR(attn_idx_decode(&plain, raw, n - 1, 0), ATTN_E_FORMAT);
        CHECK(strstr(attn_last_error(), "truncated") != NULL, "message says truncated: %s", attn_last_error());
        free(raw);
    }
    attn_idx_free(&im);

    /* gzip'd file cut short or damaged */
    size_t gn = 0;
    unsigned char *gz = read_file(FMNIST "t10k-labels-idx1-ubyte.gz", &gn);
    if (gz) {
        attn_idx t;
        size_t cuts[] = {1, 2, 10, 30, gn / 2, gn - 4};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            int rc = attn_idx_decode(&t, gz, cuts[i], 0);
            CHECK(rc == ATTN_E_FORMAT, "gzip IDX cut to %zu bytes: rc %d (%s)", cuts[i], rc, attn_last_error());
            attn_idx_free(&t);
        }
        unsigned char *bad = (unsigned char *)malloc(gn);
        memcpy(bad, gz, gn);
        for (size_t i = gn / 2; i < gn / 2 + 16; i++) bad[i] ^= 0xA5;
        CHECK_ERR(attn_idx_decode(&t, bad, gn, 0), ATTN_E_FORMAT);
        write_bytes(tmp_path("cut.gz"), gz, gn / 2);
        CHECK_ERR(attn_idx_load(&t, tmp_path("cut.gz")), ATTN_E_FORMAT);
        CHECK(strstr(attn_last_error(), "cut.gz") != NULL, "message names the file: %s", attn_last_error());
        free(bad);
        free(gz);
    }
}

static void test_idx_headers(void) {
    attn_idx t;
    unsigned char ok[] = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6};
    CHECK_OK(attn_idx_decode(&t, ok, sizeof ok, 0));
    CHECK(t.ndim == 2 && t.dims[0] == 2 && t.dims[1] == 3 && t.data && t.data[5] == 6, "2x3 IDX");
    attn_idx_free(&t);
    unsigned char longer[sizeof ok + 1];
    memcpy(longer, ok, sizeof ok);
    longer[sizeof ok] = 9;
    CHECK_ERR(attn_idx_decode(&t, longer, sizeof longer, 0), ATTN_E_FORMAT); /* trailing data */
    unsigned char f32[] = {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0};
    CHECK_ERR(attn_idx_decode(&t, f32, sizeof f32, 0), ATTN_E_UNSUPPORTED);
    CHECK(strstr(attn_last_error(), "float32") != NULL, "names the type: %s", attn_last_error());
    unsigned char badmagic[] = {1, 0, 8, 1, 0, 0, 0, 0};
    CHECK_ERR(attn_idx_decode(&t, badmagic, sizeof badmagic, 0), ATTN_E_FORMAT);
    unsigned char badtype[] = {0, 0, 0x42, 1, 0, 0, 0, 0};
    CHECK_ERR(attn_idx_decode(&t, badtype, sizeof badtype, 0), ATTN_E_FORMAT);
    unsigned char nd0[] = {0, 0, 8, 0};
    CHECK_ERR(attn_idx_decode(&t, nd0, sizeof nd0, 0), ATTN_E_FORMAT);
    unsigned char nd9[] = {0, 0, 8, 9};
    CHECK_ERR(attn_idx_decode(&t, nd9, sizeof nd9, 0), ATTN_E_FORMAT);
    unsigned char shorthdr[] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0};
    CHECK_ERR(attn_idx_decode(&t, shorthdr, sizeof shorthdr, 0), ATTN_E_FORMAT);
    /* 4 x 2^32-1 x 2^32-1 bytes: refused before any allocation */
    unsigned char huge[] = {0, 0, 8, 3, 0, 0, 0, 4, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    CHECK_ERR(attn_idx_decode(&t, huge, sizeof huge, 0), ATTN_E_RANGE);
    unsigned char empty[] = {0, 0, 8, 1, 0, 0, 0, 0};
    CHECK_OK(attn_idx_decode(&t, empty, sizeof empty, 0));
    CHECK(t.dims[0] == 0, "empty IDX");
    attn_idx_free(&t);
    /* a gzip'd IDX made here (two concatenated members) */
    unsigned char gz[256];
    size_t gl = 0;
    for (int part = 0; part < 2; part++) {
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
        zs.next_in = part == 0 ? ok : ok + 9;
        zs.avail_in = part == 0 ? 9 : sizeof ok - 9;
        zs.next_out = gz + gl;
        zs.avail_out = (uInt)(sizeof gz - gl);
        deflate(&zs, Z_FINISH);
        gl = sizeof gz - zs.avail_out;
        deflateEnd(&zs);
    }
    CHECK_OK(attn_idx_decode(&t, gz, gl, 0));
    CHECK(t.ndim == 2 && t.data && t.data[0] == 1 && t.data[5] == 6, "two gzip members make one IDX");
    attn_idx_free(&t);
}

int main(void) {
    attn_test_name = "image";
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_image_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp failed");
        return attn_test_finish();
    }
    test_png_matches_idx();
    test_color_and_jpeg();
    test_alpha();
    test_bad_files();
    test_convert();
    test_resize();
    test_idx_dataset();
    test_idx_headers();
    unlink(tmp_path("cut.png"));
    unlink(tmp_path("cut.gz"));
    unlink(tmp_path("stdout.txt"));
    rmdir(tmpdir);
    return attn_test_finish();
}
