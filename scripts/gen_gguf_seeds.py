#!/usr/bin/env python3
"""Small GGUF files for the fuzzer (tests/fuzz/seeds_fuzz_gguf/) and tests/test_gguf_llm.c:
  tiny_llama.gguf  a random llama-architecture model (dim 64, 2 layers, 4 heads, 2 KV heads,
                   byte-level BPE vocabulary of 256 bytes + merges + ChatML specials) with Q8_0
                   embedding, Q4_1 / Q4_0 matrices and F32 norms
  kv_types.gguf    one metadata key of every value type, nested arrays, no tensors
Written with the `gguf` package's GGUFWriter (v3).
Run: /work/venv/bin/python scripts/gen_gguf_seeds.py
"""
import numpy as np
import gguf
from gguf.quants import quantize

out = "tests/fuzz/seeds_fuzz_gguf/"
rng = np.random.default_rng(1)


def b2u():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


m = b2u()
tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [m[b] for b in range(256)]
merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s"]
for mg in merges:
    a, b = mg.split(" ")
    if a + b not in tokens:
        tokens.append(a + b)
types = [3, 3, 3] + [1] * (len(tokens) - 3)
V, D, F, L, H, KV = len(tokens), 64, 128, 2, 4, 2
hd = D // H

w = gguf.GGUFWriter(out + "tiny_llama.gguf", "llama")
w.add_context_length(256)
w.add_embedding_length(D)
w.add_feed_forward_length(F)
w.add_block_count(L)
w.add_head_count(H)
w.add_head_count_kv(KV)
w.add_rope_freq_base(10000.0)
w.add_layer_norm_rms_eps(1e-5)
w.add_rope_dimension_count(hd)
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("smollm")
w.add_token_list(tokens)
w.add_token_types(types)
w.add_token_merges(merges)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_add_bos_token(False)
w.add_chat_template("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}")


def q(name, arr, qt):
    arr = arr.astype(np.float32)
    if qt == gguf.GGMLQuantizationType.F32:
        w.add_tensor(name, arr)
    else:
        w.add_tensor(name, quantize(arr, qt), raw_dtype=qt)


Q8, Q41, Q40, F32 = gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.F32
q("token_embd.weight", rng.normal(0, 0.5, (V, D)), Q8)
q("output_norm.weight", 1 + 0.1 * rng.normal(size=D), F32)
for l in range(L):
    p = "blk.%d." % l
    q(p + "attn_norm.weight", 1 + 0.1 * rng.normal(size=D), F32)
    q(p + "ffn_norm.weight", 1 + 0.1 * rng.normal(size=D), F32)
    q(p + "attn_q.weight", rng.normal(0, 0.2, (D, D)), Q41)
    q(p + "attn_k.weight", rng.normal(0, 0.2, (KV * hd, D)), Q41)
    q(p + "attn_v.weight", rng.normal(0, 0.2, (KV * hd, D)), Q40)
    q(p + "attn_output.weight", rng.normal(0, 0.2, (D, D)), Q41)
    q(p + "ffn_gate.weight", rng.normal(0, 0.2, (F, D)), Q41)
    q(p + "ffn_up.weight", rng.normal(0, 0.2, (F, D)), Q40)
    q(p + "ffn_down.weight", rng.normal(0, 0.2, (D, F)), Q8)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

w = gguf.GGUFWriter(out + "kv_types.gguf", "none")
w.add_uint8("t.u8", 200)
w.add_int8("t.i8", -100)
w.add_uint16("t.u16", 60000)
w.add_int16("t.i16", -30000)
w.add_uint32("t.u32", 4000000000)
w.add_int32("t.i32", -2000000000)
w.add_float32("t.f32", 1.5)
w.add_bool("t.bool", True)
w.add_string("t.str", "héllo")
w.add_uint64("t.u64", 2 ** 40)
w.add_int64("t.i64", -(2 ** 40))
w.add_float64("t.f64", -2.25)
w.add_array("t.arr_i32", [1, -2, 3])
w.add_array("t.arr_str", ["a", "bc", ""])
w.add_array("t.arr_f32", [0.5, 1.5])
w.add_array("t.nested", [[1, 2], [3]])
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print("ok", V)

# exact dequantized values of three tensors of tiny_llama.gguf (gguf.quants.dequantize), the
# reference for attn_qmatrix_dequantize_rows in tests/test_gguf_llm.c
from gguf.quants import dequantize  # noqa: E402
r = gguf.GGUFReader(out + "tiny_llama.gguf")
for t in r.tensors:
    if t.name in ("token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_v.weight"):
        a = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        np.save("tests/fixtures/llama/tiny_%s.npy" % t.name.replace(".weight", "").replace(".", "_"), a)
        print(t.name, t.tensor_type.name, a.shape)
