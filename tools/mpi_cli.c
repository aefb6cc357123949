/* The CLI side of the MPI floor: attn sdpa --ring and attn embed under mpirun (see mpi_cli.h). */
#include "mpi_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef ATTN_HAVE_MPI

int cli_mpi_launched(void) { return 0; }

int cli_sdpa_ring(const char *qp, const char *kp, const char *vp, int layout, const attn_sdpa_params *p,
                  cli_outputs *outs) {
    return cli_outputs_finish(outs, cli_error("--ring needs an attn built with MPI; this one was built without it "
                                              "(install libopenmpi-dev and openmpi-bin, then `make MPI=1`)"));
}

int cli_embed_mpi(cli_texts *texts, const char *model, const char *outp, int64_t batch, cli_outputs *outs) {
    cli_texts_free(texts);
    return cli_outputs_finish(outs, cli_error("this attn was built without MPI"));
}

int cli_mpi_job_begin(int *me, int *P) {
    *me = 0, *P = 1;
    return cli_error("this attn was built without MPI");
}

int cli_mpi_gather_rows(int rc, void *buf, size_t row_bytes, int64_t n, int64_t batch) { return rc; }

int cli_mpi_job_finish(cli_outputs *outs, int rc) { return cli_outputs_finish(outs, rc); }

#endif

void cli_mpi_batch_range(int64_t n, int64_t batch, int P, int r, int64_t *s0, int64_t *s1) {
    int64_t nb = batch > 0 ? (n + batch - 1) / batch : 0;
    int64_t a = nb * r / P * batch, b = nb * (r + 1) / P * batch;
    *s0 = a < n ? a : n;
    *s1 = b < n ? b : n;
}

/* the rank count the MPI launcher put in the environment, 0 when none */
static int env_ranks(void) {
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMI_SIZE");
    return n ? atoi(n) : 0;
}

int cli_mpi_check_verb(int argc, char **argv) {
    const int P = env_ranks();
    if (P <= 1) return CLI_OK;
#ifndef ATTN_HAVE_MPI
    (void)argc, (void)argv;
    return cli_error("started by mpirun with %d ranks, but this attn was built without MPI, so every rank would run the "
                     "whole job alone; run it without mpirun, or install libopenmpi-dev and openmpi-bin and rebuild "
                     "(`make MPI=1`)",
                     P);
#else
    /* Open MPI 4's mpirun forwards its standard input to rank 0 through a pipe and can crash
     * (open-mpi/ompi#7483: its stdin read handler meets a released write event) once that pipe
     * fills while the input's end is still queued; seen 1 run in 6 with 137 kB of audio on the
     * default 64 kB pipe, 0 in 80 with a 1 MiB one (the most an unprivileged process may ask) */
    struct stat st;
    if (fstat(0, &st) == 0 && S_ISFIFO(st.st_mode)) (void)fcntl(0, F_SETPIPE_SZ, 1 << 20);
    const char *verb = argc > 1 ? argv[1] : "";
    int split = !strcmp(verb, "embed") || !strcmp(verb, "translate") || !strcmp(verb, "transcribe") || !strcmp(verb, "train"),
        ring = 0, eval = 0, help = 0;
    for (int i = 2; i < argc; i++) {
        ring |= !strcmp(argv[i], "--ring");
        eval |= !strcmp(argv[i], "--eval");
        help |= !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
        if (!strcmp(argv[i], "--")) break;
    }
    split |= (!strcmp(verb, "sdpa") && ring) || (!strcmp(verb, "classify") && eval);
    if (split || help || !*verb) return CLI_OK;
    return cli_usage_error(verb, "started by mpirun with %d ranks, but this does not split its work across ranks (every rank "
                                 "would run it alone); run it without mpirun. Under mpirun: sdpa --ring, embed, classify "
                                 "--eval, translate, transcribe and train vit",
                           P);
#endif
}

#ifdef ATTN_HAVE_MPI

#include "attn_bert.h"
#include "attn_mpi.h"
#include "attn_npy.h"
#include "attn_wordpiece.h"

#include <limits.h>

int cli_mpi_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL || getenv("PMI_SIZE") != NULL;
}

