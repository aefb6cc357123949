/* Shared helpers of the attn command-line tool: option matching, number parsing, messages. */
#include "cli.h"
#include "mpi_cli.h"
#include "texts.h"

#include "attn_io.h"
#include "attn_npy.h"
#include "core/internal.h" /* attn__out_resolve, attn__out_remove_temps */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

cli_args cli_args_start(int argc, char **argv, const char *verb) {
    cli_args a = {argc, argv, 1, verb, 0};
    return a;
}

int cli_more(cli_args *a) {
    if (!a->end_of_options && a->i < a->argc && strcmp(a->argv[a->i], "--") == 0) {
        a->end_of_options = 1;
        a->i++;
    }
    return a->i < a->argc;
}

int cli_positional(cli_args *a, const char **value) {
    if (!cli_more(a)) return 0;
    const char *arg = a->argv[a->i];
    if (!a->end_of_options && arg[0] == '-' && arg[1] != '\0') return 0;
    *value = arg;
    a->i++;
    return 1;
}

static int is_name(const char *arg, const char *name) { return name && strcmp(arg, name) == 0; }

int cli_flag(cli_args *a, const char *short_name, const char *long_name) {
    if (!cli_more(a) || a->end_of_options) return 0;
    const char *arg = a->argv[a->i];
    if (is_name(arg, short_name) || is_name(arg, long_name)) {
        a->i++;
        return 1;
    }
    return 0;
}

int cli_help(cli_args *a) { return cli_flag(a, "-h", "--help"); }

int cli_opt(cli_args *a, const char *short_name, const char *long_name, const char **value) {
    if (!cli_more(a) || a->end_of_options) return 0;
    const char *arg = a->argv[a->i];
    if (long_name) {
        size_t n = strlen(long_name);
        if (strncmp(arg, long_name, n) == 0 && arg[n] == '=') {
            *value = arg + n + 1;
            a->i++;
            return 1;
        }
    }
    if (!is_name(arg, short_name) && !is_name(arg, long_name)) return 0;
    if (a->i + 1 >= a->argc) {
        cli_usage_error(a->verb, "option %s needs a value", arg);
        return -1;
    }
    *value = a->argv[a->i + 1];
    a->i += 2;
    return 1;
}

int cli_unknown(cli_args *a) {
    const char *arg = a->argv[a->i];
    if (!a->end_of_options && arg[0] == '-' && arg[1] != '\0') return cli_usage_error(a->verb, "unknown option '%s'", arg);
    return cli_usage_error(a->verb, "unexpected argument '%s'", arg);
}

/* ------------------------------------------------------------------ option tables */

/* the entry of table that the current argument names, or NULL */
static const cli_option *find_option(const cli_args *a, const cli_option *table) {
    const char *arg = a->argv[a->i];
    for (const cli_option *o = table; table && (o->name || o->help); o++) {
        if (o->kind == CLI_LINE || !o->name) continue;
        if (is_name(arg, o->name) || is_name(arg, o->short_name)) return o;
        int valued = o->kind != CLI_FLAG && !(o->kind == CLI_CALL && !o->takes_value);
        size_t n = strlen(o->name);
        if (valued && strncmp(arg, o->name, n) == 0 && arg[n] == '=') return o;
    }
    return NULL;
}

