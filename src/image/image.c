/* Image decoding (libpng, libjpeg-turbo), channel conversion and resizing (pixman).
 * See attn_image.h. */
#include "attn_image.h"
#include "core/internal.h"

#include <setjmp.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE */
#include <pixman.h>
#include <png.h>

/* ---------------------------------------------------------------- helpers */

void attn_image_free(attn_image *img) {
    if (!img) return;
    free(img->data);
    memset(img, 0, sizeof *img);
}

static int attn__image_alloc(attn_image *out, int64_t w, int64_t h, int channels) {
    out->data = (uint8_t *)malloc((size_t)(w * h * channels) + 1);
    if (!out->data) return attn_set_error(ATTN_E_NOMEM, "image: out of memory for %lld x %lld pixels", (long long)w, (long long)h);
    out->width = w;
    out->height = h;
    out->channels = channels;
    return ATTN_OK;
}

static int attn__check_size(int64_t w, int64_t h, int64_t max_pixels, const char *what) {
    if (w < 1 || h < 1) return attn_set_error(ATTN_E_FORMAT, "%s: image has no pixels (%lld x %lld)", what, (long long)w, (long long)h);
    if (w > ATTN_IMAGE_MAX_SIDE || h > ATTN_IMAGE_MAX_SIDE || w * h > max_pixels)
        return attn_set_error(ATTN_E_RANGE, "%s: image of %lld x %lld pixels is larger than the limit (%d per side, %lld pixels)",
                              what, (long long)w, (long long)h, ATTN_IMAGE_MAX_SIDE, (long long)max_pixels);
    return ATTN_OK;
}

/* Composite colour c with alpha a onto white: round((c·a + 255·(255 − a)) / 255). */
static inline uint8_t attn__over_white(unsigned c, unsigned a) {
    return (uint8_t)((c * a + 255u * (255u - a) + 127u) / 255u);
}

/* ---------------------------------------------------------------- PNG (libpng simplified API) */

static int attn__decode_png(attn_image *out, const void *data, size_t size, int64_t max_pixels) {
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, data, size)) {
        int rc = attn_set_error(ATTN_E_FORMAT, "PNG: %s", img.message[0] ? img.message : "cannot read the header");
        png_image_free(&img);
        return rc;
    }
    int color = (img.format & PNG_FORMAT_FLAG_COLOR) != 0;
    int rc = attn__check_size((int64_t)img.width, (int64_t)img.height, max_pixels, "PNG");
    if (rc < 0) {
        png_image_free(&img);
        return rc;
    }
    /* read with alpha (GA or RGBA, 8-bit sRGB), composite onto white ourselves */
    img.format = color ? PNG_FORMAT_RGBA : PNG_FORMAT_GA;
    int in_ch = color ? 4 : 2, ch = color ? 3 : 1;
    int64_t w = img.width, h = img.height;
    uint8_t *buf = (uint8_t *)malloc((size_t)(w * h * in_ch));
    if (!buf) {
        png_image_free(&img);
        return attn_set_error(ATTN_E_NOMEM, "PNG: out of memory for %lld x %lld pixels", (long long)w, (long long)h);
    }
    if (!png_image_finish_read(&img, NULL, buf, (png_int_32)(w * in_ch), NULL)) {
        rc = attn_set_error(ATTN_E_FORMAT, "PNG: %s", img.message[0] ? img.message : "corrupt image data");
        png_image_free(&img);
        free(buf);
        return rc;
    }
    png_image_free(&img);
    if (img.warning_or_error & PNG_IMAGE_ERROR) { /* an error libpng recovered from (warnings, e.g. on
                                                      * ancillary chunks, are accepted as PIL does) */
        free(buf);
        return attn_set_error(ATTN_E_FORMAT, "PNG: %s", img.message[0] ? img.message : "corrupt image data");
    }
    rc = attn__image_alloc(out, w, h, ch);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    int64_t n = w * h;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *s = buf + i * in_ch;
        unsigned a = s[in_ch - 1];
        for (int c = 0; c < ch; c++) out->data[i * ch + c] = a == 255 ? s[c] : attn__over_white(s[c], a);
    }
    free(buf);
    return ATTN_OK;
}

/* ---------------------------------------------------------------- JPEG (libjpeg-turbo) */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} attn__jpeg_err;

