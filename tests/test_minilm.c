/* all-MiniLM-L6-v2 end to end against sentence-transformers / transformers (fixtures from
 * scripts/gen_minilm_fixtures.py): token ids, per-layer hidden states, embeddings, batch
 * invariance, and load / input errors (token-id parity is in test_tokenizer). Needs models/all-MiniLM-L6-v2 (scripts/fetch_minilm.sh). */
#include "attn.h"
#include "testutil.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MODEL "models/all-MiniLM-L6-v2"

static char **load_sentences(int64_t *n) {
    FILE *f = fopen(attn_test_fixture("minilm/sentences.jsonl"), "r");
    CHECK(f != NULL, "open minilm/sentences.jsonl");
    if (!f) return NULL;
    char **out = NULL;
    int64_t cnt = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        if (!j || !cJSON_IsString(j)) {
            CHECK(0, "bad jsonl line");
            cJSON_Delete(j);
            continue;
        }
        out = realloc(out, sizeof(char *) * (size_t)(cnt + 1));
        out[cnt++] = strdup(j->valuestring);
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    *n = cnt;
    return out;
}

static double cosine(const float *a, const float *b, int64_t n) {
    double d = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < n; i++) {
        d += (double)a[i] * b[i];
        na += (double)a[i] * a[i];
        nb += (double)b[i] * b[i];
    }
    return d / sqrt(na * nb);
}

