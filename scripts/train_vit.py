#!/usr/bin/env python3
"""Train a small Vision Transformer (Dosovitskiy et al. 2021) on Fashion-MNIST with
transformers' ViTForImageClassification and save it in Hugging Face format.

Data: Debian package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, gzip'd IDX).
Output (--out, default models/vit-fashion-mnist): config.json (with id2label),
model.safetensors, preprocessor_config.json, training.json (config, seed, per-epoch loss,
final test accuracy and wall time).

Seeded and CPU-only: the same torch version and thread count reproduce the same weights.
One thread by default: on this shared 2-core machine PyTorch's OpenMP threads spin-wait
for each other when the cores are oversubscribed and train several times slower than one
thread. The test-set evaluation at the end is what `attn classify --eval` must reproduce.

The committed checkpoint was made with the defaults (torch 2.15.0, transformers 5.24.0):
patch 7 (a 4 x 4 grid of patches + CLS = 17 tokens), hidden 96, 4 layers, 3 heads, MLP 192,
AdamW (lr 2e-3, weight decay 0.05, half an epoch of warm-up, cosine decay), batch 128,
4 epochs, no augmentation; training.json records the losses, wall time and accuracy.

Usage (a venv with torch + transformers, never in CI):
    nice python scripts/train_vit.py [--epochs 4] [--threads 1]
"""
import argparse
import gzip
import json
import math
import os
import struct
import time

import numpy as np
import torch
from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

DATA = "/usr/share/datasets/fashion-mnist"
LABELS = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
# Mean and standard deviation of the training pixels scaled to [0, 1] (computed by
# this script's --stats; rounded to 4 digits and stored in preprocessor_config.json).
MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    return arr.reshape(dims)


def load(split):
    x = read_idx(os.path.join(DATA, f"{split}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(DATA, f"{split}-labels-idx1-ubyte.gz"))
    return x, y.astype(np.int64)


def normalise(x_u8):
    """uint8 [N, 28, 28] -> float32 [N, 1, 28, 28], the preprocessor's rescale + normalise
    done in float32 in the same order as attn: (p * (1/255) - mean) / std."""
    x = x_u8.astype(np.float32) * np.float32(1 / 255)
    x = (x - np.float32(MEAN)) / np.float32(STD)
    return torch.from_numpy(x[:, None, :, :].copy())


def evaluate(model, x, y, batch=500):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            logits = model(pixel_values=normalise(x[i:i + batch])).logits
            correct += int((logits.argmax(-1).numpy() == y[i:i + batch]).sum())
    return correct


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="models/vit-fashion-mnist")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--patch", type=int, default=7)
    ap.add_argument("--hidden", type=int, default=96)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=3)
    ap.add_argument("--mlp", type=int, default=192)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flip", action="store_true", help="random horizontal flips (augmentation)")
    ap.add_argument("--limit", type=int, default=0, help="train on the first N images only (timing runs)")
    ap.add_argument("--stats", action="store_true", help="print the training pixels' mean/std and exit")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.use_deterministic_algorithms(True)

    xtr, ytr = load("train")
    xte, yte = load("t10k")
    if args.stats:
        v = xtr.astype(np.float64) / 255
        print(f"mean {v.mean():.6f} std {v.std():.6f}")
        return
    if args.limit:
        xtr, ytr = xtr[:args.limit], ytr[:args.limit]

    cfg = ViTConfig(image_size=28, patch_size=args.patch, num_channels=1, hidden_size=args.hidden,
                    num_hidden_layers=args.layers, num_attention_heads=args.heads,
                    intermediate_size=args.mlp, hidden_act="gelu", hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12, qkv_bias=True,
                    num_labels=10, id2label={i: n for i, n in enumerate(LABELS)},
                    label2id={n: i for i, n in enumerate(LABELS)})
    model = ViTForImageClassification(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"ViT: patch {args.patch}, hidden {args.hidden}, {args.layers} layers, {args.heads} heads, "
          f"mlp {args.mlp}: {n_params} parameters")

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "position" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "position" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.999))
    steps_per_epoch = math.ceil(len(xtr) / args.batch)
    total = steps_per_epoch * args.epochs
    warmup = max(1, steps_per_epoch // 2)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) / max(1, total - warmup))))
    gen = torch.Generator().manual_seed(args.seed)
    log = []
    t0 = time.time()
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr), generator=gen).numpy()
        run_loss, seen = 0.0, 0
        for s in range(steps_per_epoch):
            idx = perm[s * args.batch:(s + 1) * args.batch]
            xb = normalise(xtr[idx])
            if args.flip:
                flip = torch.rand(len(idx), generator=gen) < 0.5
                xb[flip] = xb[flip].flip(-1)
            out = model(pixel_values=xb, labels=torch.from_numpy(ytr[idx]))
            opt.zero_grad(set_to_none=True)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            run_loss += float(out.loss) * len(idx)
            seen += len(idx)
            if s % 100 == 0:
                print(f"epoch {epoch + 1} step {s}/{steps_per_epoch} loss {run_loss / seen:.4f} "
                      f"{time.time() - t0:.0f}s", flush=True)
        log.append({"epoch": epoch + 1, "train_loss": run_loss / seen, "seconds": time.time() - t0})
        print(f"epoch {epoch + 1}: train loss {run_loss / seen:.4f} ({time.time() - t0:.0f}s)", flush=True)

    correct = evaluate(model, xte, yte)
    acc = correct / len(xte)
    print(f"test accuracy: {acc:.4f} ({correct}/{len(xte)})")

    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    proc = ViTImageProcessor(do_resize=True, size={"height": 28, "width": 28}, resample=2, do_rescale=True,
                             rescale_factor=1 / 255, do_normalize=True, image_mean=[MEAN], image_std=[STD])
    proc.save_pretrained(args.out)
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump({"args": vars(args), "torch": torch.__version__, "parameters": n_params, "epochs": log,
                   "test_correct": correct, "test_total": len(xte), "test_accuracy": acc,
                   "wall_seconds": time.time() - t0}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
