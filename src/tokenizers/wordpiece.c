/* BERT WordPiece tokenizer: BertNormalizer + BertPreTokenizer + WordPiece + [CLS]/[SEP].
 *
 * Matches the behaviour of the Hugging Face `tokenizers` library (normalizers/bert.rs,
 * pre_tokenizers/bert.rs, models/wordpiece, processors/template.rs, added_vocabulary.rs);
 * see include/attn_wordpiece.h for the pipeline. The text is processed as a stream: each
 * input character is normalized on its own (every BertNormalizer step is per character,
 * except the canonical reordering of NFD, which holds back a run of combining marks until
 * the next starter), the characters are grouped into words, and each finished word goes
 * through WordPiece. Memory use is therefore bounded (by the longest word WordPiece can
 * still split, max_input_chars_per_word, and the longest reordered run), whatever the input
 * size, and encoding stops as soon as the truncation length is reached. Every character
 * carries the byte span of the input character it came from, which gives HF's offsets.
 * The normalizer is in bert_normalizer.c, tokenizer.json loading in wordpiece_json.c. */
#include "attn_wordpiece.h"
#include "core/internal.h"
#include "tokenizers/tok_common.h"
#include "tokenizers/wordpiece_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ vocabulary hash */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

/* Slot of string s[0..n), or -1. */
static int64_t vocab_slot(const attn_tokenizer *t, const char *s, size_t n) {
    if (!t->n_slots || n > t->max_key_len) return -1;
    size_t mask = t->n_slots - 1, i = (size_t)hash_bytes(s, n) & mask;
    while (t->key[i]) {
        if (t->key_len[i] == n && memcmp(t->key[i], s, n) == 0) return (int64_t)i;
        i = (i + 1) & mask;
    }
    return -1;
}

/* Id of a token among the model vocab and the added tokens (Tokenizer::token_to_id). */
static int32_t vocab_lookup(const attn_tokenizer *t, const char *s, size_t n) {
    int64_t i = vocab_slot(t, s, n);
    return i < 0 ? -1 : t->key_id[i];
}

/* Id of a token in the WordPiece model vocab only (what WordPiece::tokenize looks up). */
static int32_t model_lookup(const attn_tokenizer *t, const char *s, size_t n) {
    int64_t i = vocab_slot(t, s, n);
    return i < 0 ? -1 : t->key_model[i];
}

/* Insert or overwrite (later entries win, like a Rust HashMap insert); model = 1 for the
 * WordPiece vocab, 0 for an added token. */
static void vocab_insert(attn_tokenizer *t, const char *s, size_t n, int32_t id, int model) {
    size_t mask = t->n_slots - 1, i = (size_t)hash_bytes(s, n) & mask;
    while (t->key[i]) {
        if (t->key_len[i] == n && memcmp(t->key[i], s, n) == 0) break;
        i = (i + 1) & mask;
    }
    if (!t->key[i]) {
        t->key[i] = s;
        t->key_len[i] = (uint32_t)n;
        t->key_model[i] = -1;
        if (n > t->max_key_len) t->max_key_len = n;
    }
    t->key_id[i] = id;
    if (model) t->key_model[i] = id;
}

void attn__wp_init_defaults(attn_tokenizer *t) {
    t->clean_text = 1;
    t->chinese = 1;
    t->strip_accents = 1;
    t->lowercase = 1;
    t->unk_id = t->cls_id = t->sep_id = t->pad_id = t->mask_id = -1;
    t->max_chars = 100;
}

/* Build the hash / id table from the model vocab entries and the added tokens. unk names the
 * unk token, prefix the continuation prefix. As in tokenizers' AddedVocabulary::add_tokens,
 * an added token takes the id of the same string in the model vocab; one that is not there
 * gets the next id after the model vocab (entry count) and the previous new added tokens —
 * the "id" written in tokenizer.json is not used. */
