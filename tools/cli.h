/*
 * cli.h — helpers shared by the `attn` command-line verbs (tools/cmd_*.c).
 *
 * Exit codes: CLI_OK (0) success, CLI_FAIL (1) the work failed (missing or malformed
 * file, dtype or shape mismatch, write error), CLI_USAGE (2) the command line is wrong
 * (unknown option, missing or malformed option value, a directory given as an output file, an
 * output naming an input, option values that contradict each other), found before any work.
 * Every message goes to stderr as "attn: error: ..."; usage errors add a line
 * "Try 'attn VERB --help'.".
 *
 * Adding a verb: write tools/cmd_NAME.c defining `int cmd_NAME(int argc, char **argv)`
 * (argv[0] is the verb) and add one X(NAME, "summary") line to ATTN_CLI_COMMANDS in
 * tools/main.c.
 *
 * Options: each verb declares them in a table (name, short name, kind = flag / string /
 * integer in a range / float / custom parser, the field of the verb's option struct that
 * receives the value, and the lines of --help that describe it), then parses with one call:
 *     typedef struct { const char *q, *o; int causal; int64_t threads; } sdpa_opts;
 *     #define F(f) offsetof(sdpa_opts, f)
 *     static const cli_option options[] = {
 *         {"--query", "-q", CLI_STR, F(q), .help = "  -q, --query FILE   queries\n"},
 *         {"--causal", NULL, CLI_FLAG, F(causal), 1, .help = "  --causal  causal mask\n"},
 *         {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = "  --threads N ...\n"},
 *         CLI_HELP_LINE("  -h, --help         this help\n"),
 *         {0}};
 *     sdpa_opts o = {0};
 *     int r = cli_parse(argc, argv, "sdpa", options, &o, NULL, NULL, usage);
 *     if (r != CLI_OK) return cli_parsed(r);        (--help shown: 0; usage error: 2)
 * usage() prints its prose around cli_print_options(f, options). Values are taken as
 * "-q FILE", "--query FILE" or "--query=FILE"; a flag takes no "=VALUE". "--" ends the
 * options in every verb: after it every argument is positional (so that "-5 degrees" works).
 * Positional arguments go to the callback given to cli_parse (NULL: none accepted).
 * The lower-level matchers (cli_more, cli_flag, cli_opt, cli_positional) remain for verbs
 * with sub-verbs.
 *
 * Outputs (every verb that writes files): declare them after parsing, write them only after
 * the work succeeded, and commit them together —
 *     cli_outputs outs;
 *     cli_outputs_init(&outs, "sdpa");
 *     if ((r = cli_output_add(&outs, "-o", op, 1)) || (r = cli_output_add(&outs, "--weights", wp, 1)) ||
 *         (r = cli_output_input(&outs, "-q", qp))) return r;         (refused up front)
 *     ... load, compute; nothing written yet ...
 *     attn_npy_save(cli_output_path(&outs, 0), &t);                   (any library writer)
 *     return cli_outputs_finish(&outs, rc);                           (commit all, or remove all)
 * Each output is staged in a temporary file beside its target (standard output, devices,
 * pipes and descriptor links such as /dev/stdout or /dev/fd/N: in $TMPDIR) and renamed over the
 * target only when every output of the run is complete; what cannot be renamed over (stdout,
 * /dev/stdout, /dev/fd/N, a device, a FIFO) is written through, never replaced. On any failure
 * no target is touched; on SIGINT / SIGTERM the staging files are removed (cli_signals_install). Two outputs naming one file (same device and inode, or
 * the same canonical path), an output naming an input, and binary data to a terminal ("-")
 * are refused before any work. Library messages that name a staging file are shown with the
 * user's path.
 */
#ifndef ATTN_CLI_H
#define ATTN_CLI_H

#include "attn_core.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

typedef struct {
    int argc;
    char **argv;
    int i;            /* index of the argument being looked at */
    const char *verb; /* for messages */
    int end_of_options; /* "--" seen */
} cli_args;

/* cli_args_start: iterate over argv[1..argc) of the verb `verb`. */
cli_args cli_args_start(int argc, char **argv, const char *verb);

/* cli_more: 1 while arguments remain (consumes the first "--", which ends the options). */
int cli_more(cli_args *a);

/* cli_positional: if the current argument is positional (after "--", or not starting with
 * '-', or exactly "-"), consume it, set *value and return 1; else 0. */
