/* The CLI side of the MPI floor (tools/mpi_cli.c): `attn sdpa --ring` and data-parallel verbs
 * under mpirun. Built in every attn; without MPI (ATTN_HAVE_MPI unset) the entry points print
 * a clear message and return CLI_FAIL. */
#ifndef ATTN_TOOLS_MPI_CLI_H
#define ATTN_TOOLS_MPI_CLI_H

#include "attn_attention.h"
#include "cli.h"
#include "texts.h"

/* cli_mpi_launched: 1 when this attn has MPI built in and was started by mpirun / an MPI
 * launcher (OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_SIZE in the environment), else 0. */
int cli_mpi_launched(void);

/* cli_mpi_check_verb: main's check of `attn VERB ARGS` (argv[1] the verb) started by mpirun /
 * an MPI launcher with more than one rank (OMPI_COMM_WORLD_SIZE or PMI_SIZE > 1): CLI_OK for the
 * verbs that split their work (sdpa --ring, embed, classify --eval, translate, transcribe, train)
 * and for --help; otherwise a message and CLI_USAGE (each rank would run the whole job alone and
 * print it once more), or CLI_FAIL in an attn built without MPI (any verb). CLI_OK without a
 * launcher or with one rank. */
int cli_mpi_check_verb(int argc, char **argv);

/* cli_sdpa_ring: attn sdpa --ring: every rank maps q, k, v (float32 .npy, [B, H, L, D],
 * [H, L, D] or [L, D]) and views its shard (layout 0 contiguous, 1 striped), runs
 * attn_sdpa_ring on MPI_COMM_WORLD, rank 0 gathers the rows and writes OUT through outs (output
 * 0) after every rank succeeded; finishes outs and returns the exit status every rank agrees
 * on. Errors are printed once, by rank 0, naming the failing rank. */
int cli_sdpa_ring(const char *qp, const char *kp, const char *vp, int layout, const attn_sdpa_params *p,
                  cli_outputs *outs);

/* cli_embed_mpi: attn embed under mpirun: rank 0 reads the texts from standard input when
 * texts->n == 0 (mpirun gives stdin to rank 0 only) and sends them to every rank; the texts are
 * split into consecutive runs of nearly equal byte size (attn_mpi_split_by_size), each rank
 * embeds its run, rank 0 gathers them in input order and writes the output (.npy through outs
 * when outp, else JSON lines on stdout) after every rank succeeded. Frees texts, finishes outs,
 * returns the agreed exit status. */
int cli_embed_mpi(cli_texts *texts, const char *model, const char *outp, int64_t batch, cli_outputs *outs);

/* Data-parallel jobs over items in fixed batches (classify --eval): under mpirun every rank runs
 * the whole verb on its run of whole batches, rank 0 reports and writes.
 * cli_mpi_job_begin: MPI_Init (once) and this rank and the rank count; CLI_OK or CLI_FAIL. */
int cli_mpi_job_begin(int *me, int *P);

/* cli_mpi_batch_range: rank r's items [*s0, *s1) of n items when whole batches of `batch` go to
 * the P ranks in order, as evenly as whole batches allow (each rank runs exactly the batches one
 * process would, so the results are bit-identical to one process). */
void cli_mpi_batch_range(int64_t n, int64_t batch, int P, int r, int64_t *s0, int64_t *s1);

/* cli_mpi_gather_rows: collective: rc (this rank's CLI status) agreed (CLI_FAIL on every rank when
 * any rank failed; the failing rank printed its own message); then rows [s0, s1) of every rank's
 * buf (n rows of row_bytes, ranges from cli_mpi_batch_range) gathered into rank 0's buf, in
 * place. Returns the agreed status. */
int cli_mpi_gather_rows(int rc, void *buf, size_t row_bytes, int64_t n, int64_t batch);

/* cli_mpi_job_finish: the end of a verb that may have begun a job: without one,
 * cli_outputs_finish(outs, rc); with one, rc agreed over the ranks, rank 0 commits or removes
 * its outputs, the other ranks remove their staging files, MPI_Finalize, and every rank returns
 * rank 0's final status. */
int cli_mpi_job_finish(cli_outputs *outs, int rc);

#endif

/* ---- data-parallel translate and transcribe (tools/mpi_seq2seq.c; cli_mpi_share_texts in
 * tools/mpi_cli.c). Collectives of a job begun with cli_mpi_job_begin; statuses are CLI ones,
 * a rank that fails has printed its own message (as cli_mpi_gather_rows). */

/* cli_mpi_share_texts: rank 0's texts (read from standard input or the arguments) replace every
 * other rank's (as cli_embed_mpi shares them). CLI_OK on every rank, or CLI_FAIL on every rank
 * (rank 0 printed why). */
int cli_mpi_share_texts(cli_texts *t);

/* cli_mpi_bcast_rc: rank 0's status rc, returned on every rank (rank 0 checked and said what
 * every rank would find wrong alike: one message, not P). */
int cli_mpi_bcast_rc(int rc);

/* cli_mpi_bcast_i64: rank 0's v[0..n) to every rank. CLI_OK or CLI_FAIL (said). */
int cli_mpi_bcast_i64(int64_t *v, int64_t n);

/* cli_mpi_split: consecutive runs of the n items (item i costs cost[i] >= 0, e.g. padded tokens
 * or bytes) for the P ranks, of nearly equal total cost (attn_mpi_split_by_size): rank r gets
 * items [starts[r], starts[r + 1]), starts[P + 1]. CLI_OK or CLI_FAIL (said). */
int cli_mpi_split(const int64_t *cost, int64_t n, int P, int64_t *starts);

/* cli_mpi_gather_strings: collective: rc agreed (CLI_FAIL on every rank when any rank failed);
 * then this rank's k NUL-terminated strings s[0..k) of input positions idx[0..k) (in 0..n-1,
 * each position held by exactly one rank) gathered on rank 0 into all[idx[i]] (malloc'd copies;
 * all[n] set to NULL by rank 0 beforehand, the caller frees them). Returns rc when it is not
 * CLI_OK (its exit code kept), else the agreed status. */
int cli_mpi_gather_strings(int rc, int64_t n, int64_t k, const int64_t *idx, char *const *s, char **all);

/* cli_mpi_agree: collective: rc agreed over the ranks (a rank whose rc is not CLI_OK keeps it,
 * the others get CLI_FAIL when any rank failed; each failing rank printed its own message). */
int cli_mpi_agree(int rc);
