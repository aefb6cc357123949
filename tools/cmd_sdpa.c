/* attn sdpa: scaled dot-product attention on .npy tensors (attn_sdpa). */
#include "cli.h"

#include "attn_attention.h"
#include "attn_npy.h"
#include "attn_variants.h"
#include "mpi_cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *qp, *kp, *vp, *mp, *op, *wp;
    attn_sdpa_params p;
    int window_set, impl, dtype; /* impl: -1 = not given; dtype: 0 auto, 1 fp32, 2 bf16, 3 fp16 */
    int ring, layout;            /* --ring, --layout (-1 not given, 0 striped, 1 contiguous) */
    /* --variant and its options (vopt: the last variant-only option seen; given: which ones) */
    const char *variant, *kpmp, *vopt;
    unsigned given;
    attn_variant_params var;
} sdpa_opts;

/* the variant-only options, as bits of sdpa_opts.given */
static const char *const variant_only[] = {"--key-padding", "--global", "--block", "--global-blocks",
                                           "--random", "--features", "--seed", NULL};
enum { G_KPM = 1, G_GLOBAL = 2, G_BLOCK = 4, G_GBLOCKS = 8, G_RANDOM = 16, G_FEATURES = 32, G_SEED = 64 };

static int variant_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    sdpa_opts *s = (sdpa_opts *)base;
    if (strcmp(o->name, "--key-padding") == 0) *(const char **)field = val; /* a file */
    else if (cli_parse_i64(a->verb, o->name, val, o->lo, o->hi, (int64_t *)field) != CLI_OK) return CLI_USAGE;
    s->vopt = o->name;
    for (int i = 0; variant_only[i]; i++)
        if (strcmp(o->name, variant_only[i]) == 0) s->given |= 1u << i;
    return CLI_OK;
}

static int window_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    sdpa_opts *s = (sdpa_opts *)base;
    if (cli_parse_i64(a->verb, o->name, val, 0, INT64_MAX, &s->p.window)) return CLI_USAGE;
    s->window_set = 1;
    return CLI_OK;
}

static int scale_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    sdpa_opts *s = (sdpa_opts *)base;
    if (cli_parse_f32(a->verb, o->name, val, &s->p.scale)) return CLI_USAGE;
    s->p.has_scale = 1;
    return CLI_OK;
}

static int threads_opt(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    int64_t n;
    if (cli_parse_i64(a->verb, o->name, val, 1, 4096, &n)) return CLI_USAGE;
    ((sdpa_opts *)base)->p.n_threads = (int)n;
    return CLI_OK;
}

