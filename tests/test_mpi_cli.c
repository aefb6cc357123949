/* The CLI under mpirun (run by tests/test_mpi.sh; every mpirun bounded by `timeout 60`):
 *  - `attn sdpa --ring` (striped and contiguous; causal at P = 1..4, not causal at P = 3; rank-2
 *    files with Lq != Lk at P = 3) against single-process `attn sdpa` on the same files: |diff| <= 4e-6 (inputs
 *    U(-1, 1), |out| <= 1; both are float32 results within 2e-6 of the float64 reference,
 *    include/attn_mpi.h / attn_attention.h);
 *  - more ranks than positions: exit 1, one message, the existing output untouched;
 *  - a rank killed (SIGKILL) mid-job: mpirun ends the job within 30 s saying so, the output
 *    untouched and no staging file left;
 *  - `attn classify --eval` under mpirun -np 2 and 4: stdout and --logits identical to one process;
 *  - `attn embed` under mpirun -np 1..4 (when models/all-MiniLM-L6-v2 is there): bit-identical to
 *    one process, in input order; JSON lines too; a bad sentence held by one rank fails the job
 *    with that rank's message and leaves the output untouched. */
#include "attn_npy.h"
#include "mpirun_util.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[256], out[1 << 16], err[1 << 16];

static const char *path(const char *name) { return attn_test_path_in(dir, name); }

/* timeout 60 mpirun ... -np P ATTN ARGS... (args NULL-terminated); stdin from in (or NULL) */
static int mpirun(int P, const char *in, const char *const *args) {
    return attn_test_mpirun("60", P, dir, in, out, sizeof out, err, sizeof err, args);
}

static int run1(const char *in, const char *const *args) {
    return attn_test_run_stdin(attn_test_cli_path(), dir, in, out, sizeof out, err, sizeof err, args);
}

static void save_random(const char *name, int nd, const int64_t *shape, uint64_t *seed) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    float *x = malloc(sizeof(float) * n);
    attn_test_fill_uniform(x, n, -1, 1, seed);
    attn_tensor t;
    attn_tensor_make(&t, x, ATTN_F32, nd, shape);
    CHECK_OK(attn_npy_save(path(name), &t));
    free(x);
}

/* max |a - b| of two float32 .npy files of one shape, or -1 when they differ in shape / cannot load */
static double npy_diff(const char *a, const char *b, int exact) {
    attn_tensor x, y;
    memset(&x, 0, sizeof x), memset(&y, 0, sizeof y);
    double d = -1;
    if (attn_npy_load(&x, a) == 0 && attn_npy_load(&y, b) == 0 && x.ndim == y.ndim &&
        !memcmp(x.shape, y.shape, sizeof(int64_t) * x.ndim) && x.dtype == ATTN_F32 && y.dtype == ATTN_F32) {
        size_t n = attn_tensor_numel(&x);
        d = exact ? (memcmp(x.data, y.data, n * 4) ? 1 : 0) : attn_test_max_abs_diff(x.data, y.data, n);
        if (attn_test_has_nonfinite(y.data, n)) d = -1;
    }
    attn_npy_free(&x), attn_npy_free(&y);
    return d;
}

static int count(const char *s, const char *sub) {
    int n = 0;
    for (const char *p = strstr(s, sub); p; p = strstr(p + 1, sub)) n++;
    return n;
}

