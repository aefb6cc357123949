"""The cffi declarations (python/attn/_ffi.py, ABI mode: nothing checks them at build time)
against the C headers: a probe program compiled with the system C compiler prints sizeof and
offsetof of every struct the package declares, which must equal cffi's layout. Catches a
header change that the binding did not follow (it would otherwise corrupt memory)."""
import os
import shutil
import subprocess

import pytest

from attn._ffi import ffi
from conftest import ROOT

STRUCTS = ["attn_tensor", "attn_sdpa_params", "attn_variant_params", "attn_bert_config", "attn_bert_extra",
           "attn_arena", "attn_decode_opts", "attn_translator_config", "attn_translation_hyp",
           "attn_translation"]
HEADERS = ["attn_core.h", "attn_attention.h", "attn_variants.h", "attn_ops.h", "attn_bert.h",
           "attn_tokenizer.h", "attn_beam.h", "attn_translate.h"]
CC = os.environ.get("CC", "cc")


@pytest.mark.skipif(shutil.which(CC) is None, reason=f"no C compiler ({CC})")
def test_struct_layouts_match_headers(tmp_path):
    lines = ["#include <stdio.h>", "#include <stddef.h>"] + [f'#include "{h}"' for h in HEADERS]
    lines.append("int main(void) {")
    want = {}
    for s in STRUCTS:
        t = ffi.typeof(s)
        lines.append(f'    printf("{s} %zu\\n", sizeof({s}));')
        want[s] = ffi.sizeof(t)
        for name, f in t.fields:
            lines.append(f'    printf("{s}.{name} %zu\\n", offsetof({s}, {name}));')
            want[f"{s}.{name}"] = f.offset
    for e in ["attn_dtype", "attn_impl", "attn_variant_kind", "attn_pooling", "attn_activation",
              "attn_length_penalty_form", "attn_status"]:
        lines.append(f'    printf("{e} %zu\\n", sizeof({e}));')
        want[e] = ffi.sizeof(e)
    lines += ["    return 0;", "}"]
    src, exe = tmp_path / "probe.c", tmp_path / "probe"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([CC, "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(exe)],
                   check=True, capture_output=True)
    got = dict(line.rsplit(" ", 1) for line in subprocess.run([str(exe)], check=True, capture_output=True,
                                                              text=True).stdout.splitlines())
    diffs = [f"{k}: C {got.get(k)} cffi {v}" for k, v in want.items() if int(got.get(k, -1)) != v]
    assert not diffs, "cdef out of date with include/: " + "; ".join(diffs)
    assert len(want) > 100