int attn__wp_build(attn_tokenizer *t, const tok_entry *e, size_t n, const tok_added_spec *add,
                    int n_add, const char *unk, const char *prefix) {
    size_t total = 0;
    int64_t max_id = -1;
    for (size_t i = 0; i < n; i++) {
        if (e[i].len > UINT32_MAX - 1 || total > SIZE_MAX / 2 - e[i].len)
            return attn_set_error(ATTN_E_FORMAT, "tokenizer: vocabulary too large");
        total += e[i].len + 1;
        if (e[i].id > max_id) max_id = e[i].id;
    }
    for (int i = 0; i < n_add; i++) {
        size_t l = strlen(add[i].content);
        if (l == 0) return attn_set_error(ATTN_E_FORMAT, "tokenizer: empty added token");
        if (l > UINT32_MAX - 1 || total > SIZE_MAX / 2 - l)
            return attn_set_error(ATTN_E_FORMAT, "tokenizer: vocabulary too large");
        total += l + 1;
    }
    if (n == 0) return attn_set_error(ATTN_E_FORMAT, "tokenizer: empty vocabulary");
    /* bound the id table by the entry count so a hostile file cannot ask for gigabytes */
    if ((uint64_t)max_id > 16 * (uint64_t)n + 1024)
        return attn_set_error(ATTN_E_FORMAT, "tokenizer: id %lld is far beyond the %zu vocabulary entries",
                              (long long)max_id, n);
    size_t slots = 16;
    while (slots < 2 * (n + (size_t)n_add) + 2) slots *= 2;
    t->n_slots = slots;
    t->blob = malloc(total ? total : 1);
    t->key = calloc(slots, sizeof *t->key);
    t->key_len = calloc(slots, sizeof *t->key_len);
    t->key_id = calloc(slots, sizeof *t->key_id);
    t->key_model = calloc(slots, sizeof *t->key_model);
    t->added = n_add ? calloc((size_t)n_add, sizeof *t->added) : NULL;
    if (!t->blob || !t->key || !t->key_len || !t->key_id || !t->key_model || (n_add && !t->added))
        return attn_set_error(ATTN_E_NOMEM, "tokenizer: out of memory for %zu tokens", n);
    char *p = t->blob;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, e[i].s, e[i].len);
        p[e[i].len] = '\0';
        vocab_insert(t, p, e[i].len, e[i].id, 1);
        p += e[i].len + 1;
    }
    size_t n_model = 0; /* distinct strings of the model vocab (WordPiece::get_vocab_size) */
    for (size_t i = 0; i < slots; i++) n_model += t->key[i] != NULL;
    int64_t max_added = -1;
    for (int i = 0; i < n_add; i++) {
        size_t l = strlen(add[i].content);
        memcpy(p, add[i].content, l + 1);
        int32_t id = vocab_lookup(t, p, l);
        if (id < 0) {
            if (max_added >= 0 && (max_added >= (int64_t)n_model || n_model == 0)) id = (int32_t)(max_added + 1);
            else id = (int32_t)n_model;
        }
        if (id > max_added) max_added = id;
        vocab_insert(t, p, l, id, 0);
        t->added[i].s = p;
        t->added[i].len = l;
        t->added[i].id = id;
        t->added_first[(unsigned char)p[0] >> 3] |= (unsigned char)(1u << ((unsigned char)p[0] & 7));
        if (id > max_id) max_id = id;
        p += l + 1;
    }
    t->n_added = n_add;
    t->vocab_size = max_id + 1;
    t->id_tok = calloc((size_t)t->vocab_size, sizeof *t->id_tok);
    if (!t->id_tok) return attn_set_error(ATTN_E_NOMEM, "tokenizer: out of memory for %zu tokens", n);
    for (size_t i = 0; i < slots; i++) /* id -> string; with duplicate ids the first slot wins */
        if (t->key[i] && t->key_model[i] >= 0 && !t->id_tok[t->key_model[i]]) t->id_tok[t->key_model[i]] = t->key[i];
    for (int i = 0; i < n_add; i++)
        if (!t->id_tok[t->added[i].id]) t->id_tok[t->added[i].id] = t->added[i].s;
    t->unk_id = model_lookup(t, unk, strlen(unk));
    if (t->unk_id < 0)
        return attn_set_error(ATTN_E_FORMAT, "tokenizer: unk token \"%s\" is not in the vocabulary", unk);
    t->prefix = strdup(prefix);
    if (!t->prefix) return attn_set_error(ATTN_E_NOMEM, "tokenizer: out of memory");
    t->prefix_len = strlen(prefix);
    t->cls_id = vocab_lookup(t, "[CLS]", 5);
    t->sep_id = vocab_lookup(t, "[SEP]", 5);
    t->pad_id = vocab_lookup(t, "[PAD]", 5);
    t->mask_id = vocab_lookup(t, "[MASK]", 6);
    return ATTN_OK;
}

