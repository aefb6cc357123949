/* Block-quantized matrices: dequantization, activation quantization, the portable kernel and the
 * run-time kernel choice (see include/attn_quant.h). */
#include "attn_quant.h"
#include "core/cpu.h"
#include "core/internal.h"
#include "core/pool.h"
#include "core/simd_math.h"
#include "ops/quant_internal.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *attn_qtype_name(attn_qtype t) {
    switch (t) {
    case ATTN_QT_F32: return "f32";
    case ATTN_QT_F16: return "f16";
    case ATTN_QT_BF16: return "bf16";
    case ATTN_QT_Q8_0: return "q8_0";
    case ATTN_QT_Q4_0: return "q4_0";
    case ATTN_QT_Q4_1: return "q4_1";
    case ATTN_QT_Q5_0: return "q5_0";
    case ATTN_QT_Q5_1: return "q5_1";
    case ATTN_QT_Q2_K: return "q2_k";
    case ATTN_QT_Q3_K: return "q3_k";
    case ATTN_QT_Q4_K: return "q4_k";
    case ATTN_QT_Q5_K: return "q5_k";
    case ATTN_QT_Q6_K: return "q6_k";
    }
    return "unknown";
}

int64_t attn_qtype_block(attn_qtype t) {
    switch (t) {
    case ATTN_QT_F32: case ATTN_QT_F16: case ATTN_QT_BF16: return 1;
    case ATTN_QT_Q8_0: case ATTN_QT_Q4_0: case ATTN_QT_Q4_1: case ATTN_QT_Q5_0: case ATTN_QT_Q5_1: return 32;
    case ATTN_QT_Q2_K: case ATTN_QT_Q3_K: case ATTN_QT_Q4_K: case ATTN_QT_Q5_K: case ATTN_QT_Q6_K: return 256;
    }
    return 0;
}

size_t attn__qtype_block_bytes(attn_qtype t) {
    switch (t) {
    case ATTN_QT_F32: return 4;
    case ATTN_QT_F16: case ATTN_QT_BF16: return 2;
    case ATTN_QT_Q8_0: return 34;
    case ATTN_QT_Q4_0: return 18;
    case ATTN_QT_Q4_1: return 20;
    case ATTN_QT_Q5_0: return 22;
    case ATTN_QT_Q5_1: return 24;
    case ATTN_QT_Q2_K: return 84;
    case ATTN_QT_Q3_K: return 110;
    case ATTN_QT_Q4_K: return 144;
    case ATTN_QT_Q5_K: return 176;
    case ATTN_QT_Q6_K: return 210;
    }
    return 0;
}
#define block_bytes attn__qtype_block_bytes

size_t attn_qtype_row_bytes(attn_qtype t, int64_t cols) {
    int64_t bl = attn_qtype_block(t);
    if (bl == 0 || cols < 0 || cols % bl) return 0;
    return (size_t)(cols / bl) * block_bytes(t);
}

static float h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return attn__f16_to_f32(h);
}

static void dequant_row(float *out, const uint8_t *row, attn_qtype t, int64_t cols) {
    switch (t) {
    case ATTN_QT_F32: memcpy(out, row, sizeof(float) * (size_t)cols); return;
    case ATTN_QT_F16:
        for (int64_t i = 0; i < cols; i++) out[i] = h2f(row + 2 * i);
        return;
    case ATTN_QT_BF16:
        for (int64_t i = 0; i < cols; i++) {
            uint16_t h;
            memcpy(&h, row + 2 * i, 2);
            out[i] = attn__bf16_to_f32(h);
        }
        return;
    case ATTN_QT_Q8_0:
        for (int64_t b = 0; b < cols / 32; b++) {
            const uint8_t *blk = row + b * 34;
            float d = h2f(blk);
            for (int j = 0; j < 32; j++) out[b * 32 + j] = d * (float)(int8_t)blk[2 + j];
        }
        return;
    case ATTN_QT_Q4_0:
    case ATTN_QT_Q4_1:
        for (int64_t b = 0; b < cols / 32; b++) {
            const uint8_t *blk = row + b * block_bytes(t);
            float d = h2f(blk), m = t == ATTN_QT_Q4_1 ? h2f(blk + 2) : 0.0f;
            const uint8_t *qs = blk + (t == ATTN_QT_Q4_1 ? 4 : 2);
            int off = t == ATTN_QT_Q4_0 ? 8 : 0;
            for (int j = 0; j < 16; j++) {
                out[b * 32 + j] = d * (float)((qs[j] & 15) - off) + m;
                out[b * 32 + j + 16] = d * (float)((qs[j] >> 4) - off) + m;
            }
        }
        return;
    default: attn__dequant_row_ext(out, row, t, cols); return;
    }
}

