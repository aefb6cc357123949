/* attn_sdpa_ring_backward (include/attn_mpi.h) under `mpirun -np P` (tests/test_mpi.sh runs
 * P = 1..4): every rank builds the same full q, k, v and dout, computes on the whole sequence the
 * forward (attn_sdpa with its lse), the single-process backward attn_sdpa_backward and the float64
 * oracle attn_sdpa_backward_reference; then runs attn_sdpa_ring (out and lse of its shard) and
 * attn_sdpa_ring_backward on its shards and compares its rows of dq and keys of dk, dv.
 * Tolerance, per gradient, relative to the largest |reference| value of that gradient (the
 * measure of tests/test_sdpa_backward.c): <= 2e-5 against float64 — the single-process tiled
 * kernel's own bound there (measured 2.1e-6), since each block is that kernel and the sums over
 * the P blocks add at most P float32 roundings (dq sums in float64, dk / dv in float32, < 5e-7
 * relative for P <= 4) —; <= 4e-5 against single-process attn_sdpa_backward (two results, each
 * within 2e-5). The measured maxima are printed. Rank 0 prints one RESULT line for all ranks. */
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
    const int64_t *qlens, *klens; /* contiguous: explicit per-rank lengths (NULL: attn_ring_shard) */
} bw_case;

/* this rank's first position and step of a length-L sequence */
static void my_shard(attn_ring_layout layout, int64_t L, const int64_t *lens, int64_t *n, int64_t *first, int64_t *step) {
    attn_ring_shard(layout, L, P, me, n, first, step);
    if (lens) {
        *first = 0;
        for (int r = 0; r < me; r++) *first += lens[r];
        *n = lens[me];
        *step = 1;
    }
}

/* this rank's rows of a full [B, Hx, L, X] tensor as a (strided) view */
static attn_tensor shard_view(float *full, int64_t B, int64_t Hx, int64_t L, int64_t X, attn_ring_layout layout,
                              const int64_t *lens) {
    int64_t n, first, step;
    my_shard(layout, L, lens, &n, &first, &step);
    attn_tensor t = attn_tensor_f32_4d(full, B, Hx, L, X);
    t.data = full + first * X;
    t.shape[2] = n;
    t.stride[2] *= step;
    return t;
}

static double worst_ref = 0, worst_single = 0;

/* max |local - full view| / max |reference view| over a shard */
static void cmp(const char *what, const char *g, const float *loc, const attn_tensor *ref, const attn_tensor *single,
                double *eref, double *esingle, int *nonfinite) {
    double mr = 0, dr = 0, ds = 0;
    const int64_t B = ref->shape[0], H = ref->shape[1], n = ref->shape[2], X = ref->shape[3];
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t e = 0; e < X; e++) {
                    float x = loc[((b * H + h) * n + i) * X + e];
                    int64_t off = b * ref->stride[0] + h * ref->stride[1] + i * ref->stride[2] + e * ref->stride[3];
                    float r = ((float *)ref->data)[off], s = ((float *)single->data)[off];
                    if (!isfinite(x)) (*nonfinite)++;
                    if (fabs(r) > mr) mr = fabs(r);
                    if (fabs((double)x - r) > dr) dr = fabs((double)x - r);
                    if (fabs((double)x - s) > ds) ds = fabs((double)x - s);
                }
    /* the whole gradient's scale: max |reference| over every rank's part */
    MPI_Allreduce(MPI_IN_PLACE, &mr, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    *eref = mr > 0 ? dr / mr : dr;
    *esingle = mr > 0 ? ds / mr : ds;
    (void)what, (void)g;
}

