/* bfloat16 / float16 conversions (src/core/convert.c) against independent references:
 *   - half -> float32 for all 65536 bit patterns of each format, against the value computed in
 *     double from the fields (sign, exponent, mantissa) with ldexp;
 *   - float32 -> half for 2^22 random float32 bit patterns plus edge cases, checked by the
 *     defining property of round-to-nearest-even: the result is a half value h with
 *     |h - x| <= |h' - x| for both neighbours h' of h, and on a tie h has an even mantissa;
 *     overflow to inf exactly from the IEEE threshold (max + half an ulp, ties to even = inf);
 *     NaN stays NaN with the sign kept;
 *   - the AVX2 + F16C bulk path bit-identical to the portable one on all of those;
 *   - attn_tensor_convert on strided views. */
#include "attn.h"
#include "core/internal.h"
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed = 0x5EEDF00DBEEF1ULL;
static uint64_t rnd64(void) {
    seed ^= seed >> 12;
    seed ^= seed << 25;
    seed ^= seed >> 27;
    return seed * 2685821657736338717ULL;
}

/* value of a half pattern from its fields, in double (independent of convert.c) */
static double half_value(uint16_t h, int bf16) {
    const int ebits = bf16 ? 8 : 5, mbits = bf16 ? 7 : 10, bias = bf16 ? 127 : 15;
    const int s = h >> 15, e = (h >> mbits) & ((1 << ebits) - 1), m = h & ((1 << mbits) - 1);
    double v;
    if (e == (1 << ebits) - 1) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, 1 - bias - mbits);
    else v = ldexp((double)(m + (1 << mbits)), e - bias - mbits);
    return s ? -v : v;
}

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int n_bad_rne;
/* check that h = round_to_nearest_even(x) in the half format */
static void check_rne(float x, uint16_t h, int bf16) {
    const char *fmt = bf16 ? "bf16" : "f16";
    const int mbits = bf16 ? 7 : 10;
    const uint16_t exp_all = bf16 ? 0x7f80 : 0x7c00;
    if (isnan(x)) {
        if (!(isnan(half_value(h, bf16)) && (h >> 15) == (signbit(x) ? 1 : 0) && (h & (1u << (mbits - 1)))))
            if (n_bad_rne++ < 5) CHECK(0, "%s: NaN 0x%08x -> 0x%04x is not a quiet NaN of the same sign", fmt, 0, h);
        return;
    }
    const double xv = (double)x, hv = half_value(h, bf16);
    const double maxv = half_value((uint16_t)(exp_all - 1), bf16);
    const double ulp_max = ldexp(1.0, (bf16 ? 127 : 15) - mbits);
    int ok;
    if (fabs(xv) >= maxv + ulp_max / 2) { /* beyond max + half ulp: inf (the tie goes to inf, the even one) */
        ok = isinf(hv) && (hv > 0) == (xv > 0);
    } else if (isnan(hv) || isinf(hv)) {
        ok = 0;
    } else {
        const uint16_t mag = h & 0x7fff;
        double up = half_value((uint16_t)((h & 0x8000) | (mag + 1)), bf16);
        double dn = mag ? half_value((uint16_t)((h & 0x8000) | (mag - 1)), bf16) : -hv;
        const double d = fabs(hv - xv);
        ok = (signbit(hv) == signbit(xv) || hv == 0.0) && d <= fabs(up - xv) && d <= fabs(dn - xv);
        if (ok && (d == fabs(up - xv) || d == fabs(dn - xv)) && d != 0.0) ok = (h & 1) == 0; /* tie -> even */
    }
    if (!ok && n_bad_rne++ < 5)
        CHECK(0, "%s: %.9g -> 0x%04x (%.9g) is not the round-to-nearest-even result", fmt, (double)x, h, hv);
}

