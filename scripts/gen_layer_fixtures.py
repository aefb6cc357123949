#!/usr/bin/env python3
"""Reference outputs for attn's multi-head attention and encoder/decoder layers, made with
PyTorch's own modules (torch.nn.MultiheadAttention, TransformerEncoderLayer,
TransformerDecoderLayer) in float64, saved as float32/float64 .npy under
tests/fixtures/layers/. Run from the repository root:  python3 scripts/gen_layer_fixtures.py

Grad mode stays enabled so PyTorch takes its reference ("slow") path, not the fused
inference fast path.
"""
import os
import numpy as np
import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "layers")
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(1234)
E, H, F = 16, 4, 32


def save(case, name, t, dtype=np.float32):
    a = t.detach().cpu().numpy() if torch.is_tensor(t) else np.asarray(t)
    np.save(os.path.join(OUT, f"{case}.{name}.npy"), np.ascontiguousarray(a.astype(dtype)))


def save_mha(case, prefix, m):
    wq, wk, wv = m.in_proj_weight.chunk(3, 0)
    bq, bk, bv = m.in_proj_bias.chunk(3, 0)
    for n, t in [("wq", wq), ("wk", wk), ("wv", wv), ("bq", bq), ("bk", bk), ("bv", bv),
                 ("wo", m.out_proj.weight), ("bo", m.out_proj.bias)]:
        save(case, prefix + n, t)


def randomize(mod):
    # non-trivial LayerNorm affine parameters and biases
    with torch.no_grad():
        for name, p in mod.named_parameters():
            if "norm" in name:
                p.copy_(torch.randn_like(p) * 0.3 + (1.0 if name.endswith("weight") else 0.0))
            elif name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.1)
        for p in mod.parameters():  # inputs exactly representable in float32
            p.copy_(p.float().double())


def rnd(*shape):
    return torch.randn(*shape, dtype=torch.float64).float().double()


def key_padding(lengths, L):
    # PyTorch convention: True = ignore this key
    return torch.arange(L)[None, :] >= torch.tensor(lengths)[:, None]


# ---- multi-head attention, cross-attention with key padding
m = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
randomize(m)
xq = rnd(2, 5, E)
xkv = rnd(2, 7, E)
lens = [7, 4]
out, w_avg = m(xq, xkv, xkv, key_padding_mask=key_padding(lens, 7), need_weights=True, average_attn_weights=True)
_, w_head = m(xq, xkv, xkv, key_padding_mask=key_padding(lens, 7), need_weights=True, average_attn_weights=False)
save("mha", "x_q", xq); save("mha", "x_kv", xkv); save("mha", "lengths", np.array(lens), np.int64)
save_mha("mha", "", m)
save("mha", "out", out, np.float64); save("mha", "w_avg", w_avg, np.float64); save("mha", "w_head", w_head, np.float64)

# ---- encoder layers: post-LN GELU (BERT-like) and pre-LN ReLU, key padding
for case, norm_first, act in [("enc_post", False, "gelu"), ("enc_pre", True, "relu")]:
    layer = torch.nn.TransformerEncoderLayer(E, H, F, dropout=0.0, activation=act, batch_first=True,
                                             norm_first=norm_first, dtype=torch.float64)
    randomize(layer)
    x = rnd(2, 6, E)
    lens = [6, 4]
    y = layer(x, src_key_padding_mask=key_padding(lens, 6))
    save(case, "x", x); save(case, "y", y, np.float64); save(case, "lengths", np.array(lens), np.int64)
    save_mha(case, "attn.", layer.self_attn)
    for n, t in [("ff_w1", layer.linear1.weight), ("ff_b1", layer.linear1.bias), ("ff_w2", layer.linear2.weight),
                 ("ff_b2", layer.linear2.bias), ("ln1_g", layer.norm1.weight), ("ln1_b", layer.norm1.bias),
                 ("ln2_g", layer.norm2.weight), ("ln2_b", layer.norm2.bias)]:
        save(case, n, t)

# ---- decoder layers: post-LN ReLU and pre-LN GELU, causal self-attention, memory padding
for case, norm_first, act in [("dec_post", False, "relu"), ("dec_pre", True, "gelu")]:
    layer = torch.nn.TransformerDecoderLayer(E, H, F, dropout=0.0, activation=act, batch_first=True,
                                             norm_first=norm_first, dtype=torch.float64)
    randomize(layer)
    tgt = rnd(2, 5, E)
    mem = rnd(2, 7, E)
    lens = [7, 5]
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    y = layer(tgt, mem, tgt_mask=causal, memory_key_padding_mask=key_padding(lens, 7))
    save(case, "x", tgt); save(case, "enc", mem); save(case, "y", y, np.float64)
    save(case, "lengths", np.array(lens), np.int64)
    save_mha(case, "self.", layer.self_attn)
    save_mha(case, "cross.", layer.multihead_attn)
    for n, t in [("ff_w1", layer.linear1.weight), ("ff_b1", layer.linear1.bias), ("ff_w2", layer.linear2.weight),
                 ("ff_b2", layer.linear2.bias), ("ln1_g", layer.norm1.weight), ("ln1_b", layer.norm1.bias),
                 ("ln2_g", layer.norm2.weight), ("ln2_b", layer.norm2.bias), ("ln3_g", layer.norm3.weight),
                 ("ln3_b", layer.norm3.bias)]:
        save(case, n, t)
print("wrote", len(os.listdir(OUT)), "files to", OUT)
