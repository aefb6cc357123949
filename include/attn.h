/* attn.h — umbrella header for the attn library. */
#ifndef ATTN_H
#define ATTN_H
#include "attn_core.h"
#include "attn_attention.h"
#include "attn_npy.h"
#include "attn_ops.h"
#include "attn_layers.h"
#include "attn_safetensors.h"
#include "attn_tokenizer.h"
#include "attn_bert.h"
#include "attn_image.h"
#include "attn_vit.h"
#include "attn_rollout.h"
#include "attn_variants.h"
#include "attn_viz.h"
#include "attn_viz_html.h"
#endif
