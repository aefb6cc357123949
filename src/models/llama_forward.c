/* Llama-architecture decoder (see include/attn_llama.h): the forward passes — several sequences
 * in one step over a KV cache with a slot each (attn_llama_batch: attn serve's continuous
 * batching), one sequence as a batch of one slot (attn_llama_state), the layer floor's decoder
 * block for every layer, and the search for the weights behind non-finite activations. The
 * loaders are llama.c's. */
#include "attn_llama.h"
#include "attn_attention.h"
#include "attn_layers.h"
#include "attn_quant.h"
#include "attn_weight.h"
#include "core/internal.h"
#include "models/llama_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLAMA_CHUNK 256 /* tokens per forward chunk (bounds activation memory) */

/* ------------------------------------------------------------------ state */

/* ------------------------------------------------------------------ forward */

/* the layer floor's view of the model: Llama's decoder layer (pre-norm RMSNorm, RoPE on the
 * variant's pairs — adjacent as GGUF's llama / llama2.c store Q and K, halves for Qwen2 —, GQA,
 * SwiGLU, biases where the file has them) */
static attn_block_config llama_block_config(const attn_llama *m, int nt) {
    const attn_llama_config *c = &m->cfg;
    attn_block_config b;
    memset(&b, 0, sizeof b);
    b.d_model = c->dim;
    b.n_heads = c->n_heads;
    b.n_kv_heads = c->n_kv_heads;
    b.head_dim = c->head_dim;
    b.d_ff = c->hidden_dim;
    b.norm_first = 1;
    b.norm = ATTN_NORM_RMS;
    b.eps = c->norm_eps;
    b.act = ATTN_ACT_SILU;
    b.gated = 1;
    b.rope_inv_freq = m->inv_freq;
    b.rope_dim = c->head_dim;
    b.rope_layout = m->variant->rope;
    b.n_threads = nt;
    return b;
}

static attn_block_weights llama_block_weights(const llama_layer *y) {
    attn_block_weights w;
    memset(&w, 0, sizeof w);
    w.norm1.g = y->attn_norm;
    w.norm3.g = y->ffn_norm;
    w.q = attn_weight_from_qmatrix(&y->wq, y->bq, ATTN_WKERNEL_BLOCKS);
    w.k = attn_weight_from_qmatrix(&y->wk, y->bk, ATTN_WKERNEL_BLOCKS);
    w.v = attn_weight_from_qmatrix(&y->wv, y->bv, ATTN_WKERNEL_BLOCKS);
    w.o = attn_weight_from_qmatrix(&y->wo, y->bo, ATTN_WKERNEL_BLOCKS);
    w.ff_gate = attn_weight_from_qmatrix(&y->w1, NULL, ATTN_WKERNEL_BLOCKS);
    w.ff_up = attn_weight_from_qmatrix(&y->w3, NULL, ATTN_WKERNEL_BLOCKS);
    w.ff_down = attn_weight_from_qmatrix(&y->w2, NULL, ATTN_WKERNEL_BLOCKS);
    w.q.strips = y->sq, w.k.strips = y->sk, w.v.strips = y->sv, w.o.strips = y->so;
    w.ff_gate.strips = y->s1, w.ff_down.strips = y->s2, w.ff_up.strips = y->s3;
    return w;
}

/* ------------------------------------------------------------------ batch (several sequences) */

struct attn_llama_batch {
    const attn_llama *m;
    int64_t n_slots, max_len, max_rows;
    attn_kv *kv;      /* one slot per sequence */
    attn_arena arena;
    float *x, *h;     /* [max_rows, dim] */
    int64_t *ss, *cnt; /* distinct slots of a step and their row counts [max_rows] */
};

int attn_llama_batch_create(attn_llama_batch **out, const attn_llama *m, int64_t n_slots, int64_t max_len, int64_t max_rows) {
    if (!out || !m) return attn_set_error(ATTN_E_INVALID, "llama batch: NULL argument");
    *out = NULL;
    const attn_llama_config *c = &m->cfg;
    if (n_slots < 1 || n_slots > 4096 || max_rows < 1 || max_rows > 65536)
        return attn_set_error(ATTN_E_INVALID, "llama batch: %lld slots / %lld rows out of range (1..4096 / 1..65536)", (long long)n_slots,
                              (long long)max_rows);
    if (max_len <= 0 || max_len > c->context) max_len = c->context;
    attn_llama_batch *b = (attn_llama_batch *)calloc(1, sizeof *b);
    if (!b) return attn_set_error(ATTN_E_NOMEM, "llama batch: out of memory");
    b->m = m;
    b->n_slots = n_slots;
    b->max_len = max_len;
    b->max_rows = max_rows;
    int rc = attn_kv_create(&b->kv, c->n_layers, n_slots, c->n_kv_heads, max_len, c->head_dim);
    if (rc == 0) rc = attn_arena_init(&b->arena, 0);
    b->x = (float *)malloc(sizeof(float) * (size_t)(max_rows * c->dim));
    b->h = (float *)malloc(sizeof(float) * (size_t)(max_rows * c->dim));
    b->ss = (int64_t *)malloc(sizeof(int64_t) * (size_t)max_rows);
    b->cnt = (int64_t *)malloc(sizeof(int64_t) * (size_t)max_rows);
    if (rc < 0 || !b->x || !b->h || !b->ss || !b->cnt) {
        attn_llama_batch_free(b);
        return attn_set_error(ATTN_E_NOMEM, "llama batch: out of memory for %lld slots of %lld positions", (long long)n_slots, (long long)max_len);
    }
    *out = b;
    return 0;
}

