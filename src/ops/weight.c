/* A weight matrix of any storage type behind one handle (see include/attn_weight.h). */
#include "attn_weight.h"
#include "core/internal.h"
#include "ct2compat/ct2compat.h"
#include "ops/quant_internal.h"
#include "ops/weight_internal.h"

#include <stdint.h>
#include <string.h>

attn_weight attn_weight_f32(const float *w, const float *bias, int64_t rows, int64_t cols) {
    return (attn_weight){ATTN_QT_F32, rows, cols, w, bias, NULL, NULL, ATTN_WKERNEL_AUTO, NULL, ATTN_QT_F32, NULL};
}

attn_weight attn_weight_from_qmatrix(const attn_qmatrix *q, const float *bias, attn_wkernel kernel) {
    if (!q) return (attn_weight){ATTN_QT_F32, 0, 0, NULL, NULL, NULL, NULL, ATTN_WKERNEL_AUTO, NULL, ATTN_QT_F32, NULL};
    return (attn_weight){q->type, q->rows, q->cols, q->data, bias, NULL, NULL, kernel, NULL, ATTN_QT_F32, NULL};
}

int attn_weight_present(const attn_weight *w) { return w && w->data ? 1 : 0; }

/* the block kernels (attn_qmatmul) serve every GGML type, and F32 unless the kernel is AUTO */
static int attn__uses_blocks(const attn_weight *w) {
    return w->kernel == ATTN_WKERNEL_BLOCKS || (w->kernel == ATTN_WKERNEL_AUTO && w->type != ATTN_QT_F32);
}

static int attn__check(const float *y, const float *x, int64_t M, const attn_weight *w) {
    if (!w || !y || (!x && M > 0)) return attn_set_error(ATTN_E_INVALID, "weight matmul: NULL argument");
    if (!w->data) return attn_set_error(ATTN_E_INVALID, "weight matmul: the weight holds no matrix");
    if (M < 0 || w->rows < 0 || w->cols < 0) return attn_set_error(ATTN_E_INVALID, "weight matmul: negative size");
    if (w->kernel == ATTN_WKERNEL_CT2) {
        if (w->type != ATTN_QT_F32 && w->type != ATTN_QT_I8)
            return attn_set_error(ATTN_E_INVALID, "weight matmul: the CTranslate2 kernel takes float32 or int8 weights, not %s",
                                  attn_qtype_name(w->type));
    } else if (w->type == ATTN_QT_I8 || w->kernel < ATTN_WKERNEL_AUTO || w->kernel > ATTN_WKERNEL_CT2) {
        return attn_set_error(ATTN_E_INVALID, "weight matmul: int8 + scale weights need the CTranslate2 kernel");
    }
    return ATTN_OK;
}

static void attn__add_bias(float *y, int64_t M, const attn_weight *w) {
    if (!w->bias) return;
    const int64_t N = w->rows;
    for (int64_t m = 0; m < M; m++) {
        float *r = y + m * N;
        for (int64_t n = 0; n < N; n++) r[n] += w->bias[n];
    }
}

static int attn__activate_rows(float *y, int64_t M, int64_t N, attn_activation act) {
    if (act == ATTN_ACT_IDENTITY || M * N == 0) return ATTN_OK;
    attn_tensor t = attn_tensor_f32_2d(y, M, N);
    return attn_activate(&t, &t, act);
}

int attn_weight_matmul(float *y, const float *x, int64_t M, const attn_weight *w, attn_activation act, int n_threads) {
    ATTN_TRY(attn__check(y, x, M, w));
    if (w->half && M >= 1 && M <= ATTN__SKINNY_MAX_M) {
        /* a few rows from the 16-bit copy: half the bytes of the float32 rows, the same products
         * as the skinny kernel on them (Whisper's [51864, 384] vocabulary projection: OpenBLAS
         * repacked the whole matrix at every beam step) */
        if (w->half_type != ATTN_QT_F16 && w->half_type != ATTN_QT_BF16)
            return attn_set_error(ATTN_E_INVALID, "weight matmul: the 16-bit copy must be float16 or bfloat16, not %s", attn_qtype_name(w->half_type));
        ATTN_TRY(attn__skinny_matmul(y, x, w->half, w->half_type, M, w->rows, w->cols, n_threads));
        attn__add_bias(y, M, w);
        return attn__activate_rows(y, M, w->rows, act);
    }
    if (w->type == ATTN_QT_F32 && M >= 1 && M <= ATTN__SKINNY_MAX_M && w->kernel == ATTN_WKERNEL_CT2) {
        /* a few rows (decoding, beams): each weight row streamed once for all of them, not
         * packed by OpenBLAS first (ops/skinny.c). Only for the CTranslate2 decoders: the AUTO
         * kernel (encoders: BERT, ViT; float32 GGUF) stays on OpenBLAS at every M, so that a
         * sentence embedded alone is bit-identical to the same sentence in a batch of any size
         * where OpenBLAS runs its SkylakeX sgemm (its Haswell / Zen kernels round a row by its
         * place in a 12-row tile: there within ~1e-7; test_serve) */
        /* the CTranslate2 kernel keeps its products under 2^22 multiply-adds on this thread, as
         * attn__ct2_gemm does (a decoding step's layers; the vocabulary projection splits) */
        const int ct2_small = w->kernel == ATTN_WKERNEL_CT2 && (double)M * (double)w->rows * (double)w->cols < 4194304.0;
        ATTN_TRY(attn__skinny_matmul(y, x, w->data, ATTN_QT_F32, M, w->rows, w->cols, ct2_small ? 1 : n_threads));
        attn__add_bias(y, M, w);
        return attn__activate_rows(y, M, w->rows, act);
    }
    if (w->kernel == ATTN_WKERNEL_CT2) return attn__ct2_gemm(y, x, M, w, act);
    if (attn__uses_blocks(w)) {
        attn_qmatrix q = {w->type, w->data, w->rows, w->cols};
        float *const ys[1] = {y};
        const void *const ps[1] = {w->strips};
        if (w->strips) ATTN_TRY(attn__qmatmul_packed(ys, x, &q, ps, 1, M, n_threads));
        else ATTN_TRY(attn_qmatmul(y, x, &q, M, n_threads));
        attn__add_bias(y, M, w);
        return attn__activate_rows(y, M, w->rows, act);
    }
    /* float32, AUTO: attn_linear (OpenBLAS, split across attn's threads) */
    attn_tensor tx = attn_tensor_f32_2d((float *)x, M, w->cols), tw = attn_tensor_f32_2d((float *)w->data, w->rows, w->cols);
    attn_tensor ty = attn_tensor_f32_2d(y, M, w->rows), tb = attn_tensor_f32_1d((float *)w->bias, w->rows);
    ATTN_TRY(attn_linear(&ty, &tx, &tw, w->bias ? &tb : NULL));
    return attn__activate_rows(y, M, w->rows, act);
}

