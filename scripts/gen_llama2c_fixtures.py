#!/usr/bin/env python3
"""Fixtures for tests/test_llama.c from the NumPy float64 llama2.c reference (scripts/llama2c_ref.py):
    tests/fixtures/llama/stories260K.tsv     tokenizer cases and greedy continuations
    tests/fixtures/llama/stories260K_logits.npy   float64 [P, 512] logits of prompt 0's sequence
                                                  at the positions listed in the .tsv ("positions")
Run: /work/venv/bin/python scripts/gen_llama2c_fixtures.py ../shared/models/stories260K
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from llama2c_ref import Model, Tokenizer  # noqa: E402

d = sys.argv[1] if len(sys.argv) > 1 else "../shared/models/stories260K"
m = Model(os.path.join(d, "stories260K.bin"))
t = Tokenizer(os.path.join(d, "tok512.bin"), m.V)
out = "tests/fixtures/llama"
os.makedirs(out, exist_ok=True)

prompts = ["Once upon a time", "Lily and Tom went to the park", "The little dog", "One day, a bird"]
texts = prompts + ["", " ", "a", "Hello, world!", "  two  spaces", "tab\there", "line\nbreak", "café", "naïve résumé",
                   "日本語", "emoji 😀!", "ЖЖ", "x" * 40, "12345 + 678 = 13023", "™ and  ", "<s> </s> <unk>",
                   "The the THE tHe", "\u00a0nbsp", "mixed 中文 and English", "a\u0301 combining"]
rows = []
for s in texts:
    rows.append("tok\t%s\t%s" % (s.encode().hex() or "-", " ".join(map(str, t.encode(s)))))
seq0 = None
for p in prompts:
    ids = t.encode(p)
    gen = m.greedy(ids, 64)
    rows.append("greedy\t%s\t%s\t%s" % (p.encode().hex(), " ".join(map(str, ids)), " ".join(map(str, gen))))
    if seq0 is None:
        seq0 = ids + gen
positions = [0, 1, 2, 4, 5, 9, 20, 40, len(seq0) - 1]
logits = m.forward(seq0)[positions]
rows.append("positions\t%s\t%s" % (" ".join(map(str, positions)), " ".join(map(str, seq0))))
open(os.path.join(out, "stories260K.tsv"), "w").write("\n".join(rows) + "\n")
np.save(os.path.join(out, "stories260K_logits.npy"), logits.astype(np.float64))
print("wrote", len(rows), "rows; logits", logits.shape)