static void test_half_to_f32(void) {
    float *a = malloc(sizeof(float) * 65536), *b = malloc(sizeof(float) * 65536);
    uint16_t *h = malloc(sizeof(uint16_t) * 65536);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int bf = 0; bf < 2; bf++) {
        const attn_dtype dt = bf ? ATTN_BF16 : ATTN_F16;
        int bad = 0;
        for (int i = 0; i < 65536; i++) {
            float f = bf ? attn_bf16_to_f32((uint16_t)i) : attn_f16_to_f32((uint16_t)i);
            double want = half_value((uint16_t)i, bf);
            const int neg = signbit(f) != 0;
            if (isnan(want) ? !(isnan(f) && neg == (i >> 15)) : (double)f != want || neg != (i >> 15)) bad++;
        }
        CHECK(bad == 0, "%s -> f32: %d of 65536 patterns wrong", bf ? "bf16" : "f16", bad);
        CHECK_OK(attn__convert_path(a, ATTN_F32, h, dt, 65536, 0));
        CHECK_OK(attn__convert_path(b, ATTN_F32, h, dt, 65536, 1));
        CHECK(memcmp(a, b, sizeof(float) * 65536) == 0, "%s -> f32: SIMD and portable paths differ", bf ? "bf16" : "f16");
        int same = 1;
        for (int i = 0; i < 65536; i++) {
            float f = bf ? attn_bf16_to_f32((uint16_t)i) : attn_f16_to_f32((uint16_t)i);
            same &= memcmp(&f, a + i, 4) == 0;
        }
        CHECK(same, "%s -> f32: bulk and scalar differ", bf ? "bf16" : "f16");
    }
    free(a);
    free(b);
    free(h);
}

static void test_f32_to_half(void) {
    const size_t n = (size_t)1 << 22, ne = 40;
    float *x = malloc(sizeof(float) * (n + ne));
    uint16_t *p = malloc(sizeof(uint16_t) * (n + ne)), *s = malloc(sizeof(uint16_t) * (n + ne));
    const float edge[40] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX,
                            FLT_MIN, 1e-45f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, -65520.0f, 6.1035156e-05f,
                            5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 8.9406967e-08f, 1.0009766f, 1.0004883f,
                            1.0014648f, 3.3895314e38f, 3.3961775e38f, 3.4028235e38f, bits_f(0x7f800001u),
                            bits_f(0xffc00000u), bits_f(0x7fbfffffu), bits_f(0x3f808000u), bits_f(0x3f818000u),
                            bits_f(0x3f80ffffu), bits_f(0x477fefffu), bits_f(0x477ff000u), bits_f(0x387fc000u),
                            bits_f(0x33000000u), bits_f(0x33000001u), bits_f(0x7f7fffffu)};
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)rnd64();
        if (i % 4 == 1) u = (u & 0x87ffffffu) | 0x30000000u; /* |x| in [2^-31, 2^-14]: float16 subnormals */
        if (i % 4 == 2) u = (u & 0x8fffffffu) | 0x40000000u; /* around 2..2^32: float16 overflow edge */
        if (i % 8 == 3) u &= 0xffff8000u | (u & 1u ? 0x7fffu : 0u); /* many exact ties for bf16 */
        x[i] = bits_f(u);
    }
    memcpy(x + n, edge, sizeof edge);
    for (int bf = 0; bf < 2; bf++) {
        const attn_dtype dt = bf ? ATTN_BF16 : ATTN_F16;
        n_bad_rne = 0;
        CHECK_OK(attn__convert_path(p, dt, x, ATTN_F32, n + ne, 0));
        CHECK_OK(attn__convert_path(s, dt, x, ATTN_F32, n + ne, 1));
        for (size_t i = 0; i < n + ne; i++) check_rne(x[i], p[i], bf);
        CHECK(n_bad_rne == 0, "f32 -> %s: %d wrongly rounded values", bf ? "bf16" : "f16", n_bad_rne);
        size_t diff = 0;
        for (size_t i = 0; i < n + ne; i++) diff += p[i] != s[i];
        CHECK(diff == 0, "f32 -> %s: SIMD and portable paths differ on %zu of %zu values", bf ? "bf16" : "f16", diff,
              n + ne);
        size_t sc = 0;
        for (size_t i = 0; i < n + ne; i++) sc += (bf ? attn_f32_to_bf16(x[i]) : attn_f32_to_f16(x[i])) != p[i];
        CHECK(sc == 0, "f32 -> %s: scalar and bulk differ on %zu values", bf ? "bf16" : "f16", sc);
    }
    /* a few exact values */
    CHECK(attn_f32_to_f16(65504.0f) == 0x7bff && attn_f32_to_f16(65520.0f) == 0x7c00 &&
              attn_f32_to_f16(bits_f(0x477fefffu)) == 0x7bff,
          "f16 overflow threshold");
    CHECK(attn_f32_to_f16(5.9604645e-08f) == 0x0001 && attn_f32_to_f16(2.9802322e-08f) == 0x0000 &&
              attn_f32_to_f16(bits_f(0x33000001u)) == 0x0001 && attn_f32_to_f16(-0.0f) == 0x8000,
          "f16 smallest subnormal and ties to 0");
    CHECK(attn_f32_to_bf16(1.00390625f) == 0x3f80 && attn_f32_to_bf16(1.01171875f) == 0x3f82 &&
              attn_f32_to_bf16(bits_f(0x7f7fffffu)) == 0x7f80,
          "bf16 ties to even and overflow");
    CHECK(attn_f32_to_bf16(bits_f(0x7f800001u)) == 0x7fc0 && attn_f32_to_bf16(bits_f(0xff800001u)) == 0xffc0,
          "bf16 signalling NaN -> quiet NaN with sign");
    free(x);
    free(p);
    free(s);
}

