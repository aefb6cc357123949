"""Shared helpers of the attn Python tests: import path, fixture paths, float64 references,
and the "RESULT passed=N failed=N" line that tests/run_tests.sh (make test) reads."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))  # the source tree's package, not an installed one
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
MINILM = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
FLT_MAX = float(np.finfo(np.float32).max)


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


def ref_sdpa(q, k, v, mask=None, causal=None, window=0, scale=None):
    """Float64 NumPy attention. q [..., H, Lq, D], k/v [..., Hkv, Lk, *] (batch dims broadcast);
    causal None | "upper_left" (torch: j <= i) | "lower_right" (j <= i + Lk - Lq);
    window W: pos - W < j <= pos with pos aligned as causal (upper_left when causal is None).
    bool mask True = attend; float mask added, -inf or <= -FLT_MAX = masked. A row with no
    visible key gives zeros. Returns (out, weights) float64."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    if q.ndim >= 3 and q.shape[-3] != k.shape[-3]:
        g = q.shape[-3] // k.shape[-3]
        k, v = np.repeat(k, g, axis=-3), np.repeat(v, g, axis=-3)
    D, Lq, Lk = q.shape[-1], q.shape[-2], k.shape[-2]
    s = 1.0 / np.sqrt(D) if scale is None else float(np.float32(scale))
    scores = np.einsum("...id,...jd->...ij", q, k) * s
    visible = np.ones(scores.shape, dtype=bool)
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype == np.bool_:
            visible = visible & m
        else:
            m = m.astype(np.float64)
            masked = np.isneginf(m) | (m <= -FLT_MAX)
            visible = visible & ~masked
            scores = scores + np.where(masked, 0.0, m)
    i = np.arange(Lq)[:, None]
    j = np.arange(Lk)[None, :]
    pos = i + (Lk - Lq if causal == "lower_right" else 0)
    if causal:
        visible = visible & (j <= pos)
    if window:
        visible = visible & (j <= pos) & (j > pos - window)
    visible = np.broadcast_to(visible, scores.shape)
    scores = np.where(visible, scores, -np.inf)
    mx = scores.max(axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = np.where(visible, np.exp(scores - mx), 0.0)
    den = e.sum(axis=-1, keepdims=True)
    w = np.where(den > 0, e / np.where(den > 0, den, 1.0), 0.0)
    return np.einsum("...ij,...jd->...id", w, v), w


def max_rel_err(got, want):
    """max |got - want| / max |want| (want's scale; 1 for an all-zero reference)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if got.size == 0:
        return 0.0
    scale = max(float(np.max(np.abs(want))), 1.0e-30)
    return float(np.max(np.abs(got - want))) / (scale if scale > 1e-30 else 1.0)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_terminal_summary(terminalreporter):
    st = terminalreporter.stats
    passed = len(st.get("passed", []))
    failed = len(st.get("failed", [])) + len(st.get("error", []))
    skipped = len(st.get("skipped", []))
    terminalreporter.write_line(f"RESULT passed={passed} failed={failed} skipped={skipped} (python)")
