/* The attn command-line tool, run as a child process (path from $ATTN_BIN, else
 * $ATTN_BUILD/attn, else build/attn): exit codes and messages for bad input, and parity of `attn sdpa` with the
 * float64 NumPy reference written by scripts/gen_cli_fixtures.py
 * (max |out - ref| <= 1e-5 * max |ref|, the same for the weights). */
#include "attn_npy.h"
#include "testutil.h"

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static char tmpdir[256];
static const char *attn_bin;
static char out_text[8192], err_text[8192];

static const char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static const char *fx(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s", attn_test_fixture(name));
    return buf[k];
}

/* Run attn with the given arguments (NULL-terminated); returns the exit code, or -1 if
 * it could not be started, or 128 + signal if it crashed. stdout/stderr land in
 * out_text/err_text. */
static int run_attn(const char *first, ...) {
    const char *args[64];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *)) args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return attn_test_run(attn_bin, tmpdir, out_text, sizeof out_text, err_text, sizeof err_text, args);
}

/* exit code `code` and stderr starting with "attn: error:" and containing `needle` */
#define EXPECT_FAIL(code, needle, what, ...)                                                       \
    do {                                                                                           \
        int rc_ = run_attn(__VA_ARGS__, (const char *)NULL);                                       \
        CHECK(rc_ == (code), "%s: exit %d, want %d; stderr: %s", what, rc_, (code), err_text);    \
        CHECK(strncmp(err_text, "attn: error: ", 13) == 0, "%s: message prefix: %s", what,        \
              err_text);                                                                           \
        CHECK(strstr(err_text, needle) != NULL, "%s: message mentions '%s': %s", what, needle,    \
              err_text);                                                                           \
    } while (0)

/* Compare a float32 .npy written by attn with a float64 reference .npy. */
static void compare(const char *what, const char *got_path, const char *ref_path) {
    attn_tensor got, ref;
    int a = attn_npy_load(&got, got_path), b = attn_npy_load(&ref, ref_path);
    CHECK(a == 0, "%s: output loads: %s", what, attn_last_error());
    CHECK(b == 0, "%s: reference loads", what);
    if (a == 0 && b == 0) {
        int same = got.dtype == ATTN_F32 && ref.dtype == ATTN_F64 && got.ndim == ref.ndim;
        for (int i = 0; same && i < got.ndim; i++) same = got.shape[i] == ref.shape[i];
        CHECK(same, "%s: output is float32 with the reference's shape (ndim %d vs %d)", what,
              got.ndim, ref.ndim);
        if (same) {
            size_t n = (size_t)attn_tensor_numel(&got);
            const double *r = ref.data;
            double mref = 0;
            for (size_t i = 0; i < n; i++)
                if (fabs(r[i]) > mref) mref = fabs(r[i]);
            double d = attn_test_max_abs_diff_f64(got.data, r, n);
            CHECK(mref > 0 && d <= 1e-5 * mref, "%s: max|out-ref| = %.3g, tol %.3g", what, d, 1e-5 * mref);
            CHECK(!attn_test_has_nonfinite(got.data, n), "%s: all finite", what);
        }
    }
    attn_npy_free(&got);
    attn_npy_free(&ref);
}

