/* attn_sdpa_ring (include/attn_mpi.h) under `mpirun -np P` (tests/test_mpi.sh runs P = 1..4):
 * every rank builds the same full q, k, v, computes the float64 oracle attn_sdpa_reference and the
 * single-process fused attn_sdpa on the whole sequence, runs the ring on its shard, and compares its
 * rows. Rank 0 prints one RESULT line with the checks of all ranks summed.
 * Tolerance: |ring - reference| <= 2e-6 + 2e-6·|reference| for out (inputs U(-1, 1), so |out| <= 1:
 * each block is the fused float32 kernel, whose error against float64 is < 2e-6·max|out|
 * (attn_attention.h), and the float64 merge adds one float32 rounding, < 6e-8); the same bound
 * against single-process attn_sdpa is 4e-6 (two float32 results, each within 2e-6). lse: 1e-5
 * absolute (|lse| <= log(Lk) + scale·D < 8 here, float32 spacing at 8 is 9.5e-7; ten of them). */
#include "attn_mpi.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int me, P;

typedef struct {
    const char *name;
    attn_ring_layout layout;
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    int causal;
    const int64_t *key_lengths; /* [B] or NULL */
    const int64_t *qlens;       /* contiguous: explicit per-rank query lengths (NULL: attn_ring_shard) */
} ring_case;

/* this rank's rows of a full [B, Hx, L, X] tensor as a (strided) view */
static attn_tensor shard_view(float *full, int64_t B, int64_t Hx, int64_t L, int64_t X, attn_ring_layout layout,
                              const int64_t *lens) {
    int64_t n, first, step;
    attn_ring_shard(layout, L, P, me, &n, &first, &step);
    if (lens) {
        first = 0;
        for (int r = 0; r < me; r++) first += lens[r];
        n = lens[me];
        step = 1;
    }
    attn_tensor t = attn_tensor_f32_4d(full, B, Hx, L, X);
    t.data = full + first * X;
    t.shape[2] = n;
    t.stride[2] *= step;
    return t;
}

static double tol_out_ref = 0, tol_out_fused = 0, tol_lse = 0; /* largest measured differences */

