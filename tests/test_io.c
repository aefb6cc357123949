/* Atomic outputs (attn_io.h): a committed file has every byte; an aborted or failed one
 * leaves the target as it was and no temporary file; attn_same_file's identity rules. */
#include "attn_io.h"
#include "attn_npy.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static const char *path_of(const char *name) {
    static char buf[16][512];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void put(const char *p, const char *text) {
    FILE *f = fopen(p, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int holds(const char *p, const char *text) {
    char buf[256];
    attn_test_read_file(p, buf, sizeof buf);
    return strcmp(buf, text) == 0;
}

/* entries of dir besides . and .. */
static int n_entries(void) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

int main(void) {
    attn_test_name = "io";
    snprintf(dir, sizeof dir, "/tmp/attn_test_io_XXXXXX");
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return attn_test_finish();
    }
    const char *t = path_of("t.txt");
    attn_out *o;

    /* commit: new file with the content; nothing else in the directory */
    CHECK_OK(attn_out_open(&o, t, ATTN_OUT_TEXT));
    fputs("hello\n", attn_out_file(o));
    CHECK(access(t, F_OK) != 0, "the target does not exist before commit");
    CHECK_OK(attn_out_commit(o));
    CHECK(holds(t, "hello\n"), "committed content");
    CHECK(n_entries() == 1, "only the target in the directory (%d entries)", n_entries());

    /* abort: old content kept, temporary removed */
    CHECK_OK(attn_out_open(&o, t, ATTN_OUT_TEXT));
    fputs("partial", attn_out_file(o));
    attn_out_abort(o);
    CHECK(holds(t, "hello\n"), "abort keeps the old content");
    CHECK(n_entries() == 1, "abort removes the temporary file");

    /* injected ENOSPC after 10 bytes: commit fails with the reason, old content kept */
    setenv("ATTN_FAULT_WRITE_AFTER", "10", 1);
    CHECK_OK(attn_out_open(&o, t, ATTN_OUT_TEXT));
    for (int i = 0; i < 1000; i++) fputs("0123456789", attn_out_file(o));
    CHECK_ERR(attn_out_commit(o), ATTN_E_IO);
    CHECK(strstr(attn_last_error(), "No space left on device") && strstr(attn_last_error(), "t.txt"),
          "message names the file and the reason: %s", attn_last_error());
    /* the same through attn_npy_save */
    float x[64] = {0};
    attn_tensor xt = attn_tensor_f32_2d(x, 8, 8);
    const char *np = path_of("x.npy");
    put(np, "OLD");
    CHECK_ERR(attn_npy_save(np, &xt), ATTN_E_IO);
    unsetenv("ATTN_FAULT_WRITE_AFTER");
    CHECK(holds(t, "hello\n") && holds(np, "OLD"), "failed writes keep the old content");
    CHECK(n_entries() == 2, "failed writes leave no temporary file (%d entries)", n_entries());
    CHECK_OK(attn_npy_save(np, &xt));
    attn_tensor back;
    CHECK_OK(attn_npy_load(&back, np));
    CHECK(back.ndim == 2 && back.shape[0] == 8 && back.shape[1] == 8, "npy saved through attn_out loads back");
    attn_npy_free(&back);

    /* mode kept on replace; symlink followed; a directory refused; /dev/full reports ENOSPC */
    chmod(t, 0604);
    CHECK_OK(attn_out_open(&o, t, ATTN_OUT_TEXT));
    fputs("again\n", attn_out_file(o));
    CHECK_OK(attn_out_commit(o));
    struct stat st;
    CHECK(stat(t, &st) == 0 && (st.st_mode & 0777) == 0604, "mode 0604 kept (got %o)", st.st_mode & 0777);
    const char *ln = path_of("ln.txt");
    CHECK(symlink("t.txt", ln) == 0, "symlink");
    CHECK_OK(attn_out_open(&o, ln, ATTN_OUT_TEXT));
    fputs("via link\n", attn_out_file(o));
    CHECK_OK(attn_out_commit(o));
    CHECK(lstat(ln, &st) == 0 && S_ISLNK(st.st_mode) && holds(t, "via link\n"), "the link's target was replaced");
    CHECK_ERR(attn_out_open(&o, dir, ATTN_OUT_TEXT), ATTN_E_IO);
    CHECK(o == NULL && strstr(attn_last_error(), "Is a directory"), "directory refused: %s", attn_last_error());
    CHECK_ERR(attn_out_open(&o, path_of("no/such/f"), ATTN_OUT_TEXT), ATTN_E_IO);
    CHECK_OK(attn_out_open(&o, "/dev/full", ATTN_OUT_BINARY));
    fputs("x", attn_out_file(o));
    CHECK_ERR(attn_out_commit(o), ATTN_E_IO);
    CHECK(strstr(attn_last_error(), "No space left on device") != NULL, "/dev/full: %s", attn_last_error());
    CHECK_OK(attn_out_open(&o, "/dev/null", ATTN_OUT_BINARY));
    fputs("x", attn_out_file(o));
    CHECK_OK(attn_out_commit(o));
    CHECK(lstat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "/dev/null is still a device");
    CHECK_ERR(attn_out_open(&o, "", ATTN_OUT_TEXT), ATTN_E_INVALID);
    attn_out_abort(NULL);

    /* attn_same_file */
    const char *hl = path_of("hard.txt");
    CHECK(link(t, hl) == 0, "hard link");
    CHECK(attn_same_file(t, hl) == 1, "hard link is the same file");
    CHECK(attn_same_file(t, ln) == 1, "symlink is the same file");
    CHECK(attn_same_file(t, np) == 0, "different files");
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/new.bin", dir);
    snprintf(b, sizeof b, "%s/./new.bin", dir);
    CHECK(attn_same_file(a, b) == 1, "a new file under two spellings");
    CHECK(attn_same_file(a, t) == 0, "a new file is not an existing one");
    CHECK(attn_same_file("-", "-") == 1, "stdout is stdout");

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    return attn_test_finish();
}
