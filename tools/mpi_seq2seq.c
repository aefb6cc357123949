/* The collectives of the data-parallel `attn translate` and `attn transcribe` under mpirun (see
 * mpi_cli.h): rank 0's status and numbers to every rank, the size-balanced split, and the
 * gather of every rank's output strings on rank 0 in input order. Without MPI (ATTN_HAVE_MPI
 * unset) they are those of a job of one rank. */
#include "mpi_cli.h"

#include <stdlib.h>
#include <string.h>

#ifndef ATTN_HAVE_MPI

int cli_mpi_bcast_rc(int rc) { return rc; }

int cli_mpi_agree(int rc) { return rc; }

int cli_mpi_bcast_i64(int64_t *v, int64_t n) { return CLI_OK; }

int cli_mpi_split(const int64_t *cost, int64_t n, int P, int64_t *starts) {
    starts[0] = 0;
    for (int r = 1; r <= P; r++) starts[r] = n;
    return CLI_OK;
}

int cli_mpi_gather_strings(int rc, int64_t n, int64_t k, const int64_t *idx, char *const *s, char **all) {
    for (int64_t i = 0; rc == CLI_OK && i < k; i++)
        if (!(all[idx[i]] = strdup(s[i]))) rc = cli_error("out of memory");
    return rc;
}

#else

#include "attn_mpi.h"

#include <limits.h>

int cli_mpi_bcast_rc(int rc) {
    if (MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) return cli_error("MPI_Bcast failed");
    return rc;
}

int cli_mpi_bcast_i64(int64_t *v, int64_t n) {
    for (int64_t i = 0; i < n; i += 1 << 26) {
        int c = (int)(n - i < (1 << 26) ? n - i : (1 << 26));
        if (MPI_Bcast(v + i, c, MPI_INT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS) return cli_error("MPI_Bcast failed");
    }
    return CLI_OK;
}

int cli_mpi_split(const int64_t *cost, int64_t n, int P, int64_t *starts) {
    return attn_mpi_split_by_size(cost, n, P, starts) < 0 ? cli_lib_error(NULL) : CLI_OK;
}

/* the agreed "every rank is fine": MPI_MIN of ok over the ranks */
static int all_ok(int ok) {
    int all = 0;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) all = 0;
    return all;
}

int cli_mpi_agree(int rc) {
    int ok = all_ok(rc == CLI_OK);
    return rc != CLI_OK ? rc : ok ? CLI_OK : CLI_FAIL;
}

int cli_mpi_gather_strings(int rc, int64_t n, int64_t k, const int64_t *idx, char *const *s, char **all) {
    int me, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    /* this rank's (position, length) pairs and its bytes, back to back */
    int64_t mine[2] = {k, 0}, *meta = malloc(sizeof(int64_t) * (size_t)(2 * k + 1));
    char *bytes = NULL;
    int ok = rc == CLI_OK;
    if (ok && !meta) ok = !cli_error("out of memory");
    for (int64_t i = 0; ok && i < k; i++) {
        meta[2 * i] = idx[i], meta[2 * i + 1] = (int64_t)strlen(s[i]);
        mine[1] += meta[2 * i + 1];
    }
    if (ok && !(bytes = malloc((size_t)mine[1] + 1))) ok = !cli_error("out of memory");
    for (int64_t i = 0, o = 0; ok && i < k; o += meta[2 * i + 1], i++) memcpy(bytes + o, s[i], (size_t)meta[2 * i + 1]);
    int64_t *sizes = NULL, *all_meta = NULL;
    char *all_bytes = NULL;
    int *cnt = NULL, *disp = NULL, *bcnt = NULL, *bdisp = NULL;
    if (!(ok = all_ok(ok))) goto fail;
    /* rank 0: every rank's item and byte counts, then one gather of the pairs and one of the bytes */
    if (me == 0 && !(sizes = malloc(sizeof(int64_t) * 2 * (size_t)P))) ok = !cli_error("out of memory");
    ok = all_ok(ok);
    if (ok && MPI_Gather(mine, 2, MPI_INT64_T, sizes, 2, MPI_INT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        ok = !cli_error("MPI_Gather failed");
    if (ok && me == 0) {
        int64_t items = 0, total = 0;
        for (int r = 0; r < P; r++) items += sizes[2 * r], total += sizes[2 * r + 1];
        cnt = malloc(sizeof(int) * (size_t)P), disp = malloc(sizeof(int) * (size_t)P);
        bcnt = malloc(sizeof(int) * (size_t)P), bdisp = malloc(sizeof(int) * (size_t)P);
        all_meta = malloc(sizeof(int64_t) * (size_t)(2 * items + 1));
        all_bytes = malloc((size_t)total + 1);
        if (items != n) ok = !cli_error("the ranks hold %lld outputs of %lld inputs", (long long)items, (long long)n);
        else if (2 * items > INT_MAX || total > INT_MAX)
            ok = !cli_error("the output (%lld bytes of %lld inputs) exceeds one MPI gather", (long long)total, (long long)n);
        else if (!cnt || !disp || !bcnt || !bdisp || !all_meta || !all_bytes) ok = !cli_error("out of memory");
        for (int r = 0, d = 0, bd = 0; ok && r < P; d += cnt[r], bd += bcnt[r], r++) {
            cnt[r] = (int)(2 * sizes[2 * r]), disp[r] = d;
            bcnt[r] = (int)sizes[2 * r + 1], bdisp[r] = bd;
        }
    }
    ok = all_ok(ok);
    if (ok && (MPI_Gatherv(meta, (int)(2 * k), MPI_INT64_T, all_meta, cnt, disp, MPI_INT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS ||
               MPI_Gatherv(bytes, (int)mine[1], MPI_CHAR, all_bytes, bcnt, bdisp, MPI_CHAR, 0, MPI_COMM_WORLD) != MPI_SUCCESS))
        ok = !cli_error("MPI_Gatherv failed");
    /* rank 0: each string to its input position */
    for (int64_t i = 0, o = 0; ok && me == 0 && i < n; o += all_meta[2 * i + 1], i++) {
        int64_t at = all_meta[2 * i], len = all_meta[2 * i + 1];
        if (at < 0 || at >= n || all[at]) {
            ok = !cli_error("input %lld was held by two ranks or by none", (long long)at + 1);
        } else if (!(all[at] = malloc((size_t)len + 1))) {
            ok = !cli_error("out of memory");
        } else {
            memcpy(all[at], all_bytes + o, (size_t)len);
            all[at][len] = 0;
        }
    }
    ok = all_ok(ok);
fail:
    free(meta), free(bytes), free(sizes), free(all_meta), free(all_bytes);
    free(cnt), free(disp), free(bcnt), free(bdisp);
    return rc != CLI_OK ? rc : ok ? CLI_OK : CLI_FAIL;
}

#endif /* ATTN_HAVE_MPI */
