"""attn.ImageClassifier against transformers' outputs (tests/fixtures/vit, the fixtures of
tests/test_vit.c): a tiny random RGB ViT committed as a fixture (always run) and the
Fashion-MNIST ViT in models/vit-fashion-mnist when present. Tolerances as the C test:
logits 1e-4, attention weights and rollout 1e-5."""
import os

import numpy as np
import pytest

import attn
from conftest import ROOT, fixture

FMNIST_MODEL = os.path.join(ROOT, "models", "vit-fashion-mnist")


@pytest.fixture(scope="module")
def tiny():
    return attn.ImageClassifier(fixture("vit", "tiny_rgb"))


def test_tiny_logits(tiny):
    px = np.load(fixture("vit", "tiny_rgb_pixels.npy"))
    ref = np.load(fixture("vit", "tiny_rgb_logits.npy"))
    assert tiny.labels[2] == "blue" and tiny.config["channels"] == 3
    assert np.max(np.abs(tiny.forward(px) - ref)) <= 1e-4
    lg, att = tiny.forward(px, output_attentions=True)
    assert att.shape[:3] == (tiny.config["n_layers"], 2, tiny.config["n_heads"])
    assert np.allclose(att.sum(-1), 1, atol=1e-5)


def test_tiny_grey_image_and_ranking(tiny):
    g = (np.arange(12 * 8, dtype=np.uint8) * 2).reshape(12, 8)
    px = tiny.preprocess(g)
    assert px.shape == (3, 12, 8)
    assert np.array_equal(px[0], px[1]) and px[0, 0, 5] == np.float32((10 * (1.0 / 255.0) - 0.5) / 0.5)
    top = tiny(g, top_k=2)
    assert len(top) == 2 and top[0]["score"] >= top[1]["score"]
    lg = tiny.logits(g).astype(np.float64)
    p = np.exp(lg - lg.max())
    p /= p.sum()
    assert top[0]["label"] == tiny.labels[int(np.argmax(lg))] and abs(top[0]["score"] - p.max()) < 1e-6
    assert len(tiny([g, g])) == 2


def test_errors(tiny):
    with pytest.raises(TypeError):
        tiny.preprocess(np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError):
        tiny.preprocess(np.zeros((4, 4, 4), np.uint8))
    with pytest.raises(OSError):
        tiny(os.path.join(ROOT, "no-such.png"))
    with pytest.raises(ValueError):
        tiny(fixture("vit", "tiny_rgb", "config.json"))  # not an image
    with pytest.raises(ValueError):
        tiny.forward(np.zeros((1, 3, 2, 2), np.float32))  # smaller than a patch
    with pytest.raises(OSError):
        attn.ImageClassifier(os.path.join(ROOT, "no-such-model"))


@pytest.mark.skipif(not os.path.isdir(FMNIST_MODEL), reason=f"{FMNIST_MODEL} missing")
def test_fashion_mnist_attention_and_rollout():
    clf = attn.ImageClassifier(FMNIST_MODEL)
    img = fixture("vit", "test_0_ankle_boot.png")
    ref_logits = np.load(fixture("vit", "logits_first1000.npy"))[0]  # test image 0 of Fashion-MNIST
    assert np.max(np.abs(clf.logits(img) - ref_logits)) <= 1e-4
    assert clf(img, top_k=1)[0]["label"] == clf.labels[int(np.argmax(ref_logits))]
    w, roll = clf.attention(img)
    ref = np.load(fixture("vit", "attn_item0.npy"))[:, 0]
    assert w.shape == ref.shape and np.max(np.abs(w - ref)) <= 1e-5
    assert np.max(np.abs(roll - np.load(fixture("vit", "rollout_item0.npy")))) <= 1e-5
