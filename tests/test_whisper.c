/* Whisper tiny.en (models/whisper-tiny.en, fetched by scripts/setup.sh) against CTranslate2
 * 4.8.5 / faster-whisper (tests/fixtures/whisper, written by scripts/gen_whisper_fixtures.py):
 *  - log-mel features of 1 s of Front_Center within 1e-4 of faster-whisper's FeatureExtractor
 *    (float32 FFT magnitudes, float64 filters: observed ~1e-6);
 *  - generated token ids identical to CTranslate2's Whisper.generate on the same features for
 *    the nine alsa-utils WAVs and three espeak-ng sentences (greedy), beam 5 and beam 5 with
 *    timestamps on two of them (scripts/gen_whisper_fixtures.py records all three modes for all
 *    twelve; the suite checks a subset to stay fast);
 *  - the text of those tokens equal to the tokenizer.json decode;
 *  - the CLI end to end (libsndfile + libsamplerate instead of PyAV's resampler) on two files,
 *    timestamps, and bad input (not audio, empty audio, --beam 0, missing model). */
#include "attn_audio.h"
#include "attn_npy.h"
#include "attn_whisper.h"
#include "testutil.h"

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MODEL "models/whisper-tiny.en"

static void test_mel(void) {
    attn_tensor in, ref;
    memset(&in, 0, sizeof in);
    memset(&ref, 0, sizeof ref);
    CHECK_OK(attn_npy_load(&in, attn_test_fixture("whisper/mel_in.npy")));
    CHECK_OK(attn_npy_load(&ref, attn_test_fixture("whisper/mel_ref.npy")));
    if (in.data && ref.data) {
        float *mel = NULL;
        int64_t frames = 0;
        CHECK_OK(attn_whisper_log_mel(&mel, &frames, (const float *)in.data, in.shape[0]));
        CHECK(ref.ndim == 2 && ref.shape[0] == 80 && frames == ref.shape[1], "mel frames %lld, reference [%lld, %lld]", (long long)frames,
              (long long)ref.shape[0], (long long)ref.shape[1]);
        if (mel && frames == ref.shape[1]) {
            double md = attn_test_max_abs_diff(mel, (const float *)ref.data, (size_t)(80 * frames));
            CHECK(md <= 1e-4, "log-mel max |attn - faster-whisper| = %.3g (tol 1e-4)", md);
            printf("  log-mel [80, %lld]: max diff %.2g\n", (long long)frames, md);
        }
        free(mel);
    }
    attn_npy_free(&in);
    attn_npy_free(&ref);
    float *mel = NULL;
    int64_t frames = 0;
    CHECK_ERR(attn_whisper_log_mel(&mel, &frames, NULL, 5), ATTN_E_INVALID);
    /* samples so large that the float32 power spectrum overflows: an error, not the features of
     * silence (inf - inf would reach log10(max(x, 1e-10)) as NaN and come out as 1e-10) */
    float loud[4000];
    for (int i = 0; i < 4000; i++) loud[i] = (i & 1 ? -1e19f : 1e19f) * (float)(1 + i % 7);
    CHECK_ERR(attn_whisper_log_mel(&mel, &frames, loud, 4000), ATTN_E_RANGE);
    CHECK(strstr(attn_last_error(), "too large") != NULL, "loud samples: %s", attn_last_error());
    CHECK(mel == NULL && frames == 0, "loud samples: no output");
    for (int i = 0; i < 4000; i++) loud[i] *= 1e-9f; /* 1e10: large but finite spectra */
    CHECK_OK(attn_whisper_log_mel(&mel, &frames, loud, 4000));
    free(mel);
}

/* tokens.txt line for (name, mode) */
static int ref_tokens_in(const char *file, const char *name, const char *mode, int32_t *ids, int64_t cap) {
    FILE *f = fopen(attn_test_fixture(file), "r");
    if (!f) return -1;
    char line[8192];
    int n = -1;
    while (fgets(line, sizeof line, f)) {
        char nm[64], md[32];
        int off = 0;
        if (sscanf(line, "%63s %31s%n", nm, md, &off) != 2) continue;
        if (strcmp(nm, name) || strcmp(md, mode)) continue;
        n = 0;
        char *p = line + off, *e;
        for (long v = strtol(p, &e, 10); e != p && n < cap; v = strtol(p, &e, 10)) {
            ids[n++] = (int32_t)v;
            p = e;
        }
        break;
    }
    fclose(f);
    return n;
}

static int ref_tokens(const char *name, const char *mode, int32_t *ids, int64_t cap) {
    return ref_tokens_in("whisper/tokens.txt", name, mode, ids, cap);
}

/* OpenAI's timestamp rule that a timestamp after text must be later than the last one (only
 * the timestamp closing a segment may equal the one opening it): on 10 s of low-level noise
 * the model keeps proposing the last timestamp again; CTranslate2 4.8.5's ids
 * (scripts/gen_whisper_ts_rule.py, which makes the same noise from the same generator) */
static void test_timestamp_rule(attn_whisper *m) {
    const int64_t n = 160000;
    float *x = (float *)malloc(sizeof(float) * (size_t)n), *mel = NULL, *win = (float *)calloc(80 * 3000, sizeof(float));
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)((int)((s >> 11) % 197) - 98) / 32768.0f;
    }
    int64_t T = 0;
    CHECK_OK(attn_whisper_log_mel(&mel, &T, x, n));
    if (mel) {
        const int64_t used = T - 1 < 3000 ? T - 1 : 3000; /* the last frame dropped, as transcribe() */
        for (int64_t c = 0; c < 80; c++) memcpy(win + c * 3000, mel + c * T, sizeof(float) * (size_t)used);
        const char *modes[2] = {"greedy_ts", "beam5_ts"};
#if defined(__SANITIZE_ADDRESS__)
        const int n_modes = 1; /* a 30 s window costs seconds under the sanitizers */
#else
        const int n_modes = 2;
#endif
        for (int k = 0; k < n_modes; k++) {
            attn_whisper_opts o = attn_whisper_opts_default();
            o.beam_size = k == 0 ? 1 : 5;
            o.timestamps = 1;
            int32_t want[512], *got = NULL;
            int nw = ref_tokens_in("whisper/noise_ts.txt", "noise", modes[k], want, 512);
            int64_t ng = 0;
            CHECK_OK(attn_whisper_generate(m, &got, &ng, NULL, win, &o));
            int64_t first = 0;
            while (first < ng && first < nw && got[first] == want[first]) first++;
            CHECK(nw > 0 && ng == nw && first == ng, "noise %s: token ids identical to CTranslate2 (%lld vs %d tokens, first difference at %lld)",
                  modes[k], (long long)ng, nw, (long long)first);
            free(got);
        }
    }
    free(mel);
    free(win);
    free(x);
}

/* the model keeps the last window's decoding state (buffers, arena block) for the next one: a
 * window decoded again after another one (the state reused, at beam 5 and greedy, a capacity
 * change in between) gives the same tokens and the same score, bit for bit */
