#!/usr/bin/env python3
"""Byte-level BPE parity fixtures for tests/test_gguf_llm.c: a Hugging Face `tokenizers`
tokenizer is built from the GGUF file's own vocabulary and merges (tokenizer.ggml.tokens /
merges / token_type), with SmolLM2's pipeline: pre_tokenizers Sequence[Digits(individual_digits),
ByteLevel(add_prefix_space=False, use_regex=True)], control tokens as special added tokens.
Writes tests/fixtures/llama/smollm2_bpe.tsv: "hex(utf8 text) <TAB> ids" (at least 200 strings).

Run: /work/venv/bin/python scripts/gen_bpe_fixtures.py models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import random
import sys

from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

path = sys.argv[1] if len(sys.argv) > 1 else "models/SmolLM2-135M-Instruct.Q4_1.gguf"
r = GGUFReader(path)


def strings(key):
    f = r.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


tokens = strings("tokenizer.ggml.tokens")
merges = strings("tokenizer.ggml.merges")
tt = r.fields["tokenizer.ggml.token_type"]
types = [int(tt.parts[i][0]) for i in tt.data]
vocab = {}
for i, t in enumerate(tokens):
    vocab.setdefault(t, i)
tk = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges], unk_token=None, fuse_unk=False))
tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
tk.decoder = decoders.ByteLevel()
tk.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i, t in enumerate(types) if t in (3, 4)])

base = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "a", "Hello, world!", "Hello  world", "Hello   world ",
    "The capital of France is Paris.", "What is the capital of France?", "What color is the sky on a clear day?",
    "12345", "1 2 3", "3.14159", "+33 1 23 45 67 89", "version 2.0.1-rc3", "$1,234.56", "100%", "1st 2nd 3rd 4th",
    "日本語のテキスト", "中文字符和English混合", "한국어 문장입니다", "emoji 😀🎉👍🏽", "👨‍👩‍👧‍👦 family", "flags 🇫🇷🇯🇵",
    "مرحبا بالعالم", "שלום עולם", "Привет, мир!", "Ελληνικά γράμματα", "हिन्दी पाठ", "ภาษาไทย",
    "non\u00a0breaking\u00a0space", "\u00a0leading nbsp", "zero\u200bwidth", "tab\tseparated\tvalues", "trailing spaces   ",
    "    indented code", "def f(x):\n    return x * 2\n", "for (int i = 0; i < n; i++) { sum += a[i]; }",
    "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); }", "x = {'a': 1, \"b\": [2, 3]}", "SELECT * FROM t WHERE id = 42;",
    "https://example.com/path?q=1&r=2", "user@example.com", "C:\\Users\\name\\file.txt", "<html><body>Hi</body></html>",
    "I'm sure you're right, they've said it'll work, we'd see.", "don't DON'T Don't", "'s 't 're 've 'm 'll 'd",
    "<|im_start|>user\nHi<|im_end|>\n", "<|im_start|>assistant\n", "text <|endoftext|> more", "<|im_end|><|im_start|>",
    "<|im_start", "|im_end|>", "café naïve résumé", "e\u0301 combining acute", "ﬁ ligature", "ＦＵＬＬＷＩＤＴＨ",
    "math ∑∫√∞ ≤ ≥ ≠", "arrows → ← ↑ ↓", "quotes “smart” ‘single’", "dashes – — ‒", "ellipsis…", "\x01\x02 control",
    "bell\x07 and esc\x1b[0m", "\x04\x06\x13\x14\x16\x1d missing bytes", "MiXeD CaSe WoRdS", "ALLCAPS SENTENCE HERE",
    "a" * 100, " " * 50, "ab" * 60, "9" * 40, "!!!???...", "---===+++", "__init__.py", "camelCaseIdentifier", "snake_case_name",
    "1e-5 2.5e+10 0x1F 0b1010", "2024-11-30T13:05:00Z", "αβγ 123 δεζ", "Ünïcödé Ŧëxŧ", "Straße", "İstanbul ıi",
]
rng = random.Random(8)
pieces = ["the", " cat", " 42", "日本", " 😀", " مرحبا", "\t", "\n", "  ", "\u00a0", "{", "}", "();", " x", "'s", "'ll",
          "123", " 7", "Ω", "é", "<|im_end|>", "\r\n", "    ", "def", " return", "::", "->", "ü", "한", "й"]
while len(base) < 260:
    base.append("".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))))
rows = []
for s in base:
    ids = tk.encode(s, add_special_tokens=False).ids
    rows.append("%s\t%s" % (s.encode("utf-8").hex() or "-", " ".join(map(str, ids))))
open("tests/fixtures/llama/smollm2_bpe.tsv", "w").write("\n".join(rows) + "\n")
print("wrote", len(rows), "strings")
