#!/usr/bin/env python3
"""Generate the reference data for tests/test_tokenizer.c with Hugging Face `tokenizers`.

Usage (from any directory; needs `pip install tokenizers` and scripts/fetch_minilm.sh run):
    python3 scripts/gen_tokenizer_fixtures.py            # writes the three fixture files
    python3 scripts/gen_tokenizer_fixtures.py --c-tables # prints the C character tables

Outputs (paths relative to the repository root):
  tests/fixtures/parity_sentences.txt  one sentence per line (no tabs, no newlines inside),
      taken from text shipped with Debian (rule below); reused by the embedding parity tests.
  tests/fixtures/tokenizer_cases.tsv   one case per line:
      name <TAB> max_len <TAB> add_special <TAB> text <TAB> ids <TAB> offsets
      text is escaped (\\\\ \\t \\n \\r, \\uXXXX, \\UXXXXXXXX for invisible / control / mark
      characters; other characters as raw UTF-8); ids are comma separated; offsets are
      "start:end" BYTE offsets into the UTF-8 text, comma separated (HF gives character
      offsets, converted here). max_len 0 = no truncation. Lines starting with '#' are comments.
  tests/fixtures/tokenizer_unicode.txt exhaustive per-code-point checks, see write_unicode().

Reference configuration: Tokenizer.from_file(models/all-MiniLM-L6-v2/tokenizer.json) with
padding disabled and truncation set per case (the file itself says 128 / pad to 128;
sentence-transformers uses max_seq_length 256, so most cases use 256).

Sentence extraction rule (deterministic): for each source file below, in order, split the
text into paragraphs at blank lines, join each paragraph's lines with single spaces after
stripping them, collapse runs of whitespace, split into sentences after '.', '!' or '?'
followed by whitespace and an upper-case letter, digit, quote or '(', keep sentences of 40 to
300 characters with at least 6 words that end with '.', '!' or '?' (this drops headings),
drop exact duplicates, and take the first N of each file. Then the lines of the dpkg /
util-linux / adduser copyright files that contain a non-ASCII letter (Unicode category L*;
whitespace collapsed, at least 12 characters) are added, first 12 in file order.
"""
import argparse
import os
import re
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_JSON = os.path.join(ROOT, "models", "all-MiniLM-L6-v2", "tokenizer.json")
FIX = os.path.join(ROOT, "tests", "fixtures")

SENTENCE_SOURCES = [
    ("/usr/share/common-licenses/GPL-3", 24),
    ("/usr/share/common-licenses/Apache-2.0", 14),
    ("/usr/share/common-licenses/MPL-2.0", 10),
    ("/usr/share/common-licenses/LGPL-2.1", 6),
    ("/usr/share/common-licenses/Artistic", 6),
    ("/usr/share/common-licenses/GFDL-1.3", 6),
]
NON_ASCII_SOURCES = [
    "/usr/share/doc/dpkg/copyright",
    "/usr/share/doc/util-linux/copyright",
    "/usr/share/doc/adduser/copyright",
]
SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"(])")


def sentences_from(path, n):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out = []
    for para in re.split(r"\n\s*\n", text):
        joined = " ".join(line.strip() for line in para.splitlines() if line.strip())
        joined = re.sub(r"\s+", " ", joined).strip()
        for s in SPLIT_RE.split(joined):
            s = s.strip()
            if 40 <= len(s) <= 300 and len(s.split()) >= 6 and s[-1] in ".!?":
                out.append(s)
                if len(out) == n:
                    return out
    return out


def parity_sentences():
    seen, result = set(), []
    for path, n in SENTENCE_SOURCES:
        for s in sentences_from(path, n):
            if s not in seen:
                seen.add(s)
                result.append(s)
    extra = []
    for path in NON_ASCII_SOURCES:
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                s = re.sub(r"\s+", " ", line).strip()
                if (len(s) >= 12 and s not in seen and
                        any(ord(c) > 127 and unicodedata.category(c).startswith("L") for c in s)):
                    seen.add(s)
                    extra.append(s)
    result += extra[:12]
    for s in result:
        assert "\t" not in s and "\n" not in s and "\r" not in s
    return result


