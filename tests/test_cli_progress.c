/* The progress bar of the long verbs (tools/progress.c, issue 23 item 14), run as a child process
 * ($ATTN_BIN, else $ATTN_BUILD/attn, else build/attn) with stdout and stderr files (not
 * terminals): with --progress the bar's last line "VERB: [####...]  N/N  100%  ..." is on stderr;
 * without it (stderr not a terminal) and with --no-progress there is no bar; standard output is
 * the same bytes either way. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MINILM "models/all-MiniLM-L6-v2"
#define VIT "models/vit-fashion-mnist"
#define WHISPER "models/whisper-tiny.en"
#define AREN "../shared/models/aren-transliteration"
#define FMNIST "/usr/share/datasets/fashion-mnist/"
#define WAV "/usr/share/sounds/alsa/Front_Center.wav"
#define TINY "tests/fuzz/seeds_fuzz_gguf/tiny_llama.gguf"

static char tmpdir[256];
static const char *attn_bin;
static char out_text[65536], err_text[8192], out_plain[65536];

/* run with args; stdin from in_path (NULL: none) */
static int run(const char *in_path, const char *const *args) {
    return attn_test_run_stdin(attn_bin, tmpdir, in_path, out_text, sizeof out_text, err_text, sizeof err_text, args);
}

/* args with the progress option put after the verb (NULL: none) */
static int run_with(const char *in_path, const char *const *args, const char *opt) {
    const char *a[40];
    int n = 0;
    a[n++] = args[0];
    if (opt) a[n++] = opt;
    for (int i = 1; args[i] && n < 39; i++) a[n++] = args[i];
    a[n] = NULL;
    return run(in_path, a);
}

/* the three runs of one verb: plain, --progress, --no-progress */
static void check_verb(const char *verb, const char *in_path, const char *const *args, const char *done) {
    char bar[64], what[96];
    snprintf(bar, sizeof bar, "%s: [", verb);
    int rc = run_with(in_path, args, NULL);
    CHECK(rc == 0, "%s: exit %d: %s", verb, rc, err_text);
    CHECK(strstr(err_text, bar) == NULL && strstr(err_text, "ETA") == NULL,
          "%s without --progress, stderr not a terminal: no bar (stderr: '%s')", verb, err_text);
    snprintf(out_plain, sizeof out_plain, "%s", out_text);
    rc = run_with(in_path, args, "--progress");
    snprintf(what, sizeof what, "%s --progress", verb);
    CHECK(rc == 0, "%s: exit %d: %s", what, rc, err_text);
    const char *line = strstr(err_text, bar);
    CHECK(line != NULL, "%s: a bar line '%s...' on stderr (a file): '%s'", what, bar, err_text);
    if (line) {
        const char *end = strchr(line, '\n');
        CHECK(end != NULL, "%s: bar lines end with a newline when stderr is not a terminal", what);
        CHECK(strstr(line, "[####################]") && strstr(line, done) && strstr(line, "100%"),
              "%s: the last line is complete ('%s', %s): %s", what, "[####...]", done, line);
        CHECK(strchr(err_text, '\r') == NULL && strstr(err_text, "\033[") == NULL,
              "%s: no carriage return or escape sequence in a file", what);
    }
    CHECK(strcmp(out_text, out_plain) == 0, "%s: standard output unchanged by the bar", what);
    rc = run_with(in_path, args, "--no-progress");
    CHECK(rc == 0 && strstr(err_text, bar) == NULL, "%s --no-progress: exit %d, no bar: '%s'", verb, rc, err_text);
}

/* removes tmpdir and all in it (main's, made by mkdtemp) */
static void remove_tmpdir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("cli_progress: could not remove %s\n", tmpdir);
}

int main(void) {
    attn_test_name = "cli_progress";
    attn_bin = attn_test_cli_path();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_cli_progress_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp failed");
        return attn_test_finish();
    }
    if (access(attn_bin, X_OK) != 0) {
        CHECK(0, "%s is not an executable (set ATTN_BIN)", attn_bin);
        remove_tmpdir();
        return attn_test_finish();
    }
    /* embed: 40 sentences, batches of 8 (the library's per-batch callback) */
    char in[512];
    snprintf(in, sizeof in, "%s/sentences.txt", tmpdir);
    FILE *f = fopen(in, "w");
    for (int i = 0; f && i < 40; i++) fprintf(f, "sentence number %d about attention\n", i);
    if (f) fclose(f);
    if (access(MINILM "/model.safetensors", R_OK) == 0) {
        const char *a[] = {"embed", "--model", MINILM, "--batch", "8", NULL};
        check_verb("embed", in, a, "40/40");
    } else {
        CHECK(0, "%s missing (scripts/setup.sh)", MINILM);
    }
    /* translate: 40 lines, batches of 8 (CTranslate2's batches, driven one by one) */
    snprintf(in, sizeof in, "%s/words.txt", tmpdir);
    f = fopen(in, "w");
    for (int i = 0; f && i < 40; i++) fputs(i % 3 ? "\xd9\x83 \xd8\xaa \xd8\xa7 \xd8\xa8\n" : "\xd9\x85 \xd8\xb1\n", f);
    if (f) fclose(f);
    if (access(AREN "/model.bin", R_OK) == 0) {
        const char *a[] = {"translate", "--model", AREN, "--batch", "8", NULL};
        check_verb("translate", in, a, "40/40");
    } else {
        CHECK(0, "%s missing", AREN);
    }
    if (access(VIT "/model.safetensors", R_OK) == 0 && access(FMNIST "t10k-images-idx3-ubyte.gz", R_OK) == 0) {
        const char *a[] = {"classify", "--model", VIT, "--eval", FMNIST "t10k-images-idx3-ubyte.gz",
                           FMNIST "t10k-labels-idx1-ubyte.gz", "--limit", "100", "--batch", "16", NULL};
        check_verb("classify", NULL, a, "100/100");
    } else {
        CHECK(0, "%s or %s missing (scripts/setup.sh)", VIT, FMNIST);
    }
    if (access(WHISPER "/model.bin", R_OK) == 0 && access(WAV, R_OK) == 0) {
        const char *a[] = {"transcribe", "--model", WHISPER, "--beam", "1", WAV, NULL};
        check_verb("transcribe", NULL, a, "1.4/1.4 s of audio");
    } else {
        CHECK(0, "%s or %s missing (scripts/setup.sh)", WHISPER, WAV);
    }
    /* summarize: the bar while the text (the prompt) is read, 184 tokens in chunks */
    snprintf(in, sizeof in, "%s/long.txt", tmpdir);
    f = fopen(in, "w");
    for (int i = 0; f && i < 60; i++) fputs("the cat sat on the mat. ", f);
    if (f) fclose(f);
    if (access(TINY, R_OK) == 0) {
        const char *a[] = {"summarize", "--model", TINY, "-n", "4", "--threads", "1", in, NULL};
        check_verb("summarize", NULL, a, "184/184");
    } else {
        CHECK(0, "%s missing", TINY);
    }
    remove_tmpdir();
    return attn_test_finish();
}
