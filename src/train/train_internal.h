/* Private state of the ViT trainer (src/train/). */
#ifndef ATTN_TRAIN_INTERNAL_H
#define ATTN_TRAIN_INTERNAL_H

#include "attn_train.h"

typedef struct {
    char name[96];
    int ndim;
    int64_t shape[4];
    int64_t numel, off; /* floats; offset in each of p, g, m, v */
    int decay;          /* AdamW weight decay applies */
} attn__vparam;

struct attn_vit_trainer {
    attn_vit_train_config cfg;
    int64_t max_batch, numel, step;
    int np;
    attn__vparam *par;
    float *mem;              /* 4·numel floats: p, g, m, v */
    float *p, *g, *m, *v;
    float *arena;            /* attn_vit_train_arena_bytes(cfg, max_batch) */
    int64_t B;               /* batch of the last forward */
    int fwd_ok;
    attn_vit_grad_hook grad_hook; /* attn_vit_trainer_set_grad_hook */
    void *grad_hook_user;
    struct {
        float *cols, *xs, *per, *clsx, *clsn, *dclsx, *dclsn, *logits, *dlogits, *s[9], *sf[2];
    } a;
};

#endif
