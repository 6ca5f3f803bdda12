"""Linear probes on contrast pairs, as scikit-learn-style estimators.

Every probe sees one layer's activations ``[n, 2, d]`` (side 0 = prompt ending "... is
Choice 1", side 1 = "... is Choice 2"), centres each side by the *training* side means and
works on the differences ``(x0 - mu_pos) - (x1 - mu_neg)`` (see :mod:`ppairs_lens.probes.features`).
A probe is a direction in the residual-stream basis plus a scalar map to a probability:

    P(item 1 preferred) = sigmoid(scale_ * <diff, direction_> + intercept_)

``coef_ = scale_ * direction_``. Three ways to get the direction:

* :class:`SupervisedProbe` - L2 logistic regression (scikit-learn), as in the paper: no
  intercept, balanced class weights.
* :class:`PCAProbe` - top principal component of the differences (unsupervised direction).
* :class:`MassMeanProbe` - difference of the class means of the differences.

For PCA and mass-mean the scale is a 1-D logistic regression of the training labels on the
training projections, so their probabilities are calibrated like the supervised probe's.

Conventions (sklearn): the constructor only stores parameters; ``fit`` returns ``self``;
fitted attributes end in ``_``; ``predict_proba`` columns follow ``classes_ = [2, 1]``, i.e.
column 1 is P(item 1 preferred); ``predict`` returns labels 1 / 2; ``score`` is accuracy.

The batched helpers (``top_principal_direction``, ``orient_to_targets``,
``fit_logistic_scale``) take any leading batch axes, so :mod:`ppairs_lens.probes.sweep` fits all layers
with exactly the same maths.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import scipy.linalg
import torch
from jaxtyping import Float, Int
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.linear_model import LogisticRegression
from torch import Tensor

from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.features import as_acts, contrast_features, labels_to_targets, side_means

__all__ = [
    "PROBE_KINDS", "MIN_PER_CLASS", "SupervisedProbe", "PCAProbe", "MassMeanProbe", "make_probe",
    "top_principal_direction", "orient_to_targets", "fit_logistic_scale", "is_degenerate",
]

#: Probe kinds understood by :func:`make_probe` and :func:`ppairs_lens.probes.sweep.fit_sweep`.
PROBE_KINDS: tuple[str, ...] = ("supervised", "pca", "mass_mean")
#: Fewer training pairs than this in either class and a probe refuses to fit.
MIN_PER_CLASS: int = 2
#: Contrast differences smaller than this, relative to the activations' magnitude, are zero.
DEGENERATE_RTOL: float = 1e-9
#: Largest min(n, d) for which the PCA uses an exact eigendecomposition of the Gram matrix.
EXACT_PCA_MAX: int = 2048


# --------------------------------------------------------------------------------------------
# Batched maths shared with the sweep (leading axes = layers)
# --------------------------------------------------------------------------------------------

def is_degenerate(diffs: Float[Tensor, "*b n d"], acts_scale: Float[Tensor, "*b"] | float
                  ) -> Tensor:
    """True where every contrast difference is (numerically) zero: nothing to probe.

    ``acts_scale`` is the largest absolute activation of the same layer; differences are zero
    when they are below ``DEGENERATE_RTOL`` times it (exactly zero for all-zero activations).
    """
    peak = torch.maximum(diffs.amax(dim=(-2, -1)), -diffs.amin(dim=(-2, -1)))
    scale = torch.as_tensor(acts_scale, dtype=peak.dtype, device=peak.device)
    return peak <= DEGENERATE_RTOL * scale


#: Block Krylov settings of :func:`top_eigenvector`: a ``KRYLOV_BLOCK * KRYLOV_STEPS``-dim
#: subspace, and the residual (relative to the eigenvalue) below which its Ritz vector is
#: taken; matrices not that far along are solved exactly.
KRYLOV_BLOCK, KRYLOV_STEPS, KRYLOV_RTOL = 4, 10, 1e-10


def _exact_top_eigenvectors(flat: np.ndarray) -> np.ndarray:
    """LAPACK's ``syevr`` with an index subset: only the top eigenpair after the
    tridiagonal reduction, one matrix at a time."""
    m = flat.shape[-1]
    return np.stack([scipy.linalg.eigh(mat, subset_by_index=[m - 1, m - 1], driver="evr",
                                       check_finite=False)[1][:, 0] for mat in flat])


def top_eigenvector(a: Float[Tensor, "*b m m"], *, seed: int = 0) -> Float[Tensor, "*b m"]:
    """Eigenvector of the largest eigenvalue of each symmetric PSD matrix (sign arbitrary).

    A batched block Krylov subspace (``KRYLOV_BLOCK`` seeded random vectors, ``KRYLOV_STEPS``
    products with the whole batch, fully reorthogonalised) and its top Ritz vector: on the
    31 read-out kernels of a SmolLM2 sweep (n = 280) residuals end below 1e-12 in half the time
    of LAPACK one matrix at a time. Every matrix whose residual ``||A v - lam v|| / lam`` is
    not below ``KRYLOV_RTOL`` (small gaps, zero matrices) is solved exactly instead.
    """
    shape, m = a.shape, a.shape[-1]
    flat = a.detach().reshape(-1, m, m)
    if m <= 2 * KRYLOV_BLOCK * KRYLOV_STEPS:  # the subspace would be most of the space
        return torch.from_numpy(_exact_top_eigenvectors(flat.cpu().numpy())).reshape(
            shape[:-1]).to(a.device)
    gen = torch.Generator(device=flat.device).manual_seed(seed)
    block = torch.randn(flat.shape[0], m, KRYLOV_BLOCK, generator=gen, dtype=flat.dtype,
                        device=flat.device)
    basis = torch.linalg.qr(block)[0]
    images = []  # A @ each block, kept: the Rayleigh-Ritz step and the residual reuse them
    for step in range(KRYLOV_STEPS):
        images.append(flat @ basis[..., -KRYLOV_BLOCK:])
        if step == KRYLOV_STEPS - 1:
            break
        z = images[-1]
        for _ in range(2):  # twice is enough (Kahan-Parlett)
            z = z - basis @ (basis.mT @ z)
        basis = torch.cat([basis, torch.linalg.qr(z)[0]], -1)
    a_basis = torch.cat(images, -1)
    vals, vecs = torch.linalg.eigh(basis.mT @ a_basis)
    v = (basis @ vecs[..., -1:]).squeeze(-1)
    lam = vals[..., -1]
    res = ((a_basis @ vecs[..., -1:]).squeeze(-1) - lam[:, None] * v).norm(dim=-1) / lam
    redo = ~(res <= KRYLOV_RTOL)  # NaN (zero matrix) included
    if bool(redo.any()):
        exact = _exact_top_eigenvectors(flat[redo].cpu().numpy())
        v[redo] = torch.from_numpy(exact).to(v)
    return v.reshape(shape[:-1])


def top_principal_direction(diffs: Float[Tensor, "*b n d"], *, exact_max: int = EXACT_PCA_MAX,
                            n_iter: int = 10, oversample: int = 10, seed: int = 0,
                            gram: Float[Tensor, "*b m m"] | None = None
                            ) -> Float[Tensor, "*b d"]:
    """Unit top right-singular vector of ``diffs`` (sign arbitrary), batched.

    The differences are not re-centred: with training side means they already have mean zero
    exactly (mean(x0) - mu_pos - (mean(x1) - mu_neg) = 0), so "PCA of the differences" and
    "SVD of the differences" coincide. Exact eigendecomposition of the smaller Gram matrix
    (``d x d`` or ``n x n``; pass it as ``gram`` when already computed) when ``min(n, d) <=
    exact_max``; otherwise randomized subspace iteration (Halko et al.) seeded with its own
    generator (no global RNG).
    """
    n, d = diffs.shape[-2:]
    if min(n, d) <= exact_max:
        if gram is None:
            gram = diffs.mT @ diffs if d <= n else diffs @ diffs.mT
        v = top_eigenvector(gram)
        if d > n:
            v = (diffs.mT @ v.unsqueeze(-1)).squeeze(-1)
    else:
        gen = torch.Generator(device=diffs.device).manual_seed(seed)
        q = min(1 + oversample, n, d)
        basis = torch.randn(*diffs.shape[:-2], d, q, generator=gen, dtype=diffs.dtype,
                            device=diffs.device)
        basis, _ = torch.linalg.qr(basis)
        for _ in range(n_iter):
            basis, _ = torch.linalg.qr(diffs.mT @ (diffs @ basis))
        small = diffs @ basis
        _, vecs = torch.linalg.eigh(small.mT @ small)
        v = (basis @ vecs[..., -1:]).squeeze(-1)
    return v / v.norm(dim=-1, keepdim=True)


def orient_to_targets(direction: Float[Tensor, "*b d"], diffs: Float[Tensor, "*b n d"],
                      y: Float[Tensor, "n"]) -> tuple[Float[Tensor, "*b d"], Float[Tensor, "*b n"]]:
    """Flip ``direction`` so the projections correlate positively with ``y`` (1 = item 1).

    Returns the oriented direction and the training projections on it.
    """
    proj = (diffs @ direction.unsqueeze(-1)).squeeze(-1)
    y = y.to(proj)
    sign = torch.sign((proj * (y - y.mean())).sum(dim=-1))
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    return direction * sign.unsqueeze(-1), proj * sign.unsqueeze(-1)


def fit_logistic_scale(proj: Float[Tensor, "*b n"], y: Float[Tensor, "n"], *, lam: float = 1.0,
                       n_iter: int = 90) -> Float[Tensor, "*b"]:
    """Scale ``s`` of a 1-D logistic regression ``P(y=1) = sigmoid(s * proj)``, batched.

    No intercept (the centred differences have mean zero, and swapping the two items negates
    a difference, so a zero projection should mean 0.5) and no class weights (plain maximum
    likelihood, so probabilities are calibrated). The projections are standardised first and
    a weak ridge ``lam / 2 * s_std**2`` keeps ``s`` finite on separable data; it is negligible
    against the n log-losses. The 1-D problem is convex, so the root of its derivative is found
    by bisection: robust and identical for one layer or all. NaN where the projections are
    constant (nothing to scale).
    """
    y = y.to(proj)
    std = proj.std(dim=-1, correction=0)
    ok = std > 0
    z = proj / torch.where(ok, std, torch.ones_like(std)).unsqueeze(-1)
    bound = z.abs().sum(dim=-1) / lam + 1.0   # derivative is > 0 at +bound and < 0 at -bound
    lo, hi = -bound, bound
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        grad = ((torch.sigmoid(mid.unsqueeze(-1) * z) - y) * z).sum(dim=-1) + lam * mid
        up = grad > 0
        hi = torch.where(up, mid, hi)
        lo = torch.where(up, lo, mid)
    scale = 0.5 * (lo + hi) / torch.where(ok, std, torch.ones_like(std))
    return torch.where(ok, scale, torch.full_like(scale, float("nan")))


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------

def _finite_acts(acts: Any, what: str) -> Float[Tensor, "n 2 d"]:
    """One layer's activations as float64 ``[n, 2, d]`` on the CPU, refusing NaN / inf."""
    t = as_acts(acts, dtype=torch.float64).cpu()
    if t.ndim != 3:
        raise ProbeError(
            f"a single probe takes one layer's activations [n, 2, d]; got shape "
            f"{tuple(t.shape)} (select a layer, e.g. acts[:, :, layer], or use "
            f"ppairs_lens.probes.sweep.fit_sweep for all layers)")
    bad = ~torch.isfinite(t)
    if bad.any():
        rows = torch.nonzero(bad.flatten(1).any(dim=1)).flatten()
        raise ProbeError(f"{what} activations contain {int(bad.sum())} non-finite value(s) "
                         f"(NaN/inf) in {rows.numel()} pair(s), first pair index {int(rows[0])}")
    return t


