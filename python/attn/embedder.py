"""Sentence embeddings and attention maps from BERT-family sentence-transformers models."""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Dict, Iterable, List, Tuple, Union

import numpy as np

from ._core import check_int, load_model, raise_for
from ._ffi import ffi, lib

_POOLING = {0: "mean", 1: "cls", 2: "max"}


def _utf8(text: Any, what: str, fn: str) -> bytes:
    if not isinstance(text, str):
        raise TypeError(f"{fn}: {what} must be a str, got {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{fn}: {what} is not valid Unicode ({e.reason} at character {e.start})") from None


class Embedder:
    """A sentence-transformers BERT model (e.g. all-MiniLM-L6-v2) run by libattn.

    ``Embedder(model_dir)`` opens a directory holding config.json, model.safetensors,
    tokenizer.json and optionally sentence_bert_config.json, 1_Pooling/config.json and
    modules.json (see include/attn_bert.h); weights are memory-mapped read-only. Nothing is
    downloaded. Calls on one Embedder are serialised by a lock; the GIL is released while
    the model runs.

    Raises (constructor):
        OSError (AttnIOError): a missing or unreadable file (the message names it).
        ValueError (FormatError, ShapeError, InvalidArgumentError): a malformed file.
        NotImplementedError (UnsupportedError): a model feature attn does not implement.
    """

    def __init__(self, model_dir: Union[str, "os.PathLike[str]"]):
        self._m = load_model(model_dir, "Embedder", "attn_bert", lib.attn_bert_load, lib.attn_bert_free)
        self._tok = lib.attn_bert_tokenizer(self._m)
        c = lib.attn_bert_get_config(self._m)
        self.model_dir = os.fspath(model_dir)
        self.config: Dict[str, Any] = {
            "d_model": int(c.d_model), "n_layers": int(c.n_layers), "n_heads": int(c.n_heads),
            "d_ff": int(c.d_ff), "vocab_size": int(c.vocab_size),
            "max_positions": int(c.max_positions), "max_seq_len": int(c.max_seq_len),
            "pooling": _POOLING.get(int(c.pooling), "mean"), "normalize": bool(c.normalize),
            "eps": float(c.eps),
        }
        self._lock = threading.Lock()

    # ------------------------------------------------------------ properties

    @property
    def dim(self) -> int:
        """Embedding size E (the model's hidden_size)."""
        return self.config["d_model"]

    def get_sentence_embedding_dimension(self) -> int:
        """Embedding size E, as SentenceTransformer's method of that name."""
        return self.dim

    @property
    def max_seq_length(self) -> int:
        """Truncation length in word pieces, [CLS] and [SEP] included (256 for MiniLM)."""
        return self.config["max_seq_len"]

    def __repr__(self) -> str:
        c = self.config
        return (f"Embedder({self.model_dir!r}: {c['n_layers']} layers, {c['n_heads']} heads, "
                f"E={c['d_model']}, pooling={c['pooling']}, normalize={c['normalize']})")

    def close(self) -> None:
        """Release the model now (it is released on garbage collection otherwise)."""
        with self._lock:
            if self._m is not None:
                ffi.release(self._m)
                self._m = None

    def __enter__(self) -> "Embedder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _model(self) -> Any:
        if self._m is None:
            raise ValueError("Embedder: the model was closed")
        return self._m

    # ------------------------------------------------------------ tokens

    def _ids(self, raw: bytes) -> np.ndarray:
        cap = self.max_seq_length
        ids = np.empty(cap, dtype=np.int32)
        n = ffi.new("int64_t *")
        raise_for(lib.attn_tokenizer_encode(self._tok, raw, len(raw), 1, cap,
                                            ffi.cast("int32_t *", ids.ctypes.data), n, cap, ffi.NULL))
        return ids[: n[0]].copy()

    def token_ids(self, text: str) -> np.ndarray:
        """Word-piece ids of `text` (int32 ``[L]``): [CLS] ... [SEP], truncated to
        max_seq_length, as the tokenizer of sentence-transformers / transformers gives them.
        Raises TypeError (not a str), ValueError (lone surrogate)."""
        raw = _utf8(text, "text", "token_ids")
        with self._lock:
            self._model()
            return self._ids(raw)

    def tokenize(self, text: str) -> List[str]:
        """Word pieces of `text` as the model sees them: [CLS] ... [SEP], truncated to
        max_seq_length (continuation pieces keep their "##")."""
        raw = _utf8(text, "text", "tokenize")
        with self._lock:
            self._model()
            ids = self._ids(raw)
            return [ffi.string(lib.attn_tokenizer_id_to_token(self._tok, int(i))).decode("utf-8", "replace")
                    for i in ids]

    # ------------------------------------------------------------ embeddings

    def encode(self, sentences: Union[str, Iterable[str]], batch_size: int = 32, normalize: Any = None,
               show_progress_bar: bool = False) -> np.ndarray:
        """Sentence embeddings, as ``SentenceTransformer.encode`` computes them: tokenize
        (truncate to max_seq_length word pieces), run the encoder in batches of sentences
        of similar length, pool (the model's mode, mean by default), normalise.

        Args:
            sentences: a str, or an iterable of str.
            batch_size: sentences per forward pass (>= 1). Results do not depend on it
                (to float rounding: padding keys are masked).
            normalize: None = the model's own pipeline (L2-normalised when modules.json has
                a Normalize module, as all-MiniLM-L6-v2); True = L2-normalised
                (x / max(||x||, 1e-12), torch.nn.functional.normalize); False = the pooled
                embedding without normalisation.
            show_progress_bar: print batch progress to stderr.
        Returns:
            float32 ``[N, E]`` for a list (``[0, E]`` for an empty one), ``[E]`` for a str.
        Raises:
            TypeError: a sentence that is not a str, a non-integer batch_size.
            ValueError: batch_size < 1, a sentence with a lone surrogate (not encodable as
                UTF-8). A NUL character is removed, as the tokenizer's clean_text does.
        """
        fn = "encode"
        single = isinstance(sentences, str)
        if single:
            items: List[Any] = [sentences]
        elif isinstance(sentences, (bytes, bytearray)):
            raise TypeError(f"{fn}: sentences must be str or an iterable of str, got bytes")
        else:
            try:
                items = list(sentences)
            except TypeError:
                raise TypeError(f"{fn}: sentences must be str or an iterable of str, "
                                f"got {type(sentences).__name__}") from None
        bs = check_int(batch_size, "batch_size", fn, minimum=1)
        if normalize not in (None, True, False):
            raise TypeError(f"{fn}: normalize must be None, True or False, got {normalize!r}")
        raw = [_utf8(s, f"sentence {i}", fn) for i, s in enumerate(items)]
        n, E = len(raw), self.dim
        out = np.empty((n, E), dtype=np.float32)
        if n == 0:
            return out
        progress = ffi.NULL
        if show_progress_bar:
            def report(done: int, total: int, user: Any) -> None:
                end = "\n" if done >= total else ""
                print(f"\rBatches: {-(-done // bs)}/{-(-total // bs)}", end=end, file=sys.stderr, flush=True)
            progress = ffi.callback("void(int64_t, int64_t, void *)", report)
        with self._lock:
            m = self._model()
            if normalize is False and self.config["normalize"]:
                self._encode_unnormalized(out, raw, bs, progress)
            else:
                bufs = [ffi.new("char[]", b) for b in raw]
                texts = ffi.new("const char *[]", bufs)
                lens = ffi.new("int64_t[]", [len(b) for b in raw])
                raise_for(lib.attn_bert_embed_n(m, ffi.cast("float *", out.ctypes.data), texts, lens, n, bs,
                                                progress, ffi.NULL))
        if normalize is True and not self.config["normalize"]:
            nrm = np.sqrt(np.sum(out.astype(np.float64) ** 2, axis=1, keepdims=True))
            out = (out / np.maximum(nrm, 1e-12)).astype(np.float32)
        return out[0] if single else out

    def _encode_unnormalized(self, out: np.ndarray, raw: List[bytes], bs: int, progress: Any) -> None:
        """The pooled embeddings without the model's Normalize module (the lock is held)."""
        ids = [self._ids(b) for b in raw]
        order = sorted(range(len(ids)), key=lambda i: (-len(ids[i]), i))
        E, pooling = self.dim, self.config["pooling"]
        arena = ffi.new("attn_arena *")
        raise_for(lib.attn_arena_init(arena, 4 << 20))
        try:
            for s in range(0, len(order), bs):
                rows = order[s:s + bs]
                B, L = len(rows), len(ids[rows[0]])
                bid = np.zeros((B, L), dtype=np.int32)
                blen = np.array([len(ids[r]) for r in rows], dtype=np.int64)
                for b, r in enumerate(rows):
                    bid[b, : len(ids[r])] = ids[r]
                h = np.empty((B, L, E), dtype=np.float32)
                raise_for(lib.attn_bert_forward(self._m, ffi.cast("float *", h.ctypes.data), ffi.NULL,
                                                 ffi.cast("int32_t *", bid.ctypes.data),
                                                 ffi.cast("int64_t *", blen.ctypes.data), B, L, arena))
                for b, r in enumerate(rows):
                    hb = h[b, : blen[b]].astype(np.float64)
                    if pooling == "cls":
                        out[r] = hb[0]
                    elif pooling == "max":
                        out[r] = hb.max(axis=0)
                    else:
                        out[r] = hb.mean(axis=0)
                if progress != ffi.NULL:
                    progress(s + B, len(order), ffi.NULL)
        finally:
            lib.attn_arena_free(arena)

    # ------------------------------------------------------------ attention

    def attention(self, text: str) -> Tuple[np.ndarray, List[str]]:
        """Softmax attention weights of every layer and head for one text.

        Returns:
            (weights, tokens): weights float32 ``[layers, heads, L, L]`` (row i: how query
            token i attends to each key token; rows sum to 1), as transformers'
            ``BertModel(..., output_attentions=True).attentions`` stacked over layers for a
            batch of one; tokens the L word pieces ([CLS] ... [SEP], truncated to
            max_seq_length).
        Raises:
            TypeError: text not a str. ValueError: a lone surrogate.
        """
        raw = _utf8(text, "text", "attention")
        c = self.config
        NL, H, E = c["n_layers"], c["n_heads"], c["d_model"]
        with self._lock:
            m = self._model()
            ids = self._ids(raw)
            L = len(ids)
            att = np.empty((NL, 1, H, L, L), dtype=np.float32)
            hid = np.empty((1, L, E), dtype=np.float32)
            lens = np.array([L], dtype=np.int64)
            extra = ffi.new("attn_bert_extra *")
            extra.hidden_states = ffi.NULL
            extra.attentions = ffi.cast("float *", att.ctypes.data)
            arena = ffi.new("attn_arena *")
            raise_for(lib.attn_arena_init(arena, 0))
            try:
                raise_for(lib.attn_bert_forward(m, ffi.cast("float *", hid.ctypes.data), extra,
                                                ffi.cast("int32_t *", ids.ctypes.data),
                                                ffi.cast("int64_t *", lens.ctypes.data), 1, L, arena))
            finally:
                lib.attn_arena_free(arena)
            tokens = [ffi.string(lib.attn_tokenizer_id_to_token(self._tok, int(i))).decode("utf-8", "replace")
                      for i in ids]
        return att.reshape(NL, H, L, L), tokens
