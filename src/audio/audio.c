/* Audio decoding, resampling and Whisper log-mel features (see include/attn_audio.h). */
#include "attn_audio.h"
#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <fftw3.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <samplerate.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* libsamplerate's limit: output / input rate within [1/256, 256] */
#define ATTN_SRC_MAX_RATIO 256.0

static int attn__rate_ok(int rate_in, int rate_out) {
    double r = (double)rate_out / rate_in;
    return r >= 1.0 / ATTN_SRC_MAX_RATIO && r <= ATTN_SRC_MAX_RATIO;
}

int attn_audio_resample(float **out, int64_t *n_out, const float *in, int64_t n, int rate_in, int rate_out) {
    if (!out || !n_out || (!in && n > 0) || n < 0 || rate_in <= 0 || rate_out <= 0)
        return attn_set_error(ATTN_E_INVALID, "audio_resample: bad argument");
    *out = NULL;
    *n_out = 0;
    if (!attn__rate_ok(rate_in, rate_out))
        return attn_set_error(ATTN_E_RANGE, "a sample rate of %d Hz is out of range: %.0f to %.0f Hz can be resampled to %d Hz", rate_in,
                              ceil(rate_out / ATTN_SRC_MAX_RATIO), rate_out * ATTN_SRC_MAX_RATIO, rate_out);
    double ratio = (double)rate_out / rate_in;
    int64_t cap = (int64_t)ceil((double)n * ratio) + 16;
    float *o = (float *)malloc(sizeof(float) * (size_t)(cap > 0 ? cap : 1));
    if (!o) return attn_set_error(ATTN_E_NOMEM, "audio_resample: out of memory");
    if (rate_in == rate_out || n == 0) {
        if (n) memcpy(o, in, sizeof(float) * (size_t)n);
        *out = o;
        *n_out = n;
        return ATTN_OK;
    }
    SRC_DATA d;
    memset(&d, 0, sizeof d);
    d.data_in = in;
    d.input_frames = (long)n;
    d.data_out = o;
    d.output_frames = (long)cap;
    d.src_ratio = ratio;
    d.end_of_input = 1;
    int e = src_simple(&d, SRC_SINC_BEST_QUALITY, 1);
    if (e) {
        free(o);
        return attn_set_error(ATTN_E_FORMAT, "resampling %d -> %d Hz failed: %s", rate_in, rate_out, src_strerror(e));
    }
    *out = o;
    *n_out = d.output_frames_gen;
    return ATTN_OK;
}

/* MP3 candidates (an ID3 tag or an MPEG frame sync at the start): libsndfile hands them to
 * mpg123, which prints "Note: Illegal Audio-MPEG-Header ..." and similar notes to stderr for
 * bytes that are not MPEG audio. For those files stderr is pointed at /dev/null while libsndfile
 * opens and reads them (one load at a time; a library has no other way to quiet mpg123 through
 * libsndfile). */
static pthread_mutex_t attn__quiet_lock = PTHREAD_MUTEX_INITIALIZER;

static int attn__looks_mpeg(const char *path) {
    unsigned char b[3] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t k = fread(b, 1, 3, f);
    fclose(f);
    return (k == 3 && b[0] == 'I' && b[1] == 'D' && b[2] == '3') || (k >= 2 && b[0] == 0xFF && (b[1] & 0xE0) == 0xE0);
}

static int attn__quiet_begin(void) {
    pthread_mutex_lock(&attn__quiet_lock);
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved >= 0 && null >= 0) dup2(null, 2);
    if (null >= 0) close(null);
    return saved;
}

static void attn__quiet_end(int saved) {
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    pthread_mutex_unlock(&attn__quiet_lock);
}

/* "-" is standard input, read through a duplicate of descriptor 0 that libsndfile may not close:
 * sf_open("-") closes descriptor 0 in sf_close, and the caller may still read standard input
 * (transcribe under mpirun drains it to its end: Open MPI 4's mpirun crashes in its stdin
 * forwarding when rank 0's end of the pipe is closed before mpirun met the input's end). */
