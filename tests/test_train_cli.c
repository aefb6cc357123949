/* attn train vit (tools/cmd_train.c) end to end on 256 Fashion-MNIST images with a tiny model
 * (hidden 32, 2 layers): the checkpoint that `attn classify --eval` loads (same accuracy as the
 * training's last line), --resume continuing bit for bit (2 epochs == 1 epoch + resume 1: equal
 * model.safetensors and optimizer.safetensors bytes), and the bad input of issue 21, each refused
 * with a message: label count mismatch, a label outside the classes, heads not dividing hidden,
 * batch 0, lr NaN / negative, a resume directory of another model, a NaN loss (names the step and
 * keeps the last good checkpoint). */
#include "attn.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FMNIST "/usr/share/datasets/fashion-mnist/"
static char tmp[64];
static char out[16384], err[16384];

static const char *P(const char *name) {
    static char b[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(b[k], sizeof b[k], "%s/%s", tmp, name);
    return b[k];
}

/* the first n items of an IDX file, written uncompressed */
static int write_idx(const char *src, const char *dst, int64_t n) {
    attn_idx x;
    if (attn_idx_load(&x, src) < 0) return -1;
    int64_t per = 1;
    for (int d = 1; d < x.ndim; d++) per *= x.dims[d];
    FILE *f = fopen(dst, "wb");
    unsigned char h[4] = {0, 0, 8, (unsigned char)x.ndim};
    fwrite(h, 1, 4, f);
    for (int d = 0; d < x.ndim; d++) {
        const uint32_t v = (uint32_t)(d ? x.dims[d] : n);
        unsigned char be[4] = {v >> 24, v >> 16, v >> 8, v};
        fwrite(be, 1, 4, f);
    }
    fwrite(x.data, 1, (size_t)(n * per), f);
    fclose(f);
    attn_idx_free(&x);
    return 0;
}

static int run(const char *const *args) {
    out[0] = err[0] = 0;
    return attn_test_run(attn_test_cli_path(), tmp, out, sizeof out, err, sizeof err, args);
}

static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

#define TRAIN "--train", P("tr.idx"), P("trl.idx")
#define EVAL "--eval", P("ev.idx"), P("evl.idx")
#define TINY "--hidden", "32", "--layers", "2", "--heads", "4", "--mlp", "64", "--batch", "32", "--threads", "1", "--seed", "3"

int main(void) {
    attn_test_name = "train_cli";
    snprintf(tmp, sizeof tmp, "/tmp/attn_test_train_cli_XXXXXX");
    if (!mkdtemp(tmp)) {
        CHECK(0, "mkdtemp");
        return attn_test_finish();
    }
    CHECK(write_idx(FMNIST "train-images-idx3-ubyte.gz", P("tr.idx"), 256) == 0, "train images");
    CHECK(write_idx(FMNIST "train-labels-idx1-ubyte.gz", P("trl.idx"), 256) == 0, "train labels");
    CHECK(write_idx(FMNIST "t10k-images-idx3-ubyte.gz", P("ev.idx"), 200) == 0, "eval images");
    CHECK(write_idx(FMNIST "t10k-labels-idx1-ubyte.gz", P("evl.idx"), 200) == 0, "eval labels");
    CHECK(write_idx(FMNIST "train-labels-idx1-ubyte.gz", P("short.idx"), 255) == 0, "short labels");

    /* A: 2 epochs */
    const char *a[] = {"train", "vit", TRAIN, EVAL, TINY, "--epochs", "2", "-o", P("A"), NULL};
    CHECK(run(a) == 0, "train A: %s", err);
    const char *last = strstr(out, "epoch 2/2:");
    CHECK(last && strstr(out, "epoch 1/2:"), "one line per epoch: %s", out);
    /* attn classify --eval on the checkpoint reproduces the training's evaluation */
    const char *c[] = {"classify", "--model", P("A"), "--eval", P("ev.idx"), P("evl.idx"), "--threads", "1", NULL};
    char line[64] = "";
    const char *acc = last ? strstr(last, "eval accuracy ") : NULL;
    if (acc) sscanf(acc, "eval accuracy %63[0-9.]", line);
    CHECK(run(c) == 0, "classify: %s", err);
    char want[96];
    snprintf(want, sizeof want, "accuracy: %s", line);
    CHECK(line[0] && strstr(out, want), "classify says %s; training said %s", out, line);
    CHECK(access(P("A/curve.png"), R_OK) == 0 && access(P("A/preprocessor_config.json"), R_OK) == 0, "curve.png, preprocessor");

    /* B: stop after epoch 1, then resume: bit for bit A */
    const char *b[] = {"train", "vit", TRAIN, EVAL, TINY, "--epochs", "2", "--stop-after", "1", "-o", P("B"), NULL};
    CHECK(run(b) == 0, "train B: %s", err);
    CHECK(strstr(out, "epoch 1/2:") && !strstr(out, "epoch 2/2"), "stopped after 1: %s", out);
    const char *r[] = {"train", "vit", TRAIN, EVAL, "--resume", P("B"), "--threads", "1", "-o", P("C"), NULL};
    CHECK(run(r) == 0, "resume: %s", err);
    CHECK(strstr(out, "epoch 2/2:") && !strstr(out, "epoch 1/2"), "resumed at epoch 2: %s", out);
    CHECK(same_file(P("A/model.safetensors"), P("C/model.safetensors")), "resumed weights == uninterrupted weights");
    CHECK(same_file(P("A/optimizer.safetensors"), P("C/optimizer.safetensors")), "resumed AdamW state == uninterrupted");
    CHECK(!strstr(err, "without --eval"), "a resume with --eval: no note: %s", err);
    /* the same resume without --eval: trains on, and says that it no longer evaluates (was silent) */
    const char *rn[] = {"train", "vit", TRAIN, "--resume", P("B"), "--threads", "1", "-o", P("CN"), NULL};
    CHECK(run(rn) == 0 && strstr(err, "was evaluated after every epoch; without --eval") && !strstr(out, "eval accuracy"),
          "resume without --eval: a note: %s / %s", err, out);
    CHECK(same_file(P("A/model.safetensors"), P("CN/model.safetensors")), "resumed without --eval: the same weights");
    /* a setting that contradicts the resumed run is a usage error (exit 2, README) naming the run's value */
    const char *rs[] = {"train", "vit", TRAIN, EVAL, "--resume", P("B"), "--seed", "12345", "--threads", "1", "-o", P("RS"), NULL};
    CHECK(run(rs) == 2 && strstr(err, "--seed") && strstr(err, "the resumed run's"), "resume with another --seed: exit 2: %s", err);
    /* --epochs at or below the epochs done: a usage error naming both counts (it said "has done 1 of 1 epochs" for a run of 2) */
    const char *re1[] = {"train", "vit", TRAIN, EVAL, "--resume", P("B"), "--epochs", "1", "--threads", "1", "-o", P("RE"), NULL};
    CHECK(run(re1) == 2 && strstr(err, "--epochs 1") && strstr(err, "has done 1 epoch already") && strstr(err, "planned 2"),
          "resume with --epochs 1 after 1 of 2: %s", err);
    /* a --limit run resumes when --limit is given again (the checkpoint keeps the steps per epoch, not the
     * limit): bit for bit the uninterrupted --limit run */
    const char *la[] = {"train", "vit", TRAIN, TINY, "--limit", "100", "--epochs", "2", "-o", P("LA"), NULL};
    CHECK(run(la) == 0, "train LA: %s", err);
    const char *lb[] = {"train", "vit", TRAIN, TINY, "--limit", "100", "--epochs", "2", "--stop-after", "1", "-o", P("LB"), NULL};
    CHECK(run(lb) == 0, "train LB: %s", err);
    const char *lr[] = {"train", "vit", TRAIN, "--resume", P("LB"), "--limit", "100", "--threads", "1", "-o", P("LC"), NULL};
    CHECK(run(lr) == 0 && strstr(out, "epoch 2/2:") && !strstr(err, "without --eval"), "resume a --limit run with its --limit "
          "(never evaluated: no note): %s", err);
    CHECK(same_file(P("LA/model.safetensors"), P("LC/model.safetensors")), "resumed --limit weights == uninterrupted");
    const char *ln[] = {"train", "vit", TRAIN, "--resume", P("LB"), "--threads", "1", "-o", P("LD"), NULL};
    CHECK(run(ln) == 2 && strstr(err, "--limit"), "resume a --limit run without it: a usage error naming --limit: %s", err);
    /* another --limit with the same steps per epoch (97 and 100 images are both 4 steps of 32): refused, naming
     * both counts (trainer_state.json records the image count; new-user finding: it resumed on other data) */
    const char *l97[] = {"train", "vit", TRAIN, "--resume", P("LB"), "--limit", "97", "--threads", "1", "-o", P("LD"), NULL};
    CHECK(run(l97) == 2 && strstr(err, "trained on 100 images") && strstr(err, "gives 97"), "resume with another --limit: %s", err);
    /* the same count of other images (the evaluation set's first 100): refused */
    const char *lo[] = {"train", "vit", "--train", P("ev.idx"), P("evl.idx"), "--resume", P("LB"), "--limit", "100", "--threads", "1",
                        "-o", P("LD"), NULL};
    CHECK(run(lo) == 2 && strstr(err, "trained on other images"), "resume on other images of the same count: %s", err);
    CHECK(access(P("LD/model.safetensors"), F_OK) != 0, "no checkpoint from the refused resumes");

    /* NaN loss: resume B with an absurd learning rate; B's checkpoint stays */
    const char *n[] = {"train", "vit", TRAIN, "--resume", P("B"), "--lr", "1e30", "--threads", "1", "-o", P("B"), NULL};
    char before[128];
    snprintf(before, sizeof before, "cp %s %s", P("B/model.safetensors"), P("Bmodel.bak"));
    CHECK(system(before) == 0, "copy");
    CHECK(run(n) == 1, "NaN run fails");
    CHECK(strstr(err, "the loss turned NaN or infinite at epoch 2, step") && strstr(err, "last good epoch"), "names the step: %s", err);
    CHECK(same_file(P("B/model.safetensors"), P("Bmodel.bak")), "the last good checkpoint is kept");
    /* a NaN loss in the first epoch: the -o directory this run created is removed again (new-user finding: an
     * empty directory stayed); an empty directory that existed before the run stays */
    const char *nn[] = {"train", "vit", TRAIN, TINY, "--lr", "1e30", "-o", P("N"), NULL};
    CHECK(run(nn) == 1 && strstr(err, "NaN") && access(P("N"), F_OK) != 0, "NaN run: no empty -o directory left: %s", err);
    CHECK(mkdir(P("N2"), 0777) == 0, "mkdir N2");
    const char *n2[] = {"train", "vit", TRAIN, TINY, "--lr", "1e30", "-o", P("N2"), NULL};
    struct stat nd;
    CHECK(run(n2) == 1 && stat(P("N2"), &nd) == 0 && S_ISDIR(nd.st_mode), "NaN run: a directory that existed stays: %s", err);

    /* -o with missing parents (the README's -o runs/vit in a fresh checkout): made as mkdir -p (new-user finding) */
    const char *deep[] = {"train", "vit", TRAIN, TINY, "--epochs", "1", "-o", P("deep/er/run"), NULL};
    CHECK(run(deep) == 0 && access(P("deep/er/run/model.safetensors"), F_OK) == 0, "-o with missing parents: %s", err);

    /* --config: the model of A's config.json (hidden 32, 2 layers: 19,658 parameters) */
    const char *cf[] = {"train", "vit", TRAIN, "--config", P("A/config.json"), "--epochs", "1", "--batch", "64",
                        "--label-smoothing", "0.1", "--threads", "1", "-o", P("E"), NULL};
    CHECK(run(cf) == 0 && strstr(err, "19658 parameters") && strstr(out, "epoch 1/1: train loss"), "--config: %s", err);

    /* --help describes the data-parallel reduction as tools/mpi_train.c does it: bucketed MPI_Iallreduce
     * overlapped with the backward (new-user finding: it said MPI_Allreduce) */
    const char *hl[] = {"train", "--help", NULL};
    CHECK(run(hl) == 0 && strstr(out, "bucketed MPI_Iallreduce") && strstr(out, "overlaps the backward") &&
              !strstr(out, "MPI_Allreduce"),
          "train --help on the reduction: %s", out);

    /* bad input */
    const char *e1[] = {"train", "vit", "--train", P("tr.idx"), P("short.idx"), TINY, "-o", P("D"), NULL};
    CHECK(run(e1) == 1 && strstr(err, "has 256 images but") && strstr(err, "255 labels"), "count mismatch: %s", err);
    const char *e2[] = {"train", "vit", TRAIN, TINY, "--classes", "5", "-o", P("D"), NULL};
    CHECK(run(e2) == 1 && strstr(err, "is not a class of this model (0..4)"), "label out of range: %s", err);
    const char *e3[] = {"train", "vit", TRAIN, "--hidden", "30", "--heads", "4", "-o", P("D"), NULL};
    CHECK(run(e3) == 2 && strstr(err, "hidden size 30 is not a multiple of 4 heads"), "heads: a usage error: %s", err);
    const char *e4[] = {"train", "vit", TRAIN, "--batch", "0", "-o", P("D"), NULL};
    CHECK(run(e4) == 2 && strstr(err, "--batch"), "batch 0: %s", err);
    const char *e5[] = {"train", "vit", TRAIN, "--lr", "nan", "-o", P("D"), NULL};
    CHECK(run(e5) == 2 && strstr(err, "--lr must be a finite number > 0"), "lr NaN: %s", err);
    const char *e6[] = {"train", "vit", TRAIN, "--lr", "-0.001", "-o", P("D"), NULL};
    CHECK(run(e6) == 2 && strstr(err, "--lr must be a finite number > 0"), "lr negative: %s", err);
    const char *e7[] = {"train", "vit", TRAIN, "--resume", P("A"), "--hidden", "64", "-o", P("D"), NULL};
    /* an option that contradicts the resumed run: a usage error (exit 2, README's rule; it was 1), the message kept */
    CHECK(run(e7) == 2 && strstr(err, "--hidden 64 disagrees") && strstr(err, "another model"), "resume other model: %s", err);
    const char *e7p[] = {"train", "vit", TRAIN, "--resume", P("A"), "--patch", "4", "-o", P("D"), NULL};
    char want7p[600];
    snprintf(want7p, sizeof want7p, "--patch 4 disagrees with %s, whose model has 7 (a resume directory of another model?)", P("A"));
    const int rc7p = run(e7p);
    CHECK(rc7p == 2 && strstr(err, want7p) && strstr(err, "Try 'attn train --help'"), "resume with another --patch (exit %d): %s", rc7p, err);
    const char *e7q[] = {"train", "vit", TRAIN, "--config", P("A/config.json"), "--layers", "3", "-o", P("D"), NULL};
    char want7q[600];
    snprintf(want7q, sizeof want7q, "--layers 3 disagrees with %s, whose model has 2", P("A/config.json"));
    const int rc7q = run(e7q);
    CHECK(rc7q == 2 && strstr(err, want7q) && !strstr(err, "another model"), "--config with another --layers (exit %d): %s", rc7q, err);
    /* --config of a file at the root that does not exist: the message names it (it said "cannot read //") */
    const char *e7b[] = {"train", "vit", TRAIN, "--config", "/no-such-config.json", "-o", P("D"), NULL};
    CHECK(run(e7b) == 1 && strstr(err, "/no-such-config.json") && !strstr(err, "//"), "--config /missing.json: %s", err);
    /* --config whose heads do not divide its hidden size: one clean message (the file name was
     * formatted into the buffer it read the reason from: "PATH: PATH: ize 96 is not ...") */
    FILE *cf5 = fopen(P("cfg5.json"), "w");
    if (cf5) {
        fputs("{\"hidden_size\": 96, \"num_attention_heads\": 5, \"image_size\": 28, \"patch_size\": 7, \"num_channels\": 1, "
              "\"intermediate_size\": 192, \"num_hidden_layers\": 4, \"layer_norm_eps\": 1e-12, \"hidden_act\": \"gelu\", "
              "\"qkv_bias\": true, \"id2label\": {\"0\": \"a\", \"1\": \"b\"}}\n",
              cf5);
        fclose(cf5);
    }
    const char *e7c[] = {"train", "vit", TRAIN, "--config", P("cfg5.json"), "-o", P("D"), NULL};
    char want7c[600];
    snprintf(want7c, sizeof want7c, "%s: vit train: hidden size 96 is not a multiple of 5 heads", P("cfg5.json"));
    const int rc7c = run(e7c);
    const char *at7c = strstr(err, P("cfg5.json"));
    CHECK(rc7c == 1 && strstr(err, want7c) && at7c && !strstr(at7c + 1, P("cfg5.json")), "--config with 5 heads for hidden 96 (exit %d): %s",
          rc7c, err);
    /* -o naming an input file: a usage error (exit 2, README's rule), the file untouched */
    struct stat tr0, tr1;
    stat(P("tr.idx"), &tr0);
    const char *e7d[] = {"train", "vit", TRAIN, TINY, "--epochs", "1", "-o", P("tr.idx"), NULL};
    const int rc7d = run(e7d);
    CHECK(rc7d == 2 && strstr(err, "is not a directory") && stat(P("tr.idx"), &tr1) == 0 && tr1.st_size == tr0.st_size &&
              tr1.st_mtime == tr0.st_mtime,
          "-o onto the training images (exit %d): %s", rc7d, err);
    const char *e8[] = {"train", "vit", TRAIN, "--resume", "models/vit-fashion-mnist", "-o", P("D"), NULL};
    CHECK(run(e8) == 1 && strstr(err, "optimizer.safetensors") && strstr(err, "holds a model, not a run to resume"),
          "resume the shipped model (no optimizer state): %s", err);
    const char *e9[] = {"train", "vit", TRAIN, "--resume", P("A"), "--epochs", "2", "-o", P("D"), NULL};
    CHECK(run(e9) == 2 && strstr(err, "has done 2 epochs already"), "nothing left to do with --epochs 2: %s", err);
    const char *e9b[] = {"train", "vit", TRAIN, "--resume", P("A"), "-o", P("D"), NULL};
    CHECK(run(e9b) == 1 && strstr(err, "has done all 2 of its epochs"), "nothing left to do: %s", err);
    const char *e10[] = {"train", "vit", "--train", P("trl.idx"), P("tr.idx"), TINY, "-o", P("D"), NULL};
    CHECK(run(e10) == 1 && strstr(err, "a 1-D IDX") && strstr(err, "swapped"), "IMAGES and LABELS swapped: %s", err);
    /* --eval swapped: the same hint, naming which file looks like labels and which like images (new-user finding) */
    const char *e11[] = {"train", "vit", TRAIN, "--eval", P("evl.idx"), P("ev.idx"), TINY, "-o", P("D"), NULL};
    char want11[600];
    snprintf(want11, sizeof want11, "%s looks like labels [N] and %s like images", P("evl.idx"), P("ev.idx"));
    CHECK(run(e11) == 1 && strstr(err, "--eval") && strstr(err, "swapped") && strstr(err, want11), "--eval swapped: %s", err);
    CHECK(access(P("D/model.safetensors"), F_OK) != 0, "no checkpoint from the refused runs");
    /* -o onto a directory that holds a model (another run's, not resumed): refused, the model kept;
     * --overwrite replaces it (found by a new-user test: a model directory was silently replaced) */
    struct stat m0, m1;
    CHECK(stat(P("A/model.safetensors"), &m0) == 0, "A holds a model");
    const char *ow[] = {"train", "vit", TRAIN, TINY, "--epochs", "1", "-o", P("A"), NULL};
    CHECK(run(ow) == 2 && strstr(err, "already holds a model") && strstr(err, "--overwrite"), "-o onto a model refused: %s", err);
    CHECK(stat(P("A/model.safetensors"), &m1) == 0 && m1.st_ino == m0.st_ino && m1.st_mtime == m0.st_mtime, "the model in A untouched");
    const char *ow2[] = {"train", "vit", TRAIN, TINY, "--epochs", "1", "--overwrite", "-o", P("A"), NULL};
    CHECK(run(ow2) == 0 && stat(P("A/model.safetensors"), &m1) == 0 && m1.st_ino != m0.st_ino, "--overwrite replaces it: %s", err);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK(system(cmd) == 0, "cleanup");
    return attn_test_finish();
}