static int check_matrix(const attn_qmatrix *w, const char *op) {
    if (!w || (!w->data && w->rows > 0 && w->cols > 0)) return attn_set_error(ATTN_E_INVALID, "%s: matrix is NULL", op);
    if (w->rows < 0 || w->cols < 0) return attn_set_error(ATTN_E_INVALID, "%s: negative matrix extent", op);
    if (attn_qtype_block(w->type) == 0) return attn_set_error(ATTN_E_INVALID, "%s: unknown matrix type %d", op, (int)w->type);
    if (w->cols % attn_qtype_block(w->type))
        return attn_set_error(ATTN_E_INVALID, "%s: %s matrix with %lld columns (not a multiple of %lld)", op, attn_qtype_name(w->type),
                              (long long)w->cols, (long long)attn_qtype_block(w->type));
    return ATTN_OK;
}

int attn_qmatrix_dequantize_rows(float *out, const attn_qmatrix *w, int64_t r0, int64_t n) {
    ATTN_TRY(check_matrix(w, "dequantize"));
    if (!out && n > 0) return attn_set_error(ATTN_E_INVALID, "dequantize: out is NULL");
    if (r0 < 0 || n < 0 || r0 + n > w->rows)
        return attn_set_error(ATTN_E_RANGE, "dequantize: rows [%lld, %lld) outside [0, %lld)", (long long)r0, (long long)(r0 + n),
                              (long long)w->rows);
    size_t rb = attn_qtype_row_bytes(w->type, w->cols);
    for (int64_t i = 0; i < n; i++) dequant_row(out + i * w->cols, (const uint8_t *)w->data + (size_t)(r0 + i) * rb, w->type, w->cols);
    return ATTN_OK;
}

/* ---------------------------------------------------------------- activation quantization */

void attn__quantize_row_portable(attn__q8blk *q, const float *x, int64_t nb) {
    for (int64_t b = 0; b < nb; b++) {
        const float *v = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(v[j]));
        float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int qi = (int)roundf(v[j] * id);
            q[b].q[j] = (int8_t)qi;
            sum += qi;
        }
        q[b].d = d;
        q[b].s = d * (float)sum;
    }
}

/* ---------------------------------------------------------------- portable kernel */

