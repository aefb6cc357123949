#!/usr/bin/env python3
"""How Hugging Face tokenizers splits text with the Qwen2 and Llama 3 ("llama-bpe")
pre-tokenizer regexes, for tests/test_qwen2_pretok.c (attn's PCRE2 versions in
src/tokenizers/bpe.c must split the same way). The regexes are those of the models'
tokenizer.json (pre_tokenizer Sequence[Split(pattern, behavior Isolated), ByteLevel(use_regex
False)]); the Split alone decides the words, ByteLevel only maps their bytes:
  qwen2:     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+
  llama-bpe: the same with \\p{N}{1,3}
Writes
  tests/fixtures/qwen2/pretok_cases.tsv    PRE <TAB> hex(text) <TAB> byte offsets where the
      words end — for a set of multilingual / emoji / number / whitespace / contraction texts;
  tests/fixtures/qwen2/pretok_unicode.txt  PRE START END SIG — every code point c but the
      surrogates, by the word counts of five probes "a"+c, "1"+c, "."+c, " "+c, c+"a" (ranges
      of equal signature, hex).
Run: /work/venv-peers/bin/python scripts/gen_qwen2_pretok.py (tokenizers 0.23.3)
"""
import os
import sys
from multiprocessing import Pool

import tokenizers
from tokenizers import Regex, pre_tokenizers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_qwen2_fixtures import LLAMA3_RE, QWEN2_RE  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "qwen2")
PRES = {"qwen2": QWEN2_RE, "llama-bpe": LLAMA3_RE}
PROBES = (("a", ""), ("1", ""), (".", ""), (" ", ""), ("", "a"))

TEXTS = [
    "Hello world", "Hello, world! How are you?", "  leading", "trailing  ", "a  b   c    d",
    "tab\tseparated\tvalues", "line\nbreak", "crlf\r\nline", "many\n\n\nbreaks", " \n \n x", "x \n", "\r\r\n\n",
    "mixed \t\n  whitespace\t \n", "nbsp\u00a0here", "ideographic\u3000space", "line\u2028separator", "para\u2029sep",
    "I'm here", "I'M HERE", "you're, we've, they'll, he'd, it's, don't", "YOU'RE WE'VE THEY'LL HE'D IT'S DON'T",
    "O'Neil's 'quoted' word'", "'s'S 'll'LL 'Ll", "y'all'd've", "'\u017f long s", "rock 'n' roll",
    "1", "12", "123", "1234", "12345", "1234567", "3.14159", "1,000,000", "2024-06-01", "v1.2.3", "x86_64", "0xFF",
    "\u0663\u0664\u0665 Arabic-Indic", "\uff11\uff12\uff13 fullwidth", "x\u00b2 + y\u00b3", "\u216b roman", "\u00bd half",
    "abc123def456", "$100.00 and \u20ac50", "50% off!!!", "a+b=c", "f(x) = x**2 // 3",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01", "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c", "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5",
    "cafe\u0301 na\u0308ive", "caf\u00e9 na\u00efve", "Stra\u00dfe \u00c4rger",
    "emoji \U0001f600\U0001f603 end", "\U0001f44d\U0001f3fd thumbs", "family \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "flag \U0001f1eb\U0001f1f7!", "\u2728sparkles\u2728", "\U0001f680\U0001f680\U0001f680", "heart \u2764\ufe0f",
    "<|im_start|>user\nHi<|im_end|>", "https://example.com/path?q=1&r=2", "user@example.com",
    "def f(x):\n    return x  # comment\n", "if (a && b) { c(); }", "...", "--- ***", "\u2014dash\u2014", "\u00ab\u00bb\u201c\u201d",
    "snake_case_name CamelCaseName", "e.g. i.e. etc.", "A1B2C3", "\u0661\u0662\u0663\u0664", "9\u00a09",
]


def splitter(pre):
    return pre_tokenizers.Split(Regex(PRES[pre]), behavior="isolated", invert=False)


def ends(sp, text):
    out, pos = [], 0
    for piece, _ in sp.pre_tokenize_str(text):
        pos += len(piece.encode("utf-8"))
        out.append(pos)
    assert pos == len(text.encode("utf-8")), (text, out)
    return out


def sig_range(args):
    pre, lo, hi = args
    sp = splitter(pre)
    out = []
    for cp in range(lo, hi):
        if 0xD800 <= cp <= 0xDFFF:
            out.append(None)
            continue
        c = chr(cp)
        out.append("".join(str(len(sp.pre_tokenize_str(a + c + b))) for a, b in PROBES))
    return out


def main():
    rows = []
    for pre in PRES:
        sp = splitter(pre)
        for t in TEXTS:
            rows.append("%s\t%s\t%s" % (pre, t.encode("utf-8").hex(), " ".join(map(str, ends(sp, t)))))
    with open(os.path.join(OUT, "pretok_cases.tsv"), "w") as f:
        f.write("# scripts/gen_qwen2_pretok.py (tokenizers %s): PRE <TAB> hex(text) <TAB> word end offsets (bytes)\n" % tokenizers.__version__)
        f.write("\n".join(rows) + "\n")
    lines = []
    step = 0x10000
    with Pool(2) as pool:
        for pre in PRES:
            parts = pool.map(sig_range, [(pre, lo, lo + step) for lo in range(0, 0x110000, step)])
            sig = [s for part in parts for s in part] + ["end"]
            start = 0
            for cp in range(1, 0x110001):
                if sig[cp] != sig[start]:
                    if sig[start] is not None:
                        lines.append("%s %X %X %s" % (pre, start, cp - 1, sig[start]))
                    start = cp
            print(pre, "done", file=sys.stderr)
    with open(os.path.join(OUT, "pretok_unicode.txt"), "w") as f:
        f.write("# scripts/gen_qwen2_pretok.py: PRE START END SIG, SIG = word counts of \"a\"+c \"1\"+c \".\"+c \" \"+c c+\"a\" (tokenizers %s)\n"
                % tokenizers.__version__)
        f.write("\n".join(lines) + "\n")
    print("cases", len(rows), "unicode ranges", len(lines))


if __name__ == "__main__":
    main()
