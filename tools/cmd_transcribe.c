/* attn transcribe: speech to text with Whisper (CTranslate2 model directory). */
#include "cli.h"

#include "attn_audio.h"
#include "attn_whisper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
            "Options:\n"
            "  --model DIR     model directory (model.bin, vocabulary.txt, config.json)\n"
            "  --timestamps    segments with start and end times\n"
            "  --beam N        beam size 1..64 (default 5, as faster-whisper; 1 = greedy)\n"
            "  --threads N     worker threads (default: all cores)\n"
            "  --no-speech-threshold P        0..1 (default 0.6); 'none': never skip a window\n"
            "  --log-prob-threshold L         (default -1.0); 'none': no log-probability fallback\n"
            "                                 and no no-speech skip\n"
            "  --compression-ratio-threshold R  > 0 (default 2.4); 'none': no repetition fallback\n"
            "  --temperatures T,T,...         1..32 temperatures 0..100 tried in order (default\n"
            "                                 0,0.2,0.4,0.6,0.8,1)\n"
            "  --no-fallback   temperature 0 only (the no-speech skip still applies)\n"
            "  --no-rules      none of the rules: one beam search per window, nothing skipped\n"
            "  --best-of N     samples per temperature > 0, 1..64 (default 5)\n"
            "  --seed N        sampler seed, 0..2^63-1 (default 0; the same seed gives the same text)\n"
            "  -h, --help      this help\n"
            "  --              end of options: AUDIO files whose names start with '-' follow\n");
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

int cmd_transcribe(int argc, char **argv) {
    const char *model = NULL;
    const char *files[256];
    int n_files = 0, ts = 0;
    int64_t beam = 5, threads = 0;
    attn_whisper_opts o = attn_whisper_opts_default();
    float temps[32];
    int64_t seed = 0;
    int no_fallback = 0, no_rules = 0;
    cli_args a = cli_args_start(argc, argv, "transcribe");
    while (cli_more(&a)) {
        const char *val;
        int r;
        if (cli_help(&a)) {
            usage(stdout);
            return CLI_OK;
        } else if ((r = cli_opt(&a, NULL, "--model", &val))) {
            if (r < 0) return CLI_USAGE;
            model = val;
        } else if ((r = cli_opt(&a, NULL, "--beam", &val))) {
            if (r < 0 || cli_parse_i64("transcribe", "--beam", val, 1, 64, &beam) != CLI_OK) return CLI_USAGE;
        } else if ((r = cli_opt(&a, NULL, "--threads", &val))) {
            if (r < 0 || cli_parse_i64("transcribe", "--threads", val, 1, 4096, &threads) != CLI_OK) return CLI_USAGE;
        } else if (cli_flag(&a, NULL, "--timestamps")) {
            ts = 1;
        } else if ((r = cli_opt(&a, NULL, "--no-speech-threshold", &val))) {
            if (r < 0 || parse_threshold("--no-speech-threshold", val, 1.0f, 0.0f, 1.0f, &o.no_speech_threshold) != CLI_OK) return CLI_USAGE;
        } else if ((r = cli_opt(&a, NULL, "--log-prob-threshold", &val))) {
            if (r < 0 || parse_threshold("--log-prob-threshold", val, -INFINITY, -1e30f, 1e30f, &o.log_prob_threshold) != CLI_OK) return CLI_USAGE;
        } else if ((r = cli_opt(&a, NULL, "--compression-ratio-threshold", &val))) {
            if (r < 0 || parse_threshold("--compression-ratio-threshold", val, INFINITY, 1e-30f, 1e30f, &o.compression_ratio_threshold) != CLI_OK)
                return CLI_USAGE;
        } else if ((r = cli_opt(&a, NULL, "--temperatures", &val))) {
            if (r < 0 || parse_temperatures(val, temps, &o.n_temperatures) != CLI_OK) return CLI_USAGE;
            o.temperatures = temps;
        } else if ((r = cli_opt(&a, NULL, "--best-of", &val))) {
            if (r < 0 || cli_parse_i64("transcribe", "--best-of", val, 1, 64, &o.best_of) != CLI_OK) return CLI_USAGE;
        } else if ((r = cli_opt(&a, NULL, "--seed", &val))) {
            if (r < 0 || cli_parse_i64("transcribe", "--seed", val, 0, INT64_MAX, &seed) != CLI_OK) return CLI_USAGE;
            o.seed = (uint64_t)seed;
        } else if (cli_flag(&a, NULL, "--no-fallback")) {
            no_fallback = 1;
        } else if (cli_flag(&a, NULL, "--no-rules")) {
            no_rules = 1;
        } else if (cli_positional(&a, &val)) { /* after "--", a file name may start with '-' */
            if (n_files == 256) return cli_usage_error("transcribe", "at most 256 audio files");
            files[n_files++] = val;
        } else {
            return cli_unknown(&a);
        }
    }
    if (!model || !*model) return cli_usage_error("transcribe", "--model DIR is required");
    if (n_files == 0) return cli_usage_error("transcribe", "no AUDIO file given");
    if (no_fallback && no_rules) return cli_usage_error("transcribe", "--no-fallback and --no-rules exclude each other");
    static const float zero_t = 0.0f;
    if (no_fallback) {
        o.temperatures = &zero_t;
        o.n_temperatures = 1;
    }
    if (no_rules) o.n_temperatures = 0;
    if (threads > 0) attn_set_num_threads((int)threads);
    /* decode every file first: a bad file is reported before the model is loaded */
    float *audio[256] = {0};
    int64_t len[256] = {0};
    int rc = CLI_OK;
    for (int i = 0; i < n_files && rc == CLI_OK; i++) {
        if (attn_audio_load(&audio[i], &len[i], files[i], ATTN_WHISPER_RATE) < 0) rc = cli_lib_error(NULL);
        else if (len[i] == 0) rc = cli_error("%s: the audio is empty (no samples)", files[i]);
    }
    attn_whisper *m = NULL;
    if (rc == CLI_OK && attn_whisper_load(&m, model) < 0) rc = cli_lib_error("loading the model");
    o.beam_size = beam;
    o.timestamps = ts;
    for (int i = 0; i < n_files && rc == CLI_OK; i++) {
        const float *x = audio[i];
        int64_t n = len[i];
        attn_whisper_result res;
        if (attn_whisper_transcribe(m, &res, x, n, &o) < 0) {
            char ctx[600];
            snprintf(ctx, sizeof ctx, "%s", files[i]);
            rc = cli_lib_error(ctx);
            break;
        }
        if (!ts) {
            const char *t = res.text;
            while (*t == ' ') t++;
            printf("%s: %s\n", files[i], t);
        } else {
            for (int64_t s = 0; s < res.n_segments; s++) {
                const char *t = res.segments[s].text;
                while (*t == ' ') t++;
                printf("%s [%.2f --> %.2f] %s\n", files[i], res.segments[s].start, res.segments[s].end, t);
            }
        }
        attn_whisper_result_free(&res);
    }
    for (int i = 0; i < n_files; i++) free(audio[i]);
    if (rc == CLI_OK && fflush(stdout) != 0) rc = cli_error("writing standard output failed");
    attn_whisper_free(m);
    return rc;
}
