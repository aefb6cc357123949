/* Tensor views: construction, transposes, head split/merge, strided copy. */
#include "attn_core.h"
#include "core/internal.h"

#include <string.h>

size_t attn_dtype_size(attn_dtype dt) {
    switch (dt) {
    case ATTN_F32: return 4;
    case ATTN_F16: return 2;
    case ATTN_BF16: return 2;
    case ATTN_BOOL: return 1;
    case ATTN_I32: return 4;
    case ATTN_I64: return 8;
    case ATTN_F64: return 8;
    default: return 0;
    }
}

const char *attn_dtype_name(attn_dtype dt) {
    switch (dt) {
    case ATTN_F32: return "float32";
    case ATTN_F16: return "float16";
    case ATTN_BF16: return "bfloat16";
    case ATTN_BOOL: return "bool";
    case ATTN_I32: return "int32";
    case ATTN_I64: return "int64";
    case ATTN_F64: return "float64";
    default: return "unknown";
    }
}

/* Row-major strides. For a zero-size tensor whose other extents multiply past int64 (a
 * NumPy file may say (2**40, 4, 0, 2**62)), the strides that would overflow are set to 0:
 * no element is ever addressed. */
static void attn__contig_strides(attn_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        int64_t e = t->shape[i] > 0 ? t->shape[i] : 1, ns;
        if (__builtin_mul_overflow(s, e, &ns)) ns = 0;
        s = ns;
    }
}

int attn_tensor_make(attn_tensor *out, void *data, attn_dtype dtype, int ndim,
                     const int64_t *shape) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "attn_tensor_make: out is NULL");
    if (ndim < 0 || ndim > ATTN_MAX_DIMS)
        return attn_set_error(ATTN_E_INVALID, "attn_tensor_make: ndim %d not in 0..%d", ndim,
                              ATTN_MAX_DIMS);
    if (attn_dtype_size(dtype) == 0)
        return attn_set_error(ATTN_E_DTYPE, "attn_tensor_make: unknown dtype %d", (int)dtype);
    memset(out, 0, sizeof *out);
    out->data = data;
    out->dtype = dtype;
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return attn_set_error(ATTN_E_INVALID, "attn_tensor_make: extent %d is negative (%lld)",
                                  i, (long long)shape[i]);
        out->shape[i] = shape[i];
    }
    int64_t n = 1;
    int zero = 0, overflow = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) zero = 1;
        else if (__builtin_mul_overflow(n, shape[i], &n)) overflow = 1;
    }
    if (overflow && !zero)
        return attn_set_error(ATTN_E_INVALID, "attn_tensor_make: the number of elements overflows int64");
    attn__contig_strides(out);
    return ATTN_OK;
}

static attn_tensor attn__f32(float *data, int ndim, const int64_t *shape) {
    attn_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = ATTN_F32;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.shape[i] = shape[i];
    attn__contig_strides(&t);
    return t;
}

attn_tensor attn_tensor_f32_1d(float *data, int64_t d0) {
    int64_t s[1] = {d0};
    return attn__f32(data, 1, s);
}
attn_tensor attn_tensor_f32_2d(float *data, int64_t d0, int64_t d1) {
    int64_t s[2] = {d0, d1};
    return attn__f32(data, 2, s);
}
attn_tensor attn_tensor_f32_3d(float *data, int64_t d0, int64_t d1, int64_t d2) {
    int64_t s[3] = {d0, d1, d2};
    return attn__f32(data, 3, s);
}
attn_tensor attn_tensor_f32_4d(float *data, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    int64_t s[4] = {d0, d1, d2, d3};
    return attn__f32(data, 4, s);
}

int64_t attn_tensor_numel(const attn_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

int attn_tensor_is_contiguous(const attn_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return 0;
        s *= t->shape[i];
    }
    return 1;
}

int attn_tensor_transpose(attn_tensor *out, const attn_tensor *t, int d0, int d1) {
    if (!out || !t) return attn_set_error(ATTN_E_INVALID, "attn_tensor_transpose: NULL argument");
    if (d0 < 0) d0 += t->ndim;
    if (d1 < 0) d1 += t->ndim;
    if (d0 < 0 || d0 >= t->ndim || d1 < 0 || d1 >= t->ndim)
        return attn_set_error(ATTN_E_INVALID, "attn_tensor_transpose: dims (%d, %d) out of range for %d-D tensor",
                              d0, d1, t->ndim);
    attn_tensor r = *t;
    r.shape[d0] = t->shape[d1];
    r.shape[d1] = t->shape[d0];
    r.stride[d0] = t->stride[d1];
    r.stride[d1] = t->stride[d0];
    *out = r;
    return ATTN_OK;
}

