/* libFuzzer target for PNG and JPEG decoding (libpng, libjpeg-turbo behind attn_image_decode)
 * with a 1 M-pixel limit; a decoded image is checked, converted to the other channel count and
 * resized. Any crash, sanitizer report or leak is a bug. */
#include "attn_image.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    attn_image img;
    if (attn_image_decode(&img, data, size, (int64_t)1 << 20) == ATTN_OK) {
        if (!img.data || img.width < 1 || img.height < 1 || (img.channels != 1 && img.channels != 3)) __builtin_trap();
        size_t n = (size_t)(img.width * img.height * img.channels);
        volatile unsigned sink = img.data[0] + img.data[n - 1];
        (void)sink;
        attn_image conv, small;
        if (attn_image_convert(&conv, &img, img.channels == 1 ? 3 : 1) == ATTN_OK) {
            if (attn_image_resize(&small, &conv, 9, 4) == ATTN_OK) attn_image_free(&small);
            attn_image_free(&conv);
        }
        attn_image_free(&img);
    }
    return 0;
}
