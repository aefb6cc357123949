/* attn translate: CTranslate2 Transformer encoder-decoder translation (greedy / beam search). */
#include "cli.h"
#include "mpi_cli.h"
#include "progress.h"
#include "texts.h"

#include "attn_npy.h"
#include "attn_ct2_transformer.h"
#include "attn_utf8.h"
#include "attn_viz.h"
#include "ct2compat/ct2compat.h" /* attn__ct2_batch_order: the batches attn_translate forms */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cli_texts texts; /* first: cli_texts_take */
    const char *model, *prefix, *end_tok, *attn_path;
    int64_t beam, n_best, max_len, max_in, min_len, batch, threads;
    float lp, rep;
    int gnmt, scores, repl, progress;
    const char *supp[256];
    int n_supp;
} translate_opts;

static int penalty_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    float *f = (float *)field;
    if (cli_parse_f32(a->verb, o->name, val, f) != CLI_OK) return CLI_USAGE;
    if (o->lo == 0 && *f < 0) return cli_usage_error(a->verb, "%s must be >= 0", o->name);
    if (o->lo == 1 && !(*f > 0)) return cli_usage_error(a->verb, "%s must be > 0", o->name);
    return CLI_OK;
}

static int suppress_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    translate_opts *t = (translate_opts *)base;
    if (t->n_supp == 256) return cli_usage_error(a->verb, "at most 256 --suppress options");
    t->supp[t->n_supp++] = val;
    return CLI_OK;
}

#define F(f) offsetof(translate_opts, f)
static const cli_option options[] = {
    {"--model", NULL, CLI_STR, F(model), .help = "  --model DIR             model directory (model.bin, source/target_vocabulary.txt)\n"},
    {"--beam", NULL, CLI_I64, F(beam), 1, 256, .help = "  --beam N                beam size (default 1 = greedy search)\n"},
    {"--n-best", NULL, CLI_I64, F(n_best), 1, 256,
     .help = "  --n-best N              hypotheses printed per sentence (default 1; at most the beam size)\n"},
    {"--length-penalty", NULL, CLI_CALL, F(lp), 0, .fn = penalty_opt, .takes_value = 1,
     .help = "  --length-penalty A      score / len^A when a hypothesis finishes (default 1, CTranslate2)\n"},
    {"--gnmt", NULL, CLI_FLAG, F(gnmt), 1, .help = "  --gnmt                  use the GNMT penalty ((5 + len) / 6)^A instead of len^A\n"},
    {"--max-len", NULL, CLI_I64, F(max_len), 1, 100000, .help = "  --max-len N             maximum generated tokens (default 256)\n"},
    {"--max-input-length", NULL, CLI_I64, F(max_in), 0, INT64_MAX,
     .help = "  --max-input-length N    truncate longer sentences to their first N tokens, as\n"
             "                          CTranslate2 does (default 1024; 0 = no limit)\n"},
    {"--min-len", NULL, CLI_I64, F(min_len), 0, 100000,
     .help = "  --min-len N             minimum generated tokens before the end token (default 1)\n"},
    {"--prefix", NULL, CLI_STR, F(prefix), .help = "  --prefix \"TOKENS\"       force the first target tokens\n"},
    {"--end-token", NULL, CLI_STR, F(end_tok), .help = "  --end-token TOK         end token (default </s>)\n"},
    {"--suppress", NULL, CLI_CALL, 0, .fn = suppress_opt, .takes_value = 1,
     .help = "  --suppress \"TOKENS\"     never generate this token (or this token sequence); repeatable\n"},
    {"--repetition-penalty", NULL, CLI_CALL, F(rep), 1, .fn = penalty_opt, .takes_value = 1,
     .help = "  --repetition-penalty P  penalise already generated tokens (CTRL; default 1 = off)\n"},
    {"--scores", NULL, CLI_FLAG, F(scores), 1, .help = "  --scores                prefix each hypothesis with its score and a tab\n"},
    {"--replace-unknowns", NULL, CLI_FLAG, F(repl), 1,
     .help = "  --replace-unknowns      replace a generated <unk> by the most attended source token\n"},
    {"--attention", NULL, CLI_STR, F(attn_path),
     .help = "  --attention OUT         write the cross-attention (target x source) of the best hypothesis\n"
             "                          of the only input sentence as .npy (float32 [T, S]) or .png heatmap\n"},
    {"--batch", NULL, CLI_I64, F(batch), 1, 4096,
     .help = "  --batch N               sentences per batch, longest first as CTranslate2 batches them (default 32)\n"},
    {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = "  --threads N             worker threads (default: all cores)\n"},
    CLI_PROGRESS_OPTIONS(F(progress), "              ", "           "),
    CLI_HELP_LINE("  -h, --help              this help\n"),
    {0}};

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn translate --model DIR [options] [SENTENCE ...]\n"
            "\n"
            "Translates space-tokenised sentences with a CTranslate2 Transformer model (model.bin +\n"
            "vocabularies), e.g. the character-level aren-transliteration model:\n"
            "  echo 'م ر ح ب ا' | attn translate --model ../shared/models/aren-transliteration --beam 4\n"
            "Without SENTENCE arguments, reads one sentence per line from standard input. Prints one\n"
            "line per hypothesis (tokens separated by spaces); an empty input line gives an empty line.\n"
            "Tokens missing from the source vocabulary become <unk>, as CTranslate2 does.\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
    fprintf(f,
            "Standard output is written once every sentence is translated: after an error\n"
            "nothing is printed.\n");
}

