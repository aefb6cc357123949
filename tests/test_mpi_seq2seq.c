/* `attn translate` and `attn transcribe` under mpirun (run by tests/test_mpi.sh; every mpirun
 * bounded by `timeout 120`), each against the same command in one process:
 *  - translate (../shared's aren-transliteration models, tests/fixtures/aren/words.txt, 275
 *    sentences): int8, beam 4, 2-best with scores, --batch 7, at P = 1, 2, 3: standard output
 *    byte-identical. The check can fail: the same sentences in other batches (--batch 1) give
 *    other scores in their last digits (asserted too), so only whole batches formed as one
 *    process forms them pass. float32 greedy with --max-input-length 4 (truncation notes on
 *    standard error) at P = 2: stdout and stderr identical. Fewer sentences than ranks (2 at
 *    --batch 1, P = 3), none (P = 3: nothing, exit 0), --attention (P = 2: the same .npy);
 *    invalid UTF-8 in sentence 38 of 40: the rank holding it fails the job with one process's
 *    message, once, nothing on standard output and the --attention file untouched;
 *  - transcribe (models/whisper-tiny.en, when there): four files of 1 to 5.5 s at P = 1 and 3,
 *    and with --timestamps at P = 2: identical; one file at P = 3; standard input ('-') after a
 *    file at P = 2; a file that is not audio: exit 1 with its message, once, nothing printed;
 *    a rank killed (SIGKILL) mid-job: the job ends within 60 s, not 0, nothing printed. */
#include "attn_audio.h"
#include "mpirun_util.h"
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[256], out[1 << 18], err[1 << 16];

static const char *path(const char *name) { return attn_test_path_in(dir, name); }

/* timeout 120 mpirun ... -np P ATTN ARGS... (args NULL-terminated); stdin from in (or NULL) */
static int mpirun(int P, const char *in, const char *const *args) {
    return attn_test_mpirun("120", P, dir, in, out, sizeof out, err, sizeof err, args);
}

static int run1(const char *in, const char *const *args) {
    return attn_test_run_stdin(attn_test_cli_path(), dir, in, out, sizeof out, err, sizeof err, args);
}

static int count(const char *s, const char *sub) {
    int n = 0;
    for (const char *p = strstr(s, sub); p; p = strstr(p + 1, sub)) n++;
    return n;
}

static int same_file(const char *a, const char *b) {
    static char x[1 << 16], y[1 << 16];
    attn_test_read_file(a, x, sizeof x);
    attn_test_read_file(b, y, sizeof y);
    return x[0] && !strcmp(x, y);
}

#define F32 "../shared/models/aren-transliteration"
#define I8 "../shared/models/aren-transliteration-int8"