int attn__weight_on_blas(const attn_weight *w) { return w && w->data && w->type == ATTN_QT_F32 && w->kernel == ATTN_WKERNEL_AUTO; }

int attn__weight_matmul_acc(float *y, const float *x, int64_t M, const attn_weight *w) {
    ATTN_TRY(attn__check(y, x, M, w));
    if (!attn__weight_on_blas(w)) return attn_set_error(ATTN_E_INVALID, "weight matmul_acc: needs float32 weights on the AUTO kernel");
    attn__linear_f32(y, x, (const float *)w->data, w->bias, M, w->rows, w->cols, attn_get_num_threads(), 1);
    return ATTN_OK;
}

int attn_weight_matmul_n(float *const *y, const float *x, const attn_weight *const *w, int count, int64_t M, int n_threads) {
    if (!y || !w || count < 1 || count > 8) return attn_set_error(ATTN_E_INVALID, "weight matmul_n: need 1..8 weights");
    int blocks = 1;
    for (int i = 0; i < count; i++) {
        ATTN_TRY(attn__check(y[i], x, M, w[i]));
        if (w[i]->cols != w[0]->cols) return attn_set_error(ATTN_E_INVALID, "weight matmul_n: weights differ in columns");
        blocks = blocks && attn__uses_blocks(w[i]);
    }
    if (!blocks) {
        for (int i = 0; i < count; i++) ATTN_TRY(attn_weight_matmul(y[i], x, M, w[i], ATTN_ACT_IDENTITY, n_threads));
        return ATTN_OK;
    }
    attn_qmatrix q[8];
    const void *ps[8];
    int packed = 1;
    for (int i = 0; i < count; i++) {
        q[i] = (attn_qmatrix){w[i]->type, w[i]->data, w[i]->rows, w[i]->cols};
        ps[i] = w[i]->strips;
        packed = packed && ps[i];
    }
    if (packed) ATTN_TRY(attn__qmatmul_packed(y, x, q, ps, count, M, n_threads));
    else ATTN_TRY(attn_qmatmul_n(y, x, q, count, M, n_threads));
    for (int i = 0; i < count; i++) attn__add_bias(y[i], M, w[i]);
    return ATTN_OK;
}

size_t attn_weight_strips_bytes(const attn_weight *w) {
    if (!w || !w->data || !attn__uses_blocks(w) || !attn__qpack_strips_ok(w->type, w->rows, w->cols) || !attn__qpack_strips_used()) return 0;
    return (size_t)w->rows * attn_qtype_row_bytes(w->type, w->cols);
}

int attn_weight_pack_strips(attn_weight *w, void *dst) {
    if (!w || !dst) return attn_set_error(ATTN_E_INVALID, "weight pack: NULL argument");
    if ((uintptr_t)dst % 64) return attn_set_error(ATTN_E_INVALID, "weight pack: the buffer is not 64-byte aligned");
    if (!attn_weight_strips_bytes(w))
        return attn_set_error(ATTN_E_INVALID, "weight pack: a %s [%lld, %lld] weight is not packed for the %s kernel", attn_qtype_name(w->type),
                              (long long)w->rows, (long long)w->cols, attn_quant_kernel_name());
    attn__qpack_strips((uint8_t *)dst, (const uint8_t *)w->data, w->type, w->rows, w->cols);
    w->strips = dst;
    return ATTN_OK;
}