static SNDFILE *audio_open(const char *path, SF_INFO *info, int *fd) {
    *fd = -1;
    if (strcmp(path, "-") != 0) return sf_open(path, SFM_READ, info);
    if ((*fd = fcntl(0, F_DUPFD_CLOEXEC, 3)) < 0) return NULL;
    SNDFILE *sf = sf_open_fd(*fd, SFM_READ, info, SF_FALSE);
    if (!sf) {
        int e = errno;
        close(*fd);
        *fd = -1;
        errno = e;
    }
    return sf;
}

/* A data size at or above this is a streaming writer's "length unknown" (0xFFFFFFFF, 0x80000000,
 * sox's 0x7FFFF000), never a truncation: one 8 KiB below 2^31 */
#define WAV_SIZE_UNKNOWN 0x7fffe000LL

/* bytes of one frame (all channels) of a PCM / float / G.711 WAV; 1 per channel otherwise */
static long long wav_frame_bytes(const SF_INFO *info) {
    int b = 1;
    switch (info->format & SF_FORMAT_SUBMASK) {
    case SF_FORMAT_PCM_16: b = 2; break;
    case SF_FORMAT_PCM_24: b = 3; break;
    case SF_FORMAT_PCM_32: case SF_FORMAT_FLOAT: b = 4; break;
    case SF_FORMAT_DOUBLE: b = 8; break;
    default: b = 1;
    }
    return (long long)b * info->channels;
}

/* A WAV whose data chunk announces more bytes than the file holds (a cut download or copy):
 * libsndfile quietly reads what is there and logs "data : 96000 (should be 8000)". Returns 1 and
 * the two byte counts when at least one whole frame is missing; streaming placeholders (0, and
 * sizes from WAV_SIZE_UNKNOWN up that writers to a pipe put there) are not truncation. */
static int wav_truncated(SNDFILE *sf, const SF_INFO *info, long long *declared, long long *held) {
    const int type = info->format & SF_FORMAT_TYPEMASK;
    if (type != SF_FORMAT_WAV && type != SF_FORMAT_WAVEX) return 0;
    char log[8192] = "";
    sf_command(sf, SFC_GET_LOG_INFO, log, sizeof log);
    for (const char *p = log; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, "data", 4) != 0) continue;
        const char *colon = strchr(p, ':'), *sb = strstr(p, "(should be "), *eol = strchr(p, '\n');
        if (!colon || !sb || (eol && sb > eol)) return 0;
        const long long d = strtoll(colon + 1, NULL, 10), h = strtoll(sb + 11, NULL, 10);
        if (d <= 0 || d >= WAV_SIZE_UNKNOWN || h < 0 || d - h < wav_frame_bytes(info)) return 0;
        *declared = d, *held = h;
        return 1;
    }
    return 0;
}

/* A WAV file whose data chunk announces less than the file holds, what follows not being WAV
 * chunks (a header written with a wrong data size, or the 0 a streaming writer leaves when it never
 * comes back to fill it in): libsndfile reads the announced bytes alone (logging "Unknown chunk
 * marker" or "Chunk size ... > file length" for the rest), so 137 kB of audio became 10 bytes, 0
 * or 2 frames, and an empty transcript. The chunks are walked here (RIFF: a 4-character tag, a
 * little-endian 32-bit size, the body, a pad byte after an odd size): returns 1 with the announced
 * data bytes, the file's length and the bytes from the first thing after the data chunk that is
 * not a chunk (a tag of printable ASCII whose body fits in the file) to the end, when those exceed
 * both the announced data and one frame; a few stray bytes after the audio are left alone, and so
 * are data sizes past the file's end (truncation and streaming placeholders, checked elsewhere). */
/* reads n bytes at offset pos of the input; 0 on success */
typedef int (*wav_read_fn)(void *ctx, long long pos, unsigned char *h, int n);

typedef struct {
    int fd;
    long long base; /* the input's offset 0 in the descriptor */
} wav_fd;

static int wav_pread(void *ctx, long long pos, unsigned char *h, int n) {
    const wav_fd *f = (const wav_fd *)ctx;
    return pread(f->fd, h, (size_t)n, (off_t)(f->base + pos)) == n ? 0 : -1;
}

