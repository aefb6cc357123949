/* Output safety of the attn command-line tool (issue 23 items 1 and 2), run as a child process
 * ($ATTN_BIN, else $ATTN_BUILD/attn, else build/attn):
 *   1. an output that names one of the process's descriptors (/dev/stdout, /dev/fd/1,
 *      /proc/self/fd/1, or any symbolic link to /proc/self/fd/N) while standard output is a
 *      pipe is written through to the pipe, byte for byte what `-o FILE` writes, and the link is
 *      still a link afterwards (never renamed over);
 *   2. SIGTERM or SIGINT while a verb runs with staged outputs (classify --eval --logits
 *      --confusion) leaves no temporary file, the old outputs untouched, and the process dies of
 *      that signal.
 *   3. the library itself (attn_out, which every writer uses): a link to /proc/self/fd/N of a pipe
 *      is written through, the link kept; attn__out_remove_temps (what the CLI's signal handler
 *      calls) removes a temporary file that is being written, and only that one.
 * /dev/stdout itself is tried only after the same check passed on a link of our own, so that a
 * broken build cannot replace the machine's /dev/stdout by a regular file. */
#include "attn_io.h"
#include "attn_npy.h"
#include "core/internal.h" /* attn__out_remove_temps */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FMNIST "/usr/share/datasets/fashion-mnist/"
#define VIT "models/vit-fashion-mnist"

static char tmpdir[256];
static const char *attn_bin;

static const char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* start attn with args (NULL-terminated, without the program); stdout goes to out_fd (or the file
 * tmpdir/stdout.txt when out_fd < 0), stderr to tmpdir/stderr.txt. Returns the pid or -1. */
static pid_t start(const char *const *args, int out_fd) {
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)attn_bin;
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = (char *)args[i];
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    int e = open(tmp_path("stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int o = out_fd >= 0 ? out_fd : open(tmp_path("stdout.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (e < 0 || o < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    signal(SIGPIPE, SIG_DFL); /* the dispositions a shell may have set to "ignore" */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execv(attn_bin, argv);
    _exit(127);
}

/* exit status, or 128 + the signal that ended it */
static int wait_status(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) < 0) return -1;
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* run attn with standard output a pipe; what came through it goes to buf (*got bytes) */
static int run_piped(const char *const *args, char *buf, size_t cap, size_t *got) {
    int p[2];
    *got = 0;
    if (pipe(p) != 0) return -1;
    pid_t pid = start(args, p[1]);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return -1;
    }
    for (;;) {
        ssize_t r = read(p[0], buf + *got, cap - *got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        *got += (size_t)r;
        if (*got == cap) break;
    }
    close(p[0]);
    return wait_status(pid);
}

static long read_file(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return (long)n;
}

static int is_link(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

/* one output path that should reach the pipe: the bytes equal ref, the link stays a link */
static int check_through(const char *what, const char *out, const char *ref, long ref_n, const char *link) {
    const char *pe[] = {"pe", "--d-model", "8", "--len", "5", "--format", "npy", "-o", out, NULL};
    static char got[65536];
    size_t n;
    int rc = run_piped(pe, got, sizeof got, &n);
    char err[1024] = "";
    read_file(tmp_path("stderr.txt"), err, sizeof err - 1);
    int ok = rc == 0 && (long)n == ref_n && memcmp(got, ref, n) == 0;
    CHECK(ok, "%s: exit %d, %zu bytes through the pipe, want %ld equal to -o FILE's (%s)", what, rc, n, ref_n, err);
    if (link) {
        int still = is_link(link);
        CHECK(still, "%s: %s is still a symbolic link", what, link);
        ok = ok && still;
    }
    return ok;
}

static void test_write_through(void) {
    /* the reference: the same table written to a file */
    const char *ref_path = tmp_path("ref.npy");
    const char *pe[] = {"pe", "--d-model", "8", "--len", "5", "--format", "npy", "-o", ref_path, NULL};
    pid_t pid = start(pe, -1);
    CHECK(pid > 0 && wait_status(pid) == 0, "pe -o FILE");
    static char ref[65536];
    long ref_n = read_file(ref_path, ref, sizeof ref);
    CHECK(ref_n > 128, "reference .npy written (%ld bytes)", ref_n);
    if (ref_n <= 128) return;
    /* a link of our own to /proc/self/fd/1 (as /dev/stdout is): harmless to replace if broken */
    const char *mine = tmp_path("stdout-link");
    unlink(mine);
    CHECK(symlink("/proc/self/fd/1", mine) == 0, "symlink %s -> /proc/self/fd/1", mine);
    int ok = check_through("-o LINK (-> /proc/self/fd/1)", mine, ref, ref_n, mine);
    /* relative link through /dev/fd */
    const char *mine2 = tmp_path("fd-link");
    unlink(mine2);
    CHECK(symlink("/dev/fd/1", mine2) == 0, "symlink %s -> /dev/fd/1", mine2);
    ok &= check_through("-o LINK (-> /dev/fd/1)", mine2, ref, ref_n, mine2);
    ok &= check_through("-o /dev/fd/1", "/dev/fd/1", ref, ref_n, NULL);
    ok &= check_through("-o /proc/self/fd/1", "/proc/self/fd/1", ref, ref_n, NULL);
    /* the machine's /dev/stdout, only when the same thing worked on our own links */
    if (ok && is_link("/dev/stdout")) check_through("-o /dev/stdout", "/dev/stdout", ref, ref_n, "/dev/stdout");
    else CHECK(ok, "-o /dev/stdout not tried: the checks on our own links failed");
    CHECK(is_link("/dev/stdout"), "/dev/stdout is still a symbolic link");
    /* "-" as before */
    ok = check_through("-o -", "-", ref, ref_n, NULL);
    /* no staging file left in $TMPDIR (attn-out-*) */
    DIR *d = opendir(getenv("TMPDIR"));
    int stray = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "attn-out-", 9)) stray++;
    if (d) closedir(d);
    CHECK(stray == 0, "no attn-out-* staging file left in $TMPDIR (%d)", stray);
}

