#!/usr/bin/env python3
"""Reference outputs of transformers' ViTForImageClassification for tests/test_vit.c and
tests/test_image.c (fixtures under tests/fixtures/vit/), and the full test-set fidelity
check of `attn classify`.

    python scripts/gen_vit_fixtures.py                 # write the fixtures
    python scripts/gen_vit_fixtures.py --full LOGITS.npy
        compare attn's logits on all 10,000 test images (attn classify --eval ... --logits
        LOGITS.npy) with transformers': max |difference|, argmax disagreements, accuracy.

Fixtures (all from the committed checkpoint models/vit-fashion-mnist and the Debian
dataset-fashion-mnist test set):
  logits_first1000.npy   float32 [1000, 10] logits of test images 0..999
  interp_pixels.npy      float32 [2, 1, 42, 35] preprocessed pixels of 2 images at 42 x 35
                         (test images 0 and 1 upscaled with PIL bilinear, then normalised)
  interp_logits.npy      float32 [2, 10] logits with interpolate_pos_encoding=True
  attn_item0.npy         float32 [L, 1, H, T, T] attention weights of test image 0
  hidden_item0.npy       float32 [1, T, E] last_hidden_state of test image 0
  rollout_item0.npy      float64 [T, T] attention rollout of image 0 (numpy, float64)
  test_*.png             a few test images as 28 x 28 grey PNGs (README, CLI tests)
  cmyk.jpg               an 8 x 8 CMYK JPEG
  tiny_rgb/, tiny_rgb_base/  a random 3-channel ViT (image 12 x 8, patch 4, no qkv bias,
                         gelu_new) as ViTForImageClassification and as ViTModel;
                         tiny_rgb_{pixels,logits,hidden}.npy its input [2, 3, 12, 8] and outputs
  color_112.png / .jpg   an RGB 112 x 96 picture made from test image 0 (resize/convert tests)
  color_112_pil28.npy    int32 [28, 28, 3] PIL's resize((28, 28), BILINEAR) of color_112.png
  color_112_jpg_pil.npy  int32 [96, 112, 3] PIL's decode of color_112.jpg
"""
import argparse
import os
import sys

import numpy as np
import torch
from PIL import Image
from transformers import ViTForImageClassification

sys.path.insert(0, os.path.dirname(__file__))
from train_vit import LABELS, MEAN, STD, load, normalise  # noqa: E402

OUT = "tests/fixtures/vit"


def rollout(att):
    """Abnar & Zuidema 2020: A_l = 0.5 mean_h W_l + 0.5 I (rows renormalised), R = A_L ... A_1."""
    L, _, H, T, _ = att.shape
    R = None
    for l in range(L):
        A = 0.5 * att[l, 0].astype(np.float64).mean(0) + 0.5 * np.eye(T)
        A /= A.sum(-1, keepdims=True)
        R = A if R is None else A @ R
    return R


def write_tiny_rgb():
    """A random 3-channel ViT with a non-square image (12 x 8), no qkv biases and gelu_new,
    saved as ViTForImageClassification (tiny_rgb/) and as a bare ViTModel (tiny_rgb_base/,
    names without "vit."), with pixels and transformers' outputs."""
    from transformers import ViTConfig, ViTModel
    torch.manual_seed(1)
    cfg = ViTConfig(image_size=[12, 8], patch_size=4, num_channels=3, hidden_size=16, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=24, hidden_act="gelu_new", qkv_bias=False,
                    layer_norm_eps=1e-6, num_labels=3, id2label={0: "red", 1: "green", 2: "blue"},
                    label2id={"red": 0, "green": 1, "blue": 2})
    m = ViTForImageClassification(cfg).eval()
    with torch.no_grad():  # larger weights than the initialiser's, so the test sees real signal
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    m.save_pretrained(f"{OUT}/tiny_rgb")
    m.vit.save_pretrained(f"{OUT}/tiny_rgb_base")
    px = torch.randn(2, 3, 12, 8)
    with torch.no_grad():
        np.save(f"{OUT}/tiny_rgb_pixels.npy", px.numpy())
        np.save(f"{OUT}/tiny_rgb_logits.npy", m(pixel_values=px).logits.numpy())
        np.save(f"{OUT}/tiny_rgb_hidden.npy", m.vit(pixel_values=px).last_hidden_state.numpy())
        base = ViTModel.from_pretrained(f"{OUT}/tiny_rgb_base", add_pooling_layer=False).eval()
        assert np.allclose(base(pixel_values=px).last_hidden_state.numpy(), m.vit(pixel_values=px).last_hidden_state.numpy())