static void sdpa_ring(void) {
    uint64_t seed = 11;
    const int64_t sq[4] = {2, 4, 53, 16}, sk[4] = {2, 2, 53, 16}, sv[4] = {2, 2, 53, 8};
    save_random("q.npy", 4, sq, &seed), save_random("k.npy", 4, sk, &seed), save_random("v.npy", 4, sv, &seed);
    const int64_t q2[2] = {31, 16}, k2[2] = {47, 16};
    save_random("q2.npy", 2, q2, &seed), save_random("k2.npy", 2, k2, &seed), save_random("v2.npy", 2, k2, &seed);
    const char *sets[2][3] = {{"q.npy", "k.npy", "v.npy"}, {"q2.npy", "k2.npy", "v2.npy"}};
    for (int set = 0; set < 2; set++)
        for (int causal = 0; causal < 2; causal++) {
            const char *a[] = {"sdpa", "-q", path(sets[set][0]), "-k", path(sets[set][1]), "-v", path(sets[set][2]),
                               "-o", path("ref.npy"), "--threads", "1", causal ? "--causal" : NULL, NULL};
            int rc = run1(NULL, a);
            CHECK(rc == 0, "attn sdpa: exit %d: %s", rc, err);
            for (int P = 1; P <= 4; P++)
                for (int lay = 0; lay < 2; lay++) {
                    if (set == 1 && P != 3) continue; /* the rank-2 files: P = 3 (uneven 31 / 47) */
                    if (set == 0 && !causal && P != 3) continue; /* non-causal: P = 3 (53 = 18 + 18 + 17) */
                    unlink(path("ring.npy"));
                    const char *b[] = {"sdpa", "--ring", "--layout", lay ? "contiguous" : "striped", "-q",
                                       path(sets[set][0]), "-k", path(sets[set][1]), "-v", path(sets[set][2]), "-o",
                                       path("ring.npy"), "--threads", "1", causal ? "--causal" : NULL, NULL};
                    rc = mpirun(P, NULL, b);
                    double d = npy_diff(path("ref.npy"), path("ring.npy"), 0);
                    CHECK(rc == 0 && d >= 0 && d <= 4e-6, "sdpa --ring set %d causal %d P=%d %s: exit %d, max |diff| %g: %s",
                          set, causal, P, lay ? "contiguous" : "striped", rc, d, err);
                }
        }
    /* -o -: rank 0 writes the .npy to mpirun's standard output (a pipe here). Under mpirun a rank's
     * stdout is always the launcher's pseudo-terminal, which says nothing about where mpirun's own
     * output goes (it forwards bytes unchanged), so the "binary data to a terminal" refusal must not fire */
    {
        const char *a[] = {"sdpa", "-q", path("q.npy"), "-k", path("k.npy"), "-v", path("v.npy"), "-o", path("ref.npy"),
                           "--threads", "1", NULL};
        int rc = run1(NULL, a);
        const char *b[] = {"sdpa", "--ring", "-q", path("q.npy"), "-k", path("k.npy"), "-v", path("v.npy"), "-o", "-",
                           "--threads", "1", NULL};
        int rc2 = mpirun(2, NULL, b);
        double d = npy_diff(path("ref.npy"), path("stdout.txt"), 0);
        CHECK(rc == 0 && rc2 == 0 && d >= 0 && d <= 4e-6, "sdpa --ring -o - under mpirun -np 2: exit %d/%d, max |diff| %g: %s",
              rc, rc2, d, err);
    }
    /* more ranks than positions: one message (rank 0's), exit 1, the output untouched */
    const int64_t s2[2] = {2, 8};
    save_random("s.npy", 2, s2, &seed);
    FILE *f = fopen(path("keep.npy"), "w");
    fputs("keep", f);
    fclose(f);
    const char *c[] = {"sdpa", "--ring", "-q", path("s.npy"), "-k", path("s.npy"), "-v", path("s.npy"), "-o",
                       path("keep.npy"), NULL};
    int rc = mpirun(3, NULL, c);
    char kept[16];
    attn_test_read_file(path("keep.npy"), kept, sizeof kept);
    CHECK(rc != 0 && strstr(err, "at least one") && count(err, "attn: error:") == 1 && !strcmp(kept, "keep"),
          "P=3 > L=2: exit %d, output '%s', stderr: %s", rc, kept, err);
    /* --ring refuses what it cannot shard */
    const char *d[] = {"sdpa", "--ring", "--window", "4", "-q", path("s.npy"), "-k", path("s.npy"), "-v", path("s.npy"),
                       "-o", path("x.npy"), NULL};
    rc = run1(NULL, d);
    CHECK(rc == 2 && strstr(err, "--window does not apply to --ring"), "--ring --window: exit %d: %s", rc, err);
    const char *e[] = {"sdpa", "--layout", "contiguous", "-q", path("s.npy"), "-k", path("s.npy"), "-v", path("s.npy"),
                       "-o", path("x.npy"), NULL};
    rc = run1(NULL, e);
    CHECK(rc == 2 && strstr(err, "--layout applies to --ring only"), "--layout without --ring: exit %d: %s", rc, err);
}