#define F(f) offsetof(sdpa_opts, f)
#define V(f) offsetof(sdpa_opts, var.f)
static const char *const impls[] = {"default", "reference", "fused", NULL};
static const int impl_ids[] = {ATTN_IMPL_DEFAULT, ATTN_IMPL_REFERENCE, ATTN_IMPL_FUSED};
static const char *const dtypes[] = {"auto", "fp32", "bf16", "fp16", NULL};
static const char *const layouts[] = {"striped", "contiguous", NULL};
static const cli_option options[] = {
    {"--query", "-q", CLI_STR, F(qp), .help = "  -q, --query FILE     queries (float32 or float16)\n"},
    {"--key", "-k", CLI_STR, F(kp), .help = "  -k, --key FILE       keys (float32 or float16)\n"},
    {"--value", "-v", CLI_STR, F(vp), .help = "  -v, --value FILE     values (float32 or float16)\n"},
    {"--output", "-o", CLI_STR, F(op),
     .help = "  -o, --output FILE    output .npy: float16 when the inputs are float16 (or --dtype\n"
             "                       fp16), else float32; - = standard output (not a terminal)\n"},
    {"--dtype", NULL, CLI_CHOICE, F(dtype), .choices = dtypes,
     .help = "      --dtype T        auto | fp32 | bf16 | fp16: the dtype q, k and v are rounded to\n"
             "                       before the kernel (auto: the files' dtype, which must agree);\n"
             "                       bf16 (.npy has no bfloat16) writes a float32 output; the\n"
             "                       kernel accumulates in float32 (see attn_sdpa_kernel_name)\n"},
    {"--mask", "-m", CLI_STR, F(mp),
     .help = "  -m, --mask FILE      bool (true = may attend) or float32 additive mask, broadcast\n"
             "                       to [B, H, Lq, Lk]; -inf or <= -FLT_MAX marks a masked key\n"},
    {"--causal", NULL, CLI_FLAG, F(p.is_causal), 1,
     .help = "      --causal         bottom-right causal mask: key j visible to query i iff\n"
             "                       j <= i + Lk - Lq\n"},
    {"--window", NULL, CLI_CALL, 0, .fn = window_opt, .takes_value = 1,
     .help = "      --window W       sliding window of W keys ending at the query's position\n"
             "                       (W >= 0; 0 = none)\n"},
    {"--scale", NULL, CLI_CALL, 0, .fn = scale_opt, .takes_value = 1,
     .help = "      --scale S        score scale (default 1/sqrt(D))\n"},
    {"--weights", NULL, CLI_STR, F(wp), .help = "      --weights FILE   also write the attention weights (float32)\n"},
    {"--threads", NULL, CLI_CALL, 0, .fn = threads_opt, .takes_value = 1,
     .help = "      --threads N      worker threads (1..4096; default: all cores)\n"},
    {"--impl", NULL, CLI_CHOICE, F(impl), .choices = impls, .values = impl_ids,
     .help = "      --impl NAME      default | reference | fused\n"},
    {"--ring", NULL, CLI_FLAG, F(ring), 1,
     .help = "      --ring           under `mpirun -np P`: ring attention (attn_sdpa_ring, Liu et al. 2023):\n"
             "                       every rank maps its shard of the float32 q, k, v along L, the key/value\n"
             "                       shards go round the ranks, rank 0 writes OUT (the same as without\n"
             "                       --ring) once every rank succeeded; --causal, --scale, --threads, --impl\n"
             "                       apply (not --mask, --window, --weights, --variant, --dtype)\n"},
    {"--layout", NULL, CLI_CHOICE, F(layout), .choices = layouts,
     .help = "      --layout NAME    --ring shards: striped (positions r, r+P, ...: balanced under\n"
             "                       --causal; default) | contiguous (one run per rank)\n"},
    CLI_HELP_LINE("  -h, --help           this help\n"
                  "A query row that sees no key gets zeros in OUT and in the weights.\n"
                  "Outputs are written only when the whole computation succeeded, each to a temporary file\n"
                  "renamed over its target when complete; outputs naming one file or an input are refused.\n"
                  "\n"
                  "Efficient variants (attn_variants.h; see docs/variants.md):\n"),
    {"--variant", NULL, CLI_STR, F(variant),
     .help = "      --variant NAME   exact (default) | linear | performer | sliding | longformer | bigbird\n"
             "        linear      elu(x)+1 feature map on raw q, k (Katharopoulos et al. 2020); --causal\n"
             "        performer   FAVOR+ random features (Choromanski et al. 2021); --features M\n"
             "                    (default 256), --seed S, --causal, --scale\n"
             "        sliding     exact softmax over --window W keys ending at the query (default 256)\n"
             "        longformer  |i - j| <= --window w (default 128) plus --global G first tokens\n"
             "                    (default 1) that attend to and are attended by all (Beltagy et al. 2020)\n"
             "        bigbird     --block b (default 64; must divide Lk), 3 sliding blocks,\n"
             "                    --global-blocks g (default 1), --random r (default 3) random blocks\n"
             "                    per block row drawn with --seed S (Zaheer et al. 2020)\n"},
    {"--key-padding", NULL, CLI_CALL, F(kpmp), 0, 0, .fn = variant_opt, .takes_value = 1,
     .help = "      --key-padding FILE  bool [B, Lk] (true = real token; left padding works) for the\n"
             "                       variants; the sparse patterns are laid out on the real tokens\n"},
    {"--global", NULL, CLI_CALL, V(n_global), INT64_MIN, INT64_MAX, .fn = variant_opt, .takes_value = 1},
    {"--block", NULL, CLI_CALL, V(block), INT64_MIN, INT64_MAX, .fn = variant_opt, .takes_value = 1},
    {"--global-blocks", NULL, CLI_CALL, V(global_blocks), INT64_MIN, INT64_MAX, .fn = variant_opt, .takes_value = 1},
    {"--random", NULL, CLI_CALL, V(random_blocks), INT64_MIN, INT64_MAX, .fn = variant_opt, .takes_value = 1},
    {"--features", NULL, CLI_CALL, V(features), INT64_MIN, INT64_MAX, .fn = variant_opt, .takes_value = 1},
    {"--seed", NULL, CLI_CALL, V(seed), 0, INT64_MAX, .fn = variant_opt, .takes_value = 1},
    CLI_HELP_LINE("--mask applies to exact, sliding, longformer and bigbird; --weights gives the dense\n"
                  "weights (zeros outside the pattern; the implied weights for linear and performer).\n"),
    {0}};

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn sdpa -q Q.npy -k K.npy -v V.npy -o OUT.npy [options]\n"
            "\n"
            "Computes out = softmax(q k^T * scale + mask) v  (Vaswani et al. 2017, eq. 1).\n"
            "q, k, v are float32 or float16 .npy arrays of the same rank:\n"
            "  [B, H, Lq, D], [B, Hkv, Lk, D], [B, Hkv, Lk, Dv]   or\n"
            "  [H, Lq, D] ... (B = 1)   or   [Lq, D] ... (B = H = 1).\n"
            "H must be a multiple of Hkv (grouped-query attention). OUT has q's rank with the\n"
            "last dim Dv; the weights have q's rank with the last dim Lk.\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
}