static void test_state_reuse(attn_whisper *m) {
    const char *files[2] = {"whisper/espeak_3.mel.npy", "whisper/Front_Center.mel.npy"};
    float *win[2];
    for (int f = 0; f < 2; f++) {
        win[f] = (float *)calloc(80 * 3000, sizeof(float));
        attn_tensor t;
        memset(&t, 0, sizeof t);
        if (attn_npy_load(&t, attn_test_fixture(files[f])) < 0) {
            CHECK(0, "%s: %s", files[f], attn_last_error());
            free(win[0]);
            if (f) free(win[1]);
            return;
        }
        const int64_t T = t.shape[1] < 3000 ? t.shape[1] : 3000;
        for (int64_t c = 0; c < 80; c++)
            for (int64_t k = 0; k < T; k++) win[f][c * 3000 + k] = ((float *)t.data)[c * t.shape[1] + k];
        attn_npy_free(&t);
    }
    const int beams[5] = {5, 5, 1, 5, 1}, wins[5] = {0, 1, 0, 0, 0};
    int32_t *ids[5] = {NULL};
    int64_t n[5] = {0};
    float sc[5] = {0};
    for (int i = 0; i < 5; i++) {
        attn_whisper_opts o = attn_whisper_opts_default();
        o.beam_size = beams[i];
        CHECK_OK(attn_whisper_generate(m, &ids[i], &n[i], &sc[i], win[wins[i]], &o));
    }
    CHECK(n[0] > 0 && n[3] == n[0] && memcmp(ids[3], ids[0], sizeof(int32_t) * (size_t)n[0]) == 0 && memcmp(&sc[3], &sc[0], sizeof(float)) == 0,
          "espeak_3 beam 5 again after Front_Center and a greedy decoding: same %lld tokens, same score bits (%.9g vs %.9g)", (long long)n[0],
          (double)sc[3], (double)sc[0]);
    CHECK(n[2] > 0 && n[4] == n[2] && memcmp(ids[4], ids[2], sizeof(int32_t) * (size_t)n[2]) == 0 && memcmp(&sc[4], &sc[2], sizeof(float)) == 0,
          "espeak_3 greedy again on the reused state: same %lld tokens, same score bits", (long long)n[2]);
    for (int i = 0; i < 5; i++) free(ids[i]);
    free(win[0]);
    free(win[1]);
}

static void test_tokens(attn_whisper *m) {
    static const char *names[] = {"Front_Center", "Front_Left", "Front_Right", "Noise", "Rear_Center", "Rear_Left",
                                  "Rear_Right", "Side_Left", "Side_Right", "espeak_1", "espeak_2", "espeak_3"};
    float *win = (float *)malloc(sizeof(float) * 80 * 3000);
    int same = 0, total = 0;
#if defined(__SANITIZE_ADDRESS__)
    /* under AddressSanitizer (CI's second pass) a 30 s encoder costs ~8 s: check memory safety on
     * three files; the plain `make test` pass checks all twelve */
    const size_t n_names = 3;
#else
    const size_t n_names = sizeof names / sizeof names[0];
#endif
    for (size_t i = 0; i < n_names; i++) {
        char p[128];
        snprintf(p, sizeof p, "whisper/%s.mel.npy", names[i]);
        attn_tensor t;
        memset(&t, 0, sizeof t);
        if (attn_npy_load(&t, attn_test_fixture(p)) < 0) {
            CHECK(0, "%s: %s", p, attn_last_error());
            continue;
        }
        int64_t T = t.shape[1] < 3000 ? t.shape[1] : 3000;
        for (int64_t c = 0; c < 80; c++)
            for (int64_t k = 0; k < 3000; k++) win[c * 3000 + k] = k < T ? ((float *)t.data)[c * t.shape[1] + k] : 0.0f;
        attn_npy_free(&t);
        const char *modes[3] = {"greedy", "beam5", "beam5_ts"};
        int n_modes = (i == 1 || i == 11) ? 3 : 1; /* Front_Left (beam differs from greedy), espeak_3 */
#if defined(__SANITIZE_ADDRESS__)
        if (i == 1) n_modes = 2;
#endif
        for (int k = 0; k < n_modes; k++) {
            attn_whisper_opts o = attn_whisper_opts_default();
            o.beam_size = k == 0 ? 1 : 5;
            o.timestamps = k == 2;
            int32_t want[512], *got = NULL;
            int nw = ref_tokens(names[i], modes[k], want, 512);
            int64_t ng = 0;
            CHECK_OK(attn_whisper_generate(m, &got, &ng, NULL, win, &o));
            int eq = nw >= 0 && ng == nw && (ng == 0 || memcmp(got, want, sizeof(int32_t) * (size_t)ng) == 0);
            CHECK(eq, "%s %s: token ids identical to CTranslate2 (%lld vs %d tokens)", names[i], modes[k], (long long)ng, nw);
            same += eq;
            total++;
            if (k == 1) {
                /* text of the beam-5 tokens */
                FILE *f = fopen(attn_test_fixture("whisper/text.txt"), "r");
                char line[1024], want_text[1024] = "";
                while (f && fgets(line, sizeof line, f)) {
                    char *tab = strchr(line, '\t');
                    if (tab && (size_t)(tab - line) == strlen(names[i]) && strncmp(line, names[i], (size_t)(tab - line)) == 0) {
                        snprintf(want_text, sizeof want_text, "%s", tab + 1);
                        want_text[strcspn(want_text, "\n")] = 0;
                    }
                }
                if (f) fclose(f);
                char *text = attn_whisper_text(m, got, ng);
                const char *tt = text ? text : "";
                while (*tt == ' ') tt++;
                CHECK(strcmp(tt, want_text) == 0, "%s: text '%s', want '%s'", names[i], tt, want_text);
                free(text);
            }
            free(got);
        }
    }
    printf("  token ids identical to CTranslate2 in %d/%d (file, mode) cases\n", same, total);
    free(win);
    attn_whisper_opts bad = attn_whisper_opts_default();
    bad.beam_size = 0;
    int32_t *ids = NULL;
    int64_t n = 0;
    float z[80 * 3000] = {0};
    CHECK_ERR(attn_whisper_generate(m, &ids, &n, NULL, z, &bad), ATTN_E_INVALID);
    attn_whisper_result r;
    attn_whisper_opts o = attn_whisper_opts_default();
    o.beam_size = 1;
    CHECK_ERR(attn_whisper_transcribe(m, &r, NULL, 0, &o), ATTN_E_INVALID);
    /* segment times as faster-whisper 1.2.1 (beam 5, word_timestamps off) gives them for the
     * 1.428 s Front_Center.wav: 0.0 -> 1.42 without timestamps (the window, clipped to the
     * audio), 0.0 -> 2.0 with them (the <|2.00|> token; faster-whisper does not clamp it) */
    float *fc = NULL;
    int64_t n_fc = 0;
    CHECK_OK(attn_audio_load(&fc, &n_fc, "/usr/share/sounds/alsa/Front_Center.wav", ATTN_WHISPER_RATE));
    for (int t = 0; t < 2 && fc; t++) {
        attn_whisper_opts ot = attn_whisper_opts_default();
        ot.timestamps = t;
        int r2 = attn_whisper_transcribe(m, &r, fc, n_fc, &ot);
        CHECK(r2 == 0 && r.n_segments == 1, "Front_Center timestamps=%d: %d segments (%s)", t, r2 == 0 ? (int)r.n_segments : -1, attn_last_error());
        if (r2 == 0 && r.n_segments == 1)
            CHECK(fabs(r.segments[0].start) < 1e-9 && fabs(r.segments[0].end - (t ? 2.0 : 1.42)) < 1e-9,
                  "Front_Center timestamps=%d: %.4f -> %.4f (faster-whisper: 0 -> %.2f)", t, r.segments[0].start, r.segments[0].end, t ? 2.0 : 1.42);
        if (r2 == 0) attn_whisper_result_free(&r);
    }
    free(fc);
    /* non-finite samples: an error, not the "." of silence (log10(max(NaN, 1e-10)) is finite) */
    static float nan_audio[16000];
    for (int i = 0; i < 16000; i++) nan_audio[i] = i == 8000 ? INFINITY : NAN;
    CHECK_ERR(attn_whisper_transcribe(m, &r, nan_audio, 16000, &o), ATTN_E_INVALID);
    CHECK(strstr(attn_last_error(), "non-finite"), "NaN audio message: %s", attn_last_error());
    for (int i = 0; i < 16000; i++) nan_audio[i] = i == 8000 ? -INFINITY : 0.0f;
    float *mel = NULL;
    int64_t nf = 0;
    CHECK_ERR(attn_whisper_log_mel(&mel, &nf, nan_audio, 16000), ATTN_E_INVALID);
    CHECK(mel == NULL && strstr(attn_last_error(), "8000"), "-inf sample at 8000: %s", attn_last_error());
}