def write_fuzz_seeds():
    """Small valid inputs for tests/fuzz/fuzz_image.c and fuzz_idx.c (seed corpora)."""
    import gzip
    import struct
    d = "tests/fuzz/seeds_fuzz_image/"
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    a = rng.integers(0, 255, (12, 10, 3), dtype=np.uint8)
    Image.fromarray(a).save(d + "rgb.jpg", quality=80)
    Image.fromarray(a).save(d + "prog.jpg", quality=80, progressive=True)
    Image.fromarray(a[:, :, 0]).save(d + "grey.jpg", quality=80)
    Image.fromarray(np.dstack([a, a[:, :, :1]])).save(d + "rgba.png")
    Image.fromarray(a).convert("P").save(d + "palette.png")
    Image.fromarray(a[:, :, 0]).convert("1").save(d + "bilevel.png")
    Image.fromarray(a[:, :, 0].astype(np.uint16) * 257).save(d + "grey16.png")
    Image.fromarray(a[:, :, 0]).save(d + "grey.png")
    Image.new("CMYK", (8, 8), (10, 20, 30, 40)).save(d + "cmyk.jpg")
    s = "tests/fuzz/seeds_fuzz_idx/"
    os.makedirs(s, exist_ok=True)
    img = rng.integers(0, 255, (3, 5, 4), dtype=np.uint8)
    raw = struct.pack(">BBBB", 0, 0, 8, 3) + struct.pack(">III", 3, 5, 4) + img.tobytes()
    lab = struct.pack(">BBBB", 0, 0, 8, 1) + struct.pack(">I", 6) + bytes([1, 2, 3, 4, 5, 9])
    for name, data in (("images.idx", raw), ("labels.idx", lab)):
        open(s + name, "wb").write(data)
        open(s + name + ".gz", "wb").write(gzip.compress(data, mtime=0))
    open(s + "float.idx", "wb").write(struct.pack(">BBBB", 0, 0, 0x0D, 1) + struct.pack(">I", 2) + b"\0" * 8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/vit-fashion-mnist")
    ap.add_argument("--full", metavar="LOGITS.npy", help="check attn's logits on the whole test set")
    args = ap.parse_args()
    torch.set_num_threads(2)
    model = ViTForImageClassification.from_pretrained(args.model, attn_implementation="eager").eval()
    xte, yte = load("t10k")

    if args.full:
        got = np.load(args.full)
        ref = []
        with torch.no_grad():
            for i in range(0, len(xte), 500):
                ref.append(model(pixel_values=normalise(xte[i:i + 500])).logits.numpy())
        ref = np.concatenate(ref)
        assert got.shape == ref.shape, (got.shape, ref.shape)
        diff = np.abs(got - ref)
        am_got, am_ref = got.argmax(1), ref.argmax(1)
        print(f"images: {len(ref)}")
        print(f"max |logit difference|: {diff.max():.3g} (mean {diff.mean():.3g})")
        print(f"argmax disagreements: {(am_got != am_ref).sum()}")
        print(f"accuracy attn: {(am_got == yte).mean():.4f} ({(am_got == yte).sum()}/{len(yte)}), "
              f"transformers: {(am_ref == yte).mean():.4f} ({(am_ref == yte).sum()}/{len(yte)})")
        return

    os.makedirs(OUT, exist_ok=True)
    with torch.no_grad():
        logits = model(pixel_values=normalise(xte[:1000])).logits.numpy()
        np.save(f"{OUT}/logits_first1000.npy", logits.astype(np.float32))

        # position-embedding interpolation: a non-square input of another size
        imgs = [Image.fromarray(xte[i]).resize((35, 42), Image.BILINEAR) for i in range(2)]
        px = np.stack([np.asarray(im) for im in imgs])
        pv = normalise(px)
        np.save(f"{OUT}/interp_pixels.npy", pv.numpy())
        il = model(pixel_values=pv, interpolate_pos_encoding=True).logits.numpy()
        np.save(f"{OUT}/interp_logits.npy", il.astype(np.float32))

        out = model(pixel_values=normalise(xte[:1]), output_attentions=True, output_hidden_states=True)
        att = np.stack([a.numpy() for a in out.attentions])  # [L, 1, H, T, T]
        np.save(f"{OUT}/attn_item0.npy", att.astype(np.float32))
        last = model.vit.layernorm(out.hidden_states[-1]).numpy()
        np.save(f"{OUT}/hidden_item0.npy", last.astype(np.float32))
        np.save(f"{OUT}/rollout_item0.npy", rollout(att))

    # the first test image of some classes, named test_INDEX_LABEL.png
    for cls in (9, 2, 1, 5, 4, 3, 8, 7):
        i = int(np.argmax(yte == cls))
        name = LABELS[cls].lower().replace(" ", "_").split("/")[0]
        Image.fromarray(xte[i]).save(f"{OUT}/test_{i}_{name}.png")
    # a CMYK JPEG (unsupported: the reader must say so)
    Image.new("CMYK", (8, 8), (10, 20, 30, 40)).save(f"{OUT}/cmyk.jpg")

    # an RGB picture (112 x 96) from test image 0: tinted, upscaled with PIL bicubic
    g = np.asarray(Image.fromarray(xte[0]).resize((112, 96), Image.BICUBIC)).astype(np.float32)
    yy, xx = np.mgrid[0:96, 0:112]
    rgb = np.stack([g, 0.6 * g + 80 * xx / 111, 255 - 0.8 * g - 40 * yy / 95], -1)
    rgb = np.clip(np.rint(rgb), 0, 255).astype(np.uint8)
    Image.fromarray(rgb).save(f"{OUT}/color_112.png")
    small = np.asarray(Image.open(f"{OUT}/color_112.png").resize((28, 28), Image.BILINEAR))
    np.save(f"{OUT}/color_112_pil28.npy", small.astype(np.int32))
    Image.fromarray(rgb).save(f"{OUT}/color_112.jpg", quality=90)
    np.save(f"{OUT}/color_112_jpg_pil.npy", np.asarray(Image.open(f"{OUT}/color_112.jpg").convert("RGB")).astype(np.int32))
    write_tiny_rgb()
    write_fuzz_seeds()
    print("fixtures written to", OUT, "and tests/fuzz/seeds_fuzz_{image,idx}")


if __name__ == "__main__":
    main()
