/* bench/gemm: single-threaded float32 GEMM throughput of one BLAS library on the encoder shapes attn
 * runs (y[M, N] = x[M, K] · w[N, K]ᵀ, cblas_sgemm RowMajor NoTrans/Trans, as attn_linear calls it):
 * the first ViT of models/vit-fashion-mnist (hidden 96; now 128) at batch 64 (64 x 17 tokens) and MiniLM-L6 at
 * batch 32 of ~40 word pieces (hidden 384). Prints GFLOP/s, best of 7 timed rounds of ~2 GFLOP.
 * Built twice by run.sh, against OpenBLAS and against BLIS (Debian libblis-serial-dev). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    static const struct {
        const char *what;
        int M, N, K;
    } shapes[] = {{"ViT q/k/v", 1088, 288, 96},      {"ViT out", 1088, 96, 96},        {"ViT fc1", 1088, 192, 96},
                  {"ViT fc2", 1088, 96, 192},        {"MiniLM q/k/v", 1280, 1152, 384}, {"MiniLM out", 1280, 384, 384},
                  {"MiniLM fc1", 1280, 1536, 384},   {"MiniLM fc2", 1280, 384, 1536}};
    const char *name = argc > 1 ? argv[1] : "blas";
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
        float *x = malloc(sizeof(float) * (size_t)M * K), *w = malloc(sizeof(float) * (size_t)N * K), *y = malloc(sizeof(float) * (size_t)M * N);
        if (!x || !w || !y) return 1;
        for (long i = 0; i < (long)M * K; i++) x[i] = (float)((i * 7919) % 1000) / 1000.0f;
        for (long i = 0; i < (long)N * K; i++) w[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
        const double flop = 2.0 * M * N * K;
        const int reps = (int)(2e9 / flop) + 1;
        double best = 1e30;
        for (int r = 0; r < 7; r++) {
            double t = now();
            for (int k = 0; k < reps; k++) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N);
            t = (now() - t) / reps;
            if (t < best) best = t;
        }
        printf("%-9s %-13s M=%4d N=%4d K=%4d  %6.1f GFLOP/s\n", name, shapes[s].what, M, N, K, flop / best * 1e-9);
        free(x);
        free(w);
        free(y);
    }
    return 0;
}
