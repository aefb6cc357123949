/* attn_llama_batch (continuous batching, include/attn_llama.h) against attn_llama_forward, the
 * single-sequence path (itself checked against the float64 llama2.c reference in test_llama):
 * three sequences of different prompt lengths share each step — prompt chunks of one next to
 * decode tokens of others, a slot freed and reused — and every row's logits must equal the
 * sequence run alone, to float rounding; greedy tokens must be identical. Also the generation
 * API's external mode (attn_generation_start_logits / feed) against attn_llama_generate. */
#include "attn_llama.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "../shared/models/stories260K/stories260K.bin"
#define TOKBIN "../shared/models/stories260K/tok512.bin"
#define NSEQ 3
#define NGEN 24

/* logits of the batched path may differ from the single path by float rounding: the
 * projections multiply N rows at once (another blocking / summation order) and the attention
 * of a prompt chunk runs as one causal pass. stories260K's logits are O(10); 2e-4 absolute is
 * ~50 float32 ulps at that size, far below any change of the argmax in these runs. */
#define TOL 2e-4

int main(void) {
    attn_llama *m = NULL;
    attn_bpe *tok = NULL;
    if (attn_llama_load_llama2c(&m, MODEL) < 0 || attn_bpe_load_llama2c(&tok, TOKBIN, 512) < 0) {
        CHECK(0, "load %s: %s", MODEL, attn_last_error());
        return attn_test_finish();
    }
    const attn_llama_config *c = attn_llama_get_config(m);
    const int64_t V = c->vocab_size;
    const char *texts[NSEQ] = {"Once upon a time, there was a little girl", "The cat", "Tom and Lily went to the park to play with a big red ball. They"};
    int32_t prompt[NSEQ][128];
    int64_t np[NSEQ];
    for (int s = 0; s < NSEQ; s++) {
        prompt[s][0] = c->bos_id;
        int64_t got = 0;
        CHECK_OK(attn_bpe_encode(tok, texts[s], strlen(texts[s]), 0, prompt[s] + 1, 120, &got));
        np[s] = got + 1;
    }
    /* reference: each sequence alone, greedy, logits of every step */
    float *ref = (float *)malloc(sizeof(float) * NSEQ * (NGEN + 1) * V);
    int32_t rtok[NSEQ][NGEN + 1];
    for (int s = 0; s < NSEQ; s++) {
        attn_llama_state *st = NULL;
        CHECK_OK(attn_llama_state_create(&st, m, 0));
        CHECK_OK(attn_llama_forward(st, ref + (s * (NGEN + 1)) * V, prompt[s], np[s], 0, 1));
        for (int t = 0; t < NGEN; t++) {
            rtok[s][t] = (int32_t)attn_logits_argmax(ref + (s * (NGEN + 1) + t) * V, V);
            CHECK_OK(attn_llama_forward(st, ref + (s * (NGEN + 1) + t + 1) * V, &rtok[s][t], 1, 0, 1));
        }
        attn_llama_state_free(st);
    }
    /* batched: sequence s starts at step s (joins while the others decode); prompts enter in
     * chunks of 4 tokens; slot 1 runs sequence 1 after a throw-away sequence has used it */
    attn_llama_batch *b = NULL;
    CHECK_OK(attn_llama_batch_create(&b, m, NSEQ, 0, 64));
    {   /* a throw-away sequence in slot 1, then cleared */
        int32_t t3[3] = {1, 50, 60};
        int64_t sl[3] = {1, 1, 1}, lr = 2;
        float *lg = (float *)malloc(sizeof(float) * V);
        CHECK_OK(attn_llama_batch_forward(b, t3, sl, 3, &lr, 1, lg, 1));
        CHECK(attn_llama_batch_slot_len(b, 1) == 3, "slot 1 holds 3 positions");
        CHECK_OK(attn_llama_batch_clear_slot(b, 1));
        CHECK(attn_llama_batch_slot_len(b, 1) == 0, "slot 1 cleared");
        free(lg);
    }
    int64_t fed[NSEQ] = {0}, gen[NSEQ] = {0};
    int32_t btok[NSEQ][NGEN + 1];
    double worst = 0;
    int steps = 0, mixed = 0;
    float *lg = (float *)malloc(sizeof(float) * NSEQ * V);
    for (int step = 0; step < 200; step++) {
        int32_t tk[64];
        int64_t sl[64], lr[NSEQ], who[NSEQ];
        int64_t n = 0, nl = 0;
        int nprefill = 0, ndecode = 0;
        for (int s = 0; s < NSEQ; s++) {
            if (step < s || gen[s] > NGEN) continue;
            if (fed[s] < np[s]) {
                int64_t k = np[s] - fed[s] < 4 ? np[s] - fed[s] : 4;
                for (int64_t i = 0; i < k; i++) tk[n] = prompt[s][fed[s] + i], sl[n++] = s;
                fed[s] += k;
                nprefill++;
                if (fed[s] < np[s]) continue;
            } else {
                if (gen[s] >= NGEN) {
                    gen[s]++;
                    continue;
                }
                tk[n] = btok[s][gen[s] - 1];
                sl[n++] = s;
                ndecode++;
            }
            lr[nl] = n - 1;
            who[nl++] = s;
        }
        if (n == 0) break;
        steps++;
        mixed += nprefill > 0 && ndecode > 0;
        if (attn_llama_batch_forward(b, tk, sl, n, lr, nl, lg, 1) < 0) {
            CHECK(0, "batch forward: %s", attn_last_error());
            break;
        }
        for (int64_t k = 0; k < nl; k++) {
            const int s = (int)who[k];
            const float *r = ref + (s * (NGEN + 1) + gen[s]) * V;
            double d = attn_test_max_abs_diff(lg + k * V, r, (size_t)V);
            if (d > worst) worst = d;
            btok[s][gen[s]] = (int32_t)attn_logits_argmax(lg + k * V, V);
            gen[s]++;
        }
    }
    CHECK(mixed > 0, "steps with prompt chunks and decode rows together: %d of %d", mixed, steps);
    printf("batched vs alone: %d steps (%d mixed prefill + decode), max logit diff %.3g\n", steps, mixed, worst);
    CHECK(worst <= TOL, "batched logits vs each sequence alone: max |diff| %.3g (bound %.1g)", worst, TOL);
    for (int s = 0; s < NSEQ; s++) CHECK(memcmp(btok[s], rtok[s], sizeof(int32_t) * NGEN) == 0, "sequence %d: greedy tokens identical batched and alone", s);

    /* errors: the state is unchanged */
    {
        int32_t t2[2] = {5, 6};
        int64_t bad[2] = {0, 7}, split[3] = {0, 1, 0}, lr = 0;
        int32_t t3[3] = {5, 6, 7};
        int64_t len0 = attn_llama_batch_slot_len(b, 0);
        CHECK_ERR(attn_llama_batch_forward(b, t2, bad, 2, &lr, 1, lg, 1), ATTN_E_INVALID);
        CHECK_ERR(attn_llama_batch_forward(b, t3, split, 3, &lr, 1, lg, 1), ATTN_E_INVALID);
        int32_t badtok[1] = {100000};
        CHECK_ERR(attn_llama_batch_forward(b, badtok, bad, 1, &lr, 1, lg, 1), ATTN_E_RANGE);
        int64_t far = 5;
        CHECK_ERR(attn_llama_batch_forward(b, t2, bad, 1, &far, 1, lg, 1), ATTN_E_INVALID);
        CHECK(attn_llama_batch_slot_len(b, 0) == len0, "slot 0 unchanged by refused steps");
        CHECK_ERR(attn_llama_batch_clear_slot(b, 3), ATTN_E_INVALID);
        /* context full: slot 2 filled to max_len, one more row refused */
        CHECK_OK(attn_llama_batch_clear_slot(b, 2));
        const int64_t T = attn_llama_batch_max_len(b);
        int32_t *many = (int32_t *)calloc((size_t)T, sizeof(int32_t));
        int64_t *s2 = (int64_t *)malloc(sizeof(int64_t) * (size_t)T);
        for (int64_t i = 0; i < T; i++) many[i] = 1 + (int32_t)(i % 300), s2[i] = 2;
        for (int64_t i = 0; i < T; i += 64) CHECK_OK(attn_llama_batch_forward(b, many + i, s2 + i, T - i < 64 ? T - i : 64, NULL, 0, NULL, 1));
        CHECK(attn_llama_batch_slot_len(b, 2) == T, "slot 2 full (%lld)", (long long)T);
        CHECK_ERR(attn_llama_batch_forward(b, many, s2, 1, NULL, 0, NULL, 1), ATTN_E_RANGE);
        attn_llama_batch_create(NULL, m, 1, 0, 1);
        attn_llama_batch *bb = NULL;
        CHECK_ERR(attn_llama_batch_create(&bb, m, 0, 0, 1), ATTN_E_INVALID);
        free(many);
        free(s2);
    }

    /* the generation loop fed from outside gives attn_llama_generate's text */
    {
        attn_generate_opts o = attn_generate_opts_default();
        o.sampling.temperature = 0.7f;
        o.sampling.seed = 42;
        o.max_tokens = 30;
        const char *stop[1] = {"park"};
        o.stop = stop;
        o.n_stop = 1;
        attn_llama_state *st = NULL;
        CHECK_OK(attn_llama_state_create(&st, m, 0));
        attn_generation *g = NULL;
        char a[4096] = "", bt[4096] = "";
        CHECK_OK(attn_generation_start(&g, st, tok, prompt[2], np[2], &o, NULL));
        const char *text;
        size_t len;
        int32_t id;
        int rc;
        while ((rc = attn_generation_next(g, &text, &len, &id)) > 0) strncat(a, text, len);
        attn_finish_reason fa = attn_generation_stats(g)->finish;
        attn_generation_free(g);
        attn_llama_state_reset(st);
        CHECK_OK(attn_llama_forward(st, lg, prompt[2], np[2], 0, 1));
        CHECK_OK(attn_generation_start_logits(&g, m, tok, prompt[2], np[2], lg, &o, NULL));
        CHECK_ERR(attn_generation_feed(g, lg), ATTN_E_INVALID); /* nothing pending yet */
        for (;;) {
            const attn_generate_stats *gs = attn_generation_stats(g);
            if (gs->pending_token >= 0 && gs->n_gen < o.max_tokens) {
                int32_t p = gs->pending_token;
                CHECK_OK(attn_llama_forward(st, lg, &p, 1, 0, 1));
                CHECK_OK(attn_generation_feed(g, lg));
            }
            if ((rc = attn_generation_next(g, &text, &len, &id)) <= 0) break;
            strncat(bt, text, len);
        }
        CHECK(rc == 0, "external generation ends cleanly");
        CHECK(strcmp(a, bt) == 0 && a[0], "external feed gives the same text: '%s' vs '%s'", a, bt);
        CHECK(attn_generation_stats(g)->finish == fa, "same finish reason (%d)", (int)fa);
        attn_generation_free(g);
        /* not fed: the context is full */
        CHECK_OK(attn_generation_start_logits(&g, m, tok, prompt[2], np[2], lg, &o, NULL));
        rc = attn_generation_next(g, &text, &len, &id);
        CHECK(rc == 1, "first token from the prompt logits");
        while ((rc = attn_generation_next(g, &text, &len, &id)) > 0) {}
        CHECK(rc == 0 && attn_generation_stats(g)->finish == ATTN_FINISH_CONTEXT && attn_generation_stats(g)->n_gen == 1,
              "no feed: finish context after 1 token");
        attn_generation_free(g);
        attn_llama_state_free(st);
    }
    /* SmolLM2 Q4_1: a decode row next to a prompt chunk runs through the multi-row tile kernel
     * (another float summation order; the next layer re-quantizes the activations to 8 bits, so
     * a last-bit change can move a quantized value by one step). Bound: 1.5, the bound of this
     * kernel's logits against llama.cpp (test_gguf_llm); alone in the batch it is exact. */
    {
        attn_llama *q = NULL;
        if (attn_llama_load_gguf(&q, "models/SmolLM2-135M-Instruct.Q4_1.gguf") == 0) {
            const attn_bpe *qt = attn_llama_tokenizer(q);
            const int64_t QV = attn_llama_get_config(q)->vocab_size;
            int32_t pa[64], pb[64];
            int64_t na = 0, nb = 0;
            CHECK_OK(attn_bpe_encode(qt, "The capital of France is", 24, 1, pa, 64, &na));
            CHECK_OK(attn_bpe_encode(qt, "Tell me a story about", 21, 1, pb, 64, &nb));
            float *l1 = (float *)malloc(sizeof(float) * (size_t)QV), *l2 = (float *)malloc(sizeof(float) * 2 * (size_t)QV);
            attn_llama_state *st = NULL;
            CHECK_OK(attn_llama_state_create(&st, q, 256));
            CHECK_OK(attn_llama_forward(st, l1, pa, na, 0, 1));
            int32_t t1 = (int32_t)attn_logits_argmax(l1, QV);
            CHECK_OK(attn_llama_forward(st, l1, &t1, 1, 0, 1));
            attn_llama_batch *qb = NULL;
            CHECK_OK(attn_llama_batch_create(&qb, q, 2, 256, 64));
            int64_t s0[64] = {0}, lr = na - 1, z = 0;
            CHECK_OK(attn_llama_batch_forward(qb, pa, s0, na, &lr, 1, l2, 1));
            CHECK_OK(attn_llama_batch_forward(qb, &t1, s0, 1, &z, 1, l2, 1));
            double alone = attn_test_max_abs_diff(l1, l2, (size_t)QV);
            CHECK(alone == 0, "Q4_1 decode row alone in a batch: identical (%.3g)", alone);
            CHECK_OK(attn_llama_batch_clear_slot(qb, 0));
            CHECK_OK(attn_llama_batch_forward(qb, pa, s0, na, &lr, 1, l2, 1));
            int32_t rows[65];
            int64_t rs[65], lr2[2] = {0, nb};
            rows[0] = t1, rs[0] = 0;
            for (int64_t i = 0; i < nb; i++) rows[1 + i] = pb[i], rs[1 + i] = 1;
            CHECK_OK(attn_llama_batch_forward(qb, rows, rs, 1 + nb, lr2, 2, l2, 1));
            double mixed = attn_test_max_abs_diff(l1, l2, (size_t)QV);
            printf("SmolLM2 Q4_1: decode row batched with a %lld-token prompt chunk: max logit diff %.3g (alone in the batch: %.3g)\n", (long long)nb,
                   mixed, alone);
            CHECK(mixed <= 1.5, "Q4_1 decode row batched with a prompt chunk: max |diff| %.3g (bound 1.5)", mixed);
            /* a decode step past 100 positions spreads its attention's 9 heads over 2 threads
             * (layers/block.c, attn__decode_attn_threads): each head whole on one thread, so the
             * logits equal one thread's bit for bit */
            {
                int32_t lp[120];
                for (int64_t i = 0; i < 120; i++) lp[i] = pb[i % nb];
                attn_llama_state_reset(st);
                CHECK_OK(attn_llama_forward(st, l1, lp, 120, 0, 1));
                int32_t nx = (int32_t)attn_logits_argmax(l1, QV);
                CHECK_OK(attn_llama_forward(st, l1, &nx, 1, 0, 1));
                CHECK_OK(attn_llama_state_truncate(st, 120));
                CHECK_OK(attn_llama_forward(st, l2, &nx, 1, 0, 2));
                double d12 = attn_test_max_abs_diff(l1, l2, (size_t)QV);
                CHECK(d12 == 0, "SmolLM2 decode at position 120: 1 vs 2 threads identical (%.3g)", d12);
            }
            /* the prompt cache (attn serve): a slot that ran prompt A (and decoded after it) keeps
             * the positions A shares with prompt B, and B's rest runs as one more piece: B's
             * logits and its greedy continuation equal B fed whole to a fresh slot, bit for bit,
             * when every piece has more than 4 rows (the attention's tile path) */
            {
                int32_t A[40], B[45], ra[8], rb[8];
                for (int i = 0; i < 45; i++) B[i] = 100 + (i * 37) % 5000;
                for (int i = 0; i < 40; i++) A[i] = i < 30 ? B[i] : 7000 + i;
                const int64_t keeps[3] = {5, 17, 30};
                int same = 1;
                for (int ki = 0; ki < 3; ki++) {
                    const int64_t keep = keeps[ki];
                    int64_t sl[64], lrow = 44;
                    CHECK_OK(attn_llama_batch_clear_slot(qb, 0));
                    CHECK_OK(attn_llama_batch_clear_slot(qb, 1));
                    for (int i = 0; i < 64; i++) sl[i] = 0;
                    CHECK_OK(attn_llama_batch_forward(qb, B, sl, 45, &lrow, 1, l1, 2));
                    for (int st_ = 0; st_ < 4; st_++) { /* B alone: 4 greedy steps */
                        ra[st_] = (int32_t)attn_logits_argmax(l1, QV);
                        CHECK_OK(attn_llama_batch_forward(qb, &ra[st_], sl, 1, &z, 1, l1, 2));
                    }
                    for (int i = 0; i < 64; i++) sl[i] = 1;
                    lrow = 39;
                    CHECK_OK(attn_llama_batch_forward(qb, A, sl, 40, &lrow, 1, l2, 2));
                    int32_t g = (int32_t)attn_logits_argmax(l2, QV);
                    CHECK_OK(attn_llama_batch_forward(qb, &g, sl, 1, &z, 1, l2, 2)); /* A's request decoded a token */
                    CHECK_OK(attn_llama_batch_keep_slot(qb, 1, keep));
                    lrow = 45 - keep - 1;
                    CHECK_OK(attn_llama_batch_forward(qb, B + keep, sl, 45 - keep, &lrow, 1, l2, 2));
                    for (int st_ = 0; st_ < 4; st_++) {
                        rb[st_] = (int32_t)attn_logits_argmax(l2, QV);
                        CHECK_OK(attn_llama_batch_forward(qb, &rb[st_], sl, 1, &z, 1, l2, 2));
                    }
                    same &= memcmp(ra, rb, sizeof ra[0] * 4) == 0 && memcmp(l1, l2, sizeof(float) * (size_t)QV) == 0;
                }
                CHECK(same, "SmolLM2: B's rest after 5 / 17 / 30 positions kept from prompt A == B fed whole, logits and 4 greedy tokens bit for bit");
                CHECK_ERR(attn_llama_batch_keep_slot(qb, 1, 10000), ATTN_E_INVALID);
                CHECK_ERR(attn_llama_batch_keep_slot(qb, 2, 0), ATTN_E_INVALID);
                CHECK_ERR(attn_llama_batch_keep_slot(qb, 1, -1), ATTN_E_INVALID);
            }
            attn_llama_batch_free(qb);
            attn_llama_state_free(st);
            free(l1);
            free(l2);
            attn_llama_free(q);
        } else
            printf("SmolLM2 Q4_1 case skipped: %s\n", attn_last_error());
    }
    free(lg);
    free(ref);
    attn_llama_batch_free(b);
    attn_bpe_free(tok);
    attn_llama_free(m);
    return attn_test_finish();
}
