/* Byte-level BPE (GPT-2 family) and SentencePiece-style BPE with byte fallback (llama2.c).
 * See include/attn_bpe.h for the algorithms and their sources.
 *
 * Merging uses a linked list of symbols and a binary heap of candidate pairs ordered by
 * (priority, position of the left symbol), with stale entries skipped when popped: O(n log n)
 * per word, so a pathological 1 MB "word" cannot hang the tokenizer. Decoding (ids to bytes,
 * the UTF-8-safe stream) is in bpe_decode.c. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "attn_bpe.h"
#include "attn_utf8.h"
#include "core/internal.h"
#include "tokenizers/bpe_internal.h"
#include "tokenizers/tok_common.h"

#include <errno.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ hashing */

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

int32_t attn__bpe_lookup(const attn_bpe *t, const char *s, size_t n) {
    size_t m = t->n_slots - 1, i = (size_t)fnv1a(s, n) & m;
    for (;;) {
        int32_t id = t->slot_id[i];
        if (id < 0) return -1;
        if (t->tlen[id] == n && memcmp(t->tok[id], s, n) == 0) return id;
        i = (i + 1) & m;
    }
}

static void insert(attn_bpe *t, int32_t id) {
    size_t m = t->n_slots - 1, i = (size_t)fnv1a(t->tok[id], t->tlen[id]) & m;
    for (;;) {
        int32_t o = t->slot_id[i];
        if (o < 0) {
            t->slot_id[i] = id;
            return;
        }
        if (t->tlen[o] == t->tlen[id] && memcmp(t->tok[o], t->tok[id], t->tlen[id]) == 0) return; /* lowest id wins */
        i = (i + 1) & m;
    }
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static const pair_slot *pair_find(const attn_bpe *t, int32_t a, int32_t b) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t m = t->n_pair_slots - 1, i = (size_t)mix64(key) & m;
    for (;;) {
        const pair_slot *p = &t->pairs[i];
        if (p->key == 0) return NULL;
        if (p->key == key) return p;
        i = (i + 1) & m;
    }
}

static void pair_insert(attn_bpe *t, int32_t a, int32_t b, int32_t rank, int32_t result) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t m = t->n_pair_slots - 1, i = (size_t)mix64(key) & m;
    for (;;) {
        pair_slot *p = &t->pairs[i];
        if (p->key == 0) {
            p->key = key;
            p->rank = rank;
            p->result = result;
            return;
        }
        if (p->key == key) return; /* the first (lowest) rank of a duplicated merge wins */
        i = (i + 1) & m;
    }
}

/* ------------------------------------------------------------------ GPT-2 byte map */

/* bytes_to_unicode (GPT-2 encoder.py): printable Latin-1 bytes map to themselves, the other
 * 68 bytes to U+0100.. in byte order. */
static int32_t byte_to_cp(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    int k = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) k++;
    return 256 + k;
}

/* ------------------------------------------------------------------ creation */

void attn_bpe_free(attn_bpe *t) {
    if (!t) return;
    if (t->tok)
        for (int64_t i = 0; i < t->n; i++) free(t->tok[i]);
    free(t->tok);
    free(t->tlen);
    free(t->type);
    free(t->score);
    free(t->slot_id);
    free(t->pairs);
    for (int i = 0; i < t->n_spec; i++) free(t->spec[i].s);
    free(t->spec);
    if (t->re_main) pcre2_code_free(t->re_main);
    if (t->re_digits) pcre2_code_free(t->re_digits);
    free(t);
}

/* GPT-2's regex with \s spelled out as Unicode White_Space (Rust's char::is_whitespace, what
 * Hugging Face tokenizers' regex engine and llama.cpp match): PCRE2's \s also matches U+180E
 * (White_Space only until Unicode 6.2), which split words tokenizers keeps whole (issue 23;
 * tests/test_bpe_unicode.c sweeps every code point against tokenizers 0.23.3). */
