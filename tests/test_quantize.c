/* GGUF writer and `attn quantize`:
 *   - the writer: metadata copied byte for byte, tensors of every type read back equal, the
 *     target untouched on abort or incomplete data;
 *   - `attn quantize` on SmolLM2-135M-Instruct (Q4_1, requantized) into Q4_K_M, Q6_K and Q5_0:
 *     llama.cpp's per-tensor mix, general.file_type, the warning about requantizing, out == in
 *     refused (same path, symbolic link, hard link), unknown type;
 *   - `attn generate` runs on the outputs, and their next-token predictions along a fixed text
 *     stay close to the Q4_1 model's (stated below). */
#include "attn.h"
#include "attn_gguf.h"
#include "attn_llama.h"
#include "attn_quant.h"
#include "attn_sampling.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#define SMOL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define KVT "tests/fuzz/seeds_fuzz_gguf/kv_types.gguf"
#define KQ "tests/fuzz/seeds_fuzz_gguf/kquants.gguf"

static char dir[] = "/tmp/attn_quantize_XXXXXX";

static void test_writer(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/w.gguf", dir);
    attn_gguf *a = NULL, *k = NULL, *r = NULL;
    CHECK_OK(attn_gguf_open(&a, KVT));
    CHECK_OK(attn_gguf_open(&k, KQ));
    if (!a || !k) return;
    attn_gguf_writer *w = NULL;
    CHECK_OK(attn_gguf_writer_open(&w, path, 64));
    for (int64_t i = 0; i < attn_gguf_n_kv(a); i++) {
        int type;
        const void *p;
        size_t len;
        CHECK_OK(attn_gguf_kv_raw(a, i, &type, &p, &len));
        CHECK_OK(attn_gguf_writer_kv(w, attn_gguf_kv_key(a, i), type, p, len));
    }
    CHECK_OK(attn_gguf_writer_kv_u32(w, "t.u32", 7)); /* replaces in place */
    CHECK_ERR(attn_gguf_writer_kv_u32(w, "general.alignment", 32), ATTN_E_INVALID);
    { /* arrays the reader refuses: an empty one of an unknown element type (found by fuzz_gguf_write),
       * and one nested deeper than the reader's 4 levels; 4 levels are accepted */
        unsigned char arr[5 * 12] = {0};
        const uint32_t unknown = 61744, array = ATTN_GGUF_ARRAY, u8 = ATTN_GGUF_UINT8;
        const uint64_t one = 1;
        memcpy(arr, &unknown, 4);
        CHECK_ERR(attn_gguf_writer_kv(w, "t.bad_empty", ATTN_GGUF_ARRAY, arr, 12), ATTN_E_INVALID);
        for (int lvl = 0; lvl < 5; lvl++) { /* 4 array headers each holding one array, then an empty one of uint8 */
            memcpy(arr + 12 * lvl, lvl < 4 ? &array : &u8, 4);
            memcpy(arr + 12 * lvl + 4, lvl < 4 ? &one : &(uint64_t){0}, 8);
        }
        CHECK_ERR(attn_gguf_writer_kv(w, "t.too_deep", ATTN_GGUF_ARRAY, arr, sizeof arr), ATTN_E_INVALID);
        memcpy(arr + 36, &u8, 4);
        memcpy(arr + 40, &(uint64_t){0}, 8);
        CHECK_OK(attn_gguf_writer_kv(w, "t.deep4", ATTN_GGUF_ARRAY, arr, 48));
    }
    for (int64_t i = 0; i < attn_gguf_n_tensors(k); i++) {
        attn_gguf_tensor t;
        attn_gguf_tensor_at(k, i, &t);
        CHECK_OK(attn_gguf_writer_tensor(w, t.name, t.type, t.n_dims, t.ne));
    }
    int64_t ne1[1] = {5};
    CHECK_OK(attn_gguf_writer_tensor(w, "f32", ATTN_QT_F32, 1, ne1));
    CHECK_ERR(attn_gguf_writer_tensor(w, "f32", ATTN_QT_F32, 1, ne1), ATTN_E_INVALID);
    int64_t bad[2] = {300, 2};
    CHECK_ERR(attn_gguf_writer_tensor(w, "bad", ATTN_QT_Q4_K, 2, bad), ATTN_E_INVALID);
    for (int64_t i = 0; i < attn_gguf_n_tensors(k); i++) {
        attn_gguf_tensor t;
        attn_gguf_tensor_at(k, i, &t);
        CHECK_OK(attn_gguf_writer_data(w, t.data, t.nbytes / 2)); /* in two parts */
        CHECK_OK(attn_gguf_writer_data(w, (const char *)t.data + t.nbytes / 2, t.nbytes - t.nbytes / 2));
    }
    const float five[5] = {1, 2, 3, 4, 5};
    CHECK_OK(attn_gguf_writer_data(w, five, sizeof five));
    CHECK_ERR(attn_gguf_writer_data(w, five, 4), ATTN_E_INVALID);
    CHECK_OK(attn_gguf_writer_commit(w));
    CHECK_OK(attn_gguf_open(&r, path));
    if (r) {
        /* general.alignment first, then every entry of kv_types.gguf in order, then t.deep4 */
        int same = attn_gguf_n_kv(r) == attn_gguf_n_kv(a) + 2 && /* + t.deep4 last */ attn_gguf_alignment(r) == 64 &&
                   strcmp(attn_gguf_kv_key(r, 0), "general.alignment") == 0;
        for (int64_t i = 0; same && i < attn_gguf_n_kv(a); i++) {
            int t1, t2;
            const void *p1, *p2;
            size_t l1, l2;
            attn_gguf_kv_raw(a, i, &t1, &p1, &l1);
            attn_gguf_kv_raw(r, i + 1, &t2, &p2, &l2);
            same &= strcmp(attn_gguf_kv_key(a, i), attn_gguf_kv_key(r, i + 1)) == 0 && t1 == t2;
            if (strcmp(attn_gguf_kv_key(a, i), "t.u32") != 0) same &= l1 == l2 && memcmp(p1, p2, l1) == 0;
        }
        int64_t v = 0;
        CHECK(same && attn_gguf_get_int(r, "t.u32", &v) == 0 && v == 7, "writer: metadata copied byte for byte, replaced key in place");
        int tsame = attn_gguf_n_tensors(r) == attn_gguf_n_tensors(k) + 1;
        for (int64_t i = 0; tsame && i < attn_gguf_n_tensors(k); i++) {
            attn_gguf_tensor t1, t2;
            attn_gguf_tensor_at(k, i, &t1);
            attn_gguf_tensor_at(r, i, &t2);
            tsame &= strcmp(t1.name, t2.name) == 0 && t1.type == t2.type && t1.nbytes == t2.nbytes && memcmp(t1.data, t2.data, t1.nbytes) == 0 &&
                     t1.ne[0] == t2.ne[0] && t1.ne[1] == t2.ne[1] && ((uintptr_t)t2.data % 64) == 0;
        }
        attn_gguf_tensor f;
        tsame &= attn_gguf_find_tensor(r, "f32", &f) == 0 && f.nbytes == 20 && memcmp(f.data, five, 20) == 0;
        CHECK(tsame, "writer: tensors of every type read back equal, aligned to 64");
        attn_gguf_close(r);
    }
    /* incomplete data: error, target keeps its content */
    struct stat s0, s1;
    stat(path, &s0);
    CHECK_OK(attn_gguf_writer_open(&w, path, 0));
    CHECK_OK(attn_gguf_writer_tensor(w, "f32", ATTN_QT_F32, 1, ne1));
    CHECK_OK(attn_gguf_writer_data(w, five, 8));
    CHECK_ERR(attn_gguf_writer_commit(w), ATTN_E_INVALID);
    CHECK(stat(path, &s1) == 0 && s1.st_size == s0.st_size && s1.st_ino == s0.st_ino, "writer: incomplete tensor leaves the target untouched");
    CHECK_OK(attn_gguf_writer_open(&w, path, 0));
    attn_gguf_writer_abort(w);
    CHECK(stat(path, &s1) == 0 && s1.st_ino == s0.st_ino, "writer: abort leaves the target untouched");
    attn_gguf_close(a);
    attn_gguf_close(k);
}

