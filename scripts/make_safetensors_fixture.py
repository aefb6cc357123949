#!/usr/bin/env python3
"""Write tests/fixtures/tiny_numpy.safetensors with the reference safetensors package.

tests/test_safetensors.c reads it back and checks every value listed here, so the C
reader is tested against a file made by an independent writer.
Requires: pip install safetensors numpy
"""
import os
import sys

import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "fixtures", "tiny_numpy.safetensors")


def main() -> int:
    tensors = {
        # 0.5 * i - 1 for i in 0..5: exact in binary32
        "layer.weight": (np.arange(6, dtype=np.float32) * 0.5 - 1.0).reshape(2, 3),
        # 1, -2, 0.5, 65504 (largest finite binary16)
        "layer.bias": np.array([1.0, -2.0, 0.5, 65504.0], dtype=np.float16),
        "position_ids": np.arange(4, dtype=np.int64).reshape(1, 4),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    out = sys.argv[1] if len(sys.argv) > 1 else OUT
    save_file(tensors, out, metadata={"format": "np", "made_by": "scripts/make_safetensors_fixture.py"})
    print(f"wrote {out} ({os.path.getsize(out)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