typedef struct {
    const unsigned char *p;
    long long n;
} wav_bytes;

static int wav_memread(void *ctx, long long pos, unsigned char *h, int n) {
    const wav_bytes *b = (const wav_bytes *)ctx;
    if (pos < 0 || pos + n > b->n) return -1;
    memcpy(h, b->p + pos, (size_t)n);
    return 0;
}

/* Walks RIFF chunks from `pos` to `len`; with *d < 0 it first looks for the data chunk (its size
 * into *d, -1 when there is none or it runs past the end). Returns the offset of the first thing
 * after the data chunk that is not a chunk, or -1. */
static long long wav_first_non_chunk(wav_read_fn rd, void *ctx, long long pos, long long len, long long *d) {
    unsigned char h[8];
    while (pos + 8 <= len) {
        if (rd(ctx, pos, h, 8) != 0) return -1;
        const long long size = (long long)h[4] | (long long)h[5] << 8 | (long long)h[6] << 16 | (long long)h[7] << 24;
        int tag = 1;
        for (int k = 0; k < 4; k++) tag &= h[k] >= 0x20 && h[k] < 0x7f;
        if (*d < 0 && memcmp(h, "data", 4) == 0) {
            if (pos + 8 + size > len) return -1; /* past the end: not this case */
            *d = size;
        } else if (*d >= 0 && (!tag || pos + 8 + size > len))
            return pos;
        pos += 8 + size + (size & 1);
    }
    return -1;
}

/* j bytes that are not chunks after a data chunk of d bytes: refused when they could hold a frame and
 * either outnumber the announced audio or pass 4 KiB (a header that under-announces by a fraction:
 * the new-user case of 60% announced decoded the first part alone, exit 0); a few stray bytes, a
 * 128-byte ID3v1 trailer or padding stay accepted */
static int wav_junk_matters(long long j, long long d, const SF_INFO *info) {
    return j >= wav_frame_bytes(info) && (j > d || j > 4096);
}

/* the file's (or seekable standard input's, from offset base) chunks, see above */
static int wav_junk_after_data(int fd, long long base, const SF_INFO *info, long long *declared, long long *length, long long *junk) {
    const int type = info->format & SF_FORMAT_TYPEMASK;
    if (type != SF_FORMAT_WAV && type != SF_FORMAT_WAVEX) return 0;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    wav_fd ctx = {fd, base};
    const long long len = (long long)st.st_size - base;
    unsigned char h[12];
    if (len < 12 || wav_pread(&ctx, 0, h, 12) != 0 || memcmp(h, "RIFF", 4) != 0 || memcmp(h + 8, "WAVE", 4) != 0) return 0;
    long long d = -1;
    const long long bad = wav_first_non_chunk(wav_pread, &ctx, 12, len, &d);
    if (d < 0 || bad < 0) return 0;
    const long long j = len - bad;
    if (!wav_junk_matters(j, d, info)) return 0;
    *declared = d, *length = len, *junk = j;
    return 1;
}

/* The same check for a pipe or socket on standard input, after libsndfile has read the `frames`
 * the header announced: what is left is read to its end (counted, the first 16 MiB kept) and walked
 * as chunks. Returns 1 with the announced data bytes and the bytes from the first non-chunk to the
 * end, under the rules of wav_junk_after_data. */
static int wav_junk_after_pipe(int fd, const SF_INFO *info, long long frames, long long *declared, long long *junk) {
    const int type = info->format & SF_FORMAT_TYPEMASK;
    if (type != SF_FORMAT_WAV && type != SF_FORMAT_WAVEX) return 0;
    const long long d = frames * wav_frame_bytes(info);
    enum { KEEP = 16 << 20 };
    unsigned char *keep = (unsigned char *)malloc(KEEP), tmp[65536];
    if (!keep) return 0;
    long long n = 0;
    for (;;) {
        ssize_t r = read(fd, tmp, sizeof tmp);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (n < KEEP) memcpy(keep + n, tmp, (size_t)(n + r <= KEEP ? r : KEEP - n));
        n += r;
    }
    wav_bytes b = {keep, n < KEEP ? n : KEEP};
    long long dd = d;
    /* an odd data size is followed by a pad byte */
    long long bad = wav_first_non_chunk(wav_memread, &b, d & 1, b.n, &dd);
    if (bad < 0 && b.n < n) bad = b.n; /* beyond what was kept: judged by its size alone */
    free(keep);
    if (bad < 0) return 0;
    const long long j = n - bad;
    if (!wav_junk_matters(j, d, info)) return 0;
    *declared = d, *junk = j;
    return 1;
}

