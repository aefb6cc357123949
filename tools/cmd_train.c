/* attn train vit: train a Vision Transformer classifier on IDX images with attn's own kernels
 * (include/attn_train.h) and write a Hugging Face checkpoint after every epoch. */
#include "cli.h"
#include "mpi_train.h"
#include "progress.h"

#include "attn_image.h"
#include "attn_train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

typedef struct {
    const char *train_img, *train_lab, *eval_img, *eval_lab, *config, *out, *resume, *lr_s, *wd_s, *names, *max_norm_s, *ls_s;
    int64_t patch, hidden, layers, heads, mlp, classes, epochs, batch, seed, threads, stop_after, pad, limit;
    double warmup;
    int flip, progress, overwrite;
} train_opts;

static int two_files(cli_args *a, const char **second, const char *opt) {
    if (!cli_more(a) || (a->argv[a->i][0] == '-' && a->argv[a->i][1]))
        return cli_usage_error("train", "%s needs two files: IMAGES.idx[.gz] LABELS.idx[.gz]", opt);
    *second = a->argv[a->i++];
    return CLI_OK;
}
static int train_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    ((train_opts *)base)->train_img = val;
    return two_files(a, &((train_opts *)base)->train_lab, "--train");
}
static int eval_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    ((train_opts *)base)->eval_img = val;
    return two_files(a, &((train_opts *)base)->eval_lab, "--eval");
}

#define F(f) offsetof(train_opts, f)
static const cli_option options[] = {
    {"--train", NULL, CLI_CALL, 0, .fn = train_opt, .takes_value = 1,
     .help = "  --train IMAGES LABELS  training set: IDX images [N, S, S] (uint8) and labels [N]\n"},
    {"--eval", NULL, CLI_CALL, 0, .fn = eval_opt, .takes_value = 1,
     .help = "  --eval IMAGES LABELS   evaluation set: loss and accuracy after every epoch\n"},
    {"--output", "-o", CLI_STR, F(out), .help = "  -o, --output DIR       checkpoint directory (created if missing)\n"},
    {"--config", NULL, CLI_STR, F(config),
     .help = "  --config CONFIG.json   the model from a transformers ViTConfig (size, layers, id2label)\n"},
    {"--patch", NULL, CLI_I64, F(patch), 1, 4096, .help = "  --patch P              patch size (default 7)\n"},
    {"--hidden", NULL, CLI_I64, F(hidden), 1, 65536, .help = "  --hidden H             hidden size (default 96)\n"},
    {"--layers", NULL, CLI_I64, F(layers), 1, 1024, .help = "  --layers N             encoder layers (default 4)\n"},
    {"--heads", NULL, CLI_I64, F(heads), 1, 1024, .help = "  --heads A              attention heads (default 3)\n"},
    {"--mlp", NULL, CLI_I64, F(mlp), 1, 1 << 20, .help = "  --mlp M                MLP size (default 2·hidden)\n"},
    {"--classes", NULL, CLI_I64, F(classes), 2, 1 << 20, .help = "  --classes N            number of classes (default 10)\n"},
    {"--class-names", NULL, CLI_STR, F(names),
     .help = "  --class-names A,B,..   the classes' names for id2label (default LABEL_0, LABEL_1, ...)\n"},
    {"--epochs", NULL, CLI_I64, F(epochs), 1, 100000, .help = "  --epochs N             epochs in all (default 10)\n"},
    {"--stop-after", NULL, CLI_I64, F(stop_after), 1, 100000,
     .help = "  --stop-after K         stop after epoch K (the schedule still spans --epochs; continue\n"
             "                         later with --resume)\n"},
    {"--batch", NULL, CLI_I64, F(batch), 1, 65536, .help = "  --batch B              images per step (default 128)\n"},
    {"--lr", NULL, CLI_STR, F(lr_s), .help = "  --lr LR                peak learning rate (default 2e-3)\n"},
    {"--weight-decay", NULL, CLI_STR, F(wd_s), .help = "  --weight-decay W       AdamW weight decay (default 0.05)\n"},
    {"--max-norm", NULL, CLI_STR, F(max_norm_s), .help = "  --max-norm X           clip the gradients' global norm to X (default 1; 0: off)\n"},
    {"--label-smoothing", NULL, CLI_STR, F(ls_s),
     .help = "  --label-smoothing S    cross-entropy label smoothing in [0, 1) (default 0)\n"},
    {"--pad", NULL, CLI_I64, F(pad), 0, 64, .help = "  --pad P                random crop after padding by P pixels (default 2; 0: off)\n"},
    {"--no-flip", NULL, CLI_FLAG, F(flip), 0, .help = "  --no-flip              no random horizontal flips (default: flip half)\n"},
    {"--seed", NULL, CLI_I64, F(seed), 0, INT64_MAX, .help = "  --seed S               initialisation, shuffling and augmentation seed (default 0)\n"},
    {"--limit", NULL, CLI_I64, F(limit), 1, INT64_MAX / 2, .help = "  --limit N              only the first N training images (give it again with --resume)\n"},
    {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = "  --threads N            worker threads (default: all cores)\n"},
    {"--resume", NULL, CLI_STR, F(resume),
     .help = "  --resume DIR           continue the run saved in DIR (weights, AdamW state, epoch, seed)\n"},
    {"--overwrite", NULL, CLI_FLAG, F(overwrite), 1,
     .help = "  --overwrite            replace a model already in the -o DIR (refused otherwise)\n"},
    CLI_PROGRESS_OPTIONS(F(progress), "             ", "          "),
    CLI_HELP_LINE("  -h, --help             this help\n"),
    {0}};

