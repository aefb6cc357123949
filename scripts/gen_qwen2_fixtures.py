#!/usr/bin/env python3
"""Fixtures for the Qwen2 and Llama-3 variants of the Llama decoder (tests/test_qwen2.c), made
without downloads: tiny randomly initialised Hugging Face transformers models (fixed seed),
written as GGUF files the way llama.cpp's convert_hf_to_gguf.py writes them, with transformers'
own logits as the reference.

Models (tests/fixtures/qwen2/):
  qwen2_tiny.f32.gguf / .q8_0.gguf  Qwen2ForCausalLM: 2 layers, hidden 32, 4 heads of 8, 2 KV heads,
      FFN 64, rope_theta 1e6, q/k/v biases, tied output; tokenizer.ggml.pre "qwen2".
  llama3_tiny.f32.gguf / .q8_0.gguf LlamaForCausalLM: 2 layers, hidden 32, 2 heads of 16, 1 KV head,
      FFN 64, rope_theta 5e5, rope_parameters {"rope_type": "llama3", factor 8, low 1, high 4,
      original context 256} (as Llama 3.1), separate output matrix; tokenizer.ggml.pre
      "llama-bpe", BOS added.
  Every parameter is drawn at random (biases and norm weights too: transformers' init would
  leave biases at 0 and norms at 1, which could not catch a missing bias or norm).
  The tokenizers are byte-level BPEs trained here with Hugging Face tokenizers (vocabulary 352 +
  special tokens) behind each model's own pre-tokenizer (Split with the model's regex, then
  ByteLevel without a regex, as in Qwen2's and Llama 3's tokenizer.json).
  GGUF as convert_hf_to_gguf.py writes it (gguf-py GGUFWriter, llama.cpp tensor names):
  Llama's Wq / Wk rows permuted for llama.cpp's adjacent-pair RoPE (LlamaModel.permute), Qwen2's
  left as they are (NeoX RoPE); Llama 3's rope scaling as the rope_freqs.weight tensor
  (LlamaModel.generate_extra_tensors: per-frequency divisors). Q8_0: every 2-D matrix quantized by
  gguf.quants.quantize (llama.cpp's quantize_row_q8_0_ref), 1-D tensors float32.
Reference (tests/fixtures/qwen2/<model>.tsv, <model>_logits.npy, <model>_q8_0_logits.npy):
  per sequence: the prompt ids (texts encoded by the HF tokenizer, and a run of random ids),
  transformers' greedy continuation of 16 tokens, its top-1 / top-2 margins, and the float32
  logits of one forward pass over prompt + continuation [positions, vocab] (all sequences
  stacked). The q8_0 logits come from the same transformers model with every matrix replaced by
  its Q8_0 dequantization and the input of every matrix product quantized to 32-value 8-bit
  blocks as attn's block kernels do (src/ops/quant.c attn__quantize_row_portable: d = amax / 127,
  q = round(x / d), d kept in float32 — ggml's quantize_row_q8_0 rounds d to float16, which
  alone moves these tiny random models' logits by up to 0.12), so that they hold both roundings.
  Also: Llama 3's logits without rope scaling (<model>_noscale_logits.npy), to show the
  scaling changes the result by far more than the tolerance; and Qwen2's logits with linear
  rope scaling of factor 2 (rope_parameters {"rope_type": "linear", "factor": 2}: llama.cpp's
  <arch>.rope.scaling.type "linear" / .factor 2, which tests/test_qwen2.c writes into a copy of
  the file) on the third sequence (prompt + continuation): qwen2_tiny_linear2_logits.npy.
Tokenizer text: tests/fixtures/qwen2/<model>_tok.tsv: hex(text) TAB HF ids (no BOS).
Run: /work/venv-peers/bin/pip install transformers tokenizers
     /work/venv-peers/bin/python scripts/gen_qwen2_fixtures.py
     (torch 2.15.0, transformers 5.24.0, tokenizers 0.23.3, gguf 0.19.0, numpy 2.4.6)
"""
import json
import math
import os

import numpy as np
import torch
import gguf
import tokenizers
import transformers
from gguf.quants import dequantize, quantize
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "qwen2")
os.makedirs(OUT, exist_ok=True)
T = gguf.GGMLQuantizationType

