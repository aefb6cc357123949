#!/usr/bin/env python3
"""llama.cpp (llama-cpp-python, never run in CI) on the tiny Qwen2 / Llama-3 GGUF files of
scripts/gen_qwen2_fixtures.py, for tests/test_qwen2.c:
  tests/fixtures/qwen2/<model>_llamacpp.tsv, lines
    tok <TAB> hex(text) <TAB> llama.cpp's ids (tokenize without BOS, special tokens as text)
    <file> <TAB> prompt ids <TAB> greedy ids (16 steps) <TAB> top1 - top2 margins <TAB> top-1 logits
  for <file> = f32 and q8_0 and each prompt of <model>.tsv (llama.cpp's own greedy continuation,
  KV cache in float32 so that only the weights' and activations' arithmetic differ).
Run: /work/venv-llama/bin/python scripts/gen_qwen2_llamacpp.py
"""
import os

import numpy as np
from llama_cpp import Llama, __version__

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "qwen2")


def main():
    for name in ("qwen2_tiny", "llama3_tiny"):
        rows = []
        prompts = []
        for line in open(os.path.join(DIR, name + ".tsv")):
            if line.startswith("#"):
                continue
            prompts.append([int(x) for x in line.split("\t")[0].split()])
        for kind in ("f32", "q8_0"):
            llm = Llama(model_path=os.path.join(DIR, "%s.%s.gguf" % (name, kind)), n_ctx=128, n_threads=1, logits_all=True,
                        verbose=False, type_k=0, type_v=0, seed=0)
            if kind == "f32":
                for line in open(os.path.join(DIR, name + "_tok.tsv")):
                    if line.startswith("#"):
                        continue
                    text = bytes.fromhex(line.split("\t")[0])
                    ids = llm.tokenize(text, add_bos=False, special=False)
                    rows.append("tok\t%s\t%s" % (text.hex(), " ".join(map(str, ids))))
            for p in prompts:
                llm.reset()
                llm.eval(p)
                gen, margins, top = [], [], []
                for _ in range(16):
                    sc = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
                    o = np.argsort(-sc, kind="stable")[:2]
                    gen.append(int(o[0]))
                    margins.append(float(sc[o[0]] - sc[o[1]]))
                    top.append(float(sc[o[0]]))
                    llm.eval([int(o[0])])
                rows.append("\t".join([kind, " ".join(map(str, p)), " ".join(map(str, gen)), " ".join("%.6f" % m for m in margins),
                                       " ".join("%.6f" % v for v in top)]))
            del llm
        with open(os.path.join(DIR, name + "_llamacpp.tsv"), "w") as f:
            f.write("# llama-cpp-python %s, n_threads 1, KV cache f32: tok / f32 / q8_0 lines (scripts/gen_qwen2_llamacpp.py)\n" % __version__)
            f.write("\n".join(rows) + "\n")
        print(name, len(rows), "rows")


if __name__ == "__main__":
    main()