#define WS_CLASS "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS_CLASS "\\p{L}\\p{N}]+|[" WS_CLASS "]+(?![^" WS_CLASS "])|[" WS_CLASS "]+";

/* Llama 3's ("llama-bpe") and Qwen2's pre-tokenizer regexes, as their tokenizer.json Split
 * pre-tokenizers give them (behavior Isolated, then ByteLevel without its own regex):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * (Meta-Llama-3-8B), Qwen2 the same with \p{N} (one digit a word); \s spelled out as above. */
#define LLAMA3_STYLE(NUM)                                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" NUM "| ?[^" WS_CLASS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS_CLASS \
    "]*[\\r\\n]+|[" WS_CLASS "]+(?![^" WS_CLASS "])|[" WS_CLASS "]+"
static const char LLAMA3_PATTERN[] = LLAMA3_STYLE("\\p{N}{1,3}");
static const char QWEN2_PATTERN[] = LLAMA3_STYLE("\\p{N}");

static int compile_re(pcre2_code **out, const char *pat) {
    int err;
    PCRE2_SIZE off;
    *out = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &off, NULL);
    if (!*out) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return attn_set_error(ATTN_E_UNSUPPORTED, "bpe: regex does not compile at %zu: %s", (size_t)off, (char *)msg);
    }
    pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
    return ATTN_OK;
}

static int spec_cmp(const void *a, const void *b) {
    const special_tok *x = (const special_tok *)a, *y = (const special_tok *)b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1; /* longest first */
    return x->id - y->id;
}