static void qdot_portable(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb,
                          int64_t r0, int64_t r1, attn_qtype t) {
    const size_t bs = block_bytes(t);
    for (int64_t m = 0; m < M; m++)
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *row = W + (size_t)r * rb;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + (size_t)b * bs;
                const attn__q8blk *xb = xq + m * nb + b;
                const float d = h2f(blk);
                int32_t dot = 0;
                if (t == ATTN_QT_Q8_0) {
                    for (int j = 0; j < 32; j++) dot += (int32_t)(int8_t)blk[2 + j] * xb->q[j];
                    acc += (float)dot * (d * xb->d);
                } else if (t == ATTN_QT_Q5_0 || t == ATTN_QT_Q5_1) {
                    /* 5-bit values 0..31: nibble j (low for j < 16) | bit j of qh << 4 */
                    const int one = t == ATTN_QT_Q5_1;
                    uint32_t qh;
                    memcpy(&qh, blk + 2 + 2 * one, 4);
                    const uint8_t *qs = blk + 6 + 2 * one;
                    for (int j = 0; j < 16; j++)
                        dot += (int32_t)((qs[j] & 15) | ((qh >> j) & 1) << 4) * xb->q[j] +
                               (int32_t)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) * xb->q[j + 16];
                    const float mm = one ? h2f(blk + 2) : -16.0f * d;
                    acc += (float)dot * (d * xb->d) + mm * xb->s;
                } else {
                    const uint8_t *qs = blk + (t == ATTN_QT_Q4_1 ? 4 : 2);
                    for (int j = 0; j < 16; j++) dot += (int32_t)(qs[j] & 15) * xb->q[j] + (int32_t)(qs[j] >> 4) * xb->q[j + 16];
                    const float mm = t == ATTN_QT_Q4_1 ? h2f(blk + 2) : -8.0f * d;
                    acc += (float)dot * (d * xb->d) + mm * xb->s;
                }
            }
            y[m * ldy + r] = acc;
        }
}

/* Q5_0 / Q5_1 run in the kernels of this file (the legacy 32-value tiles), not quant_kq.c's */
static inline int ext_kq(attn_qtype t) { return attn__qtype_ext(t) && t != ATTN_QT_Q5_0 && t != ATTN_QT_Q5_1; }

/* ---------------------------------------------------------------- dispatch */

int attn_qkernel_available(attn_qkernel k) {
#if defined(__x86_64__) || defined(__i386__)
    /* every AVX2 CPU (Haswell, Zen and later) also has F16C */
    int avx2 = attn__cpu_has(ATTN__CPU_AVX2 | ATTN__CPU_FMA);
    switch (k) {
    case ATTN_QK_AUTO: case ATTN_QK_PORTABLE: case ATTN_QK_REFERENCE: return 1;
    case ATTN_QK_AVX2: return avx2 && attn__qdot_avx2() != NULL;
    case ATTN_QK_AVX512VNNI:
        return avx2 && attn__cpu_has(ATTN__CPU_AVX512F | ATTN__CPU_AVX512VL | ATTN__CPU_AVX512BW | ATTN__CPU_AVX512VNNI) &&
               attn__qdot_avx512vnni() != NULL;
    }
    return 0;
#else
    return k == ATTN_QK_AUTO || k == ATTN_QK_PORTABLE || k == ATTN_QK_REFERENCE;
#endif
}

static attn_qkernel chosen = ATTN_QK_AUTO;

static attn_qkernel auto_kernel(void) {
    if (chosen != ATTN_QK_AUTO) return chosen;
    /* AVX-512 VNNI (+BW, VL) where the CPU has it (tested on Zen 4 against the portable and AVX2
     * kernels: tests/test_quant_rows.c, test_quant_legacy.c), else AVX2, else portable C */
    attn_qkernel k = attn_qkernel_available(ATTN_QK_AVX512VNNI) ? ATTN_QK_AVX512VNNI
                     : attn_qkernel_available(ATTN_QK_AVX2)     ? ATTN_QK_AVX2
                                                                : ATTN_QK_PORTABLE;
    const char *e = getenv("ATTN_QUANT_KERNEL");
    if (e) {
        attn_qkernel f = strcmp(e, "portable") == 0 ? ATTN_QK_PORTABLE
                         : strcmp(e, "avx2") == 0   ? ATTN_QK_AVX2
                         : strcmp(e, "avx512vnni") == 0 ? ATTN_QK_AVX512VNNI
                                                        : ATTN_QK_AUTO;
        if (f != ATTN_QK_AUTO && attn_qkernel_available(f)) k = f;
    }
    chosen = k;
    return k;
}

