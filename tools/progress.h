/* progress.h — one progress bar on stderr for the long verbs (classify --eval, embed,
 * translate, transcribe).
 *
 *     cli_progress p;
 *     cli_progress_start(&p, opts.progress, "embed", "sentences", total);
 *     ... cli_progress_update(&p, done); ...
 *     cli_progress_end(&p);      (the last state and a newline; nothing when it was off)
 *
 * mode: CLI_PROGRESS_AUTO (the default): on when stderr is a terminal; 1 (--progress): on;
 * 0 (--no-progress): off. On a terminal the bar is one line redrawn in place ("\r", at most
 * 10 times a second); on a file or a pipe (--progress) it is one line per update, at most one
 * a second, and the last state always. A line reads
 *     embed: [########            ]  400/1000  40%  152.3 sentences/s  ETA 0:04
 * Verbs declare the two options with CLI_PROGRESS_OPTIONS in their table. */
#ifndef ATTN_TOOLS_PROGRESS_H
#define ATTN_TOOLS_PROGRESS_H

#include <stdint.h>

enum { CLI_PROGRESS_AUTO = -1 };

typedef struct {
    int on, tty;
    const char *label, *unit;
    double total, done;
    double t0, last; /* start, last line drawn (seconds, monotonic) */
    int drawn;       /* a line is on the screen (tty) or was printed */
} cli_progress;

void cli_progress_start(cli_progress *p, int mode, const char *label, const char *unit, double total);
void cli_progress_update(cli_progress *p, double done);
/* cli_progress_restart: a new total, and the clock (rate, time left) starts now */
void cli_progress_restart(cli_progress *p, double total);
void cli_progress_end(cli_progress *p);

/* for library callbacks of the form void (*)(int64_t done, int64_t total, void *user) */
void cli_progress_cb(int64_t done, int64_t total, void *user);

/* the --progress / --no-progress entries of an option table: off = offsetof an int field that
 * starts as CLI_PROGRESS_AUTO; pad1, pad2 (spaces) put the two help texts in the verb's column */
#define CLI_PROGRESS_OPTIONS(off, pad1, pad2)                                                      \
    {"--progress", NULL, CLI_FLAG, off, 1,                                                          \
     .help = "  --progress" pad1 "a progress bar on stderr even when it is not a terminal\n"},      \
    {"--no-progress", NULL, CLI_FLAG, off, 0,                                                       \
     .help = "  --no-progress" pad2 "no progress bar (default: one when stderr is a terminal)\n"}

#endif
