/* attn transcribe: speech to text with Whisper (CTranslate2 model directory). */
#include "cli.h"
#include "mpi_cli.h"
#include "progress.h"

#include "attn_audio.h"
#include "attn_whisper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *model;
    const char *files[256];
    int n_files, ts, no_fallback, no_rules, progress;
    int64_t beam, threads;
    attn_whisper_opts w;
    float temps[32];
} transcribe_opts;

static int parse_threshold(const char *opt, const char *s, float none_value, float lo, float hi, float *out);
static int parse_temperatures(const char *s, float *t, int64_t *n);

static int threshold_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    float *f = (float *)field;
    if (!strcmp(o->name, "--no-speech-threshold")) return parse_threshold(o->name, val, 1.0f, 0.0f, 1.0f, f);
    if (!strcmp(o->name, "--log-prob-threshold")) return parse_threshold(o->name, val, -INFINITY, -1e30f, 1e30f, f);
    return parse_threshold(o->name, val, INFINITY, 1e-30f, 1e30f, f);
}

static int temperatures_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    transcribe_opts *t = (transcribe_opts *)base;
    if (parse_temperatures(val, t->temps, &t->w.n_temperatures) != CLI_OK) return CLI_USAGE;
    t->w.temperatures = t->temps;
    return CLI_OK;
}

#define F(f) offsetof(transcribe_opts, f)
static const cli_option options[] = {
    {"--model", NULL, CLI_STR, F(model), .help = "  --model DIR     model directory (model.bin, vocabulary.txt, config.json)\n"},
    {"--timestamps", NULL, CLI_FLAG, F(ts), 1, .help = "  --timestamps    segments with start and end times\n"},
    {"--beam", NULL, CLI_I64, F(beam), 1, 64, .help = "  --beam N        beam size 1..64 (default 5, as faster-whisper; 1 = greedy)\n"},
    {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = "  --threads N     worker threads (default: all cores)\n"},
    CLI_PROGRESS_OPTIONS(F(progress), "      ", "   "),
    {"--no-speech-threshold", NULL, CLI_CALL, F(w.no_speech_threshold), .fn = threshold_opt, .takes_value = 1,
     .help = "  --no-speech-threshold P        0..1 (default 0.6); 'none': never skip a window\n"},
    {"--log-prob-threshold", NULL, CLI_CALL, F(w.log_prob_threshold), .fn = threshold_opt, .takes_value = 1,
     .help = "  --log-prob-threshold L         (default -1.0); 'none': no log-probability fallback\n"
             "                                 and no no-speech skip\n"},
    {"--compression-ratio-threshold", NULL, CLI_CALL, F(w.compression_ratio_threshold), .fn = threshold_opt,
     .takes_value = 1, .help = "  --compression-ratio-threshold R  > 0 (default 2.4); 'none': no repetition fallback\n"},
    {"--temperatures", NULL, CLI_CALL, 0, .fn = temperatures_opt, .takes_value = 1,
     .help = "  --temperatures T,T,...         1..32 temperatures 0..100 tried in order (default\n"
             "                                 0,0.2,0.4,0.6,0.8,1)\n"},
    {"--no-fallback", NULL, CLI_FLAG, F(no_fallback), 1,
     .help = "  --no-fallback   temperature 0 only (the no-speech skip still applies)\n"},
    {"--no-rules", NULL, CLI_FLAG, F(no_rules), 1,
     .help = "  --no-rules      none of the rules: one beam search per window, nothing skipped\n"},
    {"--no-condition-on-previous-text", NULL, CLI_FLAG, F(w.condition_on_previous_text), 0,
     .help = "  --no-condition-on-previous-text  do not prompt a window with the previous windows'\n"
             "                  text (faster-whisper's condition_on_previous_text=False; by default\n"
             "                  it is, as in faster-whisper, until a window needs a temperature > 0.5)\n"},
    {"--best-of", NULL, CLI_I64, F(w.best_of), 1, 64, .help = "  --best-of N     samples per temperature > 0, 1..64 (default 5)\n"},
    {"--seed", NULL, CLI_I64, F(w.seed), 0, INT64_MAX,
     .help = "  --seed N        sampler seed, 0..2^63-1 (default 0; the same seed gives the same text)\n"},
    CLI_HELP_LINE("  -h, --help      this help\n"
                  "  --              end of options: AUDIO files whose names start with '-' follow\n"),
    {0}};