/* MPI_Init_thread (FUNNELED) unless already initialised; *me, *P of MPI_COMM_WORLD. */
static int mpi_begin(int *me, int *P) {
    int init = 0, provided;
    MPI_Initialized(&init);
    if (!init && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return cli_error("MPI_Init_thread failed");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, me);
    MPI_Comm_size(MPI_COMM_WORLD, P);
    return CLI_OK;
}

/* the end of an MPI verb: `agreed` is a status every rank already shares (ATTN_OK or an error
 * with its message), `local` this rank's own since then (rank 0's write); the two are agreed,
 * rank 0 prints the message and commits or removes its outputs, and its final exit status is the
 * one every rank returns */
static int mpi_end(int me, int agreed, int local, cli_outputs *outs) {
    int st = agreed < 0 ? agreed : attn_mpi_agree(MPI_COMM_WORLD, local);
    int rc = st < 0 ? CLI_FAIL : CLI_OK;
    if (me == 0 && st < 0) cli_error("%s", attn_last_error());
    if (me == 0) rc = cli_outputs_finish(outs, rc);
    else cli_outputs_finish(outs, CLI_FAIL); /* nothing staged on the other ranks */
    if (MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) rc = CLI_FAIL;
    MPI_Finalize();
    return rc;
}

static int job_begun;

int cli_mpi_job_begin(int *me, int *P) {
    int rc = mpi_begin(me, P);
    if (rc == CLI_OK) job_begun = 1;
    return rc;
}

int cli_mpi_gather_rows(int rc, void *buf, size_t row_bytes, int64_t n, int64_t batch) {
    int me, P, ok = rc == CLI_OK, all_ok = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if ((double)n * (double)row_bytes > INT_MAX) ok = ok && !cli_error("%lld rows exceed one MPI gather", (long long)n);
    int *cnt = malloc(sizeof(int) * (size_t)P), *disp = malloc(sizeof(int) * (size_t)P);
    if (!cnt || !disp) ok = ok && !cli_error("out of memory");
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) all_ok = 0;
    if (all_ok) {
        for (int r = 0; r < P; r++) {
            int64_t a, b;
            cli_mpi_batch_range(n, batch, P, r, &a, &b);
            cnt[r] = (int)((b - a) * (int64_t)row_bytes);
            disp[r] = (int)(a * (int64_t)row_bytes);
        }
        char *base = buf;
        int e = me == 0 ? MPI_Gatherv(MPI_IN_PLACE, 0, MPI_BYTE, buf, cnt, disp, MPI_BYTE, 0, MPI_COMM_WORLD)
                        : MPI_Gatherv(base + disp[me], cnt[me], MPI_BYTE, NULL, NULL, NULL, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (e != MPI_SUCCESS) all_ok = !cli_error("MPI_Gatherv failed");
    }
    free(cnt), free(disp);
    return all_ok ? CLI_OK : CLI_FAIL;
}

int cli_mpi_job_finish(cli_outputs *outs, int rc) {
    if (!job_begun) return cli_outputs_finish(outs, rc);
    int me, ok = rc == CLI_OK, all_ok = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) all_ok = 0;
    int fin = me == 0 ? cli_outputs_finish(outs, all_ok ? CLI_OK : (rc != CLI_OK ? rc : CLI_FAIL))
                      : cli_outputs_finish(outs, CLI_FAIL); /* only rank 0 commits */
    if (MPI_Bcast(&fin, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) fin = CLI_FAIL;
    MPI_Finalize();
    job_begun = 0;
    return fin;
}

/* t (2..4 dims) as [B, H, L, X], then rows of this rank's shard along L (a view) */
static int shard(attn_tensor *out, const attn_tensor *t, const char *what, const char *path, int layout, int P, int me,
                 int64_t *first, int64_t *step) {
    if (t->ndim < 2 || t->ndim > 4)
        return attn_set_error(ATTN_E_SHAPE, "%s: %s has %d dims; expected [B, H, L, D], [H, L, D] or [L, D]", path, what,
                              t->ndim);
    int64_t shape[4] = {1, 1, 1, 1}, n;
    for (int i = 0; i < t->ndim; i++) shape[4 - t->ndim + i] = t->shape[i];
    attn_tensor_make(out, t->data, ATTN_F32, 4, shape);
    int rc = attn_ring_shard((attn_ring_layout)layout, shape[2], P, me, &n, first, step);
    if (rc < 0) return rc;
    out->data = (float *)t->data + (n ? *first * out->stride[2] : 0);
    out->shape[2] = n;
    out->stride[2] *= *step;
    return ATTN_OK;
}