int attn_quant_set_kernel(attn_qkernel k) {
    if (!attn_qkernel_available(k)) return attn_set_error(ATTN_E_UNSUPPORTED, "quant: kernel %d is not available on this CPU", (int)k);
    chosen = ATTN_QK_AUTO;
    if (k != ATTN_QK_AUTO) chosen = k;
    return ATTN_OK;
}

const char *attn_quant_kernel_name(void) {
    switch (auto_kernel()) {
    case ATTN_QK_REFERENCE: return "reference";
    case ATTN_QK_AVX512VNNI: return "avx512vnni";
    case ATTN_QK_AVX2: return "avx2";
    default: return "portable";
    }
}

static attn__qdot_fn kernel_fn(attn_qkernel k) {
    if (k == ATTN_QK_AUTO) k = auto_kernel();
    if (k == ATTN_QK_AVX512VNNI) return attn__qdot_avx512vnni();
    if (k == ATTN_QK_AVX2) return attn__qdot_avx2();
    return qdot_portable;
}

attn_qkernel attn__resolve_kernel(attn_qkernel k) { return k == ATTN_QK_AUTO ? auto_kernel() : k; }

static attn__quantize_fn quantize_fn(attn_qkernel k) {
    if (k == ATTN_QK_AUTO) k = auto_kernel();
    if (k == ATTN_QK_AVX512VNNI && attn__quantize_avx512()) return attn__quantize_avx512();
    if ((k == ATTN_QK_AVX2 || k == ATTN_QK_AVX512VNNI) && attn__quantize_avx2()) return attn__quantize_avx2();
    return attn__quantize_row_portable;
}

void attn__quantize_row_q8(attn__q8blk *q, const float *x, int64_t nb, attn_qkernel k) { quantize_fn(k)(q, x, nb); }

/* activation rows checked and quantized, rows spread over the pool (see quant_internal.h) */
typedef struct {
    void *xq;
    const float *x;
    int64_t K, nb;
    attn__quantize_fn qf;
    attn__quantize_q8k_fn kf;
    _Atomic int64_t bad; /* the first non-finite index found, INT64_MAX: none */
} attn__acts_job;

static void attn__acts_rows(void *p, int64_t lo, int64_t hi, int tid) {
    attn__acts_job *j = (attn__acts_job *)p;
    (void)tid;
    for (int64_t m = lo; m < hi; m++) {
        const float *xr = j->x + m * j->K;
        int64_t i = j->K;
        if (attn__any_nonfinite(xr, j->K, 1)) /* one vectorised pass; the first bad index only then */
            for (i = 0; i < j->K && isfinite(xr[i]);) i++;
        if (i < j->K) { /* keep the smallest index over all threads: the message names the first */
            int64_t b = m * j->K + i, cur = atomic_load(&j->bad);
            while (b < cur && !atomic_compare_exchange_weak(&j->bad, &cur, b)) {
            }
            continue;
        }
        if (j->kf) j->kf((attn__q8k *)j->xq + m * j->nb, xr, j->nb);
        else j->qf((attn__q8blk *)j->xq + m * j->nb, xr, j->nb);
    }
}

int attn__quantize_acts(void *xq, const float *x, int64_t M, int64_t K, attn_qkernel k, int q8k, int nt) {
    attn__acts_job j = {xq, x, K, K / (q8k ? 256 : 32), q8k ? NULL : quantize_fn(k), q8k ? attn__quantize_q8k_for(k) : NULL, INT64_MAX};
    /* each row is quantized whole by one thread, as on one thread: the same bytes for any split;
     * a quantized element (scan for the block's max, scale, round, pack) counted as 8 multiply-adds:
     * rows on the pool from 8192 elements */
    attn__pool_rows(M, 1, 8.0 * (double)M * (double)K, nt, attn__acts_rows, &j);
    const int64_t bad = atomic_load(&j.bad);
    return bad == INT64_MAX ? ATTN_OK : attn_set_error(ATTN_E_RANGE, "qmatmul: x[%lld] is not finite", (long long)bad);
}

