/* libFuzzer target for the IDX reader (plain and gzip'd): attn_idx_decode on the input with a
 * 16 MiB data limit; a successful decode is checked for consistency and, when 3-D, its first
 * item is viewed as an image and resized. Any crash, sanitizer report or leak is a bug. */
#include "attn_image.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    attn_idx idx;
    if (attn_idx_decode(&idx, data, size, (int64_t)16 << 20) == ATTN_OK) {
        if (idx.ndim < 1 || idx.ndim > 4 || !idx.data) __builtin_trap();
        int64_t n = 1;
        for (int d = 0; d < idx.ndim; d++) {
            if (idx.dims[d] < 0) __builtin_trap();
            n *= idx.dims[d];
        }
        volatile unsigned sink = 0;
        for (int64_t i = 0; i < n; i += 61) sink += idx.data[i];
        if (n > 0) sink += idx.data[n - 1];
        (void)sink;
        attn_image img, small;
        if (idx.ndim == 3 && idx.dims[0] > 0 && attn_idx_image(&img, &idx, 0) == ATTN_OK && img.width * img.height > 0 &&
            img.width * img.height <= 1 << 16) {
            if (attn_image_resize(&small, &img, 7, 5) == ATTN_OK) attn_image_free(&small);
        }
        attn_idx_free(&idx);
    }
    return 0;
}
