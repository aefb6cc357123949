"""attn.sdpa against PyTorch outputs (tests/fixtures/python, made by
scripts/gen_python_fixtures.py), the C suite's fixtures (tests/fixtures/cli) and a float64
NumPy reference.

Tolerances: max |attn - ref| <= 1e-5 * max |ref| for outputs (float32 kernels against a
float64 or float32 reference: a few float32 roundings of sums over <= 64 terms), 1e-6 absolute
for weights (probabilities in [0, 1]); the C suite uses the same bounds."""
import json
import threading
import time
import tracemalloc

import numpy as np
import pytest

import attn
from conftest import fixture, max_rel_err, ref_sdpa

TOL = 1e-5
WTOL = 1e-6

TORCH = np.load(fixture("python", "torch_sdpa.npz"))
TORCH_CASES = sorted({name.split(".")[0] for name in TORCH.files})


@pytest.mark.parametrize("case", TORCH_CASES)
def test_matches_torch(case):
    g = lambda part: TORCH[f"{case}.{part}"]
    opts = json.loads(str(g("opts")))
    mask = g("mask") if f"{case}.mask" in TORCH.files else None
    if case == "lower_right_bias":  # torch's causal_lower_right bias == attn's is_causal="lower_right"
        opts["is_causal"] = "lower_right"
    out = attn.sdpa(g("q"), g("k"), g("v"), mask, **opts)
    assert out.dtype == np.float32 and out.shape == g("out").shape
    assert max_rel_err(out, g("out")) <= TOL


def test_torch_fixtures_cover_the_cases():
    assert len(TORCH_CASES) >= 12
    assert {"causal_lq_lt_lk", "causal_lq_gt_lk", "boolmask", "floatmask", "rank5"} <= set(TORCH_CASES)


CLI_CASES = [
    ("plain", "", {}, None),
    ("boolmask", "", {}, "mask_bool.npy"),
    ("floatmask", "", {}, "mask_float.npy"),
    ("causal", "", {"is_causal": "lower_right"}, None),
    ("window", "", {"is_causal": "lower_right", "window": 3}, None),
    ("causal_boolmask", "", {"is_causal": "lower_right"}, "mask_bool.npy"),
    ("scale", "", {"scale": 0.3}, None),
    ("rank3", "3", {"is_causal": "lower_right"}, None),
    ("rank2", "2", {}, None),
]


@pytest.mark.parametrize("name,suffix,opts,mask", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_matches_c_suite_fixtures(name, suffix, opts, mask):
    ld = lambda f: np.load(fixture("cli", f))
    q, k, v = ld(f"q{suffix}.npy"), ld(f"k{suffix}.npy"), ld(f"v{suffix}.npy")
    m = None if mask is None else ld(mask)
    for impl in ("default", "reference"):
        out, w = attn.sdpa(q, k, v, m, return_weights=True, impl=impl, **opts)
        assert max_rel_err(out, ld(f"{name}_ref_out.npy")) <= TOL, impl
        assert np.max(np.abs(w - ld(f"{name}_ref_w.npy"))) <= WTOL, impl


SHAPES = [  # (q shape, kv heads, Lk, Dv)
    ((2, 4, 5, 8), 2, 7, 6),
    ((2, 4, 7, 8), 4, 5, 8),
    ((3, 6, 16), 3, 16, 16),
    ((9, 4), None, 13, 3),
    ((2, 2, 2, 3, 8), 1, 4, 8),
    ((1, 8, 1, 64), 2, 33, 64),  # decode step over a cache
    ((1, 2, 70, 32), 2, 70, 32),  # more than one 64-key block
]


@pytest.mark.parametrize("qshape,hkv,lk,dv", SHAPES)
@pytest.mark.parametrize("causal", [False, True, "lower_right"])
def test_against_numpy_float64(rng, qshape, hkv, lk, dv, causal):
    kshape = qshape[:-3] + ((hkv,) if hkv else ()) + (lk, qshape[-1])
    vshape = kshape[:-1] + (dv,)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in (qshape, kshape, vshape))
    out, w = attn.sdpa(q, k, v, is_causal=causal, return_weights=True)
    kind = {False: None, True: "upper_left", "lower_right": "lower_right"}[causal]
    ro, rw = ref_sdpa(q, k, v, causal=kind)
    assert out.shape == ro.shape and w.shape == rw.shape
    assert max_rel_err(out, ro) <= TOL
    assert np.max(np.abs(w - rw)) <= WTOL


