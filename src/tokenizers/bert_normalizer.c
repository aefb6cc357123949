/* BertNormalizer as a stream of characters (Hugging Face tokenizers normalizers/bert.rs and
 * NormalizedString's alignments), for the WordPiece tokenizer (see wordpiece_internal.h). */
#include "core/internal.h"
#include "tokenizers/tok_common.h"
#include "tokenizers/wordpiece_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

void attn__norm_init(norm_stream *ns, const attn_tokenizer *t, norm_sink sink, void *ctx) {
    memset(ns, 0, sizeof *ns);
    ns->t = t;
    ns->sink = sink;
    ns->ctx = ctx;
}

void attn__norm_free(norm_stream *ns) { free(ns->run); }

/* After NFD: drop Mn (strip_accents), lowercase, hand to the sink. */
static void ns_out(norm_stream *ns, int32_t c, size_t s, size_t e) {
    if (ns->t->strip_accents && attn__uni_bert_mn(c)) return;
    if (ns->t->lowercase) {
        if (c == 0x130) { /* Rust's char::to_lowercase: U+0130 -> "i\u0307" */
            ns->sink(ns->ctx, 'i', s, e);
            ns->sink(ns->ctx, 0x307, s, e);
            return;
        }
        c = attn__uni_to_lower(c);
    }
    ns->sink(ns->ctx, c, s, e);
}

static int item_cmp(const void *a, const void *b) {
    const norm_item *x = a, *y = b;
    if (x->ccc != y->ccc) return x->ccc < y->ccc ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

static void ns_flush_run(norm_stream *ns) {
    size_t n = ns->run_n;
    if (n == 0) return;
    ns->run_n = 0;
    norm_item *r = ns->run;
    int sorted = 1;
    for (size_t i = 1; i < n && sorted; i++) sorted = r[i - 1].ccc <= r[i].ccc;
    if (sorted) {
        for (size_t i = 0; i < n; i++) {
            if (!r[i].inserted) {
                ns->last_s = r[i].s;
                ns->last_e = r[i].e;
            }
            ns_out(ns, r[i].c, ns->last_s, ns->last_e);
        }
        return;
    }
    /* the spans of the decomposition-initial characters in arrival order; after the sort they
     * are handed out again in this order (positional alignment) */
    size_t *sp = malloc(2 * n * sizeof *sp);
    if (!sp) {
        ns->nomem = 1;
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!r[i].inserted) {
            sp[2 * k] = r[i].s;
            sp[2 * k + 1] = r[i].e;
            k++;
        }
    for (size_t i = 0; i < n; i++) r[i].idx = i;
    qsort(r, n, sizeof *r, item_cmp);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (!r[i].inserted) {
            ns->last_s = sp[2 * j];
            ns->last_e = sp[2 * j + 1];
            j++;
        }
        ns_out(ns, r[i].c, ns->last_s, ns->last_e);
    }
    free(sp);
}

static void ns_nfd_char(norm_stream *ns, int32_t d, int inserted, size_t s, size_t e) {
    int cc = attn__uni_bert_ccc(d);
    if (cc == 0) {
        ns_flush_run(ns);
        if (!inserted) {
            ns->last_s = s;
            ns->last_e = e;
        }
        ns_out(ns, d, ns->last_s, ns->last_e);
        return;
    }
    if (ns->run_n == ns->run_cap) {
        if (ns->run_cap >= NORM_RUN_MAX) {
            ns_flush_run(ns);
        } else {
            size_t nc = ns->run_cap ? 2 * ns->run_cap : 16;
            norm_item *nr = realloc(ns->run, nc * sizeof *nr);
            if (!nr) {
                ns->nomem = 1;
                return;
            }
            ns->run = nr;
            ns->run_cap = nc;
        }
    }
    norm_item *it = &ns->run[ns->run_n++];
    it->c = d;
    it->ccc = cc;
    it->inserted = inserted;
    it->idx = 0;
    it->s = s;
    it->e = e;
}

/* Feed one input character with its byte span. */
void attn__norm_feed(norm_stream *ns, int32_t c, size_t s, size_t e) {
    const attn_tokenizer *t = ns->t;
    if (t->clean_text) {
        if (attn__uni_bert_removed(c)) return;
        if (attn__uni_is_ws(c)) c = ' ';
    }
    int32_t xs[3];
    int nx = 0;
    if (t->chinese && attn__uni_bert_cjk(c)) {
        xs[nx++] = ' ';
        xs[nx++] = c;
        xs[nx++] = ' ';
    } else {
        xs[nx++] = c;
    }
    for (int i = 0; i < nx; i++) {
        if (!t->strip_accents) {
            ns_out(ns, xs[i], s, e);
            continue;
        }
        int32_t d[NORM_DECOMP_MAX];
        int last = 0;
        /* U+11938: tokenizers' NFD tables predate Unicode 13 and keep it whole */
        utf8proc_ssize_t k = (xs[i] < 0xC0 || xs[i] == 0x11938)
                                 ? 0
                                 : utf8proc_decompose_char(xs[i], d, NORM_DECOMP_MAX, UTF8PROC_DECOMPOSE, &last);
        if (k <= 0 || k > NORM_DECOMP_MAX) { /* no decomposition (or defensive) */
            d[0] = xs[i];
            k = 1;
        }
        for (utf8proc_ssize_t j = 0; j < k; j++) ns_nfd_char(ns, d[j], j > 0, s, e);
    }
}

/* End of a normalized piece (end of text, or an added token follows). */
void attn__norm_end(norm_stream *ns) { ns_flush_run(ns); }
