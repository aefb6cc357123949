/* Data-parallel `attn train vit` under mpirun: gradient averaging, agreement, the end of the run
 * (see mpi_train.h).
 *
 * Buckets: the parameters in descending index order (the order in which the backward finishes
 * them: classifier, last layer, ..., embeddings), cut into runs of whole tensors of at least
 * BUCKET_FLOATS floats (256 KiB), contiguous in the trainer's gradient buffer. The gradient hook
 * marks tensors final; every bucket whose tensors are all final is scaled by this rank's weight
 * and handed to MPI_Iallreduce (in place, MPI_SUM), strictly in bucket order, so that every rank
 * starts the same collectives in the same order. Each hook call also tests the open requests,
 * which lets Open MPI progress them while the backward computes the next layers.
 * cli_train_dp_reduce starts whatever is left (zeros on a rank that failed or had no images, so
 * the collectives still match), waits, and agrees on the step's status and loss. */
#include "mpi_train.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#ifndef ATTN_HAVE_MPI

int cli_train_dp_begin(int *me, int *P) {
    *me = 0, *P = 1;
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMI_SIZE");
    if (n && atoi(n) > 1)
        return cli_error("attn train under mpirun needs an attn built with MPI; this one was built without it "
                         "(install libopenmpi-dev and openmpi-bin, then `make MPI=1`)");
    return CLI_OK;
}
int cli_train_dp_agree(int rc) { return rc; }
void cli_train_dp_attach(attn_vit_trainer *t, double weight) { (void)t, (void)weight; }
int cli_train_dp_reduce(attn_vit_trainer *t, int lr_rc, double *loss, int64_t b_local, int64_t b) { return lr_rc; }
int cli_train_dp_same(const attn_vit_trainer *t) { return CLI_OK; }
int cli_train_dp_end(int rc) { return rc; }

#else

#include "attn_mpi.h"
#include "mpi_cli.h"

#include <limits.h>
#include <math.h>

#define BUCKET_FLOATS (1 << 16)

typedef struct {
    int pending; /* its tensors whose gradient is not final yet (this step) */
    int count;   /* its tensors */
    float *g;    /* their gradients, contiguous in memory (whatever their parameter indices) */
    int64_t n;   /* floats */
} bucket;

static struct {
    int on, me, P;
    int agreed_failure; /* a failure every rank already knows: cli_train_dp_end agrees no more */
    const attn_vit_trainer *t;
    int np, nb;
    bucket *b;
    MPI_Request *req;
    unsigned char *final; /* [np] */
    int *bucket_of;       /* [np] */
    int next;             /* buckets [0, next) started this step */
    double weight;
} dp;

int cli_train_dp_begin(int *me, int *P) {
    *me = 0, *P = 1;
    if (!cli_mpi_launched()) return CLI_OK;
    int init = 0, provided;
    MPI_Initialized(&init);
    if (!init && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return cli_error("MPI_Init_thread failed");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &dp.me);
    MPI_Comm_size(MPI_COMM_WORLD, &dp.P);
    dp.on = 1;
    *me = dp.me, *P = dp.P;
    return CLI_OK;
}

int cli_train_dp_agree(int rc) {
    if (!dp.on) return rc;
    int ok = rc == CLI_OK, all = 0;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) all = 0;
    if (!all) dp.agreed_failure = 1;
    if (!all && ok && dp.me == 0) cli_error("data-parallel training: another rank failed (its message above); stopped");
    return all ? CLI_OK : (rc != CLI_OK ? rc : CLI_FAIL);
}

/* the gradient of parameter i and its numel */
static float *grad_of(const attn_vit_trainer *t, int i, int64_t *n) {
    attn_tensor x;
    if (attn_vit_trainer_tensor(&x, t, i, 1) < 0) return NULL;
    *n = attn_tensor_numel(&x);
    return (float *)x.data;
}

