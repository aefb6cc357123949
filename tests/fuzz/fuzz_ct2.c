/* libFuzzer target for the CTranslate2 model.bin reader: the input is parsed from memory; a
 * successful parse is checked for consistency (every variable's bytes inside the input, sizes
 * matching shapes and dtypes, every alias resolving) and each variable is converted to float32.
 * Any crash, sanitizer report or leak is a bug. */
#include "attn_ct2.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    attn_ct2_file *f = NULL;
    if (attn_ct2_parse(&f, data, size) != ATTN_OK) {
        if (f) __builtin_trap();
        return 0;
    }
    for (int64_t i = 0; i < attn_ct2_num_variables(f); i++) {
        const attn_ct2_var *v = attn_ct2_variable(f, i);
        const uint8_t *p = (const uint8_t *)v->data;
        if (v->rank < 0 || v->rank > ATTN_MAX_DIMS || p < data || p + v->nbytes > data + size) __builtin_trap();
        if (attn_ct2_find(f, v->name) == NULL) __builtin_trap();
        if (v->numel <= 4096) {
            float *x = (float *)malloc(sizeof(float) * (size_t)(v->numel + 1));
            if (x) {
                attn_ct2_read_f32(x, v);
                free(x);
            }
        }
    }
    for (int64_t i = 0; i < attn_ct2_num_aliases(f); i++) {
        const char *target = NULL;
        const char *name = attn_ct2_alias(f, i, &target);
        if (!name || !target || attn_ct2_find(f, name) != attn_ct2_find(f, target)) __builtin_trap();
    }
    attn_ct2_close(f);
    return 0;
}