/* What is on standard input before libsndfile reads it: 0 when there may be audio, else
 * attn_set_error's status for a closed descriptor 0, a directory, or input that is empty (an
 * empty file or one read to its end, /dev/null, a pipe or socket closed without a byte). libsndfile
 * answers "Format not recognised" for all of these, and after it has read nothing tells an empty
 * pipe from a few stray bytes. A pipe or socket is waited on (as libsndfile's read would wait)
 * and never read: poll / a peek leave its bytes to libsndfile. */
static int stdin_refusal(void) {
    struct stat st;
    if (fstat(0, &st) != 0)
        return attn_set_error(ATTN_E_IO, "-: standard input is closed: there is no audio to read");
    if (S_ISDIR(st.st_mode)) return attn_set_error(ATTN_E_IO, "-: standard input is a directory, not an audio file");
    int empty = 0;
    if (S_ISREG(st.st_mode)) {
        const off_t at = lseek(0, 0, SEEK_CUR);
        empty = at >= 0 && at >= st.st_size;
    } else if (S_ISCHR(st.st_mode)) {
        struct stat nul;
        empty = stat("/dev/null", &nul) == 0 && S_ISCHR(nul.st_mode) && nul.st_rdev == st.st_rdev;
    } else if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
        struct pollfd pf = {0, POLLIN, 0};
        int r;
        while ((r = poll(&pf, 1, -1)) < 0 && errno == EINTR) {
        }
        if (r == 1 && S_ISFIFO(st.st_mode)) empty = (pf.revents & POLLHUP) && !(pf.revents & POLLIN); /* closed, nothing left */
        if (r == 1 && S_ISSOCK(st.st_mode)) {
            char b;
            empty = recv(0, &b, 1, MSG_PEEK) == 0;
        }
    }
    return empty ? attn_set_error(ATTN_E_IO, "-: standard input is empty: there is no audio to read (0 bytes)") : 0;
}

static void audio_close(SNDFILE *sf, int fd) {
    sf_close(sf);
    if (fd >= 0) close(fd);
}