static void run_case(const ring_case *c) {
    const int64_t B = c->B, H = c->H, Hkv = c->Hkv, Lq = c->Lq, Lk = c->Lk, D = c->D, Dv = c->Dv;
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(Lq * 131 + Lk * 7 + H);
    float *q = malloc(sizeof(float) * B * H * Lq * D), *k = malloc(sizeof(float) * B * Hkv * Lk * D);
    float *v = malloc(sizeof(float) * B * Hkv * Lk * Dv);
    float *ref = malloc(sizeof(float) * B * H * Lq * Dv), *fused = malloc(sizeof(float) * B * H * Lq * Dv);
    float *rlse = malloc(sizeof(float) * B * H * Lq);
    attn_test_fill_uniform(q, B * H * Lq * D, -1, 1, &seed);
    attn_test_fill_uniform(k, B * Hkv * Lk * D, -1, 1, &seed);
    attn_test_fill_uniform(v, B * Hkv * Lk * Dv, -1, 1, &seed);
    attn_tensor tq = attn_tensor_f32_4d(q, B, H, Lq, D), tk = attn_tensor_f32_4d(k, B, Hkv, Lk, D);
    attn_tensor tv = attn_tensor_f32_4d(v, B, Hkv, Lk, Dv), tref = attn_tensor_f32_4d(ref, B, H, Lq, Dv);
    attn_tensor tfu = attn_tensor_f32_4d(fused, B, H, Lq, Dv), tl = attn_tensor_f32_3d(rlse, B, H, Lq);
    attn_sdpa_params sp = attn_sdpa_params_default();
    sp.is_causal = c->causal;
    sp.key_lengths = c->key_lengths;
    sp.n_threads = 1;
    sp.lse = &tl;
    CHECK_OK(attn_sdpa_reference(&tref, NULL, &tq, &tk, &tv, &sp));
    sp.lse = NULL;
    CHECK_OK(attn_sdpa(&tfu, NULL, &tq, &tk, &tv, &sp));
    /* this rank's shards */
    attn_tensor lq = shard_view(q, B, H, Lq, D, c->layout, c->qlens);
    attn_tensor lk = shard_view(k, B, Hkv, Lk, D, c->layout, NULL), lv = shard_view(v, B, Hkv, Lk, Dv, c->layout, NULL);
    attn_tensor rref = shard_view(ref, B, H, Lq, Dv, c->layout, c->qlens);
    attn_tensor rfu = shard_view(fused, B, H, Lq, Dv, c->layout, c->qlens);
    int64_t nq = lq.shape[2];
    float *out = malloc(sizeof(float) * (B * H * nq * Dv + 1)), *lse = malloc(sizeof(float) * (B * H * nq + 1));
    attn_tensor tout = attn_tensor_f32_4d(out, B, H, nq, Dv), tlse = attn_tensor_f32_3d(lse, B, H, nq);
    attn_ring_params rp = attn_ring_params_default();
    rp.layout = c->layout;
    rp.sdpa.is_causal = c->causal;
    rp.sdpa.key_lengths = c->key_lengths;
    rp.sdpa.n_threads = 1;
    rp.sdpa.lse = &tlse;
    attn_ring_stats st;
    rp.stats = &st;
    int rc = attn_sdpa_ring(MPI_COMM_WORLD, &tout, &lq, &lk, &lv, &rp);
    CHECK(rc == 0, "%s: attn_sdpa_ring returned %d: %s", c->name, rc, attn_last_error());
    if (rc == 0) {
        double d_ref = 0, d_fu = 0, d_lse = 0;
        int bad = 0, nonfinite = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < nq; i++) {
                    for (int64_t e = 0; e < Dv; e++) {
                        float o = out[((b * H + h) * nq + i) * Dv + e];
                        float r = ((float *)rref.data)[b * rref.stride[0] + h * rref.stride[1] + i * rref.stride[2] + e];
                        float f = ((float *)rfu.data)[b * rfu.stride[0] + h * rfu.stride[1] + i * rfu.stride[2] + e];
                        if (!isfinite(o)) nonfinite++;
                        double dr = fabs((double)o - r), df = fabs((double)o - f);
                        if (dr > 2e-6 + 2e-6 * fabs(r) || df > 4e-6) bad++;
                        if (dr > d_ref) d_ref = dr;
                        if (df > d_fu) d_fu = df;
                    }
                    /* the global row of local row i, for the reference lse */
                    int64_t first, step, gi;
                    attn_ring_shard(c->layout, Lq, P, me, NULL, &first, &step);
                    if (c->qlens) {
                        first = 0;
                        for (int r = 0; r < me; r++) first += c->qlens[r];
                        step = 1;
                    }
                    gi = first + i * step;
                    float l = lse[(b * H + h) * nq + i], rl = rlse[(b * H + h) * Lq + gi];
                    if (rl == -INFINITY || l == -INFINITY) {
                        if (l != rl) bad++;
                    } else {
                        double dl = fabs((double)l - rl);
                        if (dl > 1e-5) bad++;
                        if (dl > d_lse) d_lse = dl;
                    }
                }
        CHECK(bad == 0 && nonfinite == 0,
              "%s (rank %d of %d): %d values out of tolerance, %d non-finite; max |diff| %.3g vs reference, %.3g vs "
              "attn_sdpa, lse %.3g",
              c->name, me, P, bad, nonfinite, d_ref, d_fu, d_lse);
        if (d_ref > tol_out_ref) tol_out_ref = d_ref;
        if (d_fu > tol_out_fused) tol_out_fused = d_fu;
        if (d_lse > tol_lse) tol_lse = d_lse;
        /* bytes: every shard but one's own travels P - 1 hops in all: the ring moves (P-1)·|k, v| */
        int64_t sent = st.bytes_sent, total = 0;
        MPI_Allreduce(&sent, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        CHECK(total == (int64_t)(P - 1) * B * Hkv * Lk * (D + Dv) * 4, "%s: bytes sent %lld, want %lld", c->name,
              (long long)total, (long long)((int64_t)(P - 1) * B * Hkv * Lk * (D + Dv) * 4));
        CHECK(st.steps == P, "%s: %d steps", c->name, st.steps);
    }
    free(q), free(k), free(v), free(ref), free(fused), free(rlse), free(out), free(lse);
}