static void attn__jpeg_error_exit(j_common_ptr cinfo) {
    attn__jpeg_err *e = (attn__jpeg_err *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->msg);
    longjmp(e->jb, 1);
}

/* Warnings (corrupt data, premature end of file) become errors: libjpeg would otherwise
 * return a partly grey picture as if nothing happened. Trace messages (level > 0) are
 * ignored. */
static void attn__jpeg_emit(j_common_ptr cinfo, int level) {
    if (level < 0) attn__jpeg_error_exit(cinfo);
}

/* A progressive JPEG may hold any number of scans, each a pass over the whole picture;
 * more than this is treated as hostile (real encoders write about 10). */
#define ATTN__JPEG_MAX_SCANS 256

static void attn__jpeg_progress(j_common_ptr cinfo) {
    if (cinfo->is_decompressor) {
        j_decompress_ptr d = (j_decompress_ptr)cinfo;
        if (d->input_scan_number > ATTN__JPEG_MAX_SCANS) {
            attn__jpeg_err *e = (attn__jpeg_err *)cinfo->err;
            snprintf(e->msg, sizeof e->msg, "more than %d progressive scans", ATTN__JPEG_MAX_SCANS);
            longjmp(e->jb, 2);
        }
    }
}

static int attn__decode_jpeg(attn_image *out, const void *data, size_t size, int64_t max_pixels) {
    struct jpeg_decompress_struct cinfo;
    attn__jpeg_err jerr;
    struct jpeg_progress_mgr prog;
    /* volatile: modified between setjmp and longjmp */
    uint8_t *volatile pixels = NULL;
    volatile int rc = ATTN_OK;
    memset(&cinfo, 0, sizeof cinfo);
    cinfo.err = jpeg_std_error(&jerr.pub);
    jerr.pub.error_exit = attn__jpeg_error_exit;
    jerr.pub.emit_message = attn__jpeg_emit;
    jerr.msg[0] = 0;
    int jump = setjmp(jerr.jb);
    if (jump) {
        jpeg_destroy_decompress(&cinfo);
        free(pixels);
        if (rc < 0) return rc;
        return attn_set_error(ATTN_E_FORMAT, "JPEG: %s", jerr.msg[0] ? jerr.msg : "corrupt data");
    }
    jpeg_create_decompress(&cinfo);
    prog.progress_monitor = attn__jpeg_progress;
    cinfo.progress = &prog;
    jpeg_mem_src(&cinfo, (const unsigned char *)data, (unsigned long)size);
    jpeg_read_header(&cinfo, TRUE);
    int ch;
    switch (cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE: ch = 1; cinfo.out_color_space = JCS_GRAYSCALE; break;
    case JCS_YCbCr:
    case JCS_RGB: ch = 3; cinfo.out_color_space = JCS_RGB; break;
    default:
        rc = attn_set_error(ATTN_E_UNSUPPORTED, "JPEG: colour space %d (CMYK/YCCK) is not supported; convert the picture to RGB",
                            (int)cinfo.jpeg_color_space);
        longjmp(jerr.jb, 3);
    }
    int64_t w = cinfo.image_width, h = cinfo.image_height;
    {
        int r = attn__check_size(w, h, max_pixels, "JPEG");
        if (r < 0) {
            rc = r;
            longjmp(jerr.jb, 3);
        }
    }
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_components != ch || (int64_t)cinfo.output_width != w || (int64_t)cinfo.output_height != h) {
        rc = attn_set_error(ATTN_E_FORMAT, "JPEG: unexpected output geometry");
        longjmp(jerr.jb, 3);
    }
    pixels = (uint8_t *)malloc((size_t)(w * h * ch) + 1);
    if (!pixels) {
        rc = attn_set_error(ATTN_E_NOMEM, "JPEG: out of memory for %lld x %lld pixels", (long long)w, (long long)h);
        longjmp(jerr.jb, 3);
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = pixels + (size_t)cinfo.output_scanline * (size_t)(w * ch);
        if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {
            rc = attn_set_error(ATTN_E_FORMAT, "JPEG: truncated image data");
            longjmp(jerr.jb, 3);
        }
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    out->data = pixels;
    out->width = w;
    out->height = h;
    out->channels = ch;
    return ATTN_OK;
}

