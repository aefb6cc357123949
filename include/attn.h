/* attn.h — umbrella header for the attn library. */
#ifndef ATTN_H
#define ATTN_H
#include "attn_core.h"
#include "attn_attention.h"
#include "attn_npy.h"
#endif
