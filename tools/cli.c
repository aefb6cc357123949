/* Shared helpers of the attn command-line tool: option matching, number parsing, messages. */
#include "cli.h"

#include "attn_npy.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

cli_args cli_args_start(int argc, char **argv, const char *verb) {
    cli_args a = {argc, argv, 1, verb};
    return a;
}

int cli_more(const cli_args *a) { return a->i < a->argc; }

static int is_name(const char *arg, const char *name) { return name && strcmp(arg, name) == 0; }

int cli_flag(cli_args *a, const char *short_name, const char *long_name) {
    if (!cli_more(a)) return 0;
    const char *arg = a->argv[a->i];
    if (is_name(arg, short_name) || is_name(arg, long_name)) {
        a->i++;
        return 1;
    }
    return 0;
}

int cli_help(cli_args *a) { return cli_flag(a, "-h", "--help"); }

int cli_opt(cli_args *a, const char *short_name, const char *long_name, const char **value) {
    if (!cli_more(a)) return 0;
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
    if (arg[0] == '-' && arg[1] != '\0') return cli_usage_error(a->verb, "unknown option '%s'", arg);
    return cli_usage_error(a->verb, "unexpected argument '%s'", arg);
}

static void vmsg(const char *fmt, va_list ap) {
    fputs("attn: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    return CLI_FAIL;
}

int cli_lib_error(const char *context) {
    const char *msg = attn_last_error();
    if (!msg || !*msg) msg = "unknown failure";
    if (context) fprintf(stderr, "attn: error: %s: %s\n", context, msg);
    else fprintf(stderr, "attn: error: %s\n", msg);
    return CLI_FAIL;
}

int cli_usage_error(const char *verb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    if (verb) fprintf(stderr, "Try 'attn %s --help'.\n", verb);
    else fputs("Try 'attn --help'.\n", stderr);
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
