#!/usr/bin/env python3
"""Reference gradients for attn's layer backward passes (include/attn_train.h), made by
torch.autograd in float32 (the loss values in float64), saved as .npy under
tests/fixtures/train_ops/. Run from the repository root:

    /work/venv-peers/bin/python scripts/gen_train_op_fixtures.py

linear:    y = F.linear(x, w, b); grads of sum(y * dy): dx, dw, db
layernorm: F.layer_norm(x, [E], gamma, beta, 1e-5): dx, dgamma, dbeta
rmsnorm:   x * rsqrt(mean(x^2) + 1e-6) * w: dx, dw
embedding: F.embedding(ids, table): dtable
act_*:     F.relu / F.gelu (erf) / F.gelu(approximate="tanh") / F.silu: dx
softmax:   y = softmax(x, -1): y and dx
ce_s0, ce_s1: F.cross_entropy(logits, labels, label_smoothing=0 / 0.1): loss (float64), dlogits
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "train_ops")
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(2102)


def save(name, a, dtype=np.float32):
    a = a.detach().numpy() if torch.is_tensor(a) else np.asarray(a)
    np.save(os.path.join(OUT, f"{name}.npy"), np.ascontiguousarray(a.astype(dtype)))


def leaf(*shape, scale=1.0, shift=0.0):
    return (torch.randn(*shape) * scale + shift).requires_grad_(True)


x, w, b = leaf(3, 5, 7), leaf(4, 7), leaf(4)
dy = torch.randn(3, 5, 4)
F.linear(x, w, b).backward(dy)
for n, t in [("x", x), ("w", w), ("b", b), ("dy", dy), ("dx", x.grad), ("dw", w.grad), ("db", b.grad)]:
    save("linear." + n, t)

x, g, be = leaf(6, 10, shift=3.0), leaf(10, scale=0.3, shift=1.0), leaf(10, scale=0.1)
dy = torch.randn(6, 10)
F.layer_norm(x, [10], g, be, 1e-5).backward(dy)
for n, t in [("x", x), ("gamma", g), ("dy", dy), ("dx", x.grad), ("dgamma", g.grad), ("dbeta", be.grad)]:
    save("layernorm." + n, t)

x, w = leaf(5, 12, scale=2.0), leaf(12, scale=0.3, shift=1.0)
dy = torch.randn(5, 12)
(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w).backward(dy)
for n, t in [("x", x), ("w", w), ("dy", dy), ("dx", x.grad), ("dw", w.grad)]:
    save("rmsnorm." + n, t)

table = leaf(9, 6)
ids = torch.tensor([[3, 1, 3], [8, 0, 3]])
dy = torch.randn(2, 3, 6)
F.embedding(ids, table).backward(dy)
save("embedding.ids", ids, np.int64)
save("embedding.dy", dy)
save("embedding.dtable", table.grad)

xa = torch.cat([torch.linspace(-6, 6, 97), torch.randn(100) * 2, torch.zeros(3)])
dy = torch.randn(xa.shape)
save("act.x", xa)
save("act.dy", dy)
for name, f in [("relu", F.relu), ("gelu", F.gelu), ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh")),
                ("silu", F.silu)]:
    x = xa.clone().requires_grad_(True)
    f(x).backward(dy)
    save(f"act.{name}.dx", x.grad)

x = leaf(4, 9, scale=2.0)
y = torch.softmax(x, -1)
dy = torch.randn(4, 9)
y.backward(dy)
for n, t in [("x", x), ("y", y), ("dy", dy), ("dx", x.grad)]:
    save("softmax." + n, t)

logits0 = torch.randn(8, 10) * 3
labels = torch.randint(0, 10, (8,))
save("ce.logits", logits0)
save("ce.labels", labels, np.int64)
for name, s in [("ce_s0", 0.0), ("ce_s1", 0.1)]:
    z = logits0.clone().requires_grad_(True)
    loss = F.cross_entropy(z, labels, label_smoothing=s)
    loss.backward()
    loss64 = F.cross_entropy(logits0.double(), labels, label_smoothing=s)
    save(name + ".loss", loss64.reshape(1), np.float64)
    save(name + ".dlogits", z.grad)
print("wrote", OUT)
