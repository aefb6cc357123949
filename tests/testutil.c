#include "testutil.h"
#include "attn_core.h"

#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int attn_test_passed = 0, attn_test_failed = 0;
const char *attn_test_name = "test";

void attn_test_check(int ok, const char *file, int line, const char *fmt, ...) {
    if (ok) {
        attn_test_passed++;
        return;
    }
    attn_test_failed++;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int attn_test_finish(void) {
    printf("RESULT %s passed=%d failed=%d\n", attn_test_name, attn_test_passed, attn_test_failed);
    fflush(stdout);
    return attn_test_failed ? 1 : (attn_test_passed ? 0 : 1);
}

double attn_test_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as the max */
    }
    return m;
}

double attn_test_max_abs_diff_f64(const float *a, const double *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

double attn_test_max_abs(const float *a, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(a[i]) > m) m = fabs(a[i]);
    return m;
}

int attn_test_has_nonfinite(const float *a, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return 1;
    return 0;
}

void attn_test_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t *seed) {
    for (size_t i = 0; i < n; i++) {
        uint64_t s = *seed;
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        *seed = s;
        uint64_t r = s * 0x2545F4914F6CDD1DULL;
        double u = (double)(r >> 11) / 9007199254740992.0;
        x[i] = (float)(lo + (hi - lo) * u);
    }
}

const char *attn_test_fixture(const char *name) {
    static _Thread_local char buf[1024];
    const char *dir = getenv("ATTN_FIXTURES");
    snprintf(buf, sizeof buf, "%s/%s", dir ? dir : "tests/fixtures", name);
    return buf;
}

void attn_test_read_file(const char *path, char *buf, size_t cap) {
    if (!buf || cap == 0) return;
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

int attn_test_run(const char *bin, const char *dir, char *out, size_t out_cap, char *err, size_t err_cap,
                  const char *const *args) {
    return attn_test_run_stdin(bin, dir, NULL, out, out_cap, err, err_cap, args);
}

int attn_test_run_stdin(const char *bin, const char *dir, const char *in_path, char *out, size_t out_cap, char *err,
                        size_t err_cap, const char *const *args) {
    char *argv[128];
    int n = 0;
    argv[n++] = (char *)bin;
    for (; args && args[n - 1] && n < 127; n++) argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    char op[1024], ep[1024];
    snprintf(op, sizeof op, "%s/stdout.txt", dir);
    snprintf(ep, sizeof ep, "%s/stderr.txt", dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (in_path) posix_spawn_file_actions_addopen(&fa, 0, in_path, O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, op, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, ep, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int st;
    if (waitpid(pid, &st, 0) < 0) return -1;
    attn_test_read_file(op, out, out_cap);
    attn_test_read_file(ep, err, err_cap);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char *attn_test_cli_path(void) {
    static char buf[1024];
    const char *b = getenv("ATTN_BIN");
    if (b && *b) return b;
    const char *d = getenv("ATTN_BUILD");
    snprintf(buf, sizeof buf, "%s/attn", d && *d ? d : "build");
    return buf;
}
