/* attn side of bench/seq2seq: aren-transliteration words/s (batch 32, greedy and beam 4) and
 * Whisper tiny.en seconds per file (audio decode excluded; features, encoder and beam-5
 * decoding included), best of R runs, on T threads.
 * Usage: bench_seq2seq THREADS REPEATS WORDS_FILE WAV... */
#include "attn_audio.h"
#include "attn_ct2_transformer.h"
#include "attn_whisper.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int threads = atoi(argv[1]), reps = atoi(argv[2]);
    attn_set_num_threads(threads);
    FILE *f = fopen(argv[3], "r");
    if (!f) return 1;
    char **words = NULL, line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        words = realloc(words, sizeof(char *) * (n + 1));
        words[n++] = strdup(line);
    }
    fclose(f);
    attn_translation *out = calloc(32, sizeof *out);
    const char *models[2] = {"../shared/models/aren-transliteration", "../shared/models/aren-transliteration-int8"};
    for (int mi = 0; mi < 2; mi++) {
    attn_translator *m = NULL;
    if (attn_translator_load(&m, models[mi]) < 0) {
        fprintf(stderr, "%s\n", attn_last_error());
        return 1;
    }
    for (int beam = 1; beam <= 4; beam += 3) {
        attn_translate_opts o = attn_translate_opts_default();
        o.decode.beam_size = beam;
        o.decode.min_length = 1;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            for (int i = 0; i < n; i += 32) {
                int b = n - i < 32 ? n - i : 32;
                if (attn_translate(m, out, (const char *const *)words + i, b, &o) < 0) return 1;
                attn_translations_free(out, b);
            }
            double dt = now() - t0;
            if (dt < best) best = dt;
        }
        printf("aren %s beam%d %.1f\n", mi ? "int8" : "f32", beam, n / best);
    }
    attn_translator_free(m);
    }
    attn_whisper *w = NULL;
    if (attn_whisper_load(&w, "models/whisper-tiny.en") < 0) {
        fprintf(stderr, "%s\n", attn_last_error());
        return 1;
    }
    for (int k = 4; k < argc; k++) {
        float *x;
        int64_t ns;
        if (attn_audio_load(&x, &ns, argv[k], 16000) < 0) return 1;
        /* as the peer (ct2_bench.py): faster-whisper's rules with temperature 0.0 only */
        static const float t0 = 0.0f;
        attn_whisper_opts o = attn_whisper_opts_default();
        o.temperatures = &t0;
        o.n_temperatures = 1;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            attn_whisper_result res;
            double t0 = now();
            if (attn_whisper_transcribe(w, &res, x, ns, &o) < 0) return 1;
            double dt = now() - t0;
            if (dt < best) best = dt;
            attn_whisper_result_free(&res);
        }
        printf("whisper %s %.3f %.3f\n", argv[k], ns / 16000.0, best);
        free(x);
    }
    attn_whisper_free(w);
    return 0;
}