int attn_audio_load(float **samples, int64_t *n, const char *path, int rate) {
    if (!samples || !n || !path || rate <= 0) return attn_set_error(ATTN_E_INVALID, "audio_load: bad argument");
    *samples = NULL;
    *n = 0;
    SF_INFO info;
    memset(&info, 0, sizeof info);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return attn_set_error(ATTN_E_IO, "%s: is a directory, not an audio file", path);
    if (strcmp(path, "-") == 0) {
        const int r = stdin_refusal();
        if (r < 0) return r;
    } else if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
        return attn_set_error(ATTN_E_IO, "%s: the file is empty: there is no audio to read (0 bytes)", path);
    const int regular = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    const int quiet = regular && attn__looks_mpeg(path);
    int saved = quiet ? attn__quiet_begin() : -1;
    const int std_in = strcmp(path, "-") == 0;
    struct stat in_st;
    const int in_regular = std_in && fstat(0, &in_st) == 0 && S_ISREG(in_st.st_mode);
    const long long in_base = in_regular ? (long long)lseek(0, 0, SEEK_CUR) : 0;
    int in_fd;
    SNDFILE *sf = audio_open(path, &info, &in_fd);
    if (!sf) {
        int e = errno;
        char why[256];
        snprintf(why, sizeof why, "%s", sf_strerror(NULL));
        if (quiet) attn__quiet_end(saved);
        if (!std_in && access(path, R_OK) != 0) return attn_set_error(ATTN_E_IO, "%s: cannot read as audio: %s", path, strerror(errno ? errno : e));
        /* a readable file libsndfile cannot decode; its own text then blames pipes ("File does
         * not exist or is not a regular file (possibly a pipe?)") for bytes mpg123 rejected */
        if (regular || std_in)
            return attn_set_error(ATTN_E_IO, "%s: cannot read as audio: not a recognised audio file (libsndfile reads WAV, FLAC, "
                                             "OGG/Vorbis/Opus, MP3, AIFF, ...)", path);
        return attn_set_error(ATTN_E_IO, "%s: cannot read as audio: not a recognised audio file (libsndfile: %s)", path, why);
    }
    if (info.channels <= 0 || info.samplerate <= 0) {
        audio_close(sf, in_fd);
        if (quiet) attn__quiet_end(saved);
        return attn_set_error(ATTN_E_FORMAT, "%s: %d channels at %d Hz", path, info.channels, info.samplerate);
    }
    if (!attn__rate_ok(info.samplerate, rate)) {
        audio_close(sf, in_fd);
        if (quiet) attn__quiet_end(saved);
        return attn_set_error(ATTN_E_FORMAT, "%s: a sample rate of %d Hz is out of range: %.0f to %.0f Hz can be resampled to %d Hz", path,
                              info.samplerate, ceil(rate / ATTN_SRC_MAX_RATIO), rate * ATTN_SRC_MAX_RATIO, rate);
    }
    long long declared = 0, held = 0;
    if (wav_truncated(sf, &info, &declared, &held)) {
        audio_close(sf, in_fd);
        if (quiet) attn__quiet_end(saved);
        const double fb = (double)wav_frame_bytes(&info) * info.samplerate; /* bytes per second */
        return attn_set_error(ATTN_E_FORMAT,
                              "%s: the file is truncated: its header announces %lld bytes of audio data (%.2f s), the file holds %lld "
                              "(%.2f s); decoding it would silently drop the missing part (repair it, e.g. `ffmpeg -i IN.wav "
                              "OUT.wav`, to keep what is there)",
                              path, declared, declared / fb, held, held / fb);
    }
    long long length = 0, junk = 0;
    int junk_fd = regular ? open(path, O_RDONLY | O_CLOEXEC) : in_regular && in_base >= 0 ? in_fd : -1;
    const int junk_found = wav_junk_after_data(junk_fd, regular ? 0 : in_base, &info, &declared, &length, &junk);
    if (regular && junk_fd >= 0) close(junk_fd);
    if (junk_found) {
        audio_close(sf, in_fd);
        if (quiet) attn__quiet_end(saved);
        return attn_set_error(ATTN_E_FORMAT,
                              "%s: the WAV header does not match the file: its data chunk announces %lld bytes of audio (%lld frame%s of "
                              "%d channel%s, %.3g s), but the %lld bytes after it (of the file's %lld) are not WAV chunks; decoding the "
                              "announced part alone would drop the rest (if the rest is audio, rewrite the header, e.g. `ffmpeg "
                              "-ignore_length 1 -i IN.wav OUT.wav`)",
                              path, declared, (long long)info.frames, info.frames == 1 ? "" : "s", info.channels, info.channels == 1 ? "" : "s",
                              (double)info.frames / info.samplerate, junk, length);
    }
    if (info.frames < 0 || info.frames > ((sf_count_t)1 << 34) / info.channels) {
        audio_close(sf, in_fd);
        if (quiet) attn__quiet_end(saved);
        return attn_set_error(ATTN_E_FORMAT, "%s: %lld frames is too long", path, (long long)info.frames);
    }
    int64_t frames = info.frames;
    float *buf = (float *)malloc(sizeof(float) * (size_t)(frames * info.channels + 1));
    float *mono = (float *)malloc(sizeof(float) * (size_t)(frames + 1));
    if (!buf || !mono) {
        free(buf);
        free(mono);
        audio_close(sf, in_fd);
        if (quiet) attn__quiet_end(saved);
        return attn_set_error(ATTN_E_NOMEM, "%s: out of memory", path);
    }
    sf_count_t got = frames > 0 ? sf_readf_float(sf, buf, frames) : 0;
    const int pipe_junk = std_in && !in_regular && got == frames && wav_junk_after_pipe(in_fd, &info, frames, &declared, &junk);
    audio_close(sf, in_fd);
    if (quiet) attn__quiet_end(saved);
    if (pipe_junk) {
        free(buf);
        free(mono);
        return attn_set_error(ATTN_E_FORMAT,
                              "%s: the WAV header does not match the input: its data chunk announces %lld frame%s of %d channel%s "
                              "(%lld bytes of audio, %.3g s), but the %lld bytes after them are not WAV chunks; decoding the announced "
                              "part alone would drop the rest (if the rest is audio, rewrite the header, e.g. `ffmpeg -ignore_length 1 "
                              "-i IN.wav OUT.wav`)",
                              path, (long long)frames, frames == 1 ? "" : "s", info.channels, info.channels == 1 ? "" : "s", declared,
                              (double)frames / info.samplerate, junk);
    }
    /* from a pipe libsndfile cannot check the sizes up front: frames is the header's, got what came */
    const int wav = (info.format & SF_FORMAT_TYPEMASK) == SF_FORMAT_WAV || (info.format & SF_FORMAT_TYPEMASK) == SF_FORMAT_WAVEX;
    if (wav && got < frames && frames * wav_frame_bytes(&info) < WAV_SIZE_UNKNOWN) {
        free(buf);
        free(mono);
        return attn_set_error(ATTN_E_FORMAT,
                              "%s: the file is truncated: its header announces %lld frames of audio (%.2f s), it holds %lld (%.2f s); "
                              "decoding it would silently drop the missing part (repair it, e.g. `ffmpeg -i IN.wav OUT.wav`, to "
                              "keep what is there)",
                              path, (long long)frames, (double)frames / info.samplerate, (long long)(got > 0 ? got : 0),
                              (double)(got > 0 ? got : 0) / info.samplerate);
    }
    for (int64_t i = 0; i < got; i++) {
        double s = 0;
        for (int c = 0; c < info.channels; c++) s += buf[i * info.channels + c];
        mono[i] = (float)(s / info.channels);
        if (!isfinite(mono[i])) {
            free(buf);
            free(mono);
            return attn_set_error(ATTN_E_FORMAT, "%s: non-finite sample at frame %lld", path, (long long)i);
        }
    }
    free(buf);
    int rc = attn_audio_resample(samples, n, mono, got, info.samplerate, rate);
    free(mono);
    return rc;
}