/* nospeech.txt (scripts/gen_whisper_nospeech.py): "NAME PROMPT no_speech score n avg" */
static int ref_nospeech(const char *name, const char *prompt, double *ns, double *score, int *n, double *avg) {
    FILE *f = fopen(attn_test_fixture("whisper/nospeech.txt"), "r");
    if (!f) return -1;
    char line[512], nm[64], pr[16];
    int found = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%63s %15s %lf %lf %d %lf", nm, pr, ns, score, n, avg) == 6 && !strcmp(nm, name) && !strcmp(pr, prompt)) {
            found = 0;
            break;
        }
    fclose(f);
    return found;
}

/* "fw NAME MODE n_segments": faster-whisper's segment count with its defaults */
static int ref_fw_segments(const char *name, const char *mode) {
    FILE *f = fopen(attn_test_fixture("whisper/nospeech.txt"), "r");
    if (!f) return -1;
    char line[512], nm[64], md[16];
    int k, found = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "fw %63s %15s %d", nm, md, &k) == 3 && !strcmp(nm, name) && !strcmp(md, mode)) {
            found = k;
            break;
        }
    fclose(f);
    return found;
}

/* the features of a fixture: NAME.mel.npy (faster-whisper's) or, for a .wav, attn's own */
static int load_window(float *win, const char *name) {
    char p[128];
    float *mel = NULL;
    int64_t frames = 0, T = 0, stride = 0;
    attn_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(p, sizeof p, "whisper/%s.mel.npy", name);
    if (access(attn_test_fixture(p), R_OK) == 0) {
        if (attn_npy_load(&t, attn_test_fixture(p)) < 0) return -1;
        mel = (float *)t.data;
        stride = t.shape[1];
        T = stride;
    } else {
        float *x = NULL;
        int64_t n = 0;
        snprintf(p, sizeof p, "whisper/%s.wav", name);
        if (attn_audio_load(&x, &n, attn_test_fixture(p), ATTN_WHISPER_RATE) < 0) return -1;
        int rc = attn_whisper_log_mel(&mel, &frames, x, n);
        free(x);
        if (rc < 0) return -1;
        stride = frames;
        T = frames - 1; /* the last frame dropped, as faster-whisper's transcribe does */
    }
    for (int64_t c = 0; c < 80; c++)
        for (int64_t k = 0; k < 3000; k++) win[c * 3000 + k] = k < T && k < 3000 ? mel[c * stride + k] : 0.0f;
    if (t.data) attn_npy_free(&t);
    else free(mel);
    return 0;
}

/* faster-whisper's transcription rules (attn_whisper_decode / transcribe) */
static void test_rules(attn_whisper *m) {
    CHECK(attn_whisper_get_config(m)->no_speech == 50361, "tiny.en no-speech id %d (<|nocaptions|>, 50361)", attn_whisper_get_config(m)->no_speech);
    float *win = (float *)malloc(sizeof(float) * 80 * 3000);
    if (!win) return;
    /* 1. no-speech probability, score and avg_logprob of the temperature-0 beam-5 decoding
     * against CTranslate2 4.8.5 (return_no_speech_prob, return_scores) and faster-whisper's
     * avg_logprob formula. Tolerance 2e-4 on probabilities and log-probabilities with
     * faster-whisper's features (float32 sums in another order; measured max 6.4e-5), 5e-4 with
     * attn's own features of the two WAVs (features within 1e-4 of faster-whisper's). */
    static const char *names[] = {"Front_Center", "Noise", "espeak_3", "silence_1s", "noise_1s"};
    double worst = 0, worst_wav = 0;
#if defined(__SANITIZE_ADDRESS__)
    const size_t first = 1, n_names = 2; /* Noise only: ~8 s per 30 s encoder under ASan */
#else
    const size_t first = 0, n_names = sizeof names / sizeof names[0];
#endif
    for (size_t i = first; i < n_names; i++) {
        const size_t ni = i;
        if (load_window(win, names[ni]) < 0) {
            CHECK(0, "%s: features: %s", names[ni], attn_last_error());
            continue;
        }
        const double tol = ni >= 3 ? 5e-4 : 2e-4;
        for (int ts = 0; ts < 2; ts++) {
            double ns, sc, avg;
            int n;
            if (ref_nospeech(names[ni], ts ? "ts" : "nots", &ns, &sc, &n, &avg) < 0) {
                CHECK(0, "nospeech.txt lacks %s", names[ni]);
                continue;
            }
            attn_whisper_opts o = attn_whisper_opts_default();
            static const float t0 = 0.0f;
            o.temperatures = &t0;
            o.n_temperatures = 1;
            o.timestamps = ts;
            attn_whisper_decoding d;
            CHECK_OK(attn_whisper_decode(m, &d, win, &o));
            double e = fabs(d.no_speech_prob - ns);
            if (fabs(d.score - sc) > e) e = fabs(d.score - sc);
            if (fabs(d.avg_logprob - avg) > e) e = fabs(d.avg_logprob - avg);
            if (tol < 3e-4 && e > worst) worst = e;
            if (tol > 3e-4 && e > worst_wav) worst_wav = e;
            CHECK(d.n == n && e <= tol, "%s ts=%d: no_speech %.6f score %.6f avg %.6f n %lld; CTranslate2 %.6f %.6f %.6f n %d (tol %.0e)", names[ni], ts,
                  d.no_speech_prob, d.score, d.avg_logprob, (long long)d.n, ns, sc, avg, n, tol);
            /* the no-speech rule of faster-whisper, from the reference values */
            int want_skip = ns > 0.6 && !(avg > -1.0);
            CHECK(d.no_speech == want_skip, "%s ts=%d: no_speech flag %d, faster-whisper's rule gives %d", names[ni], ts, d.no_speech, want_skip);
            attn_whisper_decoding_free(&d);
        }
    }
    printf("  no-speech probability / score / avg_logprob vs CTranslate2: max |diff| %.2g (tol 2e-4), with attn's features %.2g (tol 5e-4)\n", worst,
           worst_wav);
    /* 2. silence: digital zeros and -60 dBFS noise give no segment and an empty text, as
     * faster-whisper gives none (its counts are in nospeech.txt); without the rules the same
     * audio gives the model's hallucination (so the test can fail) */
    static const char *quiet[] = {"silence_1s", "noise_1s"};
#if defined(__SANITIZE_ADDRESS__)
    const int n_quiet = 1, n_ts = 1; /* ~8 s per 30 s encoder under ASan */
#else
    const int n_quiet = 2, n_ts = 2;
#endif
    for (int q = 0; q < n_quiet; q++) {
        char p[128];
        snprintf(p, sizeof p, "whisper/%s.wav", quiet[q]);
        float *x = NULL;
        int64_t n = 0;
        CHECK_OK(attn_audio_load(&x, &n, attn_test_fixture(p), ATTN_WHISPER_RATE));
        if (!x) continue;
        for (int ts = 0; ts < n_ts; ts++) {
            attn_whisper_opts o = attn_whisper_opts_default();
            o.timestamps = ts;
            attn_whisper_result r;
            int want = ref_fw_segments(quiet[q], ts ? "ts" : "nots");
            CHECK_OK(attn_whisper_transcribe(m, &r, x, n, &o));
            CHECK(want == 0 && r.n_segments == 0 && r.n_ids == 0 && r.text && r.text[0] == 0, "%s ts=%d: %lld segments, text '%s' (faster-whisper: %d)",
                  quiet[q], ts, (long long)r.n_segments, r.text ? r.text : "(null)", want);
            attn_whisper_result_free(&r);
#if defined(__SANITIZE_ADDRESS__)
            continue;
#endif
            if (q || ts) continue;
            o.n_temperatures = 0; /* rules off */
            CHECK_OK(attn_whisper_transcribe(m, &r, x, n, &o));
            CHECK(r.n_ids > 0 && r.n_segments == 1, "%s ts=%d without the rules: %lld ids (the hallucination expected)", quiet[q], ts, (long long)r.n_ids);
            attn_whisper_result_free(&r);
        }
        free(x);
    }
    /* 3. temperature 0 with the rules keeps the beam search's ids (espeak_3: fixture ids) */
    int32_t want[512];
    int nw = ref_tokens("espeak_3", "beam5", want, 512);
    if (load_window(win, "espeak_3") == 0) {
        attn_whisper_opts o = attn_whisper_opts_default();
        attn_whisper_decoding d;
        CHECK_OK(attn_whisper_decode(m, &d, win, &o));
        CHECK(d.n == nw && d.temperature == 0.0f && !d.no_speech && memcmp(d.ids, want, sizeof(int32_t) * (size_t)nw) == 0,
              "espeak_3 with the rules: temperature %g, %lld ids (fixture %d)", d.temperature, (long long)d.n, nw);
        /* compression ratio of "Please call Stella ... store." (77 bytes): Python's
         * len(t) / len(zlib.compress(t)) = 77 / 73 (zlib 1.3, level -1) */
        CHECK(fabs(d.compression_ratio - 77.0 / 73.0) < 1e-6, "compression ratio %.6f, zlib.compress gives 77/73 = 1.0548", d.compression_ratio);
        attn_whisper_decoding_free(&d);
        /* 4. sampling: at temperature 0.001 a sample is the argmax, so best_of 1 gives the greedy
         * ids and the greedy score (log-probabilities at temperature 1) */
#if !defined(__SANITIZE_ADDRESS__)
        int32_t wg[512];
        int ng = ref_tokens("espeak_3", "greedy", wg, 512);
        static const float tiny_t = 0.001f;
        o.temperatures = &tiny_t;
        o.n_temperatures = 1;
        o.best_of = 1;
        CHECK_OK(attn_whisper_decode(m, &d, win, &o));
        int32_t *gi = NULL;
        int64_t gn = 0;
        float gs = 0;
        attn_whisper_opts og = attn_whisper_opts_default();
        og.beam_size = 1;
        CHECK_OK(attn_whisper_generate(m, &gi, &gn, &gs, win, &og));
        CHECK(d.n == ng && memcmp(d.ids, wg, sizeof(int32_t) * (size_t)ng) == 0 && fabs(d.score - gs) < 1e-5,
              "sampling at t=0.001: %lld ids (greedy fixture %d), score %.6f vs greedy %.6f", (long long)d.n, ng, d.score, gs);
        free(gi);
        attn_whisper_decoding_free(&d);
#endif
        /* 5. every temperature fails (log_prob_threshold 0 > any avg_logprob): all six are tried,
         * the best avg_logprob under the compression threshold is kept, the last temperature is
         * reported (as faster-whisper does); the same seed gives the same ids */
        o = attn_whisper_opts_default();
        o.log_prob_threshold = 0.0f;
        o.no_speech_threshold = 1.0f;
        attn_whisper_decoding d2;
        CHECK_OK(attn_whisper_decode(m, &d, win, &o));
#if defined(__SANITIZE_ADDRESS__)
        d2 = d; /* one run under ASan (the sampling path's memory checked; ~1 min) */
        d2.ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(d.n > 0 ? d.n : 1));
        if (d2.ids && d.n) memcpy(d2.ids, d.ids, sizeof(int32_t) * (size_t)d.n);
#else
        CHECK_OK(attn_whisper_decode(m, &d2, win, &o));
#endif
        CHECK(d.temperature == 1.0f && d.n > 0 && d.n == d2.n && memcmp(d.ids, d2.ids, sizeof(int32_t) * (size_t)d.n) == 0 &&
                  d.compression_ratio <= 2.4f && d.avg_logprob >= -0.3f,
              "all temperatures failing: temperature %g, avg %.4f, cr %.3f, %lld ids, same seed same ids", d.temperature, d.avg_logprob,
              d.compression_ratio, (long long)d.n);
        attn_whisper_decoding_free(&d);
        attn_whisper_decoding_free(&d2);
    }
    /* 6. bad options */
    {
        attn_whisper_decoding d;
        attn_whisper_opts o = attn_whisper_opts_default();
        o.no_speech_threshold = 1.5f;
        CHECK_ERR(attn_whisper_decode(m, &d, win, &o), ATTN_E_INVALID);
        o = attn_whisper_opts_default();
        o.log_prob_threshold = NAN;
        CHECK_ERR(attn_whisper_decode(m, &d, win, &o), ATTN_E_INVALID);
        o = attn_whisper_opts_default();
        o.compression_ratio_threshold = 0.0f;
        CHECK_ERR(attn_whisper_decode(m, &d, win, &o), ATTN_E_INVALID);
        o = attn_whisper_opts_default();
        o.best_of = 0;
        CHECK_ERR(attn_whisper_decode(m, &d, win, &o), ATTN_E_INVALID);
        static const float badt[2] = {0.0f, -0.5f};
        o = attn_whisper_opts_default();
        o.temperatures = badt;
        o.n_temperatures = 2;
        CHECK_ERR(attn_whisper_decode(m, &d, win, &o), ATTN_E_INVALID);
        o.n_temperatures = 33;
        CHECK_ERR(attn_whisper_decode(m, &d, win, &o), ATTN_E_INVALID);
        o = attn_whisper_opts_default();
        o.temperatures = NULL;
        CHECK_ERR(attn_whisper_decode(m, &d, win, &o), ATTN_E_INVALID);
        attn_whisper_result r;
        static float z[16000];
        o = attn_whisper_opts_default();
        o.no_speech_threshold = -0.1f;
        CHECK_ERR(attn_whisper_transcribe(m, &r, z, 16000, &o), ATTN_E_INVALID);
    }
    free(win);
}