static int audio_file(void *base, const char *verb, const char *arg) {
    transcribe_opts *t = (transcribe_opts *)base;
    if (t->n_files == 256) return cli_usage_error(verb, "at most 256 audio files");
    t->files[t->n_files++] = arg;
    return CLI_OK;
}

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn transcribe --model DIR [--timestamps] [--beam N] [--threads N] [decoding rules] AUDIO...\n"
            "\n"
            "Transcribes each audio file (WAV, FLAC, OGG, ... through libsndfile; any rate and channel\n"
            "count: downmixed to mono and resampled to 16 kHz) with a Whisper model in CTranslate2 format,\n"
            "e.g. models/whisper-tiny.en (scripts/setup.sh fetches it). Audio longer than 30 s is decoded\n"
            "in successive 30 s windows. AUDIO '-' reads standard input.\n"
            "Output: one line per file, \"FILE: TEXT\"; with --timestamps, one line per segment,\n"
            "\"FILE [START --> END] TEXT\" (seconds).\n"
            "\n"
            "Decoding rules (OpenAI Whisper's transcribe rules with faster-whisper 1.2.1's defaults): a\n"
            "30 s window is decoded at temperature 0 (beam search) and decoded again at the next\n"
            "temperature (best-of-5 sampling) while its text is too repetitive (zlib compression\n"
            "ratio > R) or too improbable (average log-probability < L); a window whose no-speech\n"
            "probability is > P and whose average log-probability is <= L has no speech and gives no\n"
            "text. So a short silence (1 s) prints \"FILE: \" with an empty text (no line with\n"
            "--timestamps), as faster-whisper gives no segment for it; a window the model finds more\n"
            "probable (10 s of silence: \"you\", average log-probability -0.92) keeps its text, in\n"
            "faster-whisper too.\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
}

/* a threshold: a finite number, or 'none' (faster-whisper's None) giving `none_value` */
static int parse_threshold(const char *opt, const char *s, float none_value, float lo, float hi, float *out) {
    if (strcmp(s, "none") == 0) {
        *out = none_value;
        return CLI_OK;
    }
    if (cli_parse_f32("transcribe", opt, s, out) != CLI_OK) return CLI_USAGE;
    if (!(*out >= lo && *out <= hi)) {
        if (lo > 0 && lo < 1e-20f) return cli_usage_error("transcribe", "%s must be > 0 and at most %g (got '%s')", opt, (double)hi, s);
        return cli_usage_error("transcribe", "%s must be between %g and %g (got '%s')", opt, (double)lo, (double)hi, s);
    }
    return CLI_OK;
}

/* comma-separated temperatures into t[32] */
static int parse_temperatures(const char *s, float *t, int64_t *n) {
    char buf[512];
    if (strlen(s) >= sizeof buf) return cli_usage_error("transcribe", "--temperatures: list too long");
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == 32) return cli_usage_error("transcribe", "--temperatures: at most 32 values");
        if (cli_parse_f32("transcribe", "--temperatures", tok, &t[*n]) != CLI_OK) return CLI_USAGE;
        if (!(t[*n] >= 0.0f && t[*n] <= 100.0f)) return cli_usage_error("transcribe", "--temperatures: each value must be between 0 and 100 (got '%s')", tok);
        (*n)++;
    }
    if (*n == 0 || s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
        return cli_usage_error("transcribe", "--temperatures: expected comma-separated numbers, e.g. 0,0.2,0.4 (got '%s')", s);
    return CLI_OK;
}

/* one file's transcript into f: "FILE: TEXT", or one "FILE [START --> END] TEXT" per segment */
static void print_result(FILE *f, const char *file, const attn_whisper_result *res, int ts) {
    if (!ts) {
        const char *t = res->text;
        while (*t == ' ') t++;
        fprintf(f, "%s: %s\n", file, t);
        return;
    }
    for (int64_t s = 0; s < res->n_segments; s++) {
        const char *t = res->segments[s].text;
        while (*t == ' ') t++;
        fprintf(f, "%s [%.2f --> %.2f] %s\n", file, res->segments[s].start, res->segments[s].end, t);
    }
}

/* the bar in seconds of audio: the files before this one, and this one's windows */
typedef struct {
    cli_progress *bar;
    double before, seconds; /* seconds of the files already done; of this file */
} file_progress;

static void on_window(int64_t done, int64_t total, void *user) {
    file_progress *f = (file_progress *)user;
    cli_progress_update(f->bar, f->before + (total > 0 ? f->seconds * ((double)done / (double)total) : 0));
}