static void run_case(const bw_case *c) {
    const int64_t B = c->B, H = c->H, Hkv = c->Hkv, Lq = c->Lq, Lk = c->Lk, D = c->D, Dv = c->Dv;
    uint64_t seed = 0x2545f4914f6cdd1dull ^ (uint64_t)(Lq * 131 + Lk * 7 + H + 1000 * c->causal);
    const int64_t nq_ = B * H * Lq, nk_ = B * Hkv * Lk;
    float *q = malloc(4 * nq_ * D), *k = malloc(4 * nk_ * D), *v = malloc(4 * nk_ * Dv), *go = malloc(4 * nq_ * Dv);
    float *o = malloc(4 * nq_ * Dv), *l = malloc(4 * nq_);
    float *rq = malloc(4 * nq_ * D), *rk = malloc(4 * nk_ * D), *rv = malloc(4 * nk_ * Dv);
    float *sq = malloc(4 * nq_ * D), *sk = malloc(4 * nk_ * D), *sv = malloc(4 * nk_ * Dv);
    attn_test_fill_uniform(q, nq_ * D, -1, 1, &seed);
    attn_test_fill_uniform(k, nk_ * D, -1, 1, &seed);
    attn_test_fill_uniform(v, nk_ * Dv, -1, 1, &seed);
    attn_test_fill_uniform(go, nq_ * Dv, -1, 1, &seed);
    attn_tensor tq = attn_tensor_f32_4d(q, B, H, Lq, D), tk = attn_tensor_f32_4d(k, B, Hkv, Lk, D);
    attn_tensor tv = attn_tensor_f32_4d(v, B, Hkv, Lk, Dv), tgo = attn_tensor_f32_4d(go, B, H, Lq, Dv);
    attn_tensor to = attn_tensor_f32_4d(o, B, H, Lq, Dv), tl = attn_tensor_f32_3d(l, B, H, Lq);
    attn_tensor trq = attn_tensor_f32_4d(rq, B, H, Lq, D), trk = attn_tensor_f32_4d(rk, B, Hkv, Lk, D);
    attn_tensor trv = attn_tensor_f32_4d(rv, B, Hkv, Lk, Dv), tsq = attn_tensor_f32_4d(sq, B, H, Lq, D);
    attn_tensor tsk = attn_tensor_f32_4d(sk, B, Hkv, Lk, D), tsv = attn_tensor_f32_4d(sv, B, Hkv, Lk, Dv);
    attn_sdpa_params sp = attn_sdpa_params_default();
    sp.is_causal = c->causal;
    sp.key_lengths = c->key_lengths;
    sp.n_threads = 1;
    sp.lse = &tl;
    CHECK_OK(attn_sdpa(&to, NULL, &tq, &tk, &tv, &sp));
    sp.lse = NULL;
    CHECK_OK(attn_sdpa_backward(&tsq, &tsk, &tsv, &tq, &tk, &tv, &to, &tl, &tgo, &sp));
    CHECK_OK(attn_sdpa_backward_reference(&trq, &trk, &trv, &tq, &tk, &tv, &to, &tl, &tgo, &sp));
    /* this rank's shards, the ring forward, then the ring backward */
    attn_tensor lq = shard_view(q, B, H, Lq, D, c->layout, c->qlens), lgo = shard_view(go, B, H, Lq, Dv, c->layout, c->qlens);
    attn_tensor lk = shard_view(k, B, Hkv, Lk, D, c->layout, c->klens), lv = shard_view(v, B, Hkv, Lk, Dv, c->layout, c->klens);
    const int64_t nq = lq.shape[2], nk = lk.shape[2];
    float *out = malloc(4 * (B * H * nq * Dv + 1)), *lse = malloc(4 * (B * H * nq + 1));
    float *dq = malloc(4 * (B * H * nq * D + 1)), *dk = malloc(4 * (B * Hkv * nk * D + 1)), *dv = malloc(4 * (B * Hkv * nk * Dv + 1));
    attn_tensor tout = attn_tensor_f32_4d(out, B, H, nq, Dv), tlse = attn_tensor_f32_3d(lse, B, H, nq);
    attn_tensor tdq = attn_tensor_f32_4d(dq, B, H, nq, D), tdk = attn_tensor_f32_4d(dk, B, Hkv, nk, D);
    attn_tensor tdv = attn_tensor_f32_4d(dv, B, Hkv, nk, Dv);
    attn_ring_params rp = attn_ring_params_default();
    rp.layout = c->layout;
    rp.sdpa.is_causal = c->causal;
    rp.sdpa.key_lengths = c->key_lengths;
    rp.sdpa.n_threads = 1;
    rp.sdpa.lse = &tlse;
    int rc = attn_sdpa_ring(MPI_COMM_WORLD, &tout, &lq, &lk, &lv, &rp);
    CHECK(rc == 0, "%s: attn_sdpa_ring returned %d: %s", c->name, rc, attn_last_error());
    attn_ring_stats st;
    memset(&st, 0, sizeof st);
    rp.sdpa.lse = NULL;
    rp.stats = &st;
    if (rc == 0) rc = attn_sdpa_ring_backward(MPI_COMM_WORLD, &tdq, &tdk, &tdv, &lq, &lk, &lv, &tout, &tlse, &lgo, &rp);
    CHECK(rc == 0, "%s: attn_sdpa_ring_backward returned %d: %s", c->name, rc, attn_last_error());
    if (rc == 0) {
        double er[3], es[3];
        int nonfinite = 0;
        attn_tensor r1 = shard_view(rq, B, H, Lq, D, c->layout, c->qlens), s1 = shard_view(sq, B, H, Lq, D, c->layout, c->qlens);
        attn_tensor r2 = shard_view(rk, B, Hkv, Lk, D, c->layout, c->klens), s2 = shard_view(sk, B, Hkv, Lk, D, c->layout, c->klens);
        attn_tensor r3 = shard_view(rv, B, Hkv, Lk, Dv, c->layout, c->klens), s3 = shard_view(sv, B, Hkv, Lk, Dv, c->layout, c->klens);
        cmp(c->name, "dq", dq, &r1, &s1, &er[0], &es[0], &nonfinite);
        cmp(c->name, "dk", dk, &r2, &s2, &er[1], &es[1], &nonfinite);
        cmp(c->name, "dv", dv, &r3, &s3, &er[2], &es[2], &nonfinite);
        int bad = nonfinite > 0;
        for (int i = 0; i < 3; i++) {
            if (er[i] > 2e-5 || es[i] > 4e-5) bad = 1;
            if (er[i] > worst_ref) worst_ref = er[i];
            if (es[i] > worst_single) worst_single = es[i];
        }
        CHECK(!bad, "%s (rank %d of %d): rel. err vs float64 dq %.3g dk %.3g dv %.3g (<= 2e-5), vs attn_sdpa_backward "
                    "%.3g %.3g %.3g (<= 4e-5), %d non-finite",
              c->name, me, P, er[0], er[1], er[2], es[0], es[1], es[2], nonfinite);
        /* bytes: k/v travel P - 1 hops and dk/dv P hops in all: (2P - 1)·|k, v| */
        int64_t sent = st.bytes_sent, total = 0;
        MPI_Allreduce(&sent, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        int64_t want = (int64_t)(2 * P - 1) * B * Hkv * Lk * (D + Dv) * 4;
        CHECK(total == want && st.steps == P, "%s: bytes sent %lld, want %lld; %d steps", c->name, (long long)total,
              (long long)want, st.steps);
    }
    free(q), free(k), free(v), free(go), free(o), free(l), free(rq), free(rk), free(rv), free(sq), free(sk), free(sv);
    free(out), free(lse), free(dq), free(dk), free(dv);
}

/* errors: every rank gets the same status, whichever rank's input was bad; never a hang */
static void errors(void) {
    static float buf[8 * 64], g[4][8 * 64];
    for (int i = 0; i < 8 * 64; i++) buf[i] = 0.125f * (float)(i % 7) - 0.3f;
    int64_t n;
    attn_ring_shard(ATTN_RING_STRIPED, 8 * P, P, me, &n, NULL, NULL);
    attn_tensor t = attn_tensor_f32_4d(buf, 1, 1, n, 8), o = attn_tensor_f32_4d(g[0], 1, 1, n, 8);
    float lse[64];
    attn_tensor tl = attn_tensor_f32_3d(lse, 1, 1, n);
    attn_ring_params rp = attn_ring_params_default();
    rp.sdpa.n_threads = 1;
    rp.sdpa.lse = &tl;
    CHECK_OK(attn_sdpa_ring(MPI_COMM_WORLD, &o, &t, &t, &t, &rp));
    rp.sdpa.lse = NULL;
    attn_tensor dq = attn_tensor_f32_4d(g[1], 1, 1, n, 8), dk = attn_tensor_f32_4d(g[2], 1, 1, n, 8);
    attn_tensor dv = attn_tensor_f32_4d(g[3], 1, 1, n, 8);
    CHECK_OK(attn_sdpa_ring_backward(MPI_COMM_WORLD, &dq, &dk, &dv, &t, &t, &t, &o, &tl, &t, &rp));
    char want[64];
    snprintf(want, sizeof want, "rank %d of %d", P - 1, P);
    /* the last rank's dk has the wrong shape */
    attn_tensor dkx = dk;
    if (me == P - 1) dkx.shape[3] = 4;
    int rc = attn_sdpa_ring_backward(MPI_COMM_WORLD, &dq, &dkx, &dv, &t, &t, &t, &o, &tl, &t, &rp);
    CHECK(rc == ATTN_E_SHAPE && (P == 1 || strstr(attn_last_error(), want)) && strstr(attn_last_error(), "dk"),
          "dk shape on rank %d: rc %d (%s)", P - 1, rc, attn_last_error());
    /* NaN in the last rank's dout: found inside the ring; ATTN_E_RANGE on every rank */
    float gd[64];
    for (int i = 0; i < 64; i++) gd[i] = 0.5f;
    if (me == P - 1) gd[5] = NAN;
    attn_tensor tg = attn_tensor_f32_4d(gd, 1, 1, n, 8);
    rc = attn_sdpa_ring_backward(MPI_COMM_WORLD, &dq, &dk, &dv, &t, &t, &t, &o, &tl, &tg, &rp);
    CHECK(rc == ATTN_E_RANGE, "NaN in rank %d's dout: rc %d (%s)", P - 1, rc, attn_last_error());
    /* no lse on rank 0 */
    rc = attn_sdpa_ring_backward(MPI_COMM_WORLD, &dq, &dk, &dv, &t, &t, &t, &o, me == 0 ? NULL : &tl, &t, &rp);
    CHECK(rc == ATTN_E_INVALID && strstr(attn_last_error(), "lse"), "NULL lse on rank 0: rc %d (%s)", rc, attn_last_error());
    /* causal flags that differ between ranks */
    attn_ring_params p2 = rp;
    p2.sdpa.is_causal = me == P - 1;
    rc = attn_sdpa_ring_backward(MPI_COMM_WORLD, &dq, &dk, &dv, &t, &t, &t, &o, &tl, &t, &p2);
    if (P > 1) CHECK(rc == ATTN_E_INVALID && strstr(attn_last_error(), "is_causal"), "causal mismatch: rc %d (%s)", rc, attn_last_error());
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == P, "MPI_COMM_WORLD still works after the errors");
}

