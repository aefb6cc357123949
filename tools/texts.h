/* Shared by the model verbs: collect input sentences from argv or stdin. */
#ifndef ATTN_TOOLS_TEXTS_H
#define ATTN_TOOLS_TEXTS_H

#include <stdint.h>

typedef struct {
    char **items;
    int64_t n, cap;
} cli_texts;

/* cli_texts_add: append a copy of s. Returns 0 or -1 (out of memory). */
int cli_texts_add(cli_texts *t, const char *s);

/* cli_texts_read_stdin: one sentence per line (the trailing "\n" or "\r\n" removed; blank
 * lines are kept as empty sentences). Returns 0 or -1 (out of memory / read error). */
int cli_texts_read_stdin(cli_texts *t);

void cli_texts_free(cli_texts *t);

#endif
