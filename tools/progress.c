/* The progress bar of the long verbs (progress.h). */
#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void cli_progress_start(cli_progress *p, int mode, const char *label, const char *unit, double total) {
    p->tty = isatty(2);
    p->on = mode == CLI_PROGRESS_AUTO ? p->tty : mode != 0;
    p->label = label;
    p->unit = unit;
    p->total = total > 0 ? total : 0;
    p->done = 0;
    p->t0 = p->last = now_s();
    p->drawn = 0;
}

/* "1:02:03" or "2:03" */
static void clock_str(char *buf, size_t n, double s) {
    long t = s < 0 ? 0 : s > 359999 ? 359999 : (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

static void draw(cli_progress *p, double now) {
    enum { W = 20 };
    double frac = p->total > 0 ? p->done / p->total : 0;
    if (frac > 1) frac = 1;
    char bar[W + 1], eta[32] = "";
    int fill = (int)(frac * W + 1e-9);
    for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : ' ';
    bar[W] = '\0';
    double dt = now - p->t0, rate = dt > 0 ? p->done / dt : 0;
    if (p->done < p->total * (1 - 1e-9) && rate > 0) {
        char c[24];
        clock_str(c, sizeof c, (p->total - p->done) / rate);
        snprintf(eta, sizeof eta, "  ETA %s", c);
    } else if (p->done >= p->total * (1 - 1e-9)) {
        char c[24];
        clock_str(c, sizeof c, dt);
        snprintf(eta, sizeof eta, "  %s", c);
    }
    int whole = p->total == (double)(int64_t)p->total && p->total < 1e15;
    if (whole)
        fprintf(stderr, "%s%s: [%s]  %lld/%lld  %3.0f%%  %.1f %s/s%s%s", p->tty ? "\r" : "", p->label, bar, (long long)p->done,
                (long long)p->total, 100 * frac, rate, p->unit, eta, p->tty ? "\033[K" : "\n");
    else
        fprintf(stderr, "%s%s: [%s]  %.1f/%.1f %s  %3.0f%%  %.2fx%s%s", p->tty ? "\r" : "", p->label, bar, p->done, p->total,
                p->unit, 100 * frac, rate, eta, p->tty ? "\033[K" : "\n");
    fflush(stderr);
    p->last = now;
    p->drawn = 1;
}

void cli_progress_update(cli_progress *p, double done) {
    if (!p->on) return;
    p->done = done;
    double now = now_s();
    int last = done >= p->total * (1 - 1e-9); /* drawn by cli_progress_end */
    if (!last && now - p->last >= (p->tty ? 0.1 : 1.0)) draw(p, now);
}

void cli_progress_restart(cli_progress *p, double total) {
    p->total = total > 0 ? total : 0;
    p->done = 0;
    p->t0 = p->last = now_s();
}

void cli_progress_end(cli_progress *p) {
    if (!p->on) return;
    draw(p, now_s());
    if (p->tty) fputc('\n', stderr);
    fflush(stderr);
    p->on = 0;
}

void cli_progress_cb(int64_t done, int64_t total, void *user) {
    cli_progress *p = (cli_progress *)user;
    p->total = (double)total;
    cli_progress_update(p, (double)done);
}