void attn_tokenizer_free(attn_tokenizer *t) {
    if (!t) return;
    ATTN_FREE_ALL(t->blob, (void *)t->id_tok, (void *)t->key, t->key_len, t->key_id, t->key_model, t->added, t->prefix);
    free(t);
}

/* ------------------------------------------------------------------ vocab.txt / token list */

static const char *const std_specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

/* Shared tail of the vocab.txt and token-list loaders. */
static int finish_plain(attn_tokenizer **out, attn_tokenizer *t, tok_entry *e, size_t n, int lowercase,
                        int strip_accents) {
    tok_added_spec add[5];
    int n_add = 0;
    /* like BertWordPieceTokenizer: the standard special tokens present in the vocabulary */
    for (int k = 0; k < 5; k++) {
        int found = 0;
        for (size_t i = 0; i < n && !found; i++)
            found = e[i].len == strlen(std_specials[k]) && memcmp(e[i].s, std_specials[k], e[i].len) == 0;
        if (found) add[n_add++].content = std_specials[k];
    }
    int rc = attn__wp_build(t, e, n, add, n_add, "[UNK]", "##");
    if (rc < 0) {
        attn_tokenizer_free(t);
        return rc;
    }
    t->lowercase = lowercase ? 1 : 0;
    t->strip_accents = strip_accents < 0 ? t->lowercase : (strip_accents ? 1 : 0);
    t->template_ok = t->cls_id >= 0 && t->sep_id >= 0;
    if (t->template_ok) {
        t->pre_ids[0] = t->cls_id;
        t->post_ids[0] = t->sep_id;
        t->n_pre = t->n_post = 1;
    }
    *out = t;
    return ATTN_OK;
}

int attn_tokenizer_from_tokens(attn_tokenizer **out, const char *const *tokens, int64_t n_tokens,
                               int lowercase, int strip_accents) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "tokenizer_from_tokens: NULL out");
    *out = NULL;
    if (!tokens || n_tokens <= 0 || n_tokens > INT32_MAX)
        return attn_set_error(ATTN_E_INVALID, "tokenizer_from_tokens: need 1..2^31-1 tokens, got %lld",
                              (long long)n_tokens);
    tok_entry *e = malloc((size_t)n_tokens * sizeof *e);
    attn_tokenizer *t = calloc(1, sizeof *t);
    if (!e || !t) {
        free(e);
        free(t);
        return attn_set_error(ATTN_E_NOMEM, "tokenizer_from_tokens: out of memory");
    }
    attn__wp_init_defaults(t);
    for (int64_t i = 0; i < n_tokens; i++) {
        if (!tokens[i]) {
            free(e);
            free(t);
            return attn_set_error(ATTN_E_INVALID, "tokenizer_from_tokens: token %lld is NULL", (long long)i);
        }
        size_t l = strlen(tokens[i]);
        size_t bad;
        if (attn_tokenizer_validate_utf8(tokens[i], l, &bad) < 0) {
            free(e);
            free(t);
            return attn_set_error(ATTN_E_FORMAT, "tokenizer_from_tokens: token %lld: invalid UTF-8 at byte %zu",
                                  (long long)i, bad);
        }
        e[i].s = tokens[i];
        e[i].len = l;
        e[i].id = (int32_t)i;
    }
    int rc = finish_plain(out, t, e, (size_t)n_tokens, lowercase, strip_accents);
    free(e);
    return rc;
}