/* Slaney mel scale (librosa / faster-whisper): linear below 1 kHz, logarithmic above. */
static double attn__hz_to_mel(double f) {
    const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp, logstep = log(6.4) / 27.0;
    return f < min_log_hz ? f / f_sp : min_log_mel + log(f / min_log_hz) / logstep;
}
static double attn__mel_to_hz(double m) {
    const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp, logstep = log(6.4) / 27.0;
    return m < min_log_mel ? m * f_sp : min_log_hz * exp(logstep * (m - min_log_mel));
}

int attn_whisper_log_mel(float **out, int64_t *n_frames, const float *samples, int64_t n) {
    if (!out || !n_frames || (!samples && n > 0) || n < 0) return attn_set_error(ATTN_E_INVALID, "whisper_log_mel: bad argument");
    *out = NULL;
    *n_frames = 0;
    /* a NaN would pass log10(max(x, 1e-10)) as 1e-10 and decode as silence: refuse it */
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(samples[i])) return attn_set_error(ATTN_E_INVALID, "non-finite audio sample (%g) at index %lld", (double)samples[i], (long long)i);
    const int NF = ATTN_WHISPER_N_FFT, H = ATTN_WHISPER_HOP, NM = ATTN_WHISPER_N_MELS, NB = NF / 2 + 1;
    const int64_t len = n + 160;                 /* padding=160 */
    const int64_t plen = len + NF;               /* reflect padding n_fft/2 on both sides */
    const int64_t frames = len / H;              /* 1 + (plen - NF) / H frames, the last dropped */
    float *x = (float *)malloc(sizeof(float) * (size_t)plen);
    double *filt = (double *)calloc((size_t)NM * NB, sizeof(double));
    double *mag = (double *)malloc(sizeof(double) * (size_t)NB);
    float *mel = (float *)malloc(sizeof(float) * (size_t)(NM * (frames > 0 ? frames : 1)));
    float *fin = (float *)fftwf_malloc(sizeof(float) * NF);
    fftwf_complex *fout = (fftwf_complex *)fftwf_malloc(sizeof(fftwf_complex) * NB);
    int rc = ATTN_OK;
    fftwf_plan plan = NULL;
    if (!x || !filt || !mag || !mel || !fin || !fout) {
        rc = attn_set_error(ATTN_E_NOMEM, "whisper_log_mel: out of memory");
        goto done;
    }
    /* signal + 160 zeros, reflect-padded by 200 (numpy "reflect": the edge is not repeated) */
    for (int64_t i = 0; i < plen; i++) {
        int64_t j = i - NF / 2;
        if (j < 0) j = -j;
        if (j >= len) j = 2 * (len - 1) - j;
        if (j < 0) j = 0; /* only for len == 1 */
        x[i] = j < n ? samples[j] : 0.0f;
    }
    /* mel filters */
    {
        const double max_mel = attn__hz_to_mel(8000.0);
        double freqs[ATTN_WHISPER_N_MELS + 2];
        for (int m = 0; m < NM + 2; m++) freqs[m] = attn__mel_to_hz(max_mel * m / (NM + 1));
        for (int m = 0; m < NM; m++) {
            double enorm = 2.0 / (freqs[m + 2] - freqs[m]);
            for (int b = 0; b < NB; b++) {
                double f = (double)b * ATTN_WHISPER_RATE / NF;
                double lower = (f - freqs[m]) / (freqs[m + 1] - freqs[m]);
                double upper = (freqs[m + 2] - f) / (freqs[m + 2] - freqs[m + 1]);
                double w = lower < upper ? lower : upper;
                filt[m * NB + b] = (w > 0 ? w : 0) * enorm;
            }
        }
    }
    plan = fftwf_plan_dft_r2c_1d(NF, fin, fout, FFTW_ESTIMATE);
    if (!plan) {
        rc = attn_set_error(ATTN_E_NOMEM, "whisper_log_mel: FFTW plan failed");
        goto done;
    }
    float win[ATTN_WHISPER_N_FFT];
    for (int i = 0; i < NF; i++) win[i] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * i / NF)); /* periodic Hann */
    double gmax = -INFINITY;
    for (int64_t t = 0; t < frames; t++) {
        for (int i = 0; i < NF; i++) fin[i] = x[t * H + i] * win[i];
        fftwf_execute(plan);
        for (int b = 0; b < NB; b++) {
            float re = fout[b][0], im = fout[b][1];
            float a = sqrtf(re * re + im * im); /* complex64 magnitude, squared in float32 */
            mag[b] = (double)(a * a);
            if (!isfinite(mag[b])) { /* it would pass log10(max(x, 1e-10)) as silence */
                float big = 0.0f;
                for (int64_t i = 0; i < n; i++) big = fabsf(samples[i]) > big ? fabsf(samples[i]) : big;
                rc = attn_set_error(ATTN_E_RANGE,
                                    "the power spectrum of frame %lld overflows float32: the samples are too large (largest |x| %g; "
                                    "audio is expected within [-1, 1])",
                                    (long long)t, (double)big);
                goto done;
            }
        }
        for (int m = 0; m < NM; m++) {
            double s = 0;
            const double *fr = filt + m * NB;
            for (int b = 0; b < NB; b++) s += fr[b] * mag[b];
            double l = log10(s > 1e-10 ? s : 1e-10);
            mel[m * frames + t] = (float)l;
            if (l > gmax) gmax = l;
        }
    }
    for (int64_t i = 0; i < NM * frames; i++) {
        double v = mel[i];
        if (v < gmax - 8.0) v = gmax - 8.0;
        mel[i] = (float)((v + 4.0) / 4.0);
    }
    *out = mel;
    *n_frames = frames;
    mel = NULL;
done:
    if (plan) fftwf_destroy_plan(plan);
    fftwf_free(fin);
    fftwf_free(fout);
    free(x);
    free(filt);
    free(mag);
    free(mel);
    return rc;
}