def check_classes(y: Int[Tensor, "n"], min_per_class: int = MIN_PER_CLASS) -> None:
    """Refuse targets with fewer than ``min_per_class`` pairs of either class."""
    n1 = int((y == 1).sum())
    n0 = int(y.numel() - n1)
    if min(n0, n1) < min_per_class:
        raise ProbeError(
            f"need at least {min_per_class} training pairs of each class, got {n1} with item 1 "
            f"preferred (label 1) and {n0} with item 2 preferred (label 2)")


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------

class _PairProbe(BaseEstimator):
    """Shared fit / apply logic; subclasses only say how to find the weight vector."""

    kind: ClassVar[str] = ""
    #: [P(item 2), P(item 1)]: column order of predict_proba, sklearn-style.
    classes_: np.ndarray

    # -- subclass hook ------------------------------------------------------------------------
    def _fit_weights(self, diffs: Float[Tensor, "n d"], y: Int[Tensor, "n"]
                     ) -> tuple[Float[Tensor, "d"], float]:
        """Return ``(coef, intercept)`` with ``decision = diffs @ coef + intercept``."""
        raise NotImplementedError

    # -- fitting ------------------------------------------------------------------------------
    def fit(self, acts: Float[Tensor, "n 2 d"] | np.ndarray, labels: Any, *,
            layer: int | None = None, model_name: str | None = None) -> _PairProbe:
        """Fit on one layer's activations and labels 1 / 2 (no ties); returns ``self``.

        ``layer`` / ``model_name`` are stored as ``layer_`` / ``model_name_`` and checked
        whenever the caller passes them again when applying the probe.
        """
        x = _finite_acts(acts, "training")
        y = labels_to_targets(labels)
        if y.numel() != x.shape[0]:
            raise ProbeError(f"{x.shape[0]} activation pairs but {y.numel()} labels")
        check_classes(y)
        mu_pos, mu_neg = side_means(x)
        diffs = contrast_features(x, mu_pos, mu_neg)
        if bool(is_degenerate(diffs, x.abs().max())):
            raise ProbeError(
                "all contrast differences are zero after centring each side: the two prompts of "
                "every pair give the same activations up to a constant (e.g. an embedding layer "
                "at the answer token), so there is no direction to fit")
        coef, intercept = self._fit_weights(diffs, y)
        norm = float(coef.norm())
        if not np.isfinite(norm) or norm == 0.0:
            raise ProbeError(f"{type(self).__name__} found no direction (weight norm {norm}): "
                             f"the features do not separate the classes at all")
        self.mu_pos_ = mu_pos.numpy()
        self.mu_neg_ = mu_neg.numpy()
        self.coef_ = coef.numpy()
        self.scale_ = norm
        self.direction_ = (coef / norm).numpy()
        self.intercept_ = float(intercept)
        self.n_features_in_ = int(x.shape[-1])
        self.classes_ = np.array([2, 1])
        self.layer_ = layer
        self.model_name_ = model_name
        return self

    # -- applying -----------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "direction_"):
            raise ProbeError(f"this {type(self).__name__} is not fitted yet; call fit() first")

    def _check_meta(self, layer: int | None, model_name: str | None) -> None:
        if layer is not None and self.layer_ is not None and layer != self.layer_:
            raise ProbeError(f"probe was fitted on layer {self.layer_}, asked to apply it to "
                             f"layer {layer}")
        if (model_name is not None and self.model_name_ is not None
                and model_name != self.model_name_):
            raise ProbeError(f"probe was fitted on model {self.model_name_!r}, asked to apply "
                             f"it to activations of model {model_name!r}")

    def transform(self, acts: Float[Tensor, "n 2 d"] | np.ndarray, *, layer: int | None = None,
                  model_name: str | None = None) -> np.ndarray:
        """Contrast features ``[n, d]`` of ``acts``, centred by the *training* side means."""
        self._check_fitted()
        self._check_meta(layer, model_name)
        x = _finite_acts(acts, "input")
        if x.shape[-1] != self.n_features_in_:
            raise ProbeError(
                f"probe was fitted on activations with d_model={self.n_features_in_}, got "
                f"d_model={x.shape[-1]} (another model or layer type?)")
        return contrast_features(x, torch.from_numpy(self.mu_pos_),
                                 torch.from_numpy(self.mu_neg_)).numpy()

    def decision_function(self, acts: Float[Tensor, "n 2 d"] | np.ndarray, **meta: Any
                          ) -> np.ndarray:
        """Logit of P(item 1 preferred), ``[n]``."""
        return self.transform(acts, **meta) @ self.coef_ + self.intercept_

    def predict_proba(self, acts: Float[Tensor, "n 2 d"] | np.ndarray, **meta: Any
                      ) -> np.ndarray:
        """``[n, 2]``: column 0 = P(item 2 preferred), column 1 = P(item 1 preferred)."""
        p1 = expit(self.decision_function(acts, **meta))
        return np.stack([1.0 - p1, p1], axis=1)

    def predict(self, acts: Float[Tensor, "n 2 d"] | np.ndarray, **meta: Any) -> np.ndarray:
        """Predicted labels: 1 (item 1 preferred, P >= 0.5) or 2."""
        return np.where(self.decision_function(acts, **meta) >= 0, 1, 2)

    def score(self, acts: Float[Tensor, "n 2 d"] | np.ndarray, labels: Any, **meta: Any
              ) -> float:
        """Accuracy against labels 1 / 2 (ties refused: drop them first)."""
        y = labels_to_targets(labels).numpy()
        pred = self.decision_function(acts, **meta) >= 0
        if len(y) != len(pred):
            raise ProbeError(f"{len(pred)} activation pairs but {len(y)} labels")
        return float(np.mean(pred == (y == 1)))


