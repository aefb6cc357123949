#!/usr/bin/env python3
"""How Hugging Face tokenizers 0.23.3 pre-tokenizes every code point for the byte-level BPE
pre-tokenizers of src/tokenizers/bpe.c, used by tests/test_tokenizer.c (test_bpe_unicode_sweep):
  gpt2:   ByteLevel(add_prefix_space=False, use_regex=True) — GPT-2's regex
          's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
  smollm: Sequence[Digits(individual_digits=True), ByteLevel(...)] (SmolLM2's tokenizer.json,
          the same pipeline scripts/gen_bpe_fixtures.py builds from the GGUF file)
Every code point c in U+0000..U+10FFFF except the surrogates is classified by the number of
pieces of four probes, "a"+c, "1"+c, "."+c and " "+c:
  L (letter, in \\p{L}): 1 2 2 1     N (number): gpt2 2 1 2 1, smollm 2 2 2 2
  S (whitespace, \\s):   2 2 2 1     O (anything else): 2 2 1 1
Writes tests/fixtures/bpe_unicode.txt: lines "PRE START END CLASS" (hex code points, ranges of
one class), the complete map for both pre-tokenizers; a probe signature outside these four is
an error. Run: /path/to/venv/bin/python scripts/gen_bpe_unicode.py (tokenizers 0.23.3).
"""
import os
import sys
from multiprocessing import Pool

from tokenizers import pre_tokenizers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "bpe_unicode.txt")
SIG = {
    "gpt2": {(1, 2, 2, 1): "L", (2, 1, 2, 1): "N", (2, 2, 2, 1): "S", (2, 2, 1, 1): "O"},
    "smollm": {(1, 2, 2, 1): "L", (2, 2, 2, 2): "N", (2, 2, 2, 1): "S", (2, 2, 1, 1): "O"},
}


def make(pre):
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "gpt2":
        return bl
    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), bl])


def classify(args):
    pre, lo, hi = args
    p = make(pre)
    out = []
    for cp in range(lo, hi):
        if 0xD800 <= cp <= 0xDFFF:
            out.append(None)
            continue
        c = chr(cp)
        sig = tuple(len(p.pre_tokenize_str(x + c)) for x in ("a", "1", ".", " "))
        if sig not in SIG[pre]:
            raise SystemExit(f"{pre} U+{cp:04X}: probe signature {sig} is none of L, N, S, O")
        out.append(SIG[pre][sig])
    return out


def main():
    step = 0x10000
    lines = []
    with Pool(2) as pool:
        for pre in ("gpt2", "smollm"):
            parts = pool.map(classify, [(pre, lo, lo + step) for lo in range(0, 0x110000, step)])
            cls = [c for part in parts for c in part]
            start = None
            for cp in range(0x110001):
                c = cls[cp] if cp < 0x110000 else "end"
                if start is not None and c != cls[start]:
                    if cls[start] is not None:
                        lines.append(f"{pre} {start:X} {cp - 1:X} {cls[start]}")
                    start = None
                if start is None and cp < 0x110000:
                    start = cp
            print(pre, "done", file=sys.stderr)
    with open(OUT, "w") as f:
        f.write("# scripts/gen_bpe_unicode.py: PRE START END CLASS (tokenizers 0.23.3)\n")
        f.write("\n".join(lines) + "\n")
    print("wrote", OUT, len(lines), "ranges")


if __name__ == "__main__":
    main()
