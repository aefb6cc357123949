/* The CLI under mpirun, for the MPI tests (tests/test_mpi_cli.c, tests/test_mpi_seq2seq.c):
 * launching `timeout SECS mpirun ... -np P ATTN ARGS...` and capturing its output, and killing
 * one rank of a running job. Included by one test file each (static helpers). */
#ifndef ATTN_MPIRUN_UTIL_H
#define ATTN_MPIRUN_UTIL_H

#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* "dir/name" in one of 8 static buffers used in turn (valid until 8 calls later) */
static const char *attn_test_path_in(const char *dir, const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* argv (room for 64) = {SECS, "mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl",
 * "self,vader,tcp", "-np", np, ATTN, args...} for /usr/bin/timeout, NULL-terminated (args
 * NULL-terminated; at most 52 of them are taken); secs and np are the caller's strings */
static void attn_test_mpirun_argv(const char **argv, const char *secs, const char *np, const char *const *args) {
    const char *head[10] = {secs, "mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,vader,tcp",
                            "-np", np, attn_test_cli_path()};
    int n = 0;
    for (; n < 10; n++) argv[n] = head[n];
    for (int i = 0; args[i] && n < 62; i++) argv[n++] = args[i];
    argv[n] = NULL;
}

/* timeout SECS mpirun ... -np P ATTN ARGS... (args NULL-terminated); stdin from in (or NULL);
 * stdout and stderr into out and err as attn_test_run_stdin (files in dir); its return value */
static int attn_test_mpirun(const char *secs, int P, const char *dir, const char *in, char *out, size_t out_cap,
                            char *err, size_t err_cap, const char *const *args) {
    char np[16];
    snprintf(np, sizeof np, "%d", P);
    const char *argv[64];
    attn_test_mpirun_argv(argv, secs, np, args);
    return attn_test_run_stdin("/usr/bin/timeout", dir, in, out, out_cap, err, err_cap, argv);
}

/* the pid of a running attn rank (argv[0] ending in "attn") that has the argument marker and,
 * when marker2 is not NULL, the argument marker2; or 0 */
static pid_t attn_test_find_rank(const char *marker, const char *marker2) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    while (d && !found && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char fn[300], cl[4096];
        snprintf(fn, sizeof fn, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(fn, "r");
        if (!f) continue;
        size_t n = fread(cl, 1, sizeof cl - 1, f);
        fclose(f);
        cl[n] = 0;
        size_t a0 = strlen(cl);
        if (a0 < 4 || strcmp(cl + a0 - 4, "attn") != 0) continue;
        int m1 = 0, m2 = marker2 == NULL;
        for (size_t i = 0; i < n; i += strlen(cl + i) + 1) {
            m1 |= !strcmp(cl + i, marker);
            if (marker2) m2 |= !strcmp(cl + i, marker2);
        }
        if (m1 && m2) found = (pid_t)atoi(e->d_name);
    }
    if (d) closedir(d);
    return found;
}

/* Runs /usr/bin/timeout with argv (a job under mpirun; argv[0] "timeout"), its stdout and stderr
 * into the files out_path and err_path; waits up to 10 s for a rank with marker (and marker2,
 * see attn_test_find_rank), kills it (SIGKILL) delay_us later, and waits for the job. *victim:
 * the rank killed (0: none found); *secs: the job's wall time. Returns the job's exit code,
 * 128 + signal when it was killed, or -1 (nothing else set) when it could not be started. */
static int attn_test_mpirun_kill(const char *const *argv, const char *out_path, const char *err_path,
                                 const char *marker, const char *marker2, unsigned delay_us, pid_t *victim,
                                 double *secs) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int sp = posix_spawn(&pid, "/usr/bin/timeout", &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (sp != 0) return -1;
    *victim = 0;
    for (int i = 0; i < 200 && !*victim; i++) { /* up to 10 s for the ranks to start */
        *victim = attn_test_find_rank(marker, marker2);
        if (!*victim) usleep(50000);
    }
    usleep(delay_us); /* into the work */
    if (*victim) kill(*victim, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