/* [.., L, D] of rank 2..4 as a 4-D contiguous view [B, H, L, D]. */
static void as_4d(attn_tensor *out, const attn_tensor *t) {
    int64_t shape[4] = {1, 1, 1, 1};
    for (int i = 0; i < t->ndim; i++) shape[4 - t->ndim + i] = t->shape[i];
    attn_tensor_make(out, t->data, t->dtype, 4, shape);
}

static int check_input(const attn_tensor *t, const char *what, const char *path, int rank) {
    if (t->dtype != ATTN_F32 && t->dtype != ATTN_F16)
        return cli_error("%s: %s has dtype %s; expected float32 or float16", path, what, attn_dtype_name(t->dtype));
    if (t->ndim < 2 || t->ndim > 4)
        return cli_error("%s: %s has %d dims; expected [B, H, L, D], [H, L, D] or [L, D]", path, what,
                         t->ndim);
    if (rank && t->ndim != rank)
        return cli_error("%s: %s has %d dims but q has %d; q, k and v must have the same rank", path,
                         what, t->ndim, rank);
    return CLI_OK;
}

/* Load a mask file; a dtype .npy cannot hold at all is reported with what a mask accepts
 * (`accepts`), not with every dtype the .npy reader knows. CLI_OK or CLI_FAIL. */
static int load_mask(attn_tensor *t, const char *path, const char *accepts) {
    int lr = attn_npy_load(t, path);
    if (lr == ATTN_E_DTYPE) {
        const char *q1 = strchr(attn_last_error(), '\''), *q2 = q1 ? strchr(q1 + 1, '\'') : NULL;
        return cli_error("%s: %s, not %.*s", path, accepts, q1 && q2 ? (int)(q2 - q1 + 1) : 10,
                         q1 && q2 ? q1 : "this dtype");
    }
    if (lr < 0) return cli_lib_error(NULL);
    return CLI_OK;
}

/* *dst = t converted to dtype `dt` in a new buffer *buf (freed by the caller), or t's own view when
 * it already has that dtype. A finite value that the narrower dtype cannot hold (|x| > 65504 for
 * float16) is an error naming the file, not an inf for the kernel to report. CLI_OK or CLI_FAIL. */
