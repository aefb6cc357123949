/* attn classify: image classification with a Hugging Face ViT checkpoint. */
#include "cli.h"
#include "mpi_cli.h"
#include "progress.h"

#include "attn_image.h"
#include "attn_npy.h"
#include "attn_rollout.h"
#include "attn_viz.h"
#include "attn_vit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *model, *eval_img, *eval_lab, *confusion, *attention, *logits_out;
    int64_t top, batch, threads, index, limit;
    int native, progress;
    const char **paths;
    int npaths;
} classify_opts;

/* --eval IMAGES LABELS: two values */
static int eval_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    classify_opts *c = (classify_opts *)base;
    c->eval_img = val;
    if (!cli_more(a) || (a->argv[a->i][0] == '-' && a->argv[a->i][1]))
        return cli_usage_error("classify", "--eval needs two files: IMAGES.idx[.gz] LABELS.idx[.gz]");
    c->eval_lab = a->argv[a->i++];
    return CLI_OK;
}

#define F(f) offsetof(classify_opts, f)
static const cli_option options[] = {
    {"--model", NULL, CLI_STR, F(model), .help = "  --model DIR          model directory\n"},
    {"--top", NULL, CLI_I64, F(top), 1, 4096, .help = "  --top K              labels shown per image (default 5)\n"},
    {"--index", NULL, CLI_I64, F(index), 0, INT64_MAX / 2, .help = "  --index I            only item I of IDX inputs (0-based)\n"},
    {"--limit", NULL, CLI_I64, F(limit), 1, INT64_MAX / 2, .help = "  --limit N            only the first N items of IDX inputs\n"},
    {"--native-size", NULL, CLI_FLAG, F(native), 1,
     .help = "  --native-size        do not resize; the position embeddings are interpolated to the image's\n"
             "                       patch grid (transformers' interpolate_pos_encoding=True)\n"},
    {"--eval", NULL, CLI_CALL, 0, .fn = eval_opt, .takes_value = 1,
     .help = "  --eval IMAGES LABELS accuracy and confusion matrix on an IDX data set; the last line reads\n"
             "                       \"accuracy: 0.xxxx (N/M)\"\n"},
    {"--confusion", NULL, CLI_STR, F(confusion),
     .help = "  --confusion OUT.png  with --eval: the confusion matrix as a picture (.png, .svg or .pdf)\n"},
    {"--attention", NULL, CLI_STR, F(attention),
     .help = "  --attention OUT.png  for one image: attention rollout (Abnar & Zuidema 2020) of the CLS\n"
             "                       token over the patches, blended over the image (.png, .svg or .pdf);\n"
             "                       the CLS token's attention to every patch for each layer and head\n"
             "                       goes to OUT-heads.png (same extension)\n"},
    {"--logits", NULL, CLI_STR, F(logits_out), .help = "  --logits OUT.npy     write the logits, float32 [N, n_labels]\n"},
    {"--batch", NULL, CLI_I64, F(batch), 1, 4096, .help = "  --batch N            images per forward pass (default 64)\n"},
    {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = "  --threads N          worker threads (default: all cores)\n"},
    CLI_PROGRESS_OPTIONS(F(progress), "           ", "        "),
    CLI_HELP_LINE("  -h, --help           this help\n"),
    {0}};

static int image_path(void *base, const char *verb, const char *arg) {
    classify_opts *c = (classify_opts *)base;
    c->paths[c->npaths++] = arg;
    return CLI_OK;
}

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn classify --model DIR [OPTIONS] IMAGE...\n"
            "       attn classify --model DIR --eval IMAGES.idx[.gz] LABELS.idx[.gz] [--confusion OUT.png]\n"
            "\n"
            "Classifies images with a Vision Transformer (transformers' ViTForImageClassification format:\n"
            "config.json, model.safetensors, preprocessor_config.json) and prints the top labels with their\n"
            "probabilities. IMAGE is a PNG or JPEG file of any size (converted to the model's channels and\n"
            "resized to its image size), or an IDX file of images [N, H, W] (MNIST format, gzip'd or not),\n"
            "whose items are classified in turn.\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
    fprintf(f,
            "Exit status: 0 success, 1 failure (unreadable or corrupt file, bad model), 2 usage error.\n");
}

/* ---------------------------------------------------------------- inputs */

typedef struct {
    const char *path;
    int is_idx;
    attn_idx idx;      /* when is_idx */
    attn_image img;    /* otherwise */
    int64_t first, n;  /* items used */
} input;