@pytest.mark.parametrize("lq,lk", [(6, 6), (4, 9), (9, 4)])
@pytest.mark.parametrize("causal", [False, True, "lower_right"])
def test_window(rng, lq, lk, causal):
    q, k, v = (rng.standard_normal((2, 3, n, 8)).astype(np.float32) for n in (lq, lk, lk))
    out, w = attn.sdpa(q, k, v, is_causal=causal, window=3, return_weights=True)
    ro, rw = ref_sdpa(q, k, v, causal="lower_right" if causal == "lower_right" else None, window=3)
    assert max_rel_err(out, ro) <= TOL
    assert np.max(np.abs(w - rw)) <= WTOL


@pytest.mark.parametrize("mshape", [(7,), (5, 7), (1, 5, 7), (2, 1, 1, 7), (2, 4, 5, 7), (1,), ()])
@pytest.mark.parametrize("kind", ["bool", "float32", "float64", "float16"])
def test_masks_broadcast(rng, mshape, kind):
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 5, 8), (2, 2, 7, 8), (2, 2, 7, 6)))
    if kind == "bool":
        m = rng.random(mshape) < 0.7
    else:
        m = rng.standard_normal(mshape) * 2
        m = np.where(rng.random(mshape) < 0.2, -np.inf, m).astype(kind)
    for causal in (False, True):
        out, w = attn.sdpa(q, k, v, m, is_causal=causal, return_weights=True)
        ro, rw = ref_sdpa(q, k, v, m.astype(np.float32) if kind.startswith("float") else m,
                          causal="upper_left" if causal else None)
        assert max_rel_err(out, ro) <= TOL
        assert np.max(np.abs(w - rw)) <= WTOL


def _strided_views(rng):
    """(name, array) pairs of one [2, 4, 6, 8] query with different memory layouts."""
    base = rng.standard_normal((2, 4, 6, 8)).astype(np.float32)
    big = np.zeros((2, 4, 12, 16), dtype=np.float32)
    big[:, :, ::2, ::2] = base
    raw = np.zeros(base.nbytes + 1, dtype=np.uint8)[1:].view(np.float32).reshape(base.shape)
    raw[...] = base
    return {
        "contiguous": base,
        "transposed": np.ascontiguousarray(base.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3),
        "fortran": np.asfortranarray(base),
        "step-sliced": big[:, :, ::2, ::2],
        "negative-stride": np.ascontiguousarray(base[:, :, ::-1])[:, :, ::-1],
        "misaligned": raw,
        "big-endian": base.astype(">f4"),
    }


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "fortran", "step-sliced", "negative-stride",
                                    "misaligned", "big-endian"])
def test_any_strides(rng, layout):
    q = _strided_views(rng)[layout]
    assert layout != "misaligned" or not q.flags.aligned
    k = rng.standard_normal((2, 4, 9, 8)).astype(np.float32)
    v = np.broadcast_to(rng.standard_normal((1, 4, 9, 8)).astype(np.float32), (2, 4, 9, 8))  # stride-0 batch
    out = attn.sdpa(q, k, v, is_causal=True)
    ro, _ = ref_sdpa(np.array(q), k, np.array(v), causal="upper_left")
    assert max_rel_err(out, ro) <= TOL
    assert out.flags.c_contiguous


def test_strided_inputs_are_not_copied(rng):
    """A transposed [B, L, H, D] -> [B, H, L, D] view is read in place: the peak of NumPy
    allocations during the call is the output only (checked with tracemalloc, which sees
    NumPy's allocations); a negative-stride view is copied (peak >= its size)."""
    B, L, H, D = 1, 512, 8, 64
    x = rng.standard_normal((B, L, H, D)).astype(np.float32)
    q = x.transpose(0, 2, 1, 3)
    assert not q.flags.c_contiguous
    nbytes = q.nbytes  # 1 MiB
    attn.sdpa(q, q, q)  # warm up
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = attn.sdpa(q, q, q)
        _, peak = tracemalloc.get_traced_memory()
        assert peak < out.nbytes + nbytes // 4, f"peak {peak} bytes for a {out.nbytes}-byte output"
        rev = q[:, :, ::-1]
        tracemalloc.reset_peak()
        attn.sdpa(rev, q, q)
        _, peak2 = tracemalloc.get_traced_memory()
        assert peak2 >= out.nbytes + nbytes
    finally:
        tracemalloc.stop()


