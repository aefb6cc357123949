#!/usr/bin/env python3
"""`attn quantize` against llama.cpp's quantizer (llama_model_quantize through llama-cpp-python's
ctypes binding), byte for byte, tensor by tensor, block by block. Never run in CI (llama-cpp-python
is a 10+ minute build); its findings are in the report of issue 25 and, for a few tensors, in
tests/fixtures/qwen2/quant_llamacpp.gguf (tests/test_qwen2_quant.c).

Input: a random Llama GGUF in float32 whose rows are multiples of 256 (so every K-quant applies):
4 layers, hidden 256, 4 heads of 64 (2 KV heads), FFN 512, vocabulary 355 (the tokenizer of
tests/fixtures/qwen2/qwen2_tiny.f32.gguf), weights drawn from a Gaussian
with per-row scales spread over two decades, a heavy-tailed (Student t, 3 degrees) matrix and a
few outliers, so that the scale searches meet more than one kind of row. Optionally a second
input: any GGUF given on the command line (e.g. SmolLM2), dequantized to float32 first.
For each file type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K):
attn's output and llama.cpp's are read with gguf-py; for every tensor the types must agree and
the bytes are compared per block (blocks that differ are counted and the first few described).
Result (llama-cpp-python 0.3.36): every quantized tensor byte-identical, no type differing:
  random Llama: 30 tensors in each of the 10 file types (9926 K-quant / 76923-79408 32-value blocks);
  SmolLM2-135M-Instruct (Q4_1 dequantized; --types=Q2_K,Q3_K_M,Q4_K_M,Q5_K_M,Q6_K,Q8_0): 211 tensors
  each, including the fallbacks of its 576-wide rows (Q4_0 / Q5_0 / Q5_1 / Q8_0).
Run: python3 -m venv /work/venv-llama && /work/venv-llama/bin/pip install numpy gguf llama-cpp-python
     /work/venv-llama/bin/python scripts/compare_llamacpp_quantize.py [--fixture] [--types=Q4_K_M,...] [other.gguf ...]
     (--types limits the file types of the other inputs; --fixture writes the test fixture)
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
import llama_cpp

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ATTN = os.environ.get("ATTN_BIN", os.path.join(ROOT, "build", "attn"))
T = gguf.GGMLQuantizationType
FTYPES = {  # name -> llama_ftype (llama.h)
    "Q8_0": 7, "Q4_0": 2, "Q4_1": 3, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K_M": 12, "Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18,
}


def random_model(path):
    rng = np.random.default_rng(25)
    E, F, L, H, Hkv, V = 256, 512, 4, 4, 2, 355
    D = E // H

    def mat(r, c, kind="gauss"):
        if kind == "t3":
            w = rng.standard_t(3, (r, c))
        else:
            w = rng.standard_normal((r, c))
        w *= np.exp(rng.uniform(np.log(0.01), np.log(1.0), (r, 1)))
        if kind == "outliers":
            idx = rng.integers(0, r * c, 40)
            w.flat[idx] *= 30
        return (w * 0.05).astype(np.float32)

    w = gguf.GGUFWriter(path, "llama")
    w.add_name("random llama for quantizer comparison")
    w.add_context_length(512)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(Hkv)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(D)
    w.add_vocab_size(V)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    r = gguf.GGUFReader(os.path.join(ROOT, "tests", "fixtures", "qwen2", "qwen2_tiny.f32.gguf"))
    f = r.fields
    toks = [str(bytes(f["tokenizer.ggml.tokens"].parts[i]), "utf-8") for i in f["tokenizer.ggml.tokens"].data]
    assert len(toks) == V
    w.add_token_list(toks)
    w.add_token_types([int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data])
    w.add_token_merges([str(bytes(f["tokenizer.ggml.merges"].parts[i]), "utf-8") for i in f["tokenizer.ggml.merges"].data])
    w.add_bos_token_id(int(f["tokenizer.ggml.bos_token_id"].parts[-1][0]))
    w.add_eos_token_id(int(f["tokenizer.ggml.eos_token_id"].parts[-1][0]))
    w.add_tensor("token_embd.weight", mat(V, E))
    for l in range(L):
        b = "blk.%d." % l
        w.add_tensor(b + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
        w.add_tensor(b + "attn_q.weight", mat(H * D, E))
        w.add_tensor(b + "attn_k.weight", mat(Hkv * D, E, "t3"))
        w.add_tensor(b + "attn_v.weight", mat(Hkv * D, E))
        w.add_tensor(b + "attn_output.weight", mat(E, H * D, "outliers"))
        w.add_tensor(b + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
        w.add_tensor(b + "ffn_gate.weight", mat(F, E))
        w.add_tensor(b + "ffn_up.weight", mat(F, E, "t3"))
        w.add_tensor(b + "ffn_down.weight", mat(E, F, "outliers"))
    w.add_tensor("output_norm.weight", np.ones(E, np.float32))
    w.add_tensor("output.weight", mat(V, E))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def dequantized_copy(src, dst):
    """src with every tensor in float32 (metadata copied, file type ALL_F32)"""
    r = gguf.GGUFReader(src)
    arch = str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8")
    w = gguf.GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            et = f.types[-1]
            if et == gguf.GGUFValueType.STRING:
                val = [str(bytes(f.parts[i]), "utf-8") for i in f.data]
            else:
                val = [f.parts[i][0].item() for i in f.data]
            w.add_array(name, val)
        elif vt == gguf.GGUFValueType.STRING:
            w.add_string(name, str(bytes(f.parts[-1]), "utf-8"))
        else:
            w.add_key_value(name, f.parts[-1][0].item(), vt)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w.add_tensor(t.name, a.reshape([int(x) for x in reversed(t.shape)]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llamacpp_quantize(src, dst, ftype):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 1
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    if rc != 0:
        raise SystemExit("llama_model_quantize %s -> %d" % (dst, rc))


def compare(a_path, b_path):
    """per tensor: (name, type attn, type llama.cpp, blocks, differing blocks, first differing block)"""
    a, b = gguf.GGUFReader(a_path), gguf.GGUFReader(b_path)
    bt = {t.name: t for t in b.tensors}
    out = []
    for t in a.tensors:
        u = bt.get(t.name)
        if u is None:
            out.append((t.name, t.tensor_type.name, "absent", 0, 0, -1))
            continue
        if t.tensor_type != u.tensor_type:
            out.append((t.name, t.tensor_type.name, u.tensor_type.name, 0, 0, -1))
            continue
        bs, tb = gguf.GGML_QUANT_SIZES[t.tensor_type]
        x, y = np.asarray(t.data).view(np.uint8).reshape(-1, tb), np.asarray(u.data).view(np.uint8).reshape(-1, tb)
        diff = np.nonzero((x != y).any(axis=1))[0]
        out.append((t.name, t.tensor_type.name, u.tensor_type.name, x.shape[0], len(diff), int(diff[0]) if len(diff) else -1))
    return out


FIXTURE_ROWS, FIXTURE_TENSORS = 4, 4
fixture = {}  # ggml type name -> [(source name, F32 rows [n, 256], llama.cpp bytes [n, bytes per 256], type)]


def keep_for_fixture(src, ob):
    """rows 0..3 of the first 4 tensors of each type in llama.cpp's output (in llama.cpp's order:
    output, token_embd, attn_k, attn_output: Gaussian, Student t and outlier rows), with their
    source rows, cut into rows of 256 (every block is quantized on its own)"""
    a, b = gguf.GGUFReader(src), gguf.GGUFReader(ob)
    st = {t.name: t for t in a.tensors}
    for t in b.tensors:
        tn = t.tensor_type.name
        got = fixture.setdefault(tn, [])
        if len(got) >= FIXTURE_TENSORS or any(g[0] == t.name for g in got) or tn in ("F32", "F16") or t.name not in st or len(t.shape) != 2:
            continue
        rows, cols = int(t.shape[1]), int(t.shape[0])
        x = np.asarray(st[t.name].data, dtype=np.float32).reshape(rows, cols)[:FIXTURE_ROWS].reshape(-1, 256)
        raw = np.asarray(t.data).view(np.uint8).reshape(rows, -1)[:FIXTURE_ROWS]
        raw = raw.reshape(x.shape[0], -1)
        got.append((t.name, x, raw, t.tensor_type))


def write_fixture(path):
    w = gguf.GGUFWriter(path, "none")
    w.add_string("general.description", "rows of a random Llama's tensors and llama.cpp's quantization of them "
                 "(llama-cpp-python %s, llama_model_quantize; scripts/compare_llamacpp_quantize.py --fixture)" % llama_cpp.__version__)
    for tn, got in sorted(fixture.items()):
        if not got:
            continue
        w.add_string("source." + tn.lower(), " ".join(g[0] for g in got))
        w.add_tensor("x." + tn.lower(), np.ascontiguousarray(np.concatenate([g[1] for g in got])))
        w.add_tensor("ref." + tn.lower(), np.ascontiguousarray(np.concatenate([g[2] for g in got])), raw_dtype=got[0][3])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", path, {k: [g[0] for g in v] for k, v in fixture.items() if v})


def run(src, tag, tmp, keep=False, only=None):
    total = {}
    for name, ft in FTYPES.items():
        if only and name not in only:
            continue
        oa, ob = os.path.join(tmp, "%s.attn.%s.gguf" % (tag, name)), os.path.join(tmp, "%s.llamacpp.%s.gguf" % (tag, name))
        subprocess.run([ATTN, "quantize", src, oa, name], check=True, capture_output=True)
        llamacpp_quantize(src, ob, ft)
        if keep:
            keep_for_fixture(src, ob)
        rows = compare(oa, ob)
        mism = [r for r in rows if r[3] == 0]
        rows = [r for r in rows if r[3] > 0 and r[1] not in ("F32", "F16", "BF16")]  # quantized tensors of the same type
        same_t = sum(1 for r in rows if r[4] == 0)
        nb = sum(r[3] for r in rows)
        nd = sum(r[4] for r in rows)
        types = sorted(set(r[1] for r in rows))
        print("%s %-7s quantized tensors %d (%s): byte-identical %d; blocks %d, differing %d; tensors of another type %d" % (
            tag, name, len(rows), " ".join(types), same_t, nb, nd, len(mism)))
        for r in mism[:4]:
            print("    type: %s attn %s, llama.cpp %s" % (r[0], r[1], r[2]))
        for r in [r for r in rows if r[4] > 0][:4]:
            print("    %s (%s): %d of %d blocks differ, first %d" % (r[0], r[1], r[4], r[3], r[5]))
        total[name] = (len(rows), same_t, len(mism), nb, nd)
    return total


def main():
    print("llama-cpp-python", llama_cpp.__version__)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "random.f32.gguf")
        random_model(src)
        run(src, "random", tmp, keep="--fixture" in sys.argv)
        if "--fixture" in sys.argv:
            write_fixture(os.path.join(ROOT, "tests", "fixtures", "qwen2", "quant_llamacpp.gguf"))
        only = [a[8:] for a in sys.argv[1:] if a.startswith("--types=")]
        only = only[0].split(",") if only else None
        for i, extra in enumerate(a for a in sys.argv[1:] if not a.startswith("--")):
            f32 = os.path.join(tmp, "extra%d.f32.gguf" % i)
            dequantized_copy(extra, f32)
            run(f32, os.path.basename(extra), tmp, only=only)


if __name__ == "__main__":
    main()