typedef struct {
    input *in;
    int n;
} inputs;

static void inputs_free(inputs *s) {
    for (int i = 0; i < s->n; i++) {
        attn_idx_free(&s->in[i].idx);
        attn_image_free(&s->in[i].img);
    }
    free(s->in);
    s->in = NULL;
    s->n = 0;
}

/* IDX when the file starts with the gzip signature or the IDX magic 00 00 TYPE NDIM. */
static int looks_like_idx(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char b[4] = {0};
    size_t n = fread(b, 1, 4, f);
    fclose(f);
    if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) return 1;
    return n == 4 && b[0] == 0 && b[1] == 0 && b[2] >= 0x08 && b[2] <= 0x0E;
}

static int load_input(input *in, const char *path, int64_t index, int64_t limit) {
    memset(in, 0, sizeof *in);
    in->path = path;
    if (looks_like_idx(path)) {
        in->is_idx = 1;
        if (attn_idx_load(&in->idx, path) < 0) return cli_lib_error(NULL);
        if (in->idx.ndim != 3)
            return cli_error("%s: an IDX image file must be 3-D [N, H, W], this one is %d-D", path, in->idx.ndim);
        int64_t N = in->idx.dims[0];
        if (index >= 0) {
            if (index >= N) return cli_error("%s: --index %lld is outside 0..%lld", path, (long long)index, (long long)N - 1);
            in->first = index;
            in->n = 1;
        } else {
            in->first = 0;
            in->n = limit >= 0 && limit < N ? limit : N;
        }
        return CLI_OK;
    }
    int lr = attn_image_load(&in->img, path);
    if (lr < 0) {
        if (lr == ATTN_E_FORMAT && strstr(attn_last_error(), "unknown signature"))
            return cli_error("%s; classify reads PNG, JPEG and IDX (.idx, .idx.gz) images", attn_last_error());
        return cli_lib_error(NULL);
    }
    in->n = 1;
    return CLI_OK;
}

/* item k (0-based within the input's used range) as an image view */
static int input_item(attn_image *out, const input *in, int64_t k) {
    if (!in->is_idx) {
        *out = in->img;
        return ATTN_OK;
    }
    return attn_idx_image(out, &in->idx, in->first + k);
}

/* ---------------------------------------------------------------- running the model */

typedef struct {
    attn_vit *m;
    const attn_vit_config *cfg;
    int native;
    int64_t batch;
    attn_arena arena;
    float *pixels;   /* [batch, C, H, W] */
    int64_t cap;     /* floats per image slot */
    float *logits;   /* [batch, n_labels] */
    int64_t bh, bw;  /* size of the images in the current batch */
    int64_t nb;      /* images in the current batch */
} runner;

typedef void (*result_fn)(const float *logits, int64_t n, void *user);

static int runner_flush(runner *r, result_fn fn, void *user) {
    if (r->nb == 0) return CLI_OK;
    if (attn_vit_forward(r->m, r->logits, NULL, r->pixels, r->nb, r->bh, r->bw, &r->arena) < 0)
        return cli_lib_error("running the model");
    fn(r->logits, r->nb, user);
    r->nb = 0;
    return CLI_OK;
}

