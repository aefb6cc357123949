/* attn transcribe: speech to text with Whisper (CTranslate2 model directory). */
#include "cli.h"

#include "attn_audio.h"
#include "attn_whisper.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn transcribe --model DIR [--timestamps] [--beam N] [--threads N] AUDIO...\n"
            "\n"
            "Transcribes each audio file (WAV, FLAC, OGG, ... through libsndfile; any rate and channel\n"
            "count: downmixed to mono and resampled to 16 kHz) with a Whisper model in CTranslate2 format,\n"
            "e.g. models/whisper-tiny.en (scripts/setup.sh fetches it). Audio longer than 30 s is decoded\n"
            "in successive 30 s windows. AUDIO '-' reads standard input.\n"
            "Output: one line per file, \"FILE: TEXT\"; with --timestamps, one line per segment,\n"
            "\"FILE [START --> END] TEXT\" (seconds).\n"
            "\n"
            "Options:\n"
            "  --model DIR     model directory (model.bin, vocabulary.txt, config.json)\n"
            "  --timestamps    segments with start and end times\n"
            "  --beam N        beam size 1..64 (default 5, as faster-whisper; 1 = greedy)\n"
            "  --threads N     worker threads (default: all cores)\n"
            "  -h, --help      this help\n"
            "  --              end of options: AUDIO files whose names start with '-' follow\n");
}

int cmd_transcribe(int argc, char **argv) {
    const char *model = NULL;
    const char *files[256];
    int n_files = 0, ts = 0;
    int64_t beam = 5, threads = 0;
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
        } else if (cli_positional(&a, &val)) { /* after "--", a file name may start with '-' */
            if (n_files == 256) return cli_usage_error("transcribe", "at most 256 audio files");
            files[n_files++] = val;
        } else {
            return cli_unknown(&a);
        }
    }
    if (!model || !*model) return cli_usage_error("transcribe", "--model DIR is required");
    if (n_files == 0) return cli_usage_error("transcribe", "no AUDIO file given");
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
    attn_whisper_opts o = {beam, ts};
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
