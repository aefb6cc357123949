#include "texts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_texts_add(cli_texts *t, const char *s) {
    if (t->n == t->cap) {
        int64_t nc = t->cap ? 2 * t->cap : 64;
        char **ni = (char **)realloc(t->items, sizeof(char *) * (size_t)nc);
        if (!ni) return -1;
        t->items = ni;
        t->cap = nc;
    }
    t->items[t->n] = strdup(s);
    if (!t->items[t->n]) return -1;
    t->n++;
    return 0;
}

int cli_texts_read_stdin(cli_texts *t) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (cli_texts_add(t, line) < 0) {
            free(line);
            return -1;
        }
    }
    free(line);
    return ferror(stdin) ? -1 : 0;
}

void cli_texts_free(cli_texts *t) {
    for (int64_t i = 0; i < t->n; i++) free(t->items[i]);
    free(t->items);
    memset(t, 0, sizeof *t);
}