static const attn_vit_trainer *sort_t;
/* descending gradient address: the backward finishes the later parameters first */
static int by_address_desc(const void *a, const void *b) {
    int64_t na, nb;
    const float *x = grad_of(sort_t, *(const int *)a, &na), *y = grad_of(sort_t, *(const int *)b, &nb);
    return x < y ? 1 : x > y ? -1 : 0;
}

/* the buckets of t (once per trainer): runs of gradients adjacent in memory (the trainer keeps
 * them in one buffer; a layer's q, k, v weights side by side, then their biases, so adjacency is
 * by address, not by parameter index), each closed once it holds BUCKET_FLOATS */
static int plan(const attn_vit_trainer *t) {
    if (dp.t == t) return ATTN_OK;
    free(dp.b), free(dp.req), free(dp.final), free(dp.bucket_of);
    dp.t = t;
    dp.np = attn_vit_trainer_param_count(t);
    dp.b = calloc((size_t)dp.np + 1, sizeof *dp.b);
    dp.req = malloc(sizeof *dp.req * ((size_t)dp.np + 1));
    dp.final = calloc((size_t)dp.np + 1, 1);
    dp.bucket_of = calloc((size_t)dp.np + 1, sizeof *dp.bucket_of);
    int *order = malloc(sizeof *order * ((size_t)dp.np + 1));
    dp.nb = 0;
    if (!dp.b || !dp.req || !dp.final || !dp.bucket_of || !order) {
        free(order);
        return attn_set_error(ATTN_E_NOMEM, "data-parallel training: out of memory");
    }
    for (int i = 0; i < dp.np; i++) {
        int64_t n = 0;
        if (!grad_of(t, i, &n)) {
            free(order);
            return attn_set_error(ATTN_E_INVALID, "data-parallel training: no gradient for parameter %d", i);
        }
        if (n > INT_MAX) {
            free(order);
            return attn_set_error(ATTN_E_UNSUPPORTED, "data-parallel training: a tensor of %lld floats", (long long)n);
        }
        order[i] = i;
    }
    sort_t = t;
    qsort(order, (size_t)dp.np, sizeof *order, by_address_desc);
    for (int k = 0; k < dp.np; k++) {
        const int i = order[k];
        int64_t n = 0;
        float *g = grad_of(t, i, &n);
        bucket *cur = dp.nb ? &dp.b[dp.nb - 1] : NULL;
        /* extend the open bucket downwards when tensor i ends where it starts and it is still small */
        if (cur && cur->n < BUCKET_FLOATS && g + n == cur->g && cur->n + n <= INT_MAX) cur->count++, cur->g = g, cur->n += n;
        else dp.b[dp.nb++] = (bucket){0, 1, g, n};
        dp.bucket_of[i] = dp.nb - 1;
    }
    free(order);
    return ATTN_OK;
}

/* start every ready bucket, in order */
static void start_ready(int force) {
    for (; dp.next < dp.nb; dp.next++) {
        bucket *k = &dp.b[dp.next];
        const int ready = k->pending == 0;
        if (!ready && !force) break;
        if (!ready || dp.weight == 0) memset(k->g, 0, sizeof(float) * (size_t)k->n);
        else if (dp.weight != 1)
            for (int64_t e = 0; e < k->n; e++) k->g[e] = (float)(k->g[e] * dp.weight);
        if (MPI_Iallreduce(MPI_IN_PLACE, k->g, (int)k->n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &dp.req[dp.next]) !=
            MPI_SUCCESS)
            dp.req[dp.next] = MPI_REQUEST_NULL; /* reported by the wait below */
    }
}

static void hook(void *user, int first, int count) {
    (void)user;
    for (int i = first; i < first + count && i < dp.np; i++)
        if (!dp.final[i]) dp.final[i] = 1, dp.b[dp.bucket_of[i]].pending--;
    start_ready(0);
    int flag;
    if (dp.next > 0) MPI_Testall(dp.next, dp.req, &flag, MPI_STATUSES_IGNORE);
}

