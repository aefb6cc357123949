/* attn_sdpa: dispatch to an implementation, and the kernel names (argument checks: sdpa_check.c). */
#include "attn_attention.h"
#include "attention/fused_internal.h"
#include "attention/sdpa_internal.h"
#include "attention/short_internal.h"
#include "core/internal.h"

#include <string.h>

attn_sdpa_params attn_sdpa_params_default(void) {
    attn_sdpa_params p;
    memset(&p, 0, sizeof p);
    return p;
}

int attn_sdpa(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
              const attn_tensor *v, const attn_sdpa_params *p) {
    /* ATTN_IMPL_DEFAULT and ATTN_IMPL_FUSED: the tiled online-softmax kernel (sdpa_fused.c; the
     * SIMD path follows ATTN_SIMD, else the best the CPU supports). An unknown impl value is
     * rejected by attn_sdpa_check inside either path. */
    if (p && p->impl == ATTN_IMPL_REFERENCE) return attn_sdpa_reference(out, weights, q, k, v, p);
    if (!p || p->impl == ATTN_IMPL_DEFAULT) { /* unmasked float32 with Lq, Lk <= 64: sdpa_short.c */
        const int rc = attn__sdpa_short(out, weights, q, k, v, p);
        if (rc != ATTN__SHORT_DECLINED) return rc;
    }
    return attn__sdpa_fused(out, weights, q, k, v, p);
}

const char *attn_sdpa_kernel_name(attn_impl impl, attn_dtype dtype) {
    if (!attn__is_float_dtype(dtype)) {
        attn_set_error(ATTN_E_DTYPE, "sdpa: no kernel for %s inputs", attn_dtype_name(dtype));
        return NULL;
    }
    if (impl == ATTN_IMPL_REFERENCE) return "reference";
    if (impl != ATTN_IMPL_DEFAULT && impl != ATTN_IMPL_FUSED) {
        attn_set_error(ATTN_E_INVALID, "sdpa: unknown impl %d", (int)impl);
        return NULL;
    }
    const int path = attn__fused_resolve_path(ATTN__SIMD_AUTO);
    if (path < 0) return NULL;
    static const char *names[3][3] = {
        {"fused portable", "fused portable (float16 widened to float32 per tile)", "fused portable (bfloat16 widened to float32 per tile)"},
        {"fused avx2", "fused avx2 (float16 widened to float32 per tile)", "fused avx2 (bfloat16 widened to float32 per tile)"},
        {"fused avx512", "fused avx512 (float16 widened to float32 per tile)", "fused avx512 (bfloat16 widened to float32 per tile)"},
    };
    return names[path][dtype == ATTN_F32 ? 0 : dtype == ATTN_F16 ? 1 : 2];
}
