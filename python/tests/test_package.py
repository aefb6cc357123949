"""Package-level behaviour: threads, version, errors, documentation."""
import inspect

import numpy as np
import pytest

import attn


def test_threads():
    n0 = attn.get_num_threads()
    try:
        assert attn.set_num_threads(1) == 1 and attn.get_num_threads() == 1
        q = np.random.default_rng(0).standard_normal((1, 2, 8, 4)).astype(np.float32)
        one = attn.sdpa(q, q, q)
        assert attn.set_num_threads(2) == 2
        assert np.max(np.abs(attn.sdpa(q, q, q) - one)) <= 1e-6
        assert attn.set_num_threads(0) >= 1
    finally:
        attn.set_num_threads(n0)
    with pytest.raises(TypeError):
        attn.set_num_threads(1.5)


def test_threads_bound():
    # issue 23 item 3: 100000 was accepted and the next call segfaulted in libgomp
    n0 = attn.get_num_threads()
    try:
        assert attn.set_num_threads(2) == 2
        with pytest.raises(attn.RangeError, match="4096"):
            attn.set_num_threads(100000)
        assert attn.get_num_threads() == 2
        q = np.random.default_rng(1).standard_normal((1, 1, 3, 4)).astype(np.float32)
        s = q[0, 0] @ q[0, 0].T / 2.0
        p = np.exp(s - s.max(axis=1, keepdims=True))
        want = (p / p.sum(axis=1, keepdims=True)) @ q[0, 0]
        assert np.max(np.abs(attn.sdpa(q, q, q)[0, 0] - want)) <= 1e-5  # float32 softmax of 3 keys
    finally:
        attn.set_num_threads(n0)


def test_version_and_library():
    assert attn.version().count(".") == 2
    assert attn.library_path.endswith("libattn.so")


def test_error_hierarchy():
    assert issubclass(attn.ShapeError, ValueError) and issubclass(attn.DTypeError, TypeError)
    assert issubclass(attn.AttnIOError, OSError) and issubclass(attn.UnsupportedError, NotImplementedError)
    assert issubclass(attn.RangeError, attn.AttnError)


@pytest.mark.parametrize("name", ["sdpa", "variant", "positional_encoding", "layer_norm", "rms_norm",
                                  "rope", "softmax", "Embedder", "set_num_threads"])
def test_documented(name):
    obj = getattr(attn, name)
    doc = inspect.getdoc(obj) or ""
    assert len(doc) > 100 or name == "set_num_threads" and len(doc) > 40
    if name in ("sdpa", "variant", "layer_norm", "rope"):
        assert "Raises" in doc and "float32" in doc and "[" in doc
    if callable(obj) and not isinstance(obj, type):
        assert inspect.signature(obj).return_annotation is not inspect.Signature.empty