static void translate(void) {
    struct stat st;
    if (stat(F32 "/model.bin", &st) != 0 || stat(I8 "/model.bin", &st) != 0) {
        CHECK(0, "%s or %s missing (../shared/README.md): translate under mpirun not tested", F32, I8);
        return;
    }
    const char *words = attn_test_fixture("aren/words.txt");
    /* int8, beam 4, 2-best with scores, batches of 7 (40 batches) */
    const char *a[] = {"translate", "--model", I8, "--beam", "4", "--n-best", "2", "--scores", "--batch", "7",
                       "--threads", "1", NULL};
    int rc = run1(words, a);
    char *one = strdup(out);
    CHECK(rc == 0 && count(one, "\n") == 550, "translate: exit %d, %d lines: %s", rc, count(one, "\n"), err);
    const char *b1[] = {"translate", "--model", I8, "--beam", "4", "--n-best", "2", "--scores", "--batch", "1",
                        "--threads", "1", NULL};
    rc = run1(words, b1);
    CHECK(rc == 0 && count(out, "\n") == 550 && strcmp(one, out) != 0,
          "translate --batch 1 gives other scores than --batch 7 (exit %d, %s): the check below could not fail", rc,
          strcmp(one, out) ? "they differ" : "identical");
    for (int P = 1; P <= 3; P++) {
        rc = mpirun(P, words, a);
        CHECK(rc == 0 && !strcmp(one, out), "translate under mpirun -np %d: exit %d, stdout %s: %s", P, rc,
              strcmp(one, out) ? "DIFFERS" : "identical", err);
    }
    free(one);
    /* float32 greedy, sentences truncated to 4 tokens: the notes on stderr, in input order */
    const char *c[] = {"translate", "--model", F32, "--batch", "5", "--max-input-length", "4", "--threads", "1", NULL};
    rc = run1(words, c);
    one = strdup(out);
    char *one_err = strdup(err);
    CHECK(rc == 0 && count(one_err, "attn: note: sentence") >= 10, "translate --max-input-length 4: exit %d, %d notes", rc,
          count(one_err, "attn: note: sentence"));
    rc = mpirun(2, words, c);
    CHECK(rc == 0 && !strcmp(one, out) && !strcmp(one_err, err), "translate float32 -np 2: exit %d, stdout %s, stderr %s",
          rc, strcmp(one, out) ? "DIFFERS" : "identical", strcmp(one_err, err) ? "DIFFERS" : "identical");
    free(one), free(one_err);
    /* fewer sentences than ranks: 2 batches of 1 on 3 ranks; none at all */
    const char *d[] = {"translate", "--model", F32, "--batch", "1", "--threads", "1",
                       "\xd9\x85 \xd8\xb1 \xd8\xad \xd8\xa8 \xd8\xa7", "\xd8\xa8 \xd9\x8a \xd8\xaa", NULL};
    rc = run1(NULL, d);
    one = strdup(out);
    CHECK(rc == 0 && count(one, "\n") == 2, "translate 2 sentences: exit %d: %s", rc, err);
    rc = mpirun(3, NULL, d);
    CHECK(rc == 0 && !strcmp(one, out), "translate 2 sentences -np 3: exit %d, '%s' vs '%s': %s", rc, out, one, err);
    free(one);
    FILE *f = fopen(path("empty.txt"), "w");
    fclose(f);
    rc = mpirun(3, path("empty.txt"), c);
    CHECK(rc == 0 && out[0] == 0 && !strstr(err, "error"), "translate no sentence -np 3: exit %d, stdout '%s': %s", rc, out,
          err);
    /* --attention: rank 0 translates the one sentence and writes the file */
    const char *e1[] = {"translate", "--model", F32, "--threads", "1", "--attention", path("a1.npy"), d[7], NULL};
    const char *e2[] = {"translate", "--model", F32, "--threads", "1", "--attention", path("a2.npy"), d[7], NULL};
    int rc1 = run1(NULL, e1);
    one = strdup(out);
    rc = mpirun(2, NULL, e2);
    CHECK(rc1 == 0 && rc == 0 && !strcmp(one, out) && same_file(path("a1.npy"), path("a2.npy")),
          "translate --attention -np 2: exit %d / %d, the .npy %s: %s", rc1, rc,
          same_file(path("a1.npy"), path("a2.npy")) ? "identical" : "DIFFERS", err);
    free(one);
    /* invalid UTF-8 in sentence 38 of 40 (batches of 4: not rank 0's): one process's message, once */
    f = fopen(path("bad.txt"), "w");
    for (int i = 0; i < 40; i++) fputs(i == 37 ? "\xd9\x85 \xff \xd8\xa7\n" : "\xd8\xa8 \xd9\x8a \xd8\xaa\n", f);
    fclose(f);
    const char *g[] = {"translate", "--model", F32, "--batch", "4", "--threads", "1", NULL};
    rc1 = run1(path("bad.txt"), g);
    char *msg = strdup(err);
    rc = mpirun(3, path("bad.txt"), g);
    CHECK(rc1 == 1 && rc == 1 && strstr(msg, "source 38 is not valid UTF-8") && strstr(err, msg) &&
              count(err, "attn: error:") == 1 && out[0] == 0,
          "translate with a bad sentence -np 3: exit %d (one process %d), stdout '%.80s', stderr: %s", rc, rc1, out, err);
    free(msg);
    f = fopen(path("keep.npy"), "w");
    fputs("keep", f);
    fclose(f);
    const char *h[] = {"translate", "--model", F32, "--threads", "1", "--attention", path("keep.npy"), "\xd9\x85 \xff", NULL};
    rc = mpirun(2, NULL, h);
    char kept[16];
    attn_test_read_file(path("keep.npy"), kept, sizeof kept);
    CHECK(rc == 1 && !strcmp(kept, "keep") && count(err, "attn: error:") == 1,
          "translate --attention, a bad sentence -np 2: exit %d, the file '%s': %s", rc, kept, err);
}