# The pre-tokenizer regexes of Qwen2's and Meta-Llama-3's tokenizer.json (Split, Isolated)
QWEN2_RE = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
LLAMA3_RE = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's 12:30 and we'll meet at 1999 Main Street.",
    "Once upon a time, in a small village, there lived a girl who loved to read books.",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "I can't believe THEY'RE here! Don't you think so? 3.14159 is pi; 2718281828 is e.",
    "Le renard brun saute par-dessus le chien paresseux. Der schnelle braune Fuchs.",
    "Привет, как дела? 你好，世界！ こんにちは。 안녕하세요 🙂🚀",
    "   leading spaces\n\n\ttabs and\r\nnew lines   \n",
]
TOK_TEXTS = CORPUS + [
    "Hello world", "HELLO WORLD'S END", "numbers 1 12 123 1234 12345 1234567", "x\n\n\n  y",
    "emoji 👍🏽 and ✨ sparkles", "mixed: abc123def, 4.5e-3", "  two leading", "trailing   ",
    "I'M, YOU'LL, we'D, they'VE", "ümlaut façade naïve", "a\u00a0b\u3000c",
]


def train_tokenizer(regex, specials):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=352, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=[])
    tok.train_from_iterator(CORPUS * 20, trainer)
    tok.add_special_tokens(specials)
    return tok


def tok_tables(tok, specials):
    vocab = tok.get_vocab(with_added_tokens=True)
    n = len(vocab)
    toks = [None] * n
    for s, i in vocab.items():
        toks[i] = s
    assert all(t is not None for t in toks)
    merges = json.loads(tok.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    types = [3 if t in specials else 1 for t in toks]
    return toks, types, merges


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name or "lm_head" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))


def permute(w, n_head, n_head_kv):
    # convert_hf_to_gguf.py LlamaModel.permute: HF's rotate_half layout -> adjacent pairs
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(cfg):
    # convert_hf_to_gguf.py LlamaModel.generate_extra_tensors
    rp = cfg.rope_parameters
    base = rp["rope_theta"]
    dim = cfg.hidden_size // cfg.num_attention_heads
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, lo, hi, old = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"], rp["original_max_position_embeddings"]
    lo_wav, hi_wav = old / lo, old / hi
    out = []
    for f in freqs:
        wav = 2 * math.pi / f
        if wav < hi_wav:
            out.append(1)
        elif wav > lo_wav:
            out.append(factor)
        else:
            smooth = (old / wav - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def gguf_tensors(model, arch, cfg):
    """(name, float32 array) in llama.cpp's naming"""
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    H, Hkv = cfg.num_attention_heads, cfg.num_key_value_heads
    out = [("token_embd.weight", sd["model.embed_tokens.weight"])]
    for l in range(cfg.num_hidden_layers):
        p = "model.layers.%d." % l
        q, k = sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"]
        if arch == "llama":
            q, k = permute(q, H, H), permute(k, H, Hkv)
        b = "blk.%d." % l
        out += [(b + "attn_norm.weight", sd[p + "input_layernorm.weight"]), (b + "attn_q.weight", q), (b + "attn_k.weight", k),
                (b + "attn_v.weight", sd[p + "self_attn.v_proj.weight"]), (b + "attn_output.weight", sd[p + "self_attn.o_proj.weight"])]
        if arch == "qwen2":
            out += [(b + "attn_q.bias", sd[p + "self_attn.q_proj.bias"]), (b + "attn_k.bias", sd[p + "self_attn.k_proj.bias"]),
                    (b + "attn_v.bias", sd[p + "self_attn.v_proj.bias"])]
        out += [(b + "ffn_norm.weight", sd[p + "post_attention_layernorm.weight"]), (b + "ffn_gate.weight", sd[p + "mlp.gate_proj.weight"]),
                (b + "ffn_up.weight", sd[p + "mlp.up_proj.weight"]), (b + "ffn_down.weight", sd[p + "mlp.down_proj.weight"])]
    out.append(("output_norm.weight", sd["model.norm.weight"]))
    if not cfg.tie_word_embeddings:
        out.append(("output.weight", sd["lm_head.weight"]))
    if arch == "llama":
        out.append(("rope_freqs.weight", llama3_rope_factors(cfg)))
    return out


def write_gguf(path, arch, cfg, tensors, tok, specials, pre, bos, eos, add_bos, q8):
    w = gguf.GGUFWriter(path, arch)
    w.add_name("tiny random " + arch)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if q8 else gguf.LlamaFileType.ALL_F32)
    toks, types, merges = tok_tables(tok, specials)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(add_bos)
    deq = {}
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype=np.float32)
        if q8 and a.ndim == 2:
            raw = quantize(a, T.Q8_0)
            w.add_tensor(name, raw, raw_dtype=T.Q8_0)
            deq[name] = dequantize(raw, T.Q8_0).astype(np.float32)
        else:
            w.add_tensor(name, a)
            deq[name] = a
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return deq


