/* CTranslate2's batch order (libstdc++ std::sort emulation), see ct2compat.h. */
#include "ct2compat/ct2compat.h"

#include <math.h>
#include <string.h>

/* CTranslate2's batch order: its rebatching sorts the source indices with
 * std::sort(longer first). That sort (GCC's libstdc++, which builds CTranslate2's Linux wheels)
 * is an introsort and is not stable: sources of equal length come out in the order it leaves
 * them, and which batch a source lands in decides its padding, which the int8 model's attention
 * arithmetic depends on. The same algorithm, on the same comparisons, gives the same order:
 * quicksort with the median of (second, middle, last) moved to the front as pivot and an
 * unguarded partition, while a range holds more than 16 elements and the depth allows
 * (2 floor(log2 n)), heapsort when it does not, then an insertion sort (unguarded past the
 * first 16). ATTN__LONGER(a, b): source a has more tokens than b. */
#define ATTN__LONGER(a, b) (len[a] > len[b])
static void attn__swap_idx(int64_t *a, int64_t *b) {
    int64_t t = *a;
    *a = *b;
    *b = t;
}
static void attn__heap_adjust(int64_t *f, int64_t hole, int64_t n, int64_t value, const int64_t *len) {
    const int64_t top = hole;
    int64_t child = hole;
    while (child < (n - 1) / 2) {
        child = 2 * (child + 1);
        if (ATTN__LONGER(f[child], f[child - 1])) child--;
        f[hole] = f[child];
        hole = child;
    }
    if ((n & 1) == 0 && child == (n - 2) / 2) {
        child = 2 * (child + 1);
        f[hole] = f[child - 1];
        hole = child - 1;
    }
    int64_t parent = (hole - 1) / 2;
    while (hole > top && ATTN__LONGER(f[parent], value)) {
        f[hole] = f[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    f[hole] = value;
}
static void attn__heapsort_idx(int64_t *f, int64_t n, const int64_t *len) {
    if (n < 2) return;
    for (int64_t parent = (n - 2) / 2;; parent--) {
        attn__heap_adjust(f, parent, n, f[parent], len);
        if (parent == 0) break;
    }
    for (int64_t last = n - 1; last > 0; last--) {
        int64_t value = f[last];
        f[last] = f[0];
        attn__heap_adjust(f, 0, last, value, len);
    }
}
static void attn__introsort_loop(int64_t *first, int64_t *last, int64_t depth, const int64_t *len) {
    while (last - first > 16) {
        if (depth == 0) {
            attn__heapsort_idx(first, last - first, len);
            return;
        }
        depth--;
        int64_t *a = first + 1, *b = first + (last - first) / 2, *c = last - 1;
        if (ATTN__LONGER(*a, *b)) {
            if (ATTN__LONGER(*b, *c)) attn__swap_idx(first, b);
            else if (ATTN__LONGER(*a, *c)) attn__swap_idx(first, c);
            else attn__swap_idx(first, a);
        } else if (ATTN__LONGER(*a, *c)) attn__swap_idx(first, a);
        else if (ATTN__LONGER(*b, *c)) attn__swap_idx(first, c);
        else attn__swap_idx(first, b);
        int64_t *lo = first + 1, *hi = last;
        for (;;) {
            while (ATTN__LONGER(*lo, *first)) lo++;
            hi--;
            while (ATTN__LONGER(*first, *hi)) hi--;
            if (!(lo < hi)) break;
            attn__swap_idx(lo, hi);
            lo++;
        }
        attn__introsort_loop(lo, last, depth, len);
        last = lo;
    }
}
static void attn__linear_insert(int64_t *p, const int64_t *len) {
    int64_t v = *p;
    while (ATTN__LONGER(v, p[-1])) {
        *p = p[-1];
        p--;
    }
    *p = v;
}
void attn__ct2_batch_order(int64_t *idx, int64_t n, const int64_t *len) {
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    if (n < 2) return;
    int64_t lg = 0;
    while ((n >> (lg + 1)) > 0) lg++;
    attn__introsort_loop(idx, idx + n, 2 * lg, len);
    const int64_t head = n > 16 ? 16 : n;
    for (int64_t i = 1; i < head; i++) {
        if (ATTN__LONGER(idx[i], idx[0])) {
            int64_t v = idx[i];
            memmove(idx + 1, idx, sizeof(int64_t) * (size_t)i);
            idx[0] = v;
        } else
            attn__linear_insert(idx + i, len);
    }
    for (int64_t i = head; i < n; i++) attn__linear_insert(idx + i, len);
}
#undef ATTN__LONGER