static int to_dtype(attn_tensor *dst, const attn_tensor *t, void **buf, attn_dtype dt, const char *what,
                    const char *path) {
    *dst = *t;
    if (t->dtype == dt) return CLI_OK;
    size_t n = (size_t)attn_tensor_numel(t);
    *buf = malloc(n * attn_dtype_size(dt) + 1);
    if (!*buf) return cli_error("out of memory");
    if (attn_convert(*buf, dt, t->data, t->dtype, n) < 0) return cli_lib_error(NULL);
    if (dt == ATTN_F16 && t->dtype == ATTN_F32) {
        const float *x = t->data;
        const uint16_t *h = *buf;
        for (size_t i = 0; i < n; i++)
            if ((h[i] & 0x7c00u) == 0x7c00u && isfinite(x[i]))
                return cli_error("%s: %s[%zu] = %g does not fit float16 (|x| <= 65504); use --dtype fp32 or bf16", path,
                                 what, i, (double)x[i]);
    }
    attn_tensor_make(dst, *buf, dt, t->ndim, t->shape);
    return CLI_OK;
}

/* a * b * c * d elements, or -1 on overflow. */
static int64_t count4(const int64_t *s) {
    int64_t n = 1;
    for (int i = 0; i < 4; i++) {
        if (s[i] == 0) return 0;
        if (n > INT64_MAX / 8 / s[i]) return -1;
        n *= s[i];
    }
    return n;
}

/* --variant: the kind, and every variant option refused where it does not apply (see the help
 * text); s->variant becomes NULL for exact attention (the plain attn_sdpa path). */
static int check_variant(sdpa_opts *s) {
    attn_sdpa_params *p = &s->p;
    attn_variant_params *var = &s->var;
    const char *variant = s->variant;
    attn_variant_kind kind;
    if (attn_variant_from_name(variant, &kind) < 0) return cli_usage_error("sdpa", "%s", attn_last_error());
    attn_variant_params d = attn_variant_params_default(kind);
    var->kind = kind;
    if (kind == ATTN_VARIANT_EXACT) {
        s->variant = NULL;
        return CLI_OK;
    }
    const char *dtype_s = s->dtype > 0 ? dtypes[s->dtype] : NULL;
    if (s->impl >= 0) return cli_usage_error("sdpa", "--impl applies to exact attention only, not --variant %s", variant);
    if (dtype_s && strcmp(dtype_s, "fp32"))
        return cli_usage_error("sdpa", "--dtype %s applies to exact attention only; --variant %s computes in float32",
                               dtype_s, variant);
    if (s->window_set && kind != ATTN_VARIANT_SLIDING && kind != ATTN_VARIANT_LONGFORMER)
        return cli_usage_error("sdpa", "--window applies to exact, sliding and longformer attention, not %s", variant);
    const int lin = kind == ATTN_VARIANT_LINEAR, perf = kind == ATTN_VARIANT_PERFORMER;
    const int bb = kind == ATTN_VARIANT_BIGBIRD, lf = kind == ATTN_VARIANT_LONGFORMER;
    const unsigned g = s->given;
    if ((g & G_FEATURES) && !perf)
        return cli_usage_error("sdpa", "--features applies to --variant performer only, not %s", variant);
    if ((g & G_SEED) && !perf && !bb)
        return cli_usage_error("sdpa", "--seed applies to --variant performer and bigbird only, not %s", variant);
    if ((g & (G_BLOCK | G_GBLOCKS | G_RANDOM)) && !bb)
        return cli_usage_error("sdpa", "%s applies to --variant bigbird only, not %s",
                               (g & G_BLOCK) ? "--block" : (g & G_GBLOCKS) ? "--global-blocks" : "--random", variant);
    if ((g & G_GLOBAL) && !lf) return cli_usage_error("sdpa", "--global applies to --variant longformer only, not %s", variant);
    if (s->mp && (lin || perf))
        return cli_usage_error("sdpa", "-m/--mask does not apply to --variant %s; use --causal or --key-padding FILE", variant);
    if (p->has_scale && lin)
        return cli_usage_error("sdpa", "--scale does not apply to --variant linear (elu + 1 is applied to the raw q and k)");
    var->window = s->window_set ? p->window : d.window;
    p->window = 0;
    var->is_causal = p->is_causal;
    var->has_scale = p->has_scale;
    var->scale = p->scale;
    var->n_threads = p->n_threads;
    if (attn_variant_validate(var) < 0) return cli_usage_error("sdpa", "%s", attn_last_error());
    return CLI_OK;
}