int attn__wp_read(const char *fn, attn_tokenizer **out, const char *path, char **data, size_t *len) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "%s: NULL out", fn);
    *out = NULL;
    if (!path) return attn_set_error(ATTN_E_INVALID, "%s: NULL path", fn);
    return attn__read_file(path, TOK_MAX_FILE, ATTN_E_FORMAT, data, len);
}

int attn_tokenizer_load_vocab(attn_tokenizer **out, const char *vocab_path, int lowercase, int strip_accents) {
    char *data;
    size_t len;
    int rc = attn__wp_read("tokenizer_load_vocab", out, vocab_path, &data, &len);
    if (rc < 0) return rc;
    size_t bad;
    if (attn_tokenizer_validate_utf8(data, len, &bad) < 0) {
        free(data);
        return attn_set_error(ATTN_E_FORMAT, "%s: invalid UTF-8 at byte offset %zu", vocab_path, bad);
    }
    /* count lines: Rust's BufRead::lines (a final line without '\n' counts; a final '\n'
     * does not start another line) */
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (data[i] == '\n') n++;
    if (len && data[len - 1] != '\n') n++;
    if (n == 0 || n > INT32_MAX) {
        free(data);
        return attn_set_error(ATTN_E_FORMAT, "%s: %s", vocab_path, n ? "too many lines" : "empty vocabulary");
    }
    tok_entry *e = malloc(n * sizeof *e);
    attn_tokenizer *t = calloc(1, sizeof *t);
    if (!e || !t) {
        free(e);
        free(t);
        free(data);
        return attn_set_error(ATTN_E_NOMEM, "tokenizer_load_vocab: out of memory");
    }
    attn__wp_init_defaults(t);
    size_t start = 0, k = 0;
    while (start < len && k < n) {
        size_t end = start;
        while (end < len && data[end] != '\n') end++;
        /* str::trim_end: drop trailing White_Space characters (\r included) */
        size_t l = end - start;
        for (;;) {
            if (l == 0) break;
            size_t b = l - 1;
            while (b > 0 && ((unsigned char)data[start + b] & 0xC0) == 0x80) b--;
            int32_t cp;
            int m = attn__utf8_decode((const unsigned char *)data + start, l, b, &cp);
            if (m <= 0 || !attn__uni_is_ws(cp)) break;
            l = b;
        }
        e[k].s = data + start;
        e[k].len = l;
        e[k].id = (int32_t)k;
        k++;
        start = end + 1;
    }
    rc = finish_plain(out, t, e, k, lowercase, strip_accents);
    if (rc < 0 && rc != ATTN_E_NOMEM) attn__error_prefix(rc, vocab_path);
    free(e);
    free(data);
    return rc;
}

/* ------------------------------------------------------------------ encoding */

typedef struct {
    const attn_tokenizer *t;
    /* output */
    int32_t *ids;
    int64_t *offsets;
    int64_t cap;
    int64_t pos;   /* next output index (specials included) */
    int64_t count; /* content ids emitted so far */
    int64_t limit; /* content ids allowed by truncation */
    int full;      /* limit reached: stop */
    /* current word: normalized characters and their spans in the input; only the first
     * wcap characters are kept (a longer word is the unk token anyway) */
    int32_t *wc;
    size_t *ws, *we;
    size_t wcap;
    int64_t wn;
    size_t wstart, wend;
    /* WordPiece scratch */
    char *wbytes;   /* UTF-8 of the word */
    size_t *wpos;   /* byte position of each character, [wcap + 1] */
    char *cand;     /* prefix + candidate piece */
    int32_t *pid;   /* piece ids */
    int64_t *pchar; /* piece start characters, [wcap + 1] */
} enc_state;

