/* Chained-block bump allocator (see attn_core.h). */
#include "attn_core.h"
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

struct attn_arena_block {
    attn_arena_block *prev;
    size_t size;   /* usable bytes in data */
    size_t offset; /* bytes used */
    unsigned char *data;
};

#define ATTN__ALIGN 64

int attn_arena_init(attn_arena *a, size_t block_bytes) {
    if (!a) return attn_set_error(ATTN_E_INVALID, "attn_arena_init: arena is NULL");
    memset(a, 0, sizeof *a);
    a->block_bytes = block_bytes ? block_bytes : ((size_t)1 << 20);
    return ATTN_OK;
}

void *attn_arena_alloc(attn_arena *a, size_t bytes) {
    if (!a) {
        attn_set_error(ATTN_E_INVALID, "attn_arena_alloc: arena is NULL");
        return NULL;
    }
    if (bytes > ((size_t)1 << 46)) {
        attn_set_error(ATTN_E_NOMEM, "attn_arena_alloc: request of %zu bytes is too large", bytes);
        return NULL;
    }
    size_t need = (bytes + ATTN__ALIGN - 1) & ~(size_t)(ATTN__ALIGN - 1);
    if (need == 0) need = ATTN__ALIGN;
    attn_arena_block *b = a->head;
    if (!b || b->offset + need > b->size) {
        size_t sz = need > a->block_bytes ? need : a->block_bytes;
        attn_arena_block *nb = (attn_arena_block *)malloc(sizeof *nb);
        if (!nb) {
            attn_set_error(ATTN_E_NOMEM, "attn_arena_alloc: out of memory");
            return NULL;
        }
        nb->data = (unsigned char *)aligned_alloc(ATTN__ALIGN, sz);
        if (!nb->data) {
            free(nb);
            attn_set_error(ATTN_E_NOMEM, "attn_arena_alloc: out of memory allocating %zu bytes", sz);
            return NULL;
        }
        nb->size = sz;
        nb->offset = 0;
        nb->prev = b;
        a->head = nb;
        b = nb;
    }
    void *p = b->data + b->offset;
    b->offset += need;
    a->used_bytes += need;
    if (a->used_bytes > a->peak_bytes) a->peak_bytes = a->used_bytes;
    return p;
}

float *attn_arena_alloc_f32(attn_arena *a, size_t n) {
    if (n > ((size_t)1 << 44)) {
        attn_set_error(ATTN_E_NOMEM, "attn_arena_alloc_f32: %zu floats is too large", n);
        return NULL;
    }
    float *p = (float *)attn_arena_alloc(a, n * sizeof(float));
    if (p) memset(p, 0, n * sizeof(float));
    return p;
}

attn_arena_mark attn_arena_get_mark(const attn_arena *a) {
    attn_arena_mark m;
    m.block = a->head;
    m.offset = a->head ? a->head->offset : 0;
    m.used_bytes = a->used_bytes;
    return m;
}

void attn_arena_release(attn_arena *a, attn_arena_mark m) {
    while (a->head && a->head != m.block) {
        attn_arena_block *p = a->head->prev;
        free(a->head->data);
        free(a->head);
        a->head = p;
    }
    if (a->head) a->head->offset = m.offset;
    a->used_bytes = m.used_bytes;
}

void attn_arena_reset(attn_arena *a) {
    attn_arena_mark m = {NULL, 0, 0};
    attn_arena_release(a, m);
}

void attn_arena_free(attn_arena *a) { attn_arena_reset(a); }

float *attn_arena_alloc_f32_uninit(attn_arena *a, size_t n) {
    if (n > ((size_t)1 << 44)) {
        attn_set_error(ATTN_E_NOMEM, "attn_arena_alloc_f32_uninit: %zu floats is too large", n);
        return NULL;
    }
    return (float *)attn_arena_alloc(a, n * sizeof(float));
}

void attn__free_each(void *const *ptrs, size_t n) {
    for (size_t i = 0; i < n; i++) free(ptrs[i]);
}
