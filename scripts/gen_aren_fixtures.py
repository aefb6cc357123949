#!/usr/bin/env python3
"""Reference outputs of CTranslate2 (PyPI ctranslate2 4.8.5) for the aren-transliteration models,
used by tests/test_translate.c.

Writes tests/fixtures/aren/:
  words.txt            one Arabic word per line, characters separated by spaces (the model's input)
  CASE.txt             for each decoding case, per word: one line per hypothesis "score<TAB>tokens"
                       (n-best hypotheses of one word are consecutive; a line "#" ends each word)
  attention.txt        greedy float32 cross-attention of the first 20 words: one line per target
                       step, source weights separated by spaces, "#" after each word
Words: common Arabic words and names, the Arabic words of glibc's ar_* locale files (month,
day and country names), and a few made-up letter strings with rare letters and one token
missing from the vocabulary (it becomes <unk>).
Run: /work/venv/bin/python scripts/gen_aren_fixtures.py [models_dir]
"""
import glob
import os
import random
import re
import sys

import ctranslate2

MODELS = sys.argv[1] if len(sys.argv) > 1 else "../shared/models"
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "aren")

COMMON = """
كتاب مدرسة بيت باب شمس قمر ماء خبز سيارة طريق مدينة قرية بحر نهر جبل شجرة وردة قلم ورقة
مكتب طاولة كرسي نافذة سماء أرض نار هواء ليل نهار صباح مساء يوم شهر سنة ساعة دقيقة وقت
أب أم أخ أخت ابن بنت جد جدة عم خال صديق معلم طالب طبيب مهندس عامل فلاح تاجر شرطي جندي
محمد أحمد علي حسن حسين فاطمة عائشة مريم خديجة زينب يوسف إبراهيم موسى عيسى سليمان داود
خالد عمر عثمان سعيد سعاد ليلى نور هدى سلمى رشيد كريم جميل سمير نبيل وليد طارق ياسين
قهوة شاي حليب عسل تمر تفاح برتقال موز عنب ليمون سكر ملح لحم دجاج سمك أرز عدس فول
كبير صغير جديد قديم طويل قصير جميل سريع بطيء حار بارد سهل صعب قريب بعيد أبيض أسود أحمر
مرحبا شكرا سلام أهلا نعم لا صباح مساء الخير الحمد لله إن شاء الله ماشاء
القاهرة دمشق بغداد بيروت عمان الرياض جدة مكة المدينة الدوحة دبي أبوظبي مسقط صنعاء
الخرطوم طرابلس تونس الجزائر الرباط مراكش فاس حلب حمص الموصل البصرة الإسكندرية
حب سلام حرية عدالة علم عمل فن موسيقى شعر قصة رواية جريدة مجلة تلفزيون هاتف حاسوب
""".split()


def locale_words():
    words = set()
    for f in sorted(glob.glob("/usr/share/i18n/locales/ar_*")):
        t = open(f, encoding="utf-8", errors="ignore").read()
        for s in re.findall(r'"((?:<U[0-9A-Fa-f]{4}>)+(?:<U0020>(?:<U[0-9A-Fa-f]{4}>)+)*)"', t):
            txt = "".join(chr(int(h, 16)) for h in re.findall(r"<U([0-9A-Fa-f]{4})>", s))
            for w in txt.split():
                if all("\u0621" <= c <= "\u064a" for c in w) and len(w) >= 2:
                    words.add(w)
    return sorted(words)


def main():
    words = []
    for w in COMMON + locale_words():
        if w not in words:
            words.append(w)
    rng = random.Random(9)
    letters = list("ابتثجحخدذرزسشصضطظعغفقكلمنهوي") + ["ة", "ى", "ئ", "ؤ", "ء", "آ"]
    for _ in range(30):
        words.append("".join(rng.choice(letters) for _ in range(rng.randint(2, 9))))
    words.append("ك@ت")  # '@' is not in the source vocabulary: <unk>
    inputs = [list(w) for w in words]
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "words.txt"), "w", encoding="utf-8") as f:
        for toks in inputs:
            f.write(" ".join(toks) + "\n")
    cases = {
        "greedy": dict(beam_size=1),
        "beam4": dict(beam_size=4, num_hypotheses=4),
        "beam4_lp0": dict(beam_size=4, num_hypotheses=2, length_penalty=0.0),
        "beam4_lp2": dict(beam_size=4, num_hypotheses=1, length_penalty=2.0),
        "beam3_prefix": dict(beam_size=3, num_hypotheses=3, target_prefix=[["a", "l"]] * len(inputs)),
        "greedy_prefix": dict(beam_size=1, target_prefix=[["a", "l"]] * len(inputs)),
        "beam4_minmax": dict(beam_size=4, num_hypotheses=2, min_decoding_length=6, max_decoding_length=8),
        "greedy_rep": dict(beam_size=1, repetition_penalty=1.5),
        "greedy_rep08": dict(beam_size=1, repetition_penalty=0.8),
        "beam4_rep": dict(beam_size=4, num_hypotheses=2, repetition_penalty=1.5),
        "beam4_suppress": dict(beam_size=4, num_hypotheses=2, suppress_sequences=[["a"], ["h", "a"]]),
        "greedy_end": dict(beam_size=1, end_token="a", max_decoding_length=20),
    }
    for model in ("aren-transliteration", "aren-transliteration-int8"):
        t = ctranslate2.Translator(os.path.join(MODELS, model), device="cpu", inter_threads=1, intra_threads=1)
        tag = "int8" if model.endswith("int8") else "f32"
        for name, kw in cases.items():
            if tag == "int8" and name not in ("greedy", "beam4", "beam4_lp0", "beam3_prefix"):
                continue
            res = t.translate_batch(inputs, return_scores=True, max_batch_size=32, **kw)
            with open(os.path.join(OUT, f"{name}_{tag}.txt"), "w", encoding="utf-8") as f:
                for r in res:
                    for h, s in zip(r.hypotheses, r.scores):
                        f.write(f"{s:.7f}\t{' '.join(h)}\n")
                    f.write("#\n")
        if tag == "f32":
            res = t.translate_batch(inputs[:20], beam_size=1, return_attention=True)
            with open(os.path.join(OUT, "attention.txt"), "w") as f:
                for r in res:
                    for row in r.attention[0]:
                        f.write(" ".join(f"{x:.7g}" for x in row) + "\n")
                    f.write("#\n")
    print(f"{len(inputs)} words written to {OUT}")


if __name__ == "__main__":
    main()
