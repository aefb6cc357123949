/*
 * attn_io.h — atomic output files: a file the library writes is either complete or
 * untouched.
 *
 * Every writer in the library (attn_npy_save, the heatmap and HTML writers, ...) writes
 * through this facility, and new writers should too:
 *
 *     attn_out *o;
 *     if (attn_out_open(&o, path, ATTN_OUT_BINARY) < 0) return ATTN_E_IO;  (message set)
 *     FILE *f = attn_out_file(o);
 *     ... fwrite / fprintf to f; on an error of your own: attn_out_abort(o); return rc; ...
 *     return attn_out_commit(o);   (ATTN_OK, or ATTN_E_IO with the reason)
 *
 * How: attn_out_open creates a new temporary file ".NAME.XXXXXX.tmp" in the target's own
 * directory (so that the final rename(2) is atomic); attn_out_commit flushes it, checks every
 * write, fsync(2)s it, gives it the old target's permission bits (a new file gets 0666 less
 * the umask) and renames it over the target. attn_out_abort, or any failure in commit,
 * removes the temporary file; the target keeps its old content (or stays absent).
 * A symbolic link as target is followed: the file it points to is replaced, the link kept.
 * A target that exists but is not a regular file (a character device such as /dev/null, a
 * FIFO) cannot be renamed over: the content is buffered in an anonymous temporary file and
 * copied to it at commit. A directory is refused (ATTN_E_IO, "is a directory").
 * The path "-" means standard output (buffered the same way, so that nothing reaches stdout
 * unless commit is reached); with ATTN_OUT_BINARY it is refused while stdout is a terminal.
 *
 * Fault injection (tests): when the environment variable ATTN_FAULT_WRITE_AFTER=N is set,
 * every output stream accepts N bytes and then fails each write with ENOSPC ("No space left
 * on device"), as a full file system would.
 *
 * Not thread-safe on one handle; distinct handles may be used from distinct threads.
 */
#ifndef ATTN_IO_H
#define ATTN_IO_H

#include "attn_core.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_out attn_out;

enum {
    ATTN_OUT_TEXT = 0,  /* text format: may go to a terminal */
    ATTN_OUT_BINARY = 1 /* binary format (.npy, PNG): "-" refused when stdout is a terminal */
};

/* attn_out_open: start writing `path` (or "-" = standard output). *out receives the handle.
 * Errors: ATTN_E_INVALID (NULL / empty path, binary data to a terminal), ATTN_E_IO (the
 * target is a directory, its directory is missing or not writable; message has strerror),
 * ATTN_E_NOMEM. Nothing is created on error. */
int attn_out_open(attn_out **out, const char *path, int flags);

/* attn_out_file: the stream to write to (valid until commit / abort). */
FILE *attn_out_file(attn_out *o);

/* attn_out_path: the target path as given to attn_out_open (for messages). */
const char *attn_out_path(const attn_out *o);

/* attn_out_commit: finish: flush, check every write, fsync, rename over the target (or copy
 * to stdout / the device). Always releases o. Returns ATTN_OK, or ATTN_E_IO with the
 * message "<path>: write failed: <strerror>" and the target untouched. */
int attn_out_commit(attn_out *o);

/* attn_out_abort: drop the output: close and remove the temporary file, release o; the
 * target is untouched. NULL-safe; keeps the current error message. */
void attn_out_abort(attn_out *o);

/* attn_same_file: 1 if paths a and b name the same file — same device and inode when both
 * exist; otherwise the same canonical path (symbolic links in the directories resolved);
 * "-" is standard output (compared by its device and inode when it is a file). 0 if not. */
int attn_same_file(const char *a, const char *b);

#ifdef __cplusplus
}
#endif
#endif
