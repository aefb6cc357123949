/* Private helpers of multi-head attention shared with the layers (not installed). */
#ifndef ATTN_MHA_INTERNAL_H
#define ATTN_MHA_INTERNAL_H
#include "attn_core.h"

/* dst [B, Lq, Lk] (any strides) = the mean over heads of w [B, H, Lq, Lk] (contiguous), summed in
 * float64 (torch.nn.MultiheadAttention's average_attn_weights=True). */
void attn__average_heads(attn_tensor *dst, const float *w, int64_t B, int64_t H, int64_t Lq, int64_t Lk);

#endif