static void enc_put(enc_state *st, int32_t id, size_t s, size_t e) {
    if (st->pos < st->cap) {
        st->ids[st->pos] = id;
        if (st->offsets) {
            st->offsets[2 * st->pos] = (int64_t)s;
            st->offsets[2 * st->pos + 1] = (int64_t)e;
        }
    }
    st->pos++;
}

static void enc_emit(enc_state *st, int32_t id, size_t s, size_t e) {
    if (st->count >= st->limit) {
        st->full = 1;
        return;
    }
    enc_put(st, id, s, e);
    if (++st->count >= st->limit) st->full = 1;
}

static void word_push(enc_state *st, int32_t c, size_t s, size_t e) {
    if (st->wn == 0) st->wstart = s;
    st->wend = e;
    if ((size_t)st->wn < st->wcap) {
        st->wc[st->wn] = c;
        st->ws[st->wn] = s;
        st->we[st->wn] = e;
    }
    st->wn++;
}

/* WordPiece on the current word, then emit its pieces (or the unk token). A piece's span
 * runs from its first character's start to its last character's end, as HF's
 * expand_alignments does. */
static void word_flush(enc_state *st) {
    const attn_tokenizer *t = st->t;
    int64_t n = st->wn;
    st->wn = 0;
    if (n == 0 || st->full) return;
    if (n > t->max_chars) {
        enc_emit(st, t->unk_id, st->wstart, st->wend);
        return;
    }
    size_t b = 0;
    for (int64_t i = 0; i < n; i++) {
        st->wpos[i] = b;
        b += (size_t)attn__utf8_encode(st->wc[i], st->wbytes + b);
    }
    st->wpos[n] = b;
    int64_t np = 0, start = 0;
    while (start < n) {
        size_t plen = start > 0 ? t->prefix_len : 0;
        int64_t end = n;
        /* longer candidates cannot be in the vocabulary */
        while (end > start && plen + (st->wpos[end] - st->wpos[start]) > t->max_key_len) end--;
        int32_t id = -1;
        if (plen) memcpy(st->cand, t->prefix, plen);
        for (; end > start; end--) {
            size_t l = st->wpos[end] - st->wpos[start];
            memcpy(st->cand + plen, st->wbytes + st->wpos[start], l);
            id = model_lookup(t, st->cand, plen + l);
            if (id >= 0) break;
        }
        if (id < 0) {
            enc_emit(st, t->unk_id, st->wstart, st->wend);
            return;
        }
        st->pid[np] = id;
        st->pchar[np] = start;
        np++;
        start = end;
    }
    st->pchar[np] = n;
    for (int64_t p = 0; p < np && !st->full; p++)
        enc_emit(st, st->pid[p], st->ws[st->pchar[p]], st->we[st->pchar[p + 1] - 1]);
}

/* norm_sink of the encoder: BertPreTokenizer (whitespace splits and is dropped, each
 * punctuation character is a word of its own). */
static void pretok_sink(void *ctx, int32_t d, size_t s, size_t e) {
    enc_state *st = ctx;
    if (st->full) return;
    if (attn__uni_is_ws(d)) {
        word_flush(st);
    } else if (attn__uni_bert_punct(d)) {
        word_flush(st);
        word_push(st, d, s, e);
        word_flush(st);
    } else {
        word_push(st, d, s, e);
    }
}

/* Longest added token matching at text[i..len), or -1. */
static int added_match(const attn_tokenizer *t, const char *text, size_t len, size_t i) {
    unsigned char c0 = (unsigned char)text[i];
    if (!(t->added_first[c0 >> 3] & (1u << (c0 & 7)))) return -1;
    int best = -1;
    for (int k = 0; k < t->n_added; k++) {
        size_t l = t->added[k].len;
        if (l <= len - i && memcmp(text + i, t->added[k].s, l) == 0 && (best < 0 || l > t->added[best].len))
            best = k;
    }
    return best;
}

