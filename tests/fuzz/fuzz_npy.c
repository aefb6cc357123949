/* libFuzzer target for the .npy reader: the input is written to an in-memory file (memfd) and
 * loaded through its /proc path; a successful load is checked for consistency and saved back.
 * Any crash, sanitizer report or leak is a bug. */
#include "attn_npy.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz_npy", 0);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    attn_tensor t;
    if (attn_npy_load(&t, path) == ATTN_OK) {
        if (t.ndim < 0 || t.ndim > ATTN_MAX_DIMS || attn_dtype_size(t.dtype) == 0) __builtin_trap();
        int64_t n = attn_tensor_numel(&t);
        if (n < 0 || (n > 0 && !t.data)) __builtin_trap();
        volatile unsigned char sink = 0;
        size_t bytes = (size_t)n * attn_dtype_size(t.dtype);
        for (size_t i = 0; i < bytes; i += 97) sink ^= ((const unsigned char *)t.data)[i];
        (void)sink;
        int out = memfd_create("fuzz_npy_out", 0);
        if (out >= 0) {
            char op[64];
            snprintf(op, sizeof op, "/proc/self/fd/%d", out);
            attn_npy_save(op, &t);
            close(out);
        }
        attn_npy_free(&t);
    }
    close(fd);
    return 0;
}