/* decode every file first (a bad file is reported before the model is loaded), then transcribe */
static int transcribe_run(const transcribe_opts *t, const attn_whisper_opts *o) {
    float *audio[256] = {0};
    int64_t len[256] = {0};
    int rc = CLI_OK;
    for (int i = 0; i < t->n_files && rc == CLI_OK; i++) {
        if (attn_audio_load(&audio[i], &len[i], t->files[i], ATTN_WHISPER_RATE) < 0) rc = cli_lib_error(NULL);
        else if (len[i] == 0) rc = cli_error("%s: the audio is empty (no samples)", t->files[i]);
    }
    attn_whisper *m = NULL;
    if (rc == CLI_OK && attn_whisper_load(&m, t->model) < 0) rc = cli_lib_error("loading the model");
    /* the bar counts seconds of audio, window by window; by default not while the transcripts go
     * to the same terminal */
    double total = 0, done = 0;
    for (int i = 0; i < t->n_files; i++) total += (double)len[i] / ATTN_WHISPER_RATE;
    cli_progress bar;
    cli_progress_start(&bar, t->progress == CLI_PROGRESS_AUTO && isatty(1) ? 0 : t->progress, "transcribe", "s of audio",
                       rc == CLI_OK ? total : 0);
    for (int i = 0; i < t->n_files && rc == CLI_OK; i++) {
        attn_whisper_result res;
        file_progress fp = {&bar, done, (double)len[i] / ATTN_WHISPER_RATE};
        if (attn_whisper_transcribe_progress(m, &res, audio[i], len[i], o, bar.on ? on_window : NULL, &fp) < 0) {
            char ctx[600];
            snprintf(ctx, sizeof ctx, "%s", t->files[i]);
            rc = cli_lib_error(ctx);
            break;
        }
        print_result(stdout, t->files[i], &res, t->ts);
        attn_whisper_result_free(&res);
        cli_progress_update(&bar, done += (double)len[i] / ATTN_WHISPER_RATE);
    }
    cli_progress_end(&bar);
    for (int i = 0; i < t->n_files; i++) free(audio[i]);
    if (rc == CLI_OK && fflush(stdout) != 0) rc = cli_stdout_error();
    attn_whisper_free(m);
    return rc;
}

/* Under mpirun (tools/mpi_seq2seq.c): the files go to the ranks in consecutive runs of nearly
 * equal size in bytes (rank 0's stat, the same split on every rank; standard input, '-', is
 * rank 0's: its run reaches past it), each rank decodes its files (a bad file is reported by the
 * rank that holds it, before any model is loaded, as one process reports it), rank 0 loads the
 * model first (a bad model is said once), each rank transcribes its files, and rank 0 writes the
 * transcripts in input order once every rank succeeded. A file is one sequence of 30 s windows,
 * each prompted with the text before it and started where the previous one's last timestamp
 * ends, so it is never split: each file's transcript is the one one process gives. */
