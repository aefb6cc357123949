/*
 * cli.h — helpers shared by the `attn` command-line verbs (tools/cmd_*.c).
 *
 * Exit codes: CLI_OK (0) success, CLI_FAIL (1) the work failed (missing or malformed
 * file, dtype or shape mismatch, write error), CLI_USAGE (2) the command line is wrong
 * (unknown option, missing or malformed option value).
 * Every message goes to stderr as "attn: error: ..."; usage errors add a line
 * "Try 'attn VERB --help'.".
 *
 * Adding a verb: write tools/cmd_NAME.c defining `int cmd_NAME(int argc, char **argv)`
 * (argv[0] is the verb) and add one X(NAME, "summary") line to ATTN_CLI_COMMANDS in
 * tools/main.c.
 *
 * Option parsing, e.g.
 *     cli_args a = cli_args_start(argc, argv, "sdpa");
 *     while (cli_more(&a)) {
 *         const char *val;
 *         int r;
 *         if (cli_help(&a)) { usage(stdout); return CLI_OK; }
 *         else if ((r = cli_opt(&a, "-q", "--query", &val))) { if (r < 0) return CLI_USAGE; q = val; }
 *         else if (cli_flag(&a, NULL, "--causal")) causal = 1;
 *         else return cli_unknown(&a);
 *     }
 * Values are taken as "-q FILE", "--query FILE" or "--query=FILE".
 * "--" ends the options in every verb: after it, cli_flag / cli_opt / cli_help match nothing
 * and every argument is positional. Verbs with positional arguments (texts) take them with
 *         else if (cli_positional(&a, &val)) add_text(val);
 * placed after the options and before cli_unknown, so that "-5 degrees" works after "--".
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
 * Each output is staged in a temporary file beside its target (standard output and devices:
 * in $TMPDIR) and renamed over the target only when every output of the run is complete; on
 * any failure no target is touched. Two outputs naming one file (same device and inode, or
 * the same canonical path), an output naming an input, and binary data to a terminal ("-")
 * are refused before any work. Library messages that name a staging file are shown with the
 * user's path.
 */
#ifndef ATTN_CLI_H
#define ATTN_CLI_H

#include "attn_core.h"

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

/* cli_error: print "attn: error: <message>" to stderr and return CLI_FAIL. */
int cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

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

/* cli_output_input: refuse (CLI_USAGE) when an output names the input file `path` (given
 * with option `opt`; NULL path: CLI_OK). For an input directory (a model), refuses an
 * output that would replace an existing file directly inside it. */
int cli_output_input(cli_outputs *s, const char *opt, const char *path);

/* cli_output_path: the path the library writer must write output i to (its staging file);
 * NULL when out of memory. */
const char *cli_output_path(cli_outputs *s, int i);

/* cli_outputs_finish: if rc == CLI_OK, move every staged output onto its target (rename, or
 * copy to stdout / a device) and return CLI_OK, or CLI_FAIL with a message; otherwise remove
 * the staging files and return rc. Either way the staging files are gone afterwards. */
int cli_outputs_finish(cli_outputs *s, int rc);

#endif
