"""attn.Embedder on all-MiniLM-L6-v2 (models/, fetched by scripts/setup.sh) against the C
suite's sentence-transformers fixtures (tests/fixtures/minilm) and a float64 NumPy
recomputation of the attention weights from transformers' hidden states.

Tolerances: embeddings 1e-5 absolute on unit vectors (as tests/test_minilm.c: float32
accumulation order only); attention weights 2e-4 absolute (the reference starts from
transformers' hidden states, which attn matches to 1e-4 per layer)."""
import json
import os
import struct
import threading
import time

import numpy as np
import pytest

import attn
from conftest import MINILM, fixture

pytestmark = pytest.mark.skipif(not os.path.isdir(MINILM),
                                reason="models/all-MiniLM-L6-v2 missing: run scripts/setup.sh")


@pytest.fixture(scope="module")
def model():
    return attn.Embedder(MINILM)


@pytest.fixture(scope="module")
def sentences():
    with open(fixture("minilm", "sentences.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_config(model):
    assert model.dim == 384 and model.get_sentence_embedding_dimension() == 384
    assert model.max_seq_length == 256
    assert model.config["n_layers"] == 6 and model.config["n_heads"] == 12
    assert model.config["normalize"] and model.config["pooling"] == "mean"
    assert "6 layers" in repr(model)


def test_encode_matches_sentence_transformers(model, sentences):
    ref = np.load(fixture("minilm", "embeddings.npy"))
    emb = model.encode(sentences)
    assert emb.shape == ref.shape == (len(sentences), 384) and emb.dtype == np.float32
    assert np.max(np.abs(emb - ref)) <= 1e-5
    short = [i for i, s in enumerate(sentences) if len(s) < 80][:10]
    small = model.encode([sentences[i] for i in short], batch_size=3)
    assert len(short) == 10 and np.max(np.abs(small - ref[short])) <= 1e-5


def test_encode_forms(model, sentences):
    sentences = ["A man is playing a guitar.", "Someone plays an instrument."]
    one = model.encode(sentences[0])
    assert one.shape == (384,)
    assert np.array_equal(one, model.encode([sentences[0]])[0])
    assert model.encode([]).shape == (0, 384)
    assert model.encode(iter(sentences[:2])).shape == (2, 384)
    assert np.allclose(model.encode(tuple(sentences[:2]), normalize=True), model.encode(sentences[:2]), atol=1e-7)


def test_encode_unnormalized(model, sentences):
    some = [s for s in sentences if len(s) < 100][:10]
    raw = model.encode(some, normalize=False, batch_size=4)
    norms = np.linalg.norm(raw.astype(np.float64), axis=1)
    assert np.all(np.abs(norms - 1) > 1e-3)  # really not normalised
    unit = model.encode(some)
    assert np.max(np.abs(raw / norms[:, None] - unit)) <= 1e-6


def test_progress_bar(model, sentences, capsys):
    model.encode(["a", "b", "c", "d", "e"], batch_size=2, show_progress_bar=True)
    err = capsys.readouterr().err
    assert "Batches: 1/3" in err and "Batches: 3/3" in err


def test_nul_is_removed_as_hf_tokenizers_does(model):
    # BertNormalizer's clean_text drops U+0000: "hello\0world" is "helloworld"
    assert model.tokenize("hello\x00world") == model.tokenize("helloworld")
    a, b = model.encode(["hello\x00world", "helloworld"])
    assert np.array_equal(a, b)


def test_tokenize(model):
    assert model.tokenize("unwanted running") == ["[CLS]", "unwanted", "running", "[SEP]"]
    assert model.tokenize("Héllò") == ["[CLS]", "hello", "[SEP]"]


def _safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        a, b = meta["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(meta["shape"]).astype(np.float64)
    return out


def test_attention_matches_reference(model, sentences):
    W = _safetensors(os.path.join(MINILM, "model.safetensors"))
    H, E = 12, 384
    dh = E // H
    checked = 0
    for kidx in range(3):
        ids = np.load(fixture("minilm", f"ids_{kidx}.npy"))
        hidden = np.load(fixture("minilm", f"hidden_{kidx}.npy")).astype(np.float64)  # [7, L, E]
        text = next(s for s in sentences if np.array_equal(model.token_ids(s), ids))
        w, tokens = model.attention(text)
        assert tokens == model.tokenize(text)
        L = len(ids)
        assert w.shape == (6, H, L, L)
        for layer in range(6):
            p = f"encoder.layer.{layer}.attention.self."
            x = hidden[layer]
            qh = (x @ W[p + "query.weight"].T + W[p + "query.bias"]).reshape(L, H, dh).transpose(1, 0, 2)
            kh = (x @ W[p + "key.weight"].T + W[p + "key.bias"]).reshape(L, H, dh).transpose(1, 0, 2)
            s_ = qh @ kh.transpose(0, 2, 1) / np.sqrt(dh)
            e = np.exp(s_ - s_.max(-1, keepdims=True))
            ref = e / e.sum(-1, keepdims=True)
            assert np.max(np.abs(w[layer] - ref)) <= 2e-4, (kidx, layer)
            checked += 1
    assert checked == 18


def test_attention_tokens(model):
    w, tokens = model.attention("The cat sat on the mat.")
    assert tokens == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]
    assert w.shape == (6, 12, 9, 9) and np.allclose(w.sum(-1), 1, atol=1e-5)
    w, tokens = model.attention("word " * 400)
    assert len(tokens) == 256 and w.shape == (6, 12, 256, 256)


def test_errors(model, tmp_path):
    with pytest.raises(OSError) as e:
        attn.Embedder(str(tmp_path / "nope"))
    assert "nope" in str(e.value)
    (tmp_path / "config.json").write_text("{ not json")
    with pytest.raises((ValueError, OSError)):
        attn.Embedder(tmp_path)
    with pytest.raises(TypeError, match="sentence 1 must be a str"):
        model.encode(["ok", 3])
    with pytest.raises(TypeError):
        model.encode(b"bytes")
    with pytest.raises(TypeError):
        model.encode(5)
    with pytest.raises(ValueError, match="sentence 0 is not valid Unicode"):
        model.encode(["bad \ud800 surrogate"])
    with pytest.raises(ValueError, match="batch_size"):
        model.encode(["x"], batch_size=0)
    with pytest.raises(TypeError, match="normalize"):
        model.encode(["x"], normalize="yes")
    with pytest.raises(TypeError):
        model.attention(None)


def test_close():
    m = attn.Embedder(MINILM)
    with m:
        assert m.encode("x").shape == (384,)
    with pytest.raises(ValueError, match="closed"):
        m.encode("x")


def test_gil_is_released_during_encode(model, sentences):
    done = threading.Event()
    ticks = 0

    def work():
        model.encode(sentences[:32], batch_size=32)
        done.set()

    th = threading.Thread(target=work)
    t0 = time.perf_counter()
    th.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    th.join()
    took = time.perf_counter() - t0
    assert took < 0.05 or ticks >= 10, f"{ticks} main-thread turns in {took:.2f} s"
