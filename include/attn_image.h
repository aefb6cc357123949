/*
 * attn_image.h — images for vision models: PNG and JPEG decoding, IDX data sets (MNIST,
 * Fashion-MNIST), channel conversion and resizing.
 *
 * An attn_image owns 8-bit pixels, row-major, channels interleaved: pixel (y, x) channel c
 * is data[(y * width + x) * channels + c]; channels is 1 (grey) or 3 (RGB, sRGB values as
 * stored in the file; no colour management).
 *
 * Decoders (well-kept libraries, never our own):
 *   PNG   libpng 1.6 simplified API (png_image_*): any bit depth, palette, grey, RGB, with or
 *         without alpha; 16-bit samples are reduced to 8 bits by libpng. An alpha channel is
 *         composited onto white, out = (c·a + 255·(255 − a)) / 255 rounded, as transformers'
 *         convert_to_rgb (PIL alpha_composite over white) does, then dropped.
 *   JPEG  libjpeg-turbo (libjpeg API, jpeg_mem_src): baseline and progressive, grey or YCbCr
 *         (decoded to RGB); CMYK/YCCK are ATTN_E_UNSUPPORTED. Any libjpeg warning (corrupt
 *         or truncated data, which libjpeg would otherwise fill with grey) is an error.
 *   IDX   the format of LeCun's MNIST files: big-endian, magic 0x00 0x00 TYPE NDIM, NDIM
 *         32-bit extents, then the data in C order. Unsigned-byte data (TYPE 0x08) only.
 *         gzip'd files (RFC 1952, as distributed) are inflated with zlib; plain files too.
 * The file type is found from the content (PNG / JPEG / gzip signatures), not the name.
 *
 * Limits: an image side is at most ATTN_IMAGE_MAX_SIDE pixels and the pixel count at most
 * `max_pixels` (ATTN_IMAGE_MAX_PIXELS for attn_image_load), checked from the header before
 * any pixel memory is allocated, so a small hostile file cannot request gigabytes.
 */
#ifndef ATTN_IMAGE_H
#define ATTN_IMAGE_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_IMAGE_MAX_SIDE 16384
#define ATTN_IMAGE_MAX_PIXELS ((int64_t)1 << 27) /* 134 M pixels */

typedef struct {
    uint8_t *data;   /* height * width * channels bytes (malloc'ed; attn_image_free) */
    int64_t width;   /* pixels */
    int64_t height;  /* pixels */
    int channels;    /* 1 grey, 3 RGB */
} attn_image;

/* attn_image_load: decode the PNG or JPEG file at `path` (type from its signature) into
 * *out (grey files stay 1 channel, colour files become 3; alpha composited onto white).
 * Errors: ATTN_E_IO (cannot open/read; message names the path), ATTN_E_FORMAT (neither a
 * PNG nor a JPEG signature, or corrupt/truncated data: the decoder's message is quoted),
 * ATTN_E_UNSUPPORTED (CMYK JPEG), ATTN_E_RANGE (larger than the limits above),
 * ATTN_E_NOMEM. On error *out is zeroed. */
int attn_image_load(attn_image *out, const char *path);

/* attn_image_decode: attn_image_load on an in-memory file of `size` bytes; max_pixels <= 0
 * means ATTN_IMAGE_MAX_PIXELS. Errors as attn_image_load (no ATTN_E_IO). */
int attn_image_decode(attn_image *out, const void *data, size_t size, int64_t max_pixels);

/* attn_image_free: release the pixels and zero the struct (NULL-safe). */
void attn_image_free(attn_image *img);

/* attn_image_convert: a copy of `in` with `channels` channels (1 or 3):
 *   grey -> RGB  R = G = B = grey;
 *   RGB -> grey  L = R·299/1000 + G·587/1000 + B·114/1000 rounded to nearest (ITU-R
 *                BT.601 luma, the formula PIL's convert("L") documents);
 *   same count   a plain copy.
 * Errors: ATTN_E_INVALID (NULL, bad channel count, empty input), ATTN_E_NOMEM. */
int attn_image_convert(attn_image *out, const attn_image *in, int channels);

/* attn_image_resize: `in` resampled to width x height with pixman (the library cairo draws
 * with), as a separable filter per axis chosen like PIL's Image.resize(BILINEAR):
 * downscaling by s > 1 samples with a triangle (tent) kernel of radius s source pixels
 * (antialiased); upscaling interpolates bilinearly. Pixel centres map as PIL's do:
 * source x = (x + 0.5) · in_w / out_w. The same size gives an exact copy.
 * Differences from PIL (documented, measured in tests/test_image.c against PIL output):
 * pixman rounds the sample position to 1/256 pixel (8 sub-sample bits) and its filter
 * weights to 16.16 fixed point, and at the border it repeats the edge pixels
 * (PIXMAN_REPEAT_PAD) where PIL drops the kernel taps outside the image and renormalises
 * the rest, so edge pixels of a downscaled image can differ by a few levels; away from the
 * border results agree to about 1 level of 255.
 * Errors: ATTN_E_INVALID (NULL, size < 1 or > ATTN_IMAGE_MAX_SIDE, empty input),
 * ATTN_E_NOMEM. */
int attn_image_resize(attn_image *out, const attn_image *in, int64_t width, int64_t height);

/* An IDX array of unsigned bytes (data set images [N, H, W] or labels [N]). */
typedef struct {
    uint8_t *data;    /* prod(dims) bytes, C order (malloc'ed; attn_idx_free) */
    int ndim;         /* 1 .. 4 */
    int64_t dims[4];  /* extents, dims[0] = item count */
} attn_idx;

/* attn_idx_load: read an IDX file, gzip'd (detected from the signature 1f 8b) or plain.
 * The whole decompressed size must be exactly header + prod(dims) bytes.
 * Errors: ATTN_E_IO (cannot open/read), ATTN_E_FORMAT (bad magic, NDIM 0 or > 4, corrupt
 * or truncated gzip stream, data shorter than the header promises — "truncated: N of M
 * bytes" — or longer), ATTN_E_UNSUPPORTED (element type other than unsigned byte),
 * ATTN_E_RANGE (more than 1 GiB of data), ATTN_E_NOMEM. On error *out is zeroed. */
int attn_idx_load(attn_idx *out, const char *path);

/* attn_idx_decode: attn_idx_load on an in-memory file; max_bytes <= 0 means 1 GiB (a larger
 * data section is ATTN_E_RANGE, checked before allocation). Errors as attn_idx_load. */
int attn_idx_decode(attn_idx *out, const void *data, size_t size, int64_t max_bytes);

/* attn_idx_free: release the data and zero the struct (NULL-safe). */
void attn_idx_free(attn_idx *idx);

/* attn_idx_image: item i of a 3-D IDX [N, H, W] as a 1-channel image that BORROWS the IDX
 * memory (do not attn_image_free it). Errors: ATTN_E_SHAPE (not 3-D), ATTN_E_RANGE (i
 * outside 0..N-1), ATTN_E_INVALID (NULL). */
int attn_idx_image(attn_image *out, const attn_idx *idx, int64_t i);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_IMAGE_H */
