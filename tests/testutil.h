/* Minimal test harness: every CHECK counts as one assertion; a test binary ends with
 * `return attn_test_finish();`, which prints "RESULT <name> passed=N failed=M" and
 * returns non-zero when any check failed. tests/run_tests.sh sums these lines into the
 * closing "N passed, N failed" line. */
#ifndef ATTN_TESTUTIL_H
#define ATTN_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int attn_test_passed, attn_test_failed;
extern const char *attn_test_name;

void attn_test_check(int ok, const char *file, int line, const char *fmt, ...);
int attn_test_finish(void);

/* Max |a - b| over n floats; and max |a| (for relative tolerances). */
double attn_test_max_abs_diff(const float *a, const float *b, size_t n);
double attn_test_max_abs_diff_f64(const float *a, const double *b, size_t n);
double attn_test_max_abs(const float *a, size_t n);
/* 1 if any element is NaN or +-inf. */
int attn_test_has_nonfinite(const float *a, size_t n);
/* Deterministic uniform floats in [lo, hi) (xorshift64*; seed != 0). */
void attn_test_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t *seed);
/* Run the program `bin` with arguments args (NULL-terminated, argv[0] excluded); stdout and
 * stderr go through files in dir and are copied (NUL-terminated, truncated to cap) into out
 * and err (either may be NULL). Returns the exit code, 128 + signal when it crashed, or -1
 * when it could not be started. */
int attn_test_run(const char *bin, const char *dir, char *out, size_t out_cap, char *err, size_t err_cap,
                  const char *const *args);
/* The same with standard input read from the file in_path (NULL: inherited). stdout is
 * left in dir/stdout.txt. */
int attn_test_run_stdin(const char *bin, const char *dir, const char *in_path, char *out, size_t out_cap, char *err,
                        size_t err_cap, const char *const *args);
/* Read up to cap-1 bytes of the file at path into buf and NUL-terminate ("" if unreadable). */
void attn_test_read_file(const char *path, char *buf, size_t cap);
/* The CLI under test: $ATTN_BIN, else $ATTN_BUILD/attn, else build/attn. */
const char *attn_test_cli_path(void);

/* Path of a fixture under tests/fixtures (the suite runs from the repository root). */
const char *attn_test_fixture(const char *name);

#define CHECK(cond, ...) attn_test_check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
/* |a - b| <= tol, reporting both values */
#define CHECK_NEAR(a, b, tol, what)                                                               \
    do {                                                                                          \
        double attn__a = (double)(a), attn__b = (double)(b), attn__t = (double)(tol);             \
        attn_test_check(attn__a - attn__b <= attn__t && attn__b - attn__a <= attn__t, __FILE__,   \
                        __LINE__, "%s: got %.9g want %.9g (tol %.3g)", what, attn__a, attn__b,    \
                        attn__t);                                                                 \
    } while (0)
#define CHECK_OK(expr)                                                                            \
    do {                                                                                          \
        int attn__rc = (expr);                                                                    \
        attn_test_check(attn__rc == 0, __FILE__, __LINE__, "%s returned %d: %s", #expr, attn__rc, \
                        attn_last_error());                                                       \
    } while (0)
#define CHECK_ERR(expr, code)                                                                     \
    do {                                                                                          \
        int attn__rc = (expr);                                                                    \
        attn_test_check(attn__rc == (code), __FILE__, __LINE__, "%s returned %d, want %d (%s)",   \
                        #expr, attn__rc, (int)(code), attn_last_error());                         \
    } while (0)

#endif
