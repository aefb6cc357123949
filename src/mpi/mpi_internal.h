/* Private helpers of libattn_mpi (src/mpi/); names use the attn__ prefix. */
#ifndef ATTN_MPI_INTERNAL_H
#define ATTN_MPI_INTERNAL_H

#include "attn_mpi.h"

/* attn__mpi_ready: ATTN_OK when MPI is initialised and not finalised and comm is not
 * MPI_COMM_NULL, else ATTN_E_INVALID naming `who`. Calls only MPI_Initialized / MPI_Finalized
 * before that is known (the two calls MPI allows at any time). */
int attn__mpi_ready(MPI_Comm comm, const char *who);

/* attn__mpi_error: ATTN_E_IO "what failed: <MPI_Error_string(code)>". */
int attn__mpi_error(int code, const char *what);

#endif