static char tmpdir[256], out_text[8192], err_text[8192];
static int run_attn(const char *first, ...) {
    const char *args[32];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 31; a = va_arg(ap, const char *)) args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return attn_test_run(attn_test_cli_path(), tmpdir, out_text, sizeof out_text, err_text, sizeof err_text, args);
}

/* the 44-byte header of a WAV file: RIFF size `riff`, a 16-byte fmt chunk (format tag, channels,
 * rate, bits), then a data chunk announcing `data` bytes */
static void write_wav_header(FILE *f, uint16_t tag, uint16_t ch, uint32_t rate, uint16_t bits, uint32_t data, uint32_t riff) {
    const uint16_t ba = (uint16_t)(ch * ((bits + 7) / 8));
    const uint32_t fmt = 16, br = rate * ba;
    fwrite("RIFF", 1, 4, f);
    fwrite(&riff, 4, 1, f);
    fwrite("WAVEfmt ", 1, 8, f);
    fwrite(&fmt, 4, 1, f);
    fwrite(&tag, 2, 1, f);
    fwrite(&ch, 2, 1, f);
    fwrite(&rate, 4, 1, f);
    fwrite(&br, 4, 1, f);
    fwrite(&ba, 2, 1, f);
    fwrite(&bits, 2, 1, f);
    fwrite("data", 1, 4, f);
    fwrite(&data, 4, 1, f);
}

static void write_wav(const char *path, int rate, int n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    write_wav_header(f, 1, 1, (uint32_t)rate, 16, (uint32_t)n * 2, 36 + (uint32_t)n * 2);
    int16_t zero = 0;
    for (int i = 0; i < n; i++) fwrite(&zero, 2, 1, f);
    fclose(f);
}

/* a float32 WAV (format 3) of n NaN samples at 16 kHz */
static void write_wav_f32_nan(const char *path, int n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    write_wav_header(f, 3, 1, 16000, 32, (uint32_t)n * 4, 36 + (uint32_t)n * 4);
    float x = NAN;
    for (int i = 0; i < n; i++) fwrite(&x, 4, 1, f);
    fclose(f);
}

/* a PCM WAV whose fmt chunk says `ch` channels of `bits`-bit samples at 16 kHz and whose data chunk
 * announces `claim` bytes, followed by `n` bytes of xorshift noise (not WAV chunks) and, when
 * `list`, a well-formed 12-byte LIST chunk after them */
static void write_wav_claim(const char *path, int ch, int bits, uint32_t claim, int n, int list) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    const uint32_t four = 4;
    write_wav_header(f, 1, (uint16_t)ch, 16000, (uint16_t)bits, claim, 36 + (uint32_t)n + (list ? 12 : 0));
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        fputc((int)(x >> 24) & 0xff, f);
    }
    if (list) {
        fwrite("LIST", 1, 4, f);
        fwrite(&four, 4, 1, f);
        fwrite("INFO", 1, 4, f);
    }
    fclose(f);
}