int cli_sdpa_ring(const char *qp, const char *kp, const char *vp, int layout, const attn_sdpa_params *p,
                  cli_outputs *outs) {
    int me, P;
    if (mpi_begin(&me, &P) != CLI_OK) return cli_outputs_finish(outs, CLI_FAIL);
    attn_mpi_npy mq, mk, mv;
    memset(&mq, 0, sizeof mq), memset(&mk, 0, sizeof mk), memset(&mv, 0, sizeof mv);
    attn_tensor q, k, v;
    memset(&q, 0, sizeof q), memset(&v, 0, sizeof v);
    int64_t qfirst = 0, qstep = 1, f, s;
    int st = attn_mpi_npy_map(&mq, qp);
    if (st == ATTN_OK) st = attn_mpi_npy_map(&mk, kp);
    if (st == ATTN_OK) st = attn_mpi_npy_map(&mv, vp);
    if (st == ATTN_OK && (mk.t.ndim != mq.t.ndim || mv.t.ndim != mq.t.ndim))
        st = attn_set_error(ATTN_E_SHAPE, "q, k and v have %d, %d and %d dims; they must have the same rank", mq.t.ndim,
                            mk.t.ndim, mv.t.ndim);
    if (st == ATTN_OK) st = shard(&q, &mq.t, "q", qp, layout, P, me, &qfirst, &qstep);
    if (st == ATTN_OK) st = shard(&k, &mk.t, "k", kp, layout, P, me, &f, &s);
    if (st == ATTN_OK) st = shard(&v, &mv.t, "v", vp, layout, P, me, &f, &s);
    float *lout = NULL, *all = NULL;
    int64_t B = q.shape[0], H = q.shape[1], nq = q.shape[2], Dv = v.shape[3], Lq = 0;
    if (st == ATTN_OK) {
        Lq = mq.t.shape[mq.t.ndim - 2];
        lout = malloc(sizeof(float) * (size_t)(B * H * nq * Dv + 1));
        if (!lout) st = attn_set_error(ATTN_E_NOMEM, "out of memory");
    }
    st = attn_mpi_agree(MPI_COMM_WORLD, st); /* every rank loaded, or none computes */
    if (st == ATTN_OK) {
        attn_tensor o = attn_tensor_f32_4d(lout, B, H, nq, Dv);
        attn_ring_params rp = attn_ring_params_default();
        rp.sdpa = *p;
        rp.layout = (attn_ring_layout)layout;
        st = attn_sdpa_ring(MPI_COMM_WORLD, &o, &q, &k, &v, &rp); /* agreed inside */
    }
    /* gather the rows on rank 0 (counts in floats; one message per rank) */
    int *cnt = NULL, *disp = NULL;
    if (st == ATTN_OK) {
        int64_t per_row = B * H * Dv, total = per_row * Lq;
        int lst = ATTN_OK;
        if (total > INT_MAX)
            lst = attn_set_error(ATTN_E_UNSUPPORTED, "the output (%lld floats) exceeds one MPI gather", (long long)total);
        if (me == 0 && lst == ATTN_OK) {
            all = malloc(sizeof(float) * (size_t)(total + 1));
            cnt = malloc(sizeof(int) * (size_t)P);
            disp = malloc(sizeof(int) * (size_t)P);
            if (!all || !cnt || !disp) lst = attn_set_error(ATTN_E_NOMEM, "out of memory for the output");
            for (int r = 0; lst == ATTN_OK && r < P; r++) {
                int64_t n;
                attn_ring_shard((attn_ring_layout)layout, Lq, P, r, &n, NULL, NULL);
                cnt[r] = (int)(n * per_row);
                disp[r] = r ? disp[r - 1] + cnt[r - 1] : 0;
            }
        }
        st = attn_mpi_agree(MPI_COMM_WORLD, lst);
        if (st == ATTN_OK) {
            int rc = MPI_Gatherv(lout, (int)(nq * per_row), MPI_FLOAT, all, cnt, disp, MPI_FLOAT, 0, MPI_COMM_WORLD);
            if (rc != MPI_SUCCESS) st = attn_set_error(ATTN_E_IO, "MPI_Gatherv failed");
        }
    }
    /* rank 0: rows back to their positions, written with q's rank: [..., Lq, Dv] */
    int wst = ATTN_OK;
    if (st == ATTN_OK && me == 0) {
        float *full = malloc(sizeof(float) * (size_t)(B * H * Lq * Dv + 1));
        if (!full) wst = attn_set_error(ATTN_E_NOMEM, "out of memory for the output");
        for (int r = 0; wst == ATTN_OK && r < P; r++) {
            int64_t n, first, step;
            attn_ring_shard((attn_ring_layout)layout, Lq, P, r, &n, &first, &step);
            const float *src = all + disp[r];
            for (int64_t bh = 0; bh < B * H; bh++)
                for (int64_t i = 0; i < n; i++)
                    memcpy(full + (bh * Lq + first + i * step) * Dv, src + (bh * n + i) * Dv, sizeof(float) * (size_t)Dv);
        }
        if (wst == ATTN_OK) {
            int nd = mq.t.ndim;
            int64_t oshape[4] = {B, H, Lq, Dv};
            attn_tensor t;
            attn_tensor_make(&t, full, ATTN_F32, nd, oshape + 4 - nd);
            const char *path = cli_output_path(outs, 0);
            if (!path) wst = attn_set_error(ATTN_E_NOMEM, "out of memory");
            else wst = attn_npy_save(path, &t);
        }
        free(full);
    }
    free(lout), free(all), free(cnt), free(disp);
    attn_mpi_npy_unmap(&mq), attn_mpi_npy_unmap(&mk), attn_mpi_npy_unmap(&mv);
    return mpi_end(me, st, wst, outs);
}

