/* attn — command-line front end: `attn VERB [options]`.
 * Each verb lives in tools/cmd_VERB.c; this file only dispatches. */
#include "cli.h"
#include "mpi_cli.h"

#include <cblas.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* One line per verb: X(name, one-line summary). The function is cmd_<name>. */
#define ATTN_CLI_COMMANDS(X)                                                              \
    X(sdpa, "scaled dot-product attention on .npy tensors")                               \
    X(pe, "sinusoidal positional-encoding table as .npy, .png, .svg or .pdf")            \
    X(embed, "sentence embeddings with a BERT sentence-transformers model")              \
    X(similarity, "cosine similarity matrix of sentence embeddings")                     \
    X(tokenize, "word pieces and ids of a text")                                         \
    X(generate, "continue a prompt with a language model (GGUF or llama2.c)")            \
    X(chat, "answer a message with an instruct model (chat template, KV cache)")         \
    X(summarize, "abstractive summary of a text with an instruct model")                 \
    X(attention, "attention weights of a model as a heatmap (png, svg, pdf, html) or .npy")          \
    X(translate, "translate with a CTranslate2 Transformer (greedy / beam search)")       \
    X(transcribe, "speech to text with Whisper (CTranslate2 model)")       \
    X(classify, "image classification with a ViT (top-5, --eval accuracy, --attention)") \
    X(bench, "kernel and model throughput (sdpa GFLOP/s, embed sentences/s)")              \
    X(quantize, "a GGUF model in another weight type (Q4_K_M, Q6_K, Q8_0, ...)")         \
    X(serve, "OpenAI-compatible HTTP server (chat, completions, embeddings, audio, translations)")       \
    X(train, "train a ViT classifier on IDX images (AdamW; Hugging Face checkpoint per epoch)")

#define ATTN_CLI_DECLARE(name, summary) int cmd_##name(int argc, char **argv);
ATTN_CLI_COMMANDS(ATTN_CLI_DECLARE)

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

static const cli_command commands[] = {
#define ATTN_CLI_ENTRY(name, summary) {#name, summary, cmd_##name},
    ATTN_CLI_COMMANDS(ATTN_CLI_ENTRY)
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn VERB [OPTIONS]\n"
            "       attn VERB --help     options of one verb\n"
            "       attn --version\n"
            "\nVerbs:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nExit status: 0 success, 1 failure (bad input file, shape or dtype), 2 usage error (a bad option or\n"
               "argument, refused before any work).\n");
}

static const cli_command *find(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

/* OpenBLAS 0.3.21 (Debian 12) does not recognise some CPUs — e.g. AMD Zen 4 in a VM that
 * reports a generic model — and falls back to its SSE3 "Prescott" kernels, about 2x slower
 * than its AVX-512 ones here. Unless the user set OPENBLAS_CORETYPE (or
 * ATTN_KEEP_BLAS_CORETYPE), pick the kernel family from the CPU's own feature flags and
 * re-execute once; OpenBLAS reads the variable when it is loaded, before main(). */
/* One thread pool: attn runs OpenBLAS with one thread (core/threads.c) and splits GEMMs across its
 * own OpenMP threads, but the pthreads build of OpenBLAS still starts its worker threads when it
 * is loaded, and they spin in sched_yield for a while beside attn's threads (2 cores: measured as
 * ~10% of `attn sdpa`'s CPU time). With OPENBLAS_NUM_THREADS=1 in the environment when the
 * library loads it starts none; so the CLI sets it (unless the user did) and re-executes once,
 * together with the core-type choice below. */
/* OpenBLAS's own call that stops its worker threads (it runs it before a fork); where the
 * library has it, the threads started at load are stopped here and no re-exec is needed. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

static int blas_one_thread(void) {
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("ATTN_KEEP_BLAS_THREADS")) return 0;
    setenv("OPENBLAS_NUM_THREADS", "1", 1); /* for child processes */
    if (blas_thread_shutdown_) {
        openblas_set_num_threads(1);
        blas_thread_shutdown_();
        return 0;
    }
    return 1;
}

static void blas_coretype(char **argv) {
    const int reexec = blas_one_thread();
    if (getenv("OPENBLAS_CORETYPE") || getenv("ATTN_KEEP_BLAS_CORETYPE")) {
        if (reexec) execv("/proc/self/exe", argv); /* returns only on failure: carry on as loaded */
        return;
    }
    const char *cur = openblas_get_corename();
    static const char *generic[] = {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "sandybridge",
                                    "barcelona", "bulldozer", "piledriver", "steamroller", "excavator", "unknown"};
    int weak = 0;
    for (size_t i = 0; cur && i < sizeof generic / sizeof generic[0]; i++) weak |= strcasecmp(cur, generic[i]) == 0;
    if (!weak) {
        if (reexec) execv("/proc/self/exe", argv);
        return;
    }
    const char *ct = NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        ct = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        ct = "Haswell";
    if (!ct) {
        if (reexec) execv("/proc/self/exe", argv);
        return;
    }
    setenv("OPENBLAS_CORETYPE", ct, 1);
    execv("/proc/self/exe", argv); /* returns only on failure: carry on with the detected kernels */
}

static int run_verb(int argc, char **argv);

/* Every verb's standard output is checked once more at the end: data still buffered when stdout
 * is a full disk or a closed pipe would otherwise be lost at exit with status 0. */
int main(int argc, char **argv) {
    blas_coretype(argv);
    cli_signals_install(); /* a Ctrl-C leaves no staging file behind */
    int rc = run_verb(argc, argv);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno ? errno : EIO;
        if (rc == CLI_OK) rc = cli_error("writing standard output failed: %s", strerror(e));
    }
    return rc;
}

static int run_verb(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *verb = argv[1];
    if (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(verb, "--version") == 0 || strcmp(verb, "-V") == 0) {
        printf("attn %s\n", attn_version());
        return CLI_OK;
    }
    if (strcmp(verb, "help") == 0) {
        if (argc < 3) {
            usage(stdout);
            return CLI_OK;
        }
        const cli_command *c = find(argv[2]);
        if (!c) return cli_usage_error(NULL, "unknown verb '%s'", argv[2]);
        char *hargv[3] = {argv[2], "--help", NULL};
        return c->run(2, hargv);
    }
    const cli_command *c = find(verb);
    if (!c) {
        if (verb[0] == '-') return cli_usage_error(NULL, "unknown option '%s'", verb);
        return cli_usage_error(NULL, "unknown verb '%s'", verb);
    }
    const int mr = cli_mpi_check_verb(argc, argv); /* under mpirun: only the verbs that split their work */
    if (mr != CLI_OK) return mr;
    return c->run(argc - 1, argv + 1);
}
