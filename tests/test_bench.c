/* `attn bench` run as a child process: output format (one line per configuration with the kernel
 * path, the last line "GFLOP/s: X"), the FLOP count (recomputed here from the printed best time:
 * 4·B·H·D·visible pairs, causal counting only the visible pairs), option errors (exit 2), and
 * `attn bench embed` on the MiniLM model when it is present (last line "sentences/s: X").
 * No speed is asserted (speed goals are checked by bench/, not by tests). */
#include "testutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256] = "/tmp/attn_test_bench_XXXXXX";
static const char *attn_bin;
static char out_text[16384], err_text[8192];

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

/* value of "key=NUMBER" in line (NAN if absent) */
static double field(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(line, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

static void test_sdpa(void) {
    int rc = run_attn("bench", "sdpa", "--L", "40,64", "--D", "16", "--H", "2", "--dtype", "fp32,bf16,fp16", "--causal",
                      "--min-time", "0", "--threads", "1", NULL);
    CHECK(rc == 0, "bench sdpa: exit %d, stderr %s", rc, err_text);
    int lines = 0;
    double last_rate = NAN;
    char *save = NULL;
    char buf[sizeof out_text];
    strcpy(buf, out_text);
    const char *final = NULL;
    for (char *ln = strtok_r(buf, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
        if (strncmp(ln, "sdpa ", 5) == 0) {
            lines++;
            const double L = field(ln, "Lk"), Lq = field(ln, "Lq"), best = field(ln, "best_ms"), rate = field(ln, "GFLOP/s");
            CHECK(L == Lq && (L == 40 || L == 64), "bench sdpa line: %s", ln);
            CHECK(strstr(ln, "kernel=\"fused ") != NULL, "bench sdpa names the kernel: %s", ln);
            CHECK(strstr(ln, "dtype=fp32") ? !strstr(ln, "widened") : strstr(ln, "widened to float32") != NULL,
                  "bench sdpa: kernel text matches the dtype: %s", ln);
            /* causal, Lq == Lk: L(L+1)/2 visible pairs; B = 1, H = 2, D = 16 */
            const double flops = 4.0 * 2 * 16 * (L * (L + 1) / 2);
            /* tolerance: the printed rate's last digit (0.05), and best_ms printed to 4 decimals, a
             * relative error of up to 0.00005 / best_ms in the rate recomputed here (0.6% for a 9 µs
             * best on a fast machine) */
            CHECK(best > 0 && fabs(rate - flops / (best * 1e-3) * 1e-9) <= 0.051 + (0.002 + 0.00005 / best) * rate,
                  "bench sdpa: GFLOP/s %.3f vs 4*B*H*D*pairs/best = %.3f: %s", rate, flops / (best * 1e-3) * 1e-9, ln);
            last_rate = rate;
        } else {
            final = ln;
        }
    }
    CHECK(lines == 6, "bench sdpa: %d configuration lines, want 2 L x 3 dtypes = 6:\n%s", lines, out_text);
    CHECK(final && strncmp(final, "GFLOP/s: ", 9) == 0 && fabs(strtod(final + 9, NULL) - last_rate) <= 0.051,
          "bench sdpa: last line is 'GFLOP/s: X' with the last configuration's rate: %s", final ? final : "(none)");

    rc = run_attn("bench", "sdpa", "--L", "50", "--Lq", "1", "--D", "8", "--H", "4", "--Hkv", "2", "--min-time", "0", NULL);
    CHECK(rc == 0 && strstr(out_text, "Lq=1 Lk=50") && strstr(out_text, "Hkv=2"), "bench sdpa decode GQA: %d %s %s", rc,
          out_text, err_text);
    rc = run_attn("bench", "sdpa", "--L", "32", "--D", "8", "--H", "2", "--impl", "reference", "--min-time", "0", NULL);
    CHECK(rc == 0 && strstr(out_text, "kernel=\"reference\""), "bench sdpa reference: %d %s %s", rc, out_text, err_text);
    /* --backward: one sdpa_backward line, GFLOP/s = 10*B*H*D*pairs / best (causal: 40*41/2 pairs;
     * 1% for best_ms printed with 4 decimals) */
    rc = run_attn("bench", "sdpa", "--backward", "--L", "40", "--D", "16", "--H", "2", "--causal", "--min-time", "0", NULL);
    {
        const char *ln = strstr(out_text, "sdpa_backward B=1 H=2 Hkv=2 Lq=40 Lk=40 D=16 causal=1 dtype=fp32");
        const char *pb = ln ? strstr(ln, "best_ms=") : NULL, *pr = ln ? strstr(ln, "GFLOP/s=") : NULL;
        double best = pb ? strtod(pb + 8, NULL) : 0, rate = pr ? strtod(pr + 8, NULL) : -1;
        double want = best > 0 ? 10.0 * 2 * 16 * (40.0 * 41 / 2) / (best * 1e-3) * 1e-9 : -2;
        CHECK(rc == 0 && ln && fabs(rate - want) <= 0.051 + 1e-2 * want, "bench sdpa --backward: %d %s %s", rc, out_text, err_text);
    }
    rc = run_attn("bench", "sdpa", "--backward", "--dtype", "bf16", NULL);
    CHECK(rc == 2 && strstr(err_text, "fp32 only"), "bench sdpa --backward --dtype bf16: exit %d %s", rc, err_text);

    /* usage errors */
    const char *bad[][4] = {{"--dtype", "fp64"}, {"--L", "0"}, {"--H", "3", "--Hkv", "2"}, {"--impl", "magic"},
                            {"--frobnicate"}, {"--L", "1,,"}, {"--dtype", "bf16,"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = run_attn("bench", "sdpa", bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL);
        CHECK(rc == 2 && strstr(err_text, "attn: error:"), "bench sdpa %s %s: exit %d (want 2), stderr %s", bad[i][0],
              bad[i][1] ? bad[i][1] : "", rc, err_text);
    }
    rc = run_attn("bench", "nothing", NULL);
    CHECK(rc == 2, "bench nothing: exit %d", rc);
    rc = run_attn("bench", "embed", NULL);
    CHECK(rc == 2 && strstr(err_text, "--model"), "bench embed without --model: exit %d %s", rc, err_text);
    rc = run_attn("bench", "embed", "--model", "/nonexistent/model", NULL);
    CHECK(rc == 1, "bench embed with a missing model: exit %d %s", rc, err_text);
    /* ATTN_SIMD naming an unknown path is an error, not a silent fallback */
    setenv("ATTN_SIMD", "sse9", 1);
    rc = run_attn("bench", "sdpa", "--L", "16", "--D", "8", "--H", "1", "--min-time", "0", NULL);
    CHECK(rc == 1 && strstr(err_text, "ATTN_SIMD"), "bench sdpa with ATTN_SIMD=sse9: exit %d %s", rc, err_text);
    setenv("ATTN_SIMD", "portable", 1);
    rc = run_attn("bench", "sdpa", "--L", "16", "--D", "8", "--H", "1", "--min-time", "0", NULL);
    CHECK(rc == 0 && strstr(out_text, "kernel=\"fused portable\""), "bench sdpa with ATTN_SIMD=portable: %d %s", rc,
          out_text);
    unsetenv("ATTN_SIMD");
}

static void test_embed(void) {
    const char *model = "models/all-MiniLM-L6-v2";
    if (access("models/all-MiniLM-L6-v2/model.safetensors", R_OK) != 0) {
        printf("bench: %s not present, bench embed skipped\n", model);
        return;
    }
    int rc = run_attn("bench", "embed", "--model", model, "--sentences", "8", "--batch", "4", "--min-time", "0", NULL);
    CHECK(rc == 0, "bench embed: exit %d %s", rc, err_text);
    const char *last = strstr(out_text, "sentences/s: ");
    CHECK(last && strtod(last + 13, NULL) > 0 && strstr(out_text, "sentences=8"), "bench embed output: %s", out_text);
}

int main(void) {
    attn_test_name = "bench";
    attn_bin = attn_test_cli_path();
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp failed");
        return attn_test_finish();
    }
    test_sdpa();
    test_embed();
    char path[300];
    snprintf(path, sizeof path, "%s/stdout.txt", tmpdir);
    unlink(path);
    snprintf(path, sizeof path, "%s/stderr.txt", tmpdir);
    unlink(path);
    rmdir(tmpdir);
    return attn_test_finish();
}