static void usage(FILE *f) {
    fprintf(f, "Usage: attn train vit --train IMAGES LABELS [--eval IMAGES LABELS] [--config CONFIG.json |\n"
               "         --patch P --hidden H --layers N --heads A --mlp M] [--epochs N] [--batch B] [--lr LR]\n"
               "         [--weight-decay W] [--seed S] [--threads N] [--resume DIR] -o DIR\n"
               "\n"
               "Trains a ViT image classifier (pre-LN, CLS token, learned positions; transformers'\n"
               "ViTForImageClassification) on 1-channel IDX images (Fashion-MNIST format) with attn's own\n"
               "forward and backward kernels: AdamW (betas 0.9, 0.999; weight decay on matrices, not on\n"
               "biases, LayerNorms or positions), half an epoch of linear warm-up then cosine decay, global\n"
               "gradient-norm clipping, seeded shuffling, random crop and horizontal flip. Pixels are scaled\n"
               "by (p/255 - mean)/std with the training set's mean and std.\n"
               "After every epoch DIR gets a checkpoint that `attn classify` and transformers load\n"
               "(config.json, model.safetensors, preprocessor_config.json) plus optimizer.safetensors,\n"
               "trainer_state.json and curve.png; all files are replaced together, or none (a failed\n"
               "write keeps the previous epoch's). --resume continues bit for bit (same threads); --epochs,\n"
               "--lr and --weight-decay may be changed on resume, the other settings are the run's.\n"
               "Under `mpirun -np P` (an attn built with MPI) the training is data-parallel: every rank\n"
               "takes --batch B images of each global batch of P·B, and the gradients are averaged over\n"
               "the ranks (each weighted by its share of the batch's images) before clipping and AdamW:\n"
               "bucketed MPI_Iallreduce (buckets of whole tensors, about 256 KiB each, started as soon as\n"
               "the backward has finished them, so the reduction overlaps the backward of the earlier\n"
               "layers). The run follows one process with --batch P·B (up to float rounding; the\n"
               "checkpoint records P·B); rank 0 evaluates and writes the checkpoints, and every rank\n"
               "exits with the same status.\n"
               "\n"
               "Options:\n");
    cli_print_options(f, options);
    fprintf(f, "Exit status: 0 success, 1 failure (bad data, NaN loss, write error), 2 usage error.\n");
}

static int parse_real(const char *s, const char *opt, double lo, int lo_open, double *out) {
    char *end = NULL;
    errno = 0;
    double v = s ? strtod(s, &end) : NAN;
    if (!s || end == s || *end || !isfinite(v) || v < lo || (lo_open && v == lo))
        return cli_usage_error("train", "%s must be a finite number %s %g, got '%s'", opt, lo_open ? ">" : ">=", lo, s ? s : "");
    *out = v;
    return CLI_OK;
}

typedef struct {
    attn_idx img, lab;
    int32_t *y;
    int64_t n, S;
} dataset;

static void data_free(dataset *d) {
    attn_idx_free(&d->img);
    attn_idx_free(&d->lab);
    free(d->y);
}

/* "OPT IMAGES: a 1-D IDX; ..." for an IMAGES file that is not 3-D images, with the hint that the two
 * files look swapped when IMAGES is 1-D (labels) and LABELS (lnd: its dims, 0 unknown) 3-D (images) */
