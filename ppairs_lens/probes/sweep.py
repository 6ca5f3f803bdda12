"""Fit every probe kind on every layer at once, batched in torch.

A layer sweep fits one probe per layer; with ~30 layers, three kinds and a few seeds or
splits, a Python loop over scikit-learn dominates an analysis. Here the layer axis is a batch
axis: the supervised probe is the *same* objective as scikit-learn's
``LogisticRegression(C, fit_intercept=False, class_weight="balanced")``, i.e. per layer

    min_w  C * sum_i c_i * logloss(y_i, <w, x_i>) + 0.5 * ||w||^2,   c_i = n / (2 * n_{y_i}),

solved for all layers together by a damped Newton method in float64 (a strongly convex
problem: Newton with backtracking converges globally and quadratically, to a far tighter
tolerance than lbfgs's default). Each step solves ``(I + X^T diag(h) X) s = -g``:

* ``d <= n``: the ``d x d`` Hessian per layer, Cholesky (``newton`` solver);
* ``n < d``: Woodbury with the ``n x n`` kernel ``X X^T``, computed once (the dual form);
* ``min(n, d) > direct_max``: preconditioned conjugate gradients on Hessian-vector products
  (``newton-cg``), which needs no ``d x d`` or ``n x n`` matrix.

PCA and mass-mean use the batched helpers of :mod:`ppairs_lens.probes.estimators`, so
``SweepProbes.to_probe(kind, layer)`` returns an estimator identical to what that module fits.

Layers whose contrast differences are all zero (an embedding layer at the answer token is the
same for every pair) cannot be probed: they are marked in ``degenerate[kind]`` with a warning,
and their probabilities are NaN, rather than failing the whole sweep.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange
from jaxtyping import Bool, Float, Int
from scipy.special import expit
from torch import Tensor

from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.features import as_acts, labels_to_targets
from ppairs_lens.probes.estimators import (
    PROBE_KINDS,
    check_classes,
    fit_logistic_scale,
    is_degenerate,
    make_probe,
    orient_to_targets,
    top_principal_direction,
)

__all__ = ["SweepProbes", "fit_sweep", "batched_logistic_regression"]

Solver = Literal["auto", "newton", "newton-cg"]


# --------------------------------------------------------------------------------------------
# Batched L2 logistic regression (no intercept, sample weights)
# --------------------------------------------------------------------------------------------

def _bmv(x: Float[Tensor, "l n d"], w: Float[Tensor, "l d"]) -> Float[Tensor, "l n"]:
    """``x @ w`` per layer (as row-vector products: 1.5-3x faster than bmm's gemv on CPU)."""
    return (w.unsqueeze(1) @ x.mT).squeeze(1)


def _bmv_t(x: Float[Tensor, "l n d"], r: Float[Tensor, "l n"]) -> Float[Tensor, "l d"]:
    """``x^T @ r`` per layer, without materialising a transposed copy of ``x``."""
    return (r.unsqueeze(1) @ x).squeeze(1)


def _cholesky(a: Float[Tensor, "l m m"]) -> Float[Tensor, "l m m"]:
    """Cholesky factor; the matrices are I + PSD, so failure only comes from round-off."""
    chol, info = torch.linalg.cholesky_ex(a)
    if bool((info != 0).any()):
        jitter = 1e-10 * a.diagonal(dim1=-2, dim2=-1).mean(-1).clamp_min(1.0)
        chol, info = torch.linalg.cholesky_ex(
            a + jitter[:, None, None] * torch.eye(a.shape[-1], dtype=a.dtype, device=a.device))
        if bool((info != 0).any()):
            raise ProbeError("Newton system is not positive definite even with jitter: the "
                             "activations are too large to solve in float64 (rescale them)")
    return chol


def _chol_apply(factor: Float[Tensor, "l m m"], r: Float[Tensor, "l m"]) -> Float[Tensor, "l m"]:
    """``(L L^T)^{-1} r`` by two triangular solves (much faster than batched cholesky_solve)."""
    half = torch.linalg.solve_triangular(factor, r.unsqueeze(-1), upper=False)
    return torch.linalg.solve_triangular(factor.mT, half, upper=True).squeeze(-1)


def _pcg(hvp, b: Float[Tensor, "l d"], apply_pinv, rtol: Float[Tensor, "l"], max_iter: int
         ) -> tuple[Float[Tensor, "l d"], Bool[Tensor, "l"]]:
    """Batched preconditioned CG for ``H x = b``, each layer stopping at its own tolerance.

    ``apply_pinv(r)`` applies the inverse preconditioner. Returns ``(x, reached)``; CG
    iterates from 0 are descent directions, so an unfinished ``x`` is still usable.
    """
    x = torch.zeros_like(b)
    r = b.clone()
    z = apply_pinv(r)
    p = z.clone()
    rz = (r * z).sum(-1)
    target = rtol * b.norm(dim=-1)
    active = r.norm(dim=-1) > target
    for _ in range(max_iter):
        if not bool(active.any()):
            break
        hp = hvp(p)
        php = (p * hp).sum(-1)
        alpha = torch.where(active, rz / torch.where(php > 0, php, torch.ones_like(php)),
                            torch.zeros_like(php))
        x = x + alpha[:, None] * p
        r = r - alpha[:, None] * hp
        z = apply_pinv(r)
        rz_new = (r * z).sum(-1)
        beta = torch.where(active, rz_new / torch.where(rz != 0, rz, torch.ones_like(rz)),
                           torch.zeros_like(rz))
        p = z + beta[:, None] * p
        rz = rz_new
        active = active & (r.norm(dim=-1) > target)
    return x, ~active


class _ActiveLayers:
    """Bookkeeping of a batched Newton solve: per-layer state ``st`` (rows = layers still
    iterating), iteration counts and convergence flags; layers leave the batch together
    when they converge or stall."""

    def __init__(self, n_layers: int, device: torch.device, **state: Tensor):
        self.st = {"idx": torch.arange(n_layers, device=device), **state}
        self.n_iter = torch.zeros(n_layers, dtype=torch.long)
        self.converged = torch.zeros(n_layers, dtype=torch.bool)
        self.g0: Tensor | None = None

    def check(self, it: int, tol: float, last: bool, gn: Float[Tensor, "la"],
              **rows: Tensor) -> dict[str, Tensor] | None:
        """Record iteration ``it`` with gradient norms ``gn``; drop the converged layers.

        Returns ``gn``, ``rows`` (per-layer tensors of this iteration) and ``g0a`` (the
        initial gradient norms) for the layers left, or None when the solve is over.
        """
        if self.g0 is None:
            self.g0 = gn.clone()
        idx = self.st["idx"]
        rows.update(gn=gn, g0a=self.g0[idx])
        done = gn <= tol * rows["g0a"]
        self.n_iter[idx.cpu()] = it
        self.converged[idx[done].cpu()] = True
        if last:
            return None
        if bool(done.any()):
            if not self.drop(done):
                return None
            rows = {key: val[~done] for key, val in rows.items()}
        return rows

    def drop(self, mask: Tensor) -> bool:
        """Remove rows where ``mask``; False when no layer is left."""
        keep = ~mask
        for key in list(self.st):
            self.st[key] = self.st[key][keep]
        return bool(keep.any())

    def stall(self, stalled: Tensor, gn: Tensor, g0a: Tensor) -> bool:
        """At the numerical optimum the line search cannot decrease f: accept a stalled row
        if its gradient is small, drop it either way; False when no layer is left."""
        self.converged[self.st["idx"][stalled].cpu()] = (
            gn[stalled] <= 1e-5 * g0a[stalled]).cpu()
        return self.drop(stalled)


def _kernel_newton(kernel: Float[Tensor, "l n n"], y: Float[Tensor, "n"],
                   cw: Float[Tensor, "n"], tol: float, max_iter: int
                   ) -> tuple[Float[Tensor, "l n"], Int[Tensor, "l"], Bool[Tensor, "l"]]:
    """The ``n < d`` case of :func:`batched_logistic_regression`, in the span of the data.

    Newton from ``w = 0`` stays in the row space of ``X`` (each Woodbury step is ``X^T`` of
    something), so ``w = X^T a`` and every quantity is a product with the kernel
    ``K = X X^T``: ``z = K a``, ``g = X^T v`` with ``v = cw (p - y) + a`` and
    ``||g||^2 = v^T K v``; the step is ``a += t d``, ``d = -v + S (I + S K S)^{-1} S K v``,
    ``S = diag(sqrt(h))``. Iterations then read the ``n x n`` kernel only, never the
    ``n x d`` data (half the memory traffic at d = 2n), and the line search is ``O(n)`` per
    trial. Returns ``(a, n_iter, converged)``; the caller forms ``w = X^T a`` once.
    """
    n_layers, n, _ = kernel.shape
    sign = 2 * y - 1

    def kmv(k, v):
        return (v.unsqueeze(1) @ k).squeeze(1)        # K v (K symmetric)

    def loss(z):
        return (cw * F.softplus(-sign * z)).sum(-1)

    a_out = torch.zeros(n_layers, n, dtype=kernel.dtype, device=kernel.device)
    # Newton systems are solved in float32 (half the cost) while that keeps working: a step
    # only sets the speed of convergence, not where it ends, which the float64 gradient
    # decides. A float32 system that is not positive definite, a step that is not a descent
    # direction or one that no longer decreases the objective switch to float64 for good.
    precise = kernel.dtype != torch.float64
    extra = {} if precise else {"k32": kernel.float()}
    act = _ActiveLayers(n_layers, kernel.device, k=kernel, a=a_out.clone(), z=a_out.clone(),
                        **extra)
    st = act.st

    def direction(kk, sq, v, kv):
        """``-v + S (I + S K S)^{-1} S K v`` with ``K = kk`` (its dtype); None if the system
        is not numerically positive definite in that dtype."""
        s_ = sq.to(kk)
        m = s_[:, :, None] * kk * s_[:, None, :]
        m.diagonal(dim1=-2, dim2=-1).add_(1.0)
        if kk.dtype == kernel.dtype:
            chol = _cholesky(m)
        else:
            chol, info = torch.linalg.cholesky_ex(m)
            if bool((info != 0).any()):
                return None
        return -v + sq * _chol_apply(chol, (sq * kv).to(kk)).to(v)

    st["f"] = loss(st["z"])
    for it in range(max_iter + 1):
        k, a, z = st["k"], st["a"], st["z"]
        p = torch.sigmoid(z)
        v = cw * (p - y) + a
        kv = kmv(k, v)
        left = act.check(it, tol, it == max_iter, (v * kv).sum(-1).clamp_min(0).sqrt(),
                         p=p, v=v, kv=kv)
        if left is None:
            break
        k, a, z = st["k"], st["a"], st["z"]
        p, v, kv, gn, g0a = (left[key] for key in ("p", "v", "kv", "gn", "g0a"))
        sq = (cw * p * (1 - p)).sqrt()
        low = not precise
        d = direction(st["k32"] if low else k, sq, v, kv)
        kd = kmv(k, d) if d is not None else None
        if low and (d is None or not bool(((v * kd).sum(-1) < 0).all())):
            low, precise = False, True  # single precision failed here: the working one from now
            d = direction(k, sq, v, kv)
            kd = kmv(k, d)
        slope = (v * kd).sum(-1)                       # g . step  (< 0: a descent direction)
        # f(a + t d) = loss(z + t K d) + (a.z + 2 t d.z + t^2 d.K d) / 2
        az, dz, dkd = (a * z).sum(-1), (d * z).sum(-1), (d * kd).sum(-1)
        f = st["f"] + 0.5 * az
        t = torch.ones_like(f)
        for _ in range(40):
            z_new = z + t[:, None] * kd
            f_new = loss(z_new) + 0.5 * (az + 2 * t * dz + t * t * dkd)
            ok = f_new <= f + 1e-4 * t * slope
            if bool(ok.all()):
                break
            t = torch.where(ok, t, 0.5 * t)
        stalled = ~ok | (f_new >= f)
        step = torch.where(ok, t, torch.zeros_like(t))[:, None]
        st["a"] = a + step * d
        st["z"] = torch.where(ok[:, None], z_new, z)
        st["f"] = loss(st["z"])
        a_out[st["idx"]] = st["a"]
        if bool(stalled.any()):
            if low:        # no decrease from a single-precision step: retry in full precision
                precise = True
            elif not act.stall(stalled, gn, g0a):
                break
    return a_out, act.n_iter, act.converged


def batched_logistic_regression(
    x: Float[Tensor, "l n d"], y: Float[Tensor, "n"], C: float = 1.0, *,
    class_weight: Literal["balanced"] | None = "balanced", solver: Solver = "auto",
    tol: float = 1e-9, max_iter: int = 100, direct_max: int = 2048, cg_max_iter: int = 250,
    reuse_cg_iter: int = 8, kernel: Float[Tensor, "l n n"] | None = None,
) -> tuple[Float[Tensor, "l d"], Int[Tensor, "l"], Bool[Tensor, "l"]]:
    """sklearn's ``LogisticRegression(C, fit_intercept=False, class_weight)`` for a batch.

    Minimises ``C * sum_i c_i logloss_i + ||w||^2 / 2`` independently for every leading index
    of ``x`` with damped Newton steps (Armijo backtracking) until ``||grad|| <= tol *
    ||grad at 0||``; a layer leaves the batch when it converges. Returns ``(w, n_iter,
    converged)``. Computes in ``x``'s dtype and device (use float64).

    Solvers: ``newton`` forms the Hessian (``d <= n``; ``d x d``) or uses Woodbury with the
    kernel ``X X^T`` computed once (``n < d``; ``n x n``); ``newton-cg`` needs neither (PCG with
    a Jacobi preconditioner on Hessian-vector products); ``auto`` picks ``newton`` when
    ``min(n, d) <= direct_max``. In the ``d <= n`` case a factorised Hessian is reused as the
    preconditioner of a few CG steps on later iterations (the weights ``p(1-p)`` change less
    and less), and refreshed when ``reuse_cg_iter`` CG steps no longer suffice: forming the
    Hessian costs ``2 n d^2`` per layer, a CG step ``4 n d``. ``kernel`` (``x @ x^T``, the
    dual case) may be passed when the caller has it already.
    """
    n_layers, n, d = x.shape
    y = y.to(x)
    if class_weight == "balanced":
        n1 = y.sum()
        sw = torch.where(y > 0.5, n / (2 * n1), n / (2 * (n - n1)))
    elif class_weight is None:
        sw = torch.ones_like(y)
    else:
        raise ProbeError(f"class_weight must be 'balanced' or None, got {class_weight!r}")
    cw = C * sw
    sign = 2 * y - 1
    if solver == "auto":
        solver = "newton" if min(n, d) <= direct_max else "newton-cg"
    if solver not in ("newton", "newton-cg"):
        raise ProbeError(f"unknown solver {solver!r}; use 'auto', 'newton' or 'newton-cg'")
    if solver == "newton" and n < d:   # Woodbury, in the kernel's terms
        k = x @ x.mT if kernel is None else kernel.to(x)  # [l, n, n], once
        a, n_iter, converged = _kernel_newton(k, y, cw, tol, max_iter)
        return _bmv_t(x, a), n_iter, converged

    def objective(xa, wa):
        z = _bmv(xa, wa)
        return (cw * F.softplus(-sign * z)).sum(-1) + 0.5 * (wa * wa).sum(-1), z

    w = torch.zeros(n_layers, d, dtype=x.dtype, device=x.device)
    act = _ActiveLayers(n_layers, x.device, x=x, w=w.clone())
    st = act.st
    st["f"], st["z"] = objective(st["x"], st["w"])
    refresh = True
    for it in range(max_iter + 1):
        xa, wa = st["x"], st["w"]
        p = torch.sigmoid(st["z"])
        g = _bmv_t(xa, cw * (p - y)) + wa
        left = act.check(it, tol, it == max_iter, g.norm(dim=-1), p=p, g=g)
        if left is None:
            break
        xa, wa = st["x"], st["w"]
        p, g, gn, g0a = (left[key] for key in ("p", "g", "gn", "g0a"))
        h = cw * p * (1 - p)                          # [la, n], Hessian weights

        def hvp(v, xa=xa, h=h):
            return v + _bmv_t(xa, h * _bmv(xa, v))

        if solver == "newton-cg":
            jacobi = 1 + (xa * xa).mT.matmul(h.unsqueeze(-1)).squeeze(-1)
            rtol = torch.clamp(torch.sqrt(gn / g0a), max=0.1)
            step, _ = _pcg(hvp, -g, lambda r, j=jacobi: r / j, rtol, cg_max_iter)
        else:
            if "factor" in st and not refresh:
                rtol = torch.clamp(gn / g0a, max=0.1)
                step, reached = _pcg(hvp, -g, lambda r, c=st["factor"]: _chol_apply(c, r),
                                     rtol, reuse_cg_iter)
                refresh = not bool(reached.all())   # refresh next time if CG got too slow
            else:
                xs = xa * h.sqrt().unsqueeze(-1)
                hess = xs.mT @ xs
                del xs
                hess.diagonal(dim1=-2, dim2=-1).add_(1.0)
                st["factor"] = _cholesky(hess)
                del hess
                step = -_chol_apply(st["factor"], g)
                refresh = False
        slope = (g * step).sum(-1)                     # < 0: a descent direction
        f = st["f"]
        t = torch.ones_like(f)
        for _ in range(40):
            f_new, z_new = objective(xa, wa + t[:, None] * step)
            ok = f_new <= f + 1e-4 * t * slope
            if bool(ok.all()):
                break
            t = torch.where(ok, t, 0.5 * t)
        stalled = ~ok | (f_new >= f)                  # no decrease left at float64 precision
        st["w"] = wa + torch.where(ok, t, torch.zeros_like(t))[:, None] * step
        st["f"] = torch.where(ok, f_new, f)
        st["z"] = torch.where(ok[:, None], z_new, st["z"])
        w[st["idx"]] = st["w"]
        if bool(stalled.any()) and not act.stall(stalled, gn, g0a):
            break
    return w, act.n_iter, act.converged


# --------------------------------------------------------------------------------------------
# The sweep
# --------------------------------------------------------------------------------------------

@dataclass
class SweepProbes:
    """Probes of every kind for every layer, as stacked parameters (CPU, float64).

    ``P(item 1 preferred)`` for layer ``l`` and kind ``k`` is
    ``sigmoid(scales[k][l] * <diff_l, directions[k][l]> + intercepts[k][l])`` where ``diff_l``
    is the contrast difference centred by the training means ``mu_pos[l]``, ``mu_neg[l]``.
    Axis 0 of every tensor is the layer axis of the training activations; ``layers`` holds
    the label of each position (the model's layer numbers, by default ``0..L-1``).
    """

    kinds: tuple[str, ...]
    layers: tuple[int, ...]
    mu_pos: Float[Tensor, "layer d"]
    mu_neg: Float[Tensor, "layer d"]
    directions: dict[str, Float[Tensor, "layer d"]]
    scales: dict[str, Float[Tensor, "layer"]]
    intercepts: dict[str, Float[Tensor, "layer"]]
    degenerate: dict[str, Bool[Tensor, "layer"]]
    C: float = 1.0
    model_name: str | None = None
    n_train: int = 0
    n_iter: Int[Tensor, "layer"] | None = None
    converged: Bool[Tensor, "layer"] | None = None

    @property
    def n_layers(self) -> int:
        return int(self.mu_pos.shape[0])

    @property
    def d_model(self) -> int:
        return int(self.mu_pos.shape[1])

    def coef(self, kind: str) -> Float[Tensor, "layer d"]:
        """Weight vectors ``scale * direction`` of ``kind``, ``[layer, d]``."""
        self._check_kind(kind)
        return self.directions[kind] * self.scales[kind][:, None]

    def _check_kind(self, kind: str) -> None:
        if kind not in self.kinds:
            raise ProbeError(f"this sweep has no {kind!r} probes; it has {self.kinds}")

    def decision_function(self, acts: Float[Tensor, "n 2 layer d"] | np.ndarray, *,
                          model_name: str | None = None, layer_batch: int | None = None
                          ) -> dict[str, np.ndarray]:
        """Logits of P(item 1 preferred): ``{kind: [layer, n]}`` (NaN on degenerate layers)."""
        if (model_name is not None and self.model_name is not None
                and model_name != self.model_name):
            raise ProbeError(f"sweep was fitted on model {self.model_name!r}, asked to apply it "
                             f"to activations of model {model_name!r}")
        x_all = _check_sweep_acts(acts)
        n, _, n_layers, d = x_all.shape
        if (n_layers, d) != (self.n_layers, self.d_model):
            raise ProbeError(
                f"sweep was fitted on {self.n_layers} layers with d_model={self.d_model}, got "
                f"activations with {n_layers} layers and d_model={d}")
        out = {k: np.empty((n_layers, n)) for k in self.kinds}
        cpu = torch.device("cpu")  # applying works on the CPU, where the parameters are
        step = layer_batch or _layer_batch(n, d, x_all.element_size(), cpu)
        for l0 in range(0, n_layers, step):
            sl = slice(l0, min(l0 + step, n_layers))
            diffs = _chunk_diffs(x_all, sl, cpu, self.mu_pos[sl],
                                 self.mu_neg[sl])[0]
            for k in self.kinds:
                logit = _bmv(diffs, self.coef(k)[sl]) + self.intercepts[k][sl, None]
                out[k][sl] = logit.numpy()
        return out

    def predict_proba(self, acts: Float[Tensor, "n 2 layer d"] | np.ndarray, **kw: Any
                      ) -> dict[str, np.ndarray]:
        """``{kind: [layer, n]}`` of P(item 1 preferred) (NaN on degenerate layers)."""
        return {k: expit(v) for k, v in self.decision_function(acts, **kw).items()}

    def predict(self, acts: Float[Tensor, "n 2 layer d"] | np.ndarray, **kw: Any
                ) -> dict[str, np.ndarray]:
        """``{kind: [layer, n]}`` predicted labels 1 / 2 (degenerate layers: 0)."""
        return {k: np.where(np.isnan(v), 0, np.where(v >= 0, 1, 2))
                for k, v in self.decision_function(acts, **kw).items()}

    def score(self, acts: Float[Tensor, "n 2 layer d"] | np.ndarray, labels: Any, **kw: Any
              ) -> dict[str, np.ndarray]:
        """``{kind: [layer]}`` accuracy against labels 1 / 2 (NaN on degenerate layers)."""
        y = labels_to_targets(labels).numpy() == 1
        out = {}
        for k, v in self.decision_function(acts, **kw).items():
            if v.shape[1] != len(y):
                raise ProbeError(f"{v.shape[1]} activation pairs but {len(y)} labels")
            acc = ((v >= 0) == y[None, :]).mean(axis=1)
            out[k] = np.where(self.degenerate[k].numpy(), np.nan, acc)
        return out

    def to_probe(self, kind: str, layer: int):
        """The single-layer estimator (from :mod:`ppairs_lens.probes.estimators`) of ``kind`` at position
        ``layer`` of the layer axis, fitted attributes filled in from the sweep (no refit).

        Its ``layer_`` is ``self.layers[layer]``, the label of that position.
        """
        self._check_kind(kind)
        if not -self.n_layers <= layer < self.n_layers:
            raise ProbeError(f"layer index {layer} out of range for {self.n_layers} layers")
        if bool(self.degenerate[kind][layer]):
            raise ProbeError(f"the {kind!r} probe of layer {self.layers[layer]} is degenerate "
                             f"(no pair-specific signal there); it cannot be used")
        probe = make_probe(kind, C=self.C) if kind == "supervised" else make_probe(kind)
        direction = self.directions[kind][layer].clone()
        scale = float(self.scales[kind][layer])
        probe.mu_pos_ = self.mu_pos[layer].numpy().copy()
        probe.mu_neg_ = self.mu_neg[layer].numpy().copy()
        probe.direction_ = direction.numpy()
        probe.scale_ = scale
        probe.coef_ = (direction * scale).numpy()
        probe.intercept_ = float(self.intercepts[kind][layer])
        probe.n_features_in_ = self.d_model
        probe.classes_ = np.array([2, 1])
        probe.layer_ = self.layers[layer]
        probe.model_name_ = self.model_name
        if kind == "supervised" and self.n_iter is not None:
            probe.n_iter_ = int(self.n_iter[layer])
        return probe


def _check_sweep_acts(acts: Any) -> Float[Tensor, "n 2 layer d"]:
    t = as_acts(acts)
    if t.ndim != 4:
        raise ProbeError(f"a sweep takes activations of all layers [n, 2, layer, d], got shape "
                         f"{tuple(t.shape)} (for one layer use acts[:, :, None])")
    return t


def _raise_non_finite(x_all: Tensor, sl: slice) -> None:
    bad = ~torch.isfinite(x_all[:, :, sl])
    layers = torch.nonzero(bad.any(dim=(0, 1, 3))).flatten() + sl.start
    raise ProbeError(f"activations contain {int(bad.sum())} non-finite value(s) (NaN/inf) in "
                     f"layer position(s) {layers.tolist()}")


def _chunk_diffs(x_all: Float[Tensor, "n 2 layer d"], sl: slice, dev: torch.device,
                 mu_pos: Tensor | None = None, mu_neg: Tensor | None = None):
    """Contrast differences ``[l, n, d]`` (float64, on ``dev``) of the layers ``sl``.

    The same quantity as :func:`ppairs_lens.probes.features.contrast_features`, written as
    ``(x0 - x1) - (mu_pos - mu_neg)`` in float64 (as the single-layer probes compute it).
    Side means are computed here when not given (fitting). Returns
    ``(diffs, mu_pos, mu_neg, peak)``, ``peak`` the largest absolute activation per layer.
    """
    work = torch.promote_types(x_all.dtype, torch.float32)  # half precision: upcast first
    a0, a1 = x_all[:, 0, sl].to(dev, work), x_all[:, 1, sl].to(dev, work)   # [n, l, d]
    n = a0.shape[0]
    diffs = torch.empty(a0.shape[1], n, a0.shape[2], dtype=torch.float64, device=dev)
    other = torch.empty_like(diffs)
    diffs.copy_(rearrange(a0, "n l d -> l n d"))
    other.copy_(rearrange(a1, "n l d -> l n d"))
    # Extremes from the contiguous copies (faster than over the strided views, and than
    # aminmax, which is not vectorised for this).
    peak = torch.stack([t.amax(dim=(1, 2)).abs() for t in (diffs, other)]
                       + [t.amin(dim=(1, 2)).abs() for t in (diffs, other)]).amax(0)
    if not bool(torch.isfinite(peak).all()):
        _raise_non_finite(x_all, sl)
    if mu_pos is None:  # from the float64 copies: a float64 sum over the strided float32
        mu_pos = diffs.sum(dim=1) / n   # views took as long as building the differences
        mu_neg = other.sum(dim=1) / n
    else:
        mu_pos, mu_neg = mu_pos.to(dev), mu_neg.to(dev)
    diffs.sub_(other).sub_((mu_pos - mu_neg).unsqueeze(1))
    return diffs, mu_pos, mu_neg, peak


#: On the CPU, the largest float64 buffer of a chunk of layers stays below this. glibc maps
#: every allocation over 32 MiB afresh (and large ones below that too until its threshold
#: adapts), so each such buffer is page-faulted in again: that was most of the time of
#: building the differences. Measured on a SmolLM2 sweep (280 pairs, 31 layers, fit and
#: score): all layers at once 52,000 faults per run; 16 MiB 16,000; 8 MiB and 4 MiB none,
#: and 20-25% faster.
CPU_CHUNK_BYTES = 8 << 20


def _layer_batch(n: int, d: int, itemsize: int, device: torch.device | None = None,
                 budget: int = 1 << 30) -> int:
    """Layers per chunk: on the CPU, so that its largest float64 buffer (the differences or
    an ``m x m`` matrix per layer) stays below ``CPU_CHUNK_BYTES``; elsewhere (a GPU wants
    large batches), so that the whole float64 working set stays near ``budget``."""
    m = min(n, d)
    if device is None or device.type == "cpu":
        return max(1, CPU_CHUNK_BYTES // (8 * max(n * d, m * m)))
    per_layer = 8 * (4 * n * d + 3 * m * m) + itemsize * 2 * n * d
    return max(1, budget // per_layer)


def fit_sweep(
    acts: Float[Tensor, "n 2 layer d"] | np.ndarray, labels: Any,
    kinds: Sequence[str] = PROBE_KINDS, C: float = 1.0, *,
    layers: Sequence[int] | None = None, model_name: str | None = None,
    solver: Solver = "auto", tol: float = 1e-9, max_iter: int = 100, direct_max: int = 2048,
    device: str | torch.device | None = None, layer_batch: int | None = None,
) -> SweepProbes:
    """Fit ``kinds`` probes on every layer of ``acts`` (``[n, 2, layer, d]``) at once.

    ``labels`` are 1 / 2 (no ties; see :func:`ppairs_lens.probes.features.drop_ties`). ``C`` is the
    supervised probe's inverse regularisation, as in scikit-learn. Work runs in float64 on
    ``device`` (default: where ``acts`` are), ``layer_batch`` layers at a time (default: on the
    CPU, chunks whose largest buffer is under 8 MiB; on a GPU, about 1 GiB of working set),
    so half-precision activations are never copied whole.
    ``layers`` labels the layer axis (default ``range(L)``); ``solver`` / ``tol`` /
    ``max_iter`` / ``direct_max`` go to :func:`batched_logistic_regression`.
    """
    kinds = tuple(kinds)
    for k in kinds:
        if k not in PROBE_KINDS:
            raise ProbeError(f"unknown probe kind {k!r}; choose from {PROBE_KINDS}")
    if not kinds:
        raise ProbeError("no probe kinds requested")
    x_all = _check_sweep_acts(acts)
    n, _, n_layers, d = x_all.shape
    y_int = labels_to_targets(labels)
    if y_int.numel() != n:
        raise ProbeError(f"{n} activation pairs but {y_int.numel()} labels")
    check_classes(y_int)
    layers = tuple(range(n_layers)) if layers is None else tuple(int(v) for v in layers)
    if len(layers) != n_layers:
        raise ProbeError(f"{len(layers)} layer labels for {n_layers} layers of activations")
    dev = torch.device(device) if device is not None else x_all.device
    y = y_int.to(dev, torch.float64)
    pos = y_int.to(dev).bool()

    mu_pos = torch.empty(n_layers, d, dtype=torch.float64)
    mu_neg = torch.empty_like(mu_pos)
    directions = {k: torch.full((n_layers, d), float("nan"), dtype=torch.float64) for k in kinds}
    scales = {k: torch.full((n_layers,), float("nan"), dtype=torch.float64) for k in kinds}
    flat = torch.zeros(n_layers, dtype=torch.bool)
    n_iter = torch.zeros(n_layers, dtype=torch.long)
    converged = torch.ones(n_layers, dtype=torch.bool)

    projections = {k: torch.empty(n_layers, n, dtype=torch.float64, device=dev) for k in kinds
                   if k != "supervised"}  # training projections on each direction
    mean_weights = torch.where(pos, 1 / pos.sum(), -1 / (~pos).sum()).to(torch.float64)
    step = layer_batch or _layer_batch(n, d, x_all.element_size(), dev)
    for l0 in range(0, n_layers, step):
        sl = slice(l0, min(l0 + step, n_layers))
        diffs, mp, mn, peak = _chunk_diffs(x_all, sl, dev)
        mu_pos[sl], mu_neg[sl] = mp.cpu(), mn.cpu()
        flat[sl] = is_degenerate(diffs, peak).cpu()
        # n < d: the n x n Gram matrix serves the dual Newton solver and PCA: form it once.
        shared = diffs @ diffs.mT if (n < d and n <= direct_max and solver != "newton-cg"
                                      and {"supervised", "pca"} <= set(kinds)) else None
        for k in kinds:
            if k == "supervised":
                w, it, conv = batched_logistic_regression(
                    diffs, y, C, solver=solver, tol=tol, max_iter=max_iter,
                    direct_max=direct_max, kernel=shared)
                norm = w.norm(dim=-1)
                directions[k][sl] = (w / norm[:, None]).cpu()
                scales[k][sl] = norm.cpu()
                n_iter[sl], converged[sl] = it, conv
            else:
                if k == "pca":
                    v = top_principal_direction(diffs, gram=shared)
                else:  # difference of the class means, as one product (no masked copies)
                    v = _bmv_t(diffs, mean_weights.expand(diffs.shape[0], -1))
                    v = v / v.norm(dim=-1, keepdim=True)
                v, proj = orient_to_targets(v, diffs, y)
                directions[k][sl] = v.cpu()
                projections[k][sl] = proj
        del diffs, shared
    # The 1-D scale fits (bisection: many tiny steps) run once for all chunks and kinds.
    if projections:
        fitted = fit_logistic_scale(torch.stack(list(projections.values())), y).cpu()
        scales.update(zip(projections, fitted))

    if bool(flat.all()):
        raise ProbeError("all contrast differences are zero on every layer: the two prompts of "
                         "every pair give the same activations up to a constant")
    degenerate = {}
    for k in kinds:
        bad = flat | ~torch.isfinite(scales[k]) | (scales[k] <= 0) \
            | ~torch.isfinite(directions[k]).all(dim=-1)
        directions[k][bad] = float("nan")
        scales[k][bad] = float("nan")
        degenerate[k] = bad
        if bool(bad.any()):
            warnings.warn(f"{k} probes are degenerate (no pair-specific signal) on layer(s) "
                          f"{[layers[i] for i in torch.nonzero(bad).flatten().tolist()]}; "
                          f"their probabilities are NaN", stacklevel=2)
    if "supervised" in kinds and not bool(converged[~flat].all()):
        bad_layers = [layers[i] for i in torch.nonzero(~converged & ~flat).flatten().tolist()]
        warnings.warn(f"supervised probe did not converge in {max_iter} Newton steps on "
                      f"layer(s) {bad_layers}", stacklevel=2)
    intercepts = {k: torch.zeros(n_layers, dtype=torch.float64) for k in kinds}
    return SweepProbes(kinds=kinds, layers=layers, mu_pos=mu_pos, mu_neg=mu_neg,
                       directions=directions, scales=scales, intercepts=intercepts,
                       degenerate=degenerate, C=float(C), model_name=model_name, n_train=n,
                       n_iter=n_iter if "supervised" in kinds else None,
                       converged=converged if "supervised" in kinds else None)