/* preprocess one image into the batch (flushing first when full or of another size) */
static int runner_add(runner *r, const attn_image *img, const char *name, result_fn fn, void *user) {
    int64_t C = r->cfg->channels;
    int64_t h = r->native || !r->cfg->do_resize ? img->height : r->cfg->resize_h;
    int64_t w = r->native || !r->cfg->do_resize ? img->width : r->cfg->resize_w;
    if (attn_vit_tokens(r->m, h, w) == 0)
        return cli_error("%s: image of %lld x %lld pixels is smaller than one %lld x %lld patch", name, (long long)w,
                         (long long)h, (long long)r->cfg->patch_w, (long long)r->cfg->patch_h);
    if (h > 16384 || w > 16384) return cli_error("%s: image larger than 16384 pixels per side", name);
    /* the model's real limit, before a batch of such images is allocated (issue 23 item 5:
     * 16384 x 8192 pixels said "out of memory for a batch") */
    int64_t npatch = attn_vit_tokens(r->m, h, w) - 1;
    if (npatch > 65536)
        return cli_error("%s: image of %lld x %lld pixels makes %lld patches of %lld x %lld; the model takes at most 65536 "
                         "(about %lld x %lld pixels)%s",
                         name, (long long)w, (long long)h, (long long)npatch, (long long)r->cfg->patch_w,
                         (long long)r->cfg->patch_h, (long long)(256 * r->cfg->patch_w), (long long)(256 * r->cfg->patch_h),
                         r->native ? "; without --native-size it is resized to the model's size" : "");
    if (r->nb > 0 && (h != r->bh || w != r->bw || r->nb == r->batch)) {
        int rc = runner_flush(r, fn, user);
        if (rc != CLI_OK) return rc;
    }
    if (C * h * w > r->cap) {
        free(r->pixels);
        r->cap = C * h * w;
        r->pixels = (float *)malloc(sizeof(float) * (size_t)(r->cap * r->batch));
        if (!r->pixels)
            return cli_error("out of memory for a batch of %lld images of %lld x %lld pixels (%.1f GB; --batch sets the count)",
                             (long long)r->batch, (long long)w, (long long)h,
                             4e-9 * (double)r->cap * (double)r->batch);
    }
    int64_t H, W;
    if (attn_vit_preprocess(r->m, r->pixels + r->nb * C * h * w, r->cap, &H, &W, img, r->native) < 0) {
        char ctx[600];
        snprintf(ctx, sizeof ctx, "%s", name);
        return cli_lib_error(ctx);
    }
    r->bh = H;
    r->bw = W;
    r->nb++;
    return CLI_OK;
}

/* ---------------------------------------------------------------- results */

typedef struct {
    const attn_vit *m;
    int64_t n_labels, top;
    float *all_logits;     /* [total, n_labels] when --logits */
    int64_t done;
    const char **names;    /* per item, for printing (NULL in eval mode) */
    int64_t *pred;         /* per item argmax */
    cli_progress bar;      /* items done */
} results;

static void softmax_sorted(const float *lg, int64_t n, double *prob, int64_t *order) {
    double mx = lg[0];
    for (int64_t i = 1; i < n; i++) mx = lg[i] > mx ? lg[i] : mx;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += prob[i] = exp((double)lg[i] - mx);
    for (int64_t i = 0; i < n; i++) {
        prob[i] /= s;
        order[i] = i;
    }
    for (int64_t i = 1; i < n; i++) { /* insertion sort, descending, stable */
        int64_t k = order[i], j = i;
        while (j > 0 && prob[order[j - 1]] < prob[k]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = k;
    }
}

static void on_logits(const float *logits, int64_t n, void *user) {
    results *res = (results *)user;
    int64_t L = res->n_labels;
    double prob[4096];
    int64_t order[4096];
    for (int64_t b = 0; b < n; b++) {
        const float *lg = logits + b * L;
        int64_t item = res->done + b;
        if (res->all_logits) memcpy(res->all_logits + item * L, lg, sizeof(float) * (size_t)L);
        int64_t best = 0;
        for (int64_t i = 1; i < L; i++)
            if (lg[i] > lg[best]) best = i;
        if (res->pred) res->pred[item] = best;
        if (res->names) {
            softmax_sorted(lg, L, prob, order);
            printf("%s\n", res->names[item]);
            int64_t k = res->top < L ? res->top : L;
            for (int64_t i = 0; i < k; i++) printf("  %.4f  %s\n", prob[order[i]], attn_vit_label(res->m, order[i]));
        }
    }
    res->done += n;
    cli_progress_update(&res->bar, (double)res->done);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---------------------------------------------------------------- --attention */

/* "dir/x.png" -> "dir/x-heads.png" */
static void heads_path(char *out, size_t n, const char *path) {
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash)) dot = path + strlen(path);
    snprintf(out, n, "%.*s-heads%s", (int)(dot - path), path, dot);
}

/* Heatmap options in format fmt titled "WHAT: BASENAME" (the image's file name without its
 * folders), written into title[cap]. */
static attn_heatmap_opts titled_opts(char *title, size_t cap, const char *what, const char *name, attn_viz_format fmt) {
    attn_heatmap_opts o = attn_heatmap_opts_default();
    const char *base = strrchr(name, '/');
    snprintf(title, cap, "%s: %s", what, base ? base + 1 : name);
    o.title = title;
    o.format = fmt;
    return o;
}

