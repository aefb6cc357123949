/* Private to the Whisper family: the model (whisper.c: loading, encoder, decoder step on the layer
 * floor) and the transcription rules (whisper_transcribe.c: prompt, timestamps, temperature
 * fallback, no-speech, windows). Not installed. */
#ifndef ATTN_WHISPER_INTERNAL_H
#define ATTN_WHISPER_INTERNAL_H

#include "attn_whisper.h"
#include "attn_bpe.h"
#include "models/ct2_layers.h"

struct attn_whisper {
    attn_whisper_config cfg;
    attn__ct2_lin conv1, conv2; /* as linear layers over im2col rows: [E, 80*3], [E, E*3] */
    float *enc_pos;             /* [1500, E] */
    attn__ct2_layer *enc, *dec;
    attn_block_config enc_cfg, dec_cfg;
    attn__ct2_ln enc_ln, dec_ln;
    float *emb;                 /* [V, E] */
    float *dec_pos;             /* [448, E] */
    attn__ct2_lin proj;         /* tied to emb (proj_tied: proj.w views emb) */
    int proj_tied;
    char **vocab; /* vocabulary.txt lines while loading (freed once tok is built) */
    int64_t n_vocab;
    attn_bpe *tok; /* GPT-2 byte-level BPE (shared tokenizer), for the text of token ids */
    int32_t *suppress, *suppress_begin;
    int64_t n_suppress, n_suppress_begin;
    /* the decoding state of the last window, kept for the next one (attn__wprepare /
     * attn__wstate_free): its buffers (cross keys / values, KV cache, ~50 MB for tiny at beam 5)
     * are not mapped and zeroed by the kernel again for every window (~5 % of a short file).
     * spare_busy: 1 while a thread takes or parks it (a concurrent transcription builds its own) */
    attn__ct2_dec spare;
    int has_spare;
    _Atomic int spare_busy;
};

/* decoding state: the shared CTranslate2 decoder state (one cache slot per row) */
typedef struct {
    attn_whisper *m;
    attn__ct2_dec d;
    int64_t pos0; /* position of decode step 0 */
    int timestamps;
    float no_speech; /* probability of the no-speech token after <|startoftranscript|> */
    int complete;    /* d is fully built (attn__wstate_free may park it in m->spare) */
} attn__wstate;

/* release a decoding state (a complete one is kept in the model for the next window) */
void attn__wstate_free(attn__wstate *s);
/* encoder and cross-attention keys/values of one window (mel [80, 3000]), for decodings of up to
 * cap rows. Errors: ATTN_E_RANGE (a non-finite feature), ATTN_E_NOMEM, those of the layers. */
int attn__wprepare(attn__wstate *s, attn_whisper *m, int64_t cap, const float *mel);
/* one decoder position for N rows at absolute position pos; logits [N, V] or NULL (cache only) */
int attn__wforward(attn__wstate *s, float *logits, const int32_t *ids, int64_t N, int64_t pos);
/* the no-speech probability: softmax of the raw logits [V] at the no-speech token */
float attn__wno_speech(const attn_whisper *m, const float *logits);
/* attn_decoder_iface callbacks over an attn__wstate (beam search / greedy) */
int attn__wstep(void *ctx, float *logits, float *attn, const int32_t *ids, int64_t N, int64_t step);
int attn__wreorder(void *ctx, const int64_t *src, int64_t n_new, const int64_t *row_item);

#endif