/* a transcribe rank killed mid-job: mpirun ends the job in bounded time, nothing printed */
static void killed_rank(const char *model, const char *const *files, int nf) {
    char marker[600], abs[4096];
    snprintf(marker, sizeof marker, "%s", path("marker.wav")); /* a link to the first file: names this job's ranks */
    if (!realpath(files[0], abs) || symlink(abs, marker) != 0) {
        CHECK(0, "cannot link %s to %s", marker, files[0]);
        return;
    }
    const char *args[40] = {"transcribe", "--model", model, "--threads", "1", marker};
    int n = 6;
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < nf; i++) args[n++] = files[i];
    args[n] = NULL;
    const char *argv[65] = {"timeout"};
    attn_test_mpirun_argv(argv + 1, "120", "2", args);
    pid_t victim = 0;
    double secs = 0;
    /* 500 ms into the work (13 files: seconds per rank) */
    int rc = attn_test_mpirun_kill(argv, path("kstdout.txt"), path("kstderr.txt"), marker, NULL, 500000, &victim, &secs);
    CHECK(rc != -1, "spawn mpirun");
    if (rc == -1) return;
    char o[256], e[4096];
    attn_test_read_file(path("kstdout.txt"), o, sizeof o);
    attn_test_read_file(path("kstderr.txt"), e, sizeof e);
    CHECK(victim != 0 && rc != 0 && rc != 124 && secs < 60 && o[0] == 0 && (strstr(e, "signal 9") || strstr(e, "Killed")),
          "transcribe rank %d killed: mpirun exit %d after %.1f s, stdout '%s', stderr: %s", (int)victim, rc, secs, o, e);
}

/* `src` resampled to 16 kHz mono, written as a 16-bit PCM WAV at `dst`: Front_Center.wav (48 kHz,
 * 137 kB) becomes 46 kB, under the 64 kB pipe Open MPI 4's mpirun forwards standard input
 * through (it can crash once that pipe fills, open-mpi/ompi#7483; attn enlarges the pipe, but
 * only once it runs, and this test checks attn, not that race) */
static int write_wav16k(const char *dst, const char *src) {
    float *x = NULL;
    int64_t n = 0;
    if (attn_audio_load(&x, &n, src, 16000) < 0) return -1;
    FILE *f = fopen(dst, "wb");
    const uint32_t data = (uint32_t)(n * 2), riff = 36 + data, fmt_len = 16, rate = 16000, bps = 32000;
    const uint16_t pcm = 1, ch = 1, align = 2, bits = 16;
    int ok = f && fwrite("RIFF", 1, 4, f) == 4 && fwrite(&riff, 4, 1, f) && fwrite("WAVEfmt ", 1, 8, f) == 8 &&
             fwrite(&fmt_len, 4, 1, f) && fwrite(&pcm, 2, 1, f) && fwrite(&ch, 2, 1, f) && fwrite(&rate, 4, 1, f) &&
             fwrite(&bps, 4, 1, f) && fwrite(&align, 2, 1, f) && fwrite(&bits, 2, 1, f) && fwrite("data", 1, 4, f) == 4 &&
             fwrite(&data, 4, 1, f);
    for (int64_t i = 0; ok && i < n; i++) {
        float v = x[i] * 32767.0f;
        int16_t s = (int16_t)(v > 32767.0f ? 32767.0f : v < -32768.0f ? -32768.0f : v);
        ok = fwrite(&s, 2, 1, f) == 1;
    }
    free(x);
    if (f && fclose(f) != 0) ok = 0;
    return ok ? 0 : -1;
}