void attn_llama_batch_free(attn_llama_batch *b) {
    if (!b) return;
    attn_kv_free(b->kv);
    attn_arena_free(&b->arena);
    free(b->x);
    free(b->h);
    free(b->ss);
    free(b->cnt);
    free(b);
}

int64_t attn_llama_batch_slot_len(const attn_llama_batch *b, int64_t slot) { return b ? attn_kv_len(b->kv, slot) : 0; }
int64_t attn_llama_batch_max_len(const attn_llama_batch *b) { return b ? b->max_len : 0; }

int attn_llama_batch_clear_slot(attn_llama_batch *b, int64_t slot) {
    if (!b || slot < 0 || slot >= b->n_slots) return attn_set_error(ATTN_E_INVALID, "llama batch: no slot %lld", (long long)slot);
    return attn_kv_set_len(b->kv, slot, 0);
}

int attn_llama_batch_keep_slot(attn_llama_batch *b, int64_t slot, int64_t n) {
    if (!b || slot < 0 || slot >= b->n_slots) return attn_set_error(ATTN_E_INVALID, "llama batch: no slot %lld", (long long)slot);
    return attn_kv_set_len(b->kv, slot, n);
}

/* max |w| of a tensor (0 when it cannot be read) */
static double max_abs(const attn_qmatrix *q, const float *v, int64_t n, float *row) {
    double mx = 0;
    for (int64_t r = 0; q && r < q->rows; r++) {
        if (attn_qmatrix_dequantize_rows(row, q, r, 1) < 0) return mx;
        for (int64_t i = 0; i < q->cols; i++)
            if (!(fabs(row[i]) <= mx)) mx = isnan(row[i]) ? INFINITY : fabs(row[i]);
    }
    for (int64_t i = 0; v && i < n; i++)
        if (!(fabs(v[i]) <= mx)) mx = isnan(v[i]) ? INFINITY : fabs(v[i]);
    return mx;
}

/* The activations turned non-finite (rc, a "... is not finite" message) in layer l (n_layers: the
 * output): weights too large overflowed float32 (a corrupt file: a quantized block's f16 scale
 * near 65504, a huge norm weight). Name the tensor with the largest magnitude among the tensors
 * that fed it — layers l-1 and l, the token embeddings before layer 0, the final norm and the
 * output for the logits — and the file. Only on that failure: it reads those tensors once. */
static int blame_nonfinite(const attn_llama *m, int64_t l, int rc) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", attn_last_error());
    if (!strstr(msg, "not finite") && !strstr(msg, "overflow")) return rc;
    const attn_llama_config *c = &m->cfg;
    const int64_t D = c->dim, qd = c->n_heads * c->head_dim, w = D > c->hidden_dim ? D : c->hidden_dim;
    float *row = (float *)malloc(sizeof(float) * (size_t)(w > qd ? w : qd)); /* one row of any matrix */
    if (!row) return rc;
    static const char *const mat[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down", "ffn_up"};
    static const char *const vec[2] = {"attn_norm", "ffn_norm"};
    char best[96] = "";
    double top = -1;
    for (int64_t k = l > 0 ? l - 1 : 0; k <= l && k < c->n_layers; k++) {
        const llama_layer *y = &m->layers[k];
        const attn_qmatrix *q[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w1, &y->w2, &y->w3};
        const float *v[2] = {y->attn_norm, y->ffn_norm};
        for (int i = 0; i < 9; i++) {
            const double a = i < 7 ? max_abs(q[i], NULL, 0, row) : max_abs(NULL, v[i - 7], D, row);
            if (a > top) top = a, snprintf(best, sizeof best, "blk.%lld.%s.weight", (long long)k, i < 7 ? mat[i] : vec[i - 7]);
        }
    }
    const struct {
        const char *name;
        const attn_qmatrix *q;
        const float *v;
        int when;
    } more[3] = {{"token_embd.weight", &m->tok_embd, NULL, l == 0},
                 {"output_norm.weight", NULL, m->final_norm, l >= c->n_layers},
                 {"output.weight", &m->output, NULL, l >= c->n_layers}};
    for (int i = 0; i < 3; i++) {
        if (!more[i].when) continue;
        const double a = max_abs(more[i].q, more[i].v, D, row);
        if (a > top) top = a, snprintf(best, sizeof best, "%s", more[i].name);
    }
    free(row);
    char where[64];
    if (l < c->n_layers) snprintf(where, sizeof where, "in layer %lld", (long long)l);
    else snprintf(where, sizeof where, "in the logits");
    return attn_set_error(rc, "%s%s%s: the activations turned non-finite %s; the largest weights feeding them are in tensor '%s' "
                          "(max |w| = %.3g%s): a corrupt or overflowing tensor?",
                          m->path ? m->path : "", m->path ? ": " : "", msg, where, best, top,
                          m->gguf ? "" : "; llama2.c names in GGUF spelling");
}

