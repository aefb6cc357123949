/* Atomic output files (attn_io.h): write to a temporary file beside the target, rename it
 * over the target only when every byte is written and synced; remove it on any failure. */
#include "attn_io.h"
#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { OUT_RENAME = ATTN__OUT_RENAME, OUT_STDOUT = ATTN__OUT_STDOUT, OUT_DEVICE = ATTN__OUT_DEVICE, OUT_FD = ATTN__OUT_FD };

struct attn_out {
    char *path;   /* as given, for messages */
    char *target; /* the file renamed over (OUT_RENAME) or opened at commit (OUT_DEVICE) */
    char *tmp;    /* the temporary file's path (OUT_RENAME); NULL for an anonymous buffer */
    int kind;
    int out_fd; /* OUT_FD: the descriptor written through (1 for OUT_STDOUT) */
    int slot;   /* the temporary file's entry in the list of live temporaries (-1: none) */
    int fd; /* the temporary file's descriptor (owned by f) */
    FILE *f;
    int keep_mode;
    mode_t mode;
    /* fault injection (ATTN_FAULT_WRITE_AFTER) */
    long long limit, written;
    int err; /* first write error (errno value) */
};

/* ------------------------------------------------------------------ fault injection */

static long long fault_limit(void) {
    const char *s = getenv("ATTN_FAULT_WRITE_AFTER");
    if (!s || !*s) return -1;
    char *end;
    long long v = strtoll(s, &end, 10);
    return (*end == '\0' && v >= 0) ? v : -1;
}

/* Every stream goes through these hooks: they record the first write error (so that commit
 * can name it however the writer used stdio) and apply ATTN_FAULT_WRITE_AFTER. */
static ssize_t out_write(void *cookie, const char *buf, size_t n) {
    attn_out *o = (attn_out *)cookie;
    size_t want = n;
    if (o->limit >= 0) {
        size_t room = o->written >= o->limit ? 0 : (size_t)(o->limit - o->written);
        if (room < want) {
            want = room;
            if (!o->err) o->err = ENOSPC; /* stdio may take the short write as the failure */
        }
        if (want == 0) {
            if (!o->err) o->err = ENOSPC;
            errno = ENOSPC;
            return -1;
        }
    }
    size_t done = 0;
    while (done < want) {
        ssize_t w = write(o->fd, buf + done, want - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (!o->err) o->err = errno;
            if (done) break;
            return -1;
        }
        done += (size_t)w;
    }
    o->written += (long long)done;
    return (ssize_t)done;
}

static int out_close(void *cookie) {
    attn_out *o = (attn_out *)cookie;
    return close(o->fd);
}

static FILE *open_stream(attn_out *o) {
    o->limit = fault_limit();
    cookie_io_functions_t io = {NULL, out_write, NULL, out_close};
    return fopencookie(o, "wb", io);
}

/* ------------------------------------------------------------------ helpers */

static char *dup_str(const char *s, size_t n) {
    char *d = (char *)malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* directory part of p ("." when none) and a pointer to the last component */
static char *dir_of(const char *p, const char **base) {
    const char *slash = strrchr(p, '/');
    if (!slash) {
        *base = p;
        return dup_str(".", 1);
    }
    *base = slash + 1;
    return dup_str(p, slash == p ? 1 : (size_t)(slash - p));
}

static void free_out(attn_out *o) {
    if (!o) return;
    free(o->path);
    free(o->target);
    free(o->tmp);
    free(o);
}

static int fail_open(attn_out *o, int status, const char *fmt, const char *path, const char *why) {
    free_out(o);
    return attn_set_error(status, fmt, path, why);
}

/* ------------------------------------------------------------------ where an output goes */

/* 1 when s is a non-empty string of decimal digits; *n its value */
static int all_digits(const char *s, long *n) {
    if (!*s) return 0;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > 100000000L) return 0;
        v = v * 10 + (*p - '0');
    }
    *n = v;
    return 1;
}

/* the descriptor N when p names this process's /proc/PID/fd/N (or its thread's
 * /proc/PID/task/TID/fd/N), its directory resolved (/dev/fd, /proc/self/fd, ...); else -1 */
