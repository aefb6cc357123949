#!/usr/bin/env python3
"""SmolLM2 fidelity fixtures for tests/test_gguf_llm.c from the float64 dequantized NumPy pass
(scripts/smollm2_ref.py). For each prompt (raw text, and ChatML chat turns with the file's default
system message) the float64 model continues greedily for STEPS tokens; at every step (the last
prompt position and each generated position) the fixture keeps the float64 logits of 48 ids: the
16 largest and 32 fixed ids spread over the vocabulary.
    tests/fixtures/llama/smollm2_f64.tsv          prompt rows: hex(text) <TAB> prompt ids <TAB> greedy ids
    tests/fixtures/llama/smollm2_f64_ids.npy      int32 [rows, 48]
    tests/fixtures/llama/smollm2_f64_logits.npy   float64 [rows, 48]
Tokenization uses the HF tokenizer built from the GGUF vocabulary (as scripts/gen_bpe_fixtures.py).
Run: /work/venv/bin/python scripts/gen_smollm2_fixtures.py models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from smollm2_ref import GGUFLlama  # noqa: E402
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers  # noqa: E402

STEPS = 12
path = sys.argv[1] if len(sys.argv) > 1 else "models/SmolLM2-135M-Instruct.Q4_1.gguf"
m = GGUFLlama(path)
r = m.r


def strings(key):
    f = r.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


tokens = strings("tokenizer.ggml.tokens")
tt = r.fields["tokenizer.ggml.token_type"]
types = [int(tt.parts[i][0]) for i in tt.data]
vocab = {}
for i, t in enumerate(tokens):
    vocab.setdefault(t, i)
tk = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(x.split(" ", 1)) for x in strings("tokenizer.ggml.merges")], unk_token=None))
tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
tk.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i, t in enumerate(types) if t in (3, 4)])
SYS = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chat(msg):
    return "<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n" % (SYS, msg)


prompts = ["The capital of France is", chat("What is the capital of France?"), chat("What color is the sky on a clear day?"),
           "def fibonacci(n):"]
fixed = np.linspace(17, len(tokens) - 1, 32).astype(np.int64)
rows, all_ids, all_lg = [], [], []
for p in prompts:
    ids = tk.encode(p, add_special_tokens=False).ids
    gen = []
    cache = {}
    lg = m.forward(ids, cache)[-1]
    for s in range(STEPS + 1):
        keep = np.concatenate([np.argsort(-lg, kind="stable")[:16], fixed])
        all_ids.append(keep.astype(np.int32))
        all_lg.append(lg[keep])
        if s == STEPS:
            break
        nxt = int(np.argmax(lg))
        gen.append(nxt)
        lg = m.forward([nxt], cache)[-1]
    rows.append("%s\t%s\t%s" % (p.encode().hex(), " ".join(map(str, ids)), " ".join(map(str, gen))))
    print(repr(p[-40:]), "->", repr(tk.decode(gen)), flush=True)
open("tests/fixtures/llama/smollm2_f64.tsv", "w").write("\n".join(rows) + "\n")
np.save("tests/fixtures/llama/smollm2_f64_ids.npy", np.stack(all_ids))
np.save("tests/fixtures/llama/smollm2_f64_logits.npy", np.stack(all_lg).astype(np.float64))
print("rows", len(all_ids))
