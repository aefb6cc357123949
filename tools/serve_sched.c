/* attn serve: the decoder scheduler (continuous batching) and the embedding worker.
 *
 * Decoders: one thread per model owns the model and an attn_llama_batch of --parallel slots
 * (one KV cache, a slot per sequence). Each step it admits queued requests into free slots,
 * then runs one forward pass over rows of every running sequence: the next token of each
 * decoding sequence and a piece of each new prompt (a long prompt is cut into pieces of 256
 * tokens so that it does not stall the streams), samples with the library's generation loop
 * (attn_generation_start_logits / feed / next: the same sampling, stop strings, UTF-8 holding
 * and context rule as attn chat) and appends the text to each task. A cancelled task (client
 * gone, timeout, shutdown) frees its slot at the next step. The queue is bounded by the HTTP
 * side (serve_submit: 503 when full), so no request waits without bound.
 *
 * Encoders: one thread per model takes every queued embedding request at once and runs their
 * texts as one attn_bert_embed_n call (dynamic batching, as text-embeddings-inference). */
#include "serve.h"

#include "attn_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A prompt is fed in the pieces attn_llama_forward feeds it in alone (PROMPT_SEGMENT, its
 * LLAMA_CHUNK in src/models/llama.c): the attention of a prompt row then runs on the same shapes
 * (queries of the piece, keys up to it) as when the sequence runs alone, and the weight kernels
 * give a row the same result whatever rows share its step (tests/test_quant_rows.c), so greedy
 * output batched equals greedy output alone, bit for bit. Pieces of several prompts share a
 * step up to PREFILL_BUDGET rows; the first piece of a step is always taken. */
#define PROMPT_SEGMENT 256
#define PREFILL_BUDGET 256 /* prompt rows per step, all sequences together */

/* The prompt cache: a slot keeps its last prompt's positions after the request ends, and a new
 * request goes to the free slot whose kept prompt shares the longest prefix with its own (the
 * chat template's system turn, a conversation's earlier turns): only the rest is fed. Bits stay
 * those of the request alone when every position ran in a piece of more than
 * ATTN_SDPA_ROW_PATH_MAX_LQ rows (attn_llama_batch_keep_slot): so prompts of one piece only
 * (<= PROMPT_SEGMENT tokens), a kept prompt of more than that many tokens, and more than that
 * many new rows after the kept prefix (fewer: the prefix is shortened). Generated tokens are
 * never kept: they ran one a step. */

double serve_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

serve_task *serve_task_new(const int32_t *prompt, int64_t n, const attn_generate_opts *o) {
    serve_task *t = (serve_task *)calloc(1, sizeof *t);
    if (!t) return NULL;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->refs = 1;
    t->slot = -1;
    t->prompt = (int32_t *)malloc(sizeof(int32_t) * (size_t)n);
    t->stop = (char **)calloc((size_t)(o->n_stop + 1), sizeof(char *));
    int ok = t->prompt && t->stop;
    if (ok) memcpy(t->prompt, prompt, sizeof(int32_t) * (size_t)n);
    t->n_prompt = n;
    t->opts = *o;
    for (int64_t i = 0; ok && i < o->n_stop; i++) ok = (t->stop[i] = strdup(o->stop[i])) != NULL;
    t->opts.stop = (const char *const *)t->stop;
    if (!ok) {
        t->opts.n_stop = o->n_stop;
        serve_task_release(t);
        return NULL;
    }
    return t;
}

void serve_task_release(serve_task *t) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    int left = --t->refs;
    pthread_mutex_unlock(&t->mu);
    if (left > 0) return;
    attn_generation_free(t->g);
    for (int64_t i = 0; i < t->opts.n_stop; i++) free(t->stop[i]);
    free(t->stop);
    free(t->prompt);
    free(t->text);
    free(t->ends);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

struct serve_sched {
    serve_model *m;
    serve_server *s;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_task *qhead, *qtail;
    int64_t queued, busy;
    int stop;
    double stop_at; /* in-flight tasks are cancelled after this time */
    attn_llama_batch *b;
    serve_task **slots; /* [parallel] */
    int32_t *kept;      /* [parallel, PROMPT_SEGMENT]: the prompt each slot's first n_kept positions hold */
    int64_t *n_kept;    /* [parallel] */
    int64_t parallel, max_rows;
    float *logits;      /* [max_rows, V] */
    int32_t *tok;
    int64_t *row_slot, *lrow;
    serve_task **lwho;
    int *lkind;         /* 1: the prompt ended in this step, 0: a decode row */
};