def test_broadcast_batch_dims(rng):
    q = rng.standard_normal((3, 2, 4, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 6, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 6, 5)).astype(np.float32)
    out = attn.sdpa(q, k, v)
    ro, _ = ref_sdpa(q, np.broadcast_to(k, (3, 2, 6, 8)), np.broadcast_to(v, (3, 2, 6, 5)))
    assert out.shape == (3, 2, 4, 5) and max_rel_err(out, ro) <= TOL


def test_scale_and_impls_agree(rng):
    q, k, v = (rng.standard_normal((1, 2, 20, 16)).astype(np.float32) for _ in range(3))
    a = attn.sdpa(q, k, v, scale=0.05, impl="fused")
    b = attn.sdpa(q, k, v, scale=0.05, impl="reference")
    ro, _ = ref_sdpa(q, k, v, scale=0.05)
    assert max_rel_err(a, ro) <= TOL and max_rel_err(b, ro) <= TOL


def test_empty_rows_and_sizes(rng):
    q, k, v = (rng.standard_normal((1, 1, 3, 4)).astype(np.float32) for _ in range(3))
    m = np.ones((3, 3), dtype=bool)
    m[1] = False
    out, w = attn.sdpa(q, k, v, m, return_weights=True)
    assert np.all(out[0, 0, 1] == 0) and np.all(w[0, 0, 1] == 0)
    assert np.all(np.isfinite(out))
    k0 = np.zeros((1, 1, 0, 4), np.float32)
    out0 = attn.sdpa(q, k0, np.zeros((1, 1, 0, 5), np.float32))
    assert out0.shape == (1, 1, 3, 5) and np.all(out0 == 0)
    assert attn.sdpa(np.zeros((0, 1, 3, 4), np.float32), np.zeros((0, 1, 2, 4), np.float32),
                     np.zeros((0, 1, 2, 4), np.float32)).shape == (0, 1, 3, 4)


def test_many_batch_dims(rng):
    q, k, v = (rng.standard_normal((2,) + (1,) * 5 + (2, 3, 4)).astype(np.float32) for _ in range(3))
    out = attn.sdpa(q, k, v, is_causal=True)
    ro, _ = ref_sdpa(q, k, v, causal="upper_left")
    assert out.shape == q.shape and max_rel_err(out, ro) <= TOL


def test_scaled_dot_product_attention_alias():
    assert attn.scaled_dot_product_attention is attn.sdpa


# ---------------------------------------------------------------- errors

def _qkv():
    r = np.random.default_rng(7)
    return (r.standard_normal((1, 2, 3, 4)).astype(np.float32), r.standard_normal((1, 2, 5, 4)).astype(np.float32),
            r.standard_normal((1, 2, 5, 4)).astype(np.float32))


def test_dtype_errors():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match=r"query must be float32 \(or float16 / bfloat16\), got float64"):
        attn.sdpa(q.astype(np.float64), k, v)
    with pytest.raises(TypeError, match="same dtype"):
        attn.sdpa(q, k, v.astype(np.float16))
    with pytest.raises(TypeError, match="key must be float32"):
        attn.sdpa(q, k.astype(np.int8), v)
    with pytest.raises(TypeError, match="attn_mask must be bool"):
        attn.sdpa(q, k, v, np.ones((3, 5), dtype=np.int32))
    with pytest.raises(TypeError):
        attn.sdpa(None, k, v)
    with pytest.raises(TypeError):
        attn.sdpa("abc", k, v)


