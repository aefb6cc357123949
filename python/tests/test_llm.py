"""attn.LLM on stories260K (llama2.c; ../shared/models) against the float64 NumPy reference
fixtures of tests/test_llama.c (tests/fixtures/llama: tokenizer ids, greedy continuations,
logits at several positions; scripts/gen_llama2c_fixtures.py), and on the tiny GGUF seed file.
Tolerance: logits 1e-4 absolute (as the C test: measured 4e-6)."""
import os
import threading

import numpy as np
import pytest

import attn
from conftest import ROOT, fixture

STORIES = os.path.join(ROOT, "..", "shared", "models", "stories260K")
TINY_GGUF = os.path.join(ROOT, "tests", "fuzz", "seeds_fuzz_gguf", "tiny_llama.gguf")
pytestmark = pytest.mark.skipif(not os.path.isdir(STORIES), reason=f"{STORIES} missing")


@pytest.fixture(scope="module")
def llm():
    return attn.LLM(os.path.join(STORIES, "stories260K.bin"), tokenizer=os.path.join(STORIES, "tok512.bin"))


def rows(kind):
    with open(fixture("llama", "stories260K.tsv")) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if parts[0] == kind:
                yield parts[1:]


def ints(s):
    return [int(x) for x in s.split()] if s else []


def test_config(llm):
    c = llm.config
    assert (c["dim"], c["n_layers"], c["n_heads"], c["n_kv_heads"], c["vocab_size"]) == (64, 5, 8, 4, 512)
    assert "5 layers" in repr(llm)


def test_tokenize_matches_reference(llm):
    n = 0
    for hexs, want in rows("tok"):
        text = bytes.fromhex(hexs).decode("utf-8") if hexs != "-" else ""
        assert llm.tokenize(text) == ints(want), text
        if text:
            assert llm.detokenize(ints(want)) == text
        n += 1
    assert n >= 4


def test_greedy_matches_reference(llm):
    n = 0
    for hexs, prompt, want in rows("greedy"):
        want = ints(want)
        got = list(llm.generate_ids(ints(prompt), max_tokens=len(want), temperature=0.0))
        assert got == want
        text = llm(ints(prompt), max_tokens=len(want), temperature=0.0)
        assert text == llm.detokenize(ints(prompt) + want)[len(llm.detokenize(ints(prompt))):]
        n += 1
    assert n >= 3


def test_logits_match_reference(llm):
    (pos, seq), = list(rows("positions"))[:1]
    pos, seq = ints(pos), ints(seq)
    ref = np.load(fixture("llama", "stories260K_logits.npy"))
    lg = llm.logits(seq)
    assert lg.shape == (len(seq), 512) and lg.dtype == np.float32
    assert np.max(np.abs(lg[pos] - ref)) < 1e-4


def test_sampling_is_seeded_and_stops(llm):
    a = llm("Once upon a time", max_tokens=30, temperature=1.0, seed=7)
    b = llm("Once upon a time", max_tokens=30, temperature=1.0, seed=7)
    c = llm("Once upon a time", max_tokens=30, temperature=1.0, seed=8)
    assert a == b and a != c
    pieces = list(llm.generate("Once upon a time", max_tokens=40, temperature=0.0))
    full = "".join(pieces)
    assert len(pieces) > 5
    word = full.split()[3]
    cut = llm("Once upon a time", max_tokens=40, temperature=0.0, stop=word)
    assert cut == full[: full.index(word)]
    assert llm("Once upon a time", max_tokens=0) == ""


def test_threads(llm):
    want = llm("Lily and Tom", max_tokens=20, temperature=0.0)
    got = []
    ts = [threading.Thread(target=lambda: got.append(llm("Lily and Tom", max_tokens=20, temperature=0.0)))
          for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert got == [want] * 3


def test_errors(llm):
    with pytest.raises(ValueError, match="tokenizer"):
        attn.LLM(os.path.join(STORIES, "stories260K.bin"))
    with pytest.raises(OSError):
        attn.LLM(os.path.join(STORIES, "nope.bin"))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        llm.logits([1, 600])
    with pytest.raises(ValueError):
        llm("x", temperature=-1.0)
    with pytest.raises(ValueError):
        llm("x", top_p=0.0)
    with pytest.raises(TypeError):
        llm.tokenize(3)
    with pytest.raises(NotImplementedError):
        llm.chat([{"role": "user", "content": "hi"}])


@pytest.mark.skipif(not os.path.isfile(TINY_GGUF), reason="tiny GGUF seed missing")
def test_gguf_tiny():
    m = attn.LLM(TINY_GGUF)
    assert m.is_gguf and m.config["arch"] == "llama"
    ids = m.tokenize("the cat")
    assert len(ids) >= 1
    lg = m.logits(ids)
    assert lg.shape == (len(ids), m.config["vocab_size"]) and np.all(np.isfinite(lg))
    one = m("the cat", max_tokens=8, temperature=0.0)
    assert one == m("the cat", max_tokens=8, temperature=0.0)


def test_context_full_rule(llm):
    """A prompt of P tokens in a context of C gives C - P + 1 tokens, as the CLI and llama2.c
    (the library's loop; the package's own loop gave C - P: issue 23 item 10)."""
    small = attn.LLM(os.path.join(STORIES, "stories260K.bin"), tokenizer=os.path.join(STORIES, "tok512.bin"), n_ctx=12)
    prompt = small.tokenize("Once upon a time")
    got = list(small.generate_ids(prompt, max_tokens=100, temperature=0.0))
    assert len(got) == 12 - len(prompt) + 1
    assert got == list(llm.generate_ids(prompt, max_tokens=len(got), temperature=0.0))


SMOL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.mark.skipif(not os.path.isfile(SMOL), reason=f"{SMOL} missing (scripts/setup.sh)")
def test_chat_equals_cli():
    """LLM.chat formats the conversation as `attn chat` does (one library path: the template's
    default system turn included: 40 prompt tokens, not 24 — issue 23 item 9), so greedy replies
    are identical."""
    import subprocess
    m = attn.LLM(SMOL)
    msg = "What color is the sky on a clear day?"
    reply = "".join(m.chat([{"role": "user", "content": msg}], max_tokens=24, temperature=0.0))
    exe = os.environ.get("ATTN_BIN", os.path.join(ROOT, "build", "attn"))
    cli = subprocess.run([exe, "chat", "--model", SMOL, "-n", "24", "--temp", "0", "--threads", "1", msg],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert "prompt: 40 tokens" in cli.stderr
    assert cli.stdout.rstrip("\n") == reply
    assert len(m.tokenize("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                          "<|im_end|>\n<|im_start|>user\n" + msg + "<|im_end|>\n<|im_start|>assistant\n", special=True)) == 40
