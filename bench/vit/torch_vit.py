#!/usr/bin/env python3
"""transformers (PyTorch) side of bench/vit: ViTForImageClassification on the Fashion-MNIST
test set in batches, timing preprocessing (uint8 -> normalised float32) + forward, like
`attn classify --eval` does. Prints one line: images, seconds, images/s, accuracy.

    python bench/vit/torch_vit.py --threads 1 --batch 64 [--repeat 3]
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
from train_vit import load, normalise  # noqa: E402
from transformers import ViTForImageClassification  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/vit-fashion-mnist")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3, help="best of N passes over the test set")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--attn", default="sdpa", help="transformers attention implementation (sdpa or eager)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    model = ViTForImageClassification.from_pretrained(args.model, attn_implementation=args.attn).eval()
    x, y = load("t10k")
    if args.limit:
        x, y = x[:args.limit], y[:args.limit]
    best = None
    for _ in range(args.repeat):
        pred = []
        t0 = time.perf_counter()
        with torch.inference_mode():
            for i in range(0, len(x), args.batch):
                pred.append(model(pixel_values=normalise(x[i:i + args.batch])).logits.argmax(-1).numpy())
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    acc = (np.concatenate(pred) == y).mean()
    print(f"torch {torch.__version__} ({args.attn}): {len(x)} images in {best:.3f} s = {len(x) / best:.0f} images/s, "
          f"{args.threads} threads, batch {args.batch}, accuracy {acc:.4f}")


if __name__ == "__main__":
    main()