static void test_parity(void) {
    struct {
        const char *name, *q, *k, *v, *mask, *flag, *flagval;
    } cases[] = {
        {"plain", "q", "k", "v", NULL, NULL, NULL},
        {"boolmask", "q", "k", "v", "mask_bool", NULL, NULL},
        {"floatmask", "q", "k", "v", "mask_float", NULL, NULL},
        {"causal", "q", "k", "v", NULL, "--causal", NULL},
        {"window", "q", "k", "v", NULL, "--window", "3"},
        {"causal_boolmask", "q", "k", "v", "mask_bool", "--causal", NULL},
        {"scale", "q", "k", "v", NULL, "--scale", "0.3"},
        {"rank3", "q3", "k3", "v3", NULL, "--causal", NULL},
        {"rank2", "q2", "k2", "v2", NULL, NULL, NULL},
    };
    const char *impls[2] = {"reference", "fused"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int im = 0; im < 2; im++) {
            char q[64], k[64], v[64], m[64], what[96], ro[96], rw[96];
            snprintf(q, sizeof q, "cli/%s.npy", cases[c].q);
            snprintf(k, sizeof k, "cli/%s.npy", cases[c].k);
            snprintf(v, sizeof v, "cli/%s.npy", cases[c].v);
            snprintf(m, sizeof m, "cli/%s.npy", cases[c].mask ? cases[c].mask : "");
            snprintf(what, sizeof what, "sdpa %s (%s)", cases[c].name, impls[im]);
            snprintf(ro, sizeof ro, "cli/%s_ref_out.npy", cases[c].name);
            snprintf(rw, sizeof rw, "cli/%s_ref_w.npy", cases[c].name);
            const char *args[24];
            int n = 0;
            args[n++] = "sdpa";
            args[n++] = "-q", args[n++] = fx(q);
            args[n++] = "-k", args[n++] = fx(k);
            args[n++] = "-v", args[n++] = fx(v);
            if (cases[c].mask) args[n++] = "-m", args[n++] = fx(m);
            if (cases[c].flag) args[n++] = cases[c].flag;
            if (cases[c].flagval) args[n++] = cases[c].flagval;
            args[n++] = "--impl", args[n++] = impls[im];
            args[n++] = "--threads", args[n++] = im ? "2" : "1";
            args[n++] = "--weights", args[n++] = tmp_path("w.npy");
            args[n++] = "-o", args[n++] = tmp_path("out.npy");
            while (n < 24) args[n++] = NULL;
            unlink(tmp_path("out.npy"));
            unlink(tmp_path("w.npy"));
            int rc = run_attn(args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7],
                              args[8], args[9], args[10], args[11], args[12], args[13], args[14],
                              args[15], args[16], args[17], args[18], args[19], args[20], args[21],
                              args[22], args[23], (const char *)NULL);
            CHECK(rc == 0, "%s: exit %d: %s", what, rc, err_text);
            if (rc != 0) continue;
            char wo[128], ww[128];
            snprintf(wo, sizeof wo, "%s out", what);
            snprintf(ww, sizeof ww, "%s weights", what);
            compare(wo, tmp_path("out.npy"), fx(ro));
            compare(ww, tmp_path("w.npy"), fx(rw));
        }

    /* default implementation, no --weights, options as --name=value */
    char qo[600];
    snprintf(qo, sizeof qo, "--query=%s", fx("cli/q.npy"));
    int rc = run_attn("sdpa", qo, "-k", fx("cli/k.npy"), "-v", fx("cli/v.npy"), "--window=3", "-o",
                      tmp_path("out2.npy"), (const char *)NULL);
    CHECK(rc == 0, "sdpa with --name=value options: exit %d: %s", rc, err_text);
    if (rc == 0) compare("sdpa default impl", tmp_path("out2.npy"), fx("cli/window_ref_out.npy"));
}

/* Write a small .npy with the given dtype and shape (contents: small values). */
static const char *make_npy(const char *name, attn_dtype dt, int ndim, int64_t d0, int64_t d1,
                            int64_t d2, int64_t d3) {
    static unsigned char buf[1 << 16];
    memset(buf, 0, sizeof buf);
    int64_t shape[4] = {d0, d1, d2, d3};
    attn_tensor t;
    attn_tensor_make(&t, buf, dt, ndim, shape);
    if ((size_t)attn_tensor_numel(&t) * attn_dtype_size(dt) > sizeof buf) return NULL;
    if (dt == ATTN_F32)
        for (int64_t i = 0; i < attn_tensor_numel(&t); i++) ((float *)(void *)buf)[i] = (float)(i % 7) * 0.1f;
    const char *p = tmp_path(name);
    CHECK_OK(attn_npy_save(p, &t));
    return p;
}