/* classify prints its labels / confusion table on standard output: --logits - (or a path that is
 * standard output, /dev/stdout) would mix the .npy into that text, so it is refused (exit 2,
 * nothing on the pipe), with --eval and with images */
static void test_classify_stdout(void) {
    const char *paths[2] = {"-", "/dev/stdout"};
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 2; i++) {
            const char *args[] = {"classify", "--model", VIT, "--eval", FMNIST "t10k-images-idx3-ubyte.gz",
                                  FMNIST "t10k-labels-idx1-ubyte.gz", "--limit", "5", "--logits", paths[j], NULL};
            const char *img[] = {"classify", "--model", VIT, "tests/fixtures/vit/test_0_ankle_boot.png", "--logits", paths[j], NULL};
            static char got[65536];
            size_t n = 0;
            int rc = run_piped(i == 1 ? img : args, got, sizeof got, &n);
            char err[1024] = "";
            read_file(tmp_path("stderr.txt"), err, sizeof err - 1);
            CHECK(rc == 2 && n == 0 && strstr(err, "standard output"), "classify --logits %s (%s): exit %d, %zu bytes on stdout: %s",
                  paths[j], i ? "image" : "--eval", rc, n, err);
        }
}

/* hidden entries of dir (the staging files ".NAME.attn-XXXXXX" and ".NAME.XXXXXX.tmp") */
static int hidden_entries(const char *dir, char *first, size_t cap) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] != '.' || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!n) snprintf(first, cap, "%s", e->d_name);
        n++;
    }
    if (d) closedir(d);
    return n;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* classify --eval with two staged outputs; sig once a staging file exists */
static void test_signal(int sig, const char *name) {
    char od[512], lg[600], cm[600], first[256] = "";
    snprintf(od, sizeof od, "%s/sig_%s", tmpdir, name);
    mkdir(od, 0755);
    snprintf(lg, sizeof lg, "%s/logits.npy", od);
    snprintf(cm, sizeof cm, "%s/confusion.png", od);
    put(lg, "OLD LOGITS");
    put(cm, "OLD PICTURE");
    const char *args[] = {"classify", "--model", VIT, "--eval", FMNIST "t10k-images-idx3-ubyte.gz",
                          FMNIST "t10k-labels-idx1-ubyte.gz", "--logits", lg, "--confusion", cm, NULL};
    pid_t pid = start(args, -1);
    CHECK(pid > 0, "%s: started", name);
    if (pid <= 0) return;
    int seen = 0, done = 0;
    const double t0 = now_s();
    while (now_s() - t0 < 30) { /* wait for the staging files, then send the signal */
        if (hidden_entries(od, first, sizeof first) > 0) {
            seen = 1;
            break;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            done = 1;
            break;
        }
        usleep(2000);
    }
    CHECK(seen && !done, "%s: a staging file exists while classify runs (%s)", name, done ? "it ended first" : first);
    if (done) return;
    usleep(50000); /* well inside the run (loading the model, classifying 10000 images) */
    kill(pid, sig);
    int rc = wait_status(pid);
    CHECK(rc == 128 + sig, "%s: the process died of the signal (status %d, want %d)", name, rc, 128 + sig);
    int n = hidden_entries(od, first, sizeof first);
    CHECK(n == 0, "%s: no temporary file left (%d, e.g. '%s')", name, n, first);
    char buf[64] = "";
    long k = read_file(lg, buf, sizeof buf - 1);
    CHECK(k == 10 && !memcmp(buf, "OLD LOGITS", 10), "%s: --logits file untouched", name);
    k = read_file(cm, buf, sizeof buf - 1);
    CHECK(k == 11 && !memcmp(buf, "OLD PICTURE", 11), "%s: --confusion file untouched", name);
}

