#!/usr/bin/env python3
"""Fixtures for the Q5_0 / Q5_1 / K-quant types (tests/test_quant_k.c), made with the `gguf` package
(llama.cpp's gguf-py: GGUFWriter and gguf.quants, its NumPy (de)quantization):

  tests/fuzz/seeds_fuzz_gguf/kquants.gguf   one tensor per type, named by the type ("q5_0", ...,
      "q6_k"), 3 rows x 512 columns of random blocks: random bytes, with every f16 scale field
      (d, and m / dmin) replaced by a random finite f16 value (normal values of both signs from
      1e-3 to 2, plus zeros and subnormals); also a fuzz seed with K-quant tensors.
  tests/fixtures/quant/deq_<type>.npy        gguf.quants.dequantize of that tensor, float32 [3, 512]:
      attn's dequantization must equal it bit for bit.
  tests/fixtures/quant/quantize_ref.gguf    "input": F32 [4, 512] (normal values, a row of
      mixed scales, an all-zero block, an outlier), and "q8_0", "q4_0", "q4_1", "q5_0", "q5_1":
      gguf.quants.quantize of it (bit-exact ports of ggml's quantize_row_*_ref), against which
      attn's reference quantizers are compared byte for byte.
Run: python3 -m venv /work/venv-peers && /work/venv-peers/bin/pip install gguf numpy
     /work/venv-peers/bin/python scripts/gen_kquant_fixtures.py   (gguf 0.19.0, numpy 2.4.6)
"""
import numpy as np
import gguf
from gguf.quants import dequantize, quantize

T = gguf.GGMLQuantizationType
rng = np.random.default_rng(25)
ROWS, COLS = 3, 512

# (type, block size, block bytes, byte offsets of the f16 scales inside a block)
TYPES = [
    ("q5_0", T.Q5_0, 32, 22, [0]),
    ("q5_1", T.Q5_1, 32, 24, [0, 2]),
    ("q2_k", T.Q2_K, 256, 84, [80, 82]),
    ("q3_k", T.Q3_K, 256, 110, [108]),
    ("q4_k", T.Q4_K, 256, 144, [0, 2]),
    ("q5_k", T.Q5_K, 256, 176, [0, 2]),
    ("q6_k", T.Q6_K, 256, 210, [208]),
]


def random_scales(n):
    v = rng.uniform(1e-3, 2.0, n) * rng.choice([-1.0, 1.0], n)
    h = v.astype(np.float16)
    kind = rng.integers(0, 16, n)
    h[kind == 0] = np.float16(0.0)
    h[kind == 1] = np.float16(3e-6)  # subnormal in f16
    h[kind == 2] = -np.float16(6e-8)  # smallest subnormal
    return h


w = gguf.GGUFWriter("tests/fuzz/seeds_fuzz_gguf/kquants.gguf", "llama")
for name, qt, bl, bb, offs in TYPES:
    nb = ROWS * COLS // bl
    raw = rng.integers(0, 256, (nb, bb), dtype=np.uint8)
    for o in offs:
        raw[:, o:o + 2] = random_scales(nb).view(np.uint8).reshape(nb, 2)
    raw = raw.reshape(ROWS, COLS // bl * bb)
    deq = dequantize(raw, qt).astype(np.float32)
    assert deq.shape == (ROWS, COLS) and np.isfinite(deq).all()
    np.save("tests/fixtures/quant/deq_%s.npy" % name, deq)
    w.add_tensor(name, raw, raw_dtype=qt)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

x = rng.normal(0, 1, (4, 512)).astype(np.float32)
x[1] *= np.repeat(np.float32(10.0) ** rng.integers(-4, 3, 16), 32).astype(np.float32)
x[2, 64:96] = 0.0
x[3, 5] = 40.0
x[3, 300:332] = np.abs(x[3, 300:332])  # a block with min > 0
w = gguf.GGUFWriter("tests/fixtures/quant/quantize_ref.gguf", "none")
w.add_tensor("input", x)
for name, qt in [("q8_0", T.Q8_0), ("q4_0", T.Q4_0), ("q4_1", T.Q4_1), ("q5_0", T.Q5_0), ("q5_1", T.Q5_1)]:
    w.add_tensor(name, quantize(x, qt), raw_dtype=qt)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print("wrote kquants.gguf, deq_*.npy, quantize_ref.gguf")