int attn_bpe_create(attn_bpe **out, const attn_bpe_spec *sp) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "bpe: out is NULL");
    *out = NULL;
    if (!sp || !sp->tokens) return attn_set_error(ATTN_E_INVALID, "bpe: no token list");
    if (sp->n_tokens < 1 || sp->n_tokens > INT32_MAX - 1)
        return attn_set_error(ATTN_E_INVALID, "bpe: token count %lld out of range", (long long)sp->n_tokens);
    if (sp->kind != ATTN_BPE_BYTE_LEVEL && sp->kind != ATTN_BPE_SENTENCEPIECE)
        return attn_set_error(ATTN_E_INVALID, "bpe: unknown kind %d", (int)sp->kind);
    if (sp->kind == ATTN_BPE_SENTENCEPIECE && !sp->scores) return attn_set_error(ATTN_E_INVALID, "bpe: SentencePiece needs scores");
    if (sp->kind == ATTN_BPE_BYTE_LEVEL && sp->n_merges > 0 && !sp->merges) return attn_set_error(ATTN_E_INVALID, "bpe: merges is NULL");
    if (sp->n_merges < 0 || sp->n_merges > INT32_MAX) return attn_set_error(ATTN_E_INVALID, "bpe: merge count out of range");
    if (sp->bos_id < -1 || sp->bos_id >= sp->n_tokens || sp->eos_id < -1 || sp->eos_id >= sp->n_tokens)
        return attn_set_error(ATTN_E_INVALID, "bpe: bos/eos id out of range");
    attn_bpe *t = (attn_bpe *)calloc(1, sizeof *t);
    if (!t) return attn_set_error(ATTN_E_NOMEM, "bpe: out of memory");
    int rc = ATTN_OK;
    const int64_t n = sp->n_tokens;
    t->kind = sp->kind;
    t->n = n;
    t->bos = sp->bos_id;
    t->eos = sp->eos_id;
    t->tok = (char **)calloc((size_t)n, sizeof(char *));
    t->tlen = (uint32_t *)calloc((size_t)n, sizeof(uint32_t));
    t->type = (int32_t *)calloc((size_t)n, sizeof(int32_t));
    t->score = (float *)calloc((size_t)n, sizeof(float));
    t->n_slots = 16;
    while (t->n_slots < (size_t)n * 2) t->n_slots <<= 1;
    t->slot_id = (int32_t *)malloc(sizeof(int32_t) * t->n_slots);
    if (!t->tok || !t->tlen || !t->type || !t->score || !t->slot_id) goto nomem;
    memset(t->slot_id, 0xff, sizeof(int32_t) * t->n_slots);
    for (int64_t i = 0; i < n; i++) {
        const char *s = sp->tokens[i];
        if (!s) {
            rc = attn_set_error(ATTN_E_INVALID, "bpe: token %lld is NULL", (long long)i);
            goto fail;
        }
        size_t len = sp->token_lens ? sp->token_lens[i] : strlen(s);
        if (attn_tokenizer_validate_utf8(s, len, NULL) < 0) {
            rc = attn_set_error(ATTN_E_FORMAT, "bpe: token %lld is not valid UTF-8", (long long)i);
            goto fail;
        }
        t->tok[i] = (char *)malloc(len + 1);
        if (!t->tok[i]) goto nomem;
        memcpy(t->tok[i], s, len);
        t->tok[i][len] = 0;
        t->tlen[i] = (uint32_t)len;
        int ty = sp->token_types ? sp->token_types[i] : ATTN_TOK_NORMAL;
        t->type[i] = ty;
        if (sp->scores) {
            if (isnan(sp->scores[i])) {
                rc = attn_set_error(ATTN_E_FORMAT, "bpe: score of token %lld is NaN", (long long)i);
                goto fail;
            }
            t->score[i] = sp->scores[i];
        }
        if (t->max_bytes < len) t->max_bytes = len;
        insert(t, (int32_t)i);
    }
    /* special strings: control and user-defined tokens, longest first */
    for (int64_t i = 0; i < n; i++)
        if ((t->type[i] == ATTN_TOK_CONTROL || t->type[i] == ATTN_TOK_USER) && t->tlen[i] > 0) t->n_spec++;
    if (t->n_spec) {
        t->spec = (special_tok *)calloc((size_t)t->n_spec, sizeof(special_tok));
        if (!t->spec) goto nomem;
        int k = 0;
        for (int64_t i = 0; i < n; i++)
            if ((t->type[i] == ATTN_TOK_CONTROL || t->type[i] == ATTN_TOK_USER) && t->tlen[i] > 0) {
                t->spec[k].s = (char *)malloc(t->tlen[i] + 1); /* not strdup: a token may hold a NUL byte */
                if (!t->spec[k].s) goto nomem;
                memcpy(t->spec[k].s, t->tok[i], t->tlen[i] + 1);
                t->spec[k].len = t->tlen[i];
                t->spec[k].id = (int32_t)i;
                k++;
            }
        qsort(t->spec, (size_t)t->n_spec, sizeof(special_tok), spec_cmp);
    }
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    for (int c = 0; c < 324; c++) t->cp_to_byte[c] = -1;
    if (t->kind == ATTN_BPE_BYTE_LEVEL) {
        for (int b = 0; b < 256; b++) {
            int32_t cp = byte_to_cp(b);
            char u[4];
            int ul = attn__utf8_encode(cp, u);
            t->cp_to_byte[cp] = b;
            t->byte_id[b] = attn__bpe_lookup(t, u, (size_t)ul); /* -1: a byte the vocabulary lacks is dropped, as HF BPE without unk */
        }
        if (t->byte_id[' '] < 0 || t->byte_id['a'] < 0) {
            rc = attn_set_error(ATTN_E_FORMAT, "bpe: byte-level vocabulary lacks the characters of ' ' or 'a' (not a GPT-2 style vocabulary)");
            goto fail;
        }
        t->n_pair_slots = 16;
        while (t->n_pair_slots < (size_t)sp->n_merges * 2) t->n_pair_slots <<= 1;
        t->pairs = (pair_slot *)calloc(t->n_pair_slots, sizeof(pair_slot));
        if (!t->pairs) goto nomem;
        for (int64_t r = 0; r < sp->n_merges; r++) {
            const char *m = sp->merges[r];
            size_t ml = m ? (sp->merge_lens ? sp->merge_lens[r] : strlen(m)) : 0;
            const char *sep = m ? (const char *)memchr(m + (ml > 0), ' ', ml > 0 ? ml - 1 : 0) : NULL;
            int32_t a = -1, b = -1, res = -1;
            if (sep) {
                a = attn__bpe_lookup(t, m, (size_t)(sep - m));
                b = attn__bpe_lookup(t, sep + 1, ml - (size_t)(sep - m) - 1);
            }
            if (a >= 0 && b >= 0) {
                size_t la = t->tlen[a], lb = t->tlen[b];
                char *cat = (char *)malloc(la + lb + 1);
                if (!cat) goto nomem;
                memcpy(cat, t->tok[a], la);
                memcpy(cat + la, t->tok[b], lb);
                res = attn__bpe_lookup(t, cat, la + lb);
                free(cat);
            }
            if (res < 0) {
                rc = attn_set_error(ATTN_E_FORMAT, "bpe: merge %lld (\"%.*s\") is not two tokens whose concatenation is a token",
                                    (long long)r, (int)(ml > 64 ? 64 : ml), m ? m : "");
                goto fail;
            }
            pair_insert(t, a, b, (int32_t)r, res);
        }
        const char *pre = sp->pretokenizer ? sp->pretokenizer : "gpt2";
        if (strcmp(pre, "gpt2") == 0) {
            rc = compile_re(&t->re_main, GPT2_PATTERN);
        } else if (strcmp(pre, "smollm") == 0) {
            rc = compile_re(&t->re_main, GPT2_PATTERN);
            if (rc == 0) rc = compile_re(&t->re_digits, "\\p{N}");
        } else if (strcmp(pre, "llama-bpe") == 0) {
            rc = compile_re(&t->re_main, LLAMA3_PATTERN);
        } else if (strcmp(pre, "qwen2") == 0) {
            rc = compile_re(&t->re_main, QWEN2_PATTERN);
        } else {
            rc = attn_set_error(ATTN_E_UNSUPPORTED, "bpe: unknown pre-tokenizer '%s' (known: gpt2, smollm, llama-bpe, qwen2)", pre);
        }
        if (rc < 0) goto fail;
    } else {
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            t->byte_id[b] = attn__bpe_lookup(t, name, 6);
            if (t->byte_id[b] >= 0 && t->type[t->byte_id[b]] == ATTN_TOK_NORMAL) t->type[t->byte_id[b]] = ATTN_TOK_BYTE;
        }
    }
    *out = t;
    return ATTN_OK;
