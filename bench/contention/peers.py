#!/usr/bin/env python3
"""Peers' side of bench/contention: the work of one attn verb done by the peer the bench files
compare attn with, at THREADS threads, timed in-process (model loading excluded; one warm-up
call first). Prints one line: `WORKLOAD THREADS seconds=S rate=...`.

    python peers.py WORKLOAD THREADS INPUT_DIR

WORKLOAD (the attn verb it mirrors, bench/contention/run.sh):
  generate    llama.cpp (llama-cpp-python) on SmolLM2-135M-Instruct Q4_1: the prompt file, 128 tokens greedy
  chat        llama.cpp chat completion, the same message as run.sh, 128 tokens greedy
  embed       transformers (PyTorch) all-MiniLM-L6-v2: the sentences, batches of 32, mean pooling
  classify    transformers (PyTorch) ViT: 3000 Fashion-MNIST test images, batches of 64
  translate   CTranslate2 aren-transliteration float32: the words, batches of 32, greedy
  transcribe  faster-whisper tiny.en float32: Front_Center.wav, beam 5
Each runs in the venv that has its package (peers.sh passes the right python)."""
import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def timed(fn):
    fn(warm=True)
    t0 = time.perf_counter()
    rate = fn(warm=False)
    return time.perf_counter() - t0, rate


def llama(threads):
    from llama_cpp import Llama
    return Llama(model_path=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"), n_ctx=2048, n_batch=512,
                 n_threads=threads, n_threads_batch=threads, verbose=False)


def generate(threads, inp):
    m = llama(threads)
    prompt = open(os.path.join(inp, "prompt.txt"), encoding="utf-8").read()

    def run(warm):
        r = m.create_completion(prompt, max_tokens=4 if warm else 128, temperature=0.0)
        return "%d tokens" % r["usage"]["completion_tokens"]
    return timed(run)


def chat(threads, inp):
    m = llama(threads)
    msg = [{"role": "user", "content": "Write a short story about a robot who learns to paint."}]

    def run(warm):
        r = m.create_chat_completion(msg, max_tokens=4 if warm else 128, temperature=0.0)
        return "%d tokens" % r["usage"]["completion_tokens"]
    return timed(run)


def embed(threads, inp):
    import torch
    from transformers import AutoModel, AutoTokenizer
    torch.set_num_threads(threads)
    path = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    sents = open(os.path.join(inp, "sentences.txt"), encoding="utf-8").read().splitlines()

    def run(warm):
        todo = sents[:32] if warm else sents
        with torch.inference_mode():
            for i in range(0, len(todo), 32):
                b = tok(todo[i:i + 32], padding=True, truncation=True, return_tensors="pt")
                h = model(**b).last_hidden_state
                m = b["attention_mask"].unsqueeze(-1).float()
                torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=1)
        return "%d sentences" % len(todo)
    return timed(run)


def classify(threads, inp):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from train_vit import load, normalise
    from transformers import ViTForImageClassification
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    model = ViTForImageClassification.from_pretrained(os.path.join(ROOT, "models", "vit-fashion-mnist")).eval()
    x, y = load("t10k")
    n = int(os.environ.get("NIMG", "3000"))
    x, y = x[:n], y[:n]

    def run(warm):
        todo = 64 if warm else len(x)
        with torch.inference_mode():
            for i in range(0, todo, 64):
                model(pixel_values=normalise(x[i:min(i + 64, todo)])).logits.argmax(-1)
        return "%d images" % todo
    return timed(run)


def translate(threads, inp):
    import ctranslate2
    t = ctranslate2.Translator(os.path.join(ROOT, "..", "shared", "models", "aren-transliteration"), device="cpu", inter_threads=1,
                               intra_threads=threads)
    words = [line.rstrip("\n").split() for line in open(os.path.join(inp, "words_n.txt"), encoding="utf-8")]

    def run(warm):
        todo = words[:32] if warm else words
        for i in range(0, len(todo), 32):
            t.translate_batch(todo[i:i + 32], beam_size=1, max_batch_size=32)
        return "%d words" % len(todo)
    return timed(run)


def transcribe(threads, inp):
    from faster_whisper import WhisperModel
    fw = WhisperModel(os.path.join(ROOT, "models", "whisper-tiny.en"), device="cpu", cpu_threads=threads, compute_type="float32")

    def run(warm):
        segs, _ = fw.transcribe("/usr/share/sounds/alsa/Front_Center.wav", beam_size=5, without_timestamps=True, temperature=0.0,
                                vad_filter=False)
        return "%d segments" % len(list(segs))
    return timed(run)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    work, threads, inp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    fns = {"generate": generate, "chat": chat, "embed": embed, "classify": classify, "translate": translate, "transcribe": transcribe}
    if work not in fns:
        sys.exit("unknown workload %s" % work)
    secs, rate = fns[work](threads, inp)
    print("%s %d seconds=%.3f rate=%s" % (work, threads, secs, rate), flush=True)


if __name__ == "__main__":
    main()
