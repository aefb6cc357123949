#!/usr/bin/env python3
"""ONNX Runtime (CPU, N threads) on all-MiniLM-L6-v2, batch 32, over bench/minilm/sentences.txt:
tokenizer (HF `tokenizers`, the model's tokenizer.json, max 256 word pieces), the BERT graph in
ONNX Runtime, mean pooling over the attention mask and L2 normalisation (what sentence-transformers
does for this model). Prints sentences/s, best of R passes (tokenisation included, as in
`attn embed`; model load and ONNX export excluded).

usage: ort_embed.py THREADS REPS [--int8] [--check EMB.npy]
The fp32 ONNX model is exported once with torch.onnx (TorchScript exporter, opset 17; needs the
`onnx` package) to build/bench/minilm.onnx; --int8 also makes build/bench/minilm.int8.onnx with
onnxruntime.quantization.quantize_dynamic (int8 weights, QInt8) and times that.
--check EMB.npy prints the minimum cosine between these embeddings and EMB.npy (e.g. the output of
`attn embed`), on stderr.
"""
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
model_dir = os.path.join(root, "models", "all-MiniLM-L6-v2")
out_dir = os.path.join(root, "build", "bench")
fp32_path = os.path.join(out_dir, "minilm.onnx")
int8_path = os.path.join(out_dir, "minilm.int8.onnx")


def export():
    import torch
    from transformers import AutoModel

    m = AutoModel.from_pretrained(model_dir).eval()

    class W(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, att, tt):
            return self.m(input_ids=ids, attention_mask=att, token_type_ids=tt).last_hidden_state

    ids = torch.ones(2, 16, dtype=torch.long)
    os.makedirs(out_dir, exist_ok=True)
    torch.onnx.export(W(m), (ids, ids, torch.zeros_like(ids)), fp32_path,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"],
                      dynamic_axes={n: {0: "b", 1: "s"} for n in ["input_ids", "attention_mask", "token_type_ids",
                                                                  "last_hidden_state"]},
                      opset_version=17, dynamo=False)


def main():
    threads, reps = int(sys.argv[1]), int(sys.argv[2])
    int8 = "--int8" in sys.argv
    check = sys.argv[sys.argv.index("--check") + 1] if "--check" in sys.argv else None
    if not os.path.exists(fp32_path):
        export()
    path = fp32_path
    if int8:
        if not os.path.exists(int8_path):
            from onnxruntime.quantization import QuantType, quantize_dynamic
            quantize_dynamic(fp32_path, int8_path, weight_type=QuantType.QInt8)
        path = int8_path
    import onnxruntime as ort
    from tokenizers import Tokenizer

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(256)
    tok.enable_padding()
    sents = open(os.path.join(here, "sentences.txt")).read().splitlines()

    def embed(batch):
        enc = tok.encode_batch(batch)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        att = np.array([e.attention_mask for e in enc], dtype=np.int64)
        h = sess.run(None, {"input_ids": ids, "attention_mask": att, "token_type_ids": np.zeros_like(ids)})[0]
        m = att[:, :, None].astype(np.float32)
        e = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)

    def run():
        return np.concatenate([embed(sents[i:i + 32]) for i in range(0, len(sents), 32)])

    embed(sents[:32])
    best = 0
    for _ in range(reps):
        t = time.perf_counter()
        emb = run()
        best = max(best, len(sents) / (time.perf_counter() - t))
    if check:
        ref = np.load(check)
        ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
        print(f"min cosine to {check}: {float((emb * ref).sum(1).min()):.6f}", file=sys.stderr)
    print(f"{best:.1f}")


if __name__ == "__main__":
    main()