static int proc_fd_of(const char *p) {
    const char *base;
    char *dir = dir_of(p, &base);
    long n;
    if (!dir || !all_digits(base, &n)) {
        free(dir);
        return -1;
    }
    char *rd = realpath(dir, NULL);
    free(dir);
    if (!rd) return -1;
    long pid = -1, tid = -1;
    int k = -1;
    int own = (sscanf(rd, "/proc/%ld/fd%n", &pid, &k) == 1 && k > 0 && rd[k] == '\0' && pid == (long)getpid()) ||
              (sscanf(rd, "/proc/%ld/task/%ld/fd%n", &pid, &tid, &k) == 2 && k > 0 && rd[k] == '\0' && pid == (long)getpid());
    free(rd);
    return own && n <= INT_MAX ? (int)n : -1;
}

/* the descriptor when path, or a link on the way to its file, names one of this process's open
 * descriptors (/dev/stdout -> /proc/self/fd/1, /dev/fd/63 from bash's >(cmd), ...); else -1.
 * Such a link is "magic": it leads to a pipe or a socket that no path names, so realpath fails. */
static int fd_link(const char *path) {
    char *cur = dup_str(path, strlen(path));
    for (int hop = 0; cur && hop < 40; hop++) {
        int fd = proc_fd_of(cur);
        struct stat st;
        char buf[PATH_MAX];
        ssize_t k;
        if (fd >= 0) {
            free(cur);
            return fd;
        }
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode) || (k = readlink(cur, buf, sizeof buf - 1)) < 0) break;
        buf[k] = '\0';
        char *next;
        if (buf[0] == '/') {
            next = dup_str(buf, (size_t)k);
        } else { /* relative to the link's directory */
            const char *b;
            char *d = dir_of(cur, &b);
            size_t n = (d ? strlen(d) : 0) + (size_t)k + 2;
            next = d ? (char *)malloc(n) : NULL;
            if (next) snprintf(next, n, "%s/%s", d, buf);
            free(d);
        }
        free(cur);
        cur = next;
    }
    free(cur);
    return -1;
}

int attn__out_resolve(const char *path, char **target, int *fd) {
    struct stat st;
    *target = NULL;
    *fd = -1;
    if (strcmp(path, "-") == 0) {
        *fd = 1;
        return ATTN__OUT_STDOUT;
    }
    if ((*fd = fd_link(path)) >= 0) {
        if (fstat(*fd, &st) != 0) {
            *fd = -1;
            return attn_set_error(ATTN_E_IO, "%s: cannot open for writing: %s", path, strerror(errno));
        }
        return ATTN__OUT_FD;
    }
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT) return attn_set_error(ATTN_E_IO, "%s: cannot open for writing: %s", path, strerror(errno));
        *target = dup_str(path, strlen(path)); /* a new file */
    } else if (S_ISLNK(st.st_mode)) {
        char *real = realpath(path, NULL);
        if (!real) {
            *target = dup_str(path, strlen(path)); /* dangling link: replaced by the file */
        } else if (stat(real, &st) != 0) {
            int e = errno;
            free(real);
            return attn_set_error(ATTN_E_IO, "%s: cannot open for writing: %s", path, strerror(e));
        } else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
            free(real);
            *target = dup_str(path, strlen(path));
            return *target ? ATTN__OUT_DEVICE : attn_set_error(ATTN_E_NOMEM, "%s: out of memory", path);
        } else {
            *target = real;
        }
    } else {
        *target = dup_str(path, strlen(path));
    }
    if (!*target) return attn_set_error(ATTN_E_NOMEM, "%s: out of memory", path);
    if (stat(*target, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            free(*target);
            *target = NULL;
            return attn_set_error(ATTN_E_IO, "%s: cannot open for writing: %s", path, strerror(EISDIR));
        }
        if (!S_ISREG(st.st_mode)) return ATTN__OUT_DEVICE;
    }
    return ATTN__OUT_RENAME;
}

/* ------------------------------------------------------------------ temporary files alive
 * Every temporary file is listed here from just before it is created until it is renamed or
 * removed, so that a signal handler can remove them (attn__out_remove_temps). Fixed slots: no
 * allocation, nothing a handler could see half-freed. */
enum { N_TEMPS = 32, TEMP_CAP = 4096 };
static char temp_path[N_TEMPS][TEMP_CAP];
static volatile sig_atomic_t temp_used[N_TEMPS];