static int not_images(const char *opt, const char *ip, int nd, const char *lp, int lnd) {
    char hint[1200] = "";
    if (nd == 1 && lnd == 3)
        snprintf(hint, sizeof hint, " — were IMAGES and LABELS swapped? %s looks like labels [N] and %s like images [N, S, S]", ip,
                 lp);
    else if (nd == 1)
        snprintf(hint, sizeof hint, " — were IMAGES and LABELS swapped? %s looks like labels [N]", ip);
    return cli_error("%s %s: a %d-D IDX; the images are a 3-D IDX [N, S, S] of uint8 (the order is %s IMAGES LABELS)%s", opt, ip,
                     nd, opt, hint);
}

static int data_load(dataset *d, const char *opt, const char *ip, const char *lp, int64_t classes, int64_t limit) {
    memset(d, 0, sizeof *d);
    if (attn_idx_load(&d->img, ip) < 0 || attn_idx_load(&d->lab, lp) < 0) return cli_lib_error(NULL);
    if (d->img.ndim != 3) return not_images(opt, ip, d->img.ndim, lp, d->lab.ndim);
    if (d->img.dims[1] != d->img.dims[2])
        return cli_error("%s: images must be a 3-D IDX [N, S, S] of square images", ip);
    if (d->lab.ndim != 1) return cli_error("%s: labels must be a 1-D IDX [N]", lp);
    if (d->img.dims[0] != d->lab.dims[0])
        return cli_error("%s has %lld images but %s has %lld labels", ip, (long long)d->img.dims[0], lp,
                         (long long)d->lab.dims[0]);
    d->n = limit > 0 && limit < d->img.dims[0] ? limit : d->img.dims[0];
    d->S = d->img.dims[1];
    if (d->n < 1) return cli_error("%s: no images", ip);
    d->y = (int32_t *)malloc(sizeof(int32_t) * (size_t)d->n);
    if (!d->y) return cli_error("out of memory");
    for (int64_t i = 0; i < d->n; i++) {
        d->y[i] = d->lab.data[i];
        if (d->y[i] >= classes)
            return cli_error("%s: label %d of item %lld is not a class of this model (0..%lld)", lp, d->y[i], (long long)i,
                             (long long)classes - 1);
    }
    return CLI_OK;
}

/* FNV-1a 64 of the n images' pixels and their labels: with the count and the seed it pins the
 * data a checkpoint was trained on (a --resume on other data is refused) */
