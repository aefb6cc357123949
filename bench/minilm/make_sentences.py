#!/usr/bin/env python3
"""Write 1000 benchmark sentences of 20-60 word pieces (all-MiniLM-L6-v2's tokenizer,
[CLS]/[SEP] included) cut from real English text shipped with Debian: the licence texts
in /usr/share/common-licenses, read in sorted order, split on blank lines and sentence
ends, and greedily packed into pieces. Output: bench/minilm/sentences.txt (one per line).
Deterministic for a given Debian installation."""
import glob
import os
import re
import sys

from tokenizers import Tokenizer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
tok = Tokenizer.from_file(os.path.join(ROOT, "models", "all-MiniLM-L6-v2", "tokenizer.json"))
tok.no_padding()  # tokenizer.json pads and truncates to 128; count real pieces
tok.no_truncation()
words = []
for path in sorted(glob.glob("/usr/share/common-licenses/*")):
    if os.path.isdir(path):
        continue
    with open(path, encoding="utf-8", errors="replace") as f:
        words += re.sub(r"\s+", " ", f.read()).split(" ")
out, cur, target, k = [], [], 20, 0
for w in words:
    if not w:
        continue
    cur.append(w)
    n = len(tok.encode(" ".join(cur)).ids)
    if n >= target:
        if n > 60:
            cur.pop()
        if cur:
            out.append(" ".join(cur))
        cur, k = [], k + 1
        target = 20 + (k * 37) % 41  # spread lengths over 20..60
    if len(out) == 1000:
        break
if len(out) < 1000:
    sys.exit(f"only {len(out)} sentences")
lens = [len(tok.encode(s).ids) for s in out]
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "sentences.txt"), "w") as f:
    f.write("\n".join(out) + "\n")
print(f"1000 sentences, word pieces min {min(lens)} max {max(lens)} mean {sum(lens) / len(lens):.1f}")