const char *attn_quant_type_kernel_name(attn_qtype t) {
    if (t == ATTN_QT_F32) return "openblas";
    if (t == ATTN_QT_F16 || t == ATTN_QT_BF16) return "f32-convert";
    if (t == ATTN_QT_Q5_0 || t == ATTN_QT_Q5_1) return attn_quant_kernel_name(); /* this file's kernels, as Q8_0 / Q4_x */
    if (attn_qtype_block(t) == 0) return "unknown";
    attn_qkernel k = auto_kernel();
    if (attn__qtype_ext(t) && k == ATTN_QK_AVX512VNNI && !attn__kq_vnni(t)) k = ATTN_QK_AVX2;
    return k == ATTN_QK_AVX512VNNI ? "avx512vnni" : k == ATTN_QK_AVX2 ? "avx2" : k == ATTN_QK_REFERENCE ? "reference" : "portable";
}

/* ---------------------------------------------------------------- products */

#define XQ_STACK_BLOCKS 256 /* 10 KiB: one activation row of up to 8192 values */

/* y[M, N] = x · Wᵀ with each weight row dequantized to float32 first, summed in float32 (f16 /
 * bf16 weights) or in float64 (f64: the reference kernel); threads over weight rows (one row
 * buffer per thread, each output on its own: any split gives the same bits) */
typedef struct {
    float *y, *rows;
    const float *x;
    const uint8_t *W;
    size_t rb;
    attn_qtype t;
    int64_t M, N, K;
    int f64;
} attn__dq_job;

static void attn__dq_rows(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__dq_job *j = (const attn__dq_job *)p;
    float *row = j->rows + (size_t)tid * (size_t)j->K;
    const int64_t M = j->M, N = j->N, K = j->K;
    const float *x = j->x;
    for (int64_t r = lo; r < hi; r++) {
        dequant_row(row, j->W + (size_t)r * j->rb, j->t, K);
        for (int64_t m = 0; m < M; m++) {
            if (j->f64) {
                double acc = 0;
                for (int64_t i = 0; i < K; i++) acc += (double)row[i] * (double)x[m * K + i];
                j->y[m * N + r] = (float)acc;
            } else {
                float acc = 0.0f;
                for (int64_t i = 0; i < K; i++) acc += row[i] * x[m * K + i];
                j->y[m * N + r] = acc;
            }
        }
    }
}

static int dequant_matmul(float *y, const float *x, const uint8_t *W, size_t rb, attn_qtype t, int64_t M, int64_t N, int64_t K, int nt,
                          int f64) {
    nt = attn__pool_threads((double)M * (double)N * (double)K, nt);
    if (nt > N) nt = (int)N;
    attn__dq_job j = {y, (float *)malloc(sizeof(float) * (size_t)K * (size_t)nt), x, W, rb, t, M, N, K, f64};
    if (!j.rows) return attn_set_error(ATTN_E_NOMEM, "qmatmul: out of memory");
    int64_t chunk = N / (4 * (int64_t)nt);
    attn__pool_for(N, chunk < 1 ? 1 : chunk, nt, attn__dq_rows, &j);
    free(j.rows);
    return ATTN_OK;
}

/* activation rows quantized on the pool */
/* ---------------------------------------------------------------- row products on the pool */

