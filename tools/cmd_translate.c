/* attn translate: CTranslate2 Transformer encoder-decoder translation (greedy / beam search). */
#include "cli.h"
#include "texts.h"

#include "attn_npy.h"
#include "attn_ct2_transformer.h"
#include "attn_viz.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
            "Options:\n"
            "  --model DIR             model directory (model.bin, source/target_vocabulary.txt)\n"
            "  --beam N                beam size (default 1 = greedy search)\n"
            "  --n-best N              hypotheses printed per sentence (default 1; at most the beam size)\n"
            "  --length-penalty A      score / len^A when a hypothesis finishes (default 1, CTranslate2)\n"
            "  --gnmt                  use the GNMT penalty ((5 + len) / 6)^A instead of len^A\n"
            "  --max-len N             maximum generated tokens (default 256)\n"
            "  --max-input-length N    truncate longer sentences to their first N tokens, as\n"
            "                          CTranslate2 does (default 1024; 0 = no limit)\n"
            "  --min-len N             minimum generated tokens before the end token (default 1)\n"
            "  --prefix \"TOKENS\"       force the first target tokens\n"
            "  --end-token TOK         end token (default </s>)\n"
            "  --suppress \"TOKENS\"     never generate this token (or this token sequence); repeatable\n"
            "  --repetition-penalty P  penalise already generated tokens (CTRL; default 1 = off)\n"
            "  --scores                prefix each hypothesis with its score and a tab\n"
            "  --replace-unknowns      replace a generated <unk> by the most attended source token\n"
            "  --attention OUT         write the cross-attention (target x source) of the best hypothesis\n"
            "                          of the only input sentence as .npy (float32 [T, S]) or .png heatmap\n"
            "  --batch N               sentences per batch, longest first as CTranslate2 batches them (default 32)\n"
            "  --threads N             worker threads (default: all cores)\n"
            "  -h, --help              this help\n"
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

