/* bench/mpi/bench_ring.c — what attn_sdpa_ring moves, holds and hides, per rank.
 *
 *   mpirun -np P bench_ring L H D [causal 0|1] [cap_mib] [layout striped|contiguous]
 *
 * Each rank builds only its own shard (B = 1, H = Hkv heads, D = Dv, float32): element e of
 * position j of head h of q / k / v is a hash of (tensor, h, j, e) mapped to [-1, 1), so no rank
 * ever holds the whole sequence and any rank can recompute any key. Prints per rank: key/value
 * bytes sent and received, the call's scratch bytes, the shards' bytes, peak RSS (getrusage),
 * scored pairs, compute and exposed-wait seconds; and then checks 4 of each rank's rows against a
 * float64 softmax streamed over all L keys (recomputed from the hash): the max |diff|.
 * cap_mib > 0: after MPI_Init, RLIMIT_DATA is set to the data segment already in use plus cap_mib
 * MiB, so every allocation of the attention (shards, ring buffers, accumulators) must fit in the
 * cap; the program first reports whether single-process attention on the whole sequence (q, k,
 * v and out, 4·L·H·D floats) would fit (it tries to allocate them, then frees them).
 * Build: make bench-mpi (build/bench/bench_ring). */
#include "attn_mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static float val(int t, int64_t h, int64_t j, int64_t e) {
    uint64_t x = ((uint64_t)t << 60) ^ ((uint64_t)h << 44) ^ ((uint64_t)j << 12) ^ (uint64_t)e;
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ull, x ^= x >> 33;
    return (float)((double)(x >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

static long vm_data_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmData: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    int provided, me, P;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if (argc < 4) {
        if (me == 0) fprintf(stderr, "usage: mpirun -np P bench_ring L H D [causal] [cap_mib] [striped|contiguous]\n");
        MPI_Finalize();
        return 2;
    }
    const int64_t L = atoll(argv[1]), H = atoll(argv[2]), D = atoll(argv[3]);
    const int causal = argc > 4 ? atoi(argv[4]) : 1;
    const long cap = argc > 5 ? atol(argv[5]) : 0;
    const attn_ring_layout layout = argc > 6 && !strcmp(argv[6], "contiguous") ? ATTN_RING_CONTIGUOUS : ATTN_RING_STRIPED;
    if (cap > 0) {
        struct rlimit rl;
        long base = vm_data_kib();
        rl.rlim_cur = rl.rlim_max = (rlim_t)(base + cap * 1024) * 1024;
        if (setrlimit(RLIMIT_DATA, &rl) != 0) perror("setrlimit");
        if (me == 0) {
            size_t whole = (size_t)(4 * L * H * D) * sizeof(float);
            void *p = malloc(whole);
            printf("cap %ld MiB per rank (RLIMIT_DATA = %ld MiB in use + cap): single-process q, k, v, out of the "
                   "whole sequence = %.1f MiB: %s\n",
                   cap, base / 1024, whole / 1048576.0, p ? "fits" : "DOES NOT FIT (malloc refused)");
            free(p);
        }
    }
    int64_t n, first, step;
    attn_ring_shard(layout, L, P, me, &n, &first, &step);
    float *q = malloc(sizeof(float) * (size_t)(n * H * D + 1)), *k = malloc(sizeof(float) * (size_t)(n * H * D + 1));
    float *v = malloc(sizeof(float) * (size_t)(n * H * D + 1)), *o = malloc(sizeof(float) * (size_t)(n * H * D + 1));
    int rc = q && k && v && o ? 0
                              : attn_set_error(ATTN_E_NOMEM, "this rank's shards (%.1f MiB) do not fit",
                                               (double)(4 * n * H * D * 4) / 1048576);
    if (rc == 0)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t e = 0; e < D; e++) {
                    int64_t j = first + i * step, at = (h * n + i) * D + e;
                    q[at] = val(0, h, j, e), k[at] = val(1, h, j, e), v[at] = val(2, h, j, e);
                }
    attn_tensor tq = attn_tensor_f32_4d(q, 1, H, n, D), tk = attn_tensor_f32_4d(k, 1, H, n, D);
    attn_tensor tv = attn_tensor_f32_4d(v, 1, H, n, D), to = attn_tensor_f32_4d(o, 1, H, n, D);
    attn_ring_params rp = attn_ring_params_default();
    attn_ring_stats st;
    memset(&st, 0, sizeof st);
    rp.layout = layout;
    rp.sdpa.is_causal = causal;
    rp.sdpa.n_threads = 1;
    rp.stats = &st;
    rc = attn_mpi_agree(MPI_COMM_WORLD, rc);
    if (rc == 0) rc = attn_sdpa_ring(MPI_COMM_WORLD, &to, &tq, &tk, &tv, &rp);
    if (rc < 0) {
        if (me == 0) printf("attn_sdpa_ring: %s\n", attn_last_error());
        MPI_Finalize();
        return 1;
    }
    /* 4 rows per rank against a float64 softmax streamed over the keys */
    double maxdiff = 0, scale = 1.0 / sqrt((double)D);
    double *acc = malloc(sizeof(double) * (size_t)D);
    for (int s = 0; s < 4 && n > 0; s++) {
        int64_t i = s * (n - 1) / 3, gi = first + i * step, h = s % H;
        double m = -INFINITY, sum = 0;
        for (int64_t e = 0; e < D; e++) acc[e] = 0;
        for (int64_t j = 0; j < L && (!causal || j <= gi); j++) {
            double sc = 0;
            for (int64_t e = 0; e < D; e++) sc += (double)val(0, h, gi, e) * val(1, h, j, e);
            sc *= scale;
            if (sc > m) {
                double r = exp(m - sc);
                for (int64_t e = 0; e < D; e++) acc[e] *= r;
                sum *= r, m = sc;
            }
            double w = exp(sc - m);
            sum += w;
            for (int64_t e = 0; e < D; e++) acc[e] += w * val(2, h, j, e);
        }
        for (int64_t e = 0; e < D; e++) {
            double d = fabs(acc[e] / sum - o[(h * n + i) * D + e]);
            if (d > maxdiff) maxdiff = d;
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double row[10] = {(double)n, (double)st.bytes_sent, (double)st.bytes_received, (double)st.scratch_bytes,
                      (double)(4 * n * H * D * 4), (double)ru.ru_maxrss * 1024.0, (double)st.pairs, st.compute_s,
                      st.wait_s, maxdiff};
    double *all = me == 0 ? malloc(sizeof row * (size_t)P) : NULL;
    MPI_Gather(row, 10, MPI_DOUBLE, all, 10, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (me == 0) {
        printf("P=%d L=%lld H=%lld D=%lld %s %s\n", P, (long long)L, (long long)H, (long long)D, causal ? "causal" : "non-causal",
               layout == ATTN_RING_STRIPED ? "striped" : "contiguous");
        printf("rank  rows  kv_sent_MiB  kv_recv_MiB  scratch_MiB  shards_MiB  peak_rss_MiB  pairs  compute_s  wait_s  "
               "max|diff|_vs_f64\n");
        for (int r = 0; r < P; r++) {
            const double *x = all + r * 10;
            printf("%4d %6.0f %11.2f %12.2f %12.2f %11.2f %13.1f %12.0f %9.3f %7.3f %9.2e\n", r, x[0], x[1] / 1048576,
                   x[2] / 1048576, x[3] / 1048576, x[4] / 1048576, x[5] / 1048576, x[6], x[7], x[8], x[9]);
        }
        free(all);
    }
    free(q), free(k), free(v), free(o), free(acc);
    MPI_Finalize();
    return 0;
}
