#!/usr/bin/env python3
"""Greedy continuations of llama.cpp (llama-cpp-python, never run in CI) on
SmolLM2-135M-Instruct Q4_1, for tests/test_gguf_llm.c: 12 prompts (ChatML chat turns with the
file's default system message, and raw text), 32 greedy steps each; for every step the token,
llama.cpp's top-2 logit margin (top1 - top2), and the top-2 ids and logits are kept, so that the
test can measure how far attn's logits are from llama.cpp's and, where attn parts from llama.cpp,
check that llama.cpp itself was nearly tied there.
    tests/fixtures/llama/smollm2_llamacpp.tsv (or the OUT given), one line per prompt:
    hex(text) <TAB> llama.cpp prompt ids <TAB> greedy ids <TAB> margins <TAB> top-1 logits
              <TAB> top-2 ids <TAB> top-2 logits
Run: /work/venv/bin/python scripts/gen_llamacpp_fixtures.py models/SmolLM2-135M-Instruct.Q4_1.gguf
The K-quant files (llama.cpp on attn's own quantizer output, whose tensors are byte-identical to
llama.cpp's quantizer: scripts/compare_llamacpp_quantize.py):
     build/attn quantize models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/smol-q4km.gguf Q4_K_M   (and Q5_K_M, Q6_K)
     python scripts/gen_llamacpp_fixtures.py /tmp/smol-q4km.gguf tests/fixtures/llama/smollm2_q4km_llamacpp.tsv
"""
import sys

import numpy as np
from llama_cpp import Llama, __version__

path = sys.argv[1] if len(sys.argv) > 1 else "models/SmolLM2-135M-Instruct.Q4_1.gguf"
out = sys.argv[2] if len(sys.argv) > 2 else "tests/fixtures/llama/smollm2_llamacpp.tsv"
SYS = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chat(msg):
    return "<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n" % (SYS, msg)


prompts = [chat("What is the capital of France?"), chat("What color is the sky on a clear day?"),
           chat("Write a haiku about the sea."), chat("How many legs does a spider have?"),
           chat("Give me three tips for sleeping well."), chat("Translate 'good morning' into French."),
           "The capital of France is", "Once upon a time, in a small village,", "def fibonacci(n):",
           "The three primary colors are", "1, 2, 3, 4, 5,", "In 1969, the first human"]
llm = Llama(model_path=path, n_ctx=512, n_threads=2, logits_all=True, verbose=False)
rows = []
for p in prompts:
    ids = llm.tokenize(p.encode("utf-8"), add_bos=False, special=True)
    llm.reset()
    llm.eval(ids)
    gen, margins, l1, i2, l2 = [], [], [], [], []
    for _ in range(32):
        sc = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        top = np.argsort(-sc, kind="stable")[:2]
        gen.append(int(top[0]))
        margins.append(float(sc[top[0]] - sc[top[1]]))
        l1.append(float(sc[top[0]]))
        i2.append(int(top[1]))
        l2.append(float(sc[top[1]]))
        if int(top[0]) == 2:
            break
        llm.eval([int(top[0])])
    rows.append("\t".join([p.encode().hex(), " ".join(map(str, ids)), " ".join(map(str, gen)),
                            " ".join("%.4f" % m for m in margins), " ".join("%.4f" % v for v in l1),
                            " ".join(map(str, i2)), " ".join("%.4f" % v for v in l2)]))
    print(repr(p[-40:]), "->", repr(llm.detokenize(gen).decode("utf-8", "replace")), flush=True)
open(out, "w").write("# llama-cpp-python %s, n_threads 2, greedy 32 steps\n" % __version__ + "\n".join(rows) + "\n")
