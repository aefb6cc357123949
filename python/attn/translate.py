"""Translation with CTranslate2 Transformer models, shaped like ctranslate2.Translator."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Union

import numpy as np

from ._core import check_float, check_int, load_model, raise_for
from ._ffi import ffi, lib

Tokens = Union[str, Sequence[str]]


@dataclass
class TranslationResult:
    """One source's result (as ctranslate2.TranslationResult).

    hypotheses: the n best target token lists, best first.
    scores: their scores (sum of log-probabilities / length penalty), same order.
    attention: with return_attention, one float32 ``[len, src_len]`` cross-attention array per
        hypothesis (last decoder layer, first head; rows sum to 1), else [].
    source_tokens: the source as tokenised (unknown tokens kept as written).
    """

    hypotheses: List[List[str]]
    scores: List[float]
    attention: List[np.ndarray] = field(default_factory=list)
    source_tokens: List[str] = field(default_factory=list)


def _source(s: Any, i: int) -> bytes:
    if isinstance(s, str):
        text = s
    elif isinstance(s, (list, tuple)):
        for t in s:
            if not isinstance(t, str):
                raise TypeError(f"translate_batch: source {i} must hold str tokens, got {type(t).__name__}")
            if t == "" or any(c.isspace() for c in t):
                raise ValueError(f"translate_batch: source {i} has the token {t!r}: tokens must be "
                                 "non-empty and contain no whitespace")
        text = " ".join(s)
    else:
        raise TypeError(f"translate_batch: source {i} must be a list of tokens or a str of "
                        f"space-separated tokens, got {type(s).__name__}")
    if "\x00" in text:
        raise ValueError(f"translate_batch: source {i} contains a NUL character")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"translate_batch: source {i} is not valid Unicode ({e.reason})") from None


class Translator:
    """A CTranslate2 Transformer encoder-decoder (model.bin versions 2-6 plus vocabularies:
    OpenNMT / Marian / Fairseq conversions, float32 / float16 / bfloat16 / int8 weights) run by
    libattn (include/attn_ct2_transformer.h), with greedy or beam search that follows CTranslate2's.

    ``Translator(model_dir)``; then ``translate_batch([["t", "o", "k"], ...])`` as in
    ctranslate2. Calls on one Translator are serialised by a lock; the GIL is released
    while the model runs.

    Raises (constructor): OSError (missing files), ValueError (a malformed model.bin,
    an unknown spec, vocabulary sizes that do not fit), MemoryError.
    """

    def __init__(self, model_dir: Union[str, "os.PathLike[str]"]):
        self._m = load_model(model_dir, "Translator", "attn_translator", lib.attn_translator_load,
                             lib.attn_translator_free)
        c = lib.attn_translator_get_config(self._m)
        self.model_dir = os.fspath(model_dir)
        self.config = {
            "d_model": int(c.d_model), "n_heads": int(c.n_heads), "d_ff": int(c.d_ff),
            "n_encoder_layers": int(c.n_encoder_layers), "n_decoder_layers": int(c.n_decoder_layers),
            "source_vocab": int(c.source_vocab), "target_vocab": int(c.target_vocab),
            "pre_norm": bool(c.pre_norm), "int8": bool(c.int8),
            "spec": ffi.string(c.spec).decode("utf-8", "replace"),
        }
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        c = self.config
        return (f"Translator({self.model_dir!r}: {c['spec']}, {c['n_encoder_layers']}+{c['n_decoder_layers']} "
                f"layers, E={c['d_model']}, int8={c['int8']})")

    def _target_ids(self, tokens: Optional[Sequence[str]], what: str) -> List[int]:
        if tokens is None:
            return []
        if isinstance(tokens, str):
            tokens = [tokens]
        ids = []
        for t in tokens:
            if not isinstance(t, str):
                raise TypeError(f"translate_batch: {what} must hold str tokens, got {type(t).__name__}")
            i = lib.attn_translator_target_id(self._m, t.encode("utf-8", "replace"))
            if i < 0:
                raise ValueError(f"translate_batch: {what} token {t!r} is not in the target vocabulary")
            ids.append(int(i))
        return ids

    def translate_batch(self, source: Sequence[Tokens], *, target_prefix: Optional[Sequence[str]] = None,
                        beam_size: int = 2, num_hypotheses: int = 1, length_penalty: float = 1.0,
                        max_decoding_length: int = 256, min_decoding_length: int = 1,
                        repetition_penalty: float = 1.0,
                        suppress_sequences: Optional[Sequence[Sequence[str]]] = None,
                        end_token: Optional[Union[str, Sequence[str]]] = None,
                        return_attention: bool = False, replace_unknowns: bool = False,
                        max_batch_size: int = 0, max_input_length: int = 1024) -> List[TranslationResult]:
        """Translate tokenised sources, with the options and defaults of
        ``ctranslate2.Translator.translate_batch``.

        Args:
            source: a list of sources, each a list of tokens (or one str of space-separated
                tokens). Unknown tokens become <unk>; an empty source gives num_hypotheses
                empty hypotheses with score 0, as CTranslate2.
            target_prefix: tokens forcing the start of every hypothesis (included in it).
            beam_size: 1 = greedy search. num_hypotheses: 1 .. beam_size results per source.
            length_penalty: alpha of score / len**alpha (CTranslate2's form).
            max_decoding_length / min_decoding_length: decoding steps (end token included).
            repetition_penalty: > 0; 1 = off (CTRL, Keskar et al. 2019).
            suppress_sequences: token sequences never generated (one-token sequences suppress
                the token).
            end_token: token(s) that end a hypothesis (default "</s>").
            return_attention: fill TranslationResult.attention.
            replace_unknowns: replace a generated <unk> by the source token it attends most.
            max_batch_size: sources decoded together; as CTranslate2, the sources are sorted from
                the longest to the shortest and split in batches of this many (0 = one batch).
                The words do not depend on it, save for near-ties; scores can change in their
                last bits (float32: the summation order of a batch; int8: the padding is part of
                the attention arithmetic), as CTranslate2's do.
            max_input_length: sources are truncated to their first max_input_length tokens
                (0 = no limit), as CTranslate2 does.
        Returns:
            one TranslationResult per source.
        Raises:
            TypeError: a source that is neither tokens nor str; a non-str token.
            ValueError: bad options (beam_size < 1, num_hypotheses > beam_size, ...; libattn's
                message), a prefix / end / suppressed token missing from the target vocabulary,
                a token with whitespace.
        """
        if isinstance(source, (str, bytes)):
            raise TypeError("translate_batch: source must be a list of sources (each a list of tokens)")
        srcs = [_source(s, i) for i, s in enumerate(source)]
        fn = "translate_batch"
        to = ffi.new("attn_translate_opts *", lib.attn_translate_opts_default())
        o = to.decode  # the decoding options, inside `to`
        o.beam_size = check_int(beam_size, "beam_size", fn)
        o.n_best = check_int(num_hypotheses, "num_hypotheses", fn)
        o.length_penalty = check_float(length_penalty, "length_penalty", fn)
        o.max_length = check_int(max_decoding_length, "max_decoding_length", fn)
        o.min_length = check_int(min_decoding_length, "min_decoding_length", fn)
        o.repetition_penalty = check_float(repetition_penalty, "repetition_penalty", fn)
        o.return_attention = 1 if return_attention else 0
        o.return_prefix = 1
        to.max_input_length = check_int(max_input_length, "max_input_length", fn, minimum=0)
        to.max_batch_size = check_int(max_batch_size, "max_batch_size", fn, minimum=0)
        to.replace_unknowns = 1 if replace_unknowns else 0
        keep: List[Any] = []
        prefix = self._target_ids(target_prefix, "target_prefix")
        if prefix:
            arr = ffi.new("int32_t[]", prefix)
            keep.append(arr)
            o.prefix, o.prefix_len = arr, len(prefix)
        if end_token is not None:
            ends = self._target_ids(end_token, "end_token")
            if not ends:
                raise ValueError(f"{fn}: end_token is empty")
            arr = ffi.new("int32_t[]", ends)
            keep.append(arr)
            o.end_ids, o.n_end = arr, len(ends)
        if suppress_sequences:
            single, seqs = [], []
            for sq in suppress_sequences:
                ids = self._target_ids(sq, "suppress_sequences")
                if len(ids) == 1:
                    single.append(ids[0])
                elif ids:
                    seqs.append(ids)
            if single:
                arr = ffi.new("int32_t[]", single)
                keep.append(arr)
                o.suppress, o.n_suppress = arr, len(single)
            if seqs:
                arrs = [ffi.new("int32_t[]", sq) for sq in seqs]
                ptrs = ffi.new("int32_t *[]", arrs)
                lens = ffi.new("int64_t[]", [len(sq) for sq in seqs])
                keep += [arrs, ptrs, lens]
                o.suppress_seqs, o.suppress_seq_lens, o.n_suppress_seqs = ptrs, lens, len(seqs)
        results: List[TranslationResult] = []
        with self._lock:
            n = len(srcs)
            if n:
                bufs = [ffi.new("char[]", b) for b in srcs]
                texts = ffi.new("const char *[]", bufs)
                out = ffi.new("attn_translation[]", n)
                raise_for(lib.attn_translate(self._m, out, texts, n, to))
                try:
                    for t in out:
                        src = [ffi.string(t.src_tokens[i]).decode("utf-8", "replace") for i in range(t.src_len)]
                        hyps, scores, att = [], [], []
                        for h in t.hyps[0:t.n]:
                            hyps.append([ffi.string(h.tokens[i]).decode("utf-8", "replace") for i in range(h.len)])
                            scores.append(float(h.score))
                            if return_attention and h.attention != ffi.NULL:
                                a = np.frombuffer(ffi.buffer(h.attention, 4 * h.len * t.src_len), dtype=np.float32)
                                att.append(a.reshape(h.len, t.src_len).copy())
                        results.append(TranslationResult(hyps, scores, att, src))
                finally:
                    lib.attn_translations_free(out, n)
        return results

    def translate(self, text: str, **options: Any) -> str:
        """The best hypothesis for one source given as space-separated tokens, joined by spaces
        (options as translate_batch)."""
        if not isinstance(text, str):
            raise TypeError(f"translate: text must be a str, got {type(text).__name__}")
        return " ".join(self.translate_batch([text], **options)[0].hypotheses[0])