static void embed(void) {
    const char *model = "models/all-MiniLM-L6-v2";
    struct stat st;
    if (stat(model, &st) != 0) {
        printf("test_mpi_cli: %s missing; embed under mpirun not tested\n", model);
        return;
    }
    /* 41 sentences of 0..40 words, one empty and one long, in an order that is not sorted by length */
    static const char *const words[] = {"the", "ring", "passes", "keys", "and", "values", "around", "hosts", "while",
                                        "every", "rank", "computes", "its", "block", "of", "exact", "attention"};
    FILE *f = fopen(path("texts.txt"), "w");
    uint64_t s = 5;
    for (int i = 0; i < 41; i++) {
        float r;
        attn_test_fill_uniform(&r, 1, 0, 1, &s);
        int n = i == 7 ? 0 : i == 20 ? 300 : (int)(r * 40);
        for (int w = 0; w < n; w++) fprintf(f, w ? " %s" : "%s", words[(i * 7 + w * 3) % 17]);
        fputc('\n', f);
    }
    fclose(f);
    const char *a[] = {"embed", "--model", model, "--threads", "1", "--batch", "4", "-o", path("e1.npy"), NULL};
    int rc = run1(path("texts.txt"), a);
    CHECK(rc == 0, "embed: exit %d: %s", rc, err);
    for (int P = 1; P <= 4; P++) {
        unlink(path("eP.npy"));
        const char *b[] = {"embed", "--model", model, "--threads", "1", "--batch", "4", "-o", path("eP.npy"), NULL};
        rc = mpirun(P, path("texts.txt"), b);
        double d = npy_diff(path("e1.npy"), path("eP.npy"), 1);
        CHECK(rc == 0 && d == 0, "embed under mpirun -np %d: exit %d, %s: %s", P, rc,
              d == 0 ? "identical" : d < 0 ? "missing / other shape" : "NOT bit-identical", err);
    }
    /* JSON lines, texts as arguments */
    const char *c[] = {"embed", "--model", model, "--threads", "1", "hello world", "ring", "attention is all", NULL};
    rc = run1(NULL, c);
    char *one = strdup(out);
    int rc2 = mpirun(3, NULL, c);
    CHECK(rc == 0 && rc2 == 0 && count(one, "\n") == 3 && !strcmp(one, out), "embed JSON lines -np 3: exit %d / %d: %s",
          rc, rc2, err);
    free(one);
    /* invalid UTF-8 in sentence 38: the rank holding it fails the job; the output is untouched */
    f = fopen(path("bad.txt"), "w");
    for (int i = 0; i < 40; i++) fprintf(f, i == 37 ? "bad \xff byte\n" : "sentence number %d\n", i);
    fclose(f);
    f = fopen(path("keep.npy"), "w");
    fputs("keep", f);
    fclose(f);
    const char *d[] = {"embed", "--model", model, "--threads", "1", "-o", path("keep.npy"), NULL};
    rc = mpirun(3, path("bad.txt"), d);
    char kept[16];
    attn_test_read_file(path("keep.npy"), kept, sizeof kept);
    CHECK(rc != 0 && strstr(err, "of 3: embedding: sentence 38: invalid UTF-8") && count(err, "attn: error:") == 1 &&
              !strcmp(kept, "keep"),
          "embed with a bad sentence: exit %d, output '%s', stderr: %s", rc, kept, err);
}