static void attn__rows_units(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__rows_job *j = (const attn__rows_job *)p;
    int64_t a = lo * 16, b = hi * 16, base = 0;
    /* decode on several threads: a chunk after the first starts where no tile's software
     * prefetch (quant_tile_tmpl.h) has run ahead of it, so its first 4-row tile is fetched into L1
     * and the ATTN__PF_FAR bytes after it into L2 at once (the results do not change) */
    int cold = j->M == 1 && lo > 0;
    for (int i = 0; i < j->count && a < b; i++) {
        const int64_t rows = j->w[i].rows;
        const int64_t r0 = a > base ? a - base : 0, r1 = b - base < rows ? b - base : rows;
        if (r0 < r1) {
            const size_t rb = attn_qtype_row_bytes(j->w[i].type, j->w[i].cols);
            const uint8_t *W = (const uint8_t *)j->w[i].data;
            if (cold) {
                const char *c = (const char *)(W + (size_t)r0 * rb);
                const size_t near = (size_t)(r1 - r0 < 4 ? r1 - r0 : 4) * rb, end = (size_t)(r1 - r0) * rb;
                for (size_t o = 0; o < near; o += 64) __builtin_prefetch(c + o, 0, 3);
                for (size_t o = near; o < near + ATTN__PF_FAR && o < end; o += 64) __builtin_prefetch(c + o, 0, 2);
                cold = 0;
            }
            if (j->packed) W = (const uint8_t *)j->packed[i];
            if (ext_kq(j->w[i].type)) j->kfn(j->y[i], rows, j->xq, j->nb, j->M, W, rb, r0, r1, j->w[i].type);
            else j->fn(j->y[i], rows, (const attn__q8blk *)j->xq, j->nb, j->M, W, rb, r0, r1, j->w[i].type);
        }
        base += rows;
    }
}

void attn__rows_run(const attn__rows_job *j, int nt) {
    int64_t total = 0;
    for (int i = 0; i < j->count; i++) total += j->w[i].rows;
    const int64_t units = (total + 15) / 16;
    nt = attn__pool_threads((double)total * (double)j->w[0].cols * (double)j->M, nt);
    /* about 4 chunks a thread: a thread that loses its core holds back one of them */
    int64_t chunk = units / (4 * (int64_t)nt);
    attn__pool_for(units, chunk < 1 ? 1 : chunk, nt, attn__rows_units, (void *)j);
}

int attn_qmatmul_kernel(float *y, const float *x, const attn_qmatrix *w, int64_t M, int n_threads, attn_qkernel k) {
    ATTN_TRY(check_matrix(w, "qmatmul"));
    if (M < 0) return attn_set_error(ATTN_E_INVALID, "qmatmul: M < 0");
    if ((!y || !x) && M > 0 && w->rows > 0) return attn_set_error(ATTN_E_INVALID, "qmatmul: NULL x or y");
    if (!attn_qkernel_available(k)) return attn_set_error(ATTN_E_UNSUPPORTED, "qmatmul: kernel %d is not available on this CPU", (int)k);
    const int64_t N = w->rows, K = w->cols;
    if (M == 0 || N == 0) return ATTN_OK;
    if (K == 0) {
        memset(y, 0, sizeof(float) * (size_t)(M * N));
        return ATTN_OK;
    }
    int nt = n_threads > 0 ? n_threads : attn_get_num_threads();
    const size_t rb = attn_qtype_row_bytes(w->type, K);
    const uint8_t *W = (const uint8_t *)w->data;
    if ((w->type == ATTN_QT_F32 || w->type == ATTN_QT_F16 || w->type == ATTN_QT_BF16) && M <= ATTN__SKINNY_MAX_M && k != ATTN_QK_REFERENCE)
        return attn__skinny_matmul(y, x, W, w->type, M, N, K, nt); /* decoding: each weight row read once for all rows */
    if (w->type == ATTN_QT_F32) {
        /* OpenBLAS, split by rows of W across attn's threads above 1e6 multiply-adds */
        attn__sgemm_split(y, x, (const float *)W, M, N, K, nt > 1 && M * N * K >= 1000000 ? nt : 1, 0, 0.0f);
        return ATTN_OK;
    }
    if (w->type == ATTN_QT_F16 || w->type == ATTN_QT_BF16) return dequant_matmul(y, x, W, rb, w->type, M, N, K, nt, 0);
    const int64_t nb = K / 32;
    if (k == ATTN_QK_AUTO) k = auto_kernel();
    if (k == ATTN_QK_REFERENCE) {
        for (int64_t i = 0; i < M * K; i++)
            if (!isfinite(x[i])) return attn_set_error(ATTN_E_RANGE, "qmatmul: x[%lld] is not finite", (long long)i);
        return dequant_matmul(y, x, W, rb, w->type, M, N, K, nt, 1);
    }
    if (ext_kq(w->type)) return attn__qmatmul_ext(y, x, w, M, nt, k);
    /* decode (a few activation rows): the quantized row lives on the stack, no malloc per token */
    attn__q8blk xq_small[XQ_STACK_BLOCKS];
    attn__q8blk *xq = M * nb <= XQ_STACK_BLOCKS ? xq_small : (attn__q8blk *)malloc(sizeof(attn__q8blk) * (size_t)(M * nb));
    if (!xq) return attn_set_error(ATTN_E_NOMEM, "qmatmul: out of memory");
    attn__qdot_fn fn = kernel_fn(k);
    const int rc = attn__quantize_acts(xq, x, M, K, k, 0, nt);
    if (rc < 0) {
        if (xq != xq_small) free(xq);
        return rc;
    }
    attn_qmatrix w1 = *w;
    float *const ys[1] = {y};
    const attn__rows_job j = {1, ys, &w1, xq, nb, M, fn, NULL, NULL};
    attn__rows_run(&j, nt > 1 && N * nb * M >= 4096 ? nt : 1);
    if (xq != xq_small) free(xq);
    return ATTN_OK;
}

