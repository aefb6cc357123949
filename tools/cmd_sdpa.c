/* attn sdpa: scaled dot-product attention on .npy tensors (attn_sdpa). */
#include "cli.h"

#include "attn_attention.h"
#include "attn_npy.h"
#include "attn_variants.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
            "Options:\n"
            "  -q, --query FILE     queries (float32 or float16)\n"
            "  -k, --key FILE       keys (float32 or float16)\n"
            "  -v, --value FILE     values (float32 or float16)\n"
            "  -o, --output FILE    output .npy: float16 when the inputs are float16 (or --dtype\n"
            "                       fp16), else float32; - = standard output (not a terminal)\n"
            "      --dtype T        auto | fp32 | bf16 | fp16: the dtype q, k and v are rounded to\n"
            "                       before the kernel (auto: the files' dtype, which must agree);\n"
            "                       bf16 (.npy has no bfloat16) writes a float32 output; the\n"
            "                       kernel accumulates in float32 (see attn_sdpa_kernel_name)\n"
            "  -m, --mask FILE      bool (true = may attend) or float32 additive mask, broadcast\n"
            "                       to [B, H, Lq, Lk]; -inf or <= -FLT_MAX marks a masked key\n"
            "      --causal         bottom-right causal mask: key j visible to query i iff\n"
            "                       j <= i + Lk - Lq\n"
            "      --window W       sliding window of W keys ending at the query's position\n"
            "                       (W >= 0; 0 = none)\n"
            "      --scale S        score scale (default 1/sqrt(D))\n"
            "      --weights FILE   also write the attention weights (float32)\n"
            "      --threads N      worker threads (1..4096; default: all cores)\n"
            "      --impl NAME      default | reference | fused\n"
            "  -h, --help           this help\n"
            "A query row that sees no key gets zeros in OUT and in the weights.\n"
            "Outputs are written only when the whole computation succeeded, each to a temporary file\n"
            "renamed over its target when complete; outputs naming one file or an input are refused.\n"
            "\n"
            "Efficient variants (attn_variants.h; see docs/variants.md):\n"
            "      --variant NAME   exact (default) | linear | performer | sliding | longformer | bigbird\n"
            "        linear      elu(x)+1 feature map on raw q, k (Katharopoulos et al. 2020); --causal\n"
            "        performer   FAVOR+ random features (Choromanski et al. 2021); --features M\n"
            "                    (default 256), --seed S, --causal, --scale\n"
            "        sliding     exact softmax over --window W keys ending at the query (default 256)\n"
            "        longformer  |i - j| <= --window w (default 128) plus --global G first tokens\n"
            "                    (default 1) that attend to and are attended by all (Beltagy et al. 2020)\n"
            "        bigbird     --block b (default 64; must divide Lk), 3 sliding blocks,\n"
            "                    --global-blocks g (default 1), --random r (default 3) random blocks\n"
            "                    per block row drawn with --seed S (Zaheer et al. 2020)\n"
            "      --key-padding FILE  bool [B, Lk] (true = real token; left padding works) for the\n"
            "                       variants; the sparse patterns are laid out on the real tokens\n"
            "--mask applies to exact, sliding, longformer and bigbird; --weights gives the dense\n"
            "weights (zeros outside the pattern; the implied weights for linear and performer).\n");
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

