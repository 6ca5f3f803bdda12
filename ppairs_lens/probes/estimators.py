"""Linear probes on contrast pairs, as scikit-learn-style estimators.

A probe sees one layer's activations ``[n, 2, d]`` (side 0: the prompt ending "... is Choice
1", side 1: "... is Choice 2"), works on the differences centred by the *training* side means
(:mod:`ppairs_lens.probes.features`), and is a direction plus a scale:

    P(item 1 preferred) = sigmoid(scale_ * <diff, direction_> + intercept_)

with ``coef_ = scale_ * direction_``. :class:`SupervisedProbe` is the paper's L2 logistic
regression (no intercept, balanced class weights). :class:`PCAProbe` and :class:`CCSProbe` find
a direction without the labels, which only pick its sign (:func:`orient_to_targets`, with a
``sign_confidence_``); :class:`MassMeanProbe`'s direction is the difference of the class means,
so it uses them. All three get a calibrated 1-D logistic scale (:func:`fit_logistic_scale`).

sklearn conventions: ``fit`` returns ``self``, fitted attributes end in ``_``, ``classes_ =
[2, 1]`` (column 1 of ``predict_proba`` is P(item 1 preferred)). Every direction comes from
batched functions (leading axis = layers) that :mod:`ppairs_lens.probes.sweep` calls on all
layers at once: a probe fitted alone equals the sweep's at that layer.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from jaxtyping import Float, Int
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from torch import Tensor

from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.features import (
    as_acts,
    contrast_features,
    labels_to_targets,
    side_means,
)
from ppairs_lens.probes.logistic import Solver, batched_logistic_regression, bmv_t
from ppairs_lens.probes.principal import top_principal_direction
from ppairs_lens.probes.sign_confidence import N_SIGN_BOOT, sign_confidence

__all__ = ["PROBE_KINDS", "ALL_PROBE_KINDS", "KINDS", "MIN_PER_CLASS", "DirectionBatch",
           "PairProbe", "ScaledDirectionProbe", "SupervisedProbe", "PCAProbe", "MassMeanProbe",
           "CCSProbe", "make_probe", "register", "is_degenerate", "class_mean_difference",
           "ccs_loss", "fit_ccs_directions", "check_classes", "fit_logistic_scale",
           "orient_to_targets"]

#: Fewer training pairs than this in either class and a probe refuses to fit.
MIN_PER_CLASS: int = 2
#: Contrast differences smaller than this, relative to the activations' magnitude, are zero.
DEGENERATE_RTOL: float = 1e-9


# -- batched maths shared with the sweep (leading axes = layers) -------------------------------

def is_degenerate(diffs: Float[Tensor, "*b n d"], acts_scale: Float[Tensor, "*b"] | float
                  ) -> Tensor:
    """True where every contrast difference is below ``DEGENERATE_RTOL`` times ``acts_scale``
    (the layer's largest absolute activation): nothing to probe."""
    peak = torch.maximum(diffs.amax(dim=(-2, -1)), -diffs.amin(dim=(-2, -1)))
    scale = torch.as_tensor(acts_scale, dtype=peak.dtype, device=peak.device)
    return peak <= DEGENERATE_RTOL * scale


def class_mean_difference(diffs: Float[Tensor, "l n d"], y: Int[Tensor, "n"]
                          ) -> Float[Tensor, "l d"]:
    """``mean(diff | item 1) - mean(diff | item 2)`` per layer (not normalised), as one product
    with weights ``1 / n1`` and ``-1 / n0``. The weights are float32 reciprocals: on training
    differences, which sum to zero, their rounding only rescales the (normalised) result."""
    pos = y.to(diffs.device).bool()
    weights = torch.where(pos, 1 / pos.sum(), -1 / (~pos).sum()).to(diffs.dtype)
    return bmv_t(diffs, weights.expand(diffs.shape[0], -1))


def orient_to_targets(direction: Float[Tensor, "*b d"], diffs: Float[Tensor, "*b n d"],
                      y: Float[Tensor, "n"]) -> tuple[Float[Tensor, "*b d"], Float[Tensor, "*b n"]]:
    """``(direction, projections)``, flipped so the projections correlate positively with
    ``y`` (1 = item 1)."""
    proj = (diffs @ direction.unsqueeze(-1)).squeeze(-1)
    y = y.to(proj)
    sign = torch.sign((proj * (y - y.mean())).sum(dim=-1))
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    return direction * sign.unsqueeze(-1), proj * sign.unsqueeze(-1)


def fit_logistic_scale(proj: Float[Tensor, "*b n"], y: Float[Tensor, "n"], *, lam: float = 1.0,
                       n_iter: int = 90) -> Float[Tensor, "*b"]:
    """Scale ``s`` of a 1-D logistic regression ``P(y=1) = sigmoid(s * proj)``, batched.

    No intercept (swapping the two items negates a difference, so a zero projection should
    mean 0.5) and no class weights (plain maximum likelihood: calibrated). On standardised
    projections a weak ridge ``lam / 2 * s_std**2`` keeps ``s`` finite on separable data. The
    problem is convex: bisection on its derivative is robust and identical for one layer or
    all. NaN where the projections are constant.
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


def ccs_loss(p0: Tensor, p1: Tensor) -> Tensor:
    """CCS loss over the last axis: ``mean[(p0 - (1 - p1))^2] + mean[min(p0, p1)^2]``."""
    return ((p0 - (1 - p1)) ** 2).mean(-1) + (torch.minimum(p0, p1) ** 2).mean(-1)


def fit_ccs_directions(x0: Float[Tensor, "l n d"], x1: Float[Tensor, "l n d"], *,
                       n_tries: int = 5, n_epochs: int = 400, lr: float = 1e-2,
                       weight_decay: float = 0.0, seed: int = 0
                       ) -> tuple[Float[Tensor, "l d"], Float[Tensor, "l"]]:
    """``(w [l, d], loss [l])``: the best of ``n_tries`` CCS probes per layer on the centred
    sides (``w`` not normalised, raw basis, float64)."""
    with torch.inference_mode(False), torch.enable_grad():
        x0 = x0.detach().clone().double()
        x1 = x1.detach().clone().double()
        l, _, d = x0.shape
        rms = torch.cat([x0, x1], 1).pow(2).mean(dim=(1, 2)).sqrt().clamp_min(1e-30)
        z0, z1 = x0 / rms[:, None, None], x1 / rms[:, None, None]
        g = torch.Generator().manual_seed(int(seed))
        w0 = torch.randn(n_tries, d, generator=g, dtype=torch.float64) / d ** 0.5
        w = w0.to(x0.device).expand(l, -1, -1).clone().requires_grad_(True)
        b = torch.zeros(l, n_tries, dtype=torch.float64, device=x0.device, requires_grad=True)
        opt = torch.optim.Adam([w, b], lr=lr, weight_decay=weight_decay)

        def losses() -> Tensor:
            p0 = torch.sigmoid(z0 @ w.mT + b[:, None, :]).mT  # [l, tries, n]
            p1 = torch.sigmoid(z1 @ w.mT + b[:, None, :]).mT
            return ccs_loss(p0, p1)

        for _ in range(n_epochs):
            opt.zero_grad()
            losses().sum().backward()
            opt.step()
        with torch.no_grad():
            final = losses()
            best = final.argmin(dim=1)
            rows = torch.arange(l, device=x0.device)
            return (w[rows, best] / rms[:, None]).detach(), final[rows, best].detach()


# -- input checks ------------------------------------------------------------------------------

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


# -- estimators --------------------------------------------------------------------------------

@dataclass(frozen=True)
class DirectionBatch:
    """What :meth:`ScaledDirectionProbe.directions` reads for ``l`` layers (one for a probe
    fitted alone); ``y``: 1 = item 1 preferred, else 0; ``gram``: formed once for several kinds;
    ``sides``: for kinds that read the centred sides (CCS)."""

    diffs: Float[Tensor, "l n d"]
    y: Int[Tensor, "n"]
    gram: Float[Tensor, "l n n"] | None = None
    sides: tuple[Float[Tensor, "l n d"], Float[Tensor, "l n d"]] | None = None
    seed: int = 0


class PairProbe(BaseEstimator):
    """Shared fit / apply logic; subclasses only say how to find the weight vector. A kind is
    a subclass registered with :func:`register`: its ``kind`` name, ``label`` / ``colour``
    (tables, legends), ``in_default_sweep``; a direction kind also its batched
    :meth:`~ScaledDirectionProbe.directions` (all layers in the sweep, one fitted alone)."""

    kind: ClassVar[str] = ""
    label: ClassVar[str] = ""
    colour: ClassVar[str] = "#393b79"
    in_default_sweep: ClassVar[bool] = True
    reads_sides: ClassVar[bool] = False
    #: [P(item 2), P(item 1)]: column order of predict_proba, sklearn-style.
    classes_: np.ndarray

    # -- subclass hook ------------------------------------------------------------------------
    def _fit_weights(self, diffs: Float[Tensor, "n d"], y: Int[Tensor, "n"],
                     groups: Any = None) -> tuple[Float[Tensor, "d"], float]:
        """Return ``(coef, intercept)`` with ``decision = diffs @ coef + intercept``."""
        raise NotImplementedError

    # -- fitting ------------------------------------------------------------------------------
    def fit(self, acts: Float[Tensor, "n 2 d"] | np.ndarray, labels: Any, *,
            layer: int | None = None, model_name: str | None = None,
            groups: Any = None) -> PairProbe:
        """Fit on one layer's activations and labels 1 / 2 (no ties).

        ``layer`` / ``model_name`` are kept and checked whenever they are passed when applying
        the probe. ``groups`` (one per pair) are the units the sign confidence resamples; pairs
        when None.
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
        coef, intercept = self._fit_weights(diffs, y, groups)
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
    def transform(self, acts: Float[Tensor, "n 2 d"] | np.ndarray, *, layer: int | None = None,
                  model_name: str | None = None) -> np.ndarray:
        """Contrast features ``[n, d]`` of ``acts``, centred by the *training* side means."""
        if not hasattr(self, "direction_"):
            raise ProbeError(f"this {type(self).__name__} is not fitted yet; call fit() first")
        if layer is not None and self.layer_ is not None and layer != self.layer_:
            raise ProbeError(f"probe was fitted on layer {self.layer_}, asked to apply it to "
                             f"layer {layer}")
        if (model_name is not None and self.model_name_ is not None
                and model_name != self.model_name_):
            raise ProbeError(f"probe was fitted on model {self.model_name_!r}, asked to apply "
                             f"it to activations of model {model_name!r}")
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


#: Every probe kind, by name, in the order tables and figures list them (:func:`register`).
KINDS: dict[str, type[PairProbe]] = {}


def register(cls: type[PairProbe]) -> type[PairProbe]:
    """Add a probe kind (a :class:`PairProbe` subclass with a ``kind`` name) to :data:`KINDS`;
    a name taken twice is refused."""
    if not cls.kind or cls.kind in KINDS:
        raise ProbeError(f"probe kind {cls.kind!r} is empty or registered twice")
    KINDS[cls.kind] = cls
    return cls


@register
class SupervisedProbe(PairProbe):
    """L2 logistic regression on the centred differences.

    scikit-learn's ``LogisticRegression(C, fit_intercept=False, class_weight)`` objective,
    solved to ``tol`` (relative gradient norm) by the sweep's solver
    (:func:`ppairs_lens.probes.logistic.batched_logistic_regression`), so it equals the sweep's
    probe and scikit-learn run to convergence. Paper defaults: no intercept (the differences
    are symmetric around 0; an intercept is not supported) and balanced class weights.
    ``n_iter_``: the Newton steps taken; ``solver`` / ``direct_max``: how each step is solved.
    ``standardize``: fit on the features divided by their training root mean square, so ``C``
    means the same at every layer (``coef_`` is for the raw features either way); False is
    scikit-learn's raw estimator.
    """

    kind = "supervised"
    label = "supervised (logistic)"
    colour = "#1f77b4"

    def __init__(self, C: float = 1.0, fit_intercept: bool = False,
                 class_weight: str | None = "balanced", solver: Solver = "auto",
                 tol: float = 1e-9, max_iter: int = 100, direct_max: int = 2048,
                 standardize: bool = True):
        self.C = C
        self.standardize = standardize
        self.fit_intercept = fit_intercept
        self.class_weight = class_weight
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.direct_max = direct_max

    def _fit_weights(self, diffs, y, groups=None):
        if self.fit_intercept:
            raise ProbeError("SupervisedProbe fits no intercept (fit_intercept=True is not "
                             "supported): the centred differences are symmetric around zero, "
                             "and swapping a pair's items must flip its prediction")
        w, n_iter, converged = batched_logistic_regression(
            diffs[None], y, self.C, class_weight=self.class_weight, solver=self.solver,
            tol=self.tol, max_iter=self.max_iter, direct_max=self.direct_max,
            standardize=self.standardize)
        self.n_iter_ = int(n_iter[0])
        if not bool(converged[0]):
            warnings.warn(f"SupervisedProbe did not converge in {self.max_iter} Newton steps "
                          f"(tol {self.tol})", ConvergenceWarning, stacklevel=3)
        return w[0], 0.0


class ScaledDirectionProbe(PairProbe):
    """A direction from ``_direction`` plus a calibrated 1-D logistic scale; ``sign_confidence_``
    as in :mod:`ppairs_lens.probes.sign_confidence` (``n_sign_boot`` resamples, ``seed``)."""

    def __init__(self, n_sign_boot: int = N_SIGN_BOOT, seed: int = 0):
        self.n_sign_boot = n_sign_boot
        self.seed = seed

    @classmethod
    def directions(cls, batch: DirectionBatch, **params: Any
                   ) -> tuple[Float[Tensor, "l d"], dict[str, Tensor]]:
        """The kind's unit direction at every layer of ``batch`` (any sign) and per-layer
        extras a fitted probe keeps as ``<name>_``; ``params``: the constructor's."""
        raise NotImplementedError

    def _direction(self, diffs, y) -> Float[Tensor, "d"]:
        params = {k: v for k, v in self.get_params().items()
                  if k not in ("n_sign_boot", "seed")}
        sides = None
        if self.reads_sides:
            x = self._sides
            mu_pos, mu_neg = side_means(x)
            sides = ((x[:, 0] - mu_pos)[None], (x[:, 1] - mu_neg)[None])
        v, extras = self.directions(DirectionBatch(diffs[None], y, sides=sides, seed=self.seed),
                                    **params)
        for name, value in extras.items():
            setattr(self, f"{name}_", float(value[0]))
        return v[0]

    def fit(self, acts, labels, **kw) -> ScaledDirectionProbe:
        if not self.reads_sides:
            return super().fit(acts, labels, **kw)
        self._sides = as_acts(acts, dtype=torch.float64).cpu()  # dropped after the fit
        try:
            return super().fit(acts, labels, **kw)
        finally:
            del self._sides

    def _fit_weights(self, diffs, y, groups=None):
        direction, proj = orient_to_targets(self._direction(diffs, y), diffs, y)
        self.sign_confidence_ = float(sign_confidence(proj, y, groups, n_boot=self.n_sign_boot,
                                                      seed=self.seed))
        scale = fit_logistic_scale(proj, y)
        if not torch.isfinite(scale):
            raise ProbeError(f"{type(self).__name__}: every training pair projects to the same "
                             f"value on the direction, so no probability scale can be fitted")
        if scale <= 0:
            raise ProbeError(f"{type(self).__name__}: the direction does not separate the "
                             f"classes (fitted scale {float(scale):.3g} <= 0)")
        return direction * scale, 0.0


@register
class PCAProbe(ScaledDirectionProbe):
    """Top principal component of the centred differences (not centred again: their mean is
    zero exactly). The *direction* is label-free, its *accuracy* is not: the labels pick the
    sign, i.e. which end of the axis is "more". The monotone scale fit never moves a pair
    across 0.5."""

    kind = "pca"
    label = "unsupervised (PCA)"
    colour = "#d62728"

    @classmethod
    def directions(cls, batch, **params):
        return top_principal_direction(batch.diffs, gram=batch.gram), {}


@register
class MassMeanProbe(ScaledDirectionProbe):
    """Difference of the class means of the centred differences, normalised (it uses the
    labels); the probability scale is fitted as for :class:`PCAProbe`."""

    kind = "mass_mean"
    label = "mass-mean"
    colour = "#2ca02c"

    @classmethod
    def directions(cls, batch, **params):
        v = class_mean_difference(batch.diffs, batch.y)
        return v / v.norm(dim=-1, keepdim=True), {}

    def _direction(self, diffs, y):
        m = class_mean_difference(diffs[None], y)[0]
        if m.norm() <= DEGENERATE_RTOL * diffs.abs().max():
            raise ProbeError("MassMeanProbe: the class means of the contrast differences "
                             "coincide, so there is no mass-mean direction")
        return super()._direction(diffs, y)


@register
class CCSProbe(ScaledDirectionProbe):
    """Contrast-consistent search (CCS; Burns et al. 2023): a label-free direction from the
    centred sides; the labels only pick its sign and scale.

    ``p(x) = sigmoid(<x, w> + b)`` is trained for complementary sides, ``p(x0) ~ 1 - p(x1)``,
    without the degenerate ``p = 0.5`` (:func:`ccs_loss`, kept as ``ccs_loss_``). Features are
    divided by their root mean square so one learning rate fits every layer; the lowest loss
    of ``n_tries`` seeded full-batch Adam runs of ``n_epochs`` steps is kept. Gradient
    descent, so not in the default sweep (``fit_sweep`` takes it by name)."""

    kind = "ccs"
    label = "CCS (label-free)"
    colour = "#ff7f0e"
    in_default_sweep = False
    reads_sides = True

    def __init__(self, n_tries: int = 5, n_epochs: int = 400, lr: float = 1e-2,
                 weight_decay: float = 0.0, n_sign_boot: int = N_SIGN_BOOT, seed: int = 0):
        super().__init__(n_sign_boot=n_sign_boot, seed=seed)
        self.n_tries, self.n_epochs, self.lr = n_tries, n_epochs, lr
        self.weight_decay = weight_decay

    @classmethod
    def directions(cls, batch, n_tries: int = 5, n_epochs: int = 400, lr: float = 1e-2,
                   weight_decay: float = 0.0):
        w, loss = fit_ccs_directions(*batch.sides, n_tries=n_tries, n_epochs=n_epochs, lr=lr,
                                     weight_decay=weight_decay, seed=batch.seed)
        return w / w.norm(dim=-1, keepdim=True), {"ccs_loss": loss}


#: Probe kinds the sweep fits by default, and every built-in kind (a kind registered later
#: is fitted when named).
PROBE_KINDS: tuple[str, ...] = tuple(k for k, c in KINDS.items() if c.in_default_sweep)
ALL_PROBE_KINDS: tuple[str, ...] = tuple(KINDS)


def make_probe(kind: str, **kw: Any) -> PairProbe:
    """An unfitted probe of ``kind`` with parameters ``kw``."""
    if kind not in KINDS:
        raise ProbeError(f"unknown probe kind {kind!r}; choose one of {ALL_PROBE_KINDS}")
    try:
        return KINDS[kind](**kw)
    except TypeError as e:
        raise ProbeError(f"bad parameters for a {kind!r} probe: {e}") from None