static uint64_t data_hash(const dataset *d) {
    uint64_t h = 14695981039346656037ull;
    const size_t np = (size_t)(d->n * d->S * d->S);
    for (size_t i = 0; i < np; i++) h = (h ^ d->img.data[i]) * 1099511628211ull;
    for (int64_t i = 0; i < d->n; i++) h = (h ^ (uint8_t)d->y[i]) * 1099511628211ull;
    return h ? h : 1; /* 0 means unknown */
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* loss and accuracy on d (no augmentation) */
static int evaluate(attn_vit_trainer *t, const dataset *d, int64_t B, attn_vit_train_state *st, double *loss, double *acc) {
    const int64_t S = d->S, n = attn_vit_trainer_config(t)->n_labels;
    float *px = (float *)malloc(sizeof(float) * (size_t)(B * S * S)), *lg = (float *)malloc(sizeof(float) * (size_t)(B * n));
    int64_t *idx = (int64_t *)malloc(sizeof(int64_t) * (size_t)B), correct = 0;
    double total = 0;
    int rc = px && lg && idx ? 0 : attn_set_error(ATTN_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < d->n && rc == 0; i += B) {
        const int64_t b = d->n - i < B ? d->n - i : B;
        for (int64_t k = 0; k < b; k++) idx[k] = i + k;
        attn_train_make_batch(px, d->img.data, S, idx, b, st->mean, st->std, 0, NULL);
        rc = attn_vit_trainer_forward(t, lg, px, b);
        attn_tensor tl = attn_tensor_f32_2d(lg, b, n), ty;
        int64_t sh[1] = {b};
        double l = 0;
        if (rc == 0) rc = attn_tensor_make(&ty, d->y + i, ATTN_I32, 1, sh);
        if (rc == 0) rc = attn_cross_entropy(&l, NULL, &tl, &ty, 0.0);
        total += l * b;
        for (int64_t k = 0; k < b && rc == 0; k++) {
            int64_t best = 0;
            for (int64_t c = 1; c < n; c++)
                if (lg[k * n + c] > lg[k * n + best]) best = c;
            correct += best == d->y[i + k];
        }
    }
    free(px), free(lg), free(idx);
    *loss = total / (double)d->n;
    *acc = (double)correct / (double)d->n;
    return rc;
}

/* *made: 1 when this call created the directory (a failed run removes it again if still empty) */
static int make_dir(const char *p, int *made) {
    struct stat sb;
    if (stat(p, &sb) == 0) /* -o onto a file (an input, say): a usage error, nothing touched */
        return S_ISDIR(sb.st_mode) ? CLI_OK : cli_usage_error("train", "-o %s exists and is not a directory (-o names the model's directory)", p);
    if (mkdir(p, 0777) != 0) {
        const int e = errno;
        if (e != ENOENT) return cli_error("cannot create %s: %s", p, strerror(e));
        char q[4096]; /* missing parents (-o runs/vit in a fresh checkout): made as mkdir -p makes them */
        snprintf(q, sizeof q, "%s", p);
        for (char *c = q + 1; *c; c++)
            if (*c == '/') {
                *c = '\0';
                if (mkdir(q, 0777) != 0 && errno != EEXIST) return cli_error("cannot create %s: %s", q, strerror(errno));
                *c = '/';
            }
        if (mkdir(p, 0777) != 0) return cli_error("cannot create %s: %s", p, strerror(errno));
    }
    *made = 1;
    return CLI_OK;
}

/* the model config from the options, --config or the resumed run; explicit options must agree */
static int model_config(attn_vit_train_config *c, char ***labels, const train_opts *o, int64_t S) {
    const char *src = o->resume ? o->resume : o->config;
    if (src) {
        char dir[4096];
        const char *file = NULL;
        snprintf(dir, sizeof dir, "%s", src);
        if (!o->resume) { /* --config PATH/CONFIG.json */
            char *sl = strrchr(dir, '/');
            file = sl ? src + (sl - dir) + 1 : src; /* in src: dir is cut below */
            if (sl) *sl = 0; /* a file at the root: dir "", joined as "/FILE" */
            else snprintf(dir, sizeof dir, ".");
        }
        if (attn_vit_train_config_load(c, labels, dir, file) < 0) return cli_lib_error(o->resume ? "--resume" : "--config");
        struct {
            const char *opt;
            int64_t given, have;
        } chk[] = {{"--patch", o->patch, c->patch},   {"--hidden", o->hidden, c->d_model}, {"--layers", o->layers, c->n_layers},
                   {"--heads", o->heads, c->n_heads}, {"--mlp", o->mlp, c->d_ff},        {"--classes", o->classes, c->n_labels}};
        /* an option that contradicts the resumed run / the config: a usage error (exit 2, README's rule),
         * refused before any work (it was exit 1) */
        for (size_t i = 0; i < sizeof chk / sizeof chk[0]; i++)
            if (chk[i].given > 0 && chk[i].given != chk[i].have)
                return cli_usage_error("train", "%s %lld disagrees with %s, whose model has %lld%s", chk[i].opt, (long long)chk[i].given, src,
                                 (long long)chk[i].have, o->resume ? " (a resume directory of another model?)" : "");
        if (c->channels != 1 || c->image_size != S)
            return cli_error("%s describes %lld-channel %lld x %lld images; the data are 1-channel %lld x %lld%s", src,
                             (long long)c->channels, (long long)c->image_size, (long long)c->image_size, (long long)S,
                             (long long)S, o->resume ? " (a resume directory of another model?)" : "");
        return CLI_OK;
    }
    *c = (attn_vit_train_config){.image_size = S, .channels = 1, .patch = o->patch > 0 ? o->patch : 7,
                                 .d_model = o->hidden > 0 ? o->hidden : 96, .n_layers = o->layers > 0 ? o->layers : 4,
                                 .n_heads = o->heads > 0 ? o->heads : 3, .n_labels = o->classes > 0 ? o->classes : 10,
                                 .eps = 1e-12f, .act = ATTN_ACT_GELU};
    c->d_ff = o->mlp > 0 ? o->mlp : 2 * c->d_model;
    /* the model of the options alone (no --config / --resume): a model they cannot build (hidden
     * not a multiple of heads, a patch that does not tile the image) is a usage error */
    if (attn_vit_train_config_check(c) < 0) return cli_usage_error("train", "%s", attn_last_error());
    *labels = (char **)calloc((size_t)c->n_labels, sizeof(char *));
    if (!*labels) return cli_error("out of memory");
    const char *p = o->names;
    for (int64_t i = 0; i < c->n_labels; i++) {
        char buf[256];
        if (p) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len == 0 || len >= sizeof buf || (!e && i + 1 < c->n_labels) || (e && i + 1 == c->n_labels))
                return cli_usage_error("train", "--class-names must give %lld non-empty comma-separated names", (long long)c->n_labels);
            memcpy(buf, p, len);
            buf[len] = 0;
            p = e ? e + 1 : NULL;
        } else {
            snprintf(buf, sizeof buf, "LABEL_%lld", (long long)i);
        }
        if (!((*labels)[i] = strdup(buf))) return cli_error("out of memory");
    }
    return CLI_OK;
}