int cli_positional(cli_args *a, const char **value);

/* cli_flag: if the current argument is `short_name` or `long_name` (either may be NULL),
 * consume it and return 1; else 0. */
int cli_flag(cli_args *a, const char *short_name, const char *long_name);

/* cli_help: cli_flag(a, "-h", "--help"). */
int cli_help(cli_args *a);

/* cli_opt: if the current argument is the option (as "-x VALUE", "--name VALUE" or
 * "--name=VALUE"), consume it with its value, set *value and return 1; if it is the option
 * but the value is missing, print a usage error and return -1; otherwise return 0. */
int cli_opt(cli_args *a, const char *short_name, const char *long_name, const char **value);

/* cli_unknown: print "unknown option" (or "unexpected argument") for the current argument
 * and return CLI_USAGE. */
int cli_unknown(cli_args *a);

/* ---- option tables (see the top of this file) */
typedef enum {
    CLI_FLAG = 1, /* no value: stores (int)lo into an int field */
    CLI_STR,      /* const char * field */
    CLI_I64,      /* int64_t field: a whole decimal integer in [lo, hi] (cli_parse_i64) */
    CLI_F32,      /* float field: a finite float32 (cli_parse_f32) */
    CLI_CHOICE,   /* int field: values[k] (or k) for the value choices[k]; any other value is
                     refused with "OPT must be A, B or C, got 'X'" */
    CLI_CALL,     /* fn parses the value (NULL for a flag: takes_value 0) and stores it */
    CLI_LINE      /* no option: a line of --help only (CLI_HELP_LINE) */
} cli_kind;

typedef struct cli_option cli_option;
/* A custom parser: `field` is the verb's option struct + o->off, `base` the struct itself.
 * Returns CLI_OK, or an exit code with the message printed. */
typedef int (*cli_option_fn)(const cli_option *o, cli_args *a, const char *value, void *field, void *base);

struct cli_option {
    const char *name;       /* "--model"; NULL with help NULL ends the table */
    const char *short_name; /* "-o" or NULL */
    cli_kind kind;
    size_t off;             /* offsetof(the verb's option struct, field) */
    int64_t lo, hi;         /* CLI_I64: range; CLI_FLAG: lo is the value stored */
    const char *help;       /* its line(s) in --help, printed in table order; NULL: none */
    cli_option_fn fn;       /* CLI_CALL */
    int takes_value;        /* CLI_CALL: 1 takes a value, 0 is a flag */
    const char *label;      /* the name in messages (default: name) */
    const char *const *choices; /* CLI_CHOICE: the accepted values, NULL-terminated */
    const int *values;          /* CLI_CHOICE: what each stores (NULL: its index) */
};
#define CLI_HELP_LINE(text) {NULL, NULL, CLI_LINE, 0, 0, 0, text, NULL, 0, NULL, NULL, NULL}

/* A positional argument (after "--", or not starting with '-', or "-"): CLI_OK or an exit
 * code with the message printed. */
typedef int (*cli_positional_fn)(void *base, const char *verb, const char *arg);

/* Returned by cli_parse when --help was shown (cli_parsed turns it into CLI_OK). */
enum { CLI_HELP_SHOWN = -1 };

/* cli_parse: parse argv[1..argc) of `verb` against `table` (fields in *base), then, when
 * `table2` is not NULL, against `table2` (fields in *base2: a shared group such as the
 * sampling options). -h / --help prints usage(stdout) and returns CLI_HELP_SHOWN. Returns
 * CLI_OK, CLI_HELP_SHOWN, or the first error's exit code (message printed). */
int cli_parse(int argc, char **argv, const char *verb, const cli_option *table, void *base,
              const cli_option *table2, void *base2, cli_positional_fn positional, void (*usage)(FILE *));

/* cli_parse_texts: cli_parse for a verb whose option struct begins with a cli_texts (texts.h;
 * operands taken by cli_texts_take) and that needs --model DIR (*model, read after
 * the parse). Returns 1 to go on; 0 with the texts freed and *code the exit status (--help: 0, a
 * usage error such as "--model DIR is required": 2). */
int cli_parse_texts(int argc, char **argv, const char *verb, const cli_option *options, void *base,
                    const char *const *model, void (*usage)(FILE *), int *code);