/* y[i] = x · w[i]ᵀ for count matrices of 32-value blocks (validated, same cols K): x quantized
 * once (on the stack for a few rows), then one job for all matrices whose threads take 16-row
 * units of their concatenation, through fn (the K-quant kernel of the AUTO choice for ext
 * types), reading packed[i] instead of w[i]'s blocks when packed is given */
static int attn__rows_of(float *const *y, const float *x, const attn_qmatrix *w, const void *const *packed, int count, int64_t M, int64_t K,
                         int nt, attn__qdot_fn fn) {
    const int64_t nb = K / 32;
    attn__q8blk xq_small[XQ_STACK_BLOCKS];
    attn__q8blk *xq = M * nb <= XQ_STACK_BLOCKS ? xq_small : (attn__q8blk *)malloc(sizeof(attn__q8blk) * (size_t)(M * nb));
    if (!xq) return attn_set_error(ATTN_E_NOMEM, "qmatmul: out of memory");
    const int rc = attn__quantize_acts(xq, x, M, K, ATTN_QK_AUTO, 0, nt);
    if (rc < 0) {
        if (xq != xq_small) free(xq);
        return rc;
    }
    const attn__rows_job j = {count, y, w, xq, nb, M, fn, packed ? NULL : attn__kdot_for(ATTN_QK_AUTO), packed};
    attn__rows_run(&j, nt);
    if (xq != xq_small) free(xq);
    return ATTN_OK;
}

int attn_qmatmul_n(float *const *y, const float *x, const attn_qmatrix *w, int count, int64_t M, int n_threads) {
    if (count < 1 || !y || !w) return attn_set_error(ATTN_E_INVALID, "qmatmul_n: bad arguments");
    int same = 1;
    for (int i = 0; i < count; i++) {
        ATTN_TRY(check_matrix(&w[i], "qmatmul_n"));
        /* one activation format for all: 32-value 8-bit blocks (Q8_0, Q4_x, Q5_x) or Q8_K (K-quants) */
        same &= w[i].cols == w[0].cols && attn_qtype_block(w[i].type) == attn_qtype_block(w[0].type) && attn_qtype_block(w[i].type) > 1 &&
                w[i].rows % 16 == 0;
    }
    if (!same || count > 8 || M <= 0 || w[0].cols == 0 || auto_kernel() == ATTN_QK_REFERENCE) {
        for (int i = 0; i < count; i++) ATTN_TRY(attn_qmatmul(y[i], x, &w[i], M, n_threads));
        return ATTN_OK;
    }
    if (!x) return attn_set_error(ATTN_E_INVALID, "qmatmul_n: x is NULL");
    const int64_t K = w[0].cols;
    int nt = n_threads > 0 ? n_threads : attn_get_num_threads();
    if (attn_qtype_block(w[0].type) == 256) return attn__qmatmul_n_k(y, x, w, count, M, nt);
    return attn__rows_of(y, x, w, NULL, count, M, K, nt, kernel_fn(ATTN_QK_AUTO));
}