void cli_train_dp_attach(attn_vit_trainer *t, double weight) {
    if (!dp.on) return;
    dp.weight = weight;
    dp.next = 0;
    if (plan(t) < 0) { /* no buckets: reduce reports it */
        attn_vit_trainer_set_grad_hook(t, NULL, NULL);
        return;
    }
    memset(dp.final, 0, (size_t)dp.np);
    for (int k = 0; k < dp.nb; k++) dp.b[k].pending = dp.b[k].count;
    attn_vit_trainer_set_grad_hook(t, hook, NULL);
}

int cli_train_dp_reduce(attn_vit_trainer *t, int lr_rc, double *loss, int64_t b_local, int64_t b) {
    if (!dp.on) return lr_rc;
    attn_vit_trainer_set_grad_hook(t, NULL, NULL);
    int st = dp.t == t && dp.b ? ATTN_OK : plan(t);
    /* a plan that failed fails on every rank alike (the same model): agree and stop */
    if (st < 0 || !dp.b) return attn_mpi_agree(MPI_COMM_WORLD, st < 0 ? st : attn_set_error(ATTN_E_NOMEM, "out of memory"));
    if (lr_rc < 0 || b_local == 0) dp.weight = 0; /* this rank contributes zeros */
    start_ready(1);
    int rw = MPI_Waitall(dp.nb, dp.req, MPI_STATUSES_IGNORE);
    double v[2] = {lr_rc == 0 && b_local > 0 ? *loss * (double)b_local : 0.0, lr_rc < 0 || rw != MPI_SUCCESS};
    if (MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) v[1] = 1;
    if (v[1] > 0) {
        int mine = lr_rc < 0 ? lr_rc : rw != MPI_SUCCESS ? attn_set_error(ATTN_E_IO, "MPI_Iallreduce of the gradients failed") : ATTN_OK;
        int a = attn_mpi_agree(MPI_COMM_WORLD, mine);
        return a < 0 ? a : attn_set_error(ATTN_E_IO, "a rank's gradient reduction failed");
    }
    *loss = v[0] / (double)b;
    return ATTN_OK;
}

/* FNV-1a over bytes */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

int cli_train_dp_same(const attn_vit_trainer *t) {
    if (!dp.on) return CLI_OK;
    uint64_t h = 0xcbf29ce484222325ull;
    int64_t step = attn_vit_trainer_step_count(t);
    h = fnv(h, &step, sizeof step);
    for (int i = 0; i < attn_vit_trainer_param_count(t); i++)
        for (int w = 0; w < 4; w++) {
            if (w == 1) continue; /* the gradients are scratch */
            attn_tensor x;
            if (attn_vit_trainer_tensor(&x, t, i, w) == 0) h = fnv(h, x.data, sizeof(float) * (size_t)attn_tensor_numel(&x));
        }
    uint64_t lo = h, hi = h;
    int e1 = MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    int e2 = MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (e1 == MPI_SUCCESS && e2 == MPI_SUCCESS && lo == hi) return CLI_OK;
    dp.agreed_failure = 1;
    return dp.me == 0 ? cli_error("data-parallel training: the %d ranks' parameters differ (%s); stopped",
                                  dp.P, e1 == MPI_SUCCESS && e2 == MPI_SUCCESS ? "the gradient sums were not identical" : "MPI_Allreduce failed")
                      : CLI_FAIL;
}

int cli_train_dp_end(int rc) {
    if (!dp.on) return rc;
    if (!dp.agreed_failure) rc = cli_train_dp_agree(rc);
    int fin = rc;
    if (MPI_Bcast(&fin, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) fin = CLI_FAIL;
    free(dp.b), free(dp.req), free(dp.final), free(dp.bucket_of);
    memset(&dp, 0, sizeof dp);
    MPI_Finalize();
    return fin;
}

#endif
