/* bench/serve/batch_step.c: the cost of attn serve's forward step without the server — B
 * sequences decoded together through attn_llama_batch_forward (one row each per step, greedy),
 * against a prompt-sized prefill of the same model. Prints, per step size, wall and CPU
 * (user + system of the process, all threads) milliseconds per generated token and the
 * aggregate tokens/s; with ATTN_POOL_STATS=1 the thread pool's job counts (and its fallbacks to
 * one thread) at exit. The sequences start from prompts of different lengths, so their KV
 * lengths differ as in the server (each slot's attention is its own call).
 *   make && cc -O2 -Iinclude bench/serve/batch_step.c -Lbuild -lattn -Wl,-rpath,$PWD/build -o build/batch_step
 *   build/batch_step MODEL.gguf THREADS STEPS B [B ...]     e.g. models/SmolLM2-135M-Instruct.Q4_1.gguf 2 64 1 8 16 */
#include "attn_llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double wall_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu_s(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + 1e-6 * (double)r.ru_utime.tv_usec + (double)r.ru_stime.tv_sec + 1e-6 * (double)r.ru_stime.tv_usec;
}

static int32_t argmax(const float *l, int64_t V) {
    int64_t b = 0;
    for (int64_t i = 1; i < V; i++)
        if (l[i] > l[b]) b = i;
    return (int32_t)b;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL.gguf THREADS STEPS B [B ...]\n", argv[0]);
        return 2;
    }
    const int nt = atoi(argv[2]), steps = atoi(argv[3]);
    attn_llama *m = NULL;
    if (attn_llama_load_gguf(&m, argv[1]) < 0) {
        fprintf(stderr, "%s\n", attn_last_error());
        return 1;
    }
    const int64_t V = attn_llama_get_config(m)->vocab_size;
    for (int a = 4; a < argc; a++) {
        const int B = atoi(argv[a]);
        if (B < 1 || B > 256 || steps < 1) return 2;
        const int64_t rows = 64 + B;
        attn_llama_batch *b = NULL;
        float *lg = (float *)malloc(sizeof(float) * (size_t)(V * (B > 1 ? B : 1)));
        int32_t *tok = (int32_t *)malloc(sizeof(int32_t) * (size_t)rows);
        int64_t *slot = (int64_t *)malloc(sizeof(int64_t) * (size_t)rows), *lr = (int64_t *)malloc(sizeof(int64_t) * (size_t)rows);
        if (!lg || !tok || !slot || !lr || attn_llama_batch_create(&b, m, B, 64 + steps + 8, rows) < 0) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        /* prompts of 24..55 tokens, one step each; their last logits give the first tokens */
        for (int s = 0; s < B; s++) {
            const int np = 24 + (s * 13) % 32;
            for (int i = 0; i < np; i++) tok[i] = (int32_t)((s * 7919 + i * 104729) % (V - 200) + 100), slot[i] = s;
            lr[0] = np - 1;
            if (attn_llama_batch_forward(b, tok, slot, np, lr, 1, lg + (int64_t)s * V, nt) < 0) {
                fprintf(stderr, "%s\n", attn_last_error());
                return 1;
            }
        }
        for (int s = 0; s < B; s++) tok[s] = argmax(lg + (int64_t)s * V, V), slot[s] = s, lr[s] = s;
        const double w0 = wall_s(), c0 = cpu_s();
        for (int t = 0; t < steps; t++) {
            if (attn_llama_batch_forward(b, tok, slot, B, lr, B, lg, nt) < 0) {
                fprintf(stderr, "%s\n", attn_last_error());
                return 1;
            }
            for (int s = 0; s < B; s++) tok[s] = argmax(lg + (int64_t)s * V, V);
        }
        const double w = wall_s() - w0, c = cpu_s() - c0, n = (double)B * steps;
        /* prefill reference: 64-token pieces into slot 0 (no lm_head but for the last row) */
        int reps = (int)(n / 64) + 1;
        const double pw0 = wall_s(), pc0 = cpu_s();
        for (int r = 0; r < reps; r++) {
            attn_llama_batch_clear_slot(b, 0);
            for (int i = 0; i < 64; i++) tok[i] = (int32_t)((r * 31 + i * 104729) % (V - 200) + 100), slot[i] = 0;
            lr[0] = 63;
            if (attn_llama_batch_forward(b, tok, slot, 64, lr, 1, lg, nt) < 0) return 1;
        }
        const double pw = wall_s() - pw0, pc = cpu_s() - pc0;
        printf("threads %d, B = %2d: decode %7.1f tokens/s, %.3f ms wall / %.3f ms CPU a token; prefill (64-token pieces) %.3f ms wall / %.3f ms CPU a token\n",
               nt, B, n / w, 1e3 * w / n, 1e3 * c / n, 1e3 * pw / (reps * 64.0), 1e3 * pc / (reps * 64.0));
        fflush(stdout);
        attn_llama_batch_free(b);
        free(lg), free(tok), free(slot), free(lr);
    }
    attn_llama_free(m);
    return 0;
}
