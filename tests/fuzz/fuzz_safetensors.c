/* libFuzzer target for the safetensors reader: open a file image from memory, walk every
 * tensor and metadata entry, read every tensor as float32 (with and without its own shape
 * as the expected shape), close. Any crash, sanitizer report or leak is a bug. */
#include "attn_safetensors.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    attn_safetensors *st = NULL;
    if (attn_safetensors_open_memory(&st, data, size) != ATTN_OK) {
        if (st) __builtin_trap(); /* a failed open must not hand out a handle */
        return 0;
    }
    attn_arena arena;
    attn_arena_init(&arena, 1 << 16);
    volatile float sink = 0;
    int n = attn_safetensors_count(st);
    for (int i = 0; i < n; i++) {
        const char *name = attn_safetensors_name(st, i);
        if (!name || attn_safetensors_find(st, name) != i) __builtin_trap();
        attn_safetensors_info info;
        if (attn_safetensors_info_at(&info, st, i) != ATTN_OK) __builtin_trap();
        if (info.nbytes != (uint64_t)info.numel * info.elem_size) __builtin_trap();
        const void *raw;
        uint64_t nb;
        if (attn_safetensors_data(&raw, &nb, st, i) != ATTN_OK || nb != info.nbytes) __builtin_trap();
        const uint8_t *r = (const uint8_t *)raw;
        if (nb && (r < data || r + nb > data + size)) __builtin_trap();

        attn_tensor t;
        if (attn_safetensors_get_f32(st, name, &t, &arena) == ATTN_OK) {
            int64_t numel = attn_tensor_numel(&t);
            if (numel != info.numel) __builtin_trap();
            const float *f = (const float *)t.data;
            for (int64_t k = 0; k < numel; k++) sink += f[k];
        }
        if (info.ndim <= ATTN_MAX_DIMS) {
            int rc = attn_safetensors_get_f32_shape(st, name, &t, &arena, info.ndim, info.shape);
            if (rc == ATTN_E_SHAPE) __builtin_trap();
        }
        int64_t wrong[1] = {info.numel + 1};
        if (attn_safetensors_get_f32_shape(st, name, &t, &arena, 1, wrong) == ATTN_OK) __builtin_trap();
        attn_arena_reset(&arena);
    }
    int m = attn_safetensors_metadata_count(st);
    for (int i = 0; i < m; i++) {
        const char *k, *v;
        if (attn_safetensors_metadata_at(&k, &v, st, i) != ATTN_OK) __builtin_trap();
        const char *v2 = attn_safetensors_metadata(st, k);
        if (!v2 || strcmp(v, v2) != 0) __builtin_trap();
    }
    (void)sink;
    attn_arena_free(&arena);
    attn_safetensors_close(st);
    return 0;
}