def edge_cases(license_text):
    """(name, text, max_len, add_special) tuples covering the BERT pipeline's corners."""
    c = []

    def add(name, text, max_len=256, add_special=1):
        c.append((name, text, max_len, add_special))

    add("empty", "")
    add("space_only", "   ")
    add("accents_doc", "Héllò hôw are ü?")
    add("toy_like_unwanted", "unwanted running")
    add("toy_like_unwantedX", "unwantedX running")
    add("punct_basic", "Hello, world! Don't stop-believing... (really?) [yes]; {no}: #1 @home ~ `q`")
    add("email_url", "Mail foo.bar+baz@example.com or see https://example.org/a/b?x=1&y=2#frag")
    add("numbers", "$100.00 & 50% off: 3.14159e-10, 1,234,567 and 0x1F")
    add("code", "int main(void) { return a->b[i] << 2 | c; } // comment")
    add("no_special", "Hello there, General Kenobi.", 256, 0)
    add("no_special_trunc", "the quick brown fox jumps over the lazy dog", 5, 0)
    add("trunc_5", "the quick brown fox jumps over the lazy dog", 5)
    add("trunc_2", "the quick brown fox", 2)
    add("trunc_mid_word", "unbelievably tokenization internationalization", 4)
    # CJK and other scripts
    add("cjk_zh", "北京大学欢迎你。中文English混合123")
    add("cjk_ja", "日本語のテキストです。カタカナとひらがな")
    add("hangul", "한국어 텍스트 처리")
    add("cjk_compat", "\uf900\uf901 \ufa30 豈")
    add("cjk_ext_b", "\U00020000\U0002a6df \U0002b820 x\U0002b920y")
    add("greek", "Ελληνικά κείμενα με τόνους: άέήίόύώ ΐΰ")
    add("cyrillic", "Привет, мир! Ёлка и йогурт.")
    add("arabic_harakat", "مَرْحَبًا بِالْعَالَم")
    add("hebrew_niqqud", "שָׁלוֹם עוֹלָם")
    add("devanagari", "नमस्ते दुनिया, हिन्दी")
    add("thai", "สวัสดีครับ ภาษาไทย")
    add("vietnamese", "Tiếng Việt có dấu: Nguyễn Ánh")
    add("turkish", "İstanbul'da ılık IŞIK")
    add("german_sz", "Straße STRASSE ẞ groß")
    add("ligatures", "ﬁnancial ﬂow ﬀ ﬃ")
    add("fullwidth", "ＡＢＣ１２３！？ ｈｅｌｌｏ")
    add("numeric_forms", "Ⅷ ⅷ ① ² ½ ¾ ™ ℃")
    add("accents_mixed", "Crème brûlée à la française, Ångström naïve façade coöperate")
    add("combining_seq", "e\u0301 a\u0316\u0301 o\u0308\u0304 x\U0001d16d\U0001d165y")
    add("accents_upper", "ÀÉÎÕÜ ÇÑ Ø Ł Đ")
    add("reorder_marks", "x\u302f\U00016ff0y a\U0001d16d\u0316\U0001d165b \u0301\U0001d165 c\u1b44\u093cd \u00e0\u0316")
    # emoji
    add("emoji", "I ❤️ NLP 😀🚀 👍🏽 great")
    add("emoji_zwj", "family 👨\u200d👩\u200d👧 flag 🇫🇷 keycap 1\ufe0f\u20e3")
    add("emoji_new", "\U0001fae0 \U0001f970 \U0001f9ff")
    # control characters and whitespace
    add("nul", "a\x00b c\x00 \x00d")
    add("replacement_char", "bad\ufffdchar \ufffd ok")
    add("tab_newline", "tab\there\nnew\rline\r\nend")
    add("c0_controls", "x\x01\x02\x07\x08y \x0b\x0c\x1c\x1d\x1e\x1f z")
    add("c1_controls", "x\x7f\x80\x85\x9fy next\x85line")
    add("format_chars", "zero\u200bwidth join\u200dx soft\u00adhyphen bom\ufeffx rtl\u202emark\u202c")
    add("private_use", "pri\ue000vate \U000f0000 use")
    add("unicode_spaces", "a\u00a0b\u3000c\u2028d\u2029e\u2003f\u1680g\u202fh\u205fi")
    add("unassigned", "x\u0378y \U0010ffff z\ufdd0")
    add("tag_chars", "flag\U000e0067\U000e0062\U000e007f end")
    # added / special tokens
    add("special_tokens", "[CLS] hello [SEP] world [MASK] [PAD] [UNK]")
    add("special_glued", "a[MASK]b[SEP]c")
    add("special_lowercase", "[mask] [cls] [Mask]")
    add("special_partial", "[CLS [SEP [MAS]K] [[MASK]]")
    # word length limits (max_input_chars_per_word = 100)
    add("word_100", "a" * 100)
    add("word_101", "a" * 101)
    add("word_100_words", "b" * 50 + "abc" * 16 + "x")
    add("word_e_acute_100", "é" * 100)
    add("word_e_acute_101", "é" * 101)
    add("word_huge", "x" * 5000 + " tail")
    add("word_unk_middle", "hello unwantedX☃ world")
    # long inputs and truncation
    long_text = license_text
    add("long_gpl_256", long_text, 256)
    add("long_gpl_512", long_text, 512)
    add("long_gpl_full", long_text[:6000], 0)
    add("long_repeat", "the quick brown fox " * 400, 256)
    add("long_punct", "!?" * 300, 256)
    return c