static int write_attention(runner *r, const attn_image *img, const char *name, const char *outp, const char *hp,
                           const char *user_outp, const char *user_hp, attn_viz_format fmt) {
    const attn_vit_config *c = r->cfg;
    int64_t L = c->n_layers, H = c->n_heads, h = r->bh, w = r->bw;
    int64_t gh = h / c->patch_h, gw = w / c->patch_w, T = 1 + gh * gw;
    /* the weights of every layer and head are kept for the rollout: say so up front when they
     * cannot fit, instead of failing (or swapping) later */
    double need = 4.0 * (double)L * (double)H * (double)T * (double)T;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0 && need > (double)pages * (double)psz)
        return cli_error("%s: --attention on %lld x %lld pixels (%lld tokens) needs %.1f GB for the attention weights "
                         "(%lld layers x %lld heads x %lld x %lld float32), more than this machine's %.1f GB",
                         name, (long long)w, (long long)h, (long long)T, need * 1e-9, (long long)L, (long long)H, (long long)T,
                         (long long)T, (double)pages * (double)psz * 1e-9);
    float *att = (float *)malloc(sizeof(float) * (size_t)(L * H * T * T));
    float *roll = (float *)malloc(sizeof(float) * (size_t)T);
    float *cls = (float *)malloc(sizeof(float) * (size_t)(L * H * gh * gw));
    int rc = CLI_OK;
    if (!att || !roll || !cls) rc = cli_error("out of memory for the attention maps (%.1f GB)", need * 1e-9);
    attn_vit_extra ex = {NULL, NULL, att};
    if (rc == CLI_OK && attn_vit_forward(r->m, NULL, &ex, r->pixels, 1, h, w, &r->arena) < 0)
        rc = cli_lib_error("running the model");
    /* only the CLS row is drawn: O(L·H·T²), not the O(L·T³) of the full rollout (issue 23 item 4) */
    if (rc == CLI_OK && attn_attention_rollout_row(roll, att, L, 1, H, T, 0) < 0) rc = cli_lib_error("attention rollout");
    if (rc == CLI_OK) {
        /* rollout: the CLS row over the patches, blended over the input image */
        attn_tensor map = attn_tensor_f32_2d(roll + 1, gh, gw);
        char title[512];
        attn_heatmap_opts o = titled_opts(title, sizeof title, "attention rollout", name, fmt);
        if (attn_image_overlay_write(outp, img->data, &map, &o, (int)img->width, (int)img->height, img->channels,
                                     img->width * img->channels) < 0)
            rc = cli_lib_error(NULL);
    }
    if (rc == CLI_OK) {
        /* CLS attention of every layer and head: [L, H, gh, gw] */
        for (int64_t l = 0; l < L; l++)
            for (int64_t hh = 0; hh < H; hh++)
                memcpy(cls + (l * H + hh) * gh * gw, att + ((l * H + hh) * T) * T + 1, sizeof(float) * (size_t)(gh * gw));
        attn_tensor grid = attn_tensor_f32_4d(cls, L, H, gh, gw);
        char title[512];
        attn_heatmap_opts o = titled_opts(title, sizeof title, "CLS attention to the patches, layer x head", name, fmt);
        if (attn_heatmap_grid_write(hp, &grid, 0, NULL, &o) < 0) rc = cli_lib_error(NULL);
        else fprintf(stderr, "writing %s (attention rollout over the image) and %s (CLS attention per layer and head)\n", user_outp, user_hp);
    }
    free(att);
    free(roll);
    free(cls);
    return rc;
}

/* ---------------------------------------------------------------- eval */

/* the confusion table on stdout: rows true label, columns predicted */
static void print_confusion(const attn_vit *m, const int64_t *conf, int64_t L) {
    int lw = 5;
    for (int64_t i = 0; i < L; i++) {
        int n = (int)strlen(attn_vit_label(m, i));
        lw = n > lw ? n : lw;
    }
    if (lw > 24) lw = 24;
    printf("confusion matrix (rows: true label, columns: predicted label)\n");
    printf("%*s %-*s", 3, "", lw, "");
    for (int64_t j = 0; j < L; j++) printf(" %5lld", (long long)j);
    printf("  recall\n");
    for (int64_t i = 0; i < L; i++) {
        int64_t row = 0;
        for (int64_t j = 0; j < L; j++) row += conf[i * L + j];
        printf("%3lld %-*.*s", (long long)i, lw, lw, attn_vit_label(m, i));
        for (int64_t j = 0; j < L; j++) printf(" %5lld", (long long)conf[i * L + j]);
        if (row) printf("  %.4f\n", (double)conf[i * L + i] / (double)row);
        else printf("  -\n");
    }
}