int main(void) {
    attn_test_name = "minilm";
    struct stat sb;
    if (stat(MODEL "/model.safetensors", &sb) != 0) {
        CHECK(0, "%s is missing: run scripts/fetch_minilm.sh (the README set-up does)", MODEL);
        return attn_test_finish();
    }
    attn_bert *m = NULL;
    CHECK_OK(attn_bert_load(&m, MODEL));
    if (!m) return attn_test_finish();
    const attn_bert_config *c = attn_bert_get_config(m);
    CHECK(c->d_model == 384 && c->n_layers == 6 && c->n_heads == 12 && c->d_ff == 1536 && c->max_seq_len == 256 &&
              c->normalize == 1 && c->pooling == ATTN_POOL_MEAN,
          "config: 384/6/12/1536, max_seq_len 256, mean pooling, normalised");
    const int64_t E = 384;

    /* embeddings of every parity sentence (cosine >= 0.99999 each; max abs diff reported) */
    int64_t n = 0;
    char **s = load_sentences(&n);
    CHECK(n >= 58, "at least 50 real sentences + edge cases (%lld)", (long long)n);
    attn_tensor ref;
    CHECK_OK(attn_npy_load(&ref, attn_test_fixture("minilm/embeddings.npy")));
    float *emb = malloc(sizeof(float) * (size_t)(n * E));
    CHECK_OK(attn_bert_embed(m, emb, (const char *const *)s, n, 32, NULL, NULL));
    double worst = 1, maxdiff = 0;
    int64_t worst_i = -1;
    for (int64_t i = 0; i < n && ref.data; i++) {
        double cs = cosine(emb + i * E, (float *)ref.data + i * E, E);
        if (cs < worst) {
            worst = cs;
            worst_i = i;
        }
        maxdiff = fmax(maxdiff, attn_test_max_abs_diff(emb + i * E, (float *)ref.data + i * E, E));
    }
    CHECK(worst >= 0.99999, "embedding cosine to sentence-transformers >= 0.99999 (worst %.8f, sentence %lld)", worst,
          (long long)worst_i);
    /* 1e-5 abs on unit vectors: float32 accumulation-order differences only */
    CHECK(maxdiff <= 1e-5, "embedding max abs diff %.3g <= 1e-5", maxdiff);
    printf("minilm: %lld sentences, worst cosine %.9f, max abs diff %.3g\n", (long long)n, worst, maxdiff);

    /* a sentence inside a batch of mixed lengths equals the same sentence alone */
    float alone[384];
    double bdiff = 0;
    for (int64_t i = 0; i < n; i += 7) {
        CHECK_OK(attn_bert_embed(m, alone, (const char *const *)&s[i], 1, 1, NULL, NULL));
        bdiff = fmax(bdiff, attn_test_max_abs_diff(alone, emb + i * E, E));
    }
    CHECK(bdiff <= 1e-5, "batch vs alone max diff %.3g <= 1e-5", bdiff);

    /* per-layer hidden states of three sentences run as one padded batch: 1e-4 max abs */
    attn_tensor ids[3], hs[3];
    int64_t lens[3], L = 0;
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "minilm/ids_%d.npy", k);
        CHECK_OK(attn_npy_load(&ids[k], attn_test_fixture(name)));
        snprintf(name, sizeof name, "minilm/hidden_%d.npy", k);
        CHECK_OK(attn_npy_load(&hs[k], attn_test_fixture(name)));
        lens[k] = ids[k].shape[0];
        if (lens[k] > L) L = lens[k];
    }
    int32_t *bid = calloc((size_t)(3 * L), sizeof(int32_t));
    for (int k = 0; k < 3; k++) memcpy(bid + k * L, ids[k].data, sizeof(int32_t) * (size_t)lens[k]);
    float *last = malloc(sizeof(float) * (size_t)(3 * L * E));
    float *all = malloc(sizeof(float) * (size_t)(7 * 3 * L * E));
    attn_bert_extra ex = {all, NULL};
    attn_arena arena;
    attn_arena_init(&arena, 0);
    CHECK_OK(attn_bert_forward(m, last, &ex, bid, lens, 3, L, &arena));
    for (int k = 0; k < 3; k++)
        for (int layer = 0; layer < 7; layer++) {
            double d = 0;
            for (int64_t t = 0; t < lens[k]; t++)
                d = fmax(d, attn_test_max_abs_diff(all + ((layer * 3 + k) * L + t) * E,
                                                   (float *)hs[k].data + (layer * lens[k] + t) * E, E));
            CHECK(d <= 1e-4, "hidden state sentence %d (len %lld) layer %d: max abs diff %.3g <= 1e-4", k,
                  (long long)lens[k], layer, d);
        }
    for (int k = 0; k < 3; k++) {
        attn_npy_free(&ids[k]);
        attn_npy_free(&hs[k]);
    }

    /* errors */
    const char *bad[1] = {"valid start \xff\xfe invalid"};
    CHECK_ERR(attn_bert_embed(m, alone, bad, 1, 1, NULL, NULL), ATTN_E_FORMAT);
    CHECK(strstr(attn_last_error(), "sentence 1") != NULL, "error names the sentence: %s", attn_last_error());
    int32_t badid[2] = {101, 40000};
    int64_t bl = 2;
    CHECK_ERR(attn_bert_forward(m, last, NULL, badid, &bl, 1, 2, &arena), ATTN_E_RANGE);
    bl = 3;
    CHECK_ERR(attn_bert_forward(m, last, NULL, badid, &bl, 1, 2, &arena), ATTN_E_INVALID);
    attn_bert *m2 = NULL;
    CHECK_ERR(attn_bert_load(&m2, "/nonexistent/model"), ATTN_E_IO);
    CHECK(m2 == NULL, "failed load leaves *out NULL");
    /* a NaN weight is named at load time (issue 11), not reported later as "sdpa: q[...] is NaN":
     * a copy of the model with one query weight set to NaN */
    {
        char dir[64] = "/tmp/attn_test_nanw_XXXXXX", src[256], dst[600], cmd[1400];
        if (mkdtemp(dir)) {
            snprintf(cmd, sizeof cmd, "cp -r " MODEL "/. '%s'/", dir);
            CHECK(system(cmd) == 0, "copy the model");
            snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
            snprintf(src, sizeof src, "\"encoder.layer.0.attention.self.query.weight\"");
            FILE *f = fopen(dst, "r+b");
            unsigned char n8[8] = {0};
            if (f && fread(n8, 1, 8, f) == 8) {
                uint64_t hl = 0;
                for (int i = 7; i >= 0; i--) hl = hl << 8 | n8[i];
                char *h = calloc(1, (size_t)hl + 1);
                long long a = -1, b = -1;
                if (h && fread(h, 1, (size_t)hl, f) == hl) {
                    const char *at = strstr(h, src), *off = at ? strstr(at, "\"data_offsets\"") : NULL;
                    if (off) sscanf(strchr(off, '[') + 1, "%lld,%lld", &a, &b);
                }
                CHECK(a >= 0 && b > a, "found the query weight in the header");
                float nanv = NAN;
                long long pos = 8 + (long long)hl + a + 4 * (5 * 384 + 3); /* [5, 3] */
                if (a >= 0 && fseek(f, (long)pos, SEEK_SET) == 0) fwrite(&nanv, 4, 1, f);
                free(h);
            }
            if (f) fclose(f);
            attn_bert *m3 = NULL;
            CHECK_ERR(attn_bert_load(&m3, dir), ATTN_E_RANGE);
            CHECK(strstr(attn_last_error(), "encoder.layer.0.attention.self.query.weight") &&
                      strstr(attn_last_error(), "NaN at [5, 3]"),
                  "the message names the weight and the index: %s", attn_last_error());
            attn_bert_free(m3);
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
            if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
        }
    }

    attn_arena_free(&arena);
    free(bid);
    free(last);
    free(all);
    free(emb);
    attn_npy_free(&ref);
    for (int64_t i = 0; i < n; i++) free(s[i]);
    free(s);
    attn_bert_free(m);
    return attn_test_finish();
}
