"""A single-process numpy reference GCN (Kipf & Welling), independent of spgnn.gnn.

Used by the tests to check spgnn's distributed GCN: same normalisation, same
Glorot initialisation (``default_rng([seed, layer])``), same masked mean
cross-entropy, same Adam with L2 weight decay on the first layer's weight.
No dropout (the comparisons run with dropout off).  Float64 throughout.
"""

import numpy as np
import scipy.sparse as sp

__all__ = ["normalize_adjacency", "row_normalize", "glorot_weights", "gcn_forward_backward",
           "train_reference"]


def normalize_adjacency(adj):
    """``D^-1/2 (A' + I) D^-1/2``, ``A'`` = symmetrised adj without its diagonal (float64 CSR)."""
    a = sp.csr_array(adj, dtype=np.float64)
    a = sp.csr_array(a.maximum(a.T)).tolil()
    a.setdiag(0)
    a = sp.csr_array(a)
    a.eliminate_zeros()
    a = a + sp.eye_array(a.shape[0], format="csr")
    d = 1.0 / np.sqrt(np.asarray(a.sum(axis=1)).ravel())
    return sp.csr_array(sp.diags_array(d) @ a @ sp.diags_array(d))


def row_normalize(x):
    """Each row divided by its L1 norm (its sum when non-negative); zero rows stay zero."""
    x = np.asarray(x, dtype=np.float64)
    s = np.abs(x).sum(axis=1, keepdims=True)
    return np.where(s != 0, x / np.where(s != 0, s, 1), 0.0)


def glorot_weights(dims, seed):
    out = []
    for k in range(len(dims) - 1):
        r = np.sqrt(6.0 / (dims[k] + dims[k + 1]))
        out.append(np.random.default_rng([seed, k]).uniform(-r, r, size=(dims[k], dims[k + 1])))
    return out


def gcn_forward_backward(ahat, x, weights, labels, mask):
    """Loss, gradients (one per weight) and logits of ``Â σ(... Â σ(Â X W0) ...) W_L``."""
    hs, zs = [x], []
    h = x
    for k, w in enumerate(weights):
        z = ahat @ (h @ w)
        zs.append(z)
        h = np.maximum(z, 0) if k < len(weights) - 1 else z
        hs.append(h)
    logits = hs[-1]
    mask = mask & (labels >= 0)
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    p = e / e.sum(axis=1, keepdims=True)
    n = mask.sum()
    idx = np.flatnonzero(mask)
    loss = -np.log(p[idx, labels[idx]]).sum() / n
    g = p.copy()
    g[np.arange(len(labels))[mask], labels[mask]] -= 1
    g *= mask[:, None] / n
    grads = [None] * len(weights)
    for k in reversed(range(len(weights))):
        if k < len(weights) - 1:
            g = g * (zs[k] > 0)
        ag = ahat.T @ g
        grads[k] = hs[k].T @ ag
        g = ag @ weights[k].T
    return loss, grads, logits


def train_reference(adj, features, labels, train_mask, dims, *, epochs, lr=0.01,
                    weight_decay=5e-4, seed=0, normalize=True, betas=(0.9, 0.999), eps=1e-8):
    """Per-epoch training losses (before each step) and the final weights, with Adam."""
    ahat = normalize_adjacency(adj)
    x = row_normalize(features) if normalize else np.asarray(features, dtype=np.float64)
    labels = np.asarray(labels)
    ws = glorot_weights(dims, seed)
    m = [np.zeros_like(w) for w in ws]
    v = [np.zeros_like(w) for w in ws]
    losses = []
    for t in range(1, epochs + 1):
        loss, grads, _ = gcn_forward_backward(ahat, x, ws, labels, np.asarray(train_mask))
        losses.append(loss)
        grads[0] = grads[0] + weight_decay * ws[0]
        for k in range(len(ws)):
            m[k] = betas[0] * m[k] + (1 - betas[0]) * grads[k]
            v[k] = betas[1] * v[k] + (1 - betas[1]) * grads[k] ** 2
            mh = m[k] / (1 - betas[0] ** t)
            vh = v[k] / (1 - betas[1] ** t)
            ws[k] = ws[k] - lr * mh / (np.sqrt(vh) + eps)
    return losses, ws