/* the confusion matrix as a picture (--confusion) */
static int write_confusion(const attn_vit *m, const int64_t *conf, int64_t L, int64_t correct, int64_t N, const char *path,
                           attn_viz_format fmt) {
    int rc = CLI_OK;
    float *cm = (float *)malloc(sizeof(float) * (size_t)(L * L));
    const char **labels = (const char **)malloc(sizeof(char *) * (size_t)L);
    if (!cm || !labels) {
        rc = cli_error("out of memory");
    } else {
        for (int64_t i = 0; i < L * L; i++) cm[i] = (float)conf[i];
        for (int64_t i = 0; i < L; i++) labels[i] = attn_vit_label(m, i);
        attn_tensor t = attn_tensor_f32_2d(cm, L, L);
        attn_heatmap_opts o = attn_heatmap_opts_default();
        char title[128];
        snprintf(title, sizeof title, "confusion matrix, accuracy %.4f (%lld/%lld)", (double)correct / (double)N,
                 (long long)correct, (long long)N);
        o.title = title;
        o.row_labels = labels;
        o.col_labels = labels;
        o.y_label = "true label";
        o.x_label = "predicted label";
        o.format = fmt;
        if (attn_heatmap_write(path, &t, &o) < 0) rc = cli_lib_error(NULL);
    }
    free(cm);
    free(labels);
    return rc;
}

/* the data set's shapes and labels; *N: the items used */
static int eval_check(const attn_idx *im, const attn_idx *lb, const char *img_path, const char *lab_path, int64_t limit,
                      int64_t L, int64_t *N) {
    *N = 0;
    if (im->ndim == 1 && lb->ndim == 3)
        return cli_error("%s: images must be a 3-D IDX [N, H, W], this one is 1-D — were IMAGES and LABELS swapped? %s looks like "
                         "labels [N] and %s like images [N, H, W] (the order is --eval IMAGES LABELS)",
                         img_path, img_path, lab_path);
    if (im->ndim != 3) return cli_error("%s: images must be a 3-D IDX [N, H, W], this one is %d-D", img_path, im->ndim);
    if (lb->ndim != 1) return cli_error("%s: labels must be a 1-D IDX [N], this one is %d-D", lab_path, lb->ndim);
    if (im->dims[0] != lb->dims[0])
        return cli_error("%s has %lld images but %s has %lld labels", img_path, (long long)im->dims[0], lab_path,
                         (long long)lb->dims[0]);
    if (im->dims[0] == 0) return cli_error("%s holds no images", img_path);
    int64_t n = im->dims[0];
    if (limit >= 0 && limit < n) n = limit;
    for (int64_t i = 0; i < n; i++)
        if (lb->data[i] >= L)
            return cli_error("%s: label %d of item %lld is outside the model's %lld classes", lab_path, lb->data[i], (long long)i,
                             (long long)L);
    *N = n;
    return CLI_OK;
}

/* the results of --eval: timing on stderr, the table, --confusion, --logits, the accuracy line */
static int eval_report(runner *r, results *res, const attn_idx *lb, int64_t N, double dt, const char *confusion,
                       attn_viz_format cfmt, const char *logits_out) {
    int64_t L = res->n_labels, correct = 0;
    int64_t *conf = (int64_t *)calloc((size_t)(L * L), sizeof(int64_t));
    if (!conf) return cli_error("out of memory");
    for (int64_t i = 0; i < N; i++) {
        conf[lb->data[i] * L + res->pred[i]]++;
        correct += res->pred[i] == lb->data[i];
    }
    fprintf(stderr, "classified %lld images in %.2f s (%.0f images/s, %d thread%s)\n", (long long)N, dt,
            dt > 0 ? (double)N / dt : 0.0, attn_get_num_threads(), attn_get_num_threads() == 1 ? "" : "s");
    print_confusion(r->m, conf, L);
    int rc = confusion ? write_confusion(r->m, conf, L, correct, N, confusion, cfmt) : CLI_OK;
    if (rc == CLI_OK && logits_out) {
        attn_tensor t = attn_tensor_f32_2d(res->all_logits, N, L);
        if (attn_npy_save(logits_out, &t) < 0) rc = cli_lib_error(NULL);
    }
    if (rc == CLI_OK) printf("accuracy: %.4f (%lld/%lld)\n", (double)correct / (double)N, (long long)correct, (long long)N);
    if (fflush(stdout) != 0 && rc == CLI_OK) rc = cli_stdout_error();
    free(conf);
    return rc;
}