class SupervisedProbe(_PairProbe):
    """L2 logistic regression on the centred differences (scikit-learn ``LogisticRegression``).

    Defaults follow the paper: no intercept (the centred differences are symmetric around 0)
    and balanced class weights. ``coef_`` is sklearn's weight vector; ``direction_`` is it
    normalised, ``scale_`` its norm. ``tol`` is sklearn's (default 1e-4, where lbfgs stops
    slightly short of the optimum: directions agree with the exact optimum to cosine ~0.996+,
    but a pair or two near the boundary can flip); ``tol=1e-8`` reproduces
    :func:`ppairs_lens.probes.sweep.fit_sweep`'s exact solution.
    """

    kind = "supervised"

    def __init__(self, C: float = 1.0, fit_intercept: bool = False,
                 class_weight: str | dict | None = "balanced", max_iter: int = 1000,
                 random_state: int | None = 0, tol: float = 1e-4):
        self.C = C
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.random_state = random_state

    def _fit_weights(self, diffs, y):
        lr = LogisticRegression(C=self.C, fit_intercept=self.fit_intercept,
                                class_weight=self.class_weight, max_iter=self.max_iter,
                                random_state=self.random_state, tol=self.tol)
        lr.fit(diffs.numpy(), y.numpy())
        self.n_iter_ = int(np.max(lr.n_iter_))
        intercept = float(lr.intercept_[0]) if self.fit_intercept else 0.0
        return torch.from_numpy(lr.coef_[0].astype(np.float64)), intercept