static int transcribe_mpi(const transcribe_opts *t, const attn_whisper_opts *o) {
    int me = 0, P = 1;
    cli_outputs none;
    cli_outputs_init(&none, "transcribe");
    if (cli_mpi_job_begin(&me, &P) != CLI_OK) return cli_mpi_job_finish(&none, CLI_FAIL);
    const int n = t->n_files;
    int64_t size[256] = {0}, len[256] = {0}, idx[256], *starts = malloc(sizeof(int64_t) * (size_t)(P + 1));
    float *audio[256] = {0};
    char *text[256] = {0}, *all[256] = {0}, *obuf = NULL;
    size_t tlen, olen = 0;
    struct stat st;
    int last_stdin = -1;
    for (int i = 0; i < n; i++) {
        if (me == 0) size[i] = strcmp(t->files[i], "-") != 0 && stat(t->files[i], &st) == 0 ? (int64_t)st.st_size : 0;
        if (!strcmp(t->files[i], "-")) last_stdin = i;
    }
    int rc = cli_mpi_bcast_i64(size, n);
    if (rc == CLI_OK && !starts) rc = cli_error("out of memory");
    if (rc == CLI_OK) rc = cli_mpi_split(size, n, P, starts);
    for (int r = 1; rc == CLI_OK && r <= P; r++)
        if (starts[r] < last_stdin + 1) starts[r] = last_stdin + 1;
    const int64_t s0 = rc == CLI_OK ? starts[me] : 0, s1 = rc == CLI_OK ? starts[me + 1] : 0;
    for (int64_t i = s0; i < s1 && rc == CLI_OK; i++) {
        if (attn_audio_load(&audio[i], &len[i], t->files[i], ATTN_WHISPER_RATE) < 0) rc = cli_lib_error(NULL);
        else if (len[i] == 0) rc = cli_error("%s: the audio is empty (no samples)", t->files[i]);
    }
    /* standard input read to its end (the audio loader reads a duplicate of descriptor 0 and
     * stops at the data's end): mpirun forwards it to rank 0, which must not close its end of the
     * pipe before mpirun met the input's end (open-mpi/ompi#7483; see cli_mpi_check_verb) */
    if (last_stdin >= 0 && me == 0) {
        char sink[65536];
        while (read(0, sink, sizeof sink) > 0) {
        }
    }
    rc = cli_mpi_agree(rc);
    attn_whisper *m = NULL;
    if (rc == CLI_OK && me == 0 && attn_whisper_load(&m, t->model) < 0) rc = cli_lib_error("loading the model");
    rc = cli_mpi_bcast_rc(rc);
    if (rc == CLI_OK && me != 0 && s1 > s0 && attn_whisper_load(&m, t->model) < 0) rc = cli_lib_error("loading the model");
    for (int64_t i = s0; i < s1 && rc == CLI_OK; i++) {
        attn_whisper_result res;
        if (attn_whisper_transcribe(m, &res, audio[i], len[i], o) < 0) {
            char ctx[600];
            snprintf(ctx, sizeof ctx, "%s", t->files[i]);
            rc = cli_lib_error(ctx);
            break;
        }
        FILE *f = open_memstream(&text[i - s0], &tlen);
        if (f) print_result(f, t->files[i], &res, t->ts);
        if (!f || fclose(f) != 0) rc = cli_error("out of memory");
        idx[i - s0] = i;
        attn_whisper_result_free(&res);
    }
    rc = cli_mpi_gather_strings(rc, n, s1 - s0, idx, text, all);
    if (rc == CLI_OK && me == 0) {
        FILE *f = open_memstream(&obuf, &olen);
        for (int i = 0; f && i < n; i++) fputs(all[i], f);
        if (!f || fclose(f) != 0) rc = cli_error("out of memory");
    }
    rc = cli_mpi_job_finish(&none, rc); /* every rank's status agreed */
    if (rc == CLI_OK && me == 0 && olen > 0 && (fwrite(obuf, 1, olen, stdout) != olen || fflush(stdout) != 0))
        rc = cli_stdout_error();
    for (int i = 0; i < n; i++) free(audio[i]), free(text[i]), free(all[i]);
    free(starts), free(obuf);
    attn_whisper_free(m);
    return rc;
}

int cmd_transcribe(int argc, char **argv) {
    transcribe_opts t;
    memset(&t, 0, sizeof t);
    t.beam = 5;
    t.progress = CLI_PROGRESS_AUTO;
    t.w = attn_whisper_opts_default();
    int rc = cli_parse(argc, argv, "transcribe", options, &t, NULL, NULL, audio_file, usage);
    if (rc != CLI_OK) return cli_parsed(rc);
    if (!t.model || !*t.model) return cli_usage_error("transcribe", "--model DIR is required");
    if (t.n_files == 0) return cli_usage_error("transcribe", "no AUDIO file given");
    if (t.no_fallback && t.no_rules) return cli_usage_error("transcribe", "--no-fallback and --no-rules exclude each other");
    int n_stdin = 0;
    for (int i = 0; i < t.n_files; i++) n_stdin += strcmp(t.files[i], "-") == 0;
    if (n_stdin > 1) return cli_usage_error("transcribe", "standard input ('-') is named %d times; it can be read once", n_stdin);
    static const float zero_t = 0.0f;
    attn_whisper_opts o = t.w;
    if (t.no_fallback) {
        o.temperatures = &zero_t;
        o.n_temperatures = 1;
    }
    if (t.no_rules) o.n_temperatures = 0;
    if (t.threads > 0) attn_set_num_threads((int)t.threads);
    o.beam_size = t.beam;
    o.timestamps = t.ts;
    /* under mpirun: the files split across the ranks, the transcripts in input order */
    return cli_mpi_launched() ? transcribe_mpi(&t, &o) : transcribe_run(&t, &o);
}