/* more than max whitespace-separated tokens in s (the library's split rule)? */
static int longer_than(const char *s, int64_t max) {
    int64_t n = 0;
    for (const char *p = s; *p;) {
        while (*p && strchr(" \t\n\r\v\f", *p)) p++;
        if (!*p) break;
        if (++n > max) return 1;
        while (*p && !strchr(" \t\n\r\v\f", *p)) p++;
    }
    return 0;
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

int cmd_translate(int argc, char **argv) {
    const char *model = NULL, *prefix = NULL, *end_tok = NULL, *attn_path = NULL;
    int64_t beam = 1, n_best = 1, max_len = 256, max_in = 1024, min_len = 1, batch = 32, threads = 0;
    float lp = 1.0f, rep = 1.0f;
    int gnmt = 0, scores = 0, repl = 0;
    const char *supp[256];
    int n_supp = 0;
    cli_texts texts = {0};
    int rc = CLI_OK;
    char *obuf = NULL; /* standard output, kept until everything succeeded */
    size_t olen = 0;
    FILE *obuf_f = NULL;
    cli_args a = cli_args_start(argc, argv, "translate");
    while (cli_more(&a)) {
        const char *val;
        int r;
        if (cli_help(&a)) {
            usage(stdout);
            cli_texts_free(&texts);
            return CLI_OK;
        } else if ((r = cli_opt(&a, NULL, "--model", &val))) {
            if (r < 0) goto usage_err;
            model = val;
        } else if ((r = cli_opt(&a, NULL, "--beam", &val))) {
            if (r < 0 || cli_parse_i64("translate", "--beam", val, 1, 256, &beam) != CLI_OK) goto usage_err;
        } else if ((r = cli_opt(&a, NULL, "--n-best", &val))) {
            if (r < 0 || cli_parse_i64("translate", "--n-best", val, 1, 256, &n_best) != CLI_OK) goto usage_err;
        } else if ((r = cli_opt(&a, NULL, "--length-penalty", &val))) {
            if (r < 0 || cli_parse_f32("translate", "--length-penalty", val, &lp) != CLI_OK) goto usage_err;
            if (lp < 0) {
                cli_texts_free(&texts);
                return cli_usage_error("translate", "--length-penalty must be >= 0");
            }
        } else if (cli_flag(&a, NULL, "--gnmt")) {
            gnmt = 1;
        } else if ((r = cli_opt(&a, NULL, "--max-len", &val))) {
            if (r < 0 || cli_parse_i64("translate", "--max-len", val, 1, 100000, &max_len) != CLI_OK) goto usage_err;
        } else if ((r = cli_opt(&a, NULL, "--max-input-length", &val))) {
            if (r < 0 || cli_parse_i64("translate", "--max-input-length", val, 0, INT64_MAX, &max_in) != CLI_OK) goto usage_err;
        } else if ((r = cli_opt(&a, NULL, "--min-len", &val))) {
            if (r < 0 || cli_parse_i64("translate", "--min-len", val, 0, 100000, &min_len) != CLI_OK) goto usage_err;
        } else if ((r = cli_opt(&a, NULL, "--prefix", &val))) {
            if (r < 0) goto usage_err;
            prefix = val;
        } else if ((r = cli_opt(&a, NULL, "--end-token", &val))) {
            if (r < 0) goto usage_err;
            end_tok = val;
        } else if ((r = cli_opt(&a, NULL, "--suppress", &val))) {
            if (r < 0) goto usage_err;
            if (n_supp == 256) {
                cli_texts_free(&texts);
                return cli_usage_error("translate", "at most 256 --suppress options");
            }
            supp[n_supp++] = val;
        } else if ((r = cli_opt(&a, NULL, "--repetition-penalty", &val))) {
            if (r < 0 || cli_parse_f32("translate", "--repetition-penalty", val, &rep) != CLI_OK) goto usage_err;
            if (!(rep > 0)) {
                cli_texts_free(&texts);
                return cli_usage_error("translate", "--repetition-penalty must be > 0");
            }
        } else if (cli_flag(&a, NULL, "--scores")) {
            scores = 1;
        } else if (cli_flag(&a, NULL, "--replace-unknowns")) {
            repl = 1;
        } else if ((r = cli_opt(&a, NULL, "--attention", &val))) {
            if (r < 0) goto usage_err;
            attn_path = val;
        } else if ((r = cli_opt(&a, NULL, "--batch", &val))) {
            if (r < 0 || cli_parse_i64("translate", "--batch", val, 1, 4096, &batch) != CLI_OK) goto usage_err;
        } else if ((r = cli_opt(&a, NULL, "--threads", &val))) {
            if (r < 0 || cli_parse_i64("translate", "--threads", val, 1, 4096, &threads) != CLI_OK) goto usage_err;
        } else if (cli_positional(&a, &val)) {
            if (cli_texts_add(&texts, val) < 0) {
                cli_texts_free(&texts);
                return cli_error("out of memory");
            }
        } else {
            cli_texts_free(&texts);
            return cli_unknown(&a);
        }
    }
    if (!model || !*model) {
        cli_texts_free(&texts);
        return cli_usage_error("translate", "--model DIR is required");
    }
    if (n_best > beam) {
        cli_texts_free(&texts);
        return cli_usage_error("translate", "--n-best (%lld) cannot exceed --beam (%lld)", (long long)n_best, (long long)beam);
    }
    if (min_len > max_len) {
        cli_texts_free(&texts);
        return cli_usage_error("translate", "--min-len (%lld) cannot exceed --max-len (%lld)", (long long)min_len, (long long)max_len);
    }
    if (attn_path && !cli_ends_with(attn_path, ".npy") && !cli_ends_with(attn_path, ".png")) {
        cli_texts_free(&texts);
        return cli_usage_error("translate", "--attention: '%s' must end in .npy or .png", attn_path);
    }
    /* the --attention file: refused up front when it clashes, written only after the work */
    cli_outputs outs;
    cli_outputs_init(&outs, "translate");
    if ((rc = cli_output_add(&outs, "--attention", attn_path, 1)) || (rc = cli_output_input(&outs, "--model", model))) {
        cli_texts_free(&texts);
        return rc;
    }
    if (threads > 0) attn_set_num_threads((int)threads);
    if (texts.n == 0 && cli_texts_read_stdin(&texts) < 0) {
        int e = errno;
        cli_texts_free(&texts);
        return cli_error("reading standard input failed: %s; nothing was written", strerror(e));
    }
    for (int64_t i = 0; i < texts.n; i++)
        if ((int64_t)strlen(texts.items[i]) != texts.lens[i]) {
            cli_texts_free(&texts);
            return cli_error("sentence %lld holds a NUL byte (the input is not text); nothing was written", (long long)(i + 1));
        }
    if (attn_path && texts.n != 1) {
        long long got = (long long)texts.n; /* read before freeing the texts */
        cli_texts_free(&texts);
        return cli_usage_error("translate", "--attention needs exactly one input sentence (got %lld)", got);
    }
    attn_translator *m = NULL;
    if (attn_translator_load(&m, model) < 0) {
        cli_texts_free(&texts);
        return cli_lib_error("loading the model");
    }
    int32_t *pre = NULL, *end = NULL, **sseq = NULL, *stok = NULL;
    int64_t n_pre = 0, n_end = 0, *slen = NULL, n_stok = 0, n_sseq = 0;
    attn_translation *out = NULL;
    int64_t n_out = 0;
    attn_translate_opts to = attn_translate_opts_default();
    attn_decode_opts o = to.decode;
    o.beam_size = beam;
    o.n_best = n_best;
    o.length_penalty = lp;
    o.length_penalty_form = gnmt ? ATTN_LP_GNMT : ATTN_LP_POWER;
    o.max_length = max_len;
    o.min_length = min_len;
    o.repetition_penalty = rep;
    o.return_prefix = 1; /* CTranslate2's Translator returns the prefix with the hypothesis */
    o.return_attention = attn_path != NULL;
    if (prefix && (rc = to_ids(m, prefix, &pre, &n_pre, 1, "--prefix")) != CLI_OK) goto done;
    o.prefix = pre;
    o.prefix_len = n_pre;
    if (end_tok && (rc = to_ids(m, end_tok, &end, &n_end, 0, "--end-token")) != CLI_OK) goto done;
    if (end && n_end != 1) {
        rc = cli_usage_error("translate", "--end-token takes one token");
        goto done;
    }
    o.end_ids = end;
    o.n_end = n_end;
    if (n_supp > 0) {
        sseq = (int32_t **)calloc((size_t)n_supp, sizeof(int32_t *));
        slen = (int64_t *)calloc((size_t)n_supp, sizeof(int64_t));
        stok = (int32_t *)calloc((size_t)n_supp, sizeof(int32_t));
        if (!sseq || !slen || !stok) {
            rc = cli_error("out of memory");
            goto done;
        }
        for (int i = 0; i < n_supp; i++) {
            int32_t *ids;
            int64_t n;
            if ((rc = to_ids(m, supp[i], &ids, &n, 0, "--suppress")) != CLI_OK) goto done;
            if (n == 1) {
                stok[n_stok++] = ids[0];
                free(ids);
            } else {
                sseq[n_sseq] = ids;
                slen[n_sseq++] = n;
            }
        }
        o.suppress = stok;
        o.n_suppress = n_stok;
        o.suppress_seqs = (const int32_t *const *)sseq;
        o.suppress_seq_lens = slen;
        o.n_suppress_seqs = n_sseq;
    }
    out = (attn_translation *)calloc((size_t)(texts.n ? texts.n : 1), sizeof *out);
    obuf_f = open_memstream(&obuf, &olen); /* all of stdout, written at the end */
    if (!out || !obuf_f) {
        rc = cli_error("out of memory");
        goto done;
    }
    /* CTranslate2's batching: sentences sorted by length, batches of --batch, output in order */
    to.decode = o;
    to.max_input_length = max_in;
    to.max_batch_size = batch;
    to.replace_unknowns = repl;
    if (attn_translate(m, out, (const char *const *)texts.items, texts.n, &to) < 0) {
        rc = cli_lib_error("translating");
        goto done;
    }
    n_out = texts.n;
    for (int64_t i = 0; i < texts.n; i++) {
        if (max_in > 0 && longer_than(texts.items[i], max_in))
            fprintf(stderr, "attn: note: sentence %lld has more than %lld token%s: truncated to its first %lld (--max-input-length)\n",
                    (long long)(i + 1), (long long)max_in, max_in == 1 ? "" : "s", (long long)max_in);
        for (int64_t h = 0; h < out[i].n; h++) {
            if (scores) fprintf(obuf_f, "%.6f\t", (double)out[i].hyps[h].score);
            for (int64_t k = 0; k < out[i].hyps[h].len; k++) fprintf(obuf_f, k ? " %s" : "%s", out[i].hyps[h].tokens[k]);
            fputc('\n', obuf_f);
        }
    }
    if (attn_path && texts.n > 0) {
        const char *stage = cli_output_path(&outs, 0);
        rc = stage ? write_attention(stage, cli_ends_with(attn_path, ".png"), &out[0]) : CLI_FAIL;
    }
done:
    if (obuf_f && fclose(obuf_f) != 0 && rc == CLI_OK) rc = cli_error("out of memory");
    rc = cli_outputs_finish(&outs, rc);
    if (rc == CLI_OK && olen > 0 && (fwrite(obuf, 1, olen, stdout) != olen || fflush(stdout) != 0))
        rc = cli_error("writing standard output failed");
    free(obuf);
    attn_translations_free(out, n_out);
    free(out);
    free(pre);
    free(end);
    for (int64_t i = 0; i < n_sseq; i++) free(sseq[i]);
    free(sseq);
    free(slen);
    free(stok);
    attn_translator_free(m);
    cli_texts_free(&texts);
    return rc;
usage_err:
    cli_texts_free(&texts);
    return CLI_USAGE;
}
