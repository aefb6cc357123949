#!/usr/bin/env python3
"""Check that transformers loads a checkpoint written by `attn train vit` and reports the accuracy
attn reports: ViTForImageClassification.from_pretrained(DIR) with DIR/preprocessor_config.json's
rescale_factor, image_mean and image_std (ViTImageProcessor's arithmetic; the processor itself needs
PIL) on the Fashion-MNIST test set (or the IDX files given), printed as "accuracy: 0.xxxx (N/M)" like
`attn classify --eval`. Run from the repository root with the peers' venv:

    /work/venv-peers/bin/python scripts/gen_train_hf_check.py DIR [IMAGES.idx[.gz] LABELS.idx[.gz]] [--limit N]
"""
import argparse
import gzip
import json
import os
import struct

import numpy as np
import torch
from transformers import ViTForImageClassification


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("images", nargs="?", default="/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")
    ap.add_argument("labels", nargs="?", default="/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    model = ViTForImageClassification.from_pretrained(a.model).eval()
    with open(os.path.join(a.model, "preprocessor_config.json")) as f:
        proc = json.load(f)  # ViTImageProcessor's settings (the processor itself needs PIL)
    x, y = read_idx(a.images), read_idx(a.labels).astype(np.int64)
    if a.limit:
        x, y = x[:a.limit], y[:a.limit]
    # the processor's rescale + normalise in float32, as attn_vit_preprocess (the images are already
    # the model's size, so no resize)
    mean, std = np.float32(proc["image_mean"][0]), np.float32(proc["image_std"][0])
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 500):
            v = (x[i:i + 500].astype(np.float32) * np.float32(proc["rescale_factor"]) - mean) / std
            logits = model(pixel_values=torch.from_numpy(v[:, None].copy())).logits
            correct += int((logits.argmax(-1).numpy() == y[i:i + 500]).sum())
    print(f"accuracy: {correct / len(x):.4f} ({correct}/{len(x)})")


if __name__ == "__main__":
    main()
