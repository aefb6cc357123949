#include "testutil.h"
#include "attn_core.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

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