/* `cat WAV | attn transcribe -` succeeds (a WAV read through a pipe) */
static void transcribe_piped(const char *wav, const char *what) {
    char cmd[2000], pe[600], e[4096] = "";
    snprintf(pe, sizeof pe, "%s/stdin_err.txt", tmpdir);
    snprintf(cmd, sizeof cmd, "cat '%s' | '%s' transcribe --model %s - >/dev/null 2>'%s'", wav, attn_test_cli_path(), MODEL, pe);
    const int st = system(cmd);
    attn_test_read_file(pe, e, sizeof e);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s through a pipe: %s", what, e);
}

static void test_cli(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_whisper_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        tmpdir[0] = 0; /* none made: nothing to use or remove */
        return;
    }
    int rc = run_attn("transcribe", "--model", MODEL, "/usr/share/sounds/alsa/Front_Center.wav", "tests/fixtures/whisper/espeak_3.wav",
                      (const char *)NULL);
    CHECK(rc == 0, "transcribe: exit %d (%s)", rc, err_text);
    CHECK(strcmp(out_text, "/usr/share/sounds/alsa/Front_Center.wav: front, center.\n"
                           "tests/fixtures/whisper/espeak_3.wav: Please call Stella and ask her to bring these things with her from the store.\n") == 0,
          "transcripts: %s", out_text);
    char p[512];
    snprintf(p, sizeof p, "%s/not_audio.wav", tmpdir);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("this is not audio\n", f);
        fclose(f);
    }
    rc = run_attn("transcribe", "--model", MODEL, p, (const char *)NULL);
    CHECK(rc == 1 && strstr(err_text, "cannot read as audio"), "not audio: exit %d: %s", rc, err_text);
    snprintf(p, sizeof p, "%s/empty.wav", tmpdir);
    write_wav(p, 16000, 0);
    rc = run_attn("transcribe", "--model", MODEL, p, (const char *)NULL);
    CHECK(rc == 1 && strstr(err_text, "empty"), "empty audio: exit %d: %s", rc, err_text);
    /* a truncated WAV (the header announces 3 s, the file holds 0.25 s): a clear error naming both durations,
     * as a file and through a pipe (new-user finding: an empty transcript without a word); the whole file loads */
    {
        char full[600], tr[600], cmd[2000];
        snprintf(full, sizeof full, "%s/full3s.wav", tmpdir);
        snprintf(tr, sizeof tr, "%s/trunc.wav", tmpdir);
        write_wav(full, 16000, 48000);
        write_wav(tr, 16000, 48000);
        CHECK(truncate(tr, 44 + 2 * 4000) == 0, "truncate");
        float *a = NULL;
        int64_t na = -1;
        CHECK(attn_audio_load(&a, &na, full, 16000) == 0 && na == 48000, "the whole 3 s file: %lld samples", (long long)na);
        free(a);
        a = NULL;
        const int lr = attn_audio_load(&a, &na, tr, 16000);
        CHECK(lr == ATTN_E_FORMAT && strstr(attn_last_error(), "truncated") && strstr(attn_last_error(), "3.00 s") &&
                  strstr(attn_last_error(), "0.25 s") && !a,
              "attn_audio_load of a truncated WAV: %d: %s", lr, attn_last_error());
        rc = run_attn("transcribe", "--model", MODEL, tr, (const char *)NULL);
        CHECK(rc == 1 && strstr(err_text, "truncated") && strstr(err_text, "3.00 s") && !out_text[0], "truncated WAV: exit %d: %s", rc,
              err_text);
        snprintf(cmd, sizeof cmd, "cat '%s' | '%s' transcribe --model %s - >/dev/null 2>'%s/pipe_err.txt'", tr, attn_test_cli_path(),
                 MODEL, tmpdir);
        const int st = system(cmd);
        char pe[600], e[2048] = "";
        snprintf(pe, sizeof pe, "%s/pipe_err.txt", tmpdir);
        attn_test_read_file(pe, e, sizeof e);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(e, "truncated") && strstr(e, "0.25 s"), "truncated WAV through a pipe: %s", e);
    }
    /* a WAV whose header does not match the file (new-user finding: 200 channels of 7-bit samples, a data
     * chunk of 10 bytes in a 137 kB file, transcribed to an empty line without a word): libsndfile reads
     * the 10 bytes (0 frames) and logs the rest as unknown chunks; now a clear error naming the sizes.
     * The same for 1 channel of 16 bits (5 frames) and for the 0 a streaming writer leaves. A few stray
     * bytes after the audio, and a LIST chunk after it, still load (the 16000 announced samples). */
    {
        static const struct {
            int ch, bits;
            uint32_t claim;
            int n;
            const char *what;
        } bad[] = {{200, 7, 10, 137000 - 44, "10 bytes of audio (0 frames of 200 channels"},
                   {1, 16, 10, 137000 - 44, "10 bytes of audio (5 frames of 1 channel"},
                   {1, 16, 0, 32000, "0 bytes of audio (0 frames of 1 channel"},
                   /* a header announcing 1 s of 1.6 (new-user finding: the junk was less than the announced
                    * audio, so the first second alone was transcribed, exit 0) */
                   {1, 16, 32000, 51200, "32000 bytes of audio (16000 frames of 1 channel"}};
        for (int k = 0; k < 4; k++) {
            snprintf(p, sizeof p, "%s/badhdr%d.wav", tmpdir, k);
            write_wav_claim(p, bad[k].ch, bad[k].bits, bad[k].claim, bad[k].n, 0);
            float *a = NULL;
            int64_t na = -1;
            char junk[64];
            snprintf(junk, sizeof junk, "the %lld bytes after it", (long long)bad[k].n - bad[k].claim);
            const int lr = attn_audio_load(&a, &na, p, 16000);
            CHECK(lr == ATTN_E_FORMAT && !a && na == 0 && strstr(attn_last_error(), "WAV header does not match the file") &&
                      strstr(attn_last_error(), bad[k].what) && strstr(attn_last_error(), junk) && strstr(attn_last_error(), "ignore_length"),
                  "attn_audio_load of a WAV header that does not match the file (%d): %d: %s", k, lr, attn_last_error());
            free(a);
            rc = run_attn("transcribe", "--model", MODEL, p, (const char *)NULL);
            CHECK(rc == 1 && strstr(err_text, "badhdr") && strstr(err_text, "WAV header does not match the file") && strstr(err_text, junk) &&
                      !out_text[0],
                  "transcribe of a WAV header that does not match the file (%d): exit %d: '%s' %s", k, rc, out_text, err_text);
            /* the same on standard input, redirected from the file (seekable) and through a pipe (new-user finding:
             * `transcribe - < bad.wav` printed an empty transcript with exit 0) */
            for (int via_pipe = 0; via_pipe < 2; via_pipe++) {
                char cmd[2000], pe[600], e[4096] = "";
                snprintf(pe, sizeof pe, "%s/stdin_err.txt", tmpdir);
                if (via_pipe)
                    snprintf(cmd, sizeof cmd, "cat '%s' | '%s' transcribe --model %s - >/dev/null 2>'%s'", p, attn_test_cli_path(), MODEL, pe);
                else
                    snprintf(cmd, sizeof cmd, "'%s' transcribe --model %s - < '%s' >/dev/null 2>'%s'", attn_test_cli_path(), MODEL, p, pe);
                const int st = system(cmd);
                attn_test_read_file(pe, e, sizeof e);
                CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(e, "WAV header does not match the") && strstr(e, "not WAV chunks"),
                      "a WAV header that does not match the input (%d) on standard input %s: %s", k, via_pipe ? "through a pipe" : "redirected", e);
            }
        }
        snprintf(p, sizeof p, "%s/stray.wav", tmpdir);
        write_wav_claim(p, 1, 16, 32000, 32000 + 101, 0); /* 1 s of noise, 101 stray bytes */
        float *a = NULL;
        int64_t na = -1;
        int lr = attn_audio_load(&a, &na, p, 16000);
        CHECK(lr == 0 && na == 16000, "1 s and 101 stray bytes: %d, %lld samples (%s)", lr, (long long)na, lr ? attn_last_error() : "");
        free(a);
        a = NULL;
        write_wav_claim(p, 1, 16, 32000, 32000, 1); /* 1 s of noise, then a LIST chunk */
        lr = attn_audio_load(&a, &na, p, 16000);
        CHECK(lr == 0 && na == 16000, "1 s and a LIST chunk: %d, %lld samples (%s)", lr, (long long)na, lr ? attn_last_error() : "");
        free(a);
        /* sox's "length unknown" data size (0x7FFFF000) over 1 s of audio: loads as a file and through a pipe
         * (new-user finding: `sox ... -t wav - | attn transcribe -` was refused as truncated) */
        write_wav_claim(p, 1, 16, 0x7FFFF000u, 32000, 0);
        lr = attn_audio_load(&a, &na, p, 16000);
        CHECK(lr == 0 && na == 16000, "sox's unknown-length size: %d, %lld samples (%s)", lr, (long long)na, lr ? attn_last_error() : "");
        free(a);
        a = NULL;
        transcribe_piped(p, "sox's unknown-length size");
        write_wav_claim(p, 1, 16, 32000, 32000, 1); /* 1 s of noise, then a LIST chunk */
        transcribe_piped(p, "1 s and a LIST chunk"); /* the rest after the data is read and walked as chunks */
    }
    rc = run_attn("transcribe", "--model", MODEL, tmpdir, (const char *)NULL);
    CHECK(rc == 1 && strstr(err_text, "is a directory"), "a directory: exit %d: %s", rc, err_text);
    {
        /* a model.bin (CTranslate2 v6, no variables) whose spec name holds raw bytes: the
         * message shows them escaped, never as invalid UTF-8 / control bytes */
        char d[300];
        snprintf(d, sizeof d, "%s/badspec", tmpdir);
        mkdir(d, 0755);
        snprintf(p, sizeof p, "%s/model.bin", d);
        static const unsigned char mb[] = {6, 0, 0, 0, 8, 0, 'W', 0xff, 0x01, 'h', '\\', 0x1b, 's', 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        FILE *mf = fopen(p, "wb");
        if (mf) {
            fwrite(mb, 1, sizeof mb, mf);
            fclose(mf);
        }
        rc = run_attn("transcribe", "--model", d, "/usr/share/sounds/alsa/Front_Center.wav", (const char *)NULL);
        int raw = 0;
        for (const char *c = err_text; *c; c++)
            if ((unsigned char)*c >= 0x7f || ((unsigned char)*c < 0x20 && *c != '\n')) raw = 1;
        CHECK(rc == 1 && !raw && strstr(err_text, "spec 'W\\xff\\x01h\\\\\\x1bs' is not WhisperSpec"), "bad spec name escaped: exit %d: %s", rc,
              err_text);
    }
    snprintf(p, sizeof p, "%s/nan.wav", tmpdir);
    write_wav_f32_nan(p, 16000);
    rc = run_attn("transcribe", "--model", MODEL, "--timestamps", p, (const char *)NULL);
    CHECK(rc == 1 && strstr(err_text, "nan.wav") && strstr(err_text, "non-finite") && out_text[0] == 0,
          "float32 WAV of NaN: exit %d: %s %s", rc, out_text, err_text);
    snprintf(p, sizeof p, "%s/silence.wav", tmpdir);
    write_wav(p, 8000, 8000);
    /* timestamps, and 1 s of digital silence (8 kHz) in the same run */
    rc = run_attn("transcribe", "--model", MODEL, "--timestamps", "/usr/share/sounds/alsa/Front_Center.wav", p, (const char *)NULL);
    CHECK(rc == 0 && strcmp(out_text, "/usr/share/sounds/alsa/Front_Center.wav [0.00 --> 2.00] front, center.\n") == 0,
          "timestamps (CTranslate2: <|0.00|> ... <|2.00|>) and silence (no segment line): exit %d: %s %s", rc, out_text, err_text);
    /* silence and -60 dBFS noise: an empty transcript (faster-whisper: no segment) */
    rc = run_attn("transcribe", "--model", MODEL, "tests/fixtures/whisper/silence_1s.wav", "tests/fixtures/whisper/noise_1s.wav", (const char *)NULL);
    CHECK(rc == 0 && strcmp(out_text, "tests/fixtures/whisper/silence_1s.wav: \ntests/fixtures/whisper/noise_1s.wav: \n") == 0,
          "silence: empty transcripts: exit %d: '%s' %s", rc, out_text, err_text);
#if !defined(__SANITIZE_ADDRESS__)
    rc = run_attn("transcribe", "--model", MODEL, "--no-rules", "--beam", "1", "tests/fixtures/whisper/silence_1s.wav", (const char *)NULL);
    CHECK(rc == 0 && strlen(out_text) > strlen("tests/fixtures/whisper/silence_1s.wav: \n"), "silence --no-rules: the hallucination: exit %d: '%s'", rc, out_text);
    rc = run_attn("transcribe", "--model", MODEL, "--no-speech-threshold", "none", "--log-prob-threshold", "-1.5", "--compression-ratio-threshold",
                  "none", "--temperatures", "0,0.5", "--best-of", "2", "--seed", "7", "/usr/share/sounds/alsa/Front_Center.wav", (const char *)NULL);
    CHECK(rc == 0 && strcmp(out_text, "/usr/share/sounds/alsa/Front_Center.wav: front, center.\n") == 0, "rule options: exit %d: '%s' %s", rc, out_text,
          err_text);
#endif
    rc = run_attn("transcribe", "--model", MODEL, "--beam", "0", p, (const char *)NULL);
    CHECK(rc == 2, "--beam 0: exit %d", rc);
    rc = run_attn("transcribe", "--model", "/nonexistent", "/usr/share/sounds/alsa/Front_Center.wav", (const char *)NULL);
    CHECK(rc == 1 && strstr(err_text, "model.bin"), "missing model: exit %d: %s", rc, err_text);
    rc = run_attn("transcribe", "--model", "../shared/models/aren-transliteration", "/usr/share/sounds/alsa/Front_Center.wav", (const char *)NULL);
    CHECK(rc == 1 && strstr(err_text, "WhisperSpec"), "not a Whisper model: exit %d: %s", rc, err_text);
}