int attn_tensor_split_heads(attn_tensor *out, const attn_tensor *t, int64_t n_heads) {
    if (!out || !t) return attn_set_error(ATTN_E_INVALID, "attn_tensor_split_heads: NULL argument");
    if (n_heads <= 0)
        return attn_set_error(ATTN_E_INVALID, "attn_tensor_split_heads: n_heads must be > 0, got %lld",
                              (long long)n_heads);
    if (t->ndim != 3)
        return attn_set_error(ATTN_E_SHAPE, "attn_tensor_split_heads: expected [B, L, H*D], got %d-D", t->ndim);
    if (t->shape[2] % n_heads != 0)
        return attn_set_error(ATTN_E_SHAPE, "attn_tensor_split_heads: last extent %lld is not a multiple of n_heads %lld",
                              (long long)t->shape[2], (long long)n_heads);
    if (t->shape[2] > 1 && t->stride[2] != 1)
        return attn_set_error(ATTN_E_INVALID, "attn_tensor_split_heads: last dim must be unit-stride");
    attn_tensor r = *t;
    int64_t D = t->shape[2] / n_heads;
    r.ndim = 4;
    r.shape[0] = t->shape[0];
    r.shape[1] = n_heads;
    r.shape[2] = t->shape[1];
    r.shape[3] = D;
    r.stride[0] = t->stride[0];
    r.stride[1] = D;
    r.stride[2] = t->stride[1];
    r.stride[3] = 1;
    *out = r;
    return ATTN_OK;
}

int attn_tensor_merge_heads(attn_tensor *out, const attn_tensor *t) {
    if (!out || !t) return attn_set_error(ATTN_E_INVALID, "attn_tensor_merge_heads: NULL argument");
    if (t->ndim != 4)
        return attn_set_error(ATTN_E_SHAPE, "attn_tensor_merge_heads: expected [B, H, L, D], got %d-D", t->ndim);
    int64_t H = t->shape[1], D = t->shape[3];
    int ok = (D <= 1 || t->stride[3] == 1) && (H <= 1 || t->stride[1] == D);
    if (!ok)
        return attn_set_error(ATTN_E_SHAPE,
                              "attn_tensor_merge_heads: strides (%lld, %lld, %lld, %lld) are not a [B, L, H, D] layout; copy first",
                              (long long)t->stride[0], (long long)t->stride[1], (long long)t->stride[2],
                              (long long)t->stride[3]);
    attn_tensor r = *t;
    r.ndim = 3;
    r.shape[0] = t->shape[0];
    r.shape[1] = t->shape[2];
    r.shape[2] = H * D;
    r.stride[0] = t->stride[0];
    r.stride[1] = t->stride[2];
    r.stride[2] = 1;
    *out = r;
    return ATTN_OK;
}

int64_t attn_tensor_offset(const attn_tensor *t, const int64_t *idx) {
    int64_t o = 0;
    for (int i = 0; i < t->ndim; i++) o += idx[i] * t->stride[i];
    return o;
}

/* See core/internal.h. */
int attn__check_same_shape(const attn_tensor *dst, const attn_tensor *src, const char *who) {
    if (dst->ndim != src->ndim) return attn_set_error(ATTN_E_SHAPE, "%s: %d-D vs %d-D", who, dst->ndim, src->ndim);
    for (int i = 0; i < dst->ndim; i++)
        if (dst->shape[i] != src->shape[i])
            return attn_set_error(ATTN_E_SHAPE, "%s: extent %d differs (%lld vs %lld)", who, i, (long long)dst->shape[i],
                                  (long long)src->shape[i]);
    return ATTN_OK;
}

int attn_tensor_copy(attn_tensor *dst, const attn_tensor *src) {
    if (!dst || !src) return attn_set_error(ATTN_E_INVALID, "attn_tensor_copy: NULL argument");
    if (dst->dtype != src->dtype)
        return attn_set_error(ATTN_E_DTYPE, "attn_tensor_copy: dtype %s vs %s", attn_dtype_name(dst->dtype),
                              attn_dtype_name(src->dtype));
    ATTN_TRY(attn__check_same_shape(dst, src, "attn_tensor_copy"));
    int64_t n = attn_tensor_numel(src);
    if (n == 0) return ATTN_OK;
    size_t es = attn_dtype_size(src->dtype);
    int64_t idx[ATTN_MAX_DIMS] = {0};
    char *d = (char *)dst->data;
    const char *s = (const char *)src->data;
    int last = src->ndim - 1;
    if (last >= 0 && (src->shape[last] == 1 || (src->stride[last] == 1 && dst->stride[last] == 1))) {
        /* rows along the last dim are contiguous in both: copy a row at a time */
        int64_t row = src->shape[last], rows = n / row;
        for (int64_t r = 0; r < rows; r++) {
            memcpy(d + attn_tensor_offset(dst, idx) * (int64_t)es, s + attn_tensor_offset(src, idx) * (int64_t)es,
                   es * (size_t)row);
            for (int i = last - 1; i >= 0; i--) {
                if (++idx[i] < src->shape[i]) break;
                idx[i] = 0;
            }
        }
        return ATTN_OK;
    }
    for (int64_t e = 0; e < n; e++) {
        memcpy(d + attn_tensor_offset(dst, idx) * (int64_t)es, s + attn_tensor_offset(src, idx) * (int64_t)es, es);
        for (int i = src->ndim - 1; i >= 0; i--) {
            if (++idx[i] < src->shape[i]) break;
            idx[i] = 0;
        }
    }
    return ATTN_OK;
}
