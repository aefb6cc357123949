"""attn — Transformer attention in C (libattn), from Python with NumPy arrays.

    import numpy as np, attn
    q = np.random.randn(1, 8, 128, 64).astype(np.float32)
    out = attn.sdpa(q, q, q, is_causal=True)                   # torch's semantics, [1, 8, 128, 64]
    emb = attn.Embedder("models/all-MiniLM-L6-v2").encode(["A man plays a guitar."])  # [1, 384]

Functions: sdpa (scaled_dot_product_attention), sdpa_backward, variant, positional_encoding, layer_norm,
rms_norm, rope, softmax, set_num_threads, get_num_threads, version. Classes: Embedder
(sentence embeddings, attention maps), Translator (CTranslate2 Transformer models), Whisper
(speech recognition).
Inputs are NumPy float32 arrays of any strides; outputs are new C-contiguous float32 arrays.
Errors from libattn are raised as AttnError subclasses that are also ValueError / TypeError /
OSError / MemoryError / NotImplementedError, carrying the library's message. The GIL is
released while libattn computes (cffi releases it around every C call), so Python threads
can run attn calls in parallel with other work.
"""
from ._core import (AttnError, AttnIOError, AttnMemoryError, DTypeError, FormatError,
                    InvalidArgumentError, RangeError, ShapeError, UnsupportedError,
                    get_num_threads, set_num_threads, version)
from ._ffi import library_path
from .attention import VARIANTS, scaled_dot_product_attention, sdpa, sdpa_backward, variant
from .embedder import Embedder
from .ops import layer_norm, positional_encoding, rms_norm, rope, softmax
from .llm import LLM
from .speech import Segment, Transcription, Whisper
from .translate import TranslationResult, Translator
from .vision import ImageClassifier

__version__ = "0.1.0"

__all__ = [
    "sdpa", "scaled_dot_product_attention", "sdpa_backward", "variant", "VARIANTS", "positional_encoding",
    "layer_norm", "rms_norm", "rope", "softmax", "Embedder", "Translator", "TranslationResult", "Whisper", "Transcription", "Segment", "LLM",
    "ImageClassifier",
    "set_num_threads",
    "get_num_threads", "version", "library_path", "AttnError", "InvalidArgumentError",
    "ShapeError", "DTypeError", "AttnMemoryError", "AttnIOError", "FormatError", "RangeError",
    "UnsupportedError",
]