/* F32 / F16 input: each tensor quantized exactly as attn_quantize_rows does; norms copied;
 * a non-finite weight refused with the tensor named and no output left, also in a tensor
 * copied as it is (an inf in a norm: the file written would not load) */
static void test_quantize_f32(void) {
    char src[256], dst[256];
    snprintf(src, sizeof src, "%s/f32.gguf", dir);
    snprintf(dst, sizeof dst, "%s/f32-q.gguf", dir);
    enum { R = 8, C = 512 };
    static float wq[R * C], norm[C];
    static uint16_t wh[R * C];
    uint64_t seed = 7;
    attn_test_fill_uniform(wq, R * C, -1.0f, 1.0f, &seed);
    attn_test_fill_uniform(norm, C, 0.5f, 1.5f, &seed);
    for (int i = 0; i < R * C; i++) wh[i] = attn_f32_to_f16(wq[i] * 0.5f);
    for (int pass = 0; pass < 3; pass++) {
        attn_gguf_writer *w = NULL;
        CHECK_OK(attn_gguf_writer_open(&w, src, 0));
        if (!w) return;
        const char arch[] = "llama";
        uint64_t n = sizeof arch - 1;
        unsigned char sv[8 + sizeof arch];
        memcpy(sv, &n, 8);
        memcpy(sv + 8, arch, n);
        CHECK_OK(attn_gguf_writer_kv(w, "general.architecture", ATTN_GGUF_STRING, sv, 8 + n));
        int64_t ne2[2] = {C, R}, ne1[1] = {C};
        CHECK_OK(attn_gguf_writer_tensor(w, "blk.0.attn_q.weight", ATTN_QT_F32, 2, ne2));
        CHECK_OK(attn_gguf_writer_tensor(w, "blk.0.ffn_up.weight", ATTN_QT_F16, 2, ne2));
        CHECK_OK(attn_gguf_writer_tensor(w, "blk.0.attn_norm.weight", ATTN_QT_F32, 1, ne1));
        const float keep_w = wq[3 * C + 9], keep_n = norm[5];
        if (pass == 1) wq[3 * C + 9] = NAN;
        if (pass == 2) norm[5] = INFINITY;
        CHECK_OK(attn_gguf_writer_data(w, wq, sizeof wq));
        CHECK_OK(attn_gguf_writer_data(w, wh, sizeof wh));
        CHECK_OK(attn_gguf_writer_data(w, norm, sizeof norm));
        CHECK_OK(attn_gguf_writer_commit(w));
        wq[3 * C + 9] = keep_w;
        norm[5] = keep_n;
        if (pass >= 1) {
            const char *bad = pass == 1 ? "blk.0.attn_q.weight" : "blk.0.attn_norm.weight";
            unlink(dst);
            CHECK_ERR(attn_gguf_quantize(src, dst, "Q4_K_M", 1, NULL), ATTN_E_RANGE);
            CHECK(strstr(attn_last_error(), bad) != NULL, "non-finite weight: tensor %s named: %s", bad, attn_last_error());
            int left = 0; /* neither the output nor a temporary file */
            DIR *dd = opendir(dir);
            for (struct dirent *e; dd && (e = readdir(dd));) left += strstr(e->d_name, "f32-q") != NULL;
            if (dd) closedir(dd);
            CHECK(left == 0, "no output and no temporary file after the error (%d left)", left);
            continue;
        }
        int64_t counts[ATTN_QT_COUNT];
        CHECK_OK(attn_gguf_quantize(src, dst, "q4_k_m", 1, counts));
        CHECK(counts[ATTN_QT_Q4_K] == 2 && counts[ATTN_QT_F32] == 1, "F32/F16 -> Q4_K_M: 2 q4_k tensors, 1 f32 (counts %lld %lld)",
              (long long)counts[ATTN_QT_Q4_K], (long long)counts[ATTN_QT_F32]);
        attn_gguf *g = NULL;
        CHECK_OK(attn_gguf_open(&g, dst));
        if (!g) continue;
        static unsigned char ref[R * C];
        static float wf[R * C];
        attn_gguf_tensor t;
        CHECK_OK(attn_quantize_rows(ref, wq, R, C, ATTN_QT_Q4_K, 1));
        CHECK(attn_gguf_find_tensor(g, "blk.0.attn_q.weight", &t) == 0 && t.type == ATTN_QT_Q4_K && memcmp(t.data, ref, t.nbytes) == 0,
              "F32 tensor quantized as attn_quantize_rows");
        for (int i = 0; i < R * C; i++) wf[i] = attn_f16_to_f32(wh[i]);
        CHECK_OK(attn_quantize_rows(ref, wf, R, C, ATTN_QT_Q4_K, 1));
        CHECK(attn_gguf_find_tensor(g, "blk.0.ffn_up.weight", &t) == 0 && t.type == ATTN_QT_Q4_K && memcmp(t.data, ref, t.nbytes) == 0,
              "F16 tensor quantized as attn_quantize_rows of its float32 values");
        CHECK(attn_gguf_find_tensor(g, "blk.0.attn_norm.weight", &t) == 0 && t.type == ATTN_QT_F32 && memcmp(t.data, norm, sizeof norm) == 0,
              "norm copied");
        attn_gguf_close(g);
        CHECK_OK(attn_gguf_quantize(src, dst, "F16", 1, counts));
        CHECK(counts[ATTN_QT_F16] == 2, "F16 file: both matrices F16");
        CHECK_ERR(attn_gguf_quantize(src, dst, "Q7_K", 1, NULL), ATTN_E_INVALID);
        /* the library refuses its input as output too (also through a symbolic link) */
        char lnk[300];
        snprintf(lnk, sizeof lnk, "%s/f32-link.gguf", dir);
        CHECK(symlink(src, lnk) == 0, "symlink");
        CHECK_ERR(attn_gguf_quantize(src, src, "Q8_0", 1, NULL), ATTN_E_INVALID);
        CHECK_ERR(attn_gguf_quantize(src, lnk, "Q8_0", 1, NULL), ATTN_E_INVALID);
        CHECK(strstr(attn_last_error(), "is the input file") != NULL, "library: output = input refused: %s", attn_last_error());
        unlink(lnk);
    }
    unlink(src);
    unlink(dst);
}