int attn_qmatmul(float *y, const float *x, const attn_qmatrix *w, int64_t M, int n_threads) {
    return attn_qmatmul_kernel(y, x, w, M, n_threads, ATTN_QK_AUTO);
}

/* ---------------------------------------------------------------- packed strips */

int attn__qpack_strips_ok(attn_qtype t, int64_t rows, int64_t cols) {
    return (t == ATTN_QT_Q8_0 || t == ATTN_QT_Q4_0 || t == ATTN_QT_Q4_1) && rows > 0 && rows % 16 == 0 && cols > 0 && cols % 32 == 0 &&
           cols / 32 <= 4096;
}

void attn__qpack_strips(uint8_t *dst, const uint8_t *W, attn_qtype t, int64_t rows, int64_t cols) {
    const int64_t nb = cols / 32;
    const size_t bs = attn__qtype_block_bytes(t), rb = (size_t)nb * bs, hdr = t == ATTN_QT_Q4_1 ? 64 : 32;
    const size_t qoff = t == ATTN_QT_Q4_1 ? 4 : 2, nq = t == ATTN_QT_Q8_0 ? 32 : 16; /* quantized bytes of a block */
    for (int64_t s = 0; s < rows / 16; s++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *rec = dst + (size_t)s * 16 * rb + (size_t)b * 16 * bs;
            for (int i = 0; i < 16; i++) {
                const uint8_t *blk = W + (size_t)(16 * s + i) * rb + (size_t)b * bs;
                memcpy(rec + 2 * i, blk, 2);                                  /* d */
                if (t == ATTN_QT_Q4_1) memcpy(rec + 32 + 2 * i, blk + 2, 2); /* m */
                for (size_t k = 0; k < nq; k++)
                    rec[hdr + 64 * (k / 4) + 4 * (size_t)i + k % 4] = t == ATTN_QT_Q8_0 ? (uint8_t)(blk[qoff + k] ^ 0x80) : blk[qoff + k];
            }
        }
}

int attn__qpack_strips_used(void) { return auto_kernel() == ATTN_QK_AVX512VNNI && attn__pdot_avx512vnni() != NULL; }

int attn__qmatmul_packed(float *const *y, const float *x, const attn_qmatrix *w, const void *const *P, int count, int64_t M, int n_threads) {
    if (count < 1 || count > 8 || !y || !w || !P) return attn_set_error(ATTN_E_INVALID, "qmatmul: bad arguments");
    int all = attn__qpack_strips_used() && M > 0;
    for (int i = 0; i < count && all; i++)
        all = P[i] && attn__qpack_strips_ok(w[i].type, w[i].rows, w[i].cols) && w[i].cols == w[0].cols && w[i].data;
    if (!all) return count == 1 ? attn_qmatmul(y[0], x, &w[0], M, n_threads) : attn_qmatmul_n(y, x, w, count, M, n_threads);
    for (int i = 0; i < count; i++) ATTN_TRY(check_matrix(&w[i], "qmatmul"));
    if (!x) return attn_set_error(ATTN_E_INVALID, "qmatmul: x is NULL");
    for (int i = 0; i < count; i++)
        if (!y[i]) return attn_set_error(ATTN_E_INVALID, "qmatmul: y is NULL");
    return attn__rows_of(y, x, w, P, count, M, w[0].cols, n_threads > 0 ? n_threads : attn_get_num_threads(), attn__pdot_avx512vnni());
}