class _ScaledDirectionProbe(_PairProbe):
    """A direction from ``_direction`` plus a calibrated 1-D logistic scale."""

    def _direction(self, diffs, y) -> Float[Tensor, "d"]:
        raise NotImplementedError

    def _fit_weights(self, diffs, y):
        direction, proj = orient_to_targets(self._direction(diffs, y), diffs, y)
        scale = fit_logistic_scale(proj, y)
        if not torch.isfinite(scale):
            raise ProbeError(f"{type(self).__name__}: every training pair projects to the same "
                             f"value on the direction, so no probability scale can be fitted")
        if scale <= 0:
            raise ProbeError(f"{type(self).__name__}: the direction does not separate the "
                             f"classes (fitted scale {float(scale):.3g} <= 0)")
        return direction * scale, 0.0


class PCAProbe(_ScaledDirectionProbe):
    """Top principal component of the centred differences (unsupervised direction).

    The differences are not centred again before the decomposition: with the training side
    means they already have mean zero exactly, so the top right-singular vector *is* the first
    principal component. The component is only defined up to sign; the training labels pick
    the sign (projections correlate positively with "item 1 preferred"). So the probe's
    *direction* is label-free but its *accuracy* is not: without labels you would not know
    which end of the axis is "more". Probabilities are ``sigmoid(scale_ * projection)`` with
    ``scale_`` from a 1-D logistic regression on the training projections (calibrated); that
    fit is monotone, so it never changes which side a pair is put on.
    """

    kind = "pca"

    def __init__(self):
        pass

    def _direction(self, diffs, y):
        return top_principal_direction(diffs)


