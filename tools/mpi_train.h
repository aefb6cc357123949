/* Data-parallel `attn train vit` under mpirun (tools/mpi_train.c): every rank builds the same
 * model (same seed) and draws the same shuffled global batches; rank r trains on its slice of
 * each global batch, and the gradients are averaged over the ranks with MPI_Iallreduce in
 * buckets started from the backward's gradient hook (overlapping the rest of the backward), so
 * that P ranks with --batch B follow one process with --batch P·B (up to the order of the float
 * sums). Rank 0 alone evaluates, prints and writes checkpoints; every failure is agreed.
 * Built in every attn: without MPI, or when not started by mpirun, P = 1 and every call below
 * is a no-op that returns its status unchanged. */
#ifndef ATTN_TOOLS_MPI_TRAIN_H
#define ATTN_TOOLS_MPI_TRAIN_H

#include "attn_train.h"

#include <stdint.h>

/* cli_train_dp_begin: under mpirun MPI_Init (once) and this rank and the rank count; else 0, 1.
 * CLI_OK or CLI_FAIL (MPI could not start). */
int cli_train_dp_begin(int *me, int *P);

/* cli_train_dp_agree: collective: CLI_OK on every rank when every rank passed CLI_OK, else
 * CLI_FAIL on every rank (each failing rank printed its own message). */
int cli_train_dp_agree(int rc);

/* cli_train_dp_attach: before a training step's backward: install the gradient hook that scales
 * each finished gradient bucket by weight (this rank's share of the global batch, b_r / b) and
 * starts its MPI_Iallreduce. */
void cli_train_dp_attach(attn_vit_trainer *t, double weight);

/* cli_train_dp_reduce: after the backward (or instead of it, for a rank whose slice is empty):
 * starts the buckets the hook did not (zeros on a rank that failed or had no images), waits for
 * all, and agrees: returns ATTN_OK, or on every rank the status of the lowest failing rank with
 * its message ("rank r of P: ..."); *loss becomes the global batch's mean loss
 * (Σ_r loss_r·b_r / b). The gradients are then the global batch's mean gradient on every rank. */
int cli_train_dp_reduce(attn_vit_trainer *t, int lr_rc, double *loss, int64_t b_local, int64_t b);

/* cli_train_dp_same: collective: CLI_OK when every rank holds the same parameters, moments and
 * step (a 64-bit hash); else CLI_FAIL on every rank, rank 0 saying so. */
int cli_train_dp_same(const attn_vit_trainer *t);

/* cli_train_dp_end: the end of the run on every path: rc agreed (unless a failure was already
 * agreed), MPI_Finalize; returns the status every rank exits with. */
int cli_train_dp_end(int rc);

#endif
