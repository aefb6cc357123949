/* libFuzzer target for the Hugging Face model-directory JSON reader (formats/hf_config.c: BERT,
 * ViT and Whisper configuration files): the input is written as config.json in a private
 * directory and loaded as an object, then every typed getter reads the keys the model loaders
 * read, including nested objects (id2label) and arrays (image_mean). A value the getter accepts
 * must be in its range; any crash or sanitizer report is a bug. */
#include "formats/hf_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/attn_fuzz_hf_XXXXXX");
        if (!mkdtemp(dir)) return 0;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    attn__hf_json c;
    if (attn__hf_json_load(&c, "fuzz", dir, "config.json", 0, NULL) == ATTN_OK && c.root) {
        static const char *ints[] = {"hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                                     "max_position_embeddings", "vocab_size", "image_size", "patch_size", "num_channels"};
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
            int64_t v = -7;
            if (attn__hf_int(&c, NULL, ints[i], &v, 1, 1 << 20, 0) == ATTN_OK && v != -7 && (v < 1 || v > (1 << 20))) __builtin_trap();
        }
        float eps = -1.0f;
        if (attn__hf_float(&c, NULL, "layer_norm_eps", &eps, 0.0, 1.0) == ATTN_OK && eps != -1.0f && !(eps >= 0.0f && eps <= 1.0f))
            __builtin_trap();
        int b = 0;
        (void)attn__hf_bool(&c, NULL, "qkv_bias", &b);
        const char *s = NULL;
        (void)attn__hf_string(&c, NULL, "model_type", &s);
        if (s) (void)strlen(s);
        attn_activation act = ATTN_ACT_GELU;
        (void)attn__hf_activation(&c, NULL, "hidden_act", &act);
        const cJSON *labels = cJSON_GetObjectItemCaseSensitive(c.root, "id2label");
        if (cJSON_IsObject(labels)) {
            const cJSON *it;
            cJSON_ArrayForEach(it, labels) {
                const char *name = NULL;
                (void)attn__hf_string(&c, labels, it->string ? it->string : "", &name);
            }
        }
        const cJSON *mean = cJSON_GetObjectItemCaseSensitive(c.root, "image_mean");
        const cJSON *it;
        if (cJSON_IsArray(mean))
            cJSON_ArrayForEach(it, mean) {
                int64_t v = 0;
                (void)attn__hf_int_value(&c, it, "image_mean", &v, 0, 255);
            }
    }
    attn__hf_json_free(&c);
    return 0;
}