/* p grown to hold need elements of elem bytes (*cap of them now; doubled past need), or NULL (p kept) */
static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    void *q = realloc(p, 2 * need * elem);
    if (q) *cap = 2 * need;
    return q;
}

static void task_append(serve_task *t, const char *text, size_t len) {
    if (len == 0) return;
    pthread_mutex_lock(&t->mu);
    char *tx = (char *)grow(t->text, &t->cap, t->len + len + 1, 1);
    if (tx) t->text = tx;
    size_t *ends = tx ? (size_t *)grow(t->ends, &t->pieces_cap, t->n_pieces + 1, sizeof *ends) : NULL;
    if (ends) t->ends = ends;
    if (!tx || !ends) {
        t->err_status = 500;
        snprintf(t->err_msg, sizeof t->err_msg, "out of memory");
        pthread_mutex_unlock(&t->mu);
        return;
    }
    memcpy(t->text + t->len, text, len);
    t->len += len;
    t->text[t->len] = 0;
    t->ends[t->n_pieces++] = t->len;
    if (t->t_first == 0) t->t_first = serve_now();
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static void task_finish(serve_task *t, int status, const char *msg) {
    pthread_mutex_lock(&t->mu);
    if (status && !t->err_status) {
        t->err_status = status;
        snprintf(t->err_msg, sizeof t->err_msg, "%s", msg);
    }
    if (t->g) {
        const attn_generate_stats *gs = attn_generation_stats(t->g);
        t->finish = gs->finish;
        t->n_gen = gs->n_gen;
    }
    if (t->cancelled) t->finish = ATTN_FINISH_CANCELLED; /* cut short: never reported as "length" or "stop" */
    t->done = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* take a slot back: the task is done, the slot is free for the next request */
static void slot_free(serve_sched *q, int64_t i) {
    serve_task *t = q->slots[i];
    q->slots[i] = NULL;
    if (q->n_kept[i] == 0) attn_llama_batch_clear_slot(q->b, i); /* else the kept prompt stays for the next request */
    pthread_mutex_lock(&q->mu);
    q->busy--;
    pthread_mutex_unlock(&q->mu);
    if (t) {
        attn_generation_free(t->g);
        t->g = NULL;
        serve_task_release(t);
    }
}

/* sample as long as no forward pass is needed; returns 1 when the sequence needs its pending token run, 0 when done.
 * fed: the pending token's logits were just handed over (next consumes them first) */
static int pump(serve_sched *q, serve_task *t, int fed) {
    for (;; fed = 0) {
        const attn_generate_stats *gs = attn_generation_stats(t->g);
        /* a stop string ends the generation at once (finish STOP is set only then): next returns 0 */
        if (!fed && gs->pending_token >= 0 && gs->finish != ATTN_FINISH_STOP && gs->n_gen < t->opts.max_tokens && attn_llama_batch_slot_len(q->b, t->slot) < attn_llama_batch_max_len(q->b))
            return 1; /* else: next finishes (length, or context full when not fed) */
        const char *text;
        size_t len;
        int32_t id;
        int rc = attn_generation_next(t->g, &text, &len, &id);
        if (rc < 0) {
            task_finish(t, 500, attn_last_error());
            return 0;
        }
        if (rc == 0) {
            pthread_mutex_lock(&q->s->metrics.mu);
            q->s->metrics.gen_tokens += (uint64_t)attn_generation_stats(t->g)->n_gen;
            pthread_mutex_unlock(&q->s->metrics.mu);
            task_finish(t, 0, NULL);
            return 0;
        }
        task_append(t, text, len);
    }
}

static void *sched_main(void *arg) {
    serve_sched *q = (serve_sched *)arg;
    const int64_t V = attn_llama_get_config(q->m->llama)->vocab_size;
    const int nt = (int)q->s->threads;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (!q->stop && q->busy == 0 && !q->qhead) pthread_cond_wait(&q->cv, &q->mu);
        if (q->stop) {
            /* queued tasks are refused at once; running ones get until stop_at */
            while (q->qhead) {
                serve_task *t = q->qhead;
                q->qhead = t->next;
                q->queued--;
                task_finish(t, 503, "the server is shutting down");
                serve_task_release(t);
            }
            q->qtail = NULL;
            if (q->busy == 0) {
                pthread_mutex_unlock(&q->mu);
                break;
            }
        }
        while (q->qhead) {
            serve_task *t = q->qhead;
            int64_t at = -1, keep = -1;
            for (int64_t i = 0; i < q->parallel; i++) /* the free slot keeping the longest prefix of t's prompt */
                if (!q->slots[i]) {
                    const int32_t *k = q->kept + i * PROMPT_SEGMENT;
                    int64_t c = 0;
                    while (c < q->n_kept[i] && c < t->n_prompt && k[c] == t->prompt[c]) c++;
                    if (c > keep) at = i, keep = c;
                }
            if (at < 0) break;
            q->qhead = t->next;
            if (!q->qhead) q->qtail = NULL;
            q->queued--;
            q->busy++;
            if (t->n_prompt > PROMPT_SEGMENT) keep = 0;
            if (keep > t->n_prompt - (ATTN_SDPA_ROW_PATH_MAX_LQ + 1)) keep = t->n_prompt - (ATTN_SDPA_ROW_PATH_MAX_LQ + 1);
            if (keep < 0) keep = 0;
            if (attn_llama_batch_keep_slot(q->b, at, keep) < 0) keep = 0, attn_llama_batch_clear_slot(q->b, at);
            q->n_kept[at] = keep; /* what stays valid while t's prompt is fed */
            pthread_mutex_lock(&q->s->metrics.mu);
            q->s->metrics.prompt_cached_tokens += (uint64_t)keep;
            pthread_mutex_unlock(&q->s->metrics.mu);
            t->slot = at;
            t->fed = keep;
            q->slots[at] = t;
        }
        const int late = q->stop && serve_now() > q->stop_at;
        pthread_mutex_unlock(&q->mu);
        /* cancelled tasks leave at once */
        for (int64_t i = 0; i < q->parallel; i++) {
            serve_task *t = q->slots[i];
            if (t && (t->cancelled || late)) {
                if (late) t->cancelled = 1;
                /* the shutdown's grace ran out: an error the client can tell from an ending
                 * (it was finish_reason "length" or "stop"; new-user finding) */
                if (late) task_finish(t, 503, "the server shut down before this generation finished (--grace ran out)");
                else task_finish(t, 0, NULL);
                slot_free(q, i);
            }
        }
        /* rows: decode tokens first, then prompt chunks within the budget */
        int64_t n = 0, nl = 0, budget = PREFILL_BUDGET;
        for (int64_t i = 0; i < q->parallel; i++) {
            serve_task *t = q->slots[i];
            if (!t || !t->g) continue;
            q->tok[n] = attn_generation_stats(t->g)->pending_token;
            q->row_slot[n] = i;
            q->lrow[nl] = n++;
            q->lwho[nl] = t;
            q->lkind[nl++] = 0;
        }
        for (int64_t i = 0; i < q->parallel && budget > 0; i++) {
            serve_task *t = q->slots[i];
            if (!t || t->g) continue;
            const int64_t k = t->n_prompt - t->fed < PROMPT_SEGMENT ? t->n_prompt - t->fed : PROMPT_SEGMENT;
            if (k > budget) continue; /* whole pieces only: this one waits for the next step */
            for (int64_t j = 0; j < k; j++) q->tok[n] = t->prompt[t->fed + j], q->row_slot[n++] = i;
            t->fed += k;
            budget -= k;
            if (t->fed == t->n_prompt) {
                /* one piece of more than ATTN_SDPA_ROW_PATH_MAX_LQ rows after a kept prefix of such pieces */
                const int keepable = t->n_prompt <= PROMPT_SEGMENT && t->n_prompt > ATTN_SDPA_ROW_PATH_MAX_LQ && k > ATTN_SDPA_ROW_PATH_MAX_LQ;
                if (keepable) memcpy(q->kept + i * PROMPT_SEGMENT, t->prompt, sizeof(int32_t) * (size_t)t->n_prompt);
                q->n_kept[i] = keepable ? t->n_prompt : 0;
                q->lrow[nl] = n - 1;
                q->lwho[nl] = t;
                q->lkind[nl++] = 1;
            }
        }
        if (n == 0) continue;
        if (attn_llama_batch_forward(q->b, q->tok, q->row_slot, n, q->lrow, nl, q->logits, nt) < 0) {
            /* a failed step fails the sequences in it (their slots are unchanged, then freed) */
            char msg[256];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            for (int64_t i = 0; i < q->parallel; i++) {
                int in = 0;
                for (int64_t r = 0; r < n && !in; r++) in = q->row_slot[r] == i;
                if (in && q->slots[i]) {
                    task_finish(q->slots[i], 500, msg);
                    q->n_kept[i] = 0;
                    slot_free(q, i);
                }
            }
            continue;
        }
        for (int64_t k = 0; k < nl; k++) {
            serve_task *t = q->lwho[k];
            const float *lg = q->logits + k * V;
            int rc;
            if (q->lkind[k]) {
                rc = attn_generation_start_logits(&t->g, q->m->llama, q->m->tok, t->prompt, t->n_prompt, lg, &t->opts, NULL);
                pthread_mutex_lock(&q->s->metrics.mu);
                q->s->metrics.prompt_tokens += (uint64_t)t->n_prompt;
                pthread_mutex_unlock(&q->s->metrics.mu);
            } else
                rc = attn_generation_feed(t->g, lg);
            if (rc < 0) {
                task_finish(t, 500, attn_last_error());
                slot_free(q, t->slot);
                continue;
            }
            if (!pump(q, t, !q->lkind[k])) slot_free(q, t->slot);
        }
    }
    return NULL;
}

int serve_sched_start(serve_model *m, serve_server *s) {
    serve_sched *q = (serve_sched *)calloc(1, sizeof *q);
    if (!q) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    q->m = m;
    q->s = s;
    q->parallel = s->parallel;
    q->max_rows = s->parallel + PREFILL_BUDGET;
    const int64_t V = attn_llama_get_config(m->llama)->vocab_size;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    int rc = attn_llama_batch_create(&q->b, m->llama, q->parallel, m->ctx, q->max_rows);
    q->slots = (serve_task **)calloc((size_t)q->parallel, sizeof(serve_task *));
    q->logits = (float *)malloc(sizeof(float) * (size_t)(q->parallel * V));
    q->tok = (int32_t *)malloc(sizeof(int32_t) * (size_t)q->max_rows);
    q->row_slot = (int64_t *)malloc(sizeof(int64_t) * (size_t)q->max_rows);
    q->lrow = (int64_t *)malloc(sizeof(int64_t) * (size_t)q->parallel);
    q->lwho = (serve_task **)malloc(sizeof(serve_task *) * (size_t)q->parallel);
    q->lkind = (int *)malloc(sizeof(int) * (size_t)q->parallel);
    q->kept = (int32_t *)malloc(sizeof(int32_t) * (size_t)(q->parallel * PROMPT_SEGMENT));
    q->n_kept = (int64_t *)calloc((size_t)q->parallel, sizeof(int64_t));
    if (rc == 0 && (!q->slots || !q->logits || !q->tok || !q->row_slot || !q->lrow || !q->lwho || !q->lkind || !q->kept || !q->n_kept))
        rc = attn_set_error(ATTN_E_NOMEM, "out of memory for the scheduler");
    if (rc == 0 && pthread_create(&q->th, NULL, sched_main, q) != 0) rc = attn_set_error(ATTN_E_NOMEM, "cannot start the scheduler thread");
    m->sched = q;
    if (rc < 0) {
        m->sched = NULL;
        attn_llama_batch_free(q->b);
        free(q->slots), free(q->logits), free(q->tok), free(q->row_slot), free(q->lrow), free(q->lwho), free(q->lkind), free(q->kept), free(q->n_kept);
        free(q);
    }
    return rc;
}

void serve_sched_stop(serve_model *m) {
    serve_sched *q = m->sched;
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    q->stop_at = serve_now() + q->s->grace_s;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    attn_llama_batch_free(q->b);
    free(q->slots), free(q->logits), free(q->tok), free(q->row_slot), free(q->lrow), free(q->lwho), free(q->lkind), free(q->kept), free(q->n_kept);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
    m->sched = NULL;
}

int serve_submit(serve_model *m, serve_task *t, serve_err *e) {
    serve_sched *q = m->sched;
    pthread_mutex_lock(&q->mu);
    if (q->stop) {
        pthread_mutex_unlock(&q->mu);
        return serve_fail(e, 503, "server_error", NULL, "shutting_down", "the server is shutting down");
    }
    /* bounded: requests beyond the free slots wait in a queue of at most --queue */
    if (q->queued >= q->s->queue + (q->parallel - q->busy)) {
        pthread_mutex_unlock(&q->mu);
        return serve_fail(e, 503, "server_error", NULL, "queue_full", "the server is busy: %lld requests are running and %lld waiting (--queue %lld); retry later",
                          (long long)q->busy, (long long)q->queued, (long long)q->s->queue);
    }
    t->refs++; /* the scheduler's reference */
    t->t_submit = serve_now();
    t->next = NULL;
    if (q->qtail) q->qtail->next = t;
    else q->qhead = t;
    q->qtail = t;
    q->queued++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

void serve_sched_stats(serve_model *m, int64_t *queued, int64_t *busy) {
    *queued = *busy = 0;
    if (!m->sched) return;
    pthread_mutex_lock(&m->sched->mu);
    *queued = m->sched->queued;
    *busy = m->sched->busy;
    pthread_mutex_unlock(&m->sched->mu);
}