static void test_errors(void) {
    const char *q = fx("cli/q.npy"), *k = fx("cli/k.npy"), *v = fx("cli/v.npy");
    const char *o = tmp_path("o.npy");

    /* missing file */
    EXPECT_FAIL(1, "nope.npy", "missing file", "sdpa", "-q", tmp_path("nope.npy"), "-k", k, "-v", v, "-o", o);
    /* truncated .npy: the first 100 bytes of q.npy (header complete, data cut) and 20 bytes */
    {
        unsigned char b[2048];
        FILE *f = fopen(q, "rb");
        size_t n = f ? fread(b, 1, sizeof b, f) : 0;
        if (f) fclose(f);
        CHECK(n > 200, "read q fixture");
        const size_t cuts[2] = {200, 20};
        for (int i = 0; i < 2; i++) {
            const char *p = tmp_path("trunc.npy");
            FILE *w = fopen(p, "wb");
            if (w) {
                fwrite(b, 1, cuts[i], w);
                fclose(w);
            }
            EXPECT_FAIL(1, "trunc.npy", "truncated q", "sdpa", "-q", p, "-k", k, "-v", v, "-o", o);
            CHECK(strstr(err_text, "truncated") != NULL, "says truncated: %s", err_text);
        }
    }
    /* not a .npy at all */
    {
        const char *p = tmp_path("text.npy");
        FILE *w = fopen(p, "wb");
        if (w) {
            fputs("this is not numpy\n", w);
            fclose(w);
        }
        EXPECT_FAIL(1, "text.npy", "garbage file", "sdpa", "-q", q, "-k", p, "-v", v, "-o", o);
    }
    /* wrong dtypes */
    const char *q64 = make_npy("q64.npy", ATTN_F64, 4, 2, 4, 5, 8);
    EXPECT_FAIL(1, "float64", "float64 q", "sdpa", "-q", q64, "-k", k, "-v", v, "-o", o);
    const char *mi = make_npy("mask_i32.npy", ATTN_I32, 2, 5, 7, 0, 0);
    EXPECT_FAIL(1, "int32", "int32 mask", "sdpa", "-q", q, "-k", k, "-v", v, "-m", mi, "-o", o);
    const char *vi = make_npy("v_i64.npy", ATTN_I64, 4, 2, 2, 7, 6);
    EXPECT_FAIL(1, "int64", "int64 v", "sdpa", "-q", q, "-k", k, "-v", vi, "-o", o);
    /* shapes */
    const char *k6 = make_npy("k_d6.npy", ATTN_F32, 4, 2, 2, 7, 6);
    EXPECT_FAIL(1, "head dim", "head dims differ", "sdpa", "-q", q, "-k", k6, "-v", v, "-o", o);
    const char *k3 = make_npy("k_h3.npy", ATTN_F32, 4, 2, 3, 7, 8);
    const char *v3 = make_npy("v_h3.npy", ATTN_F32, 4, 2, 3, 7, 6);
    EXPECT_FAIL(1, "multiple", "H not a multiple of Hkv", "sdpa", "-q", q, "-k", k3, "-v", v3, "-o", o);
    const char *kb = make_npy("k_b3.npy", ATTN_F32, 4, 3, 2, 7, 8);
    EXPECT_FAIL(1, "batch", "batch mismatch", "sdpa", "-q", q, "-k", kb, "-v", v, "-o", o);
    const char *vl = make_npy("v_l8.npy", ATTN_F32, 4, 2, 2, 8, 6);
    EXPECT_FAIL(1, "disagree", "k/v length mismatch", "sdpa", "-q", q, "-k", k, "-v", vl, "-o", o);
    EXPECT_FAIL(1, "same rank", "rank mismatch", "sdpa", "-q", q, "-k", fx("cli/k3.npy"), "-v", v, "-o", o);
    const char *q5 = make_npy("q5d.npy", ATTN_F32, 1, 8, 0, 0, 0);
    EXPECT_FAIL(1, "dims", "1-d q", "sdpa", "-q", q5, "-k", k, "-v", v, "-o", o);
    const char *mb = make_npy("mask_bad.npy", ATTN_BOOL, 2, 4, 7, 0, 0);
    EXPECT_FAIL(1, "attn: error:", "mask not broadcastable", "sdpa", "-q", q, "-k", k, "-v", v, "-m", mb,
                "-o", o);
    /* output cannot be written */
    EXPECT_FAIL(1, "no/such/dir", "unwritable output", "sdpa", "-q", q, "-k", k, "-v", v, "-o",
                tmp_path("no/such/dir/o.npy"));

    /* usage errors: exit 2 */
    EXPECT_FAIL(2, "--window", "--window abc", "sdpa", "-q", q, "-k", k, "-v", v, "--window", "abc", "-o", o);
    EXPECT_FAIL(2, "--window", "--window -1", "sdpa", "-q", q, "-k", k, "-v", v, "--window", "-1", "-o", o);
    EXPECT_FAIL(2, "--window", "--window 3x", "sdpa", "-q", q, "-k", k, "-v", v, "--window", "3x", "-o", o);
    EXPECT_FAIL(2, "--threads", "--threads -3", "sdpa", "-q", q, "-k", k, "-v", v, "--threads", "-3", "-o", o);
    EXPECT_FAIL(2, "--threads", "--threads empty", "sdpa", "-q", q, "-k", k, "-v", v, "--threads", "", "-o", o);
    EXPECT_FAIL(2, "--threads", "--threads huge", "sdpa", "-q", q, "-k", k, "-v", v, "--threads",
                "99999999999999999999999", "-o", o);
    EXPECT_FAIL(2, "--scale", "--scale nan", "sdpa", "-q", q, "-k", k, "-v", v, "--scale", "nan", "-o", o);
    EXPECT_FAIL(2, "--scale", "--scale 1e99", "sdpa", "-q", q, "-k", k, "-v", v, "--scale", "1e99", "-o", o);
    EXPECT_FAIL(2, "--impl", "--impl bogus", "sdpa", "-q", q, "-k", k, "-v", v, "--impl", "bogus", "-o", o);
    EXPECT_FAIL(2, "--frobnicate", "unknown option", "sdpa", "-q", q, "--frobnicate", "-k", k, "-v", v, "-o", o);
    EXPECT_FAIL(2, "-o", "missing output", "sdpa", "-q", q, "-k", k, "-v", v);
    EXPECT_FAIL(2, "needs a value", "option without value", "sdpa", "-q", q, "-k", k, "-v", v, "-o");
    EXPECT_FAIL(2, "stray", "stray argument", "sdpa", "stray", "-q", q, "-k", k, "-v", v, "-o", o);
    CHECK(strstr(err_text, "attn sdpa --help") != NULL, "usage errors point at --help: %s", err_text);

    /* dispatcher */
    EXPECT_FAIL(2, "unknown verb 'frob'", "unknown verb", "frob");
    EXPECT_FAIL(2, "unknown option", "unknown global option", "--frob");
    int rc = run_attn("--help", (const char *)NULL);
    CHECK(rc == 0 && strstr(out_text, "sdpa") && strstr(out_text, "pe"), "attn --help lists verbs");
    rc = run_attn("--version", (const char *)NULL);
    CHECK(rc == 0 && strncmp(out_text, "attn ", 5) == 0, "attn --version: %s", out_text);
    rc = run_attn("sdpa", "--help", (const char *)NULL);
    CHECK(rc == 0 && strstr(out_text, "--causal") != NULL, "attn sdpa --help");
    rc = run_attn("pe", "-h", (const char *)NULL);
    CHECK(rc == 0 && strstr(out_text, "--d-model") != NULL, "attn pe -h");
    rc = run_attn((const char *)NULL);
    CHECK(rc == 2, "attn without arguments exits 2 (got %d)", rc);
}

