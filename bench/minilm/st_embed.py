#!/usr/bin/env python3
"""sentence-transformers on PyTorch (CPU, N threads), batch 32: prints sentences/s (best of R runs)."""
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from sentence_transformers import SentenceTransformer

threads, reps = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sents = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "sentences.txt")).read().splitlines()
m = SentenceTransformer(os.path.join(root, "models", "all-MiniLM-L6-v2"), device="cpu")
m.encode(sents[:64], batch_size=32)
best = 0
for _ in range(reps):
    t = time.perf_counter()
    m.encode(sents, batch_size=32)
    best = max(best, len(sents) / (time.perf_counter() - t))
print(f"{best:.1f}")
