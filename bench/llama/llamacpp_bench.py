#!/usr/bin/env python3
"""llama.cpp side of bench/llama (llama-cpp-python): prefill of the same P prompt ids and decode of
D tokens (greedy, one token per eval), T threads, best of R runs, with and without flash attention.
Prints one line per configuration, like bench_llama.
Usage: python3 llamacpp_bench.py MODEL.gguf PROMPT_IDS_FILE THREADS [P] [D] [R]"""
import sys
import time

import numpy as np
from llama_cpp import Llama, __version__

model, idf, T = sys.argv[1], sys.argv[2], int(sys.argv[3])
P = int(sys.argv[4]) if len(sys.argv) > 4 else 256
D = int(sys.argv[5]) if len(sys.argv) > 5 else 128
R = int(sys.argv[6]) if len(sys.argv) > 6 else 3
ids = [int(x) for x in open(idf).read().split()][:P]
best = None
# llama.cpp's configurations: default attention and flash attention (FA); the faster one counts
for fa in (False, True):
    llm = Llama(model_path=model, n_ctx=P + D + 8, n_batch=512, n_ubatch=512, n_threads=T, n_threads_batch=T,
                flash_attn=fa, verbose=False)
    bp = bd = 0.0
    for _ in range(R):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        t1 = time.perf_counter()
        for _ in range(D):
            tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            llm.eval([tok])
        t2 = time.perf_counter()
        bp = max(bp, P / (t1 - t0))
        bd = max(bd, D / (t2 - t1))
    print("llama.cpp %s threads=%d flash_attn=%d prefill_tok_s=%.1f decode_tok_s=%.1f" % (__version__, T, fa, bp, bd), flush=True)
    del llm
