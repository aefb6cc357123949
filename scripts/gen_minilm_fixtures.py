#!/usr/bin/env python3
"""Reference outputs of sentence-transformers/all-MiniLM-L6-v2 for attn's parity test.

Inputs: tests/fixtures/parity_sentences.txt (real sentences extracted from text shipped with
Debian, see scripts/gen_tokenizer_fixtures.py) plus the edge cases below.
Outputs (tests/fixtures/minilm/):
  sentences.jsonl   one JSON string per line (the exact inputs, control characters escaped)
  embeddings.npy    float32 [N, 384]: SentenceTransformer.encode(batch_size=32), i.e.
                    truncation at 256 word pieces, mean pooling, L2 normalisation
  ids_<k>.npy       int32 [L]: input ids of the hidden-state sentences
  hidden_<k>.npy    float32 [7, L, 384]: transformers BertModel hidden_states (embedding
                    output and the 6 layers) for three sentences of different lengths
Run from the repository root after scripts/fetch_minilm.sh:
    pip install sentence-transformers   # PyTorch + transformers
    python3 scripts/gen_minilm_fixtures.py
"""
import json
import os

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODEL = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
OUT = os.path.join(ROOT, "tests", "fixtures", "minilm")
os.makedirs(OUT, exist_ok=True)

with open(os.path.join(ROOT, "tests", "fixtures", "parity_sentences.txt"), encoding="utf-8") as f:
    sentences = [line.rstrip("\n") for line in f if line.strip()]

edge = [
    "",
    "Héllò hôw are ü?",
    "unwanted running",
    "日本語のテキストと中文文本。",
    "Emoji 😀 and symbols ☃ → ∞",
    "tab\tseparated\u00a0nbsp and control\u0007char",
    "a" * 101 + " word after a very long one",
    # longer than 256 word pieces: checks truncation
    " ".join(["attention is all you need"] * 70),
]
texts = sentences + edge

model = SentenceTransformer(MODEL, device="cpu")
emb = model.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=False)
np.save(os.path.join(OUT, "embeddings.npy"), emb.astype(np.float32))
with open(os.path.join(OUT, "sentences.jsonl"), "w", encoding="utf-8") as f:
    for t in texts:
        f.write(json.dumps(t, ensure_ascii=True) + "\n")

bert = model[0].auto_model.eval()
tok = model.tokenizer
picks = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
hs_idx = [picks[0], picks[len(picks) // 2], picks[-1]]
with torch.no_grad():
    for k, i in enumerate(hs_idx):
        enc = tok(sentences[i], return_tensors="pt", truncation=True, max_length=256)
        out = bert(**enc, output_hidden_states=True)
        hs = torch.stack(out.hidden_states, 0)[:, 0].numpy().astype(np.float32)
        np.save(os.path.join(OUT, f"ids_{k}.npy"), enc["input_ids"][0].numpy().astype(np.int32))
        np.save(os.path.join(OUT, f"hidden_{k}.npy"), hs)
print(f"{len(texts)} sentences; hidden states for sentences {hs_idx}; written to {OUT}")
