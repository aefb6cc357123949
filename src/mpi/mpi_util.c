/* libattn_mpi helpers: the collective status agreement, the size-balanced split and the
 * read-only .npy mapping (see include/attn_mpi.h). */
#include "attn_mpi.h"
#include "core/internal.h"
#include "mpi/mpi_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int attn__mpi_ready(MPI_Comm comm, const char *who) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin)
        return attn_set_error(ATTN_E_INVALID, "%s: MPI is %s; call MPI_Init (or MPI_Init_thread with at least "
                                              "MPI_THREAD_FUNNELED) first and run under mpirun",
                              who, fin ? "already finalised" : "not initialised");
    if (comm == MPI_COMM_NULL) return attn_set_error(ATTN_E_INVALID, "%s: the communicator is MPI_COMM_NULL", who);
    return ATTN_OK;
}

int attn__mpi_error(int code, const char *what) {
    char s[MPI_MAX_ERROR_STRING + 1];
    int n = 0;
    if (MPI_Error_string(code, s, &n) != MPI_SUCCESS) n = 0;
    s[n] = 0;
    return attn_set_error(ATTN_E_IO, "%s failed: %s", what, n ? s : "unknown MPI error");
}

/* what each rank sends in attn_mpi_agree */
typedef struct {
    int32_t status;
    char msg[508];
} agree_item;

int attn_mpi_agree(MPI_Comm comm, int status) {
    ATTN_TRY(attn__mpi_ready(comm, "attn_mpi_agree"));
    int me, P;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &P);
    agree_item mine;
    memset(&mine, 0, sizeof mine);
    mine.status = status < 0 ? status : 0;
    if (status < 0) snprintf(mine.msg, sizeof mine.msg, "%s", attn_last_error());
    /* a fixed-size exchange: a status and a message from every rank */
    agree_item *all = malloc(sizeof *all * (size_t)P);
    int failed_alloc = all == NULL, any = 0;
    /* agree on whether every rank could allocate the table before using it */
    if (MPI_Allreduce(&failed_alloc, &any, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) {
        free(all);
        return attn_set_error(ATTN_E_IO, "attn_mpi_agree: MPI_Allreduce failed");
    }
    if (any) {
        /* fall back to the status alone: the lowest status (most negative) wins, no message */
        int32_t st = mine.status, low = 0;
        free(all);
        if (MPI_Allreduce(&st, &low, 1, MPI_INT32_T, MPI_MIN, comm) != MPI_SUCCESS)
            return attn_set_error(ATTN_E_IO, "attn_mpi_agree: MPI_Allreduce failed");
        return attn_set_error(low < 0 ? low : ATTN_E_NOMEM, "attn_mpi_agree: out of memory on some rank");
    }
    int rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        return attn__mpi_error(rc, "attn_mpi_agree: MPI_Allgather");
    }
    int out = ATTN_OK;
    for (int r = 0; r < P; r++)
        if (all[r].status < 0) {
            all[r].msg[sizeof all[r].msg - 1] = 0;
            if (P == 1) out = attn_set_error(all[r].status, "%s", all[r].msg);
            else out = attn_set_error(all[r].status, "rank %d of %d: %s", r, P, all[r].msg);
            break;
        }
    free(all);
    return out;
}

int attn_mpi_split_by_size(const int64_t *sizes, int64_t n, int P, int64_t *starts) {
    if (!starts || P < 1 || n < 0 || (n > 0 && !sizes))
        return attn_set_error(ATTN_E_INVALID, "attn_mpi_split_by_size: need sizes, starts, n >= 0 and P >= 1");
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (sizes[i] < 0)
            return attn_set_error(ATTN_E_INVALID, "attn_mpi_split_by_size: sizes[%lld] = %lld is negative", (long long)i,
                                  (long long)sizes[i]);
        total += (double)sizes[i] + 1;
    }
    /* item i goes to rank floor(P * midpoint_i / total): non-decreasing in i, so runs */
    int r = 0;
    double before = 0;
    starts[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        double w = (double)sizes[i] + 1, mid = before + w / 2;
        int owner = (int)(P * mid / total);
        if (owner > P - 1) owner = P - 1;
        while (r < owner) starts[++r] = i;
        before += w;
    }
    while (r < P) starts[++r] = n;
    return ATTN_OK;
}