/* 1 when DIR already holds a model (config.json or model.safetensors) that this run would replace:
 * any model, unless it is the run being resumed */
static int replaces_a_model(const train_opts *o) {
    char p[4096];
    struct stat s1, s2;
    int holds = 0;
    for (int i = 0; i < 2 && !holds; i++) {
        snprintf(p, sizeof p, "%s/%s", o->out, i ? "model.safetensors" : "config.json");
        holds = stat(p, &s1) == 0;
    }
    if (!holds) return 0;
    return !(o->resume && stat(o->out, &s1) == 0 && stat(o->resume, &s2) == 0 && s1.st_dev == s2.st_dev && s1.st_ino == s2.st_ino);
}

static int run(train_opts *o) {
    if (!o->train_img) return cli_usage_error("train", "--train IMAGES LABELS is required");
    if (!o->out) return cli_usage_error("train", "-o DIR is required");
    if (o->config && o->resume) return cli_usage_error("train", "--config and --resume exclude each other");
    if (!o->overwrite && replaces_a_model(o))
        return cli_usage_error("train", "%s already holds a model (config.json / model.safetensors); continue it with --resume %s, "
                                        "choose another -o, or give --overwrite to replace it",
                               o->out, o->out);
    double lr = 2e-3, wd = 0.05, max_norm = 1.0;
    int r;
    if (o->lr_s && (r = parse_real(o->lr_s, "--lr", 0, 1, &lr))) return r;
    if (o->wd_s && (r = parse_real(o->wd_s, "--weight-decay", 0, 0, &wd))) return r;
    if (o->max_norm_s && (r = parse_real(o->max_norm_s, "--max-norm", 0, 0, &max_norm))) return r;
    double smooth = 0;
    if (o->ls_s && (r = parse_real(o->ls_s, "--label-smoothing", 0, 0, &smooth))) return r;
    if (smooth >= 1) return cli_usage_error("train", "--label-smoothing must be below 1, got '%s'", o->ls_s);
    if (o->threads > 0) attn_set_num_threads((int)o->threads);
    attn_vit_train_config c;
    attn_vit_train_state st;
    memset(&st, 0, sizeof st);
    int made_dir = 0; /* -o created by this run */
    dataset tr, ev;
    memset(&tr, 0, sizeof tr), memset(&ev, 0, sizeof ev);
    attn_vit_trainer *t = NULL;
    char **labels = NULL;
    float *px = NULL;
    int64_t *perm = NULL;
    int32_t *ys = NULL;
    int rc = CLI_OK;
    cli_progress bar;
    memset(&bar, 0, sizeof bar);
    /* the data's image size decides the model's */
    attn_idx probe;
    if (attn_idx_load(&probe, o->train_img) < 0) return cli_lib_error(NULL);
    const int64_t S = probe.ndim == 3 ? probe.dims[1] : 0;
    const int nd = probe.ndim, square = probe.ndim == 3 && probe.dims[1] == probe.dims[2];
    attn_idx_free(&probe);
    if (nd != 3) return not_images("--train", o->train_img, nd, o->train_lab, 0);
    if (!square) return cli_error("%s: images must be a 3-D IDX [N, S, S] of square images", o->train_img);
    int me = 0, P = 1; /* under mpirun: data-parallel over P ranks (tools/mpi_train.c); rank 0 reports and writes */
    if (cli_train_dp_begin(&me, &P) != CLI_OK) return CLI_FAIL;
    if (me != 0) o->progress = 0;
    if ((rc = model_config(&c, &labels, o, S))) goto out;
    if ((rc = data_load(&tr, "--train", o->train_img, o->train_lab, c.n_labels, o->limit))) goto out;
    if (o->eval_img && (rc = data_load(&ev, "--eval", o->eval_img, o->eval_lab, c.n_labels, 0))) goto out;
    if (o->eval_img && ev.S != S) {
        rc = cli_error("%s holds %lld x %lld images, the training set %lld x %lld", o->eval_img, (long long)ev.S, (long long)ev.S,
                       (long long)S, (long long)S);
        goto out;
    }
    const int64_t B = o->batch > 0 ? o->batch : 128;
    if (o->resume) {
        /* the run's own settings; the model and optimizer state are loaded below */
        if (attn_vit_trainer_new(&t, &c, B, 0) < 0 || attn_vit_trainer_load(t, o->resume, &st) < 0) {
            rc = cli_lib_error("--resume");
            goto out;
        }
        if ((o->batch > 0 && o->batch * P != st.batch) || (o->seed >= 0 && (uint64_t)o->seed != st.seed) ||
            (o->pad >= 0 && o->pad != st.pad) || (!o->flip && st.flip) || o->max_norm_s || o->ls_s) {
            /* an option that contradicts the run: a usage error (exit 2, README's rule; new-user finding: it was 1) */
            rc = cli_usage_error("train",
                                 "--batch, --seed, --pad, --no-flip, --max-norm and --label-smoothing are the resumed run's (batch %lld, "
                                 "seed %llu, pad %d, %s); leave them out",
                                 (long long)st.batch, (unsigned long long)st.seed, st.pad, st.flip ? "flip" : "no flip");
            goto out;
        }
        if (st.batch % P) {
            rc = cli_error("--resume %s has global batches of %lld images, which %d ranks cannot share equally", o->resume,
                           (long long)st.batch, P);
            goto out;
        }
        if (st.batch / P != B) { /* the trainer's arena was sized for B (images per rank) */
            attn_vit_trainer *t2 = NULL;
            attn_vit_train_state s2;
            memset(&s2, 0, sizeof s2);
            if (attn_vit_trainer_new(&t2, &c, st.batch / P, 0) < 0 || attn_vit_trainer_load(t2, o->resume, &s2) < 0) {
                attn_vit_trainer_free(t2);
                attn_vit_train_state_free(&s2);
                rc = cli_lib_error("--resume");
                goto out;
            }
            attn_vit_train_state_free(&s2);
            attn_vit_trainer_free(t);
            t = t2;
        }
        /* the data order is the seed's shuffle of the training images: the same count, the same images */
        if (st.train_images > 0 && st.train_images != tr.n) {
            rc = cli_usage_error("train", "--resume %s was trained on %lld images; this training set gives %lld (give the same --train files "
                           "and --limit as the run had)",
                           o->resume, (long long)st.train_images, (long long)tr.n);
            goto out;
        }
        if (st.train_hash && st.train_hash != data_hash(&tr)) {
            rc = cli_usage_error("train", "--resume %s was trained on other images: the %lld training images differ from the run's (data "
                           "hash %016llx, these %016llx; give the same --train files and --limit as the run had)",
                           o->resume, (long long)tr.n, (unsigned long long)st.train_hash, (unsigned long long)data_hash(&tr));
            goto out;
        }
        if (!st.train_images) st.train_images = tr.n, st.train_hash = data_hash(&tr); /* an older checkpoint: record them now */
        if (st.steps_per_epoch != (tr.n + st.batch - 1) / st.batch) {
            rc = cli_usage_error("train", "--resume %s was trained on %lld steps of %lld images per epoch; this training set gives %lld "
                           "(give the same --train files and --limit as the run had)",
                           o->resume, (long long)st.steps_per_epoch, (long long)st.batch,
                           (long long)((tr.n + st.batch - 1) / st.batch));
            goto out;
        }
        const int64_t planned = st.epochs;
        if (o->epochs > 0) st.epochs = o->epochs;
        if (o->lr_s) st.lr = lr;
        if (o->wd_s) st.weight_decay = wd;
        if (st.epoch >= st.epochs) {
            /* name what was asked and what the run planned (new-user finding: "has done 1 of 1 epochs"
             * for a run of 2 resumed with --epochs 1) */
            if (o->epochs > 0)
                rc = cli_usage_error("train", "--epochs %lld: --resume %s has done %lld epoch%s already (it planned %lld); give --epochs "
                                              "above %lld, or leave it out to finish the plan",
                                     (long long)o->epochs, o->resume, (long long)st.epoch, st.epoch == 1 ? "" : "s", (long long)planned,
                                     (long long)st.epoch);
            else
                rc = cli_error("--resume %s has done all %lld of its epochs; give a larger --epochs to train on", o->resume,
                               (long long)st.epoch);
            goto out;
        }
        /* the run evaluated after its epochs; this one will not: said, not silent (its history shows NaN there) */
        if (me == 0 && !o->eval_img && st.epoch > 0 && st.history && isfinite(st.history[st.epoch - 1].eval_loss))
            fprintf(stderr, "attn: note: --resume %s was evaluated after every epoch; without --eval IMAGES LABELS this run is not\n",
                    o->resume);
        attn_train_epoch *h = (attn_train_epoch *)realloc(st.history, sizeof *h * (size_t)(st.epochs + 1));
        if (!h) {
            rc = cli_error("out of memory");
            goto out;
        }
        st.history = h;
    } else {
        st.epochs = o->epochs > 0 ? o->epochs : 10;
        st.batch = B * P, st.seed = o->seed >= 0 ? (uint64_t)o->seed : 0, st.lr = lr, st.weight_decay = wd, st.max_norm = max_norm;
        st.label_smoothing = smooth;
        st.pad = o->pad >= 0 ? (int)o->pad : 2, st.flip = o->flip;
        st.steps_per_epoch = (tr.n + st.batch - 1) / st.batch;
        st.train_images = tr.n, st.train_hash = data_hash(&tr);
        st.warmup_steps = st.steps_per_epoch / 2 > 0 ? st.steps_per_epoch / 2 : 1;
        st.labels = labels, st.n_labels = c.n_labels;
        labels = NULL;
        double s1 = 0, s2 = 0; /* the training pixels' mean and std (of p/255), rounded to 4 digits */
        const int64_t np = tr.n * S * S;
        for (int64_t i = 0; i < np; i++) s1 += tr.img.data[i] / 255.0, s2 += (tr.img.data[i] / 255.0) * (tr.img.data[i] / 255.0);
        const double mean = s1 / (double)np, var = s2 / (double)np - mean * mean;
        st.mean = (float)(round(mean * 1e4) / 1e4);
        st.std = (float)(round(sqrt(var > 1e-8 ? var : 1e-8) * 1e4) / 1e4);
        if (!(st.std > 0)) st.std = 1;
        st.history = (attn_train_epoch *)calloc((size_t)(st.epochs + 1), sizeof *st.history);
        if (!st.history || attn_vit_trainer_new(&t, &c, B, st.seed) < 0) {
            rc = st.history ? cli_lib_error(NULL) : cli_error("out of memory");
            goto out;
        }
    }
    if (me == 0 && (rc = make_dir(o->out, &made_dir))) goto out;
    if ((rc = cli_train_dp_agree(rc))) goto out; /* every rank is ready, or all stop */
    const int64_t Bt = st.batch, Bl = Bt / P, spe = st.steps_per_epoch, total = st.epochs * spe;
    const int64_t last = o->stop_after > 0 && o->stop_after < st.epochs ? o->stop_after : st.epochs;
    px = (float *)malloc(sizeof(float) * (size_t)(Bt * S * S));
    perm = (int64_t *)malloc(sizeof(int64_t) * (size_t)tr.n);
    ys = (int32_t *)malloc(sizeof(int32_t) * (size_t)Bt);
    if (!px || !perm || !ys) {
        rc = cli_error("out of memory");
        goto out;
    }
    const attn_adamw_config ac = {0.9, 0.999, 1e-8, st.weight_decay};
    if (me == 0)
        fprintf(stderr, "attn train vit: %lld parameters, %lld training images, batch %lld, %lld step%s per epoch, arena %.1f MB%s\n",
                (long long)attn_vit_trainer_numel(t), (long long)tr.n, (long long)Bt, (long long)spe, spe == 1 ? "" : "s",
                attn_vit_train_arena_bytes(&c, Bl) / 1e6, P > 1 ? " per rank (data-parallel)" : "");
    char label[96];
    for (int64_t ep = st.epoch; ep < last; ep++) {
        const double t0 = now();
        attn_rng rng;
        attn_train_rng_seed(&rng, st.seed, (uint64_t)ep + 1);
        attn_shuffle(perm, tr.n, &rng);
        snprintf(label, sizeof label, "epoch %lld/%lld", (long long)ep + 1, (long long)st.epochs);
        cli_progress_start(&bar, o->progress, label, "images", (double)tr.n);
        double sum = 0;
        for (int64_t s = 0; s < spe; s++) {
            const int64_t i0 = s * Bt, b = tr.n - i0 < Bt ? tr.n - i0 : Bt, gstep = ep * spe + s;
            attn_train_make_batch(px, tr.img.data, S, perm + i0, b, st.mean, st.std, st.pad, st.pad || st.flip ? &rng : NULL);
            for (int64_t k = 0; k < b; k++) ys[k] = tr.y[perm[i0 + k]];
            double loss = NAN;
            const int64_t lo = me * Bl < b ? me * Bl : b, bl = b - lo < Bl ? b - lo : Bl; /* this rank's slice */
            cli_train_dp_attach(t, (double)bl / (double)b);
            int lr_rc = bl > 0 ? attn_vit_trainer_loss_backward(t, &loss, NULL, px + lo * S * S, ys + lo, bl, st.label_smoothing) : 0;
            lr_rc = cli_train_dp_reduce(t, lr_rc, &loss, bl, b); /* the global batch's loss and mean gradient */
            const double norm = lr_rc == 0 && isfinite(loss) ? attn_vit_trainer_clip_grad_norm(t, st.max_norm) : NAN;
            if (lr_rc < 0 || !isfinite(loss) || !isfinite(norm)) {
                cli_progress_end(&bar);
                rc = me ? CLI_FAIL : cli_error("the %s at epoch %lld, step %lld of %lld (optimizer step %lld)%s%s; stopped — %s%s", 
                               lr_rc == ATTN_E_RANGE || (lr_rc == 0 && !isfinite(loss)) ? "loss turned NaN or infinite"
                               : lr_rc < 0 ? "step failed" : "gradient norm turned NaN or infinite",
                               (long long)ep + 1, (long long)s + 1, (long long)spe, (long long)gstep + 1, lr_rc < 0 ? ": " : "",
                               lr_rc < 0 ? attn_last_error() : "", ep > 0 ? "the checkpoint of the last good epoch stays in " : "nothing was written to ",
                               o->out);
                goto out;
            }
            attn_vit_trainer_adamw_step(t, attn_lr_warmup_cosine(gstep, st.warmup_steps, total, st.lr), &ac);
            sum += loss * (double)b;
            snprintf(label, sizeof label, "epoch %lld/%lld loss %.4f", (long long)ep + 1, (long long)st.epochs, sum / (double)(i0 + b));
            cli_progress_update(&bar, (double)(i0 + b));
        }
        cli_progress_end(&bar);
        const double t_train = now() - t0;
        attn_train_epoch *h = &st.history[ep];
        h->train_loss = sum / (double)tr.n;
        h->eval_loss = h->eval_accuracy = NAN;
        if ((rc = cli_train_dp_same(t))) goto out;
        if (me == 0 && o->eval_img && evaluate(t, &ev, Bl, &st, &h->eval_loss, &h->eval_accuracy) < 0) {
            rc = cli_lib_error("evaluation");
            goto out;
        }
        h->seconds = now() - t0;
        st.epoch = ep + 1;
        if (me == 0 && attn_vit_trainer_save(t, o->out, &st) < 0) {
            rc = cli_lib_error(NULL);
            goto out;
        }
        if ((rc = cli_train_dp_agree(rc))) goto out; /* rank 0 evaluated and saved */
        if (me != 0) continue;
        if (o->eval_img)
            printf("epoch %lld/%lld: train loss %.4f, eval loss %.4f, eval accuracy %.4f (%lld/%lld), %.1f images/s, %.1f s\n",
                   (long long)ep + 1, (long long)st.epochs, h->train_loss, h->eval_loss, h->eval_accuracy,
                   (long long)llround(h->eval_accuracy * (double)ev.n), (long long)ev.n, (double)tr.n / t_train, h->seconds);
        else
            printf("epoch %lld/%lld: train loss %.4f, %.1f images/s, %.1f s\n", (long long)ep + 1, (long long)st.epochs, h->train_loss,
                   (double)tr.n / t_train, h->seconds);
        fflush(stdout);
    }
out:
    free(px);
    free(ys);
    free(perm);
    attn_vit_trainer_free(t);
    attn_vit_train_labels_free(labels, c.n_labels);
    attn_vit_train_state_free(&st);
    data_free(&tr);
    data_free(&ev);
    rc = cli_train_dp_end(rc);
    /* a failed run leaves no empty -o directory of its own behind; rmdir removes only an empty
     * one, so a directory that holds a checkpoint (or anything else) stays */
    if (rc != CLI_OK && made_dir) rmdir(o->out);
    return rc;
}

int cmd_train(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "vit") != 0) {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            usage(stdout);
            return CLI_OK;
        }
        return cli_usage_error("train", "the first argument must be the model family: attn train vit ...");
    }
    train_opts o;
    memset(&o, 0, sizeof o);
    o.patch = o.hidden = o.layers = o.heads = o.mlp = o.classes = o.batch = o.seed = o.pad = -1;
    o.flip = 1;
    o.progress = CLI_PROGRESS_AUTO;
    int r = cli_parse(argc - 1, argv + 1, "train", options, &o, NULL, NULL, NULL, usage);
    if (r != CLI_OK) return cli_parsed(r);
    return run(&o);
}