/* the inputs as loaded (q, k, v, mask, key padding) and q, k, v in the compute dtype */
typedef struct {
    attn_tensor q, k, v, m, kpm;
    attn_npy_mapped mq, mk, mv; /* q, k, v mapped from their files (read-only, not copied) */
    attn_tensor qc, kc, vc;
    void *cbuf[3];
    attn_dtype od; /* the output's dtype */
} sdpa_inputs;

static void inputs_free(sdpa_inputs *in) {
    for (int i = 0; i < 3; i++) free(in->cbuf[i]);
    attn_npy_unmap(&in->mq);
    attn_npy_unmap(&in->mk);
    attn_npy_unmap(&in->mv);
    attn_npy_free(&in->m);
    attn_npy_free(&in->kpm);
}

static int load_masks(sdpa_inputs *in, const char *mp, const char *kpmp) {
    if (mp) {
        if (load_mask(&in->m, mp, "a mask must be bool or float32")) return CLI_FAIL;
        if (in->m.dtype != ATTN_BOOL && in->m.dtype != ATTN_F32)
            return cli_error("%s: mask has dtype %s; expected bool or float32", mp, attn_dtype_name(in->m.dtype));
        if (in->m.ndim < 1 || in->m.ndim > 4)
            return cli_error("%s: mask has %d dims; expected 1 to 4 (broadcast to [B, H, Lq, Lk])", mp, in->m.ndim);
    }
    if (kpmp) {
        attn_tensor *kpm = &in->kpm;
        if (load_mask(kpm, kpmp, "--key-padding must be bool")) return CLI_FAIL;
        if (kpm->dtype != ATTN_BOOL || kpm->ndim < 1 || kpm->ndim > 2)
            return cli_error("%s: key-padding mask must be bool [B, Lk] (or [Lk] when B = 1), got %s with %d dims", kpmp,
                             attn_dtype_name(kpm->dtype), kpm->ndim);
        if (kpm->ndim == 1) { /* [Lk] -> [1, Lk] */
            int64_t ks[2] = {1, kpm->shape[0]};
            attn_tensor_make(kpm, kpm->data, ATTN_BOOL, 2, ks);
        }
    }
    return CLI_OK;
}

static int map_npy(attn_npy_mapped *m, attn_tensor *t, const char *path) {
    if (attn_npy_map(m, path) < 0) return cli_lib_error(NULL);
    *t = m->t;
    return CLI_OK;
}