/* cli_parsed: the exit status for a cli_parse result other than CLI_OK. */
static inline int cli_parsed(int r) { return r == CLI_HELP_SHOWN ? CLI_OK : r; }

/* cli_print_options: every help text of the table, in order. */
void cli_print_options(FILE *f, const cli_option *table);

/* cli_error: print "attn: error: <message>" to stderr and return CLI_FAIL. */
int cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* cli_stdout_error: after a failed fwrite / fflush of stdout, print "attn: error: writing
 * standard output failed: <strerror(errno), EIO if errno is 0>" and return CLI_FAIL. */
int cli_stdout_error(void);

/* cli_lib_error: print "attn: error: <context>: <attn_last_error()>" (context may be NULL)
 * and return CLI_FAIL. */
int cli_lib_error(const char *context);

/* cli_usage_error: print "attn: error: <message>" and "Try 'attn VERB --help'." and return
 * CLI_USAGE. */
int cli_usage_error(const char *verb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* cli_parse_i64: parse s as a whole decimal integer in [lo, hi] for option `opt`;
 * returns CLI_OK, or prints a usage error and returns CLI_USAGE (empty, trailing text,
 * out of range, overflow). */
int cli_parse_i64(const char *verb, const char *opt, const char *s, int64_t lo, int64_t hi,
                  int64_t *out);

/* cli_parse_f32: parse s as a whole finite float for option `opt`; CLI_OK or CLI_USAGE. */
int cli_parse_f32(const char *verb, const char *opt, const char *s, float *out);

/* cli_ends_with: 1 if s ends with suffix (ASCII case-insensitive). */
int cli_ends_with(const char *s, const char *suffix);

/* cli_load_npy: attn_npy_load with the error printed; returns CLI_OK or CLI_FAIL. */
int cli_load_npy(attn_tensor *t, const char *path);

/* cli_shape_str: "[2, 3, 4]" for t into buf (returns buf). */
const char *cli_shape_str(const attn_tensor *t, char *buf, size_t n);

/* ---- outputs: staged, checked up front, committed together (see the top of this file) */
enum { CLI_MAX_OUTPUTS = 8 };
typedef struct {
    const char *verb;
    int n;
    struct {
        const char *opt, *path; /* option and the user's path ("-" = standard output) */
        int binary;
        char *stage; /* staging file (allocated by cli_output_path) */
    } o[CLI_MAX_OUTPUTS];
} cli_outputs;

void cli_outputs_init(cli_outputs *s, const char *verb);

/* cli_output_add: declare output `path` (NULL: nothing, returns CLI_OK) given with option
 * `opt`; binary: a binary format. Refuses, with a message: "-" for binary data while stdout
 * is a terminal, an output naming the same file as an earlier one (CLI_USAGE); a directory,
 * or a file in a missing directory (CLI_FAIL). Returns CLI_OK, CLI_USAGE or CLI_FAIL. */
int cli_output_add(cli_outputs *s, const char *opt, const char *path, int binary);

/* cli_path_is_stdout: 1 when `path` is "-" or names what standard output already is (/dev/stdout,
 * /proc/self/fd/1, or the very file stdout is redirected to: same device and inode), else 0. A
 * verb whose standard output carries its report uses it to refuse a second output there. */
int cli_path_is_stdout(const char *path);

/* cli_output_input: refuse (CLI_USAGE) when an output names the input file `path` (given
 * with option `opt`; NULL path: CLI_OK). For an input directory (a model), refuses an
 * output that would replace an existing file directly inside it. */
int cli_output_input(cli_outputs *s, const char *opt, const char *path);

/* cli_output_path: the path the library writer must write output i to (its staging file);
 * NULL when out of memory. */
const char *cli_output_path(cli_outputs *s, int i);

/* cli_signals_install: on SIGINT, SIGTERM, SIGHUP and SIGPIPE (unless ignored), remove every
 * staging file and the library's temporary files, then die of the signal (exit status 128 + N
 * in a shell). Called once by main. */
void cli_signals_install(void);

/* cli_outputs_finish: if rc == CLI_OK, move every staged output onto its target (rename, or
 * copy to stdout / a device) and return CLI_OK, or CLI_FAIL with a message; otherwise remove
 * the staging files and return rc. Either way the staging files are gone afterwards. */
int cli_outputs_finish(cli_outputs *s, int rc);

#endif