/* the causal work balance: scored pairs per rank, striped vs contiguous, L divisible by P */
static void balance(void) {
    const int64_t L = 240, D = 8;
    float *x = malloc(sizeof(float) * L * D);
    uint64_t seed = 7;
    attn_test_fill_uniform(x, L * D, -1, 1, &seed);
    double ratio[2] = {0, 0};
    for (int lay = 0; lay < 2; lay++) {
        attn_tensor t = shard_view(x, 1, 1, L, D, (attn_ring_layout)lay, NULL);
        int64_t n = t.shape[2];
        float *o = malloc(sizeof(float) * n * D);
        attn_tensor to = attn_tensor_f32_4d(o, 1, 1, n, D);
        attn_ring_params rp = attn_ring_params_default();
        rp.layout = (attn_ring_layout)lay;
        rp.sdpa.is_causal = 1;
        rp.sdpa.n_threads = 1;
        attn_ring_stats st;
        rp.stats = &st;
        CHECK_OK(attn_sdpa_ring(MPI_COMM_WORLD, &to, &t, &t, &t, &rp));
        int64_t mx = 0, mn = 0, sum = 0;
        MPI_Allreduce(&st.pairs, &mx, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(&st.pairs, &mn, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&st.pairs, &sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        CHECK(sum == L * (L + 1) / 2, "%s causal: %lld pairs scored in all, want L(L+1)/2 = %lld",
              lay ? "striped" : "contiguous", (long long)sum, (long long)(L * (L + 1) / 2));
        ratio[lay] = mn > 0 ? (double)mx / (double)mn : 1e9;
        if (me == 0)
            printf("mpi ring balance P=%d L=%lld causal %s: pairs per rank max %lld min %lld (max/min %.4f)\n", P,
                   (long long)L, lay ? "striped" : "contiguous", (long long)mx, (long long)mn, ratio[lay]);
        free(o);
    }
    /* striped: rank r scores n·r + P·n(n-1)/2 + n pairs (n = L/P): max/min = 1 + (P-1)/(P(n-1)/2 + 1) */
    double n = (double)(L / P), want = 1 + (P - 1) / (P * (n - 1) / 2 + 1);
    CHECK(fabs(ratio[1] - want) < 1e-9, "striped balance max/min %.6f, want %.6f", ratio[1], want);
    /* contiguous: rank P-1 scores (2P-1) times rank 0's share (n(n+1)/2 vs n(n+1)/2 + (P-1)n²) */
    double wc = (n * (n + 1) / 2 + (P - 1) * n * n) / (n * (n + 1) / 2);
    CHECK(fabs(ratio[0] - wc) < 1e-9, "contiguous balance max/min %.6f, want %.6f", ratio[0], wc);
    free(x);
}

/* errors: every rank gets the same status, whichever rank's input was bad */
static void errors(void) {
    float buf[4 * 16 * 8];
    memset(buf, 0, sizeof buf);
    attn_ring_params rp = attn_ring_params_default();
    rp.sdpa.n_threads = 1;
    /* more ranks than positions: L = P - 1 (P = 1: L = 0) striped, so rank P-1 holds nothing */
    {
        int64_t L = P - 1, n;
        attn_ring_shard(ATTN_RING_STRIPED, L, P, me, &n, NULL, NULL);
        attn_tensor t = attn_tensor_f32_4d(buf, 1, 1, n, 8), o = attn_tensor_f32_4d(buf + 64, 1, 1, n, 8);
        int rc = attn_sdpa_ring(MPI_COMM_WORLD, &o, &t, &t, &t, &rp);
        CHECK(rc == ATTN_E_SHAPE && strstr(attn_last_error(), "at least one"), "P > L: rc %d (%s)", rc, attn_last_error());
    }
    /* shapes that disagree: the last rank has D = 4, the others D = 8 */
    {
        int64_t D = me == P - 1 && P > 1 ? 4 : 8, n;
        attn_ring_shard(ATTN_RING_STRIPED, 8 * P, P, me, &n, NULL, NULL);
        attn_tensor t = attn_tensor_f32_4d(buf, 1, 1, n, D), o = attn_tensor_f32_4d(buf + 256, 1, 1, n, D);
        int rc = attn_sdpa_ring(MPI_COMM_WORLD, &o, &t, &t, &t, &rp);
        if (P > 1)
            CHECK(rc == ATTN_E_SHAPE && strstr(attn_last_error(), "disagree on D"), "D mismatch: rc %d (%s)", rc,
                  attn_last_error());
        else
            CHECK(rc == 0, "P = 1, one shape: rc %d (%s)", rc, attn_last_error());
    }
    /* one rank's q is float16: ATTN_E_DTYPE on every rank, naming that rank */
    {
        int64_t n;
        attn_ring_shard(ATTN_RING_STRIPED, 8 * P, P, me, &n, NULL, NULL);
        attn_tensor t = attn_tensor_f32_4d(buf, 1, 1, n, 8), o = attn_tensor_f32_4d(buf + 256, 1, 1, n, 8), qh = t;
        if (me == P - 1) qh.dtype = ATTN_F16;
        int rc = attn_sdpa_ring(MPI_COMM_WORLD, &o, &qh, &t, &t, &rp);
        char want[64];
        snprintf(want, sizeof want, "rank %d of %d", P - 1, P);
        CHECK(rc == ATTN_E_DTYPE && (P == 1 || strstr(attn_last_error(), want)), "dtype on rank %d: rc %d (%s)", P - 1,
              rc, attn_last_error());
    }
    /* NaN in rank 0's keys: found inside the ring; every rank returns ATTN_E_RANGE */
    {
        int64_t n;
        attn_ring_shard(ATTN_RING_STRIPED, 8 * P, P, me, &n, NULL, NULL);
        float kk[8 * 8];
        for (int i = 0; i < 64; i++) kk[i] = 0.25f;
        if (me == 0) kk[3] = NAN;
        attn_tensor t = attn_tensor_f32_4d(buf, 1, 1, n, 8), o = attn_tensor_f32_4d(buf + 256, 1, 1, n, 8);
        attn_tensor tk = attn_tensor_f32_4d(kk, 1, 1, n, 8);
        int rc = attn_sdpa_ring(MPI_COMM_WORLD, &o, &t, &tk, &tk, &rp);
        CHECK(rc == ATTN_E_RANGE, "NaN in rank 0's k: rc %d (%s)", rc, attn_last_error());
    }
    /* key_lengths that differ between ranks */
    {
        int64_t n, kl = me == P - 1 ? 3 : 5;
        attn_ring_shard(ATTN_RING_STRIPED, 8 * P, P, me, &n, NULL, NULL);
        attn_tensor t = attn_tensor_f32_4d(buf, 1, 1, n, 8), o = attn_tensor_f32_4d(buf + 256, 1, 1, n, 8);
        attn_ring_params p2 = rp;
        p2.sdpa.key_lengths = &kl;
        int rc = attn_sdpa_ring(MPI_COMM_WORLD, &o, &t, &t, &t, &p2);
        if (P > 1)
            CHECK(rc == ATTN_E_INVALID && strstr(attn_last_error(), "key_lengths"), "key_lengths mismatch: rc %d (%s)", rc,
                  attn_last_error());
        kl = 8 * P + 1; /* beyond Lk on every rank */
        rc = attn_sdpa_ring(MPI_COMM_WORLD, &o, &t, &t, &t, &p2);
        CHECK(rc == ATTN_E_INVALID && strstr(attn_last_error(), "outside"), "key_lengths > Lk: rc %d (%s)", rc,
              attn_last_error());
        /* a mask is not sharded */
        attn_ring_params p3 = rp;
        p3.sdpa.mask = &t;
        rc = attn_sdpa_ring(MPI_COMM_WORLD, &o, &t, &t, &t, &p3);
        CHECK(rc == ATTN_E_UNSUPPORTED, "mask: rc %d (%s)", rc, attn_last_error());
        /* the communicator is still usable after all of these */
        int one = 1, sum = 0;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(sum == P, "MPI_COMM_WORLD still works after the errors");
    }
}

/* attn_mpi_split_by_size and attn_ring_shard: pure functions, checked by hand-computed splits */
static void splits(void) {
    int64_t st[5];
    const int64_t a[4] = {10, 0, 0, 10}; /* weights 11, 1, 1, 11: midpoints 5.5, 11.5 | 12.5, 18.5 of 24 */
    CHECK_OK(attn_mpi_split_by_size(a, 4, 2, st));
    CHECK(st[0] == 0 && st[1] == 2 && st[2] == 4, "split {10,0,0,10} / 2: %lld %lld %lld", (long long)st[0],
          (long long)st[1], (long long)st[2]);
    const int64_t z[10] = {0};
    CHECK_OK(attn_mpi_split_by_size(z, 10, 3, st));
    CHECK(st[0] == 0 && st[1] == 3 && st[2] == 7 && st[3] == 10, "split 10 equal / 3: %lld %lld %lld %lld",
          (long long)st[0], (long long)st[1], (long long)st[2], (long long)st[3]);
    CHECK_OK(attn_mpi_split_by_size(z, 2, 4, st)); /* more ranks than items: some get none */
    CHECK(st[0] == 0 && st[1] == 0 && st[2] == 1 && st[3] == 1 && st[4] == 2, "split 2 / 4: %lld %lld %lld %lld %lld",
          (long long)st[0], (long long)st[1], (long long)st[2], (long long)st[3], (long long)st[4]);
    const int64_t neg[2] = {1, -1};
    CHECK_ERR(attn_mpi_split_by_size(neg, 2, 2, st), ATTN_E_INVALID);
    int64_t n, f, step;
    CHECK_OK(attn_ring_shard(ATTN_RING_STRIPED, 10, 4, 1, &n, &f, &step));
    CHECK(n == 3 && f == 1 && step == 4, "striped 10 / 4, rank 1: %lld from %lld step %lld", (long long)n, (long long)f,
          (long long)step);
    CHECK_OK(attn_ring_shard(ATTN_RING_STRIPED, 10, 4, 3, &n, &f, &step));
    CHECK(n == 2, "striped 10 / 4, rank 3: %lld", (long long)n);
    CHECK_OK(attn_ring_shard(ATTN_RING_CONTIGUOUS, 10, 4, 2, &n, &f, &step));
    CHECK(n == 2 && f == 6 && step == 1, "contiguous 10 / 4, rank 2: %lld from %lld", (long long)n, (long long)f);
    CHECK_ERR(attn_ring_shard(ATTN_RING_STRIPED, 10, 4, 4, &n, &f, &step), ATTN_E_INVALID);
}

int main(int argc, char **argv) {
    attn_test_name = "test_mpi_ring";
    /* before MPI_Init: a clear error, not a crash */
    float x[8] = {0};
    attn_tensor t = attn_tensor_f32_4d(x, 1, 1, 1, 8), o = attn_tensor_f32_4d(x, 1, 1, 1, 8);
    int rc0 = attn_sdpa_ring(MPI_COMM_WORLD, &o, &t, &t, &t, NULL);
    int pre_ok = rc0 == ATTN_E_INVALID && strstr(attn_last_error(), "not initialised") != NULL;
    char pre_msg[600];
    snprintf(pre_msg, sizeof pre_msg, "%s", attn_last_error());
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    CHECK(pre_ok, "before MPI_Init: rc %d (%s)", rc0, pre_msg);

    static const int64_t kl3[3] = {61, 17, 0};
    static const int64_t kl2[2] = {40, 1};
    int64_t *qlens = malloc(sizeof(int64_t) * (size_t)P);
    for (int r = 0; r < P; r++) qlens[r] = 1 + 3 * r; /* 1, 4, 7, 10: uneven contiguous shards */
    int64_t qsum = 0;
    for (int r = 0; r < P; r++) qsum += qlens[r];
    const ring_case cases[] = {
        {"non-causal striped", ATTN_RING_STRIPED, 2, 4, 4, 37, 37, 16, 16, 0, NULL, NULL},
        {"non-causal contiguous", ATTN_RING_CONTIGUOUS, 2, 4, 4, 37, 37, 16, 16, 0, NULL, NULL},
        {"causal striped", ATTN_RING_STRIPED, 2, 4, 4, 61, 61, 16, 16, 1, NULL, NULL},
        {"causal contiguous", ATTN_RING_CONTIGUOUS, 2, 4, 4, 61, 61, 16, 16, 1, NULL, NULL},
        {"GQA causal striped (H 6, Hkv 2, Dv 8)", ATTN_RING_STRIPED, 1, 6, 2, 45, 45, 16, 8, 1, NULL, NULL},
        {"MQA contiguous (Hkv 1)", ATTN_RING_CONTIGUOUS, 1, 4, 1, 29, 29, 8, 8, 0, NULL, NULL},
        {"key padding causal striped (61, 17, 0)", ATTN_RING_STRIPED, 3, 2, 2, 61, 61, 8, 8, 1, kl3, NULL},
        {"key padding contiguous (40, 1)", ATTN_RING_CONTIGUOUS, 2, 2, 1, 43, 43, 8, 8, 0, kl2, NULL},
        {"Lq < Lk causal striped", ATTN_RING_STRIPED, 1, 2, 2, 23, 41, 16, 16, 1, NULL, NULL},
        {"Lq < Lk causal contiguous", ATTN_RING_CONTIGUOUS, 1, 2, 2, 23, 41, 16, 16, 1, NULL, NULL},
        {"Lq > Lk causal striped (empty rows)", ATTN_RING_STRIPED, 1, 2, 1, 41, 23, 16, 16, 1, NULL, NULL},
        {"Lq > Lk causal contiguous (empty rows)", ATTN_RING_CONTIGUOUS, 1, 2, 1, 41, 23, 16, 16, 1, NULL, NULL},
        {"uneven contiguous query shards, causal", ATTN_RING_CONTIGUOUS, 1, 2, 2, qsum, 33, 16, 16, 1, NULL, qlens},
        {"large D causal striped", ATTN_RING_STRIPED, 1, 1, 1, 130, 130, 128, 64, 1, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    free(qlens);
    splits();
    balance();
    errors();
    /* every rank's counts into rank 0's RESULT line */
    int mine[2] = {attn_test_passed, attn_test_failed}, sum[2] = {0, 0};
    MPI_Reduce(mine, sum, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    double mx[3] = {tol_out_ref, tol_out_fused, tol_lse}, gmx[3];
    MPI_Reduce(mx, gmx, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    if (me != 0) {
        attn_test_passed = attn_test_failed = 0;
        return 0;
    }
    printf("mpi ring P=%d: max |diff| out vs float64 reference %.3g, vs attn_sdpa %.3g; lse %.3g\n", P, gmx[0], gmx[1],
           gmx[2]);
    attn_test_passed = sum[0];
    attn_test_failed = sum[1];
    /* after MPI_Finalize: a clear error too */
    int rc = attn_sdpa_ring(MPI_COMM_WORLD, &o, &t, &t, &t, NULL);
    CHECK(rc == ATTN_E_INVALID && strstr(attn_last_error(), "finalised"), "after MPI_Finalize: rc %d (%s)", rc,
          attn_last_error());
    return attn_test_finish();
}