/* ---------------------------------------------------------------- .npy mapping */

/* the value text after 'key': in the header dict hdr, or NULL */
static const char *dict_value(const char *hdr, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

static int parse_header(const char *hdr, const char *path, attn_tensor *t) {
    const char *d = dict_value(hdr, "descr"), *f = dict_value(hdr, "fortran_order"), *s = dict_value(hdr, "shape");
    if (!d || !f || !s) return attn_set_error(ATTN_E_FORMAT, "%s: .npy header lacks descr, fortran_order or shape", path);
    if (strncmp(d, "'<f4'", 5) != 0) {
        const char *e = strchr(d + 1, '\'');
        return attn_set_error(ATTN_E_DTYPE, "%s: dtype %.*s; expected float32 ('<f4')", path,
                              e ? (int)(e - d + 1) : 6, d);
    }
    if (strncmp(f, "False", 5) != 0) return attn_set_error(ATTN_E_FORMAT, "%s: fortran_order must be False", path);
    if (*s != '(') return attn_set_error(ATTN_E_FORMAT, "%s: malformed shape in the .npy header", path);
    s++;
    int nd = 0;
    int64_t shape[ATTN_MAX_DIMS];
    for (;;) {
        while (*s == ' ') s++;
        if (*s == ')') break;
        if (*s < '0' || *s > '9' || nd == ATTN_MAX_DIMS)
            return attn_set_error(ATTN_E_FORMAT, "%s: malformed or too long shape in the .npy header", path);
        char *end;
        long long x = strtoll(s, &end, 10);
        if (x < 0 || x > ((int64_t)1 << 50)) return attn_set_error(ATTN_E_FORMAT, "%s: extent out of range", path);
        shape[nd++] = x;
        s = end;
        while (*s == ' ') s++;
        if (*s == ',') s++;
        else if (*s != ')') return attn_set_error(ATTN_E_FORMAT, "%s: malformed shape in the .npy header", path);
    }
    return attn_tensor_make(t, NULL, ATTN_F32, nd, shape);
}

int attn_mpi_npy_map(attn_mpi_npy *m, const char *path) {
    if (!m || !path) return attn_set_error(ATTN_E_INVALID, "attn_mpi_npy_map: NULL argument");
    memset(m, 0, sizeof *m);
    void *map = NULL;
    size_t size = 0;
    ATTN_TRY(attn__map_readonly(path, &map, &size));
    const unsigned char *b = map;
    int rc = ATTN_OK;
    size_t hlen = 0, off = 0;
    if (size < 10 || memcmp(b, "\x93NUMPY", 6) != 0) {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: not a .npy file (bad magic)", path);
    } else if (b[6] == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        off = 10;
    } else if ((b[6] == 2 || b[6] == 3) && size >= 12) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        off = 12;
    } else {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: unsupported .npy version %d", path, b[6]);
    }
    if (rc == ATTN_OK && (hlen > size - off || hlen > (1u << 20)))
        rc = attn_set_error(ATTN_E_FORMAT, "%s: .npy header longer than the file", path);
    char *hdr = rc == ATTN_OK ? malloc(hlen + 1) : NULL;
    if (rc == ATTN_OK && !hdr) rc = attn_set_error(ATTN_E_NOMEM, "attn_mpi_npy_map: out of memory");
    if (rc == ATTN_OK) {
        memcpy(hdr, b + off, hlen);
        hdr[hlen] = 0;
        rc = parse_header(hdr, path, &m->t);
    }
    free(hdr);
    if (rc == ATTN_OK) {
        size_t data_off = off + hlen, need = (size_t)attn_tensor_numel(&m->t) * 4;
        if (size - data_off < need) {
            rc = attn_set_error(ATTN_E_FORMAT, "%s: data shorter than the shape says (%zu of %zu bytes)", path,
                                size - data_off, need);
        } else {
            m->t.data = (unsigned char *)map + data_off;
            m->map = map;
            m->size = size;
            return ATTN_OK;
        }
    }
    if (map) munmap(map, size);
    memset(m, 0, sizeof *m);
    return rc;
}

void attn_mpi_npy_unmap(attn_mpi_npy *m) {
    if (!m) return;
    if (m->map) munmap(m->map, m->size);
    memset(m, 0, sizeof *m);
}
