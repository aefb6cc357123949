/* attn serve: the embedding worker of a sentence-transformers model. Requests of several
 * clients that wait together run as one batch: their texts go through one attn_bert_embed_n
 * call (the function `attn embed` uses: same tokenization, truncation, pooling and
 * normalisation, and a sentence's result does not depend on its batch). Token-array inputs run
 * attn_bert_forward on the ids as given (truncated to the model's max_seq_len) and are pooled
 * and normalised as the model's config says. */
#include "serve.h"

#include "attn_utf8.h"
#include "attn_wordpiece.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct emb_job {
    const serve_req *r;
    float *out;
    int64_t tokens;
    int status;
    char msg[256];
    int done;
    struct emb_job *next;
} emb_job;

struct serve_embedder {
    serve_model *m;
    serve_server *s;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv, done_cv;
    emb_job *head;
    int64_t queued;
    int stop;
};

/* token arrays: ids as given, pooled like the model's sentence-transformers pipeline */
static int embed_ids(const attn_bert *b, const int32_t *ids, int64_t n, float *out) {
    const attn_bert_config *c = attn_bert_get_config(b);
    if (n > c->max_seq_len) n = c->max_seq_len;
    const int64_t E = c->d_model;
    float *h = (float *)malloc(sizeof(float) * (size_t)(n * E));
    attn_arena a;
    if (!h || attn_arena_init(&a, 0) < 0) {
        free(h);
        return attn_set_error(ATTN_E_NOMEM, "out of memory");
    }
    int rc = attn_bert_forward(b, h, NULL, ids, &n, 1, n, &a);
    attn_arena_free(&a);
    if (rc == 0) {
        for (int64_t e = 0; e < E; e++) {
            double acc = c->pooling == ATTN_POOL_MAX ? -INFINITY : 0;
            for (int64_t t = 0; t < (c->pooling == ATTN_POOL_CLS ? 1 : n); t++)
                acc = c->pooling == ATTN_POOL_MAX ? fmax(acc, h[t * E + e]) : acc + h[t * E + e];
            out[e] = (float)(c->pooling == ATTN_POOL_MEAN ? acc / (double)n : acc);
        }
        if (c->normalize) {
            double ss = 0;
            for (int64_t e = 0; e < E; e++) ss += (double)out[e] * out[e];
            const double nrm = fmax(sqrt(ss), 1e-12);
            for (int64_t e = 0; e < E; e++) out[e] = (float)(out[e] / nrm);
        }
    }
    free(h);
    return rc;
}

static void run_batch(serve_embedder *w, emb_job *jobs) {
    const attn_bert *b = w->m->bert;
    const attn_tokenizer *tk = attn_bert_tokenizer(b);
    const attn_bert_config *c = attn_bert_get_config(b);
    const int64_t E = c->d_model;
    int64_t nt = 0;
    for (emb_job *j = jobs; j; j = j->next) nt += j->r->n_texts;
    const char **texts = (const char **)malloc(sizeof(char *) * (size_t)(nt ? nt : 1));
    int64_t *lens = (int64_t *)malloc(sizeof(int64_t) * (size_t)(nt ? nt : 1));
    float *all = (float *)malloc(sizeof(float) * (size_t)((nt ? nt : 1) * E));
    int rc = texts && lens && all ? 0 : attn_set_error(ATTN_E_NOMEM, "out of memory");
    int64_t k = 0;
    for (emb_job *j = jobs; rc == 0 && j; j = j->next)
        for (int64_t i = 0; i < j->r->n_texts; i++) {
            texts[k] = j->r->texts[i];
            lens[k++] = j->r->text_lens[i];
            int64_t cnt = 0;
            attn_tokenizer_encode(tk, j->r->texts[i], (size_t)j->r->text_lens[i], 1, c->max_seq_len, NULL, &cnt, 0, NULL);
            j->tokens += cnt;
        }
    if (rc == 0 && nt > 0) rc = attn_bert_embed_n(b, all, texts, lens, nt, 32, NULL, NULL);
    k = 0;
    for (emb_job *j = jobs; j; j = j->next) {
        if (rc < 0) {
            j->status = 500;
            snprintf(j->msg, sizeof j->msg, "%s", attn_last_error());
            continue;
        }
        memcpy(j->out, all + k * E, sizeof(float) * (size_t)(j->r->n_texts * E));
        k += j->r->n_texts;
        for (int64_t i = 0; i < j->r->n_tok_arrays && !j->status; i++) {
            for (int64_t t = 0; t < j->r->tok_lens[i]; t++)
                if (j->r->tok_arrays[i][t] >= c->vocab_size) {
                    j->status = 400;
                    snprintf(j->msg, sizeof j->msg, "token id %d in input %lld is outside the vocabulary (%lld)", (int)j->r->tok_arrays[i][t], (long long)i,
                             (long long)c->vocab_size);
                }
            if (!j->status && embed_ids(b, j->r->tok_arrays[i], j->r->tok_lens[i], j->out + i * E) < 0) {
                j->status = 500;
                snprintf(j->msg, sizeof j->msg, "%s", attn_last_error());
            }
            j->tokens += j->r->tok_lens[i] < c->max_seq_len ? j->r->tok_lens[i] : c->max_seq_len;
        }
    }
    free(texts);
    free(lens);
    free(all);
}