/* ---------------------------------------------------------------- long and short audio */

/* the 34 s of scripts/gen_whisper_long.py: 15 files loaded by attn_audio_load, each followed by
 * 4800 zero samples (the generator loads them through the same function) */
static float *long_audio(int64_t *n) {
    static const char *files[15] = {"espeak_1", "espeak_2", "espeak_3", "Front_Center", "Front_Left", "Front_Right", "Noise", "Rear_Center",
                                    "Rear_Left", "Rear_Right", "Side_Left", "Side_Right", "espeak_1", "espeak_2", "espeak_3"};
    float *all = NULL;
    *n = 0;
    for (int i = 0; i < 15; i++) {
        char path[600];
        if (strncmp(files[i], "espeak", 6) == 0) snprintf(path, sizeof path, "%s", attn_test_fixture("whisper/"));
        else snprintf(path, sizeof path, "/usr/share/sounds/alsa/");
        strncat(path, files[i], sizeof path - strlen(path) - 5);
        strcat(path, ".wav");
        float *x = NULL;
        int64_t k = 0;
        if (attn_audio_load(&x, &k, path, ATTN_WHISPER_RATE) < 0) {
            CHECK(0, "%s: %s", path, attn_last_error());
            free(all);
            return NULL;
        }
        float *t = (float *)realloc(all, sizeof(float) * (size_t)(*n + k + 4800));
        if (!t) {
            free(x);
            free(all);
            return NULL;
        }
        all = t;
        memcpy(all + *n, x, sizeof(float) * (size_t)k);
        memset(all + *n + k, 0, sizeof(float) * 4800);
        *n += k + 4800;
        free(x);
    }
    return all;
}

