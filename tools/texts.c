#include "texts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int cli_texts_add_n(cli_texts *t, const char *s, int64_t n) {
    if (n < 0) n = 0;
    if (t->n == t->cap) {
        int64_t nc = t->cap ? 2 * t->cap : 64;
        char **ni = (char **)realloc(t->items, sizeof(char *) * (size_t)nc);
        if (!ni) return -1;
        t->items = ni;
        int64_t *nl = (int64_t *)realloc(t->lens, sizeof(int64_t) * (size_t)nc);
        if (!nl) return -1;
        t->lens = nl;
        t->cap = nc;
    }
    char *c = (char *)malloc((size_t)n + 1);
    if (!c) return -1;
    if (n) memcpy(c, s, (size_t)n);
    c[n] = '\0';
    t->items[t->n] = c;
    t->lens[t->n] = n;
    t->n++;
    return 0;
}

int cli_texts_add(cli_texts *t, const char *s) { return cli_texts_add_n(t, s, (int64_t)strlen(s)); }

int cli_texts_read_stream(cli_texts *t, FILE *f) {
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        errno = 0;
        ssize_t len = getline(&line, &cap, f);
        if (len < 0) {
            /* getline returns -1 both at EOF and on failure (a read error sets the stream's error
             * flag; running out of memory for a long line does not): only a clean EOF is the end */
            int e = errno;
            int eof = feof(f) && !ferror(f);
            free(line);
            if (eof) return 0;
            errno = e ? e : EIO;
            return -1;
        }
        if (len > 0 && line[len - 1] == '\n') len--;
        if (len > 0 && line[len - 1] == '\r') len--;
        if (cli_texts_add_n(t, line, len) < 0) {
            free(line);
            errno = ENOMEM;
            return -1;
        }
    }
}

int cli_texts_read_stdin(cli_texts *t) { return cli_texts_read_stream(t, stdin); }

void cli_texts_free(cli_texts *t) {
    for (int64_t i = 0; i < t->n; i++) free(t->items[i]);
    free(t->items);
    free(t->lens);
    memset(t, 0, sizeof *t);
}