static void test_pe(void) {
    const char *p = tmp_path("pe.npy");
    int rc = run_attn("pe", "--d-model", "5", "--len", "3", "-o", p, (const char *)NULL);
    CHECK(rc == 0, "attn pe npy: exit %d: %s", rc, err_text);
    attn_tensor t;
    if (rc == 0 && attn_npy_load(&t, p) == 0) {
        CHECK(t.dtype == ATTN_F32 && t.ndim == 2 && t.shape[0] == 3 && t.shape[1] == 5, "pe shape [3, 5]");
        if (t.ndim == 2 && t.shape[0] == 3 && t.shape[1] == 5) {
            const float *r0 = t.data, *r1 = (const float *)t.data + 5;
            /* position 0: sin 0 = 0, cos 0 = 1 */
            const double want0[5] = {0, 1, 0, 1, 0};
            /* position 1 (values from the task statement / NumPy) */
            const double want1[5] = {0.841471, 0.540302, 0.025116, 0.999685, 0.000631};
            for (int i = 0; i < 5; i++) {
                CHECK_NEAR(r0[i], want0[i], 1e-6, "pe[0]");
                CHECK_NEAR(r1[i], want1[i], 1e-6, "pe[1]");
            }
        }
        attn_npy_free(&t);
    }
    /* offset: row 0 of --offset 1 equals row 1 above */
    rc = run_attn("pe", "--d-model", "5", "--len", "1", "--offset", "1", "--format", "npy", "-o",
                  tmp_path("pe_off.bin"), (const char *)NULL);
    CHECK(rc == 0, "attn pe --offset: exit %d: %s", rc, err_text);
    if (rc == 0 && attn_npy_load(&t, tmp_path("pe_off.bin")) == 0) {
        CHECK(t.ndim == 2 && t.shape[0] == 1 && t.shape[1] == 5, "offset shape");
        CHECK_NEAR(((float *)t.data)[0], 0.841471, 1e-6, "offset pe[1][0]");
        attn_npy_free(&t);
    }
    /* pictures: PNG and SVG signatures */
    rc = run_attn("pe", "--d-model", "16", "--len", "10", "-o", tmp_path("pe.png"), (const char *)NULL);
    CHECK(rc == 0, "attn pe png: exit %d: %s", rc, err_text);
    char buf[64];
    attn_test_read_file(tmp_path("pe.png"), buf, sizeof buf);
    CHECK(memcmp(buf, "\x89PNG\r\n\x1a\n", 8) == 0, "pe.png has the PNG signature");
    rc = run_attn("pe", "--d-model", "7", "--len", "4", "--format", "svg", "-o", tmp_path("pe.out"),
                  (const char *)NULL);
    CHECK(rc == 0, "attn pe svg: exit %d: %s", rc, err_text);
    attn_test_read_file(tmp_path("pe.out"), buf, sizeof buf);
    CHECK(strncmp(buf, "<?xml", 5) == 0, "pe svg starts with <?xml");
    /* errors */
    EXPECT_FAIL(2, "format", "unknown extension", "pe", "--d-model", "4", "--len", "2", "-o", tmp_path("pe.txt"));
    EXPECT_FAIL(2, "--d-model", "d-model 0", "pe", "--d-model", "0", "--len", "2", "-o", p);
    EXPECT_FAIL(2, "--len", "len abc", "pe", "--d-model", "4", "--len", "abc", "-o", p);
    EXPECT_FAIL(2, "--d-model", "missing d-model", "pe", "--len", "2", "-o", p);
    EXPECT_FAIL(2, "--format", "bad format", "pe", "--d-model", "4", "--len", "2", "--format", "jpg", "-o", p);
    EXPECT_FAIL(1, "no/such", "unwritable", "pe", "--d-model", "4", "--len", "2", "-o", tmp_path("no/such/pe.png"));
}

int main(void) {
    attn_test_name = "cli";
    attn_bin = attn_test_cli_path(); /* $ATTN_BIN, else $ATTN_BUILD/attn, else build/attn */
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_cli_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp failed");
        return attn_test_finish();
    }
    if (access(attn_bin, X_OK) != 0) {
        CHECK(0, "%s is not an executable (set ATTN_BIN)", attn_bin);
        return attn_test_finish();
    }
    test_errors();
    test_parity();
    test_pe();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    return attn_test_finish();
}