static void transcribe(void) {
    const char *model = "models/whisper-tiny.en";
    struct stat st;
    if (stat(model, &st) != 0) {
        printf("test_mpi_seq2seq: %s missing; transcribe under mpirun not tested\n", model);
        return;
    }
    const char *fc = "/usr/share/sounds/alsa/Front_Center.wav", *e1 = "tests/fixtures/whisper/espeak_1.wav",
               *e2 = "tests/fixtures/whisper/espeak_2.wav", *e3 = "tests/fixtures/whisper/espeak_3.wav",
               *si = "tests/fixtures/whisper/silence_1s.wav", *no = "tests/fixtures/whisper/noise_1s.wav";
    for (int ts = 0; ts < 2; ts++) {
        const char *a[] = {"transcribe", "--model", model, "--threads", "1", fc, e3, si, e2, ts ? "--timestamps" : NULL, NULL};
        int rc = run1(NULL, a);
        char *one = strdup(out);
        CHECK(rc == 0 && strstr(one, "front, center.") && strstr(one, "Stella"), "transcribe%s: exit %d: %s",
              ts ? " --timestamps" : "", rc, err);
        for (int P = ts ? 2 : 1; P <= 3; P += 2) { /* plain: P = 1, 3; --timestamps: P = 2 */
            rc = mpirun(P, NULL, a);
            CHECK(rc == 0 && !strcmp(one, out), "transcribe%s under mpirun -np %d: exit %d, stdout %s: %s",
                  ts ? " --timestamps" : "", P, rc, strcmp(one, out) ? "DIFFERS" : "identical", err);
        }
        free(one);
    }
    /* one file on three ranks */
    const char *b[] = {"transcribe", "--model", model, "--threads", "1", fc, NULL};
    int rc = mpirun(3, NULL, b);
    CHECK(rc == 0 && !strcmp(out, "/usr/share/sounds/alsa/Front_Center.wav: front, center.\n"),
          "transcribe one file -np 3: exit %d, '%s': %s", rc, out, err);
    /* standard input among the files: rank 0 reads it */
    CHECK(write_wav16k(path("fc16k.wav"), fc) == 0, "writing %s: %s", path("fc16k.wav"), attn_last_error());
    const char *c[] = {"transcribe", "--model", model, "--threads", "1", si, "-", NULL};
    rc = mpirun(2, path("fc16k.wav"), c);
    CHECK(rc == 0 && !strcmp(out, "tests/fixtures/whisper/silence_1s.wav: \n-: front, center.\n"),
          "transcribe - -np 2: exit %d, '%s': %s", rc, out, err);
    /* a file that is not audio, on the last rank: the job fails with its message, nothing printed */
    FILE *f = fopen(path("not_audio.wav"), "w");
    fputs("not audio", f);
    fclose(f);
    const char *d[] = {"transcribe", "--model", model, "--threads", "1", si, no, path("not_audio.wav"), NULL};
    rc = mpirun(3, NULL, d);
    CHECK(rc == 1 && strstr(err, "not_audio.wav: cannot read as audio") && count(err, "attn: error:") == 1 && out[0] == 0,
          "transcribe with a bad file -np 3: exit %d, stdout '%s', stderr: %s", rc, out, err);
    const char *six[] = {fc, e3, si, e1, no, e2};
    killed_rank(model, six, 6);
}

int main(void) {
    attn_test_name = "test_mpi_seq2seq";
    snprintf(dir, sizeof dir, "/tmp/attn_test_mpi_seq2seq_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    translate();
    transcribe();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("test_mpi_seq2seq: could not remove %s\n", dir);
    return attn_test_finish();
}