static void *emb_main(void *arg) {
    serve_embedder *w = (serve_embedder *)arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->stop && !w->head) pthread_cond_wait(&w->cv, &w->mu);
        emb_job *jobs = w->head; /* every waiting request: one batch */
        w->head = NULL;
        w->queued = 0;
        int stop = w->stop;
        pthread_mutex_unlock(&w->mu);
        if (jobs) run_batch(w, jobs);
        pthread_mutex_lock(&w->mu);
        for (emb_job *j = jobs; j; j = j->next) j->done = 1;
        pthread_cond_broadcast(&w->done_cv);
        pthread_mutex_unlock(&w->mu);
        if (stop && !jobs) break;
    }
    return NULL;
}

int serve_embedder_start(serve_model *m, serve_server *s) {
    serve_embedder *w = (serve_embedder *)calloc(1, sizeof *w);
    if (!w) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    w->m = m;
    w->s = s;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    pthread_cond_init(&w->done_cv, NULL);
    if (pthread_create(&w->th, NULL, emb_main, w) != 0) {
        free(w);
        return attn_set_error(ATTN_E_NOMEM, "cannot start the embedding thread");
    }
    m->emb = w;
    return 0;
}

void serve_embedder_stop(serve_model *m) {
    serve_embedder *w = m->emb;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    pthread_cond_destroy(&w->done_cv);
    free(w);
    m->emb = NULL;
}

int serve_embed(serve_model *m, serve_server *s, const serve_req *r, float *out, int64_t *tokens, serve_err *e) {
    serve_embedder *w = m->emb;
    emb_job j;
    memset(&j, 0, sizeof j);
    j.r = r;
    j.out = out;
    pthread_mutex_lock(&w->mu);
    if (w->stop) {
        pthread_mutex_unlock(&w->mu);
        return serve_fail(e, 503, "server_error", NULL, "shutting_down", "the server is shutting down");
    }
    if (w->queued >= s->queue + s->parallel) {
        pthread_mutex_unlock(&w->mu);
        return serve_fail(e, 503, "server_error", NULL, "queue_full", "the server is busy: %lld embedding requests are waiting; retry later", (long long)w->queued);
    }
    j.next = w->head;
    w->head = &j;
    w->queued++;
    pthread_cond_broadcast(&w->cv);
    while (!j.done) pthread_cond_wait(&w->done_cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    *tokens = j.tokens;
    if (j.status) return serve_fail(e, j.status, j.status == 400 ? "invalid_request_error" : "server_error", j.status == 400 ? "input" : NULL, NULL, "%s", j.msg);
    return 0;
}