/* tokens of s as target ids; unknown -> error unless unk_ok (then <unk>) */
static int to_ids(attn_translator *m, const char *s, int32_t **ids, int64_t *n, int unk_ok, const char *what) {
    *ids = NULL;
    *n = 0;
    char *copy = strdup(s);
    if (!copy) return cli_error("out of memory");
    int64_t cap = 0;
    for (char *save = NULL, *t = strtok_r(copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        int32_t id = attn_translator_target_id(m, t);
        if (id < 0 && unk_ok) id = attn_translator_target_id(m, "<unk>");
        if (id < 0) {
            int rc = cli_error("%s token '%s' is not in the target vocabulary", what, t);
            free(copy);
            free(*ids);
            *ids = NULL;
            return rc;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            int32_t *g = (int32_t *)realloc(*ids, sizeof(int32_t) * (size_t)cap);
            if (!g) {
                free(copy);
                free(*ids);
                *ids = NULL;
                return cli_error("out of memory");
            }
            *ids = g;
        }
        (*ids)[(*n)++] = id;
    }
    free(copy);
    if (*n == 0) return cli_error("%s is empty", what);
    return CLI_OK;
}

/* whitespace-separated tokens of s (the library's split rule) */
static int64_t count_tokens(const char *s) {
    int64_t n = 0;
    for (const char *p = s; *p;) {
        while (*p && strchr(" \t\n\r\v\f", *p)) p++;
        if (!*p) break;
        n++;
        while (*p && !strchr(" \t\n\r\v\f", *p)) p++;
    }
    return n;
}

/* path: where to write (the staging file of --attention); png: PNG, else .npy (from the user's name) */
static int write_attention(const char *path, int png, const attn_translation *t) {
    if (t->n == 0 || !t->hyps[0].attention || t->hyps[0].len == 0 || t->src_len == 0)
        return cli_error("--attention: the translation is empty, there is no attention to write");
    const attn_translation_hyp *h = &t->hyps[0];
    attn_tensor a = attn_tensor_f32_2d(h->attention, h->len, t->src_len);
    if (!png) {
        if (attn_npy_save(path, &a) < 0) return cli_lib_error(NULL);
        return CLI_OK;
    }
    attn_heatmap_opts o = attn_heatmap_opts_default();
    o.title = "cross-attention (last decoder layer, head 0)";
    o.format = ATTN_VIZ_PNG; /* path is the staging file: its name has no .png */
    o.has_range = 1;
    o.vmin = 0;
    o.vmax = 1;
    if (attn_cross_attention_write(path, &a, (const char *const *)t->src_tokens, (const char *const *)h->tokens, &o) < 0)
        return cli_lib_error(NULL);
    return CLI_OK;
}

static int check_options(const translate_opts *t) {
    if (!t->model || !*t->model) return cli_usage_error("translate", "--model DIR is required");
    if (t->n_best > t->beam)
        return cli_usage_error("translate", "--n-best (%lld) cannot exceed --beam (%lld)", (long long)t->n_best,
                               (long long)t->beam);
    if (t->min_len > t->max_len)
        return cli_usage_error("translate", "--min-len (%lld) cannot exceed --max-len (%lld)", (long long)t->min_len,
                               (long long)t->max_len);
    if (t->attn_path && !cli_ends_with(t->attn_path, ".npy") && !cli_ends_with(t->attn_path, ".png"))
        return cli_usage_error("translate", "--attention: '%s' must end in .npy or .png", t->attn_path);
    return CLI_OK;
}

/* the sentences: from the arguments or standard input; none may hold a NUL byte */
static int read_texts(cli_texts *texts, const char *attn_path) {
    if (texts->n == 0 && cli_texts_read_stdin(texts) < 0)
        return cli_error("reading standard input failed: %s; nothing was written", strerror(errno));
    for (int64_t i = 0; i < texts->n; i++)
        if ((int64_t)strlen(texts->items[i]) != texts->lens[i])
            return cli_error("sentence %lld holds a NUL byte (the input is not text); nothing was written", (long long)(i + 1));
    if (attn_path && texts->n != 1)
        return cli_usage_error("translate", "--attention needs exactly one input sentence (got %lld)", (long long)texts->n);
    return CLI_OK;
}

/* the id arrays behind attn_decode_opts (--prefix, --end-token, --suppress) */
typedef struct {
    int32_t *pre, *end, **sseq, *stok;
    int64_t *slen, n_sseq;
} decode_ids;

static void decode_ids_free(decode_ids *d) {
    free(d->pre);
    free(d->end);
    for (int64_t i = 0; i < d->n_sseq; i++) free(d->sseq[i]);
    free(d->sseq);
    free(d->slen);
    free(d->stok);
}

static int suppress_ids(attn_translator *m, const translate_opts *t, attn_decode_opts *o, decode_ids *d) {
    int n_supp = t->n_supp, rc;
    int64_t n_stok = 0;
    d->sseq = (int32_t **)calloc((size_t)n_supp, sizeof(int32_t *));
    d->slen = (int64_t *)calloc((size_t)n_supp, sizeof(int64_t));
    d->stok = (int32_t *)calloc((size_t)n_supp, sizeof(int32_t));
    if (!d->sseq || !d->slen || !d->stok) return cli_error("out of memory");
    for (int i = 0; i < n_supp; i++) {
        int32_t *ids;
        int64_t n;
        if ((rc = to_ids(m, t->supp[i], &ids, &n, 0, "--suppress")) != CLI_OK) return rc;
        if (n == 1) {
            d->stok[n_stok++] = ids[0];
            free(ids);
        } else {
            d->sseq[d->n_sseq] = ids;
            d->slen[d->n_sseq++] = n;
        }
    }
    o->suppress = d->stok;
    o->n_suppress = n_stok;
    o->suppress_seqs = (const int32_t *const *)d->sseq;
    o->suppress_seq_lens = d->slen;
    o->n_suppress_seqs = d->n_sseq;
    return CLI_OK;
}

static int decode_options(attn_translator *m, const translate_opts *t, attn_decode_opts *o, decode_ids *d) {
    int rc;
    int64_t n_pre = 0, n_end = 0;
    *o = attn_decode_opts_default();
    o->beam_size = t->beam;
    o->n_best = t->n_best;
    o->length_penalty = t->lp;
    o->length_penalty_form = t->gnmt ? ATTN_LP_GNMT : ATTN_LP_POWER;
    o->max_length = t->max_len;
    o->min_length = t->min_len;
    o->repetition_penalty = t->rep;
    o->return_prefix = 1; /* CTranslate2's Translator returns the prefix with the hypothesis */
    o->return_attention = t->attn_path != NULL;
    if (t->prefix && (rc = to_ids(m, t->prefix, &d->pre, &n_pre, 1, "--prefix")) != CLI_OK) return rc;
    o->prefix = d->pre;
    o->prefix_len = n_pre;
    if (t->end_tok && (rc = to_ids(m, t->end_tok, &d->end, &n_end, 0, "--end-token")) != CLI_OK) return rc;
    if (d->end && n_end != 1) return cli_usage_error("translate", "--end-token takes one token");
    o->end_ids = d->end;
    o->n_end = n_end;
    return t->n_supp > 0 ? suppress_ids(m, t, o, d) : CLI_OK;
}

/* one sentence's hypotheses, one line each, into f */
static void print_hyps(FILE *f, const translate_opts *t, const attn_translation *tr) {
    for (int64_t h = 0; h < tr->n; h++) {
        if (t->scores) fprintf(f, "%.6f\t", (double)tr->hyps[h].score);
        for (int64_t k = 0; k < tr->hyps[h].len; k++) fprintf(f, k ? " %s" : "%s", tr->hyps[h].tokens[k]);
        fputc('\n', f);
    }
}

/* the notes on sentences longer than --max-input-length, to stderr in input order */
static void note_truncated(const translate_opts *t) {
    const cli_texts *texts = &t->texts;
    const int64_t max_in = t->max_in;
    for (int64_t i = 0; i < texts->n; i++)
        if (max_in > 0 && count_tokens(texts->items[i]) > max_in)
            fprintf(stderr, "attn: note: sentence %lld has more than %lld token%s: truncated to its first %lld (--max-input-length)\n",
                    (long long)(i + 1), (long long)max_in, max_in == 1 ? "" : "s", (long long)max_in);
}

/* the hypotheses, one line each, into f (notes on truncated sentences to stderr) */
static void print_translations(FILE *f, const translate_opts *t, const attn_translation *out) {
    note_truncated(t);
    for (int64_t i = 0; i < t->texts.n; i++) print_hyps(f, t, &out[i]);
}

/* the model and the decoding options (the caller frees *m and d) */
static int translate_setup(const translate_opts *t, attn_translator **m, attn_decode_opts *o, decode_ids *d) {
    if (attn_translator_load(m, t->model) < 0) return cli_lib_error("loading the model");
    return decode_options(*m, t, o, d);
}

/* attn_translate's options from the command line's */
static attn_translate_opts translate_options(const translate_opts *t, const attn_decode_opts *o) {
    attn_translate_opts to = attn_translate_opts_default();
    to.decode = *o;
    to.max_input_length = t->max_in;
    to.max_batch_size = t->batch; /* CTranslate2's batching: sorted by length, output in order */
    to.replace_unknowns = t->repl;
    return to;
}

/* translate every sentence; standard output is kept in memory until everything succeeded */
static int translate_run(const translate_opts *t, cli_outputs *outs) {
    attn_translator *m = NULL;
    decode_ids d;
    memset(&d, 0, sizeof d);
    attn_decode_opts o;
    attn_translation *out = NULL;
    int64_t n_out = 0, n = t->texts.n;
    char *obuf = NULL;
    size_t olen = 0;
    FILE *obuf_f = NULL;
    int rc = translate_setup(t, &m, &o, &d);
    if (rc != CLI_OK) goto done;
    out = (attn_translation *)calloc((size_t)(n ? n : 1), sizeof *out);
    obuf_f = open_memstream(&obuf, &olen);
    if (!out || !obuf_f) {
        rc = cli_error("out of memory");
        goto done;
    }
    cli_progress bar;
    cli_progress_start(&bar, t->progress, "translate", "sentences", (double)n);
    attn_translate_opts to = translate_options(t, &o);
    int tr = attn_translate_progress(m, out, (const char *const *)t->texts.items, n, &to, bar.on ? cli_progress_cb : NULL, &bar);
    cli_progress_end(&bar);
    if (tr < 0) {
        rc = cli_lib_error("translating");
        goto done;
    }
    n_out = n;
    print_translations(obuf_f, t, out);
    if (t->attn_path && n > 0) {
        const char *stage = cli_output_path(outs, 0);
        rc = stage ? write_attention(stage, cli_ends_with(t->attn_path, ".png"), &out[0]) : CLI_FAIL;
    }
done:
    if (obuf_f && fclose(obuf_f) != 0 && rc == CLI_OK) rc = cli_error("out of memory");
    rc = cli_outputs_finish(outs, rc);
    if (rc == CLI_OK && olen > 0 && (fwrite(obuf, 1, olen, stdout) != olen || fflush(stdout) != 0))
        rc = cli_stdout_error();
    free(obuf);
    attn_translations_free(out, n_out);
    free(out);
    decode_ids_free(&d);
    attn_translator_free(m);
    return rc;
}

/* ---------------------------------------------------------------- under mpirun */

/* The batches one process forms (attn_translate with max_batch_size = --batch): idx[n], the
 * sentences in batch order (input order when they make one batch, else CTranslate2's sort,
 * longest first, src/ct2compat/batch_order.c), batch b being idx[b·batch ...]; cost[b] its
 * padded source tokens (rows x its longest source as encoded, after --max-input-length). */
static void batch_plan(const translate_opts *t, int64_t *len, int64_t *idx, int64_t *cost) {
    const int64_t n = t->texts.n, bs = t->batch;
    for (int64_t i = 0; i < n; i++) len[i] = count_tokens(t->texts.items[i]);
    if (n <= bs)
        for (int64_t i = 0; i < n; i++) idx[i] = i;
    else
        attn__ct2_batch_order(idx, n, len);
    for (int64_t b = 0; b * bs < n; b++) {
        int64_t rows = n - b * bs < bs ? n - b * bs : bs, longest = 0;
        for (int64_t i = b * bs; i < b * bs + rows; i++) {
            int64_t l = t->max_in > 0 && len[idx[i]] > t->max_in ? t->max_in : len[idx[i]];
            if (l > longest) longest = l;
        }
        cost[b] = rows * (longest + 1); /* + 1: the end token */
    }
}

/* Under mpirun (tools/mpi_seq2seq.c): rank 0 reads the sentences and checks the model and the
 * options (what every rank would find wrong alike is said once), every rank gets the sentences,
 * the batches one process would run go whole to the ranks in consecutive runs of nearly equal
 * padded size, each rank translates its batches one attn_translate call each (so every sentence
 * is computed in exactly the batch, and the position in it, it has in one process: its padding
 * changes the last bits of its scores, the float32 model's too, so the output is bit-identical
 * only so), and rank 0 gathers the hypothesis lines, writes the --attention file (it translates
 * the only sentence then) and standard output after every rank succeeded. */
static int translate_mpi(translate_opts *t, cli_outputs *outs) {
    int me = 0, P = 1;
    if (cli_mpi_job_begin(&me, &P) != CLI_OK) return cli_mpi_job_finish(outs, CLI_FAIL);
    attn_translator *m = NULL;
    decode_ids d;
    memset(&d, 0, sizeof d);
    attn_decode_opts o = attn_decode_opts_default();
    int rc = CLI_OK;
    if (me == 0) {
        rc = read_texts(&t->texts, t->attn_path);
        if (rc == CLI_OK) rc = translate_setup(t, &m, &o, &d);
    }
    rc = cli_mpi_bcast_rc(rc);
    if (rc == CLI_OK) rc = cli_mpi_share_texts(&t->texts);
    const int64_t n = rc == CLI_OK ? t->texts.n : 0, bs = t->batch, nb = (n + bs - 1) / bs;
    int64_t *len = malloc(sizeof(int64_t) * (size_t)(n + 1)), *idx = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *cost = malloc(sizeof(int64_t) * (size_t)(nb + 1)), *starts = malloc(sizeof(int64_t) * (size_t)(P + 1));
    char **lines = me == 0 ? calloc((size_t)n + 1, sizeof(char *)) : NULL, *mbuf = NULL, **mine = NULL, *obuf = NULL;
    const char **src = malloc(sizeof(char *) * (size_t)bs);
    size_t mlen = 0, olen = 0;
    if (rc == CLI_OK && (!len || !idx || !cost || !starts || (me == 0 && !lines) || !src)) rc = cli_error("out of memory");
    if (rc == CLI_OK) {
        batch_plan(t, len, idx, cost);
        rc = cli_mpi_split(cost, nb, P, starts);
    }
    if (rc == CLI_OK && t->attn_path)
        for (int r = 1; r <= P; r++) starts[r] = nb; /* rank 0 translates the one sentence, for its attention */
    int64_t s0 = rc == CLI_OK && starts[me] * bs < n ? starts[me] * bs : n;
    int64_t s1 = rc == CLI_OK && starts[me + 1] * bs < n ? starts[me + 1] * bs : n, k = s1 - s0, n_out = 0;
    attn_translation *out = calloc((size_t)k + 1, sizeof *out);
    mine = calloc((size_t)k + 1, sizeof(char *));
    if (rc == CLI_OK && (!out || !mine)) rc = cli_error("out of memory");
    if (rc == CLI_OK && k > 0 && me != 0) rc = translate_setup(t, &m, &o, &d);
    /* attn_translate's check, on this rank's sentences with their input numbers: the first
     * invalid one of this rank gets the message one process gives */
    int64_t bad = -1;
    size_t bad_at = 0;
    for (int64_t i = s0; rc == CLI_OK && i < s1; i++) {
        size_t at;
        const int64_t g = idx[i];
        if ((bad < 0 || g < bad) && attn_tokenizer_validate_utf8(t->texts.items[g], (size_t)t->texts.lens[g], &at) < 0)
            bad = g, bad_at = at;
    }
    if (bad >= 0)
        rc = cli_error("translating: translate: source %lld is not valid UTF-8 (byte offset %zu, byte 0x%02X)",
                       (long long)(bad + 1), bad_at, (unsigned)(unsigned char)t->texts.items[bad][bad_at]);
    attn_translate_opts to = translate_options(t, &o);
    to.max_batch_size = 0; /* one call per batch of one process */
    for (int64_t i0 = s0; rc == CLI_OK && i0 < s1; i0 += bs) {
        const int64_t rows = s1 - i0 < bs ? s1 - i0 : bs;
        for (int64_t j = 0; j < rows; j++) src[j] = t->texts.items[idx[i0 + j]];
        if (attn_translate(m, out + (i0 - s0), src, rows, &to) < 0) rc = cli_lib_error("translating");
        else n_out = i0 - s0 + rows;
    }
    /* this rank's lines, one NUL-terminated string per sentence, gathered in input order */
    FILE *f = rc == CLI_OK ? open_memstream(&mbuf, &mlen) : NULL;
    if (rc == CLI_OK && !f) rc = cli_error("out of memory");
    size_t *offs = calloc((size_t)k + 1, sizeof(size_t));
    if (rc == CLI_OK && !offs) rc = cli_error("out of memory");
    for (int64_t i = 0; rc == CLI_OK && i < k; i++) {
        offs[i] = (size_t)ftell(f);
        print_hyps(f, t, &out[i]);
        fputc(0, f);
    }
    if (f && fclose(f) != 0 && rc == CLI_OK) rc = cli_error("out of memory");
    for (int64_t i = 0; rc == CLI_OK && i < k; i++) mine[i] = mbuf + offs[i];
    rc = cli_mpi_gather_strings(rc, n, k, rc == CLI_OK ? idx + s0 : NULL, mine, lines);
    if (rc == CLI_OK && me == 0) {
        note_truncated(t);
        FILE *of = open_memstream(&obuf, &olen);
        for (int64_t i = 0; of && i < n; i++) fputs(lines[i], of);
        if (!of || fclose(of) != 0) rc = cli_error("out of memory");
        if (rc == CLI_OK && t->attn_path && n > 0) {
            const char *stage = cli_output_path(outs, 0);
            rc = stage ? write_attention(stage, cli_ends_with(t->attn_path, ".png"), &out[0]) : CLI_FAIL;
        }
    }
    rc = cli_mpi_job_finish(outs, rc); /* every rank's status agreed; rank 0 commits */
    if (rc == CLI_OK && me == 0 && olen > 0 && (fwrite(obuf, 1, olen, stdout) != olen || fflush(stdout) != 0))
        rc = cli_stdout_error();
    for (int64_t i = 0; lines && i < n; i++) free(lines[i]);
    free(lines), free(len), free(idx), free(cost), free(starts), free(src), free(mbuf), free(mine), free(offs), free(obuf);
    attn_translations_free(out, n_out);
    free(out);
    decode_ids_free(&d);
    attn_translator_free(m);
    return rc;
}

int cmd_translate(int argc, char **argv) {
    translate_opts t;
    memset(&t, 0, sizeof t);
    t.beam = 1, t.n_best = 1, t.max_len = 256, t.max_in = 1024, t.min_len = 1, t.batch = 32;
    t.lp = 1.0f, t.rep = 1.0f, t.progress = CLI_PROGRESS_AUTO;
    int rc = cli_parse(argc, argv, "translate", options, &t, NULL, NULL, cli_texts_take, usage);
    if (rc == CLI_OK) rc = check_options(&t);
    /* the --attention file: refused up front when it clashes, written only after the work */
    cli_outputs outs;
    cli_outputs_init(&outs, "translate");
    if (rc == CLI_OK && !(rc = cli_output_add(&outs, "--attention", t.attn_path, 1)) &&
        !(rc = cli_output_input(&outs, "--model", t.model))) {
        if (t.threads > 0) attn_set_num_threads((int)t.threads);
        if (cli_mpi_launched()) { /* under mpirun: the sentences split across the ranks */
            rc = translate_mpi(&t, &outs);
        } else {
            rc = read_texts(&t.texts, t.attn_path);
            if (rc == CLI_OK) rc = translate_run(&t, &outs);
        }
    }
    cli_texts_free(&t.texts);
    return cli_parsed(rc);
}