def load_deq(model, arch, cfg, deq):
    """the transformers model with the GGUF's (dequantized) matrices, permutation undone"""
    H, Hkv = cfg.num_attention_heads, cfg.num_key_value_heads

    def unpermute(w, n_head, n_head_kv):
        if n_head_kv is not None and n_head != n_head_kv:
            n_head = n_head_kv
        return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    sd = model.state_dict()
    with torch.no_grad():
        sd["model.embed_tokens.weight"].copy_(torch.from_numpy(deq["token_embd.weight"]))
        if not cfg.tie_word_embeddings:
            sd["lm_head.weight"].copy_(torch.from_numpy(deq["output.weight"]))
        for l in range(cfg.num_hidden_layers):
            p, b = "model.layers.%d." % l, "blk.%d." % l
            q, k = deq[b + "attn_q.weight"], deq[b + "attn_k.weight"]
            if arch == "llama":
                q, k = unpermute(q, H, H), unpermute(k, H, Hkv)
            for hf, a in [("self_attn.q_proj.weight", q), ("self_attn.k_proj.weight", k), ("self_attn.v_proj.weight", deq[b + "attn_v.weight"]),
                          ("self_attn.o_proj.weight", deq[b + "attn_output.weight"]), ("mlp.gate_proj.weight", deq[b + "ffn_gate.weight"]),
                          ("mlp.up_proj.weight", deq[b + "ffn_up.weight"]), ("mlp.down_proj.weight", deq[b + "ffn_down.weight"])]:
                sd[p + hf].copy_(torch.from_numpy(np.ascontiguousarray(a)))


def q8_0_activations(model):
    """forward pre-hooks on every nn.Linear: its input quantized to Q8_0 blocks and back"""
    def hook(mod, args):
        x = args[0]
        b = x.reshape(-1, 32)
        d = b.abs().amax(dim=1, keepdim=True) / 127.0
        idv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
        q = torch.trunc(b * idv + 0.5 * torch.sign(b))  # roundf: halves away from zero
        return (q * d).reshape(x.shape),
    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear):
            mod.register_forward_pre_hook(hook)


def greedy(model, ids, steps):
    ids = list(ids)
    gen, margins = [], []
    with torch.no_grad():
        for _ in range(steps):
            lg = model(torch.tensor([ids])).logits[0, -1].double()
            top = torch.topk(lg, 2)
            gen.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
            ids.append(gen[-1])
    return gen, margins


def all_logits(model, seqs):
    with torch.no_grad():
        return np.concatenate([model(torch.tensor([s])).logits[0].float().numpy() for s in seqs], axis=0)


