"""Optimizers over placed :class:`~spgnn.gnn.params.Parameter` blocks: SGD and Adam.

Local: an optimizer never communicates.  Each rank updates the blocks it
holds from their (already reduced, complete) gradients with a deterministic
formula, so replicas of a block that start equal and receive equal
gradients stay bit-identical.  Sharded blocks (3D weights split over depth)
carry their own optimizer state, which is therefore sharded too.

Weight decay is L2 regularisation added to the gradient
(``g + weight_decay * w``, as Kipf & Welling's GCN does for its first
layer); give it per group: ``Adam([{"params": first, "weight_decay": 5e-4},
{"params": rest}], lr=0.01)``.
"""

import numpy as np

from ..errors import DimensionMismatch
from .params import Parameter

__all__ = ["Optimizer", "SGD", "Adam"]


class Optimizer:
    """Base class: parameter groups, ``zero_grad``, ``state_dict``/``load_state_dict``.

    Parameters
    ----------
    params : iterable of Parameter, or of dicts ``{"params": [...], **options}``
    **defaults
        Options every group inherits unless it sets its own.
    """

    def __init__(self, params, **defaults):
        params = list(params)
        if params and isinstance(params[0], dict):
            groups = [dict(g) for g in params]
        else:
            groups = [{"params": params}]
        self.groups = []
        seen = set()
        for g in groups:
            plist = list(g.pop("params"))
            for p in plist:
                if not isinstance(p, Parameter):
                    raise TypeError(f"{type(self).__name__}: expected Parameters, but got "
                                    f"{type(p).__name__}")
                if id(p) in seen:
                    raise ValueError(f"{type(self).__name__}: parameter {p.name!r} appears twice")
                seen.add(id(p))
            unknown = set(g) - set(defaults)
            if unknown:
                raise ValueError(f"{type(self).__name__}: unknown options {sorted(unknown)}; "
                                 f"expected {sorted(defaults)}")
            self.groups.append({**defaults, **g, "params": plist})
        self.params = [p for g in self.groups for p in g["params"]]
        self.state = [dict() for _ in self.params]
        self.steps = 0

    def zero_grad(self):
        """Zero every parameter's gradient. Local."""
        for p in self.params:
            p.zero_grad()

    def _iter(self):
        k = 0
        for g in self.groups:
            for p in g["params"]:
                yield g, p, self.state[k]
                k += 1

    def step(self):
        """Update every placed parameter from its gradient. Local."""
        self.steps += 1
        for g, p, st in self._iter():
            if p.value is None:
                continue
            grad = p.grad
            wd = g.get("weight_decay", 0.0)
            if wd:
                grad = grad + wd * p.value
            self._update(g, p, st, grad)

    def _update(self, group, p, state, grad):
        raise NotImplementedError

    def state_dict(self) -> dict:
        """Step count, options and per-parameter state (copies of local blocks). Local."""
        return {"type": type(self).__name__, "steps": self.steps,
                "groups": [{k: v for k, v in g.items() if k != "params"} for g in self.groups],
                "state": [{k: np.array(v, copy=True) for k, v in st.items()} for st in self.state]}

    def load_state_dict(self, state):
        """Restore :meth:`state_dict`'s output (same parameters, same placement). Local."""
        if state.get("type") != type(self).__name__ or len(state["state"]) != len(self.params):
            raise ValueError(f"{type(self).__name__}.load_state_dict: state is for "
                             f"{state.get('type')} with {len(state['state'])} parameters, this "
                             f"optimizer has {len(self.params)}")
        for st, p in zip(state["state"], self.params):
            for v in st.values():
                if p.value is not None and np.shape(v) != p.value.shape:
                    raise DimensionMismatch(f"{type(self).__name__}.load_state_dict: state for "
                                            f"{p.name!r} has shape {np.shape(v)}, the local block "
                                            f"{p.value.shape}")
        self.steps = int(state["steps"])
        for g, saved in zip(self.groups, state["groups"]):
            g.update(saved)
        self.state = [{k: np.array(v, copy=True) for k, v in st.items()} for st in state["state"]]


class SGD(Optimizer):
    """``w -= lr * (g + wd*w)``, with optional heavy-ball momentum (``b = m*b + g``)."""

    def __init__(self, params, lr=0.01, momentum=0.0, weight_decay=0.0):
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay)

    def _update(self, group, p, state, grad):
        if group["momentum"]:
            buf = state.get("momentum")
            if buf is None:
                buf = state["momentum"] = np.array(grad, dtype=p.value.dtype, copy=True)
            else:
                buf *= group["momentum"]
                buf += grad
            grad = buf
        p.value -= (group["lr"] * grad).astype(p.value.dtype, copy=False)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction and L2 weight decay added to the gradient.

    ``m = b1 m + (1-b1) g``, ``v = b2 v + (1-b2) g²``,
    ``w -= lr · m̂ / (sqrt(v̂) + eps)`` with ``m̂ = m/(1-b1^t)``, ``v̂ = v/(1-b2^t)``.
    """

    def __init__(self, params, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)

    def _update(self, group, p, state, grad):
        b1, b2 = group["betas"]
        if "m" not in state:
            state["m"] = np.zeros_like(p.value)
            state["v"] = np.zeros_like(p.value)
        m, v = state["m"], state["v"]
        m *= b1
        m += (1 - b1) * grad
        v *= b2
        v += (1 - b2) * grad * grad
        t = self.steps
        mhat = m / (1 - b1 ** t)
        vhat = v / (1 - b2 ** t)
        p.value -= (group["lr"] * mhat / (np.sqrt(vhat) + group["eps"])).astype(p.value.dtype,
                                                                               copy=False)