/* ---------------------------------------------------------------- attn embed */

/* rank 0's texts to every rank: the count, the lengths, then the bytes in chunks of <= 1 GiB */
static int share_texts(cli_texts *t, int me) {
    int64_t n = me == 0 ? t->n : 0;
    if (MPI_Bcast(&n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS) return attn_set_error(ATTN_E_IO, "MPI_Bcast failed");
    int64_t *lens = me == 0 ? t->lens : calloc((size_t)n + 1, sizeof *lens);
    int ok = lens != NULL || n == 0, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (me != 0) free(lens);
        return attn_set_error(ATTN_E_NOMEM, "out of memory for %lld texts", (long long)n);
    }
    for (int64_t i = 0; i < n; i += 1 << 26) {
        int c = (int)(n - i < (1 << 26) ? n - i : (1 << 26));
        MPI_Bcast(lens + i, c, MPI_INT64_T, 0, MPI_COMM_WORLD);
    }
    int64_t bytes = 0;
    for (int64_t i = 0; i < n; i++) bytes += lens[i];
    char *buf = malloc((size_t)bytes + 1);
    if (buf && me == 0)
        for (int64_t i = 0, o = 0; i < n; o += lens[i], i++) memcpy(buf + o, t->items[i], (size_t)lens[i]);
    ok = buf != NULL;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    int st = all_ok ? ATTN_OK : attn_set_error(ATTN_E_NOMEM, "out of memory for %lld bytes of text", (long long)bytes);
    for (int64_t o = 0; st == ATTN_OK && o < bytes; o += 1 << 30) {
        int c = (int)(bytes - o < (1 << 30) ? bytes - o : (1 << 30));
        if (MPI_Bcast(buf + o, c, MPI_CHAR, 0, MPI_COMM_WORLD) != MPI_SUCCESS) st = attn_set_error(ATTN_E_IO, "MPI_Bcast failed");
    }
    if (st == ATTN_OK && me != 0)
        for (int64_t i = 0, o = 0; i < n; o += lens[i], i++)
            if (cli_texts_add_n(t, buf + o, lens[i]) < 0) {
                st = attn_set_error(ATTN_E_NOMEM, "out of memory for the texts");
                break;
            }
    free(buf);
    if (me != 0) free(lens);
    return st;
}

typedef struct {
    int64_t len, idx;
} tok_ord;

