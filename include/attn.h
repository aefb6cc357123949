/* attn.h — umbrella header for the attn library: every public header (README.md, "Library"). */
#ifndef ATTN_H
#define ATTN_H
/* core */
#include "attn_core.h"
#include "attn_io.h"
/* ops and attention */
#include "attn_ops.h"
#include "attn_quant.h"
#include "attn_weight.h"
#include "attn_attention.h"
#include "attn_variants.h"
#include "attn_rollout.h"
#include "attn_layers.h"
/* file formats */
#include "attn_npy.h"
#include "attn_safetensors.h"
#include "attn_gguf.h"
#include "attn_ct2.h"
#include "attn_llama2c.h"
#include "attn_image.h"
#include "attn_audio.h"
/* tokenizers and decoding */
#include "attn_utf8.h"
#include "attn_wordpiece.h"
#include "attn_bpe.h"
#include "attn_sampling.h"
#include "attn_beam.h"
/* models */
#include "attn_bert.h"
#include "attn_vit.h"
#include "attn_llama.h"
#include "attn_ct2_transformer.h"
#include "attn_whisper.h"
/* pictures */
#include "attn_viz.h"
#include "attn_viz_html.h"
#include "attn_train.h"
#endif