/* issue 23 item 6: faster-whisper's condition_on_previous_text (the previous windows' tokens
 * as the <|startofprev|> prompt) and seek by the last timestamp. The second window's text
 * differs with and without the prompt ("call stellar and ask for" / "call settler and ask
 * her"), and with timestamps the second window starts at 29.76 s (the last timestamp pair of
 * the first), not at 30 s. Segment texts and the transcript's ids equal faster-whisper 1.2.1's
 * (tests/fixtures/whisper/long_prev.txt); times within 0.005 s (the fixture's 2 decimals). */
static void test_long_audio(attn_whisper *m) {
    int64_t n = 0;
    float *x = long_audio(&n);
    if (!x) return;
    CHECK(n == 544726, "long audio: %lld samples (the generator's 544726)", (long long)n);
    static char fix[1 << 16];
    attn_test_read_file(attn_test_fixture("whisper/long_prev.txt"), fix, sizeof fix);
    /* ts0_cond0 (in the fixture) is left out to save time; sanitizer builds run the two prompted modes only */
    const char *modes[4] = {"ts1_cond1", "ts0_cond1", "ts1_cond0", "ts0_cond0"};
#if defined(__SANITIZE_ADDRESS__)
    const int n_modes = 2;
#else
    const int n_modes = 3;
#endif
    for (int mi = 0; mi < n_modes; mi++) {
        attn_whisper_opts o = attn_whisper_opts_default();
        o.timestamps = modes[mi][2] == '1';
        o.condition_on_previous_text = modes[mi][8] == '1';
        attn_whisper_result r;
        int rc = attn_whisper_transcribe(m, &r, x, n, &o);
        CHECK(rc == 0, "%s: %s", modes[mi], attn_last_error());
        if (rc < 0) continue;
        int64_t seg = 0, pos = 0, ids_ok = 1;
        int segs_ok = 1;
        for (char *line = fix; *line;) {
            char *end = strchr(line, '\n');
            if (!end) break;
            *end = 0;
            if (strncmp(line, modes[mi], 9) == 0 && line[9] == '\t') {
                char *f[5] = {0};
                char *p = line;
                for (int k = 0; k < 5 && p; k++) {
                    f[k] = p;
                    p = strchr(p, '\t');
                    if (p) *p++ = 0;
                }
                if (seg < r.n_segments && f[4]) {
                    const attn_whisper_segment *g = &r.segments[seg];
                    int ok = fabs(g->start - atof(f[1])) <= 0.005 + 1e-9 && fabs(g->end - atof(f[2])) <= 0.005 + 1e-9 && strcmp(g->text, f[3]) == 0;
                    CHECK(ok, "%s segment %lld: %.3f -> %.3f '%s', faster-whisper %s -> %s '%s'", modes[mi], (long long)seg, g->start, g->end,
                          g->text, f[1], f[2], f[3]);
                    segs_ok &= ok;
                    for (char *q = f[4]; *q;) {
                        char *e2;
                        long id = strtol(q, &e2, 10);
                        if (e2 == q) break;
                        ids_ok &= pos < r.n_ids && r.ids[pos] == id;
                        pos++;
                        q = e2;
                    }
                    for (int k = 1; k < 5; k++) f[k][-1] = '\t';
                }
                seg++;
            }
            *end = '\n';
            line = end + 1;
        }
        CHECK(seg > 0 && seg == r.n_segments, "%s: %lld segments, faster-whisper %lld", modes[mi], (long long)r.n_segments, (long long)seg);
        CHECK(ids_ok && pos == r.n_ids, "%s: transcript ids equal faster-whisper's segment tokens (%lld / %lld)", modes[mi], (long long)r.n_ids,
              (long long)pos);
        (void)segs_ok;
        attn_whisper_result_free(&r);
    }
    free(x);
}

/* issue 23 item 7: audio shorter than one hop has no content frame: faster-whisper decodes
 * nothing (the 6 ms file gave six " ." segments from 0 to 28 s here). Empty audio stays an
 * error, unlike faster-whisper (attn_whisper.h says why). One hop (160 samples) is one frame
 * and one window. */
static void test_short_audio(attn_whisper *m) {
    static char fix[1 << 16];
    attn_test_read_file(attn_test_fixture("whisper/long_prev.txt"), fix, sizeof fix);
    float tone[200];
    for (int i = 0; i < 200; i++) tone[i] = (float)(0.5 * sin(2 * M_PI * 440 * (i / 16000.0)));
    const int lens[3] = {1, 96, 159};
    for (int k = 0; k < 3; k++) {
        char key[32];
        snprintf(key, sizeof key, "short\t%d\t", lens[k]);
        const char *f = strstr(fix, key);
        CHECK(f && (atoi(f + strlen(key)) == 0 || strncmp(f + strlen(key), "error", 5) == 0), "fixture: faster-whisper gives no segment for %d samples",
              lens[k]);
        attn_whisper_opts o = attn_whisper_opts_default();
        attn_whisper_result r;
        int rc = attn_whisper_transcribe(m, &r, tone, lens[k], &o);
        CHECK(rc == 0 && r.n_segments == 0 && r.n_ids == 0 && r.text && r.text[0] == 0, "%d samples: rc %d, %lld segments (faster-whisper: none)",
              lens[k], rc, rc == 0 ? (long long)r.n_segments : -1LL);
        if (rc == 0) attn_whisper_result_free(&r);
    }
    attn_whisper_result r;
    attn_whisper_opts o = attn_whisper_opts_default();
    CHECK_ERR(attn_whisper_transcribe(m, &r, tone, -1, &o), ATTN_E_INVALID);
    CHECK_ERR(attn_whisper_transcribe(m, &r, tone, 0, &o), ATTN_E_INVALID);
    CHECK(strstr(attn_last_error(), "empty") != NULL, "no samples: %s", attn_last_error());
}

/* issue 23 item 13: bytes that start like MPEG audio made mpg123 print "Note: Illegal
 * Audio-MPEG-Header ..." on stderr and libsndfile answer "... (possibly a pipe?)"; a 1 Hz WAV
 * gave libsamplerate's "SRC ratio outside [1/256, 256] range". Now one line each that says what
 * is wrong. */
/* attn_audio_load("-") reads standard input and leaves descriptor 0 open (libsndfile's own "-"
 * closed it, and transcribe under mpirun drains it afterwards): the same samples as the file */
static void test_audio_stdin(void) {
    const char *fc = "/usr/share/sounds/alsa/Front_Center.wav";
    float *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    int saved = dup(0), in = open(fc, O_RDONLY);
    if (saved < 0 || in < 0 || dup2(in, 0) < 0) {
        CHECK(0, "redirecting standard input from %s", fc);
        return;
    }
    close(in);
    int rc = attn_audio_load(&b, &nb, "-", ATTN_WHISPER_RATE);
    char c;
    const int open0 = fcntl(0, F_GETFD) != -1;
    const ssize_t rest = read(0, &c, 1);
    dup2(saved, 0);
    close(saved);
    CHECK_OK(attn_audio_load(&a, &na, fc, ATTN_WHISPER_RATE));
    CHECK(rc == 0 && a && b && na == nb && na > 20000 && !memcmp(a, b, sizeof(float) * (size_t)na),
          "'-' from %s: %lld samples, the file: %lld (%s)", fc, (long long)nb, (long long)na, rc ? attn_last_error() : "");
    CHECK(open0 && rest == 0, "after attn_audio_load(\"-\"): descriptor 0 %s, read gave %zd (the input's end expected)",
          open0 ? "open" : "closed", rest);
    free(a), free(b);
}

/* attn_audio_load("-") with standard input closed, a directory, or empty (/dev/null, an empty file,
 * a pipe closed without a byte): each says so (all three said "not a recognised audio file"); a
 * pipe whose bytes come late is still waited for and read */
