/* performer_error: relative error of Performer (FAVOR+) to exact softmax attention as the
 * number of random features M grows, and the fitted log-log slope.
 *
 *   performer_error OUT.csv [L [D]]      (defaults L = 1024, D = 64, one head)
 *
 * Inputs: q, k ~ N(0, sigma²) per coordinate for sigma in {0.25, 0.5, 0.75} (|q|/D^(1/4)
 * grows with sigma; the estimator's variance grows like exp(|q'+k'|²)), v ~ U(-1, 1).
 * Error: ||out_performer - out_exact||_F / ||out_exact||_F, mean over seeds 1..8 of the
 * random projection. CSV: sigma,M,mean_rel_err,min_rel_err,max_rel_err, then one line per
 * sigma "sigma,slope,<fitted slope of log err vs log M>". */
#include "attn.h"
#include "attn_variants.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t st = 0x243F6A8885A308D3ULL;
static double u01(void) {
    st ^= st << 13;
    st ^= st >> 7;
    st ^= st << 17;
    return (double)(st >> 11) * 0x1.0p-53;
}
static double gauss(void) {
    double a = 1.0 - u01(), b = u01();
    return sqrt(-2.0 * log(a)) * cos(6.283185307179586 * b);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: performer_error OUT.csv [L [D]]\n");
        return 2;
    }
    int64_t L = argc > 2 ? atoll(argv[2]) : 1024, D = argc > 3 ? atoll(argv[3]) : 64, n = L * D;
    const int64_t Ms[] = {16, 64, 256, 1024, 4096};
    const int nM = 5, seeds = 8;
    const double sigmas[] = {0.25, 0.5, 0.75};
    FILE *out = fopen(argv[1], "w");
    if (!out) return 1;
    fprintf(out, "sigma,M,mean_rel_err,min_rel_err,max_rel_err\n");
    float *q = malloc(4 * n), *k = malloc(4 * n), *v = malloc(4 * n), *e = malloc(4 * n), *a = malloc(4 * n);
    double slopes[3];
    for (int si = 0; si < 3; si++) {
        for (int64_t i = 0; i < n; i++) {
            q[i] = (float)(sigmas[si] * gauss());
            k[i] = (float)(sigmas[si] * gauss());
            v[i] = (float)(2 * u01() - 1);
        }
        attn_tensor tq = attn_tensor_f32_4d(q, 1, 1, L, D), tk = attn_tensor_f32_4d(k, 1, 1, L, D);
        attn_tensor tv = attn_tensor_f32_4d(v, 1, 1, L, D), te = attn_tensor_f32_4d(e, 1, 1, L, D);
        attn_tensor ta = attn_tensor_f32_4d(a, 1, 1, L, D);
        attn_sdpa_params rp = attn_sdpa_params_default();
        rp.impl = ATTN_IMPL_REFERENCE;
        if (attn_sdpa(&te, NULL, &tq, &tk, &tv, &rp) < 0) return 1;
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (int mi = 0; mi < nM; mi++) {
            double mean = 0, lo = 1e300, hi = 0;
            for (int s = 1; s <= seeds; s++) {
                attn_variant_params p = attn_variant_params_default(ATTN_VARIANT_PERFORMER);
                p.features = Ms[mi];
                p.seed = (uint64_t)s;
                if (attn_variant_attention(&ta, NULL, &tq, &tk, &tv, &p) < 0) {
                    fprintf(stderr, "performer_error: %s\n", attn_last_error());
                    return 1;
                }
                double nu = 0, de = 0;
                for (int64_t i = 0; i < n; i++) nu += ((double)a[i] - e[i]) * ((double)a[i] - e[i]), de += (double)e[i] * e[i];
                double r = sqrt(nu / de);
                mean += r / seeds;
                if (r < lo) lo = r;
                if (r > hi) hi = r;
            }
            fprintf(out, "%.2f,%lld,%.6f,%.6f,%.6f\n", sigmas[si], (long long)Ms[mi], mean, lo, hi);
            double x = log((double)Ms[mi]), y = log(mean);
            sx += x, sy += y, sxx += x * x, sxy += x * y;
        }
        slopes[si] = (nM * sxy - sx * sy) / (nM * sxx - sx * sx);
        fprintf(stderr, "sigma %.2f: slope %.3f\n", sigmas[si], slopes[si]);
    }
    for (int si = 0; si < 3; si++) fprintf(out, "# sigma,slope,%.2f,%.4f\n", sigmas[si], slopes[si]);
    fclose(out);
    return 0;
}