int cmd_sdpa(int argc, char **argv) {
    const char *qp = NULL, *kp = NULL, *vp = NULL, *mp = NULL, *op = NULL, *wp = NULL;
    attn_sdpa_params p = attn_sdpa_params_default();
    /* --variant and its options (vopt: the first variant-only option seen) */
    const char *variant = NULL, *kpmp = NULL, *vopt = NULL;
    int window_set = 0, impl_set = 0;
    const char *dtype_s = NULL; /* --dtype; NULL = auto */
    /* which variant-specific options were given (refused for variants they do not apply to) */
    int features_set = 0, seed_set = 0, block_set = 0, gblocks_set = 0, random_set = 0, global_set = 0;
    attn_variant_params var = attn_variant_params_default(ATTN_VARIANT_EXACT);

    cli_args a = cli_args_start(argc, argv, "sdpa");
    while (cli_more(&a)) {
        const char *val = NULL;
        int r;
        int64_t n;
        if (cli_help(&a)) {
            usage(stdout);
            return CLI_OK;
        } else if ((r = cli_opt(&a, "-q", "--query", &val))) {
            if (r < 0) return CLI_USAGE;
            qp = val;
        } else if ((r = cli_opt(&a, "-k", "--key", &val))) {
            if (r < 0) return CLI_USAGE;
            kp = val;
        } else if ((r = cli_opt(&a, "-v", "--value", &val))) {
            if (r < 0) return CLI_USAGE;
            vp = val;
        } else if ((r = cli_opt(&a, "-m", "--mask", &val))) {
            if (r < 0) return CLI_USAGE;
            mp = val;
        } else if ((r = cli_opt(&a, "-o", "--output", &val))) {
            if (r < 0) return CLI_USAGE;
            op = val;
        } else if ((r = cli_opt(&a, NULL, "--weights", &val))) {
            if (r < 0) return CLI_USAGE;
            wp = val;
        } else if (cli_flag(&a, NULL, "--causal")) {
            p.is_causal = 1;
        } else if ((r = cli_opt(&a, NULL, "--window", &val))) {
            if (r < 0 || cli_parse_i64("sdpa", "--window", val, 0, INT64_MAX, &n)) return CLI_USAGE;
            p.window = n;
            window_set = 1;
        } else if ((r = cli_opt(&a, NULL, "--scale", &val))) {
            if (r < 0 || cli_parse_f32("sdpa", "--scale", val, &p.scale)) return CLI_USAGE;
            p.has_scale = 1;
        } else if ((r = cli_opt(&a, NULL, "--threads", &val))) {
            if (r < 0 || cli_parse_i64("sdpa", "--threads", val, 1, 4096, &n)) return CLI_USAGE;
            p.n_threads = (int)n;
        } else if ((r = cli_opt(&a, NULL, "--impl", &val))) {
            if (r < 0) return CLI_USAGE;
            if (strcmp(val, "default") == 0) p.impl = ATTN_IMPL_DEFAULT;
            else if (strcmp(val, "reference") == 0) p.impl = ATTN_IMPL_REFERENCE;
            else if (strcmp(val, "fused") == 0) p.impl = ATTN_IMPL_FUSED;
            else return cli_usage_error("sdpa", "--impl must be default, reference or fused, got '%s'", val);
            impl_set = 1;
        } else if ((r = cli_opt(&a, NULL, "--dtype", &val))) {
            if (r < 0) return CLI_USAGE;
            if (strcmp(val, "auto") && strcmp(val, "fp32") && strcmp(val, "bf16") && strcmp(val, "fp16"))
                return cli_usage_error("sdpa", "--dtype must be auto, fp32, bf16 or fp16, got '%s'", val);
            dtype_s = strcmp(val, "auto") ? val : NULL;
        } else if ((r = cli_opt(&a, NULL, "--variant", &val))) {
            if (r < 0) return CLI_USAGE;
            variant = val;
        } else if ((r = cli_opt(&a, NULL, "--key-padding", &val))) {
            if (r < 0) return CLI_USAGE;
            kpmp = val;
            vopt = "--key-padding";
        } else if ((r = cli_opt(&a, NULL, "--global", &val))) {
            if (r < 0 || cli_parse_i64("sdpa", "--global", val, INT64_MIN, INT64_MAX, &var.n_global)) return CLI_USAGE;
            vopt = "--global";
            global_set = 1;
        } else if ((r = cli_opt(&a, NULL, "--block", &val))) {
            if (r < 0 || cli_parse_i64("sdpa", "--block", val, INT64_MIN, INT64_MAX, &var.block)) return CLI_USAGE;
            vopt = "--block";
            block_set = 1;
        } else if ((r = cli_opt(&a, NULL, "--global-blocks", &val))) {
            if (r < 0 || cli_parse_i64("sdpa", "--global-blocks", val, INT64_MIN, INT64_MAX, &var.global_blocks))
                return CLI_USAGE;
            vopt = "--global-blocks";
            gblocks_set = 1;
        } else if ((r = cli_opt(&a, NULL, "--random", &val))) {
            if (r < 0 || cli_parse_i64("sdpa", "--random", val, INT64_MIN, INT64_MAX, &var.random_blocks)) return CLI_USAGE;
            vopt = "--random";
            random_set = 1;
        } else if ((r = cli_opt(&a, NULL, "--features", &val))) {
            if (r < 0 || cli_parse_i64("sdpa", "--features", val, INT64_MIN, INT64_MAX, &var.features)) return CLI_USAGE;
            vopt = "--features";
            features_set = 1;
        } else if ((r = cli_opt(&a, NULL, "--seed", &val))) {
            if (r < 0 || cli_parse_i64("sdpa", "--seed", val, 0, INT64_MAX, &n)) return CLI_USAGE;
            var.seed = (uint64_t)n;
            vopt = "--seed";
            seed_set = 1;
        } else {
            return cli_unknown(&a);
        }
    }
    if (!qp || !kp || !vp || !op)
        return cli_usage_error("sdpa", "missing %s", !qp ? "-q Q.npy" : !kp ? "-k K.npy" : !vp ? "-v V.npy" : "-o OUT.npy");
    if (variant) {
        attn_variant_kind kind;
        if (attn_variant_from_name(variant, &kind) < 0) return cli_usage_error("sdpa", "%s", attn_last_error());
        attn_variant_params d = attn_variant_params_default(kind);
        var.kind = kind;
        if (kind == ATTN_VARIANT_EXACT) {
            variant = NULL; /* the plain attn_sdpa path below */
        } else {
            if (impl_set) return cli_usage_error("sdpa", "--impl applies to exact attention only, not --variant %s", variant);
            if (dtype_s && strcmp(dtype_s, "fp32"))
                return cli_usage_error("sdpa", "--dtype %s applies to exact attention only; --variant %s computes in float32",
                                       dtype_s, variant);
            if (window_set && kind != ATTN_VARIANT_SLIDING && kind != ATTN_VARIANT_LONGFORMER)
                return cli_usage_error("sdpa", "--window applies to exact, sliding and longformer attention, not %s", variant);
            /* every variant option is refused where it does not apply (see the help text) */
            const int lin = kind == ATTN_VARIANT_LINEAR, perf = kind == ATTN_VARIANT_PERFORMER;
            const int bb = kind == ATTN_VARIANT_BIGBIRD, lf = kind == ATTN_VARIANT_LONGFORMER;
            if (features_set && !perf)
                return cli_usage_error("sdpa", "--features applies to --variant performer only, not %s", variant);
            if (seed_set && !perf && !bb)
                return cli_usage_error("sdpa", "--seed applies to --variant performer and bigbird only, not %s", variant);
            if ((block_set || gblocks_set || random_set) && !bb)
                return cli_usage_error("sdpa", "%s applies to --variant bigbird only, not %s",
                                       block_set ? "--block" : gblocks_set ? "--global-blocks" : "--random", variant);
            if (global_set && !lf)
                return cli_usage_error("sdpa", "--global applies to --variant longformer only, not %s", variant);
            if (mp && (lin || perf))
                return cli_usage_error("sdpa", "-m/--mask does not apply to --variant %s; use --causal or --key-padding FILE",
                                       variant);
            if (p.has_scale && lin)
                return cli_usage_error("sdpa", "--scale does not apply to --variant linear (elu + 1 is applied to the raw q and k)");
            var.window = window_set ? p.window : d.window;
            p.window = 0;
            var.is_causal = p.is_causal;
            var.has_scale = p.has_scale;
            var.scale = p.scale;
            var.n_threads = p.n_threads;
            if (attn_variant_validate(&var) < 0) return cli_usage_error("sdpa", "%s", attn_last_error());
        }
    }
    if (!variant && vopt)
        return cli_usage_error("sdpa", "%s needs --variant (linear, performer, sliding, longformer or bigbird)", vopt);
    /* outputs: refused up front when they clash; written only after the computation */
    cli_outputs outs;
    cli_outputs_init(&outs, "sdpa");
    int orc;
    if ((orc = cli_output_add(&outs, "-o", op, 1)) || (orc = cli_output_add(&outs, "--weights", wp, 1)) ||
        (orc = cli_output_input(&outs, "-q", qp)) || (orc = cli_output_input(&outs, "-k", kp)) ||
        (orc = cli_output_input(&outs, "-v", vp)) || (orc = cli_output_input(&outs, "-m", mp)) ||
        (orc = cli_output_input(&outs, "--key-padding", kpmp)))
        return orc;

    int rc = CLI_FAIL;
    attn_tensor q = {0}, k = {0}, v = {0}, m = {0}, kpm = {0};
    float *wbuf = NULL;
    void *outbuf = NULL, *cbuf[3] = {NULL, NULL, NULL};
    char s1[96], s2[96];

    if (cli_load_npy(&q, qp) || check_input(&q, "q", qp, 0)) goto done;
    if (cli_load_npy(&k, kp) || check_input(&k, "k", kp, q.ndim)) goto done;
    if (cli_load_npy(&v, vp) || check_input(&v, "v", vp, q.ndim)) goto done;
    /* the compute dtype: --dtype, else the files' (one dtype, as torch requires); variants: float32 */
    attn_dtype cd = q.dtype;
    if (dtype_s) {
        cd = strcmp(dtype_s, "fp32") == 0 ? ATTN_F32 : strcmp(dtype_s, "bf16") == 0 ? ATTN_BF16 : ATTN_F16;
    } else if (variant) {
        cd = ATTN_F32;
    } else if (k.dtype != q.dtype || v.dtype != q.dtype) {
        cli_error("q, k and v have dtypes %s, %s, %s; give them one dtype or choose one with --dtype",
                  attn_dtype_name(q.dtype), attn_dtype_name(k.dtype), attn_dtype_name(v.dtype));
        goto done;
    }
    attn_tensor qc, kc, vc; /* q, k, v in the compute dtype */
    if (to_dtype(&qc, &q, &cbuf[0], cd, "q", qp) || to_dtype(&kc, &k, &cbuf[1], cd, "k", kp) ||
        to_dtype(&vc, &v, &cbuf[2], cd, "v", vp))
        goto done;
    const attn_dtype od = cd == ATTN_F16 ? ATTN_F16 : ATTN_F32; /* .npy has no bfloat16 */
    if (mp) {
        if (load_mask(&m, mp, "a mask must be bool or float32")) goto done;
        if (m.dtype != ATTN_BOOL && m.dtype != ATTN_F32) {
            cli_error("%s: mask has dtype %s; expected bool or float32", mp, attn_dtype_name(m.dtype));
            goto done;
        }
        if (m.ndim < 1 || m.ndim > 4) {
            cli_error("%s: mask has %d dims; expected 1 to 4 (broadcast to [B, H, Lq, Lk])", mp, m.ndim);
            goto done;
        }
    }

    if (kpmp) {
        if (load_mask(&kpm, kpmp, "--key-padding must be bool")) goto done;
        if (kpm.dtype != ATTN_BOOL || kpm.ndim < 1 || kpm.ndim > 2) {
            cli_error("%s: key-padding mask must be bool [B, Lk] (or [Lk] when B = 1), got %s with %d dims", kpmp,
                      attn_dtype_name(kpm.dtype), kpm.ndim);
            goto done;
        }
        if (kpm.ndim == 1) { /* [Lk] -> [1, Lk] */
            int64_t ks[2] = {1, kpm.shape[0]};
            attn_tensor_make(&kpm, kpm.data, ATTN_BOOL, 2, ks);
        }
    }

    attn_tensor q4, k4, v4;
    as_4d(&q4, &qc);
    as_4d(&k4, &kc);
    as_4d(&v4, &vc);
    int64_t B = q4.shape[0], H = q4.shape[1], Lq = q4.shape[2], D = q4.shape[3];
    int64_t Hkv = k4.shape[1], Lk = k4.shape[2], Dv = v4.shape[3];
    /* Clear messages for the common mistakes; attn_sdpa checks everything again. */
    if (k4.shape[3] != D) {
        cli_error("head dims differ: q %s has D=%lld but k %s has D=%lld", cli_shape_str(&q, s1, sizeof s1),
                  (long long)D, cli_shape_str(&k, s2, sizeof s2), (long long)k4.shape[3]);
        goto done;
    }
    if (k4.shape[0] != B || v4.shape[0] != B) {
        cli_error("batch sizes differ: q has B=%lld, k B=%lld, v B=%lld", (long long)B,
                  (long long)k4.shape[0], (long long)v4.shape[0]);
        goto done;
    }
    if (v4.shape[1] != Hkv || v4.shape[2] != Lk) {
        cli_error("k %s and v %s disagree on heads or length", cli_shape_str(&k, s1, sizeof s1),
                  cli_shape_str(&v, s2, sizeof s2));
        goto done;
    }
    if (Hkv == 0 || H % Hkv != 0) {
        cli_error("q has H=%lld heads, not a multiple of the Hkv=%lld heads of k and v", (long long)H,
                  (long long)Hkv);
        goto done;
    }

    int64_t oshape[4] = {B, H, Lq, Dv}, wshape[4] = {B, H, Lq, Lk};
    int64_t on = count4(oshape), wn = wp ? count4(wshape) : 0;
    if (on < 0 || wn < 0) {
        cli_error("output too large");
        goto done;
    }
    outbuf = malloc((size_t)on * attn_dtype_size(od) + 1);
    if (wp) wbuf = malloc((size_t)wn * sizeof(float) + 1);
    if (!outbuf || (wp && !wbuf)) {
        cli_error("out of memory");
        goto done;
    }
    attn_tensor out4, w4;
    attn_tensor_make(&out4, outbuf, od, 4, oshape);
    attn_tensor_make(&w4, wbuf, ATTN_F32, 4, wshape);
    p.mask = mp ? &m : NULL;
    var.mask = p.mask;
    var.key_padding_mask = kpmp ? &kpm : NULL;
    if (variant ? attn_variant_attention(&out4, wp ? &w4 : NULL, &q4, &k4, &v4, &var) < 0
                : attn_sdpa(&out4, wp ? &w4 : NULL, &q4, &k4, &v4, &p) < 0) {
        cli_lib_error(NULL);
        goto done;
    }

    /* save with q's rank: [..., Lq, Dv] and [..., Lq, Lk] */
    int nd = q.ndim;
    attn_tensor o_save, w_save;
    attn_tensor_make(&o_save, outbuf, od, nd, oshape + 4 - nd);
    const char *path = cli_output_path(&outs, 0);
    if (!path) goto done;
    if (attn_npy_save(path, &o_save) < 0) {
        cli_lib_error(NULL);
        goto done;
    }
    if (wp) {
        attn_tensor_make(&w_save, wbuf, ATTN_F32, nd, wshape + 4 - nd);
        if (!(path = cli_output_path(&outs, 1))) goto done;
        if (attn_npy_save(path, &w_save) < 0) {
            cli_lib_error(NULL);
            goto done;
        }
    }
    rc = CLI_OK;
done:
    free(outbuf);
    free(wbuf);
    for (int i = 0; i < 3; i++) free(cbuf[i]);
    attn_npy_free(&q);
    attn_npy_free(&k);
    attn_npy_free(&v);
    attn_npy_free(&m);
    attn_npy_free(&kpm);
    return cli_outputs_finish(&outs, rc);
}