static int run_eval(runner *r, results *res, const char *img_path, const char *lab_path, int64_t limit,
                    const char *confusion, attn_viz_format cfmt, const char *logits_out) {
    attn_idx im = {0}, lb = {0};
    if (attn_idx_load(&im, img_path) < 0) return cli_lib_error(NULL);
    if (attn_idx_load(&lb, lab_path) < 0) {
        attn_idx_free(&im);
        return cli_lib_error(NULL);
    }
    int64_t N, L = res->n_labels;
    int rc = eval_check(&im, &lb, img_path, lab_path, limit, L, &N);
    if (rc == CLI_OK) {
        res->pred = (int64_t *)malloc(sizeof(int64_t) * (size_t)N);
        if (logits_out) res->all_logits = (float *)malloc(sizeof(float) * (size_t)(N * L));
        if (!res->pred || (logits_out && !res->all_logits)) rc = cli_error("out of memory");
    }
    /* under mpirun: this rank's whole batches, gathered on rank 0, which reports (tools/mpi_cli.c) */
    int me = 0, P = 1;
    int64_t s0 = 0, s1 = N;
    if (cli_mpi_launched() && cli_mpi_job_begin(&me, &P) != CLI_OK) rc = CLI_FAIL;
    if (P > 1) {
        cli_mpi_batch_range(N, r->batch, P, me, &s0, &s1);
        res->done = s0;
        res->bar.on = 0;
    }
    double t0 = now_s();
    cli_progress_restart(&res->bar, (double)N);
    for (int64_t i = s0; i < s1 && rc == CLI_OK; i++) {
        attn_image view;
        char name[64];
        snprintf(name, sizeof name, "item %lld", (long long)i);
        attn_idx_image(&view, &im, i);
        rc = runner_add(r, &view, name, on_logits, res);
    }
    if (rc == CLI_OK) rc = runner_flush(r, on_logits, res);
    cli_progress_end(&res->bar);
    if (P > 1) {
        rc = cli_mpi_gather_rows(rc, res->pred, sizeof(int64_t), N, r->batch);
        if (logits_out) rc = cli_mpi_gather_rows(rc, res->all_logits, sizeof(float) * (size_t)L, N, r->batch);
    }
    double dt = now_s() - t0;
    if (rc == CLI_OK && me == 0) rc = eval_report(r, res, &lb, N, dt, confusion, cfmt, logits_out);
    attn_idx_free(&im);
    attn_idx_free(&lb);
    return rc;
}

/* ---------------------------------------------------------------- main */

static int check_options(const classify_opts *c, attn_viz_format *afmt, attn_viz_format *cfmt) {
    if (!c->model || !*c->model) return cli_usage_error("classify", "--model DIR is required");
    if (c->eval_img && c->npaths)
        return cli_usage_error("classify", "--eval takes its images from the IDX file; drop the IMAGE arguments");
    if (!c->eval_img && !c->npaths) return cli_usage_error("classify", "give at least one IMAGE, or --eval IMAGES LABELS");
    if (c->confusion && !c->eval_img) return cli_usage_error("classify", "--confusion needs --eval");
    if (c->attention && c->eval_img) return cli_usage_error("classify", "--attention works on one IMAGE, not with --eval");
    if (c->eval_img && c->index >= 0) return cli_usage_error("classify", "--index does not apply to --eval (use --limit)");
    /* a directory where a picture goes: said so (new-user finding: it was told the extensions) */
    const char *const pics[2] = {c->attention, c->confusion};
    struct stat st;
    for (int i = 0; i < 2; i++)
        if (pics[i] && stat(pics[i], &st) == 0 && S_ISDIR(st.st_mode))
            return cli_usage_error("classify", "%s %s is a directory; give a .png, .svg or .pdf file name", i ? "--confusion" : "--attention",
                                   pics[i]);
    /* picture formats from the extensions (.png, .svg, .pdf) */
    if ((c->attention && attn_viz_format_from_path(afmt, c->attention) < 0) ||
        (c->confusion && attn_viz_format_from_path(cfmt, c->confusion) < 0))
        return cli_usage_error("classify", "--attention and --confusion write .png, .svg or .pdf files");
    return CLI_OK;
}

