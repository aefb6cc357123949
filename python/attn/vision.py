"""Image classification with Vision Transformers, shaped like transformers'
pipeline("image-classification")."""
from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np

from ._core import check_int, load_model, raise_for
from ._ffi import ffi, lib

Image = Union[str, "os.PathLike[str]", np.ndarray]


class ImageClassifier:
    """A Vision Transformer (Dosovitskiy et al. 2021) as transformers'
    ViTForImageClassification computes it, run by libattn (include/attn_vit.h).

    ``ImageClassifier(model_dir)`` opens config.json, model.safetensors and optionally
    preprocessor_config.json (ViTImageProcessor settings). Images are PNG / JPEG paths or
    uint8 arrays ``[H, W]`` (grey) / ``[H, W, 1]`` / ``[H, W, 3]`` (RGB); they are converted
    to the model's channels, resized and normalised as ViTImageProcessor does.
    ``clf(image, top_k=5)`` returns ``[{"label": ..., "score": ...}, ...]`` like the
    transformers pipeline. Calls on one classifier are serialised by a lock; the GIL is
    released while the model runs.

    Raises (constructor): OSError (missing file), ValueError (malformed config or weights),
    NotImplementedError (another model type or activation).
    """

    def __init__(self, model_dir: Union[str, "os.PathLike[str]"]):
        self._m = load_model(model_dir, "ImageClassifier", "attn_vit", lib.attn_vit_load, lib.attn_vit_free)
        c = lib.attn_vit_get_config(self._m)
        self.model_dir = os.fspath(model_dir)
        self.config: Dict[str, Any] = {
            "image_size": (int(c.image_h), int(c.image_w)), "patch_size": (int(c.patch_h), int(c.patch_w)),
            "channels": int(c.channels), "d_model": int(c.d_model), "n_layers": int(c.n_layers),
            "n_heads": int(c.n_heads), "d_ff": int(c.d_ff), "n_labels": int(c.n_labels),
        }
        self.labels: List[str] = [ffi.string(lib.attn_vit_label(self._m, i)).decode("utf-8", "replace")
                                  for i in range(int(c.n_labels))]
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        c = self.config
        return (f"ImageClassifier({self.model_dir!r}: {c['n_layers']} layers, {c['n_heads']} heads, "
                f"E={c['d_model']}, image {c['image_size']}, patch {c['patch_size']}, {c['n_labels']} labels)")

    # ------------------------------------------------------------ input

    def preprocess(self, image: Image, keep_size: bool = False) -> np.ndarray:
        """The model's input for one image, float32 ``[C, H, W]``: channels converted (grey ->
        RGB by repeating, RGB -> grey by BT.601 luma), resized to the processor's size
        (bilinear; not with keep_size), rescaled and normalised with the processor's mean/std.
        Raises: OSError (unreadable file), ValueError (not a PNG / JPEG, bad array shape),
        TypeError (array not uint8)."""
        img = ffi.new("attn_image *")
        keep: Any = None
        if isinstance(image, np.ndarray):
            a = image
            if a.dtype != np.uint8:
                raise TypeError(f"preprocess: an image array must be uint8, got {a.dtype}")
            if a.ndim == 3 and a.shape[2] in (1, 3):
                ch = a.shape[2]
            elif a.ndim == 2:
                ch = 1
            else:
                raise ValueError(f"preprocess: an image array must be [H, W], [H, W, 1] or [H, W, 3], got {a.shape}")
            if a.shape[0] < 1 or a.shape[1] < 1:
                raise ValueError(f"preprocess: empty image {a.shape}")
            keep = np.ascontiguousarray(a)
            img.data = ffi.cast("uint8_t *", keep.ctypes.data)
            img.width, img.height, img.channels = a.shape[1], a.shape[0], ch
            owned = False
        elif isinstance(image, (str, os.PathLike)):
            p = os.fsencode(os.fspath(image))
            if b"\x00" in p:
                raise ValueError("preprocess: path contains a NUL character")
            raise_for(lib.attn_image_load(img, p))
            owned = True
        else:
            raise TypeError(f"preprocess: image must be a path or a uint8 array, got {type(image).__name__}")
        try:
            C = self.config["channels"]
            H, W = (int(img.height), int(img.width)) if keep_size else self._input_size(img)
            out = np.empty((C, H, W), dtype=np.float32)
            h, w = ffi.new("int64_t *"), ffi.new("int64_t *")
            raise_for(lib.attn_vit_preprocess(self._m, ffi.cast("float *", out.ctypes.data), out.size, h, w, img,
                                              1 if keep_size else 0))
            return out[:, : h[0], : w[0]] if (h[0], w[0]) != (H, W) else out
        finally:
            if owned:
                lib.attn_image_free(img)

    def _input_size(self, img: Any) -> Tuple[int, int]:
        c = lib.attn_vit_get_config(self._m)
        if c.do_resize:
            return int(c.resize_h), int(c.resize_w)
        return int(img.height), int(img.width)

    def _batch(self, images: Union[Image, Sequence[Image]]) -> Tuple[np.ndarray, bool]:
        single = isinstance(images, (str, os.PathLike)) or (isinstance(images, np.ndarray) and images.dtype == np.uint8)
        items = [images] if single else list(images)
        if not items:
            raise ValueError("no images given")
        px = [self.preprocess(i) for i in items]
        if any(p.shape != px[0].shape for p in px):
            raise ValueError(f"images of different preprocessed sizes {sorted({p.shape for p in px})} cannot form "
                             "one batch (the model does not resize them); classify them one at a time")
        return np.stack(px), single

    # ------------------------------------------------------------ model

    def forward(self, pixels: np.ndarray, output_attentions: bool = False) -> Any:
        """The model on preprocessed pixels float32 ``[B, C, H, W]`` (H, W need not be the
        model's size: position embeddings are interpolated bicubically, as transformers'
        interpolate_pos_encoding=True).
        Returns: logits float32 ``[B, n_labels]``, or (logits, attentions float32
        ``[layers, B, heads, T, T]``) with output_attentions (T = 1 + patches).
        Raises: TypeError (not float32), ValueError (shape, an image smaller than a patch)."""
        px = np.ascontiguousarray(pixels)
        if px.dtype != np.float32:
            raise TypeError(f"forward: pixels must be float32, got {px.dtype}")
        C = self.config["channels"]
        if px.ndim != 4 or px.shape[1] != C or px.shape[0] < 1:
            raise ValueError(f"forward: pixels must be [B, {C}, H, W] with B >= 1, got {px.shape}")
        B, _, H, W = px.shape
        c = self.config
        T = int(lib.attn_vit_tokens(self._m, H, W))
        if T == 0:
            raise ValueError(f"forward: a {H} x {W} image is smaller than one {c['patch_size']} patch")
        logits = np.empty((B, c["n_labels"]), dtype=np.float32) if c["n_labels"] else None
        att = np.empty((c["n_layers"], B, c["n_heads"], T, T), dtype=np.float32) if output_attentions else None
        extra = ffi.new("attn_vit_extra *")
        if att is not None:
            extra.attentions = ffi.cast("float *", att.ctypes.data)
        arena = ffi.new("attn_arena *")
        raise_for(lib.attn_arena_init(arena, 0))
        try:
            with self._lock:
                raise_for(lib.attn_vit_forward(
                    self._m, ffi.cast("float *", logits.ctypes.data) if logits is not None else ffi.NULL,
                    extra, ffi.cast("float *", px.ctypes.data), B, H, W, arena))
        finally:
            lib.attn_arena_free(arena)
        return (logits, att) if output_attentions else logits

    def logits(self, images: Union[Image, Sequence[Image]]) -> np.ndarray:
        """Logits float32 ``[B, n_labels]`` (``[n_labels]`` for one image) of images (paths or
        uint8 arrays), preprocessed as the model's processor says."""
        px, single = self._batch(images)
        out = self.forward(px)
        return out[0] if single else out

    def __call__(self, images: Union[Image, Sequence[Image]], top_k: int = 5) -> Any:
        """Top-k labels with softmax probabilities: ``[{"label": str, "score": float}, ...]``
        best first for one image, a list of such lists for several (as transformers'
        image-classification pipeline)."""
        k = check_int(top_k, "top_k", "ImageClassifier", minimum=1)
        if not self.labels:
            raise ValueError("ImageClassifier: this model has no classifier head (a ViTModel)")
        px, single = self._batch(images)
        lg = self.forward(px).astype(np.float64)
        p = np.exp(lg - lg.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        res = []
        for row in p:
            order = np.argsort(-row, kind="stable")[:k]
            res.append([{"label": self.labels[i], "score": float(row[i])} for i in order])
        return res[0] if single else res

    def attention(self, image: Image) -> Tuple[np.ndarray, np.ndarray]:
        """Attention of one image: (weights float32 ``[layers, heads, T, T]`` — T = 1 + patches,
        token 0 the CLS token, then the patches row by row — and the attention rollout
        float32 ``[T, T]`` of Abnar & Zuidema 2020 (head-averaged attention plus identity,
        multiplied through the layers; row 0, columns 1: is where the CLS token draws from))."""
        px = self.preprocess(image)[None]
        _, att = self.forward(px, output_attentions=True)
        L, _, H, T, _ = att.shape
        roll = np.empty((T, T), dtype=np.float32)
        raise_for(lib.attn_attention_rollout(ffi.cast("float *", roll.ctypes.data),
                                             ffi.cast("float *", att.ctypes.data), L, 1, H, T))
        return att[:, 0], roll
