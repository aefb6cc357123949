/* CTranslate2's single-precision sin / cos (Cephes), see ct2compat.h. */
#include "ct2compat/ct2compat.h"

#include <math.h>
#include <string.h>

/* sin / cos rounded as CTranslate2's CPU kernels compute them (a Cephes-style single-precision
 * approximation: argument reduction by pi/4 in three parts, degree-2 polynomials in z = x^2,
 * multiply-adds fused) so that position encodings, which int8 models re-quantise, carry the
 * same float bits. Constants: Cephes sinf / cosf. Accurate to ~1 ulp for |x| < 8192. */
float attn__ct2_sincos(float x, int want_cos) {
    const float four_over_pi = 1.27323954473516f, dp1 = -0.78515625f, dp2 = -2.4187564849853515625e-4f,
                dp3 = -3.77489497744594108e-8f;
    const float c0 = 2.443315711809948e-5f, c1 = -1.388731625493765e-3f, c2 = 4.166664568298827e-2f;
    const float s0 = -1.9515295891e-4f, s1 = 8.3321608736e-3f, s2 = -1.6666654611e-1f;
    float ax = fabsf(x);
    int32_t j = ((int32_t)(ax * four_over_pi) + 1) & ~1;
    float y = (float)j;
    int negate;
    int use_cos_poly;
    if (want_cos) {
        j -= 2;
        negate = (~j & 4) != 0;
        use_cos_poly = (j & 2) != 0;
    } else {
        negate = ((j & 4) != 0) != (x < 0);
        use_cos_poly = (j & 2) != 0;
    }
    float r = fmaf(y, dp1, ax);
    r = fmaf(y, dp2, r);
    r = fmaf(y, dp3, r);
    float z = r * r;
    float half_z = z * 0.5f;
    float pc = fmaf(z, c0, c1);
    pc = fmaf(pc, z, c2);
    pc = z * pc;
    pc = fmaf(pc, z, -half_z) + 1.0f;
    float ps = fmaf(z, s0, s1);
    ps = fmaf(z, ps, s2);
    ps = z * ps;
    ps = fmaf(r, ps, r);
    float v = use_cos_poly ? pc : ps;
    return negate ? -v : v;
}