static void test_tensor_convert(void) {
    /* [3, 5] float32 -> strided bf16 view (transposed memory) -> float16 -> float32 */
    float src[15], back[15];
    uint16_t mid[15], h16[15];
    for (int i = 0; i < 15; i++) src[i] = (float)(i - 7) * 0.3f + 1e-3f;
    attn_tensor a, bt, c, d;
    int64_t sh[2] = {3, 5}, sht[2] = {5, 3};
    CHECK_OK(attn_tensor_make(&a, src, ATTN_F32, 2, sh));
    CHECK_OK(attn_tensor_make(&bt, mid, ATTN_BF16, 2, sht));
    attn_tensor b;
    CHECK_OK(attn_tensor_transpose(&b, &bt, 0, 1)); /* [3, 5] view with strides {1, 3} */
    CHECK_OK(attn_tensor_convert(&b, &a));
    int ok = 1;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 5; j++) ok &= mid[j * 3 + i] == attn_f32_to_bf16(src[i * 5 + j]);
    CHECK(ok, "attn_tensor_convert into a transposed bf16 view");
    CHECK_OK(attn_tensor_make(&c, h16, ATTN_F16, 2, sh));
    CHECK_OK(attn_tensor_convert(&c, &b));
    CHECK_OK(attn_tensor_make(&d, back, ATTN_F32, 2, sh));
    CHECK_OK(attn_tensor_convert(&d, &c));
    double worst = 0;
    for (int i = 0; i < 15; i++) worst = fmax(worst, fabs(back[i] - src[i]) / fabs(src[i]));
    /* unit roundoff 2^-8 (bfloat16, 8 significant bits), and every bf16 value here is a float16 value */
    CHECK(worst <= 0x1p-8, "f32 -> bf16 -> f16 -> f32 relative error %.3g (bound 2^-8)",
          worst);
    int64_t sh3[2] = {3, 4};
    attn_tensor e;
    CHECK_OK(attn_tensor_make(&e, back, ATTN_F32, 2, sh3));
    CHECK_ERR(attn_tensor_convert(&e, &a), ATTN_E_SHAPE);
    attn_tensor g = a;
    g.dtype = ATTN_I32;
    CHECK_ERR(attn_tensor_convert(&d, &g), ATTN_E_DTYPE);
    CHECK_ERR(attn_convert(back, ATTN_F32, mid, ATTN_I64, 3), ATTN_E_DTYPE);
    CHECK_ERR(attn_convert(NULL, ATTN_F32, mid, ATTN_BF16, 3), ATTN_E_INVALID);
}

int main(void) {
    attn_test_name = "convert";
    printf("convert: SIMD (AVX2 + F16C) path %s\n", attn__convert_simd_supported() ? "available" : "not available");
    test_half_to_f32();
    test_f32_to_half();
    test_tensor_convert();
    return attn_test_finish();
}
