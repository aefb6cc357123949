"""attn.Whisper against CTranslate2 4.8.5 / faster-whisper outputs for whisper tiny.en
(tests/fixtures/whisper, the fixtures of tests/test_whisper.c; model in models/whisper-tiny.en,
fetched by scripts/setup.sh; skipped when absent). Log-mel within 1e-4 of faster-whisper's;
token ids identical to CTranslate2's; texts identical. Under AddressSanitizer (ATTN_SANITIZED,
set by tests/run_python_tests.sh) fewer decoding modes run."""
import os

import numpy as np
import pytest

import attn
from conftest import ROOT, fixture

MODEL = os.path.join(ROOT, "models", "whisper-tiny.en")
ALSA = "/usr/share/sounds/alsa/Front_Center.wav"


def test_log_mel_matches_faster_whisper():
    x = np.load(fixture("whisper", "mel_in.npy")).astype(np.float32)
    ref = np.load(fixture("whisper", "mel_ref.npy"))
    mel = attn.Whisper.log_mel(x)
    assert mel.shape == ref.shape and np.max(np.abs(mel - ref)) <= 1e-4


pytestmark_model = pytest.mark.skipif(not os.path.isdir(MODEL), reason=f"{MODEL} missing")


@pytest.fixture(scope="module")
def model():
    return attn.Whisper(MODEL)


def ref_tokens():
    out = {}
    with open(fixture("whisper", "tokens.txt")) as f:
        for line in f:
            p = line.split()
            out[(p[0], p[1])] = [int(x) for x in p[2:]]
    return out


def ref_text():
    with open(fixture("whisper", "text.txt"), encoding="utf-8") as f:
        return dict(line.rstrip("\n").split("\t", 1) for line in f)


@pytestmark_model
@pytest.mark.parametrize("name", ["Front_Left"])  # greedy, beam 5 and timestamps (the C test does all)
def test_tokens_match_ctranslate2(model, name):
    mel = np.load(fixture("whisper", f"{name}.mel.npy"))[:, :3000].astype(np.float32)
    want = ref_tokens()
    modes = [("greedy", 1, False), ("beam5", 5, False), ("beam5_ts", 5, True)]
    if os.environ.get("ATTN_SANITIZED"):  # under AddressSanitizer: the beam-5 modes only
        modes = modes[1:2]
    for mode, beam, ts in modes:
        if (name, mode) not in want:
            continue
        ids, score = model.generate(mel, beam_size=beam, timestamps=ts)
        assert ids == want[(name, mode)], mode
        if mode == "beam5":
            assert model.decode(ids).strip() == ref_text()[name]


@pytestmark_model
def test_transcribe_files(model):
    espeak = fixture("whisper", "espeak_2.wav")
    t = model.transcribe(espeak, beam_size=1)  # one window: the greedy tokens of CTranslate2
    assert t.tokens == ref_tokens()[("espeak_2", "greedy")]
    assert t.text.strip() == model.decode(t.tokens).strip() and len(t.segments) == 1
    g = t.segments[0]  # the window's statistics, as faster-whisper's Segment has them
    assert g.temperature == 0.0 and g.no_speech_prob < 0.6 and -1.0 < g.avg_logprob < 0 and 0 < g.compression_ratio < 2.4
    if os.path.isfile(ALSA):
        t = model.transcribe(ALSA, timestamps=True)
        assert t.text.strip() == "front, center." and t.tokens
        assert len(t.segments) == 1 and (t.segments[0].start, t.segments[0].end) == (0.0, 2.0)
        # the same audio as an array at another rate (resampled by libsamplerate)
        x = attn.Whisper.load_audio(ALSA)
        idx = np.arange(0, x.size - 1, 16000 / 22050)
        x22 = np.interp(idx, np.arange(x.size), x).astype(np.float32)
        assert model.transcribe(x22, sample_rate=22050).text.strip() == "front, center."


@pytestmark_model
def test_silence(model):
    # faster-whisper 1.2.1 gives no segment for 1 s of digital silence (nospeech.txt: "fw
    # silence_1s nots 0"); without its rules the model hallucinates a text
    x = np.zeros(16000, np.float32)
    t = model.transcribe(x)
    assert t.text == "" and t.segments == [] and t.tokens == []
    off = model.transcribe(x, temperature=0.0, no_speech_threshold=None, log_prob_threshold=None,
                           compression_ratio_threshold=None)
    assert off.tokens and off.text.strip()
    with pytest.raises(ValueError):
        model.transcribe(x, no_speech_threshold=1.5)
    with pytest.raises(ValueError):
        model.transcribe(x, temperature=[])
    # strings and bools are not numbers ("12" must not become (1.0, 2.0))
    for bad in ("12", "1", True, b"1"):
        with pytest.raises(TypeError):
            model.transcribe(x, temperature=bad)
    with pytest.raises(TypeError):
        model.transcribe(x, temperature=[0.0, "0.2"])
    with pytest.raises(TypeError):
        model.transcribe(x, no_speech_threshold="0.5")
    with pytest.raises(ValueError):
        model.transcribe(x, log_prob_threshold=float("nan"))


@pytestmark_model
def test_errors(model, tmp_path):
    with pytest.raises(OSError):
        model.transcribe(str(tmp_path / "none.wav"))
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"not audio at all")
    with pytest.raises(OSError):
        model.transcribe(str(bad))
    with pytest.raises(ValueError, match="empty"):
        model.transcribe(np.zeros(0, np.float32))
    with pytest.raises(TypeError):
        model.transcribe(np.zeros(100, np.float64))
    with pytest.raises(ValueError):
        model.transcribe(np.zeros(100, np.float32), beam_size=0)
    with pytest.raises(OSError):
        attn.Whisper(str(tmp_path))


@pytestmark_model
def test_short_and_empty_audio(model):
    # issue 23 item 7: shorter than one hop (160 samples) there is no content frame:
    # faster-whisper 1.2.1 gives no segment (long_prev.txt "short" lines); so does attn
    tone = (0.5 * np.sin(2 * np.pi * 440 * np.arange(159) / 16000)).astype(np.float32)
    for n in (1, 96, 159):
        t = model.transcribe(tone[:n])
        assert t.text == "" and t.segments == [] and t.tokens == []
    for bad in ("yes", 1, None):
        with pytest.raises(TypeError):
            model.transcribe(tone, condition_on_previous_text=bad)


@pytestmark_model
@pytest.mark.skipif(os.environ.get("ATTN_SANITIZED") == "1" or not os.path.isfile(ALSA), reason="34 s of audio: slow under ASan")
def test_condition_on_previous_text(model):
    # issue 23 item 6: the second 30 s window is prompted with the first's text, as
    # faster-whisper's condition_on_previous_text=True (scripts/gen_whisper_long.py)
    names = ["espeak_1", "espeak_2", "espeak_3"]
    alsa = ["Front_Center", "Front_Left", "Front_Right", "Noise", "Rear_Center", "Rear_Left", "Rear_Right", "Side_Left",
            "Side_Right"]
    files = [fixture("whisper", n + ".wav") for n in names] + [f"/usr/share/sounds/alsa/{n}.wav" for n in alsa] + \
            [fixture("whisper", n + ".wav") for n in names]
    x = np.concatenate([np.concatenate([attn.Whisper.load_audio(f), np.zeros(4800, np.float32)]) for f in files])
    want = []
    with open(fixture("whisper", "long_prev.txt")) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[0] == "ts0_cond1":
                want.append((float(p[1]), float(p[2]), p[3]))
    t = model.transcribe(x)
    assert [(round(s.start, 2), round(s.end, 2), s.text) for s in t.segments] == want