/* the files written: the user's paths and, once staged, the staging files the writers use */
typedef struct {
    const char *confusion, *attention, *logits;  /* staging files */
    const char *user_attention;
    char heads[4200], user_heads[4200];          /* the heads grid beside --attention */
} classify_files;

/* outputs: refused up front when they clash with each other or an input; written to staging
 * files and committed together only when the whole run succeeded */
static int declare_outputs(const classify_opts *c, cli_outputs *outs, classify_files *f) {
    int r;
    memset(f, 0, sizeof *f);
    if (c->attention) heads_path(f->user_heads, sizeof f->user_heads, c->attention);
    if (cli_path_is_stdout(c->logits_out))
        return cli_usage_error("classify", "--logits %s: standard output carries the labels and the accuracy; give a file name",
                               c->logits_out);
    if ((r = cli_output_add(outs, "--confusion", c->confusion, 1)) || (r = cli_output_add(outs, "--attention", c->attention, 1)) ||
        (r = cli_output_add(outs, "--attention (heads)", c->attention ? f->user_heads : NULL, 1)) ||
        (r = cli_output_add(outs, "--logits", c->logits_out, 1)) || (r = cli_output_input(outs, "--model", c->model)) ||
        (r = cli_output_input(outs, "--eval", c->eval_img)) || (r = cli_output_input(outs, "--eval", c->eval_lab)))
        return r;
    for (int i = 0; i < c->npaths; i++)
        if ((r = cli_output_input(outs, "IMAGE", c->paths[i]))) return r;
    /* staging paths of the declared outputs (in declaration order) */
    int k = 0, bad = 0;
    f->user_attention = c->attention;
    if (c->confusion) bad |= !(f->confusion = cli_output_path(outs, k++));
    if (c->attention) {
        bad |= !(f->attention = cli_output_path(outs, k++));
        const char *hp = cli_output_path(outs, k++);
        bad |= !hp;
        snprintf(f->heads, sizeof f->heads, "%s", hp ? hp : "");
    }
    if (c->logits_out) bad |= !(f->logits = cli_output_path(outs, k++));
    return bad ? CLI_FAIL : CLI_OK; /* cli_output_path printed why */
}

/* the model and the batch buffers */
static int runner_start(runner *r, results *res, const classify_opts *c) {
    if (attn_vit_load(&r->m, c->model) < 0) return cli_lib_error("loading the model");
    r->cfg = attn_vit_get_config(r->m);
    r->native = c->native;
    r->batch = c->batch;
    res->m = r->m;
    res->n_labels = r->cfg->n_labels;
    res->top = c->top;
    if (res->n_labels < 1)
        return cli_error("%s has no classifier (a ViTModel checkpoint); classify needs ViTForImageClassification", c->model);
    if (res->n_labels > 4096)
        return cli_error("%s has %lld labels; at most 4096 are supported", c->model, (long long)res->n_labels);
    r->logits = (float *)malloc(sizeof(float) * (size_t)(c->batch * res->n_labels));
    if (!r->logits) return cli_error("out of memory");
    return CLI_OK;
}

/* "FILE" per image, "FILE[i]" per item of an IDX input, into names[total] (text in *buf) */
static int item_names(const inputs *in, const char *const *paths, int64_t total, const char ***names, char **buf) {
    *names = (const char **)malloc(sizeof(char *) * (size_t)total);
    size_t nb = 0;
    for (int i = 0; i < in->n; i++) nb += in->in[i].is_idx ? (size_t)in->in[i].n * (strlen(paths[i]) + 24) : strlen(paths[i]) + 1;
    *buf = (char *)malloc(nb + 1);
    if (!*names || !*buf) return cli_error("out of memory");
    char *p = *buf;
    int64_t k = 0;
    for (int i = 0; i < in->n; i++)
        for (int64_t j = 0; j < in->in[i].n; j++) {
            (*names)[k++] = p;
            if (in->in[i].is_idx) p += sprintf(p, "%s[%lld]", paths[i], (long long)(in->in[i].first + j)) + 1;
            else p += sprintf(p, "%s", paths[i]) + 1;
        }
    return CLI_OK;
}

