"""The cffi declarations (python/attn/_ffi.py, ABI mode: nothing checks them at build time)
against the C headers: a probe program compiled with the system C compiler prints sizeof and
offsetof of every struct the package declares, which must equal cffi's layout. Catches a
header change that the binding did not follow (it would otherwise corrupt memory)."""
import os
import shutil
import subprocess

import pytest

from cffi import CDefError

from attn._ffi import ffi
from conftest import ROOT

# header -> the structs and enums of python/attn/_ffi.py it declares (a header that is absent
# from include/ is skipped: its part of the binding is unused then)
DECLS = {
    "attn_core.h": ["attn_tensor", "attn_arena", "attn_dtype", "attn_status"],
    "attn_attention.h": ["attn_sdpa_params", "attn_impl"],
    "attn_variants.h": ["attn_variant_params", "attn_variant_kind"],
    "attn_ops.h": ["attn_activation"],
    "attn_bert.h": ["attn_bert_config", "attn_bert_extra", "attn_pooling"],
    "attn_wordpiece.h": [],
    "attn_beam.h": ["attn_decode_opts", "attn_length_penalty_form"],
    "attn_ct2_transformer.h": ["attn_translator_config", "attn_translation_hyp", "attn_translation", "attn_translate_opts"],
    "attn_audio.h": [],
    "attn_whisper.h": ["attn_whisper_config", "attn_whisper_opts", "attn_whisper_segment", "attn_whisper_result",
                       "attn_whisper_decoding"],
    "attn_bpe.h": ["attn_bpe_stream", "attn_bpe_kind"],
    "attn_sampling.h": ["attn_sampler_params"],
    "attn_llama.h": ["attn_llama_config"],
    "attn_image.h": ["attn_image"],
    "attn_vit.h": ["attn_vit_config", "attn_vit_extra"],
}
CC = os.environ.get("CC", "cc")


@pytest.mark.skipif(shutil.which(CC) is None, reason=f"no C compiler ({CC})")
def test_struct_layouts_match_headers(tmp_path):
    present = [h for h in DECLS if os.path.isfile(os.path.join(ROOT, "include", h))]
    lines = ["#include <stdio.h>", "#include <stddef.h>"] + [f'#include "{h}"' for h in present]
    lines.append("int main(void) {")
    want = {}
    for h in present:
        for name in DECLS[h]:
            try:
                t = ffi.typeof(name)
            except CDefError:
                continue  # declared by a later version of the binding only
            lines.append(f'    printf("{name} %zu\\n", sizeof({name}));')
            want[name] = ffi.sizeof(t)
            if t.kind == "struct":
                for fname, f in t.fields:
                    lines.append(f'    printf("{name}.{fname} %zu\\n", offsetof({name}, {fname}));')
                    want[f"{name}.{fname}"] = f.offset
    lines += ["    return 0;", "}"]
    src, exe = tmp_path / "probe.c", tmp_path / "probe"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([CC, "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(exe)],
                   check=True, capture_output=True)
    got = dict(line.rsplit(" ", 1) for line in subprocess.run([str(exe)], check=True, capture_output=True,
                                                              text=True).stdout.splitlines())
    diffs = [f"{k}: C {got.get(k)} cffi {v}" for k, v in want.items() if int(got.get(k, -1)) != v]
    assert not diffs, "cdef out of date with include/: " + "; ".join(diffs)
    assert len(want) > 50  # fields and sizes compared