@pytest.mark.parametrize("bad,match", [
    (lambda q, k, v: attn.sdpa(q[0, 0, 0], k, v), "at least 2 dims"),
    (lambda q, k, v: attn.sdpa(q, k[0], v), "same number of dims"),
    (lambda q, k, v: attn.sdpa(q, k[..., :3], v), "head_dim 3 differs"),
    (lambda q, k, v: attn.sdpa(q, k, v[:, :, :4]), "value has 4 positions but key has 5"),
    (lambda q, k, v: attn.sdpa(q, np.concatenate([k, k], 1), np.concatenate([v, v], 1)), "multiple"),
    (lambda q, k, v: attn.sdpa(np.concatenate([q, q], 1), k, v, enable_gqa=False), "enable_gqa"),
    (lambda q, k, v: attn.sdpa(q, k, v, np.ones((3, 4), bool)), "does not broadcast"),
    (lambda q, k, v: attn.sdpa(q, k, v, np.ones((2, 1, 2, 3, 5), bool)), "does not broadcast"),
    (lambda q, k, v: attn.sdpa(q, k, v, dropout_p=0.1), "dropout_p"),
    (lambda q, k, v: attn.sdpa(q, k, v, is_causal="bottom"), "is_causal"),
    (lambda q, k, v: attn.sdpa(q, k, v, window=0), "window must be >= 1"),
    (lambda q, k, v: attn.sdpa(q, k, v, scale=float("nan")), "scale must be finite"),
    (lambda q, k, v: attn.sdpa(q, k, v, impl="fast"), "impl must be"),
    (lambda q, k, v: attn.sdpa(np.zeros((2, 2, 3, 4), np.float32), np.zeros((3, 2, 5, 4), np.float32),
                               np.zeros((3, 2, 5, 4), np.float32)), "batch dims do not broadcast"),
])
def test_value_errors(bad, match):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=match):
        bad(q, k, v)


def test_library_errors_carry_its_message():
    q, k, v = _qkv()
    q[0, 1, 2, 3] = np.nan
    with pytest.raises(attn.RangeError) as e:
        attn.sdpa(q, k, v)
    assert isinstance(e.value, ValueError) and e.value.status == -7
    assert str(e.value).startswith("sdpa: ") and "q[0, 1, 2, 3]" in str(e.value) and "NaN" in str(e.value)
    q, k, v = _qkv()
    m = np.zeros((3, 5), np.float32)
    m[1, 2] = np.inf
    with pytest.raises(ValueError, match=r"float mask holds \+inf"):
        attn.sdpa(q, k, v, m)
    m[1, 2] = np.nan
    with pytest.raises(ValueError, match="mask"):
        attn.sdpa(q, k, v, m)
    v[0, 0, 4, 0] = np.inf
    with pytest.raises(ValueError, match="v"):
        attn.sdpa(q, k, v)


def test_gil_is_released(rng):
    """While one thread runs a long attn.sdpa, the main thread keeps running Python code.
    With the GIL held for the whole C call the main thread would get (almost) no turns."""
    q = rng.standard_normal((1, 8, 2048, 64)).astype(np.float32)
    attn.sdpa(q[:, :, :64], q[:, :, :64], q[:, :, :64])
    t0 = time.perf_counter()
    attn.sdpa(q, q, q)
    single = time.perf_counter() - t0
    reps = max(1, int(0.5 / max(single, 1e-3)))
    done = threading.Event()

    def work():
        for _ in range(reps):
            attn.sdpa(q, q, q)
        done.set()

    th = threading.Thread(target=work)
    ticks = 0
    th.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    th.join()
    # ~1 tick per millisecond if the GIL is free; the call takes >= 50 ms in total
    assert ticks >= 20, f"main thread ran {ticks} times during {reps} x {single * 1e3:.1f} ms of sdpa"


def _half_supported():
    x = np.zeros((1, 1, 1, 4), np.float16)
    try:
        attn.sdpa(x, x, x)
        return True
    except attn.DTypeError:
        return False