int attn_llama_batch_forward(attn_llama_batch *b, const int32_t *tokens, const int64_t *slot, int64_t n, const int64_t *logit_rows,
                             int64_t n_logits, float *logits, int n_threads) {
    if (!b || !tokens || !slot || n < 1 || n_logits < 0 || (n_logits > 0 && (!logit_rows || !logits)))
        return attn_set_error(ATTN_E_INVALID, "llama batch forward: bad arguments");
    const attn_llama *m = b->m;
    const attn_llama_config *c = &m->cfg;
    const int64_t D = c->dim;
    if (n > b->max_rows) return attn_set_error(ATTN_E_INVALID, "llama batch forward: %lld rows, the batch holds %lld", (long long)n, (long long)b->max_rows);
    /* distinct slots (their rows consecutive), each with room for its rows */
    int64_t ns = 0;
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return attn_set_error(ATTN_E_RANGE, "llama: token id %d outside [0, %lld)", (int)tokens[i], (long long)c->vocab_size);
        if (slot[i] < 0 || slot[i] >= b->n_slots)
            return attn_set_error(ATTN_E_INVALID, "llama batch forward: row %lld names slot %lld of %lld", (long long)i, (long long)slot[i],
                                  (long long)b->n_slots);
        if (i > 0 && slot[i] == slot[i - 1]) {
            b->cnt[ns - 1]++;
            continue;
        }
        for (int64_t j = 0; j < ns; j++)
            if (b->ss[j] == slot[i])
                return attn_set_error(ATTN_E_INVALID, "llama batch forward: the rows of slot %lld are not consecutive", (long long)slot[i]);
        b->ss[ns] = slot[i];
        b->cnt[ns++] = 1;
    }
    for (int64_t j = 0; j < ns; j++)
        if (b->cnt[j] > b->max_len - attn_kv_len(b->kv, b->ss[j]))
            return attn_set_error(ATTN_E_RANGE, "llama: context full: slot %lld holds %lld positions, %lld more do not fit in %lld",
                                  (long long)b->ss[j], (long long)attn_kv_len(b->kv, b->ss[j]), (long long)b->cnt[j], (long long)b->max_len);
    for (int64_t k = 0; k < n_logits; k++)
        if (logit_rows[k] < 0 || logit_rows[k] >= n)
            return attn_set_error(ATTN_E_INVALID, "llama batch forward: logit row %lld outside [0, %lld)", (long long)logit_rows[k], (long long)n);
    const int nt = n_threads > 0 ? n_threads : attn_get_num_threads();
    for (int64_t t = 0; t < n; t++) ATTN_TRY(attn_qmatrix_dequantize_rows(b->x + t * D, &m->tok_embd, tokens[t], 1));
    const attn_block_config bc = llama_block_config(m, nt);
    attn_decoder_rows rows;
    memset(&rows, 0, sizeof rows);
    rows.n_rows = n;
    rows.slot = slot;
    for (int64_t l = 0; l < c->n_layers; l++) {
        const attn_block_weights bw = llama_block_weights(&m->layers[l]);
        const int lrc = attn_decoder_block(b->x, &bc, &bw, l, b->kv, &rows, &b->arena);
        if (lrc < 0) return blame_nonfinite(m, l, lrc);
    }
    ATTN_TRY(attn_kv_advance(b->kv, b->ss, b->cnt, ns));
    if (n_logits == 0) return 0;
    for (int64_t k = 0; k < n_logits; k++) memcpy(b->h + k * D, b->x + logit_rows[k] * D, sizeof(float) * (size_t)D);
    const attn_norm_weights fn = {m->final_norm, NULL};
    ATTN_TRY(attn_block_norm(b->h, b->h, n_logits, &bc, &fn));
    attn_weight ow = attn_weight_from_qmatrix(&m->output, NULL, ATTN_WKERNEL_BLOCKS);
    ow.strips = m->output_strips;
    const int orc = attn_weight_matmul(logits, b->h, n_logits, &ow, ATTN_ACT_IDENTITY, nt);
    if (orc < 0) return blame_nonfinite(m, c->n_layers, orc);
    for (int64_t i = 0; i < n_logits * c->vocab_size; i++)
        if (!isfinite(logits[i]))
            return blame_nonfinite(m, c->n_layers, attn_set_error(ATTN_E_RANGE, "llama: logit %lld is not finite", (long long)i));
    return 0;
}