/* the order attn_bert_embed_n batches in: token count descending, then input order */
static int by_len_desc(const void *a, const void *b) {
    const tok_ord *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

/* token counts of every text: rank r tokenizes the r-th of P equal runs, then all are shared
 * (an invalid text fails on the rank that holds it, naming the sentence's input number) */
static int token_counts(const attn_bert *m, const cli_texts *t, int me, int P, int64_t *counts) {
    const int64_t n = t->n, Lmax = attn_bert_get_config(m)->max_seq_len;
    int *cnt = malloc(sizeof(int) * (size_t)P), *disp = malloc(sizeof(int) * (size_t)P);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(Lmax + 1));
    int st = cnt && disp && ids ? ATTN_OK : attn_set_error(ATTN_E_NOMEM, "out of memory");
    if (st == ATTN_OK && n > INT_MAX) st = attn_set_error(ATTN_E_UNSUPPORTED, "more than INT_MAX texts");
    for (int r = 0; st == ATTN_OK && r < P; r++) {
        disp[r] = (int)(n * r / P);
        cnt[r] = (int)(n * (r + 1) / P) - disp[r];
    }
    for (int64_t i = st == ATTN_OK ? disp[me] : 0; st == ATTN_OK && i < disp[me] + cnt[me]; i++) {
        st = attn_tokenizer_encode(attn_bert_tokenizer(m), t->items[i], (size_t)t->lens[i], 1, Lmax, ids, &counts[i],
                                   Lmax, NULL);
        if (st < 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            st = attn_set_error(st, "embedding: sentence %lld: %s", (long long)i + 1, msg);
        }
    }
    st = attn_mpi_agree(MPI_COMM_WORLD, st);
    if (st == ATTN_OK &&
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, counts, cnt, disp, MPI_INT64_T, MPI_COMM_WORLD) != MPI_SUCCESS)
        st = attn_set_error(ATTN_E_IO, "MPI_Allgatherv failed"); /* the same on every rank */
    free(cnt), free(disp), free(ids);
    return st;
}