static void test_audio_stdin_refusals(void) {
    const int saved = dup(0);
    if (saved < 0) {
        CHECK(0, "dup(0)");
        return;
    }
    char empty[] = "/tmp/attn_whisper_empty_XXXXXX";
    const int ef = mkstemp(empty);
    if (ef >= 0) close(ef);
    for (int k = 0; k < 5; k++) {
        int fd = -1, pp[2] = {-1, -1};
        if (k == 1) fd = open("/tmp", O_RDONLY | O_DIRECTORY);
        if (k == 2) fd = open("/dev/null", O_RDONLY);
        if (k == 3) fd = open(empty, O_RDONLY);
        if (k == 4 && pipe(pp) == 0) fd = pp[0], close(pp[1]);
        if (k == 0) close(0);
        else if (fd < 0 || dup2(fd, 0) < 0) {
            CHECK(0, "standard input case %d", k);
            continue;
        }
        if (fd >= 0) close(fd);
        float *a = NULL;
        int64_t na = -1;
        const int rc = attn_audio_load(&a, &na, "-", ATTN_WHISPER_RATE);
        dup2(saved, 0);
        static const char *const want[5] = {"standard input is closed", "standard input is a directory", "standard input is empty",
                                            "standard input is empty", "standard input is empty"};
        CHECK(rc == ATTN_E_IO && !a && strstr(attn_last_error(), want[k]) && !strstr(attn_last_error(), "not a recognised"),
              "attn_audio_load(\"-\") case %d: %d: %s (want '%s')", k, rc, attn_last_error(), want[k]);
        free(a);
    }
    float *a = NULL;
    int64_t na = -1;
    const int rc = attn_audio_load(&a, &na, empty, ATTN_WHISPER_RATE);
    CHECK(rc == ATTN_E_IO && strstr(attn_last_error(), "the file is empty"), "an empty file: %d: %s", rc, attn_last_error());
    free(a);
    unlink(empty);
    close(saved);
    /* through the CLI: a pipe closed without a byte, and one whose WAV comes after 0.3 s */
    char err[2048] = "", cmd[1200], pe[300];
    snprintf(pe, sizeof pe, "/tmp/attn_whisper_stdin_%d.txt", (int)getpid());
    snprintf(cmd, sizeof cmd, ": | '%s' transcribe --model %s - >/dev/null 2>'%s'", attn_test_cli_path(), MODEL, pe);
    int st = system(cmd);
    attn_test_read_file(pe, err, sizeof err);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(err, "-: standard input is empty"), "an empty pipe: %s", err);
    snprintf(cmd, sizeof cmd, "(sleep 0.3; cat /usr/share/sounds/alsa/Front_Center.wav) | '%s' transcribe --model %s - >'%s' 2>&1",
             attn_test_cli_path(), MODEL, pe);
    st = system(cmd);
    err[0] = 0;
    attn_test_read_file(pe, err, sizeof err);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strcmp(err, "-: front, center.\n") == 0, "a late pipe: %s", err);
    unlink(pe);
}

static void test_audio_messages(void) {
    test_audio_stdin();
    test_audio_stdin_refusals();
    /* standard input named twice: a usage error before any work (it said "-: cannot read as audio") */
    int rc2 = run_attn("transcribe", "--model", MODEL, "-", "-", (const char *)NULL);
    CHECK(rc2 == 2 && strstr(err_text, "standard input ('-') is named 2 times"), "'- -': exit %d: %s", rc2, err_text);
    if (!tmpdir[0]) return;
    char p[512];
    snprintf(p, sizeof p, "%s/mpeg_like.bin", tmpdir);
    FILE *f = fopen(p, "wb");
    if (f) {
        uint64_t x = 88172645463325252ULL;
        fputs("\xff\xfb\x90\x64", f);
        for (int i = 0; i < 20000; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            fputc((int)(x & 0xff), f);
        }
        fclose(f);
    }
    int rc = run_attn("transcribe", "--model", MODEL, p, (const char *)NULL);
    CHECK(rc == 1 && strstr(err_text, "not a recognised audio file") && !strstr(err_text, "pipe") && !strstr(err_text, "Note:") &&
              !strstr(err_text, "mpg123") && strchr(err_text, '\n') == err_text + strlen(err_text) - 1,
          "MPEG-like bytes: exit %d, one line: %s", rc, err_text);
    unlink(p);
    snprintf(p, sizeof p, "%s/one_hz.wav", tmpdir);
    write_wav(p, 1, 10);
    rc = run_attn("transcribe", "--model", MODEL, p, (const char *)NULL);
    CHECK(rc == 1 && strstr(err_text, "sample rate of 1 Hz is out of range") && !strstr(err_text, "SRC ratio"), "1 Hz WAV: exit %d: %s",
          rc, err_text);
    unlink(p);
    /* the option of issue 23 item 6 (one window: the same text with or without it) */
    rc = run_attn("transcribe", "--model", MODEL, "--no-condition-on-previous-text", "/usr/share/sounds/alsa/Front_Center.wav",
                  (const char *)NULL);
    CHECK(rc == 0 && strcmp(out_text, "/usr/share/sounds/alsa/Front_Center.wav: front, center.\n") == 0,
          "--no-condition-on-previous-text: exit %d: %s %s", rc, out_text, err_text);
    /* the same through attn_audio_resample */
    float one = 0.0f, *o = NULL;
    int64_t no = 0;
    CHECK_ERR(attn_audio_resample(&o, &no, &one, 1, 1, 16000), ATTN_E_RANGE);
    CHECK(strstr(attn_last_error(), "1 Hz is out of range"), "resample 1 -> 16000 Hz: %s", attn_last_error());
    CHECK_OK(attn_audio_resample(&o, &no, &one, 1, 63, 16000));
    free(o);
}

/* issue 23 item 13: a syntax error in config.json said "is not a JSON object"; now where it is */
static void test_config_syntax(void) {
    char dir[] = "/tmp/attn_whisper_cfg_XXXXXX", p[600], real[4096];
    if (!mkdtemp(dir)) return;
    const char *files[2] = {"model.bin", "vocabulary.txt"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", MODEL, files[i]);
        if (!realpath(p, real)) continue;
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        CHECK(symlink(real, p) == 0, "symlink %s", files[i]);
    }
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("{\n  \"suppress_ids\": [1, 2,,3]\n}\n", f);
        fclose(f);
    }
    attn_whisper *m = NULL;
    CHECK_ERR(attn_whisper_load(&m, dir), ATTN_E_FORMAT);
    CHECK(strstr(attn_last_error(), "syntax error") && strstr(attn_last_error(), "byte 26") && !strstr(attn_last_error(), "not a JSON object"),
          "config.json syntax error located (the second comma of line 2 is byte 26): %s", attn_last_error());
    attn_whisper_free(m);
    f = fopen(p, "w");
    if (f) {
        fputs("[1, 2]\n", f);
        fclose(f);
    }
    CHECK_ERR(attn_whisper_load(&m, dir), ATTN_E_FORMAT);
    CHECK(strstr(attn_last_error(), "not a JSON object") != NULL, "valid JSON, not an object: %s", attn_last_error());
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
}

int main(void) {
    attn_test_name = "whisper";
    attn_set_num_threads(1);
    test_mel();
    attn_whisper *m = NULL;
    CHECK_OK(attn_whisper_load(&m, MODEL));
    if (m) {
        const attn_whisper_config *c = attn_whisper_get_config(m);
        CHECK(c->d_model == 384 && c->n_heads == 6 && c->n_encoder_layers == 4 && c->n_decoder_layers == 4 && c->d_ff == 1536 &&
                  c->vocab_size == 51864 && c->n_text_ctx == 448 && c->sot == 50257 && c->no_timestamps == 50362,
              "tiny.en config");
        test_state_reuse(m);
        test_tokens(m);
        test_timestamp_rule(m);
        test_rules(m);
        test_short_audio(m);
        test_long_audio(m);
    }
    attn_whisper_free(m);
    test_cli();
    test_audio_messages();
    test_config_syntax();
    if (tmpdir[0]) { /* test_cli's directory, also used by test_audio_messages */
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) printf("whisper: could not remove %s\n", tmpdir);
    }
    return attn_test_finish();
}