/* CLI_CHOICE: the value's entry, or "OPT must be A, B or C, got 'X'" */
static int parse_choice(const char *verb, const char *label, const cli_option *o, const char *val, int *out) {
    int n = 0;
    for (; o->choices[n]; n++)
        if (strcmp(val, o->choices[n]) == 0) {
            *out = o->values ? o->values[n] : n;
            return CLI_OK;
        }
    char list[512];
    size_t k = 0;
    for (int i = 0; i < n && k < sizeof list; i++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", o->choices[i]);
    return cli_usage_error(verb, "%s must be %s, got '%s'", label, list, val);
}

/* consume the option o at the current argument and store its value in base */
static int apply_option(cli_args *a, const cli_option *o, void *base) {
    void *field = (char *)base + o->off;
    const char *label = o->label ? o->label : o->name, *val = NULL;
    if (o->kind == CLI_FLAG || (o->kind == CLI_CALL && !o->takes_value)) {
        a->i++;
    } else {
        int r = cli_opt(a, o->short_name, o->name, &val);
        if (r < 0) return CLI_USAGE;
    }
    switch (o->kind) {
    case CLI_FLAG: *(int *)field = (int)o->lo; return CLI_OK;
    case CLI_STR: *(const char **)field = val; return CLI_OK;
    case CLI_I64: return cli_parse_i64(a->verb, label, val, o->lo, o->hi, (int64_t *)field);
    case CLI_F32: return cli_parse_f32(a->verb, label, val, (float *)field);
    case CLI_CHOICE: return parse_choice(a->verb, label, o, val, (int *)field);
    case CLI_CALL: return o->fn(o, a, val, field, base);
    default: return cli_unknown(a);
    }
}

int cli_parse(int argc, char **argv, const char *verb, const cli_option *table, void *base,
              const cli_option *table2, void *base2, cli_positional_fn positional, void (*usage)(FILE *)) {
    cli_args a = cli_args_start(argc, argv, verb);
    while (cli_more(&a)) {
        const char *val;
        const cli_option *o;
        int r;
        if (cli_help(&a)) {
            usage(stdout);
            return CLI_HELP_SHOWN;
        }
        if (!a.end_of_options && (o = find_option(&a, table))) r = apply_option(&a, o, base);
        else if (!a.end_of_options && (o = find_option(&a, table2))) r = apply_option(&a, o, base2);
        else if (positional && cli_positional(&a, &val)) r = positional(base, verb, val);
        else r = cli_unknown(&a);
        if (r != CLI_OK) return r;
    }
    return CLI_OK;
}

int cli_texts_take(void *base, const char *verb, const char *arg) {
    (void)verb;
    if (cli_texts_add((cli_texts *)base, arg) < 0) return cli_error("out of memory");
    return CLI_OK;
}

int cli_parse_texts(int argc, char **argv, const char *verb, const cli_option *options, void *base,
                    const char *const *model, void (*usage)(FILE *), int *code) {
    int rc = cli_parse(argc, argv, verb, options, base, NULL, NULL, cli_texts_take, usage);
    if (rc != CLI_OK) *code = cli_parsed(rc);
    else if (!*model || !**model) *code = cli_usage_error(verb, "--model DIR is required");
    else return 1;
    cli_texts_free((cli_texts *)base);
    return 0;
}

void cli_print_options(FILE *f, const cli_option *table) {
    for (const cli_option *o = table; o->name || o->help; o++)
        if (o->help) fputs(o->help, f);
}

/* Every message reaches stderr in one write(2): under mpirun several ranks share the stream, and
 * a message written in pieces ("attn: error: ", the text, "\n") interleaved with another rank's
 * into "attn: error: attn: error: ..." (new-user finding). `tail` (may be NULL) is a second line,
 * the usage hint. */
static void emit(const char *msg, const char *tail) {
    static const char pre[] = "attn: error: ";
    size_t n = sizeof pre - 1 + strlen(msg) + 1 + (tail ? strlen(tail) + 1 : 0);
    char small[1024], *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf) { /* out of memory: pieces rather than nothing */
        fprintf(stderr, "%s%s\n", pre, msg);
        if (tail) fprintf(stderr, "%s\n", tail);
        return;
    }
    snprintf(buf, n + 1, "%s%s\n%s%s", pre, msg, tail ? tail : "", tail ? "\n" : "");
    fflush(stderr);
    for (size_t off = 0; off < n;) {
        ssize_t w = write(STDERR_FILENO, buf + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    if (buf != small) free(buf);
}

static void vmsg_tail(const char *tail, const char *fmt, va_list ap) {
    char small[1024], *msg = small;
    va_list aq;
    va_copy(aq, ap);
    int len = vsnprintf(small, sizeof small, fmt, ap);
    if (len >= (int)sizeof small && (msg = malloc((size_t)len + 1)) != NULL) vsnprintf(msg, (size_t)len + 1, fmt, aq);
    va_end(aq);
    emit(msg ? msg : small, tail);
    if (msg && msg != small) free(msg);
}

static void vmsg(const char *fmt, va_list ap) { vmsg_tail(NULL, fmt, ap); }

int cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    return CLI_FAIL;
}

int cli_stdout_error(void) {
    int e = errno ? errno : EIO;
    return cli_error("writing standard output failed: %s", strerror(e));
}

static const char *user_paths(const char *msg); /* staging file names -> the user's paths */

int cli_lib_error(const char *context) {
    const char *msg = attn_last_error();
    if (!msg || !*msg) msg = "unknown failure";
    msg = user_paths(msg);
    if (context) cli_error("%s: %s", context, msg);
    else emit(msg, NULL);
    return CLI_FAIL;
}

/* a rank other than 0 of an MPI launch (mpirun puts the rank in the environment) */
static int launched_rank_not_0(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    return r && atoi(r) > 0;
}

int cli_usage_error(const char *verb, const char *fmt, ...) {
    /* every rank of an mpirun parses the same command line and finds the same usage error:
     * rank 0 says it, once (it was printed once per rank; new-user finding) */
    if (launched_rank_not_0()) return CLI_USAGE;
    va_list ap;
    char hint[160];
    if (verb) snprintf(hint, sizeof hint, "Try 'attn %s --help'.", verb);
    else snprintf(hint, sizeof hint, "Try 'attn --help'.");
    va_start(ap, fmt);
    vmsg_tail(hint, fmt, ap);
    va_end(ap);
    return CLI_USAGE;
}

int cli_parse_i64(const char *verb, const char *opt, const char *s, int64_t lo, int64_t hi,
                  int64_t *out) {
    if (!s || !(isdigit((unsigned char)s[0]) || ((s[0] == '-' || s[0] == '+') && isdigit((unsigned char)s[1]))))
        return cli_usage_error(verb, "%s expects an integer, got '%s'", opt, s ? s : "");
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0') return cli_usage_error(verb, "%s expects an integer, got '%s'", opt, s);
    if (errno == ERANGE || v < lo || v > hi)
        return cli_usage_error(verb, "%s must be in %lld..%lld, got '%s'", opt, (long long)lo,
                               (long long)hi, s);
    *out = (int64_t)v;
    return CLI_OK;
}

int cli_parse_f32(const char *verb, const char *opt, const char *s, float *out) {
    if (!s || !*s || isspace((unsigned char)s[0]))
        return cli_usage_error(verb, "%s expects a number, got '%s'", opt, s ? s : "");
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (*end != '\0') return cli_usage_error(verb, "%s expects a number, got '%s'", opt, s);
    if (!isfinite(v) || fabs(v) > 3.4028234663852886e38)
        return cli_usage_error(verb, "%s must be a finite float32, got '%s'", opt, s);
    *out = (float)v;
    return CLI_OK;
}

int cli_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

int cli_load_npy(attn_tensor *t, const char *path) {
    if (attn_npy_load(t, path) < 0) return cli_lib_error(NULL);
    return CLI_OK;
}

const char *cli_shape_str(const attn_tensor *t, char *buf, size_t n) {
    size_t k = 0;
    if (n == 0) return buf;
    buf[0] = '\0';
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* ------------------------------------------------------------------ outputs */

/* Staging files alive in this process: removed at exit whatever path the verb took. */
static struct {
    char *stage;
    const char *user;
} live[CLI_MAX_OUTPUTS * 2];
static int live_n, live_hooked;

static void remove_live(void) {
    for (int i = 0; i < live_n; i++)
        if (live[i].stage) {
            char *st = live[i].stage;
            live[i].stage = NULL; /* first: the signal handler reads the list */
            unlink(st);
            free(st);
        }
    live_n = 0;
}

/* SIGINT, SIGTERM, SIGHUP, SIGPIPE: remove the staging files and the library's temporary files,
 * then die of the signal (its default action), so that the exit status is the signal's */
static void on_fatal_signal(int sig) {
    int n = __atomic_load_n(&live_n, __ATOMIC_SEQ_CST);
    for (int i = 0; i < n && i < (int)(sizeof live / sizeof live[0]); i++) {
        char *st = live[i].stage;
        if (st) unlink(st);
    }
    attn__out_remove_temps();
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_signals_install(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa, old;
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN) continue; /* an ignored signal stays so */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

static void forget_live(const char *stage) {
    for (int i = 0; i < live_n; i++)
        if (live[i].stage == stage) live[i].stage = NULL;
}

static const char *user_paths(const char *msg) {
    static char buf[2048];
    for (int i = 0; i < live_n; i++) {
        const char *st = live[i].stage;
        const char *hit = st ? strstr(msg, st) : NULL;
        if (!hit) continue;
        size_t pre = (size_t)(hit - msg), sl = strlen(st);
        char tmp[2048];
        snprintf(tmp, sizeof tmp, "%.*s%s%s", (int)pre, msg, live[i].user, hit + sl);
        snprintf(buf, sizeof buf, "%s", tmp);
        msg = buf;
    }
    return msg;
}

void cli_outputs_init(cli_outputs *s, const char *verb) {
    memset(s, 0, sizeof *s);
    s->verb = verb;
}

static int is_stdout(const char *p) { return strcmp(p, "-") == 0; }

int cli_path_is_stdout(const char *path) {
    if (!path) return 0;
    if (is_stdout(path)) return 1;
    struct stat a, b;
    return stat(path, &a) == 0 && fstat(1, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* directory of p, into buf */
static const char *dir_of(const char *p, char *buf, size_t n) {
    const char *slash = strrchr(p, '/');
    if (!slash) snprintf(buf, n, ".");
    else if (slash == p) snprintf(buf, n, "/");
    else snprintf(buf, n, "%.*s", (int)(slash - p), p);
    return buf;
}

int cli_output_add(cli_outputs *s, const char *opt, const char *path, int binary) {
    if (!path) return CLI_OK;
    if (!*path) return cli_usage_error(s->verb, "%s needs a file name", opt);
    if (s->n == CLI_MAX_OUTPUTS) return cli_error("too many outputs");
    /* under mpirun a rank's stdout is the launcher's pseudo-terminal whatever mpirun's own stdout
     * is (it forwards the bytes unchanged): the check cannot tell there, so it is left out */
    if (is_stdout(path) && binary && isatty(1) && !cli_mpi_launched())
        return cli_usage_error(s->verb,
                               "%s -: refusing to write binary data to a terminal; redirect standard output or give a file name",
                               opt);
    for (int j = 0; j < s->n; j++)
        if (attn_same_file(path, s->o[j].path))
            return cli_usage_error(s->verb, "%s '%s' and %s '%s' name the same file; give each output its own file",
                                   s->o[j].opt, s->o[j].path, opt, path);
    if (!is_stdout(path)) {
        struct stat st;
        char dir[4096];
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            /* a directory where a file name belongs: a usage error, like an output naming an input */
            return cli_usage_error(s->verb, "%s '%s' is a directory; give a file name", opt, path);
        if (stat(dir_of(path, dir, sizeof dir), &st) != 0 || !S_ISDIR(st.st_mode))
            return cli_error("%s '%s': cannot write there: directory '%s' does not exist", opt, path, dir);
    }
    s->o[s->n].opt = opt;
    s->o[s->n].path = path;
    s->o[s->n].binary = binary;
    s->o[s->n].stage = NULL;
    s->n++;
    return CLI_OK;
}

/* 1 when directory d is the directory `top` or lies anywhere below it (symlinks resolved). */
static int inside_dir(const char *d, const char *top) {
    char *rd = realpath(d, NULL), *rt = realpath(top, NULL);
    size_t n = rt ? strlen(rt) : 0;
    int in = rd && rt &&
             (strcmp(rd, rt) == 0 || (strncmp(rd, rt, n) == 0 && (rd[n] == '/' || (n == 1 && rt[0] == '/'))));
    free(rd);
    free(rt);
    return in;
}

int cli_output_input(cli_outputs *s, const char *opt, const char *path) {
    if (!path) return CLI_OK;
    struct stat st;
    int is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    for (int j = 0; j < s->n; j++) {
        const char *o = s->o[j].path;
        if (attn_same_file(o, path))
            return cli_usage_error(s->verb, "%s '%s' names the input %s '%s'; write the output to another file",
                                   s->o[j].opt, o, opt, path);
        char dir[4096];
        struct stat ost;
        if (is_dir && !is_stdout(o) && stat(o, &ost) == 0 && S_ISREG(ost.st_mode) &&
            inside_dir(dir_of(o, dir, sizeof dir), path))
            return cli_usage_error(s->verb, "%s '%s' would replace a file of %s '%s'; write the output elsewhere",
                                   s->o[j].opt, o, opt, path);
    }
    return CLI_OK;
}

/* where output i ends up: the resolved file (rename), or NULL (written through: standard output,
 * a descriptor link such as /dev/stdout, a device, a pipe) with *fd the descriptor to write to or
 * -1 (open the path) */
static char *rename_target(const char *path, int *fd) {
    char *target = NULL;
    int kind = attn__out_resolve(path, &target, fd);
    if (kind == ATTN__OUT_RENAME) return target;
    free(target);
    if (kind != ATTN__OUT_STDOUT && kind != ATTN__OUT_FD) *fd = -1;
    return NULL;
}

const char *cli_output_path(cli_outputs *s, int i) {
    if (i < 0 || i >= s->n) return NULL;
    if (s->o[i].stage) return s->o[i].stage;
    if (!live_hooked) {
        atexit(remove_live);
        live_hooked = 1;
    }
    if (live_n == (int)(sizeof live / sizeof live[0])) return NULL;
    int wfd;
    char *target = rename_target(s->o[i].path, &wfd);
    char dir[4096], *name = (char *)malloc(4352);
    if (!name) {
        free(target);
        return NULL;
    }
    if (target) {
        const char *slash = strrchr(target, '/');
        snprintf(name, 4352, "%s/.%.180s.attn-XXXXXX", dir_of(target, dir, sizeof dir), slash ? slash + 1 : target);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(name, 4352, "%s/attn-out-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    }
    free(target);
    /* listed before the file exists, so that the signal handler cannot miss it */
    live[live_n].stage = name;
    live[live_n].user = s->o[i].path;
    __atomic_store_n(&live_n, live_n + 1, __ATOMIC_SEQ_CST);
    int fd = mkstemp(name); /* reserves the name; the writer replaces the file */
    if (fd < 0) {
        int e = errno;
        live[--live_n].stage = NULL;
        free(name);
        cli_error("%s '%s': cannot create a file there: %s", s->o[i].opt, s->o[i].path, strerror(e));
        return NULL;
    }
    close(fd);
    s->o[i].stage = name;
    return s->o[i].stage;
}

static int copy_file(const char *from, int dst) {
    FILE *f = fopen(from, "rb");
    if (!f) return errno;
    char buf[65536];
    size_t r;
    int err = 0;
    while (!err && (r = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t done = 0; done < r;) {
            ssize_t w = write(dst, buf + done, r - done);
            if (w < 0) {
                if (errno == EINTR) continue;
                err = errno;
                break;
            }
            done += (size_t)w;
        }
    if (!err && ferror(f)) err = EIO;
    fclose(f);
    return err;
}

static void drop_stage(cli_outputs *s, int i) {
    if (!s->o[i].stage) return;
    unlink(s->o[i].stage);
    forget_live(s->o[i].stage);
    free(s->o[i].stage);
    s->o[i].stage = NULL;
}

/* Commit every staged output. Outputs that cannot be renamed into place (standard output, a
 * device, a pipe) are copied first, so that a failure there (a full device, a closed pipe) leaves
 * every regular-file output untouched; the regular files are then renamed over their targets. */
int cli_outputs_finish(cli_outputs *s, int rc) {
    for (int i = 0; rc == CLI_OK && i < s->n; i++)
        if (!s->o[i].stage) { /* the verb never wrote it */
            rc = cli_error("%s '%s' was not written", s->o[i].opt, s->o[i].path);
            break;
        }
    for (int pass = 0; pass < 2; pass++)
    for (int i = 0; rc == CLI_OK && i < s->n; i++) {
        const char *path = s->o[i].path;
        int wfd;
        char *target = rename_target(path, &wfd);
        if ((target != NULL) != (pass == 1)) { /* pass 0: copies; pass 1: renames */
            free(target);
            continue;
        }
        int err = 0;
        if (target) {
            struct stat st;
            mode_t mode;
            if (stat(target, &st) == 0 && S_ISREG(st.st_mode)) {
                mode = st.st_mode & 07777;
            } else {
                mode_t um = umask(0);
                umask(um);
                mode = 0666 & ~um;
            }
            chmod(s->o[i].stage, mode);
            if (rename(s->o[i].stage, target) != 0) err = errno;
            else {
                forget_live(s->o[i].stage);
                free(s->o[i].stage);
                s->o[i].stage = NULL;
            }
            free(target);
        } else if (wfd >= 0) { /* standard output or a descriptor link (/dev/stdout, /dev/fd/N) */
            if (fflush(stdout) != 0) err = errno ? errno : EIO;
            if (!err) err = copy_file(s->o[i].stage, wfd);
        } else {
            int fd = open(path, O_WRONLY | O_CLOEXEC);
            if (fd < 0) err = errno;
            else {
                err = copy_file(s->o[i].stage, fd);
                if (close(fd) != 0 && !err) err = errno;
            }
        }
        if (err) rc = cli_error("%s: write failed: %s", is_stdout(path) ? "standard output" : path, strerror(err));
    }
    for (int i = 0; i < s->n; i++) drop_stage(s, i);
    return rc;
}
