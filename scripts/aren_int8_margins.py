#!/usr/bin/env python3
"""Where attn's int8 aren outputs differ from CTranslate2's, show that the difference is a near-tie
for CTranslate2 itself.

For every word of tests/fixtures/aren/words.txt whose greedy or beam-4 (4-best) output from
`attn translate` (the int8 model) differs from CTranslate2 4.8.5's (tests/fixtures/aren/*_int8.txt),
take the first differing hypothesis (rank r) and report, computed by CTranslate2 on the same model:
  - step: first target position where the two hypotheses differ, and CTranslate2's log-probability
    margin there between its own token and attn's token, given the common prefix (top-2 margin
    when attn's token is CTranslate2's runner-up);
  - the length-normalised scores (score_batch, length penalty 1) CTranslate2 gives to both
    hypotheses and their difference.
Small margins mean the two token choices are within the model's int8 rounding noise: attn
reproduces CTranslate2's quantisation and integer GEMM bit for bit (scripts/probe_ct2_int8.c),
but not the float rounding order of oneDNN's single-precision GEMMs inside attention, and the
int8 model re-quantises every layer input, so a one-ulp float difference can move a value
across a quantisation step.
Run: /work/venv/bin/python scripts/aren_int8_margins.py [models_dir] > bench/seq2seq/int8_margins.txt
"""
import os
import subprocess
import sys

import ctranslate2
import numpy as np

MODELS = sys.argv[1] if len(sys.argv) > 1 else "../shared/models"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODEL = os.path.join(MODELS, "aren-transliteration-int8")
FIX = os.path.join(ROOT, "tests", "fixtures", "aren")


def load_fixture(name):
    words, cur = [], []
    for line in open(os.path.join(FIX, name), encoding="utf-8").read().splitlines():
        if line == "#":
            words.append(cur)
            cur = []
        else:
            s, toks = line.split("\t")
            cur.append((float(s), toks.split()))
    return words


def run_attn(words, beam):
    args = [os.path.join(ROOT, "build", "attn"), "translate", "--model", MODEL, "--scores"]
    if beam > 1:
        args += ["--beam", str(beam), "--n-best", str(beam)]
    out = subprocess.run(args, input="\n".join(" ".join(w) for w in words) + "\n", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    res, i = [], 0
    n = beam if beam > 1 else 1
    for _ in words:
        res.append([(float(l.split("\t")[0]), l.split("\t")[1].split()) for l in out[i:i + n]])
        i += n
    return res


def main():
    words = [l.split() for l in open(os.path.join(FIX, "words.txt"), encoding="utf-8").read().splitlines()]
    t = ctranslate2.Translator(MODEL, device="cpu", inter_threads=1, intra_threads=1)
    # target ids: one token per line, <unk> appended when missing (as CTranslate2 loads them)
    vocab = open(os.path.join(MODEL, "target_vocabulary.txt"), encoding="utf-8").read().splitlines()
    if "<unk>" not in vocab:
        vocab.append("<unk>")
    print("# attn int8 vs CTranslate2 4.8.5 int8 (aren-transliteration-int8), differing words only")
    print("# case word rank | step ct2_tok attn_tok margin(ct2 lp - attn lp at step) | ct2 score(ct2 hyp) ct2 score(attn hyp) diff | source -> ct2 / attn")
    for case, fixture, beam in (("greedy", "greedy_int8.txt", 1), ("beam4", "beam4_int8.txt", 4)):
        ref = load_fixture(fixture)
        got = run_attn(words, beam)
        n_diff, n_best_diff, margins = 0, 0, []
        for wi, (w, r, g) in enumerate(zip(words, ref, got)):
            rank = next((k for k in range(max(len(r), len(g))) if k >= len(r) or k >= len(g) or r[k][1] != g[k][1]), None)
            if rank is None:
                continue
            n_diff += 1
            n_best_diff += rank == 0
            hc, ha = r[rank][1], g[rank][1]
            p = 0
            while p < len(hc) and p < len(ha) and hc[p] == ha[p]:
                p += 1
            res = t.translate_batch([w], beam_size=1, target_prefix=[hc[:p]] if p else None, max_decoding_length=p + 1,
                                    return_logits_vocab=True)
            logits = np.array(res[0].logits[0][p], dtype=np.float64)
            lp = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
            tc = hc[p] if p < len(hc) else "</s>"
            ta = ha[p] if p < len(ha) else "</s>"
            margin = lp[vocab.index(tc)] - lp[vocab.index(ta)]
            margins.append(margin)
            sc = t.score_batch([w, w], [hc, ha])
            s1 = sum(sc[0].log_probs) / len(sc[0].log_probs)
            s2 = sum(sc[1].log_probs) / len(sc[1].log_probs)
            print(f"{case} {wi} {rank} | {p} {tc} {ta} {margin:.4f} | {s1:.5f} {s2:.5f} {s1 - s2:.5f} | "
                  f"{''.join(w)} -> {' '.join(hc)} / {' '.join(ha)}")
        m = np.array(margins) if margins else np.array([np.nan])
        print(f"# {case}: {n_diff}/{len(words)} words differ in some hypothesis, {n_best_diff} in the best one; "
              f"|step margin| max {np.nanmax(np.abs(m)):.4f}, median {np.nanmedian(np.abs(m)):.4f}")


if __name__ == "__main__":
    main()