class MassMeanProbe(_ScaledDirectionProbe):
    """Difference of class means of the centred differences, normalised.

    ``direction = mean(diff | item 1 preferred) - mean(diff | item 2 preferred)``; the
    probability scale is fitted as for :class:`PCAProbe`.
    """

    kind = "mass_mean"

    def __init__(self):
        pass

    def _direction(self, diffs, y):
        pos = y.to(torch.bool)
        m = diffs[pos].mean(dim=0) - diffs[~pos].mean(dim=0)
        norm = m.norm()
        if norm <= DEGENERATE_RTOL * diffs.abs().max():
            raise ProbeError("MassMeanProbe: the class means of the contrast differences "
                             "coincide, so there is no mass-mean direction")
        return m / norm


_KINDS: dict[str, type[_PairProbe]] = {
    "supervised": SupervisedProbe, "pca": PCAProbe, "mass_mean": MassMeanProbe,
}


def make_probe(kind: str, **kw: Any) -> _PairProbe:
    """An unfitted probe of ``kind`` (one of :data:`PROBE_KINDS`) with parameters ``kw``."""
    try:
        cls = _KINDS[kind]
    except KeyError:
        raise ProbeError(f"unknown probe kind {kind!r}; choose one of {PROBE_KINDS}") from None
    try:
        return cls(**kw)
    except TypeError as e:
        raise ProbeError(f"bad parameters for a {kind!r} probe: {e}") from None