/* 3: attn_out directly */
static void test_library(void) {
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    char link[600], target[64];
    snprintf(link, sizeof link, "%s/lib-link", tmpdir);
    snprintf(target, sizeof target, "/proc/self/fd/%d", p[1]);
    unlink(link);
    CHECK(symlink(target, link) == 0, "symlink -> %s", target);
    attn_out *o = NULL;
    CHECK_OK(attn_out_open(&o, link, ATTN_OUT_TEXT));
    if (o) {
        fputs("through the pipe\n", attn_out_file(o));
        CHECK_OK(attn_out_commit(o));
    }
    close(p[1]);
    char buf[64] = "";
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    CHECK(n == 17 && !memcmp(buf, "through the pipe\n", 17), "attn_out through a link to a pipe's descriptor: %zd bytes '%s'",
          n, buf);
    CHECK(is_link(link), "attn_out: the link to /proc/self/fd/N is still a link");
    /* the temporaries of attn_out: listed, removed by attn__out_remove_temps, forgotten once committed */
    char od[512], keep[600], lost[600], first[256] = "";
    snprintf(od, sizeof od, "%s/lib", tmpdir);
    mkdir(od, 0755);
    snprintf(keep, sizeof keep, "%s/keep.txt", od);
    snprintf(lost, sizeof lost, "%s/lost.txt", od);
    attn_out *a = NULL, *b = NULL;
    CHECK_OK(attn_out_open(&a, keep, ATTN_OUT_TEXT));
    if (a) {
        fputs("kept\n", attn_out_file(a));
        CHECK_OK(attn_out_commit(a));
    }
    CHECK_OK(attn_out_open(&b, lost, ATTN_OUT_TEXT));
    if (b) fputs("never committed\n", attn_out_file(b));
    CHECK(hidden_entries(od, first, sizeof first) == 1, "attn_out: one temporary file while writing (%s)", first);
    attn__out_remove_temps();
    CHECK(hidden_entries(od, first, sizeof first) == 0, "attn__out_remove_temps removed it (%s)", first);
    char text[64] = "";
    CHECK(read_file(keep, text, sizeof text - 1) == 5 && !strcmp(text, "kept\n"), "the committed file is untouched");
    attn_out_abort(b);
    CHECK(access(lost, F_OK) != 0, "the aborted target does not exist");
}

/* removes tmpdir and all in it (main's, made by mkdtemp) */
static void remove_tmpdir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("cli_safety: could not remove %s\n", tmpdir);
}

int main(void) {
    attn_test_name = "cli_safety";
    attn_bin = attn_test_cli_path();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_cli_safety_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp failed");
        return attn_test_finish();
    }
    if (access(attn_bin, X_OK) != 0) {
        CHECK(0, "%s is not an executable (set ATTN_BIN)", attn_bin);
        remove_tmpdir();
        return attn_test_finish();
    }
    char td[400];
    snprintf(td, sizeof td, "%s/tmp", tmpdir);
    mkdir(td, 0755);
    setenv("TMPDIR", td, 1); /* staging for stdout / devices lands here, where it is checked */
    test_write_through();
    test_library();
    if (access(VIT "/model.safetensors", R_OK) == 0 && access(FMNIST "t10k-images-idx3-ubyte.gz", R_OK) == 0) {
        test_classify_stdout();
        test_signal(SIGTERM, "SIGTERM");
        test_signal(SIGINT, "SIGINT");
    } else {
        CHECK(0, "%s or %s missing (scripts/setup.sh)", VIT, FMNIST);
    }
    remove_tmpdir();
    return attn_test_finish();
}