/* ---------------------------------------------------------------- load */

int attn_image_decode(attn_image *out, const void *data, size_t size, int64_t max_pixels) {
    if (!out || (!data && size)) return attn_set_error(ATTN_E_INVALID, "image_decode: NULL argument");
    memset(out, 0, sizeof *out);
    if (max_pixels <= 0) max_pixels = ATTN_IMAGE_MAX_PIXELS;
    const uint8_t *p = (const uint8_t *)data;
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (size >= 8 && memcmp(p, png_sig, 8) == 0) return attn__decode_png(out, data, size, max_pixels);
    if (size >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) return attn__decode_jpeg(out, data, size, max_pixels);
    if (size == 0) return attn_set_error(ATTN_E_FORMAT, "empty file: not a PNG or JPEG image");
    return attn_set_error(ATTN_E_FORMAT, "not a PNG or JPEG file (unknown signature)");
}

/* attn_image_decode with its default limit, in attn__decode_file's form */
static int decode_whole(void *out, const void *data, size_t size) {
    return attn_image_decode((attn_image *)out, data, size, 0);
}

int attn_image_load(attn_image *out, const char *path) {
    if (!out || !path) return attn_set_error(ATTN_E_INVALID, "image_load: NULL argument");
    memset(out, 0, sizeof *out);
    return attn__decode_file(path, (size_t)1 << 30, decode_whole, out);
}

/* ---------------------------------------------------------------- convert */

int attn_image_convert(attn_image *out, const attn_image *in, int channels) {
    if (!out || !in || !in->data) return attn_set_error(ATTN_E_INVALID, "image_convert: NULL argument");
    if (channels != 1 && channels != 3) return attn_set_error(ATTN_E_INVALID, "image_convert: channels must be 1 or 3, got %d", channels);
    if ((in->channels != 1 && in->channels != 3) || in->width < 1 || in->height < 1)
        return attn_set_error(ATTN_E_INVALID, "image_convert: input must be a non-empty 1- or 3-channel image");
    memset(out, 0, sizeof *out);
    ATTN_TRY(attn__image_alloc(out, in->width, in->height, channels));
    int64_t n = in->width * in->height;
    if (in->channels == channels) {
        memcpy(out->data, in->data, (size_t)(n * channels));
    } else if (channels == 3) {
        for (int64_t i = 0; i < n; i++) out->data[3 * i] = out->data[3 * i + 1] = out->data[3 * i + 2] = in->data[i];
    } else {
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *s = in->data + 3 * i;
            out->data[i] = (uint8_t)((299u * s[0] + 587u * s[1] + 114u * s[2] + 500u) / 1000u);
        }
    }
    return ATTN_OK;
}

/* ---------------------------------------------------------------- resize (pixman) */

/* Set the separable filter of one pixman source image: per axis, a triangle of radius
 * `scale` source pixels sampled at the source pixel centres when shrinking (PIL's
 * antialiased bilinear), plain bilinear interpolation when enlarging. */
static int attn__set_filter(pixman_image_t *src, double sx, double sy) {
    pixman_kernel_t rx = sx > 1 ? PIXMAN_KERNEL_IMPULSE : PIXMAN_KERNEL_LINEAR;
    pixman_kernel_t kx = sx > 1 ? PIXMAN_KERNEL_LINEAR : PIXMAN_KERNEL_IMPULSE;
    pixman_kernel_t ry = sy > 1 ? PIXMAN_KERNEL_IMPULSE : PIXMAN_KERNEL_LINEAR;
    pixman_kernel_t ky = sy > 1 ? PIXMAN_KERNEL_LINEAR : PIXMAN_KERNEL_IMPULSE;
    int n = 0;
    pixman_fixed_t *params = pixman_filter_create_separable_convolution(
        &n, pixman_double_to_fixed(sx > 1 ? sx : 1.0), pixman_double_to_fixed(sy > 1 ? sy : 1.0), rx, ry, kx, ky, 8, 8);
    if (!params) return attn_set_error(ATTN_E_NOMEM, "image_resize: pixman could not build the filter");
    pixman_bool_t ok = pixman_image_set_filter(src, PIXMAN_FILTER_SEPARABLE_CONVOLUTION, params, n);
    free(params);
    return ok ? ATTN_OK : attn_set_error(ATTN_E_NOMEM, "image_resize: pixman rejected the filter");
}