/* ------------------------------------------------------------------ one sequence: a batch of one slot */

struct attn_llama_state {
    const attn_llama *m;
    attn_llama_batch *b;            /* one slot, LLAMA_CHUNK rows a step */
    int64_t slot0[LLAMA_CHUNK];     /* zeros: every row is the next position of slot 0 */
    int64_t rows[LLAMA_CHUNK];      /* 0, 1, 2, ...: the rows whose logits are wanted */
};

int attn_llama_state_create(attn_llama_state **out, const attn_llama *m, int64_t max_len) {
    if (!out || !m) return attn_set_error(ATTN_E_INVALID, "llama state: NULL argument");
    *out = NULL;
    attn_llama_state *s = (attn_llama_state *)calloc(1, sizeof *s);
    if (!s) return attn_set_error(ATTN_E_NOMEM, "llama: out of memory");
    s->m = m;
    for (int64_t i = 0; i < LLAMA_CHUNK; i++) s->rows[i] = i;
    if (attn_llama_batch_create(&s->b, m, 1, max_len, LLAMA_CHUNK) < 0) {
        free(s);
        return attn_set_error(ATTN_E_NOMEM, "llama: out of memory for a KV cache of %lld positions", (long long)max_len);
    }
    *out = s;
    return 0;
}

void attn_llama_state_free(attn_llama_state *s) {
    if (!s) return;
    attn_llama_batch_free(s->b);
    free(s);
}

void attn_llama_state_reset(attn_llama_state *s) {
    if (s) attn_kv_clear(s->b->kv);
}
int64_t attn_llama_state_len(const attn_llama_state *s) { return s ? attn_kv_len(s->b->kv, 0) : 0; }
const attn_llama *attn_llama_state_model(const attn_llama_state *s) { return s ? s->m : NULL; }
int64_t attn_llama_state_max_len(const attn_llama_state *s) { return s ? s->b->max_len : 0; }
int attn_llama_state_truncate(attn_llama_state *s, int64_t len) {
    if (!s || len < 0 || len > attn_llama_state_len(s)) return attn_set_error(ATTN_E_INVALID, "llama state: cannot truncate to %lld", (long long)len);
    return attn_kv_set_len(s->b->kv, 0, len);
}

int attn_llama_forward(attn_llama_state *s, float *logits, const int32_t *tokens, int64_t n, int all_logits, int n_threads) {
    if (!s || !logits || !tokens || n < 1) return attn_set_error(ATTN_E_INVALID, "llama forward: bad arguments");
    const attn_llama_config *c = &s->m->cfg;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return attn_set_error(ATTN_E_RANGE, "llama: token id %d outside [0, %lld)", (int)tokens[i], (long long)c->vocab_size);
    const int64_t start = attn_llama_state_len(s), max_len = s->b->max_len;
    if (n > max_len - start)
        return attn_set_error(ATTN_E_RANGE, "llama: context full: %lld positions used, %lld more do not fit in %lld", (long long)start,
                              (long long)n, (long long)max_len);
    /* chunks of LLAMA_CHUNK tokens (bounded activation memory); logits of every row, or of the
     * last row of the last chunk */
    for (int64_t i = 0; i < n; i += LLAMA_CHUNK) {
        const int64_t k = n - i < LLAMA_CHUNK ? n - i : LLAMA_CHUNK;
        const int last = i + k == n;
        const int64_t *want = all_logits ? s->rows : s->rows + (k - 1);
        const int64_t n_logits = all_logits ? k : last;
        int rc = attn_llama_batch_forward(s->b, tokens + i, s->slot0, k, want, n_logits, all_logits ? logits + i * c->vocab_size : logits,
                                          n_threads);
        if (rc < 0) {
            attn_kv_set_len(s->b->kv, 0, start); /* the state is unchanged */
            return rc;
        }
    }
    return 0;
}