/* a rank killed mid-job: mpirun ends the job with a clear message in bounded time, no output */
static void killed_rank(void) {
    uint64_t seed = 3;
    const int64_t s[2] = {24576, 64}; /* ~1e11 useful FLOPs: seconds of work for 2 ranks */
    save_random("kq.npy", 2, s, &seed);
    FILE *f = fopen(path("kout.npy"), "w");
    fputs("keep", f);
    fclose(f);
    const char *outp = path("kout.npy");
    const char *argv[] = {"timeout", "60", "mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2",
                          attn_test_cli_path(), "sdpa", "--ring", "--causal", "--threads", "1", "-q", path("kq.npy"), "-k",
                          path("kq.npy"), "-v", path("kq.npy"), "-o", outp, NULL};
    pid_t victim = 0;
    double secs = 0;
    int rc = attn_test_mpirun_kill(argv, path("kstdout.txt"), path("kstderr.txt"), outp, "--ring", 300000, &victim, &secs);
    CHECK(rc != -1, "spawn mpirun");
    if (rc == -1) return;
    char kept[16], e[4096];
    attn_test_read_file(outp, kept, sizeof kept);
    attn_test_read_file(path("kstderr.txt"), e, sizeof e);
    /* no staging file left beside the output */
    int strays = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, "kout") && strcmp(de->d_name, "kout.npy")) strays++;
    if (d) closedir(d);
    CHECK(victim != 0 && rc != 0 && rc != 124 && secs < 30 && !strcmp(kept, "keep") && strays == 0 &&
              (strstr(e, "signal 9") || strstr(e, "Killed")),
          "rank %d killed: mpirun exit %d after %.1f s, output '%s', %d staging files left, stderr: %s", (int)victim, rc,
          secs, kept, strays, e);
}

/* classify --eval under mpirun: whole batches per rank, rank 0 reports: stdout (confusion table and
 * accuracy) and the --logits file identical to one process */
static void classify_eval(void) {
    const char *model = "models/vit-fashion-mnist", *fm = "/usr/share/datasets/fashion-mnist/";
    char img[256], lab[256];
    snprintf(img, sizeof img, "%st10k-images-idx3-ubyte.gz", fm);
    snprintf(lab, sizeof lab, "%st10k-labels-idx1-ubyte.gz", fm);
    struct stat st;
    if (stat(model, &st) != 0 || stat(img, &st) != 0) {
        printf("test_mpi_cli: %s or %s missing; classify --eval under mpirun not tested\n", model, img);
        return;
    }
    const char *a[] = {"classify", "--model", model, "--eval", img, lab, "--limit", "300", "--batch", "32", "--threads", "1",
                       "--logits", path("l1.npy"), NULL};
    int rc = run1(NULL, a);
    CHECK(rc == 0 && strstr(out, "accuracy: "), "classify --eval: exit %d: %s", rc, err);
    char *one = strdup(out);
    for (int P = 2; P <= 4; P += 2) {
        unlink(path("lP.npy"));
        const char *b[] = {"classify", "--model", model, "--eval", img, lab, "--limit", "300", "--batch", "32",
                           "--threads", "1", "--logits", path("lP.npy"), NULL};
        rc = mpirun(P, NULL, b);
        double d = npy_diff(path("l1.npy"), path("lP.npy"), 1);
        CHECK(rc == 0 && !strcmp(one, out) && d == 0, "classify --eval -np %d: exit %d, stdout %s, logits %s: %s", P, rc,
              strcmp(one, out) ? "DIFFERS" : "identical", d == 0 ? "identical" : "differ / missing", err);
    }
    free(one);
}

int main(void) {
    attn_test_name = "test_mpi_cli";
    snprintf(dir, sizeof dir, "/tmp/attn_test_mpi_cli_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    sdpa_ring();
    killed_rank();
    embed();
    classify_eval();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("test_mpi_cli: could not remove %s\n", dir);
    return attn_test_finish();
}