nomem:
    rc = attn_set_error(ATTN_E_NOMEM, "bpe: out of memory");
fail:
    attn_bpe_free(t);
    return rc;
}

int attn_bpe_load_llama2c(attn_bpe **out, const char *path, int64_t vocab_size) {
    if (!out || !path) return attn_set_error(ATTN_E_INVALID, "bpe: NULL argument");
    *out = NULL;
    if (vocab_size < 3 || vocab_size > (1 << 24))
        return attn_set_error(ATTN_E_INVALID, "llama2.c tokenizer: vocab_size %lld out of range", (long long)vocab_size);
    char *data = NULL;
    size_t len = 0;
    ATTN_TRY(attn__read_file(path, TOK_MAX_FILE, ATTN_E_FORMAT, &data, &len));
    int rc = ATTN_OK;
    char **toks = (char **)calloc((size_t)vocab_size, sizeof(char *));
    uint32_t *lens = (uint32_t *)calloc((size_t)vocab_size, sizeof(uint32_t));
    float *scores = (float *)calloc((size_t)vocab_size, sizeof(float));
    int32_t *types = (int32_t *)calloc((size_t)vocab_size, sizeof(int32_t));
    if (!toks || !lens || !scores || !types) {
        rc = attn_set_error(ATTN_E_NOMEM, "llama2.c tokenizer: out of memory");
        goto done;
    }
    size_t off = 0;
    int32_t max_len;
    if (len < 4) {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: truncated (no header)", path);
        goto done;
    }
    memcpy(&max_len, data, 4);
    off = 4;
    if (max_len < 1 || max_len > (1 << 20)) {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: not a llama2.c tokenizer (tokenizer.bin / tok512.bin): its header's max token length %d is out of range%s",
                            path, (int)max_len, len >= 4 && memcmp(data, "GGUF", 4) == 0 ? " (this is a GGUF file: it carries its own tokenizer; give it as --model)" : "");
        goto done;
    }
    for (int64_t i = 0; i < vocab_size; i++) {
        int32_t l;
        if (len - off < 8) {
            rc = attn_set_error(ATTN_E_FORMAT, "%s: truncated at token %lld of %lld", path, (long long)i, (long long)vocab_size);
            goto done;
        }
        memcpy(&scores[i], data + off, 4);
        memcpy(&l, data + off + 4, 4);
        off += 8;
        if (l < 0 || l > max_len || (size_t)l > len - off) {
            rc = attn_set_error(ATTN_E_FORMAT, "%s: token %lld has length %d (max %d, %zu bytes left)", path, (long long)i, (int)l,
                                (int)max_len, len - off);
            goto done;
        }
        if (!isfinite(scores[i]) && !(isinf(scores[i]) && scores[i] < 0)) {
            rc = attn_set_error(ATTN_E_FORMAT, "%s: token %lld has a non-finite score", path, (long long)i);
            goto done;
        }
        toks[i] = data + off;
        lens[i] = (uint32_t)l;
        types[i] = ATTN_TOK_NORMAL;
        off += (size_t)l;
    }
    if (off != len) {
        rc = attn_set_error(ATTN_E_FORMAT, "%s: %zu bytes after the last of %lld tokens (wrong vocabulary size?)", path, len - off,
                            (long long)vocab_size);
        goto done;
    }
    types[0] = ATTN_TOK_UNKNOWN; /* <unk> */
    types[1] = ATTN_TOK_CONTROL; /* <s> (llama2.c writes it as "\n<s>\n") */
    types[2] = ATTN_TOK_CONTROL; /* </s> */
    {
        attn_bpe_spec sp = {0};
        sp.kind = ATTN_BPE_SENTENCEPIECE;
        sp.tokens = (const char *const *)toks;
        sp.token_lens = lens;
        sp.n_tokens = vocab_size;
        sp.token_types = types;
        sp.scores = scores;
        sp.bos_id = 1;
        sp.eos_id = 2;
        rc = attn_bpe_create(out, &sp);
        if (rc == 0) { /* llama2.c never matches <s> / </s> in the text */
            for (int k = 0; k < (*out)->n_spec; k++) free((*out)->spec[k].s);
            (*out)->n_spec = 0;
        }
    }