static int load_inputs(sdpa_inputs *in, const sdpa_opts *s) {
    const char *qp = s->qp, *kp = s->kp, *vp = s->vp;
    if (map_npy(&in->mq, &in->q, qp) || check_input(&in->q, "q", qp, 0)) return CLI_FAIL;
    if (map_npy(&in->mk, &in->k, kp) || check_input(&in->k, "k", kp, in->q.ndim)) return CLI_FAIL;
    if (map_npy(&in->mv, &in->v, vp) || check_input(&in->v, "v", vp, in->q.ndim)) return CLI_FAIL;
    /* the compute dtype: --dtype, else the files' (one dtype, as torch requires); variants: float32 */
    attn_dtype cd = in->q.dtype;
    if (s->dtype > 0) {
        cd = s->dtype == 1 ? ATTN_F32 : s->dtype == 2 ? ATTN_BF16 : ATTN_F16;
    } else if (s->variant) {
        cd = ATTN_F32;
    } else if (in->k.dtype != in->q.dtype || in->v.dtype != in->q.dtype) {
        return cli_error("q, k and v have dtypes %s, %s, %s; give them one dtype or choose one with --dtype",
                         attn_dtype_name(in->q.dtype), attn_dtype_name(in->k.dtype), attn_dtype_name(in->v.dtype));
    }
    if (to_dtype(&in->qc, &in->q, &in->cbuf[0], cd, "q", qp) || to_dtype(&in->kc, &in->k, &in->cbuf[1], cd, "k", kp) ||
        to_dtype(&in->vc, &in->v, &in->cbuf[2], cd, "v", vp))
        return CLI_FAIL;
    in->od = cd == ATTN_F16 ? ATTN_F16 : ATTN_F32; /* .npy has no bfloat16 */
    return load_masks(in, s->mp, s->kpmp);
}

/* clear messages for the common mistakes; attn_sdpa checks everything again */
static int check_shapes(const sdpa_inputs *in, const attn_tensor *q4, const attn_tensor *k4, const attn_tensor *v4) {
    char s1[96], s2[96];
    int64_t B = q4->shape[0], H = q4->shape[1], D = q4->shape[3];
    int64_t Hkv = k4->shape[1], Lk = k4->shape[2];
    if (k4->shape[3] != D)
        return cli_error("head dims differ: q %s has D=%lld but k %s has D=%lld", cli_shape_str(&in->q, s1, sizeof s1),
                         (long long)D, cli_shape_str(&in->k, s2, sizeof s2), (long long)k4->shape[3]);
    if (k4->shape[0] != B || v4->shape[0] != B)
        return cli_error("batch sizes differ: q has B=%lld, k B=%lld, v B=%lld", (long long)B, (long long)k4->shape[0],
                         (long long)v4->shape[0]);
    if (v4->shape[1] != Hkv || v4->shape[2] != Lk)
        return cli_error("k %s and v %s disagree on heads or length", cli_shape_str(&in->k, s1, sizeof s1),
                         cli_shape_str(&in->v, s2, sizeof s2));
    if (Hkv == 0 || H % Hkv != 0)
        return cli_error("q has H=%lld heads, not a multiple of the Hkv=%lld heads of k and v", (long long)H, (long long)Hkv);
    return CLI_OK;
}

/* run the kernel (or the variant) and write OUT and the weights with q's rank:
 * [..., Lq, Dv] and [..., Lq, Lk] */
static int compute(sdpa_opts *s, sdpa_inputs *in, cli_outputs *outs) {
    attn_tensor q4, k4, v4;
    as_4d(&q4, &in->qc);
    as_4d(&k4, &in->kc);
    as_4d(&v4, &in->vc);
    if (check_shapes(in, &q4, &k4, &v4) != CLI_OK) return CLI_FAIL;
    const char *wp = s->wp;
    int64_t oshape[4] = {q4.shape[0], q4.shape[1], q4.shape[2], v4.shape[3]};
    int64_t wshape[4] = {q4.shape[0], q4.shape[1], q4.shape[2], k4.shape[2]};
    int64_t on = count4(oshape), wn = wp ? count4(wshape) : 0;
    if (on < 0 || wn < 0) return cli_error("output too large");
    void *outbuf = malloc((size_t)on * attn_dtype_size(in->od) + 1);
    float *wbuf = wp ? malloc((size_t)wn * sizeof(float) + 1) : NULL;
    int rc = CLI_FAIL;
    if (!outbuf || (wp && !wbuf)) {
        cli_error("out of memory");
        goto done;
    }
    attn_tensor out4, w4, o_save, w_save;
    attn_tensor_make(&out4, outbuf, in->od, 4, oshape);
    attn_tensor_make(&w4, wbuf, ATTN_F32, 4, wshape);
    s->p.mask = s->mp ? &in->m : NULL;
    s->var.mask = s->p.mask;
    s->var.key_padding_mask = s->kpmp ? &in->kpm : NULL;
    if (s->variant ? attn_variant_attention(&out4, wp ? &w4 : NULL, &q4, &k4, &v4, &s->var) < 0
                   : attn_sdpa(&out4, wp ? &w4 : NULL, &q4, &k4, &v4, &s->p) < 0) {
        cli_lib_error(NULL);
        goto done;
    }
    int nd = in->q.ndim;
    attn_tensor_make(&o_save, outbuf, in->od, nd, oshape + 4 - nd);
    const char *path = cli_output_path(outs, 0);
    if (!path) goto done;
    if (attn_npy_save(path, &o_save) < 0) {
        cli_lib_error(NULL);
        goto done;
    }
    if (wp) {
        attn_tensor_make(&w_save, wbuf, ATTN_F32, nd, wshape + 4 - nd);
        if (!(path = cli_output_path(outs, 1))) goto done;
        if (attn_npy_save(path, &w_save) < 0) {
            cli_lib_error(NULL);
            goto done;
        }
    }
    rc = CLI_OK;
done:
    free(outbuf);
    free(wbuf);
    return rc;
}