static attn_qtype type_of(attn_gguf *g, const char *name) {
    attn_gguf_tensor t;
    return attn_gguf_find_tensor(g, name, &t) == 0 ? t.type : (attn_qtype)-1;
}

static void test_quantize_smollm2(void) {
    if (access(SMOL, R_OK) != 0) {
        CHECK(0, "%s is missing (scripts/fetch_smollm2.sh)", SMOL);
        return;
    }
    const char *bin = attn_test_cli_path();
    char out[4096], err[4096], path[3][256];
    const char *types[3] = {"Q4_K_M", "Q6_K", "q5_0"};
    const char *stems[3] = {"q4km", "q6k", "q50"};
    for (int i = 0; i < 3; i++) {
        snprintf(path[i], sizeof path[i], "%s/smol-%s.gguf", dir, stems[i]);
        const char *args[] = {"quantize", "--threads", "2", SMOL, path[i], types[i], NULL};
        int rc = attn_test_run(bin, dir, out, sizeof out, err, sizeof err, args);
        CHECK(rc == 0 && strstr(err, "requantizing") && strstr(err, "q4_1"), "quantize %s: exit %d, requantizing said on stderr: %s", types[i], rc, err);
        printf("%s", strstr(err, " -> ") ? strstr(err, "requantizing") ? strchr(err, '\n') + 1 : err : err);
        CHECK(strstr(err, " -> ") && strstr(err, " tensors; "), "quantize %s: summary on stderr", types[i]);
    }
    attn_gguf *in = NULL, *g = NULL;
    CHECK_OK(attn_gguf_open(&in, SMOL));
    /* Q4_K_M: llama.cpp's mix on a model with 576-wide rows (not a multiple of 256) and 30 layers:
     * tied token_embd -> Q8_0 (output rule, 576 % 256 != 0), attn_v on the 14 more-bits layers
     * Q6_K -> Q8_0 fallback, other 576-wide matrices Q4_K -> Q5_0 fallback, ffn_down (1536 wide)
     * Q6_K on more-bits layers (0, 1, 2, 5, 8, ..., 26-29), else Q4_K */
    CHECK_OK(attn_gguf_open(&g, path[0]));
    if (g) {
        int64_t ft = 0, qv = 0;
        int ok = type_of(g, "token_embd.weight") == ATTN_QT_Q8_0 && type_of(g, "blk.0.attn_v.weight") == ATTN_QT_Q8_0 &&
                 type_of(g, "blk.3.attn_v.weight") == ATTN_QT_Q5_0 && type_of(g, "blk.5.attn_v.weight") == ATTN_QT_Q8_0 &&
                 type_of(g, "blk.0.ffn_down.weight") == ATTN_QT_Q6_K && type_of(g, "blk.3.ffn_down.weight") == ATTN_QT_Q4_K &&
                 type_of(g, "blk.5.ffn_down.weight") == ATTN_QT_Q6_K && type_of(g, "blk.29.ffn_down.weight") == ATTN_QT_Q6_K &&
                 type_of(g, "blk.7.attn_q.weight") == ATTN_QT_Q5_0 && type_of(g, "blk.7.ffn_up.weight") == ATTN_QT_Q5_0 &&
                 type_of(g, "blk.7.attn_norm.weight") == ATTN_QT_F32;
        CHECK(ok, "Q4_K_M: llama.cpp's tensor mix");
        CHECK(attn_gguf_get_int(g, "general.file_type", &ft) == 0 && ft == 15 && attn_gguf_get_int(g, "general.quantization_version", &qv) == 0 &&
                  qv == 2,
              "Q4_K_M: general.file_type 15, quantization_version 2");
        /* every metadata entry of the input is there, with the same value except file_type */
        int kv_ok = 1;
        for (int64_t i = 0; i < attn_gguf_n_kv(in); i++) {
            const char *key = attn_gguf_kv_key(in, i);
            int64_t j = attn_gguf_find_kv(g, key);
            int t1, t2;
            const void *p1, *p2;
            size_t l1, l2;
            if (j < 0) {
                kv_ok = 0;
                continue;
            }
            attn_gguf_kv_raw(in, i, &t1, &p1, &l1);
            attn_gguf_kv_raw(g, j, &t2, &p2, &l2);
            if (strcmp(key, "general.file_type") != 0) kv_ok &= t1 == t2 && l1 == l2 && memcmp(p1, p2, l1) == 0;
        }
        CHECK(kv_ok, "Q4_K_M: metadata copied");
        attn_gguf_close(g);
    }
    CHECK_OK(attn_gguf_open(&g, path[1]));
    if (g) {
        CHECK(type_of(g, "blk.3.ffn_down.weight") == ATTN_QT_Q6_K && type_of(g, "blk.3.attn_k.weight") == ATTN_QT_Q8_0 &&
                  type_of(g, "token_embd.weight") == ATTN_QT_Q8_0,
              "Q6_K: ffn_down Q6_K, 576-wide rows Q8_0 (fallback)");
        attn_gguf_close(g);
    }
    CHECK_OK(attn_gguf_open(&g, path[2]));
    if (g) {
        CHECK(type_of(g, "blk.3.ffn_down.weight") == ATTN_QT_Q5_0 && type_of(g, "blk.3.attn_k.weight") == ATTN_QT_Q5_0 &&
                  type_of(g, "token_embd.weight") == ATTN_QT_Q8_0,
              "Q5_0: matrices Q5_0, tied embedding Q8_0 (output rule)");
        attn_gguf_close(g);
    }
    attn_gguf_close(in);
    /* `attn generate` runs on each */
    for (int i = 0; i < 3; i++) {
        const char *args[] = {"generate", "--model", path[i], "-p", "The capital of France is", "-n", "4", "--temp", "0", "--threads", "2", NULL};
        int rc = attn_test_run(bin, dir, out, sizeof out, err, sizeof err, args);
        CHECK(rc == 0 && strlen(out) > strlen("The capital of France is"), "generate on %s: exit %d, text '%s'", types[i], rc, out);
    }
    /* Closeness: a fixed English text (59 tokens) is fed to the Q4_1 model and to each
     * requantized model in one prefill; at every position we compare the next-token argmax.
     * Requantizing adds the new type's rounding on top of Q4_1's (Q6_K / Q5_0 step ~1/4 and ~1/2
     * of Q4_1's; Q4_K_M mixes Q4_K / Q5_0 / Q6_K / Q8_0), so argmax flips happen only where the
     * Q4_1 model's top two logits are close. Required: >= 75% of positions for every file (a
     * broken kernel, layout or mix gives a few percent); measured values are printed. */
    const char *text = "The quick brown fox jumps over the lazy dog. Paris is the capital of France, and Berlin is the capital of "
                       "Germany. Water boils at one hundred degrees Celsius at sea level. The sun rises in the east and sets in the "
                       "west, and the moon goes around the earth once a month.";
    attn_llama *ref = NULL;
    CHECK_OK(attn_llama_load_gguf(&ref, SMOL));
    int32_t ids[256];
    int64_t nt = 0;
    int32_t top[256];
    float *lg = (float *)malloc(sizeof(float) * 49152 * 256);
    if (ref) {
        CHECK_OK(attn_bpe_encode(attn_llama_tokenizer(ref), text, strlen(text), 1, ids, 256, &nt));
        attn_llama_state *st = NULL;
        CHECK_OK(attn_llama_state_create(&st, ref, 256));
        if (st) CHECK_OK(attn_llama_forward(st, lg, ids, nt, 1, 2));
        for (int64_t s = 0; s < nt; s++) top[s] = (int32_t)attn_logits_argmax(lg + (size_t)s * 49152, 49152);
        attn_llama_state_free(st);
        attn_llama_free(ref);
    }
    for (int i = 0; i < 3 && nt >= 50; i++) {
        attn_llama *m = NULL;
        CHECK_OK(attn_llama_load_gguf(&m, path[i]));
        if (!m) continue;
        attn_llama_state *st = NULL;
        CHECK_OK(attn_llama_state_create(&st, m, 256));
        int agree = 0;
        if (st) CHECK_OK(attn_llama_forward(st, lg, ids, nt, 1, 2));
        for (int64_t s = 0; st && s < nt; s++) agree += attn_logits_argmax(lg + (size_t)s * 49152, 49152) == top[s];
        printf("quantize: %s: next-token argmax equal to the Q4_1 model's at %d of %lld positions\n", types[i], agree, (long long)nt);
        CHECK(agree * 4 >= nt * 3, "%s: argmax agrees with the Q4_1 model at %d/%lld positions (>= 75%%)", types[i], agree, (long long)nt);
        attn_llama_state_free(st);
        attn_llama_free(m);
    }
    CHECK(nt >= 50, "text of %lld tokens", (long long)nt);
    free(lg);
    /* refusals */
    {
        struct stat s0, s1;
        stat(path[2], &s0);
        char lnk[300], hard[300];
        snprintf(lnk, sizeof lnk, "%s/link.gguf", dir);
        snprintf(hard, sizeof hard, "%s/hard.gguf", dir);
        CHECK(symlink(path[2], lnk) == 0 && link(path[2], hard) == 0, "links made");
        const char *targets[3] = {path[2], lnk, hard};
        for (int i = 0; i < 3; i++) {
            const char *args[] = {"quantize", path[2], targets[i], "Q4_0", NULL};
            int rc = attn_test_run(bin, dir, out, sizeof out, err, sizeof err, args);
            CHECK(rc == 2 && strstr(err, "names the input"), "quantize into its own input (%s) refused: exit %d: %s", i ? (i == 1 ? "symlink" : "hard link") : "same path",
                  rc, err);
        }
        CHECK(stat(path[2], &s1) == 0 && s1.st_ino == s0.st_ino && s1.st_mtime == s0.st_mtime && s1.st_size == s0.st_size, "input untouched");
        const char *args[] = {"quantize", path[2], hard, "Q4_X", NULL};
        int rc = attn_test_run(bin, dir, out, sizeof out, err, sizeof err, args);
        CHECK(rc == 2 && strstr(err, "Q4_X"), "unknown type: usage error: %s", err);
        /* OUT a directory: a usage error like OUT naming IN (exit 2, refused before any work;
         * new-user finding: it exited 1); OUT in a directory that does not exist stays a file
         * error (1), like a missing input */
        char nodir[340];
        snprintf(nodir, sizeof nodir, "%s/no-such-dir/q.gguf", dir);
        const char *ad[] = {"quantize", path[2], dir, "Q4_0", NULL};
        rc = attn_test_run(bin, dir, out, sizeof out, err, sizeof err, ad);
        CHECK(rc == 2 && strstr(err, "is a directory"), "quantize IN DIR: usage error: exit %d: %s", rc, err);
        const char *an[] = {"quantize", path[2], nodir, "Q4_0", NULL};
        rc = attn_test_run(bin, dir, out, sizeof out, err, sizeof err, an);
        CHECK(rc == 1 && strstr(err, "does not exist"), "quantize IN MISSING/OUT: exit %d: %s", rc, err);
        unlink(lnk);
        unlink(hard);
    }
    for (int i = 0; i < 3; i++) unlink(path[i]);
}

int main(void) {
    attn_test_name = "test_quantize";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return attn_test_finish();
    }
    test_writer();
    test_quantize_f32();
    test_quantize_smollm2();
    char p[300];
    const char *made[] = {"w.gguf", "stdout.txt", "stderr.txt"}; /* the model, attn_test_run's captures */
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, made[i]);
        unlink(p);
    }
    rmdir(dir);
    return attn_test_finish();
}
