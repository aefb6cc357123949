"""Decoder-only language models (Llama architecture: GGUF files or llama2.c checkpoints) with
streaming generation, shaped like llama-cpp-python's Llama."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from ._core import check_float, check_int, raise_for
from ._ffi import ffi, lib

Prompt = Union[str, Sequence[int]]


class LLM:
    """A Llama-architecture model run by libattn (include/attn_llama.h): token embedding,
    RMSNorm pre-norm blocks with RoPE, grouped-query attention over a KV cache (attn's fused
    SDPA kernel) and SwiGLU, then the output matrix.

    ``LLM(path)`` opens a GGUF file (architecture llama — Llama 1-3, SmolLM2 — or qwen2;
    weights F32 / F16 / BF16 / Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q2_K..Q6_K used in
    place from the mmap'ed file; tokenizer and chat template from the file) or a llama2.c
    checkpoint (then ``tokenizer=`` names its tokenizer.bin).

    ``generate(prompt, ...)`` yields the text as it is produced (never half a UTF-8
    character); ``__call__`` returns it whole; ``chat(messages)`` applies ChatML for models
    whose chat template is ChatML. Each call uses its own KV cache, so one LLM may serve
    several threads; the GIL is released during the forward passes.

    Raises (constructor): OSError (missing file), ValueError (malformed file),
    NotImplementedError (another architecture or tensor type), TypeError / ValueError for a
    llama2.c checkpoint without its tokenizer.
    """

    def __init__(self, model_path: Union[str, "os.PathLike[str]"], tokenizer: Optional[str] = None,
                 n_ctx: int = 0):
        path = os.fspath(model_path)
        raw = os.fsencode(path)
        if b"\x00" in raw:
            raise ValueError("LLM: model_path contains a NUL character")
        with open(path, "rb") as f:  # OSError for a missing file, with its name
            magic = f.read(4)
        pp = ffi.new("attn_llama **")
        self.is_gguf = magic == b"GGUF"
        if self.is_gguf:
            raise_for(lib.attn_llama_load_gguf(pp, raw))
        else:
            raise_for(lib.attn_llama_load_llama2c(pp, raw))
        self._m = ffi.gc(pp[0], lib.attn_llama_free)
        c = lib.attn_llama_get_config(self._m)
        self.n_ctx = check_int(n_ctx, "n_ctx", "LLM", minimum=0) or int(c.context)
        if self.is_gguf:
            self._tok = lib.attn_llama_tokenizer(self._m)
            self._own_tok = None
        else:
            if tokenizer is None:
                raise ValueError("LLM: a llama2.c checkpoint needs tokenizer= (its tokenizer.bin)")
            tp = ffi.new("attn_bpe **")
            raise_for(lib.attn_bpe_load_llama2c(tp, os.fsencode(os.fspath(tokenizer)), c.vocab_size))
            self._own_tok = ffi.gc(tp[0], lib.attn_bpe_free)
            self._tok = self._own_tok
        s = lambda p: ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else None
        self.config: Dict[str, Any] = {
            "dim": int(c.dim), "hidden_dim": int(c.hidden_dim), "n_layers": int(c.n_layers),
            "n_heads": int(c.n_heads), "n_kv_heads": int(c.n_kv_heads), "head_dim": int(c.head_dim),
            "vocab_size": int(c.vocab_size), "context": int(c.context), "rope_theta": float(c.rope_theta),
            "norm_eps": float(c.norm_eps), "bos_id": int(c.bos_id), "eos_id": int(c.eos_id),
            "eot_id": int(c.eot_id), "add_bos": bool(c.add_bos), "arch": s(c.arch),
            "weight_type": s(c.weight_type),
        }
        self.chat_template: Optional[str] = s(lib.attn_llama_chat_template(self._m)) if self.is_gguf else None
        self._cap = 3 * int(lib.attn_bpe_max_token_bytes(self._tok)) + 32
        self.model_path = path

    def __repr__(self) -> str:
        c = self.config
        return (f"LLM({self.model_path!r}: {c['arch']}, {c['n_layers']} layers, dim {c['dim']}, "
                f"{c['n_heads']}/{c['n_kv_heads']} heads, vocab {c['vocab_size']}, {c['weight_type']})")

    # ------------------------------------------------------------ tokens

    def tokenize(self, text: str, add_bos: Optional[bool] = None, special: bool = False) -> List[int]:
        """Token ids of `text`. add_bos: None = the model's rule (llama2.c yes; many GGUF chat
        models no). special: control-token strings in the text (e.g. "<|im_start|>") become
        their ids. Raises TypeError (not a str), ValueError (NUL, lone surrogate)."""
        if not isinstance(text, str):
            raise TypeError(f"tokenize: text must be a str, got {type(text).__name__}")
        if "\x00" in text:
            raise ValueError("tokenize: text contains a NUL character")
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"tokenize: text is not valid Unicode ({e.reason})") from None
        n = ffi.new("int64_t *")
        rc = lib.attn_bpe_encode(self._tok, raw, len(raw), 1 if special else 0, ffi.NULL, 0, n)
        if rc < 0 and n[0] == 0:
            raise_for(rc)
        ids = ffi.new("int32_t[]", max(int(n[0]), 1))
        raise_for(lib.attn_bpe_encode(self._tok, raw, len(raw), 1 if special else 0, ids, n[0], n))
        out = [int(ids[i]) for i in range(n[0])]
        bos = self.config["bos_id"]
        if (self.config["add_bos"] if add_bos is None else add_bos) and bos >= 0:
            out.insert(0, bos)
        return out

    def detokenize(self, ids: Sequence[int], special: bool = False) -> str:
        """The text of token ids (special tokens rendered when special=True)."""
        arr = self._ids(ids, "detokenize")
        cap = self._cap * max(len(arr), 1) + 1
        out = ffi.new("char[]", cap)
        n = ffi.new("size_t *")
        raise_for(lib.attn_bpe_decode(self._tok, arr, len(arr), 1 if special else 0, out, cap, n))
        return ffi.buffer(out, n[0])[:].decode("utf-8", "replace")

    def _ids(self, ids: Sequence[int], fn: str) -> Any:
        if isinstance(ids, (str, bytes)):
            raise TypeError(f"{fn}: ids must be a sequence of ints")
        vals = [check_int(i, "token id", fn) for i in ids]
        V = self.config["vocab_size"]
        for i in vals:
            if not 0 <= i < V:
                raise ValueError(f"{fn}: token id {i} is outside the vocabulary [0, {V})")
        return ffi.new("int32_t[]", vals) if vals else ffi.new("int32_t[]", 1)

    # ------------------------------------------------------------ forward

    def logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Logits float32 ``[n, vocab_size]`` for every position of a fresh sequence of
        tokens (one causal pass). Raises ValueError (ids out of range, longer than n_ctx)."""
        arr = self._ids(tokens, "logits")
        n = len(tokens)
        if n < 1:
            raise ValueError("logits: at least one token is needed")
        st = self._state(n)
        out = np.empty((n, self.config["vocab_size"]), dtype=np.float32)
        raise_for(lib.attn_llama_forward(st, ffi.cast("float *", out.ctypes.data), arr, n, 1, 0))
        return out

    def _state(self, max_len: int) -> Any:
        sp = ffi.new("attn_llama_state **")
        raise_for(lib.attn_llama_state_create(sp, self._m, max_len))
        return ffi.gc(sp[0], lib.attn_llama_state_free)

    # ------------------------------------------------------------ generation

    def generate(self, prompt: Prompt, max_tokens: int = 128, temperature: float = 0.8, top_k: int = 40,
                 top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0, repeat_last_n: int = 64,
                 seed: int = 0, stop: Optional[Union[str, Sequence[str]]] = None,
                 add_bos: Optional[bool] = None) -> Iterator[str]:
        """Continue `prompt` (a str, or token ids used as given), yielding the text of each
        token as it is sampled (UTF-8 characters split across tokens come out whole). Stops
        after max_tokens, at the end-of-sequence / end-of-turn token, at a stop string (not
        included in the text), or when the context (n_ctx) is full: a prompt of P tokens gets
        at most n_ctx - P + 1 (the library's loop, attn_generation_next, as the CLI).

        Sampling (include/attn_sampling.h, the order of transformers' generate()): repetition
        penalty over the last repeat_last_n ids, temperature (0 = greedy argmax), top-k,
        top-p, min-p, then a draw from xoshiro256** seeded by `seed` (the same seed gives the
        same text on every machine).

        Raises (before the first token): TypeError / ValueError for bad arguments (the
        sampler's message for out-of-range values), ValueError if the prompt does not fit in
        n_ctx or holds an id outside the vocabulary.
        """
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        if any(not isinstance(x, str) or not x or "\x00" in x for x in stops):
            raise ValueError("generate: stop strings must be non-empty str without NUL")
        run = self._setup("generate", prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                          repeat_last_n, seed, add_bos, stops)
        return (text for _, text in run if text)

    def generate_ids(self, prompt: Prompt, max_tokens: int = 128, temperature: float = 0.8, top_k: int = 40,
                     top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
                     repeat_last_n: int = 64, seed: int = 0, add_bos: Optional[bool] = None) -> Iterator[int]:
        """As generate (without stop strings), yielding the sampled token ids (the
        end-of-sequence / end-of-turn token is not yielded), like llama-cpp-python's
        Llama.generate."""
        run = self._setup("generate_ids", prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                          repeat_last_n, seed, add_bos, [])
        return (t for t, _ in run if t >= 0)

    def _setup(self, fn: str, prompt: Prompt, max_tokens: int, temperature: float, top_k: int, top_p: float,
               min_p: float, repeat_penalty: float, repeat_last_n: int, seed: int,
               add_bos: Optional[bool], stops: List[str]) -> Iterator[Any]:
        if isinstance(prompt, str):
            ids = self.tokenize(prompt, add_bos=add_bos)
        else:
            ids = [check_int(i, "token id", fn) for i in prompt]
        if not ids:
            raise ValueError(f"{fn}: the prompt is empty (and the model adds no BOS)")
        o = ffi.new("attn_generate_opts *", lib.attn_generate_opts_default())
        o.max_tokens = check_int(max_tokens, "max_tokens", fn, minimum=0)
        p = o.sampling  # attn_sampler_params: field, value, the argument's name, its check
        for field, value, name, check in (("temperature", temperature, "temperature", check_float),
                                          ("top_k", top_k, "top_k", check_int), ("top_p", top_p, "top_p", check_float),
                                          ("min_p", min_p, "min_p", check_float),
                                          ("repetition_penalty", repeat_penalty, "repeat_penalty", check_float),
                                          ("repeat_last_n", repeat_last_n, "repeat_last_n", check_int)):
            setattr(p, field, check(value, name, fn))
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 1 << 64:
            raise ValueError(f"{fn}: seed must be an int in [0, 2**64), got {seed!r}")
        p.seed = int(seed)
        sp = ffi.new("attn_sampler **")  # the sampler's own checks, before any work
        raise_for(lib.attn_sampler_create(sp, ffi.addressof(o, "sampling"), self.config["vocab_size"]))
        lib.attn_sampler_free(sp[0])
        arr = self._ids(ids, fn)
        if len(ids) > self.n_ctx:
            raise ValueError(f"{fn}: the prompt has {len(ids)} tokens, more than n_ctx = {self.n_ctx}")
        keep = [ffi.new("char[]", x.encode("utf-8")) for x in stops]
        if keep:  # cffi frees an array once its last reference goes: `keep` holds it for the run
            keep.append(ffi.new("const char *[]", keep))
            o.stop = keep[-1]
            o.n_stop = len(stops)
        return self._run(o, arr, len(ids), keep)

    def _run(self, o: Any, arr: Any, n: int, keep: List[Any]) -> Iterator[Any]:
        """Yields (token id, its text) pairs from the library's generation loop; the text held
        back until the end comes with id -1. `keep` holds the stop strings' buffers alive."""
        st = self._state(self.n_ctx)
        gp = ffi.new("attn_generation **")
        raise_for(lib.attn_generation_start(gp, st, self._tok, arr, n, o, ffi.NULL))
        g = ffi.gc(gp[0], lib.attn_generation_free)
        text = ffi.new("const char **")
        ln = ffi.new("size_t *")
        tok = ffi.new("int32_t *")
        while True:
            rc = lib.attn_generation_next(g, text, ln, tok)
            raise_for(rc)
            if rc == 0:
                return
            yield int(tok[0]), ffi.buffer(text[0], ln[0])[:].decode("utf-8", "replace")

    def __call__(self, prompt: Prompt, **options: Any) -> str:
        """The whole generated text (options as generate)."""
        return "".join(self.generate(prompt, **options))

    def chat(self, messages: Sequence[Dict[str, str]], **options: Any) -> Iterator[str]:
        """Answer a conversation, yielding the reply's text as it is produced.

        messages: [{"role": "system" | "user" | "assistant", "content": str}, ...] (at least one;
        "developer" is taken as "system", as OpenAI's API and `attn serve` do), formatted
        by the library's chat template (attn_chat_format: ChatML, "<|im_start|>role\\ncontent
        <|im_end|>\\n" ..., then the assistant's turn), with the template's default system turn
        first when the conversation has none — the same prompt as `attn chat` and the server;
        generation stops at the end-of-turn token. Options as generate.
        Raises: NotImplementedError for a model whose template is not ChatML;
        TypeError / ValueError for malformed messages; ValueError for no messages (the
        server's 400 for an empty 'messages').
        """
        sysp = ffi.new("char **")
        tmpl = lib.attn_llama_chat_template(self._m) if self.is_gguf else ffi.NULL
        if lib.attn_chat_template_system(sysp, tmpl, 0) < 0:
            raise NotImplementedError("chat: this model's chat template is not ChatML "
                                      "(use generate() with a prompt formatted for it)")
        dflt = ffi.gc(sysp[0], lib.free) if sysp[0] != ffi.NULL else ffi.NULL
        if isinstance(messages, (str, bytes, dict)):
            raise TypeError("chat: messages must be a sequence of {'role': ..., 'content': ...} dicts")
        if len(messages) == 0:
            # as the server (POST /v1/chat/completions answers 400, param 'messages'): a reply to
            # nothing would be the template's default system turn answered by itself
            raise ValueError("chat: messages is empty: give at least one message")
        keep, arr = [], ffi.new("attn_chat_message[]", len(messages))
        for i, msg in enumerate(messages):
            if not isinstance(msg, dict) or not isinstance(msg.get("content"), str) or \
                    msg.get("role") not in ("system", "developer", "user", "assistant"):
                raise TypeError(f"chat: message {i} must be {{'role': system|developer|user|assistant, 'content': str}}")
            if "\x00" in msg["content"]:
                raise ValueError(f"chat: message {i} contains a NUL character")
            try:
                content = msg["content"].encode("utf-8")
            except UnicodeEncodeError as e:
                raise ValueError(f"chat: message {i} is not valid Unicode ({e.reason})") from None
            role = "system" if msg["role"] == "developer" else msg["role"]  # OpenAI's newer name, as the server
            keep += [ffi.new("char[]", role.encode()), ffi.new("char[]", content)]
            arr[i].role, arr[i].content = keep[-2], keep[-1]
        out = ffi.new("char **")
        raise_for(lib.attn_chat_format(out, arr, len(messages), dflt))
        text = ffi.string(ffi.gc(out[0], lib.free)).decode("utf-8")
        ids = self.tokenize(text, special=True)
        return self.generate(ids, **options)