int attn_image_resize(attn_image *out, const attn_image *in, int64_t width, int64_t height) {
    if (!out || !in || !in->data) return attn_set_error(ATTN_E_INVALID, "image_resize: NULL argument");
    if ((in->channels != 1 && in->channels != 3) || in->width < 1 || in->height < 1 || in->width > ATTN_IMAGE_MAX_SIDE ||
        in->height > ATTN_IMAGE_MAX_SIDE)
        return attn_set_error(ATTN_E_INVALID, "image_resize: input must be a 1- or 3-channel image of 1..%d pixels per side",
                              ATTN_IMAGE_MAX_SIDE);
    if (width < 1 || height < 1 || width > ATTN_IMAGE_MAX_SIDE || height > ATTN_IMAGE_MAX_SIDE)
        return attn_set_error(ATTN_E_INVALID, "image_resize: target size %lld x %lld is outside 1..%d", (long long)width,
                              (long long)height, ATTN_IMAGE_MAX_SIDE);
    memset(out, 0, sizeof *out);
    ATTN_TRY(attn__image_alloc(out, width, height, in->channels));
    if (width == in->width && height == in->height) {
        memcpy(out->data, in->data, (size_t)(width * height * in->channels));
        return ATTN_OK;
    }
    /* pixman works on 32-bit pixels here: grey goes in the alpha channel of a8r8g8b8
     * (a8 sources with convolution filters go through the same 32-bit path), RGB in x8r8g8b8. */
    int ch = in->channels;
    pixman_format_code_t fmt = ch == 1 ? PIXMAN_a8r8g8b8 : PIXMAN_x8r8g8b8;
    uint32_t *sbuf = (uint32_t *)malloc((size_t)(in->width * in->height) * 4);
    uint32_t *dbuf = (uint32_t *)malloc((size_t)(width * height) * 4);
    pixman_image_t *src = NULL, *dst = NULL;
    int rc = ATTN_OK;
    if (!sbuf || !dbuf) rc = attn_set_error(ATTN_E_NOMEM, "image_resize: out of memory");
    if (rc == 0) {
        int64_t n = in->width * in->height;
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *s = in->data + i * ch;
            sbuf[i] = ch == 1 ? (uint32_t)s[0] << 24 : 0xFF000000u | (uint32_t)s[0] << 16 | (uint32_t)s[1] << 8 | s[2];
        }
        src = pixman_image_create_bits(fmt, (int)in->width, (int)in->height, sbuf, (int)(in->width * 4));
        dst = pixman_image_create_bits(fmt, (int)width, (int)height, dbuf, (int)(width * 4));
        if (!src || !dst) rc = attn_set_error(ATTN_E_NOMEM, "image_resize: pixman could not create the images");
    }
    if (rc == 0) {
        double sx = (double)in->width / (double)width, sy = (double)in->height / (double)height;
        pixman_transform_t t;
        pixman_transform_init_scale(&t, pixman_double_to_fixed(sx), pixman_double_to_fixed(sy));
        if (!pixman_image_set_transform(src, &t)) rc = attn_set_error(ATTN_E_NOMEM, "image_resize: pixman transform");
        if (rc == 0) rc = attn__set_filter(src, sx, sy);
        if (rc == 0) {
            pixman_image_set_repeat(src, PIXMAN_REPEAT_PAD);
            pixman_image_composite32(PIXMAN_OP_SRC, src, NULL, dst, 0, 0, 0, 0, 0, 0, (int)width, (int)height);
            int64_t n = width * height;
            for (int64_t i = 0; i < n; i++) {
                uint32_t v = dbuf[i];
                uint8_t *d = out->data + i * ch;
                if (ch == 1) {
                    d[0] = (uint8_t)(v >> 24);
                } else {
                    d[0] = (uint8_t)(v >> 16);
                    d[1] = (uint8_t)(v >> 8);
                    d[2] = (uint8_t)v;
                }
            }
        }
    }
    if (src) pixman_image_unref(src);
    if (dst) pixman_image_unref(dst);
    free(sbuf);
    free(dbuf);
    if (rc < 0) attn_image_free(out);
    return rc;
}