def build(name, arch, cfg, regex, pre, specials, bos_tok, eos_tok, add_bos, seed):
    torch.manual_seed(seed)
    tok = train_tokenizer(regex, specials)
    cfg.vocab_size = tok.get_vocab_size(with_added_tokens=True)
    model = (transformers.Qwen2ForCausalLM if arch == "qwen2" else transformers.LlamaForCausalLM)(cfg).eval()
    randomize(model, seed)
    bos, eos = tok.token_to_id(bos_tok), tok.token_to_id(eos_tok)
    tensors = gguf_tensors(model, arch, cfg)
    write_gguf(os.path.join(OUT, name + ".f32.gguf"), arch, cfg, tensors, tok, specials, pre, bos, eos, add_bos, False)
    deq = write_gguf(os.path.join(OUT, name + ".q8_0.gguf"), arch, cfg, tensors, tok, specials, pre, bos, eos, add_bos, True)
    # prompts: two texts through the tokenizer, and a run of random ids (to position 40)
    rng = np.random.default_rng(seed)
    prompts = []
    for text in ["Once upon a time, in a small village,", "def fibonacci(n):\n    return"]:
        ids = tok.encode(text, add_special_tokens=False).ids
        prompts.append(([bos] if add_bos else []) + ids)
    prompts.append([int(x) for x in rng.integers(0, cfg.vocab_size, 24)])
    rows, seqs = [], []
    for p in prompts:
        gen, margins = greedy(model, p, 16)
        rows.append("\t".join([" ".join(map(str, p)), " ".join(map(str, gen)), " ".join("%.6f" % m for m in margins)]))
        seqs.append(p + gen)
    lg = all_logits(model, seqs)
    np.save(os.path.join(OUT, name + "_logits.npy"), lg)
    head = "# %s: prompt ids <TAB> transformers greedy 16 <TAB> top1-top2 margins; logits [%d, %d] in %s_logits.npy\n" % (
        name, lg.shape[0], lg.shape[1], name)
    if arch == "llama":
        plain = transformers.LlamaConfig(**{k: v for k, v in cfg.to_dict().items() if k not in ("rope_parameters", "rope_scaling")})
        plain.rope_parameters = {"rope_type": "default", "rope_theta": cfg.rope_parameters["rope_theta"]}
        m2 = transformers.LlamaForCausalLM(plain).eval()
        m2.load_state_dict(model.state_dict())
        ns = all_logits(m2, seqs)
        np.save(os.path.join(OUT, name + "_noscale_logits.npy"), ns)
        print(name, "rope scaling changes the logits by up to %.4f" % np.abs(ns - lg).max())
    else:
        lin = transformers.Qwen2Config(**{k: v for k, v in cfg.to_dict().items() if k not in ("rope_parameters", "rope_scaling")})
        lin.rope_parameters = {"rope_type": "linear", "factor": 2.0, "rope_theta": cfg.rope_parameters["rope_theta"]}
        m2 = transformers.Qwen2ForCausalLM(lin).eval()
        m2.load_state_dict(model.state_dict())
        ll = all_logits(m2, seqs[2:3])
        np.save(os.path.join(OUT, name + "_linear2_logits.npy"), ll)
        print(name, "linear rope scaling 2 changes the logits by up to %.4f" % np.abs(ll - lg[-len(seqs[2]):]).max())
    load_deq(model, arch, cfg, deq)
    q8_0_activations(model)
    lq = all_logits(model, seqs)
    np.save(os.path.join(OUT, name + "_q8_0_logits.npy"), lq)
    open(os.path.join(OUT, name + ".tsv"), "w").write(head + "\n".join(rows) + "\n")
    toks = ["%s\t%s" % (t.encode().hex(), " ".join(map(str, tok.encode(t, add_special_tokens=False).ids))) for t in TOK_TEXTS]
    open(os.path.join(OUT, name + "_tok.tsv"), "w").write("# hex(text) <TAB> tokenizers %s ids\n" % tokenizers.__version__ + "\n".join(toks) + "\n")
    print(name, "vocab", cfg.vocab_size, "logit range %.3f..%.3f" % (lg.min(), lg.max()), "min margin %.5f" % min(
        float(m) for r in rows for m in r.split("\t")[2].split()), "q8_0 vs f32 logits %.4f" % np.abs(lq - lg).max())


def main():
    common = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, max_position_embeddings=2048, attn_implementation="eager")
    qcfg = transformers.Qwen2Config(num_attention_heads=4, num_key_value_heads=2, rope_theta=1e6, rms_norm_eps=1e-6,
                                    tie_word_embeddings=True, use_sliding_window=False, **common)
    build("qwen2_tiny", "qwen2", qcfg, QWEN2_RE, "qwen2", ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "<|endoftext|>",
          "<|endoftext|>", False, 2025)
    lcfg = transformers.LlamaConfig(num_attention_heads=2, num_key_value_heads=1, rms_norm_eps=1e-5, tie_word_embeddings=False,
                                    rope_theta=500000.0,
                                    rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                  "original_max_position_embeddings": 256}, **common)
    build("llama3_tiny", "llama", lcfg, LLAMA3_RE, "llama-bpe",
          ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"], "<|begin_of_text|>",
          "<|end_of_text|>", True, 2026)


if __name__ == "__main__":
    main()