done:
    free(toks);
    free(lens);
    free(scores);
    free(types);
    free(data);
    return rc;
}

/* ------------------------------------------------------------------ merging */

typedef struct {
    double prio; /* lower pops first: byte-level rank, SentencePiece -score */
    int64_t pos; /* left symbol index (its start never changes) */
    int32_t a, b, result;
} heap_ent;

typedef struct {
    int32_t *id;
    int64_t *prev, *next;
    heap_ent *heap;
    int64_t n_heap, cap;
} merge_ws;

static int heap_less(const heap_ent *x, const heap_ent *y) { return x->prio < y->prio || (x->prio == y->prio && x->pos < y->pos); }

static void heap_push(merge_ws *w, heap_ent e) {
    int64_t i = w->n_heap++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!heap_less(&e, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = e;
}

static heap_ent heap_pop(merge_ws *w) {
    heap_ent top = w->heap[0], last = w->heap[--w->n_heap];
    int64_t i = 0, n = w->n_heap;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!heap_less(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* the candidate merge of symbols at positions i and j = next[i], if any */
static int candidate(const attn_bpe *t, merge_ws *w, int64_t i, int64_t j, heap_ent *e) {
    int32_t a = w->id[i], b = w->id[j];
    if (t->kind == ATTN_BPE_BYTE_LEVEL) {
        const pair_slot *p = pair_find(t, a, b);
        if (!p) return 0;
        e->prio = p->rank;
        e->result = p->result;
    } else {
        size_t la = t->tlen[a], lb = t->tlen[b];
        char buf[512], *cat = la + lb <= sizeof buf ? buf : (char *)malloc(la + lb);
        if (!cat) return -1;
        memcpy(cat, t->tok[a], la);
        memcpy(cat + la, t->tok[b], lb);
        int32_t r = attn__bpe_lookup(t, cat, la + lb);
        if (cat != buf) free(cat);
        if (r < 0) return 0;
        e->prio = -(double)t->score[r];
        e->result = r;
    }
    e->pos = i;
    e->a = a;
    e->b = b;
    return 1;
}

/* Merge the n symbols w->id[0..n) in place; returns the surviving count (compacted). */
static int64_t merge_symbols(const attn_bpe *t, merge_ws *w, int64_t n) {
    if (n < 2) return n;
    for (int64_t i = 0; i < n; i++) {
        w->prev[i] = i - 1;
        w->next[i] = i + 1 < n ? i + 1 : -1;
    }
    w->n_heap = 0;
    heap_ent e;
    for (int64_t i = 0; i + 1 < n; i++) {
        int c = candidate(t, w, i, i + 1, &e);
        if (c < 0) return -1;
        if (c) heap_push(w, e);
    }
    while (w->n_heap > 0) {
        heap_ent top = heap_pop(w);
        int64_t i = top.pos, j;
        if (w->id[i] != top.a || (j = w->next[i]) < 0 || w->id[j] != top.b) continue; /* stale */
        w->id[i] = top.result;
        w->id[j] = -1;
        w->next[i] = w->next[j];
        if (w->next[j] >= 0) w->prev[w->next[j]] = i;
        if (w->prev[i] >= 0) {
            int c = candidate(t, w, w->prev[i], i, &e);
            if (c < 0) return -1;
            if (c) heap_push(w, e);
        }
        if (w->next[i] >= 0) {
            int c = candidate(t, w, i, w->next[i], &e);
            if (c < 0) return -1;
            if (c) heap_push(w, e);
        }
    }
    int64_t m = 0;
    for (int64_t i = 0; i >= 0; i = w->next[i]) w->id[m++] = w->id[i];
    return m;
}

static int ws_reserve(merge_ws *w, int64_t n) {
    if (n <= w->cap) return 0;
    int64_t cap = w->cap ? w->cap : 64;
    while (cap < n) cap *= 2;
    int32_t *id = (int32_t *)realloc(w->id, sizeof(int32_t) * (size_t)cap);
    if (id) w->id = id;
    int64_t *pv = (int64_t *)realloc(w->prev, sizeof(int64_t) * (size_t)cap);
    if (pv) w->prev = pv;
    int64_t *nx = (int64_t *)realloc(w->next, sizeof(int64_t) * (size_t)cap);
    if (nx) w->next = nx;
    heap_ent *hp = (heap_ent *)realloc(w->heap, sizeof(heap_ent) * (size_t)cap * 3);
    if (hp) w->heap = hp;
    if (!id || !pv || !nx || !hp) return -1;
    w->cap = cap;
    return 0;
}

/* ------------------------------------------------------------------ encoding */

typedef struct {
    const attn_bpe *t;
    int32_t *ids;
    int64_t cap, n;
    merge_ws w;
    pcre2_match_data *md;
    /* attn__bpe_pretokenize: record the end offset of each pre-tokenized word instead of
     * encoding it */
    const char *base;
    size_t *ends;
    int64_t n_ends, cap_ends;
} enc_state;

static void put(enc_state *st, int32_t id) {
    if (st->n < st->cap) st->ids[st->n] = id;
    st->n++;
}

/* byte-level BPE of one pre-tokenized word */
static int bl_word(enc_state *st, const unsigned char *s, size_t len) {
    const attn_bpe *t = st->t;
    if (len == 0) return 0;
    if (st->base) {
        if (st->n_ends < st->cap_ends) st->ends[st->n_ends] = (size_t)((const char *)s + len - st->base);
        st->n_ends++;
        return 0;
    }
    /* fast path: the whole word is one token */
    char small[256];
    if (len * 2 <= sizeof small) {
        size_t k = 0;
        for (size_t i = 0; i < len; i++) k += (size_t)attn__utf8_encode(byte_to_cp(s[i]), small + k);
        int32_t id = attn__bpe_lookup(t, small, k);
        if (id >= 0) {
            put(st, id);
            return 0;
        }
    }
    if (ws_reserve(&st->w, (int64_t)len) < 0) return attn_set_error(ATTN_E_NOMEM, "bpe: out of memory");
    int64_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (t->byte_id[s[i]] >= 0) st->w.id[n++] = t->byte_id[s[i]];
    int64_t m = merge_symbols(t, &st->w, n);
    if (m < 0) return attn_set_error(ATTN_E_NOMEM, "bpe: out of memory");
    for (int64_t i = 0; i < m; i++) put(st, st->w.id[i]);
    return 0;
}

/* the GPT-2 regex over s[0..len): every match (and any gap between matches) is a word */
static int bl_regex(enc_state *st, const char *s, size_t len) {
    size_t pos = 0;
    while (pos < len) {
        int r = pcre2_match(st->t->re_main, (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, st->md, NULL);
        if (r == PCRE2_ERROR_NOMATCH) break;
        if (r < 0) return attn_set_error(ATTN_E_UNSUPPORTED, "bpe: regex match failed (%d)", r);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
        size_t a = ov[0], b = ov[1];
        if (a > pos) ATTN_TRY(bl_word(st, (const unsigned char *)s + pos, a - pos));
        if (b == a) { /* empty match: cannot happen with this pattern, but never loop */
            b = a + 1;
            while (b < len && (((unsigned char)s[b]) & 0xC0) == 0x80) b++;
        }
        ATTN_TRY(bl_word(st, (const unsigned char *)s + a, b - a));
        pos = b;
    }
    if (pos < len) ATTN_TRY(bl_word(st, (const unsigned char *)s + pos, len - pos));
    return 0;
}

static int bl_span(enc_state *st, const char *s, size_t len) {
    if (!st->t->re_digits) return bl_regex(st, s, len);
    size_t pos = 0;
    while (pos < len) {
        int r = pcre2_match(st->t->re_digits, (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, st->md, NULL);
        if (r == PCRE2_ERROR_NOMATCH) break;
        if (r < 0) return attn_set_error(ATTN_E_UNSUPPORTED, "bpe: regex match failed (%d)", r);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
        size_t a = ov[0], b = ov[1];
        if (a > pos) ATTN_TRY(bl_regex(st, s + pos, a - pos));
        ATTN_TRY(bl_regex(st, s + a, b - a));
        pos = b > a ? b : a + 1;
    }
    if (pos < len) ATTN_TRY(bl_regex(st, s + pos, len - pos));
    return 0;
}

/* SentencePiece BPE of a span (llama2.c encode without BOS/EOS; the dummy prefix is added by
 * the caller once per text) */
static int sp_span(enc_state *st, const char *s, size_t len, int dummy_prefix) {
    const attn_bpe *t = st->t;
    int64_t need = (int64_t)len * 4 + 1;
    if (ws_reserve(&st->w, need) < 0) return attn_set_error(ATTN_E_NOMEM, "bpe: out of memory");
    int64_t n = 0;
    if (dummy_prefix) {
        int32_t sp = attn__bpe_lookup(t, " ", 1);
        if (sp >= 0) st->w.id[n++] = sp;
        else if (t->byte_id[' '] >= 0) st->w.id[n++] = t->byte_id[' '];
    }
    size_t i = 0;
    while (i < len) {
        int32_t cp;
        int cl = attn__utf8_decode((const unsigned char *)s, len, i, &cp);
        if (cl <= 0) cl = 1; /* validated before: unreachable */
        int32_t id = attn__bpe_lookup(t, s + i, (size_t)cl);
        if (id >= 0) {
            st->w.id[n++] = id;
        } else {
            for (int k = 0; k < cl; k++) {
                int32_t b = t->byte_id[(unsigned char)s[i + k]];
                if (b < 0) b = 0; /* no byte piece: <unk> (id 0), as llama2.c's byte + 3 cannot exist */
                st->w.id[n++] = b;
            }
        }
        i += (size_t)cl;
    }
    int64_t m = merge_symbols(t, &st->w, n);
    if (m < 0) return attn_set_error(ATTN_E_NOMEM, "bpe: out of memory");
    for (int64_t k = 0; k < m; k++) put(st, st->w.id[k]);
    return 0;
}

static int special_at(const attn_bpe *t, const char *s, size_t len, size_t i) {
    for (int k = 0; k < t->n_spec; k++)
        if (t->spec[k].len <= len - i && memcmp(s + i, t->spec[k].s, t->spec[k].len) == 0) return k;
    return -1;
}

int attn_bpe_encode(const attn_bpe *t, const char *text, size_t len, int parse_special, int32_t *ids, int64_t cap,
                    int64_t *n_ids) {
    if (!t || !n_ids || (!text && len) || cap < 0 || (!ids && cap > 0)) return attn_set_error(ATTN_E_INVALID, "bpe encode: bad arguments");
    *n_ids = 0;
    ATTN_TRY(attn_tokenizer_validate_utf8(text, len, NULL));
    enc_state st;
    memset(&st, 0, sizeof st);
    st.t = t;
    st.ids = ids;
    st.cap = cap;
    int rc = 0;
    if (t->kind == ATTN_BPE_BYTE_LEVEL) {
        st.md = pcre2_match_data_create(4, NULL);
        if (!st.md) return attn_set_error(ATTN_E_NOMEM, "bpe: out of memory");
    }
    size_t start = 0, i = 0;
    int first = 1;
    while (rc == 0 && i <= len) {
        int k = (parse_special && i < len && t->n_spec) ? special_at(t, text, len, i) : -1;
        if (k < 0 && i < len) {
            i++;
            continue;
        }
        if (i > start) {
            rc = t->kind == ATTN_BPE_BYTE_LEVEL ? bl_span(&st, text + start, i - start)
                                                : sp_span(&st, text + start, i - start, first);
            first = 0;
        }
        if (k < 0) break;
        put(&st, t->spec[k].id);
        i += t->spec[k].len;
        start = i;
    }
    if (rc == 0 && t->kind == ATTN_BPE_SENTENCEPIECE && len == 0) rc = 0; /* empty text: no tokens (llama2.c) */
    if (st.md) pcre2_match_data_free(st.md);
    free(st.w.id);
    free(st.w.prev);
    free(st.w.next);
    free(st.w.heap);
    if (rc < 0) return rc;
    *n_ids = st.n;
    if (st.n > cap) return attn_set_error(ATTN_E_RANGE, "bpe encode: %lld ids do not fit in %lld", (long long)st.n, (long long)cap);
    return ATTN_OK;
}

int attn__bpe_pretokenize(const attn_bpe *t, const char *text, size_t len, size_t *ends, int64_t cap, int64_t *n) {
    if (!t || !n || (!text && len) || cap < 0 || (!ends && cap > 0) || t->kind != ATTN_BPE_BYTE_LEVEL)
        return attn_set_error(ATTN_E_INVALID, "bpe pretokenize: bad arguments");
    *n = 0;
    ATTN_TRY(attn_tokenizer_validate_utf8(text, len, NULL));
    enc_state st;
    memset(&st, 0, sizeof st);
    st.t = t;
    st.base = text;
    st.ends = ends;
    st.cap_ends = cap;
    st.md = pcre2_match_data_create(4, NULL);
    if (!st.md) return attn_set_error(ATTN_E_NOMEM, "bpe: out of memory");
    int rc = len ? bl_span(&st, text, len) : 0;
    pcre2_match_data_free(st.md);
    *n = st.n_ends;
    return rc;
}