@pytest.mark.skipif(not _half_supported(), reason="this libattn has no half-precision sdpa")
def test_float16_inputs(rng):
    """float16 q, k, v (read exactly, computed in float32, out rounded once to float16):
    |out - ref| <= 1e-3 * max|ref| (float16 rounding of the output: 2^-11 relative, plus the
    float32 kernel error); weights are float32 (1e-6)."""
    q, k, v = (rng.standard_normal(s).astype(np.float16) for s in ((2, 4, 5, 8), (2, 2, 7, 8), (2, 2, 7, 6)))
    for causal in (False, True, "lower_right"):
        out, w = attn.sdpa(q, k, v, is_causal=causal, return_weights=True)
        assert out.dtype == np.float16 and w.dtype == np.float32
        kind = {False: None, True: "upper_left", "lower_right": "lower_right"}[causal]
        ro, rw = ref_sdpa(q, k, v, causal=kind)
        assert max_rel_err(out, ro) <= 1e-3 and np.max(np.abs(w - rw)) <= WTOL


def test_half_dtype_rules():
    x16, x32 = np.zeros((1, 1, 2, 4), np.float16), np.zeros((1, 1, 2, 4), np.float32)
    with pytest.raises(TypeError, match="same dtype"):
        attn.sdpa(x16, x32, x32)
    with pytest.raises(TypeError, match="float32"):
        attn.sdpa(x16.astype(np.float64), x32, x32)


@pytest.mark.skipif(not _half_supported(), reason="this libattn has no half-precision sdpa")
def test_bfloat16_inputs(rng):
    """bfloat16 through ml_dtypes' NumPy dtype (optional package): out rounded once to bfloat16,
    |out - ref| <= 8e-3 * max|ref| (bfloat16 keeps 8 significant bits: 2^-8 relative rounding)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    q, k, v = (rng.standard_normal(s).astype(ml_dtypes.bfloat16) for s in ((2, 4, 5, 8), (2, 2, 7, 8), (2, 2, 7, 6)))
    out = attn.sdpa(q, k, v, is_causal=True)
    assert out.dtype == q.dtype
    ro, _ = ref_sdpa(*(a.astype(np.float64) for a in (q, k, v)), causal="upper_left")
    assert max_rel_err(out.astype(np.float64), ro) <= 8e-3


def test_threads_get_their_own_results_and_errors(rng):
    """Python threads calling attn.sdpa at once (the GIL is released): each gets its own
    result, and a failing call's message is its own (attn_last_error is per thread)."""
    q, k, v = (rng.standard_normal((1, 4, 64, 32)).astype(np.float32) for _ in range(3))
    want = ref_sdpa(q, k, v, causal="upper_left")[0]
    bad = q.copy()
    bad[0, 2, 5, 7] = np.inf
    errors, wrong = [], []

    def good():
        for _ in range(20):
            if max_rel_err(attn.sdpa(q, k, v, is_causal=True), want) > TOL:
                wrong.append(1)

    def failing():
        for _ in range(20):
            try:
                attn.sdpa(bad, k, v)
            except attn.RangeError as e:
                errors.append(str(e))

    threads = [threading.Thread(target=f) for f in (good, failing, good, failing)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
    assert len(errors) == 40 and len(set(errors)) == 1 and "q[0, 2, 5, 7]" in errors[0]


def test_flags_must_be_bools(rng):
    # issue 23 item 13: is_causal=2, enable_gqa='no' and return_weights='yes' were taken as
    # truthy; a flag is a bool (or numpy.bool_), else TypeError naming it
    q = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    for kw, name in (({"is_causal": 2}, "is_causal"), ({"enable_gqa": "no"}, "enable_gqa"),
                     ({"return_weights": "yes"}, "return_weights"), ({"enable_gqa": 1}, "enable_gqa")):
        with pytest.raises(TypeError, match=name):
            attn.sdpa(q, q, q, **kw)
    for kw, name in (({"is_causal": 1}, "is_causal"), ({"return_weights": "yes"}, "return_weights")):
        with pytest.raises(TypeError, match=name):
            attn.variant("linear", q, q, q, **kw)
    # bools and numpy bools still work, with the documented meaning
    out, w = attn.sdpa(q, q, q, is_causal=np.bool_(True), return_weights=True, enable_gqa=False)
    assert np.all(w[..., 0, 1:] == 0) and abs(float(w[0, 0, 2].sum()) - 1.0) <= WTOL