/* claim a slot for path (copied); -1 when every slot is taken (the file is then not listed) */
static int temp_register(const char *path) {
    if (strlen(path) >= TEMP_CAP) return -1;
    for (int i = 0; i < N_TEMPS; i++) {
        int expect = 0;
        if (__atomic_compare_exchange_n((int *)&temp_used[i], &expect, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            memcpy(temp_path[i], path, strlen(path) + 1);
            __atomic_store_n((int *)&temp_used[i], 1, __ATOMIC_RELEASE); /* 1: the path is complete */
            return i;
        }
    }
    return -1;
}

static void temp_forget(int slot) {
    if (slot >= 0) __atomic_store_n((int *)&temp_used[slot], 0, __ATOMIC_RELEASE);
}

void attn__out_remove_temps(void) {
    for (int i = 0; i < N_TEMPS; i++)
        if (temp_used[i] == 1) unlink(temp_path[i]);
}

/* create "<dir>/.<base>.XXXXXX.tmp" with O_EXCL; returns the fd or -1 (errno set) */
static int make_temp(attn_out *o, const char *dir, const char *base) {
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    size_t blen = strlen(base);
    if (blen > 200) blen = 200; /* stay under NAME_MAX */
    size_t cap = strlen(dir) + blen + 32;
    o->tmp = (char *)malloc(cap);
    if (!o->tmp) {
        errno = ENOMEM;
        return -1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^ (uintptr_t)o;
    for (int attempt = 0; attempt < 100; attempt++) {
        char suf[7];
        for (int i = 0; i < 6; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            suf[i] = digits[x % 36];
        }
        suf[6] = '\0';
        snprintf(o->tmp, cap, "%s/.%.*s.%s.tmp", dir, (int)blen, base, suf);
        o->slot = temp_register(o->tmp); /* listed before it exists: a signal cannot miss it */
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) return fd;
        int e = errno;
        temp_forget(o->slot);
        o->slot = -1;
        errno = e;
        if (e != EEXIST) return -1;
    }
    errno = EEXIST;
    return -1;
}

/* ------------------------------------------------------------------ public */

int attn_out_open(attn_out **out, const char *path, int flags) {
    if (out) *out = NULL;
    if (!out || !path || !*path) return attn_set_error(ATTN_E_INVALID, "attn_out_open: NULL or empty path");
    attn_out *o = (attn_out *)calloc(1, sizeof *o);
    if (!o || !(o->path = dup_str(path, strlen(path)))) {
        free(o);
        return attn_set_error(ATTN_E_NOMEM, "%s: out of memory", path);
    }
    o->fd = -1;
    o->slot = -1;
    struct stat st;
    if (strcmp(path, "-") == 0 && (flags & ATTN_OUT_BINARY) && isatty(1))
        return fail_open(o, ATTN_E_INVALID, "%s: %s", "-",
                         "refusing to write binary data to a terminal (redirect standard output or give a file name)");
    o->kind = attn__out_resolve(path, &o->target, &o->out_fd);
    if (o->kind < 0) {
        int rc = o->kind;
        free_out(o);
        return rc;
    }
    if (o->kind == OUT_RENAME && stat(o->target, &st) == 0) {
        o->keep_mode = 1;
        o->mode = st.st_mode & 07777;
    }
    if (o->kind == OUT_RENAME) {
        const char *base;
        char *dir = dir_of(o->target, &base);
        if (!dir) return fail_open(o, ATTN_E_NOMEM, "%s: %s", path, "out of memory");
        o->fd = make_temp(o, dir, base);
        free(dir);
        if (o->fd < 0) {
            int e = errno;
            free(o->tmp);
            o->tmp = NULL;
            return fail_open(o, ATTN_E_IO, "%s: cannot open for writing: %s", path, strerror(e));
        }
    } else {
        FILE *anon = tmpfile();
        if (!anon) return fail_open(o, ATTN_E_IO, "%s: cannot create a temporary buffer: %s", path, strerror(errno));
        o->fd = dup(fileno(anon));
        fclose(anon);
        if (o->fd < 0) return fail_open(o, ATTN_E_IO, "%s: cannot create a temporary buffer: %s", path, strerror(errno));
    }
    o->f = open_stream(o);
    if (!o->f) {
        int e = errno;
        close(o->fd);
        if (o->tmp) unlink(o->tmp);
        temp_forget(o->slot);
        return fail_open(o, ATTN_E_IO, "%s: cannot open for writing: %s", path, strerror(e));
    }
    *out = o;
    return ATTN_OK;
}

FILE *attn_out_file(attn_out *o) { return o ? o->f : NULL; }

const char *attn_out_path(const attn_out *o) { return o ? o->path : NULL; }

void attn_out_abort(attn_out *o) {
    if (!o) return;
    int e = errno;
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    temp_forget(o->slot);
    free_out(o);
    errno = e;
}

/* copy the anonymous buffer (o->fd, via a dup) to dst; 0 or an errno value */
static int copy_out(attn_out *o, int dst) {
    int src = dup(o->fd);
    if (src < 0) return errno;
    int err = 0;
    if (lseek(src, 0, SEEK_SET) < 0) err = errno;
    char buf[65536];
    while (!err) {
        ssize_t r = read(src, buf, sizeof buf);
        if (r < 0) {
            if (errno == EINTR) continue;
            err = errno;
            break;
        }
        if (r == 0) break;
        for (ssize_t done = 0; done < r;) {
            ssize_t w = write(dst, buf + done, (size_t)(r - done));
            if (w < 0) {
                if (errno == EINTR) continue;
                err = errno;
                break;
            }
            done += w;
        }
    }
    close(src);
    return err;
}

int attn_out_commit(attn_out *o) {
    if (!o) return attn_set_error(ATTN_E_INVALID, "attn_out_commit: NULL handle");
    int err = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) err = o->err ? o->err : EIO;
    if (!err && o->kind == OUT_RENAME) {
        if (o->keep_mode) fchmod(o->fd, o->mode); /* best effort, as cp does */
        if (fsync(o->fd) != 0 && errno != EINVAL && errno != EROFS) err = errno;
    }
    if (!err && o->kind != OUT_RENAME) {
        if (o->kind == OUT_STDOUT || o->kind == OUT_FD) { /* written through to the descriptor */
            if (fflush(stdout) != 0) err = errno ? errno : EIO;
            if (!err) err = copy_out(o, o->out_fd);
        } else {
            int dst = open(o->target, O_WRONLY | O_CLOEXEC);
            if (dst < 0) err = errno;
            else {
                err = copy_out(o, dst);
                if (close(dst) != 0 && !err) err = errno;
            }
        }
    }
    errno = 0;
    if (fclose(o->f) != 0 && !err) err = o->err ? o->err : errno ? errno : EIO;
    o->f = NULL;
    if (!err && o->kind == OUT_RENAME && rename(o->tmp, o->target) != 0) err = errno;
    if (err && o->tmp) unlink(o->tmp);
    temp_forget(o->slot);
    if (err) {
        int rc = attn_set_error(ATTN_E_IO, "%s: write failed: %s", o->path, strerror(err));
        free_out(o);
        return rc;
    }
    if (o->kind == OUT_RENAME) { /* make the rename durable (best effort) */
        const char *base;
        char *dir = dir_of(o->target, &base);
        int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    free_out(o);
    return ATTN_OK;
}

/* ------------------------------------------------------------------ same file */

static int ident(const char *p, struct stat *st) {
    if (strcmp(p, "-") == 0) return fstat(1, st) == 0;
    return stat(p, st) == 0;
}

/* canonical form of a path that may not exist: realpath of its directory + "/" + name */
static char *canon(const char *p) {
    const char *base;
    char *dir = dir_of(p, &base);
    if (!dir) return NULL;
    char *rd = realpath(dir, NULL);
    free(dir);
    if (!rd) return dup_str(p, strlen(p));
    size_t n = strlen(rd) + strlen(base) + 2;
    char *c = (char *)malloc(n);
    if (c) snprintf(c, n, "%s/%s", rd, base);
    free(rd);
    return c;
}

int attn_same_file(const char *a, const char *b) {
    if (!a || !b) return 0;
    struct stat sa, sb;
    int ea = ident(a, &sa), eb = ident(b, &sb);
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea || eb) return 0;
    if (strcmp(a, "-") == 0 || strcmp(b, "-") == 0) return strcmp(a, b) == 0;
    char *ca = canon(a), *cb = canon(b);
    int same = ca && cb && strcmp(ca, cb) == 0;
    free(ca);
    free(cb);
    return same;
}

void attn__map_release(const void *p, size_t n) {
    const long ps = sysconf(_SC_PAGESIZE);
    if (!p || n == 0 || ps <= 0) return;
    const uintptr_t a = ((uintptr_t)p + (uintptr_t)ps - 1) / (uintptr_t)ps * (uintptr_t)ps, b = ((uintptr_t)p + n) / (uintptr_t)ps * (uintptr_t)ps;
    if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

int attn__map_readonly(const char *path, void **map, size_t *size) {
    *map = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return attn_set_error(ATTN_E_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return attn_set_error(ATTN_E_IO, "%s is not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    void *p = NULL;
    if (n > 0) {
        p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            close(fd);
            return attn_set_error(ATTN_E_IO, "cannot map %s: %s", path, strerror(err));
        }
    }
    close(fd);
    *map = p;
    *size = n;
    return ATTN_OK;
}