/* Decode the character at byte i of the validated text u[len] and feed it to the normaliser;
 * returns its length in bytes. */
static size_t norm_feed_char(norm_stream *ns, const unsigned char *u, size_t len, size_t i) {
    int32_t c;
    int n = attn__utf8_decode(u, len, i, &c);
    if (n <= 0) n = 1, c = 0xFFFD; /* unreachable: the text was validated */
    attn__norm_feed(ns, c, i, i + (size_t)n);
    return (size_t)n;
}

int attn_tokenizer_encode(const attn_tokenizer *t, const char *text, size_t text_len, int add_special,
                          int64_t max_len, int32_t *ids, int64_t *n_ids, int64_t cap, int64_t *offsets) {
    if (!t || !n_ids) return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: NULL tokenizer or n_ids");
    *n_ids = 0;
    if (!text && text_len) return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: NULL text with length %zu", text_len);
    if (cap < 0 || (!ids && cap > 0))
        return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: bad output buffer (cap %lld)", (long long)cap);
    if (!ids && offsets) return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: offsets without ids");
    if (add_special && !t->template_ok)
        return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: add_special needs [CLS] and [SEP] in the vocabulary");
    int64_t nspec = add_special ? t->n_pre + t->n_post : 0;
    if (max_len > 0 && max_len < nspec)
        return attn_set_error(ATTN_E_INVALID, "tokenizer_encode: max_len %lld cannot hold the %lld special tokens",
                              (long long)max_len, (long long)nspec);
    ATTN_TRY(attn_tokenizer_validate_utf8(text, text_len, NULL));

    enc_state st;
    memset(&st, 0, sizeof st);
    st.t = t;
    st.ids = ids;
    st.offsets = offsets;
    st.cap = ids ? cap : 0;
    st.limit = max_len > 0 ? max_len - nspec : INT64_MAX;
    st.full = st.limit <= 0;
    st.wcap = (size_t)t->max_chars + 1;
    size_t wc = st.wcap;
    st.wc = malloc(wc * sizeof *st.wc);
    st.ws = malloc(wc * sizeof *st.ws);
    st.we = malloc(wc * sizeof *st.we);
    st.wbytes = malloc(4 * wc);
    st.wpos = malloc((wc + 1) * sizeof *st.wpos);
    st.cand = malloc(t->prefix_len + 4 * wc);
    st.pid = malloc(wc * sizeof *st.pid);
    st.pchar = malloc((wc + 1) * sizeof *st.pchar);
    norm_stream ns;
    attn__norm_init(&ns, t, pretok_sink, &st);
    int rc = ATTN_OK;
    if (!st.wc || !st.ws || !st.we || !st.wbytes || !st.wpos || !st.cand || !st.pid || !st.pchar) {
        rc = attn_set_error(ATTN_E_NOMEM, "tokenizer_encode: out of memory");
        goto done;
    }
    if (add_special)
        for (int k = 0; k < t->n_pre; k++) enc_put(&st, t->pre_ids[k], 0, 0);

    const unsigned char *u = (const unsigned char *)text;
    size_t i = 0;
    while (i < text_len && !st.full && !ns.nomem) {
        if (t->n_added) {
            int k = added_match(t, text, text_len, i);
            if (k >= 0) {
                attn__norm_end(&ns);
                word_flush(&st);
                enc_emit(&st, t->added[k].id, i, i + t->added[k].len);
                i += t->added[k].len;
                continue;
            }
        }
        i += norm_feed_char(&ns, u, text_len, i);
    }
    attn__norm_end(&ns);
    word_flush(&st);
    if (ns.nomem) {
        rc = attn_set_error(ATTN_E_NOMEM, "tokenizer_encode: out of memory");
        goto done;
    }
    if (add_special)
        for (int k = 0; k < t->n_post; k++) enc_put(&st, t->post_ids[k], 0, 0);
    *n_ids = st.pos;
    if (ids && st.pos > cap)
        rc = attn_set_error(ATTN_E_RANGE, "tokenizer_encode: %lld ids do not fit in cap %lld", (long long)st.pos,
                            (long long)cap);
done:
    attn__norm_free(&ns);
    ATTN_FREE_ALL(st.wc, st.ws, st.we, st.wbytes, st.wpos, st.cand, st.pid, st.pchar);
    return rc;
}