/* classify the IMAGE arguments: the top labels of each, --attention and --logits */
static int classify_images(runner *r, results *res, const classify_opts *c, const classify_files *f, attn_viz_format afmt) {
    inputs in = {0};
    const char **names = NULL;
    char *namebuf = NULL;
    int rc = CLI_OK;
    in.in = (input *)calloc((size_t)c->npaths, sizeof(input));
    if (!in.in) return cli_error("out of memory");
    int64_t total = 0;
    for (int i = 0; i < c->npaths && rc == CLI_OK; i++) {
        in.n = i + 1;
        rc = load_input(&in.in[i], c->paths[i], c->index, c->limit);
        total += in.in[i].n;
    }
    if (rc != CLI_OK) goto done;
    if (c->attention && total != 1) {
        rc = cli_usage_error("classify", "--attention needs exactly one image (%lld given; use --index for an IDX file)",
                             (long long)total);
        goto done;
    }
    if (c->logits_out) res->all_logits = (float *)malloc(sizeof(float) * (size_t)(total * res->n_labels));
    if ((rc = item_names(&in, c->paths, total, &names, &namebuf)) != CLI_OK) goto done;
    if (c->logits_out && !res->all_logits) {
        rc = cli_error("out of memory");
        goto done;
    }
    res->names = names;
    cli_progress_restart(&res->bar, (double)total);
    if (c->progress == CLI_PROGRESS_AUTO && isatty(1)) res->bar.on = 0; /* the labels go to that terminal as they come */
    int64_t k = 0;
    for (int i = 0; i < in.n && rc == CLI_OK; i++)
        for (int64_t j = 0; j < in.in[i].n && rc == CLI_OK; j++, k++) {
            attn_image img;
            input_item(&img, &in.in[i], j);
            rc = runner_add(r, &img, names[k], on_logits, res);
            if (rc == CLI_OK && c->attention) /* uses the batch slot just filled: before the batch is flushed */
                rc = write_attention(r, &img, names[k], f->attention, f->heads, f->user_attention, f->user_heads, afmt);
        }
    if (rc == CLI_OK) rc = runner_flush(r, on_logits, res);
    cli_progress_end(&res->bar);
    if (rc == CLI_OK && c->logits_out) {
        attn_tensor t = attn_tensor_f32_2d(res->all_logits, total, res->n_labels);
        if (attn_npy_save(f->logits, &t) < 0) rc = cli_lib_error(NULL);
    }
    if (fflush(stdout) != 0 && rc == CLI_OK) rc = cli_stdout_error();
done:
    free(names);
    free(namebuf);
    inputs_free(&in);
    return rc;
}

static int classify_run(const classify_opts *c, const classify_files *f, attn_viz_format afmt, attn_viz_format cfmt) {
    runner r;
    memset(&r, 0, sizeof r);
    results res;
    memset(&res, 0, sizeof res);
    attn_arena_init(&r.arena, 4 << 20);
    cli_progress_start(&res.bar, c->progress, "classify", "images", 0); /* total: when known */
    int rc = runner_start(&r, &res, c);
    if (rc == CLI_OK && c->eval_img) rc = run_eval(&r, &res, c->eval_img, c->eval_lab, c->limit, f->confusion, cfmt, f->logits);
    else if (rc == CLI_OK) rc = classify_images(&r, &res, c, f, afmt);
    free(res.all_logits);
    free(res.pred);
    free(r.pixels);
    free(r.logits);
    attn_vit_free(r.m);
    attn_arena_free(&r.arena);
    return rc;
}

int cmd_classify(int argc, char **argv) {
    classify_opts c;
    memset(&c, 0, sizeof c);
    c.top = 5, c.batch = 64, c.index = -1, c.limit = -1, c.progress = CLI_PROGRESS_AUTO;
    c.paths = (const char **)calloc((size_t)argc + 1, sizeof(char *));
    if (!c.paths) return cli_error("out of memory");
    attn_viz_format afmt = ATTN_VIZ_PNG, cfmt = ATTN_VIZ_PNG;
    int rc = cli_parse(argc, argv, "classify", options, &c, NULL, NULL, image_path, usage);
    if (rc == CLI_OK) rc = check_options(&c, &afmt, &cfmt);
    if (rc != CLI_OK) {
        free(c.paths);
        return cli_parsed(rc);
    }
    cli_outputs outs;
    cli_outputs_init(&outs, "classify");
    classify_files f;
    rc = declare_outputs(&c, &outs, &f);
    if (rc == CLI_OK) {
        if (c.threads > 0) attn_set_num_threads((int)c.threads);
        rc = classify_run(&c, &f, afmt, cfmt);
    }
    free(c.paths);
    return cli_mpi_job_finish(&outs, rc); /* cli_outputs_finish, agreed over the ranks under mpirun */
}