int main(int argc, char **argv) {
    attn_test_name = "test_mpi_ring_backward";
    float x[8] = {0};
    attn_tensor t = attn_tensor_f32_4d(x, 1, 1, 1, 8), l = attn_tensor_f32_3d(x, 1, 1, 1);
    int rc0 = attn_sdpa_ring_backward(MPI_COMM_WORLD, &t, &t, &t, &t, &t, &t, &t, &l, &t, NULL);
    int pre_ok = rc0 == ATTN_E_INVALID && strstr(attn_last_error(), "not initialised") != NULL;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    CHECK(pre_ok, "before MPI_Init: rc %d", rc0);

    static const int64_t kl3[3] = {61, 17, 0};
    static const int64_t kl2[2] = {40, 1};
    int64_t *qlens = malloc(sizeof(int64_t) * (size_t)P), *klens = malloc(sizeof(int64_t) * (size_t)P);
    int64_t qsum = 0, ksum = 0;
    for (int r = 0; r < P; r++) qlens[r] = 1 + 3 * r, klens[r] = 9 - 2 * r, qsum += qlens[r], ksum += klens[r];
    const bw_case cases[] = {
        {"non-causal striped", ATTN_RING_STRIPED, 2, 2, 2, 37, 37, 16, 16, 0, NULL, NULL, NULL},
        {"causal striped", ATTN_RING_STRIPED, 2, 2, 2, 61, 61, 16, 16, 1, NULL, NULL, NULL},
        {"causal contiguous", ATTN_RING_CONTIGUOUS, 2, 2, 2, 61, 61, 16, 16, 1, NULL, NULL, NULL},
        {"GQA causal striped (H 6, Hkv 2, Dv 8)", ATTN_RING_STRIPED, 1, 6, 2, 45, 45, 16, 8, 1, NULL, NULL, NULL},
        {"MQA contiguous (Hkv 1)", ATTN_RING_CONTIGUOUS, 1, 4, 1, 29, 29, 8, 8, 0, NULL, NULL, NULL},
        {"key padding causal striped (61, 17, 0)", ATTN_RING_STRIPED, 3, 2, 2, 61, 61, 8, 8, 1, kl3, NULL, NULL},
        {"key padding contiguous (40, 1)", ATTN_RING_CONTIGUOUS, 2, 2, 1, 43, 43, 8, 8, 0, kl2, NULL, NULL},
        {"Lq < Lk causal striped", ATTN_RING_STRIPED, 1, 2, 2, 23, 41, 16, 16, 1, NULL, NULL, NULL},
        {"Lq > Lk causal contiguous (empty rows)", ATTN_RING_CONTIGUOUS, 1, 2, 1, 41, 23, 16, 16, 1, NULL, NULL, NULL},
        {"uneven contiguous shards (q 1,4,7,10; k 9,7,5,3), causal", ATTN_RING_CONTIGUOUS, 1, 2, 2, qsum, ksum, 16, 16, 1,
         NULL, qlens, klens},
        {"D 64 causal striped (tiles of 64)", ATTN_RING_STRIPED, 1, 1, 1, 150, 150, 64, 32, 1, NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    free(qlens), free(klens);
    errors();
    int mine[2] = {attn_test_passed, attn_test_failed}, sum[2] = {0, 0};
    MPI_Reduce(mine, sum, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    double mx[2] = {worst_ref, worst_single}, gmx[2];
    MPI_Reduce(mx, gmx, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    if (me != 0) {
        attn_test_passed = attn_test_failed = 0;
        return 0;
    }
    printf("mpi ring backward P=%d: max rel. err vs float64 reference %.3g, vs attn_sdpa_backward %.3g\n", P, gmx[0], gmx[1]);
    attn_test_passed = sum[0];
    attn_test_failed = sum[1];
    return attn_test_finish();
}
