#!/usr/bin/env python3
"""Reference for the ViT trainer (tests/test_train_vit.c): one training step and 20 AdamW steps
of a tiny transformers ViTForImageClassification, computed by torch.autograd in float64 from
float32 initial weights, saved as tests/fixtures/train_vit/step.safetensors. Run from the
repository root:

    /work/venv-peers/bin/python scripts/gen_train_step_fixtures.py

Model: 28 x 28 x 1 images, patch 7 (16 patches + CLS = 17 tokens), hidden 32, 2 layers, 4 heads,
MLP 64, GELU (erf), layer_norm_eps 1e-12, 10 labels; batch: the first 4 Fashion-MNIST training
images (/usr/share/datasets/fashion-mnist), preprocessed as attn does ((p/255 - 0.286) / 0.353 in
float32) and their labels.

Tensors: init.NAME (the float32 initial weights, transformers' init with torch.manual_seed(2121)),
grad.NAME (d loss / d NAME at init, float64 rounded to float32), after.NAME (the weights after 20
steps of: loss.backward(); clip_grad_norm_(max_norm); AdamW(lr schedule, betas 0.9/0.999, eps 1e-8,
weight decay 0.05 on >= 2-dim tensors except position embeddings, as scripts/train_vit.py); the
learning rate is warm-up + cosine (train_vit.py's LambdaLR) with warmup 5 of 20 steps, base 2e-3;
the same batch every step), pixels [4, 1, 28, 28] F32, labels [4] I32. Metadata: loss (float64,
%.17g), the step-1 gradient norm, max_norm, and the config. The float32 torch run's deviations from
the float64 reference are printed (they size the C test's tolerances)."""
import gzip
import math
import os
import struct

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import ViTConfig, ViTForImageClassification

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "train_vit")
DATA = "/usr/share/datasets/fashion-mnist"
STEPS, WARMUP, BASE_LR, WD = 20, 5, 2e-3, 0.05


def read_idx(path, n):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = struct.unpack(">I", data[:4])[0] & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)[:n]


def legacy(name):
    """transformers 5's module name -> the name it saves (and attn's trainer uses)"""
    for new, old in ((".attention.q_proj.", ".attention.attention.query."), (".attention.k_proj.", ".attention.attention.key."),
                     (".attention.v_proj.", ".attention.attention.value."), (".attention.o_proj.", ".attention.output.dense."),
                     (".mlp.fc1.", ".intermediate.dense."), (".mlp.fc2.", ".output.dense."), ("vit.layers.", "vit.encoder.layer.")):
        name = name.replace(new, old)
    return name


def lr_at(s):
    if s < WARMUP:
        return BASE_LR * (s + 1) / WARMUP
    return BASE_LR * 0.5 * (1 + math.cos(math.pi * (s - WARMUP) / max(1, STEPS - WARMUP)))


def run(model, x, y, max_norm):
    """loss and grads at init, then STEPS AdamW steps; returns (loss0, norm0, grads0, params)"""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "position" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "position" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}],
                            lr=BASE_LR, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    loss0 = norm0 = grads0 = None
    for s in range(STEPS):
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(pixel_values=x).logits, y)
        loss.backward()
        if s == 0:
            loss0 = float(loss)
            grads0 = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
        if s == 0:
            norm0 = norm
        opt.step()
    return loss0, norm0, grads0, {n: p.detach().clone() for n, p in model.named_parameters()}


def main():
    torch.manual_seed(2121)
    cfg = ViTConfig(image_size=28, patch_size=7, num_channels=1, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=64, hidden_act="gelu", hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12, qkv_bias=True, num_labels=10)
    cfg._attn_implementation = "eager"
    model = ViTForImageClassification(cfg)
    init = {n: p.detach().clone().float() for n, p in model.named_parameters()}
    xs = read_idx(os.path.join(DATA, "train-images-idx3-ubyte.gz"), 4)
    ys = read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"), 4).astype(np.int64)
    x = (xs.astype(np.float32) * np.float32(1 / 255) - np.float32(0.286)) / np.float32(0.353)
    x32 = torch.from_numpy(x[:, None, :, :].copy())
    y = torch.from_numpy(ys)

    # the clipping threshold: 0.7 of the first step's norm, so that clipping is active
    probe = ViTForImageClassification(cfg).double()
    probe.load_state_dict({n: t.double() for n, t in init.items()}, strict=False)
    torch.nn.functional.cross_entropy(probe(pixel_values=x32.double()).logits, y).backward()
    n0 = math.sqrt(sum(float((p.grad ** 2).sum()) for p in probe.parameters()))
    max_norm = round(0.7 * n0, 4)

    m64 = ViTForImageClassification(cfg).double()
    m64.load_state_dict({n: t.double() for n, t in init.items()}, strict=False)
    loss, norm, grads, after = run(m64, x32.double(), y, max_norm)

    m32 = ViTForImageClassification(cfg)
    m32.load_state_dict(init, strict=False)
    l32, _, g32, a32 = run(m32, x32, y, max_norm)
    print(f"loss {loss:.17g}; float32 torch: rel {abs(l32 - loss) / loss:.2e}")
    worst_g = max(float((g32[n].double() - grads[n]).abs().max() / grads[n].abs().max()) for n in grads)
    worst_a = max(float((a32[n].double() - after[n]).abs().max()) for n in after)
    print(f"float32 torch: gradients max |diff| / max |ref| per tensor {worst_g:.2e}; params after {STEPS} steps "
          f"max |diff| {worst_a:.2e}; grad norm {norm:.6g}, max_norm {max_norm}")

    t = {"pixels": x32.contiguous(), "labels": y.to(torch.int32)}
    for n in init:
        t["init." + legacy(n)] = init[n].contiguous()
        t["grad." + legacy(n)] = grads[n].float().contiguous()
        t["after." + legacy(n)] = after[n].float().contiguous()
    meta = {"loss": "%.17g" % loss, "grad_norm": "%.17g" % norm, "max_norm": repr(max_norm), "steps": str(STEPS),
            "warmup": str(WARMUP), "lr": repr(BASE_LR), "weight_decay": repr(WD),
            "config": "image 28, channels 1, patch 7, hidden 32, layers 2, heads 4, mlp 64, labels 10, gelu, eps 1e-12"}
    os.makedirs(OUT, exist_ok=True)
    save_file(t, os.path.join(OUT, "step.safetensors"), metadata=meta)
    print("wrote", os.path.join(OUT, "step.safetensors"), os.path.getsize(os.path.join(OUT, "step.safetensors")), "bytes")


if __name__ == "__main__":
    main()
