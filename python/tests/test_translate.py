"""attn.Translator against CTranslate2 4.8.5's outputs for the aren-transliteration models
(tests/fixtures/aren, written by scripts/gen_aren_fixtures.py; the same files as
tests/test_translate.c). The models live in ../shared/models (skipped when absent).
Tolerances as the C test: identical tokens, scores within 1e-4, attention within 1e-5."""
import os

import numpy as np
import pytest

import attn
from conftest import ROOT, fixture

MODEL = os.path.join(ROOT, "..", "shared", "models", "aren-transliteration")
pytestmark = pytest.mark.skipif(not os.path.isdir(MODEL), reason=f"{MODEL} missing")


@pytest.fixture(scope="module")
def tr():
    return attn.Translator(MODEL)


@pytest.fixture(scope="module")
def words():
    with open(fixture("aren", "words.txt"), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def read_case(name):
    """[[(score, tokens), ...] per word] from a fixture file."""
    out, cur = [], []
    with open(fixture("aren", name), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line == "#":
                out.append(cur)
                cur = []
            else:
                score, _, toks = line.partition("\t")
                cur.append((float(score), toks.split(" ") if toks else []))
    return out


CASES = [  # fixture, options (ctranslate2 names), number of words checked
    ("greedy_f32.txt", dict(beam_size=1), None),
    ("beam4_f32.txt", dict(beam_size=4, num_hypotheses=4), 96),
    ("beam4_lp0_f32.txt", dict(beam_size=4, num_hypotheses=2, length_penalty=0.0), 64),
    ("beam3_prefix_f32.txt", dict(beam_size=3, num_hypotheses=3, target_prefix=["a", "l"]), 64),
    ("beam4_minmax_f32.txt", dict(beam_size=4, num_hypotheses=2, min_decoding_length=6, max_decoding_length=8), 64),
    ("beam4_rep_f32.txt", dict(beam_size=4, num_hypotheses=2, repetition_penalty=1.5), 64),
    ("beam4_suppress_f32.txt", dict(beam_size=4, num_hypotheses=2, suppress_sequences=[["a"], ["h", "a"]]), 64),
    ("greedy_end_f32.txt", dict(beam_size=1, end_token="a", max_decoding_length=20), 64),
]


@pytest.mark.parametrize("name,opts,n", CASES, ids=[c[0] for c in CASES])
def test_matches_ctranslate2(tr, words, name, opts, n):
    ref = read_case(name)
    use = words[: n or len(words)]
    src = [w.split(" ") for w in use] if "beam4" in name else use  # both input forms
    got = tr.translate_batch(src, **opts)
    assert len(got) == len(use)
    worst = 0.0
    for w, (res, want) in enumerate(zip(got, ref)):
        assert [h for h in res.hypotheses] == [t for _, t in want], f"word {w} ({use[w]})"
        worst = max(worst, max(abs(a - s) for a, (s, _) in zip(res.scores, want)))
    assert worst <= 1e-4


def test_attention(tr, words):
    ref, cur = [], []
    with open(fixture("aren", "attention.txt")) as f:
        for line in f:
            if line.strip() == "#":
                ref.append(np.array(cur))
                cur = []
            else:
                cur.append([float(x) for x in line.split()])
    got = tr.translate_batch(words[:20], beam_size=1, return_attention=True)
    for w, (res, want) in enumerate(zip(got, ref)):
        a = res.attention[0]
        assert a.dtype == np.float32 and a.shape == (len(res.hypotheses[0]), len(res.source_tokens))
        assert a.shape == want.shape, w
        assert np.max(np.abs(a - want)) <= 1e-5
        assert np.allclose(a.sum(1), 1, atol=1e-5)


def test_forms_and_batching(tr, words):
    one = tr.translate_batch([words[0]], beam_size=4)[0]
    assert tr.translate(words[0], beam_size=4) == " ".join(one.hypotheses[0])
    a = tr.translate_batch(words[:10], beam_size=2, max_batch_size=3)
    b = tr.translate_batch(words[:10], beam_size=2)
    assert [r.hypotheses for r in a] == [r.hypotheses for r in b]
    assert np.allclose([r.scores for r in a], [r.scores for r in b], atol=1e-5)
    empty = tr.translate_batch([[]])[0]
    assert empty.hypotheses == [[]] and empty.scores == [0.0]
    assert tr.translate_batch([]) == []
    assert "TransformerBase" in repr(tr) or "Transformer" in repr(tr)


def test_errors(tr, words):
    with pytest.raises(ValueError, match="beam"):
        tr.translate_batch([words[0]], beam_size=0)
    with pytest.raises(ValueError):
        tr.translate_batch([words[0]], beam_size=2, num_hypotheses=3)
    with pytest.raises(ValueError, match="not in the target vocabulary"):
        tr.translate_batch([words[0]], target_prefix=["no-such-token"])
    with pytest.raises(ValueError, match="whitespace"):
        tr.translate_batch([["a b"]])
    with pytest.raises(TypeError):
        tr.translate_batch("ا ل")
    with pytest.raises(TypeError):
        tr.translate_batch([3])
    with pytest.raises(OSError):
        attn.Translator(os.path.join(ROOT, "no-such-model"))


def test_max_input_length(tr):
    """CTranslate2 4.8.5, max_input_length=4, beam 1: "b o u n z", -0.3436081 (its first 4 tokens)."""
    src = "ب ؤ ن ز ت ذ آ ى ث ش".split()
    r = tr.translate_batch([src], beam_size=1, max_input_length=4, return_attention=True)[0]
    assert r.hypotheses[0] == ["b", "o", "u", "n", "z"]
    assert abs(r.scores[0] - -0.3436081) < 1e-4
    assert r.source_tokens == src[:4] and np.asarray(r.attention[0]).shape == (5, 4)
    full = tr.translate_batch([src], beam_size=1, max_input_length=0)[0]
    assert len(full.source_tokens) == 10 and full.hypotheses[0] != r.hypotheses[0]
    with pytest.raises(ValueError, match="max_input_length"):
        tr.translate_batch([src], max_input_length=-1)