def esc(s):
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif (o < 0x20 or 0x7F <= o <= 0x9F or
              (o > 0x7F and unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp", "Zs", "Mn", "Me"))):
            out.append("\\u%04X" % o if o <= 0xFFFF else "\\U%08X" % o)
        else:
            out.append(ch)
    return "".join(out)


def byte_offsets(text, offsets):
    pos = [0]
    for ch in text:
        pos.append(pos[-1] + len(ch.encode("utf-8")))
    return ["%d:%d" % (pos[a], pos[b]) for a, b in offsets]


def load_tokenizer():
    from tokenizers import Tokenizer
    if not os.path.exists(MODEL_JSON):
        sys.exit("missing %s: run scripts/fetch_minilm.sh first" % MODEL_JSON)
    tok = Tokenizer.from_file(MODEL_JSON)
    tok.no_padding()
    return tok


def write_cases(tok, sentences, license_text):
    rows = []
    for i, s in enumerate(sentences):
        rows.append(("sentence_%02d" % i, s, 256, 1))
    rows += edge_cases(license_text)
    lines = ["# Generated by scripts/gen_tokenizer_fixtures.py with tokenizers %s from "
             "models/all-MiniLM-L6-v2/tokenizer.json (sha256 be50c362...). Do not edit." % tok_version(),
             "# name\tmax_len\tadd_special\ttext\tids\toffsets(bytes)"]
    for name, text, max_len, add_special in rows:
        if max_len > 0:
            tok.enable_truncation(max_len)
        else:
            tok.no_truncation()
        enc = tok.encode(text, add_special_tokens=bool(add_special))
        lines.append("\t".join([name, str(max_len), str(add_special), esc(text),
                                ",".join(str(i) for i in enc.ids),
                                ",".join(byte_offsets(text, enc.offsets))]))
    tok.no_truncation()
    with open(os.path.join(FIX, "tokenizer_cases.tsv"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    return len(rows)


def tok_version():
    import tokenizers
    return tokenizers.__version__


def all_code_points():
    return [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def fnv64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def write_unicode():
    """tests/fixtures/tokenizer_unicode.txt:
    N <mode> <first> <last> <fnv1a64 hex>: for every block of 4096 code points (surrogates
      skipped), the FNV-1a 64 hash of BertNormalizer(clean_text, handle_chinese_chars,
      lowercase=L, strip_accents=S).normalize_str(c0 + " " + c1 + " " + ...) in UTF-8;
      mode "lower" = (True, None), mode "plain" = (False, False).
    C <count>x<run> ...: for every code point c in order, the number of ids that a WordPiece
      tokenizer with vocab {[UNK]:0, a:1}, the plain BertNormalizer and BertPreTokenizer gives
      for "a" + c + "a" (2 = whitespace or removed-and-split, 3 = punctuation or CJK, 1 =
      part of the word), run-length encoded.
    S <code>x<run> ...: for every code point, the reordering code of reorder_codes(),
      run-length encoded."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    cps = all_code_points()
    lines = ["# Generated by scripts/gen_tokenizer_fixtures.py with tokenizers %s. Do not edit." % tok_version()]
    for mode, lower, strip in (("lower", True, None), ("plain", False, False)):
        n = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=strip,
                                       lowercase=lower)
        for start in range(0, 0x110000, 4096):
            block = [c for c in range(start, start + 4096) if not 0xD800 <= c <= 0xDFFF]
            if not block:
                continue
            s = " ".join(chr(c) for c in block)
            lines.append("N %s %X %X %016x" % (mode, block[0], block[-1], fnv64(n.normalize_str(s).encode("utf-8"))))
    tk = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]", max_input_chars_per_word=100))
    tk.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False,
                                               lowercase=False)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    counts = [len(e.ids) for e in tk.encode_batch(["a" + chr(c) + "a" for c in cps], add_special_tokens=False)]
    lines += rle_lines("C", counts)
    lines += rle_lines("S", reorder_codes(cps))
    with open(os.path.join(FIX, "tokenizer_unicode.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


def rle_lines(tag, values):
    runs, prev, run = [], None, 0
    for k in values:
        if k == prev:
            run += 1
        else:
            if prev is not None:
                runs.append("%dx%d" % (prev, run))
            prev, run = k, 1
    runs.append("%dx%d" % (prev, run))
    return ["%s %s" % (tag, " ".join(runs[i:i + 16])) for i in range(0, len(runs), 16)]


W216, W226 = "\U0001D165", "\U0001D16D"  # Mc with combining classes 216 and 226 (kept by strip)


def reorder_codes(cps):
    """For each code point c, whether canonical reordering (part of NFD in strip_accents) moves
    it relative to a kept mark, seen through the normalized text and the token offsets:
      probe A = "a" + c + U+1D165 (ccc 216): fires when c sorts after it (ccc > 216);
      probe B = "x " + U+1D16D (ccc 226) + c: fires when c sorts before it (0 < ccc < 226).
    code = 2 * A + B; non-zero exactly for the characters that tokenizers' NFD treats as
    non-starters (its Unicode tables are older than utf8proc's)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    norm = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=False)
    tk = Tokenizer(models.WordPiece({"[UNK]": 0}, unk_token="[UNK]", max_input_chars_per_word=100))
    tk.normalizer = norm
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    alone = [norm.normalize_str(chr(c)) for c in cps]
    pa = ["a" + chr(c) + W216 for c in cps]
    pb = ["x " + W226 + chr(c) for c in cps]
    ea = tk.encode_batch(pa, add_special_tokens=False)
    eb = tk.encode_batch(pb, add_special_tokens=False)
    codes = []
    for i in range(len(cps)):
        fa = ea[i].offsets[-1][1] != len(pa[i]) or norm.normalize_str(pa[i]) != "a" + alone[i] + W216
        fb = 2 not in [o[0] for o in eb[i].offsets] or norm.normalize_str(pb[i]) != "x " + W226 + alone[i]
        codes.append(2 * int(fa) + int(fb))
    return codes


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def print_c_tables():
    """The character sets that tokenizers takes from its own (older) Unicode tables rather
    than from the current standard: punctuation (non-ASCII), characters removed by
    clean_text, non-spacing marks removed by strip_accents, and the characters its NFD
    treats as non-starters (combining class > 0) in canonical reordering."""
    from tokenizers import normalizers, pre_tokenizers
    cps = all_code_points()
    pre = pre_tokenizers.BertPreTokenizer()
    punct = [c for c in cps if c >= 0x80 and [w for w, _ in pre.pre_tokenize_str("a" + chr(c) + "a")] == ["a", chr(c), "a"]]
    clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    removed = [c for c in cps if clean.normalize_str(chr(c)) == ""]
    strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    marks = [c for c in cps if strip.normalize_str(chr(c)) == ""]
    codes = reorder_codes(cps)
    nonstarters = [c for c, k in zip(cps, codes) if k]
    print("/* BEGIN GENERATED TABLES: python3 scripts/gen_tokenizer_fixtures.py --c-tables (tokenizers %s) */"
          % tok_version())
    for name, cs in (("tbl_punct", punct), ("tbl_removed", removed), ("tbl_mn", marks), ("tbl_nonstarter", nonstarters)):
        rs = ranges(cs)
        print("static const cp_range %s[%d] = {" % (name, len(rs)))
        for i in range(0, len(rs), 5):
            print("    " + " ".join("{0x%X, 0x%X}," % (a, b) for a, b in rs[i:i + 5]))
        print("};")
    print("/* END GENERATED TABLES */")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--c-tables", action="store_true", help="print the C character tables and exit")
    args = ap.parse_args()
    if args.c_tables:
        print_c_tables()
        return
    tok = load_tokenizer()
    sentences = parity_sentences()
    if len(sentences) < 60:
        sys.exit("only %d sentences extracted; need at least 60" % len(sentences))
    os.makedirs(FIX, exist_ok=True)
    with open(os.path.join(FIX, "parity_sentences.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(sentences) + "\n")
    with open("/usr/share/common-licenses/GPL-3", encoding="utf-8") as f:
        license_text = f.read()[:20000]
    n = write_cases(tok, sentences, license_text)
    write_unicode()
    print("wrote %d sentences, %d cases, tokenizer_unicode.txt (tokenizers %s)" % (len(sentences), n, tok_version()))


if __name__ == "__main__":
    main()
