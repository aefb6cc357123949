/* attn side of bench/llama: prefill of a P-token prompt and decode of D tokens (greedy, one token
 * per forward, KV cache) for a GGUF model, T threads; best of R runs. Prints one line:
 *   attn threads=T prefill_tok_s=X decode_tok_s=Y kernel=K kq_kernel=KQ peak_rss_mib=R file_mib=F kv_cache_mib=C
 * (K: the kernel of Q8_0 / Q4_x / Q5_x matrices, KQ: of the K-quants; attn_quant_type_kernel_name)
 * Usage: bench_llama MODEL.gguf PROMPT_IDS_FILE THREADS [P=256] [D=128] [R=3] */
#include "attn.h"
#include "attn_llama.h"
#include "attn_quant.h"
#include "attn_sampling.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int T = atoi(argv[3]), P = argc > 4 ? atoi(argv[4]) : 256, D = argc > 5 ? atoi(argv[5]) : 128, R = argc > 6 ? atoi(argv[6]) : 3;
    attn_set_num_threads(T);
    attn_llama *m = NULL;
    if (attn_llama_load_gguf(&m, argv[1]) < 0) {
        fprintf(stderr, "%s\n", attn_last_error());
        return 1;
    }
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)P);
    FILE *f = fopen(argv[2], "r");
    int n = 0;
    while (f && n < P && fscanf(f, "%d", &ids[n]) == 1) n++;
    if (f) fclose(f);
    if (n < P) {
        fprintf(stderr, "need %d prompt ids, got %d\n", P, n);
        return 1;
    }
    const int64_t V = attn_llama_get_config(m)->vocab_size;
    float *lg = (float *)malloc(sizeof(float) * (size_t)V);
    attn_llama_state *st = NULL;
    attn_llama_state_create(&st, m, P + D + 8);
    double best_p = 0, best_d = 0;
    for (int r = 0; r < R; r++) {
        attn_llama_state_reset(st);
        double t0 = now();
        if (attn_llama_forward(st, lg, ids, P, 0, T) < 0) return 1;
        double t1 = now();
        for (int i = 0; i < D; i++) {
            int32_t tok = (int32_t)attn_logits_argmax(lg, V);
            if (attn_llama_forward(st, lg, &tok, 1, 0, T) < 0) return 1;
        }
        double t2 = now();
        if (P / (t1 - t0) > best_p) best_p = P / (t1 - t0);
        if (D / (t2 - t1) > best_d) best_d = D / (t2 - t1);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    struct stat sb;
    stat(argv[1], &sb);
    const attn_llama_config *c = attn_llama_get_config(m);
    const double kv = 2.0 * 4.0 * (double)c->n_layers * (double)c->n_kv_heads * (double)c->head_dim * (double)(P + D + 8);
    printf("attn threads=%d prefill_tok_s=%.1f decode_tok_s=%.1f kernel=%s kq_kernel=%s peak_rss_mib=%.1f file_mib=%.1f kv_cache_mib=%.1f\n", T,
           best_p, best_d, attn_quant_type_kernel_name(ATTN_QT_Q5_0), attn_quant_type_kernel_name(ATTN_QT_Q4_K), (double)ru.ru_maxrss / 1024.0, (double)sb.st_size / 1048576.0, kv / 1048576.0);
    attn_llama_state_free(st);
    attn_llama_free(m);
    free(lg);
    free(ids);
    return 0;
}