int cli_embed_mpi(cli_texts *texts, const char *model, const char *outp, int64_t batch, cli_outputs *outs) {
    int me, P;
    if (mpi_begin(&me, &P) != CLI_OK) {
        cli_texts_free(texts);
        return cli_outputs_finish(outs, CLI_FAIL);
    }
    int st = ATTN_OK;
    if (me == 0 && texts->n == 0 && cli_texts_read_stdin(texts) < 0)
        st = attn_set_error(ATTN_E_IO, "reading standard input failed: %s; nothing was written", strerror(errno));
    if (me != 0) cli_texts_free(texts); /* rank 0's texts are the input (all ranks parsed the same arguments) */
    st = attn_mpi_agree(MPI_COMM_WORLD, st);
    if (st == ATTN_OK) st = attn_mpi_agree(MPI_COMM_WORLD, share_texts(texts, me));
    const int64_t n = texts->n;
    attn_bert *m = NULL;
    if (st == ATTN_OK) {
        int lst = attn_bert_load(&m, model);
        if (lst < 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            lst = attn_set_error(lst, "loading the model: %s", msg);
        }
        st = attn_mpi_agree(MPI_COMM_WORLD, lst);
    }
    /* the batches one process would run (attn_bert_embed_n: sorted by token count, `batch` at a
     * time), whole batches per rank, balanced by their padded token count B·L: every sentence is
     * computed in exactly the batch it has in one process, so the output is bit-identical */
    tok_ord *ord = malloc(sizeof(tok_ord) * (size_t)(n + 1));
    int64_t nb = (n + batch - 1) / batch, *counts = calloc((size_t)n + 1, sizeof(int64_t));
    int64_t *cost = malloc(sizeof(int64_t) * (size_t)(nb + 1)), *starts = malloc(sizeof(int64_t) * (size_t)(P + 1));
    const char **items = malloc(sizeof(char *) * (size_t)(n + 1));
    int64_t *lens = malloc(sizeof(int64_t) * (size_t)(n + 1)), s0 = 0, s1 = 0, E = 0;
    float *emb = NULL, *all = NULL, *final = NULL;
    int *cnt = NULL, *disp = NULL;
    if (st == ATTN_OK)
        st = attn_mpi_agree(MPI_COMM_WORLD, ord && counts && cost && starts && items && lens
                                                ? ATTN_OK
                                                : attn_set_error(ATTN_E_NOMEM, "out of memory for %lld texts", (long long)n));
    if (st == ATTN_OK) st = token_counts(m, texts, me, P, counts);
    if (st == ATTN_OK) {
        for (int64_t i = 0; i < n; i++) ord[i] = (tok_ord){counts[i], i};
        qsort(ord, (size_t)n, sizeof *ord, by_len_desc);
        for (int64_t b = 0; b < nb; b++) cost[b] = (n - b * batch < batch ? n - b * batch : batch) * ord[b * batch].len;
        attn_mpi_split_by_size(cost, nb, P, starts);
        s0 = starts[me] * batch < n ? starts[me] * batch : n, s1 = starts[me + 1] * batch < n ? starts[me + 1] * batch : n;
        for (int64_t i = s0; i < s1; i++) items[i - s0] = texts->items[ord[i].idx], lens[i - s0] = texts->lens[ord[i].idx];
        E = attn_bert_get_config(m)->d_model;
        int lst = ATTN_OK;
        emb = malloc(sizeof(float) * (size_t)((s1 - s0) * E + 1));
        if (!emb) lst = attn_set_error(ATTN_E_NOMEM, "out of memory");
        if (lst == ATTN_OK && s1 > s0) {
            lst = attn_bert_embed_n(m, emb, items, lens, s1 - s0, batch, NULL, NULL);
            if (lst < 0) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", attn_last_error());
                lst = attn_set_error(lst, "embedding: %s", msg);
            }
        }
        if (lst == ATTN_OK && n * E > INT_MAX)
            lst = attn_set_error(ATTN_E_UNSUPPORTED, "%lld embeddings exceed one MPI gather", (long long)n);
        if (lst == ATTN_OK && me == 0) {
            all = malloc(sizeof(float) * (size_t)(n * E + 1));
            final = malloc(sizeof(float) * (size_t)(n * E + 1));
            cnt = malloc(sizeof(int) * (size_t)P), disp = malloc(sizeof(int) * (size_t)P);
            if (!all || !final || !cnt || !disp) lst = attn_set_error(ATTN_E_NOMEM, "out of memory");
            for (int r = 0; lst == ATTN_OK && r < P; r++) {
                int64_t a = starts[r] * batch < n ? starts[r] * batch : n, b = starts[r + 1] * batch < n ? starts[r + 1] * batch : n;
                cnt[r] = (int)((b - a) * E);
                disp[r] = (int)(a * E);
            }
        }
        st = attn_mpi_agree(MPI_COMM_WORLD, lst);
    }
    int wst = ATTN_OK;
    if (st == ATTN_OK &&
        MPI_Gatherv(emb, (int)((s1 - s0) * E), MPI_FLOAT, all, cnt, disp, MPI_FLOAT, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        wst = attn_set_error(ATTN_E_IO, "MPI_Gatherv failed");
    if (st == ATTN_OK && wst == ATTN_OK && me == 0) {
        for (int64_t i = 0; i < n; i++) memcpy(final + ord[i].idx * E, all + i * E, sizeof(float) * (size_t)E);
        if (outp) {
            attn_tensor t = attn_tensor_f32_2d(final, n, E);
            const char *path = cli_output_path(outs, 0);
            wst = !path ? attn_set_error(ATTN_E_NOMEM, "out of memory") : attn_npy_save(path, &t);
        } else {
            for (int64_t i = 0; i < n; i++) {
                putchar('[');
                for (int64_t e = 0; e < E; e++) printf(e ? ", %.9g" : "%.9g", final[i * E + e]);
                puts("]");
            }
            if (fflush(stdout) != 0) wst = attn_set_error(ATTN_E_IO, "writing standard output failed: %s", strerror(errno ? errno : EIO));
        }
    }
    free(ord), free(counts), free(cost), free(starts), free(items), free(lens);
    free(emb), free(all), free(final), free(cnt), free(disp);
    attn_bert_free(m);
    cli_texts_free(texts);
    return mpi_end(me, st, wst, outs);
}

#endif /* ATTN_HAVE_MPI */

/* ---------------------------------------------------------------- shared with tools/mpi_seq2seq.c */

#ifdef ATTN_HAVE_MPI
int cli_mpi_share_texts(cli_texts *t) {
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (me != 0) cli_texts_free(t); /* rank 0's texts are the input (all ranks parsed the same arguments) */
    int st = attn_mpi_agree(MPI_COMM_WORLD, share_texts(t, me));
    if (st < 0 && me == 0) cli_error("%s", attn_last_error());
    return st < 0 ? CLI_FAIL : CLI_OK;
}
#else
int cli_mpi_share_texts(cli_texts *t) { return CLI_OK; }
#endif
