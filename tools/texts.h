/* Shared by the model verbs: collect input sentences from argv or stdin. */
#ifndef ATTN_TOOLS_TEXTS_H
#define ATTN_TOOLS_TEXTS_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    char **items;  /* each NUL-terminated after its lens[i] bytes (it may hold NUL bytes itself) */
    int64_t *lens; /* byte length of each item */
    int64_t n, cap;
} cli_texts;

/* cli_texts_add: append a copy of the NUL-terminated s. Returns 0 or -1 (out of memory). */
int cli_texts_add(cli_texts *t, const char *s);

/* cli_texts_add_n: append a copy of the n bytes at s (NUL bytes kept). 0 or -1. */
int cli_texts_add_n(cli_texts *t, const char *s, int64_t n);

/* cli_texts_read_stream: one sentence per line of f (the trailing "\n" or "\r\n" removed;
 * blank lines are kept as empty sentences; NUL bytes are kept, with explicit lengths).
 * Tells a read error from the end of input: returns 0 at EOF, or -1 with errno set to the
 * reason (the stream's read error, or ENOMEM) — the caller reports strerror(errno) and must
 * not use what was read. */
int cli_texts_read_stream(cli_texts *t, FILE *f);

/* cli_texts_read_stdin: cli_texts_read_stream(t, stdin). */
int cli_texts_read_stdin(cli_texts *t);

void cli_texts_free(cli_texts *t);

/* cli_texts_take (in cli.c): the positional-argument callback of cli_parse for verbs whose
 * option struct begins with a cli_texts: appends arg. CLI_OK, or CLI_FAIL (out of memory, said). */
int cli_texts_take(void *base, const char *verb, const char *arg);

#endif
