#!/usr/bin/env python3
"""Plot the attention-variant benchmarks (bench/variants/run_bench.py) into docs/variants.png.

Panels: (a) time against L, (b) working memory against L (both log-log), (c) Performer's
error to exact attention against the number of random features M, (d) cosine of
all-MiniLM-L6-v2 embeddings with each variant to those with exact attention.

Usage (from the repository root):  python3 scripts/plot_variants.py [--out docs/variants.png]
Needs matplotlib (pip install matplotlib).
"""
import argparse
import csv
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench", "variants")

STYLE = {
    "exact": ("black", "o", "-"),
    "sliding W=256": ("tab:blue", "s", "-"),
    "longformer w=128 G=1": ("tab:orange", "^", "-"),
    "bigbird b=64 g=1 r=3": ("tab:green", "D", "-"),
    "linear": ("tab:red", "v", "-"),
    "linear causal": ("tab:red", "v", "--"),
    "performer M=256": ("tab:purple", "P", "-"),
}


def read_csv(name):
    path = os.path.join(BENCH, name)
    with open(path) as f:
        lines = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(lines)), path


def first_comment(path):
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                return line[1:].strip()
    return ""


def slope(xs, ys):
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    n = len(lx)
    mx, my = sum(lx) / n, sum(ly) / n
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "variants.png"))
    a = ap.parse_args()

    rows, rpath = read_csv("results.csv")
    fig, ax = plt.subplots(2, 2, figsize=(13, 10))
    series = {}
    for r in rows:
        series.setdefault(r["label"], []).append(r)
    for label, rs in series.items():
        rs.sort(key=lambda r: int(r["L"]))
        L = [int(r["L"]) for r in rs]
        t = [float(r["best_ms"]) for r in rs]
        mem = [max(float(r["heap_kb"]), 1.0) for r in rs]
        c, m, ls = STYLE.get(label, ("gray", ".", "-"))
        tail = [(x, y) for x, y in zip(L, t) if x >= 8192]
        s = slope([x for x, _ in tail], [y for _, y in tail]) if len(tail) >= 2 else float("nan")
        ax[0][0].loglog(L, t, color=c, marker=m, ls=ls, label="%s (slope %.2f)" % (label, s))
        ax[0][1].loglog(L, mem, color=c, marker=m, ls=ls, label=label)
    ax[0][0].set_xlabel("sequence length L (Lq = Lk)")
    ax[0][0].set_ylabel("time per call, ms (best of runs)")
    ax[0][0].set_title("(a) time, B=1, H=2, D=64 (slope fitted for L >= 8k)")
    ax[0][0].grid(True, which="both", alpha=0.3)
    ax[0][0].legend(fontsize=8)
    ax[0][1].set_xlabel("sequence length L")
    ax[0][1].set_ylabel("peak heap allocated by the call, KiB")
    ax[0][1].set_title("(b) working memory (inputs and output excluded)")
    ax[0][1].grid(True, which="both", alpha=0.3)
    ax[0][1].legend(fontsize=8)

    erows, _ = read_csv("performer_error.csv")
    by_sigma = {}
    for r in erows:
        by_sigma.setdefault(r["sigma"], []).append(r)
    for sigma, rs in sorted(by_sigma.items()):
        M = [int(r["M"]) for r in rs]
        e = [float(r["mean_rel_err"]) for r in rs]
        lo = [float(r["mean_rel_err"]) - float(r["min_rel_err"]) for r in rs]
        hi = [float(r["max_rel_err"]) - float(r["mean_rel_err"]) for r in rs]
        ax[1][0].errorbar(M, e, yerr=[lo, hi], marker="o", capsize=3,
                          label="q, k ~ N(0, %s^2): slope %.2f" % (sigma, slope(M, e)))
    ref = [16, 4096]
    e0 = float(by_sigma[sorted(by_sigma)[0]][0]["mean_rel_err"])
    ax[1][0].plot(ref, [e0 * (x / 16) ** -0.5 for x in ref], "k:", label="M^-1/2")
    ax[1][0].set_xscale("log")
    ax[1][0].set_yscale("log")
    ax[1][0].set_xlabel("random features M")
    ax[1][0].set_ylabel("||out - exact||_F / ||exact||_F (mean of 8 seeds, min-max bars)")
    ax[1][0].set_title("(c) Performer error, L=1024, D=64")
    ax[1][0].grid(True, which="both", alpha=0.3)
    ax[1][0].legend(fontsize=8)

    qrows, _ = read_csv("quality.csv")
    labels = [r["label"] for r in qrows if r["set"] == "sentences" and r["variant"] not in ("exact", "baseline")]
    sets = ["sentences", "passages"]
    width = 0.38
    for k, sname in enumerate(sets):
        vals = {r["label"]: float(r["mean_cos"]) for r in qrows if r["set"] == sname}
        mins = {r["label"]: float(r["min_cos"]) for r in qrows if r["set"] == sname}
        toks = next(r["mean_tokens"] for r in qrows if r["set"] == sname)
        xs = [i + (k - 0.5) * width for i in range(len(labels))]
        ax[1][1].bar(xs, [vals[lb] for lb in labels], width, label="%s (mean %s tokens); dot = min" % (sname, toks))
        ax[1][1].plot(xs, [mins[lb] for lb in labels], "k.", ms=5)
        base = [float(r["mean_cos"]) for r in qrows if r["set"] == sname and r["variant"] == "baseline"]
        if base:
            ax[1][1].axhline(base[0], color="C%d" % k, ls=":", lw=1,
                             label="%s: exact embeddings of different texts" % sname)
    ax[1][1].set_xticks(range(len(labels)))
    ax[1][1].set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
    ax[1][1].set_ylim(0, 1.02)
    ax[1][1].set_ylabel("cosine to exact-attention embedding (mean)")
    ax[1][1].set_title("(d) all-MiniLM-L6-v2 with each variant in all layers")
    ax[1][1].grid(True, axis="y", alpha=0.3)
    ax[1][1].legend(fontsize=8, loc="lower left")

    fig.suptitle("attn: efficient attention variants — " + first_comment(rpath), fontsize=9)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