int cmd_sdpa(int argc, char **argv) {
    sdpa_opts s;
    memset(&s, 0, sizeof s);
    s.p = attn_sdpa_params_default();
    s.impl = -1;
    s.layout = -1; /* --layout not given */
    s.var = attn_variant_params_default(ATTN_VARIANT_EXACT);
    int rc = cli_parse(argc, argv, "sdpa", options, &s, NULL, NULL, NULL, usage);
    if (rc != CLI_OK) return cli_parsed(rc);
    if (s.impl >= 0) s.p.impl = (attn_impl)s.impl;
    const char *qp = s.qp, *kp = s.kp, *vp = s.vp, *op = s.op;
    if (!qp || !kp || !vp || !op)
        return cli_usage_error("sdpa", "missing %s", !qp ? "-q Q.npy" : !kp ? "-k K.npy" : !vp ? "-v V.npy" : "-o OUT.npy");
    if (s.variant && (rc = check_variant(&s)) != CLI_OK) return rc;
    if (!s.variant && s.vopt)
        return cli_usage_error("sdpa", "%s needs --variant (linear, performer, sliding, longformer or bigbird)", s.vopt);
    /* outputs: refused up front when they clash; written only after the computation */
    cli_outputs outs;
    cli_outputs_init(&outs, "sdpa");
    if ((rc = cli_output_add(&outs, "-o", op, 1)) || (rc = cli_output_add(&outs, "--weights", s.wp, 1)) ||
        (rc = cli_output_input(&outs, "-q", qp)) || (rc = cli_output_input(&outs, "-k", kp)) ||
        (rc = cli_output_input(&outs, "-v", vp)) || (rc = cli_output_input(&outs, "-m", s.mp)) ||
        (rc = cli_output_input(&outs, "--key-padding", s.kpmp)))
        return rc;
    if (s.ring) {
        const char *bad = s.variant ? "--variant" : s.mp ? "--mask" : s.window_set ? "--window" : s.wp ? "--weights"
                          : s.dtype > 1 ? "--dtype other than fp32" : NULL;
        if (bad) return cli_outputs_finish(&outs, cli_usage_error("sdpa", "%s does not apply to --ring", bad));
        /* attn_ring_layout: 0 contiguous, 1 striped (the default) */
        return cli_sdpa_ring(qp, kp, vp, s.layout == 1 ? 0 : 1, &s.p, &outs);
    }
    if (s.layout >= 0) return cli_outputs_finish(&outs, cli_usage_error("sdpa", "--layout applies to --ring only"));
    sdpa_inputs in;
    memset(&in, 0, sizeof in);
    rc = load_inputs(&in, &s);
    if (rc == CLI_OK) rc = compute(&s, &in, &outs);
    inputs_free(&in);
    return cli_outputs_finish(&outs, rc);
}