/* ------------------------------------------------------------------ normalize only */

typedef struct {
    char *out;
    size_t cap, total;
} norm_buf;

static void buf_sink(void *ctx, int32_t c, size_t s, size_t e) {
    norm_buf *b = ctx;
    char tmp[4];
    int l = attn__utf8_encode(c, tmp);
    if (b->total + (size_t)l < b->cap) memcpy(b->out + b->total, tmp, (size_t)l);
    b->total += (size_t)l;
}

int attn_tokenizer_normalize(const attn_tokenizer *t, const char *text, size_t text_len, char *out, size_t cap,
                             size_t *out_len) {
    if (!t || !out_len) return attn_set_error(ATTN_E_INVALID, "tokenizer_normalize: NULL tokenizer or out_len");
    *out_len = 0;
    if (!text && text_len) return attn_set_error(ATTN_E_INVALID, "tokenizer_normalize: NULL text with length %zu", text_len);
    if (!out && cap) return attn_set_error(ATTN_E_INVALID, "tokenizer_normalize: NULL out with cap %zu", cap);
    ATTN_TRY(attn_tokenizer_validate_utf8(text, text_len, NULL));
    norm_buf b = {out, cap, 0};
    norm_stream ns;
    attn__norm_init(&ns, t, buf_sink, &b);
    const unsigned char *u = (const unsigned char *)text;
    size_t i = 0;
    while (i < text_len && !ns.nomem) {
        i += norm_feed_char(&ns, u, text_len, i);
    }
    attn__norm_end(&ns);
    attn__norm_free(&ns);
    if (ns.nomem) return attn_set_error(ATTN_E_NOMEM, "tokenizer_normalize: out of memory");
    *out_len = b.total;
    if (!out && cap == 0) return ATTN_OK; /* length query */
    if (b.total < cap) {
        out[b.total] = '\0';
        return ATTN_OK;
    }
    if (cap) out[cap - 1] = '\0';
    return attn_set_error(ATTN_E_RANGE, "tokenizer_normalize: %zu bytes (+1 NUL) do not fit in cap %zu", b.total, cap);
}

/* ------------------------------------------------------------------ queries */

int64_t attn_tokenizer_vocab_size(const attn_tokenizer *t) { return t ? t->vocab_size : 0; }

const char *attn_tokenizer_id_to_token(const attn_tokenizer *t, int64_t id) {
    if (!t) {
        attn_set_error(ATTN_E_INVALID, "tokenizer_id_to_token: NULL tokenizer");
        return NULL;
    }
    if (id < 0 || id >= t->vocab_size || !t->id_tok[id]) {
        attn_set_error(ATTN_E_RANGE, "tokenizer_id_to_token: no token with id %lld", (long long)id);
        return NULL;
    }
    return t->id_tok[id];
}

int32_t attn_tokenizer_token_to_id(const attn_tokenizer *t, const char *token) {
    if (!t || !token) return -1;
    return vocab_lookup(t, token, strlen(token));
}

int32_t attn_tokenizer_cls_id(const attn_tokenizer *t) { return t ? t->cls_id : -1; }
int32_t attn_tokenizer_sep_id(const attn_tokenizer *t) { return t ? t->sep_id : -1; }
int32_t attn_tokenizer_pad_id(const attn_tokenizer *t) { return t ? t->pad_id : -1; }
int32_t attn_tokenizer_unk_id(const attn_tokenizer *t) { return t ? t->unk_id : -1; }
int32_t attn_tokenizer_mask_id(const attn_tokenizer *t) { return t ? t->mask_id : -1; }
