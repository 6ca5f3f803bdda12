"""Fit every probe kind on every layer at once, batched in torch.

With ~30 layers, several kinds and a few seeds or splits, a Python loop over single-layer
estimators dominates an analysis. Here the layer axis is a batch axis, worked through in
chunks (:func:`layers_per_chunk`: never float64 copies of every layer at once), and every kind
uses the batched maths of its single-layer estimator, so ``SweepProbes.to_probe(kind, layer)``
is the estimator :mod:`ppairs_lens.probes.estimators` fits.

Layers whose contrast differences are all zero (an embedding layer at the answer token) cannot
be probed: they are marked in ``degenerate[kind]`` with a warning and give NaN, rather than
failing the whole sweep.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from einops import rearrange
from jaxtyping import Bool, Float, Int
from scipy.special import expit
from torch import Tensor

from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.estimators import (
    KINDS,
    PROBE_KINDS,
    DirectionBatch,
    ScaledDirectionProbe,
    check_classes,
    fit_logistic_scale,
    is_degenerate,
    make_probe,
    orient_to_targets,
)
from ppairs_lens.probes.features import as_acts, labels_to_targets
from ppairs_lens.probes.logistic import Solver, batched_logistic_regression, bmv
from ppairs_lens.probes.sign_confidence import N_SIGN_BOOT, sign_confidence

__all__ = ["CPU_CHUNK_BYTES", "SweepProbes", "chunk_diffs", "fit_sweep", "layers_per_chunk",
           "with_kinds_at"]


@dataclass
class SweepProbes:
    """Probes of every kind for every layer, as stacked parameters (CPU, float64).

    ``P(item 1 preferred) = sigmoid(scales[k][l] * <diff_l, directions[k][l]> +
    intercepts[k][l])``, ``diff_l`` centred by ``mu_pos[l]``, ``mu_neg[l]``. Axis 0 of every
    tensor is the layer axis; ``layers`` labels each position (default ``0..L-1``).
    ``standardize``: whether the supervised probes were fitted on standardised features.
    ``sign_confidence[kind]`` (direction kinds): per layer, the share of bootstrap resamples of
    the training pairs that pick the same sign; NaN on degenerate layers.
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
    standardize: bool = True
    sign_confidence: dict[str, Float[Tensor, "layer"]] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return int(self.mu_pos.shape[0])

    @property
    def d_model(self) -> int:
        return int(self.mu_pos.shape[1])

    def coef(self, kind: str) -> Float[Tensor, "layer d"]:
        """Weight vectors ``scale * direction`` of ``kind``."""
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
        step = layer_batch or layers_per_chunk(n, d, x_all.element_size(), cpu)
        for l0 in range(0, n_layers, step):
            sl = slice(l0, min(l0 + step, n_layers))
            diffs = chunk_diffs(x_all, sl, cpu, self.mu_pos[sl], self.mu_neg[sl])[0]
            for k in self.kinds:
                logit = bmv(diffs, self.coef(k)[sl]) + self.intercepts[k][sl, None]
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
        """The single-layer estimator of ``kind`` at position ``layer`` of the layer axis,
        filled in from the sweep (no refit); its ``layer_`` is ``self.layers[layer]``."""
        self._check_kind(kind)
        if not -self.n_layers <= layer < self.n_layers:
            raise ProbeError(f"layer index {layer} out of range for {self.n_layers} layers")
        if bool(self.degenerate[kind][layer]):
            raise ProbeError(f"the {kind!r} probe of layer {self.layers[layer]} is degenerate "
                             f"(no pair-specific signal there); it cannot be used")
        probe = (make_probe(kind, C=self.C, standardize=self.standardize)
                 if kind == "supervised" else make_probe(kind))
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
        if kind in self.sign_confidence:
            probe.sign_confidence_ = float(self.sign_confidence[kind][layer])
        return probe


def with_kinds_at(sweep: SweepProbes, part: SweepProbes, index: int) -> SweepProbes:
    """``sweep`` plus the kinds of ``part``, a one-read-out sweep of the same training pairs
    at ``index`` (e.g. CCS, too slow for every read-out); elsewhere they are NaN and marked
    ``degenerate``."""
    if part.n_layers != 1 or part.d_model != sweep.d_model or part.n_train != sweep.n_train:
        raise ProbeError(f"with_kinds_at takes a one-read-out sweep of the same {sweep.n_train} "
                         f"training pairs and d_model={sweep.d_model}, got {part.n_layers} "
                         f"read-outs, {part.n_train} pairs, d_model={part.d_model}")
    if not torch.allclose(part.mu_pos[0], sweep.mu_pos[index]):
        raise ProbeError(f"the added kinds were fitted on other activations than read-out "
                         f"{index} of the sweep (their side means differ)")
    new = [k for k in part.kinds if k not in sweep.kinds]
    n = sweep.n_layers

    def spread(t: Tensor, fill) -> Tensor:
        out = torch.full((n, *t.shape[1:]), fill, dtype=t.dtype)
        out[index] = t[0]
        return out

    conf = {k: spread(part.sign_confidence[k], float("nan")) for k in new
            if k in part.sign_confidence}
    return replace(
        sweep, kinds=(*sweep.kinds, *new),
        directions={**sweep.directions,
                    **{k: spread(part.directions[k], float("nan")) for k in new}},
        scales={**sweep.scales, **{k: spread(part.scales[k], float("nan")) for k in new}},
        intercepts={**sweep.intercepts, **{k: spread(part.intercepts[k], 0.0) for k in new}},
        degenerate={**sweep.degenerate, **{k: spread(part.degenerate[k], True) for k in new}},
        sign_confidence={**sweep.sign_confidence, **conf})


def _check_sweep_acts(acts: Any) -> Float[Tensor, "n 2 layer d"]:
    t = as_acts(acts)
    if t.ndim != 4:
        raise ProbeError(f"a sweep takes activations of all layers [n, 2, layer, d], got shape "
                         f"{tuple(t.shape)} (for one layer use acts[:, :, None])")
    return t


def chunk_diffs(x_all: Float[Tensor, "n 2 layer d"], sl: slice, dev: torch.device,
                mu_pos: Tensor | None = None, mu_neg: Tensor | None = None):
    """``(diffs [l, n, d], mu_pos, mu_neg, peak)`` of the layers ``sl`` in float64 on ``dev``:
    :func:`ppairs_lens.probes.features.contrast_features` as ``(x0 - x1) - (mu_pos - mu_neg)``,
    side means computed when not given, ``peak`` the largest absolute activation per layer."""
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
    if not bool(torch.isfinite(peak).all()):  # name the chunk's layer positions with NaN / inf
        bad = ~torch.isfinite(x_all[:, :, sl])
        layers = torch.nonzero(bad.any(dim=(0, 1, 3))).flatten() + sl.start
        raise ProbeError(f"activations contain {int(bad.sum())} non-finite value(s) (NaN/inf) "
                         f"in layer position(s) {layers.tolist()}")
    if mu_pos is None:  # from the float64 copies: a float64 sum over the strided float32
        mu_pos = diffs.sum(dim=1) / n   # views took as long as building the differences
        mu_neg = other.sum(dim=1) / n
    else:
        mu_pos, mu_neg = mu_pos.to(dev), mu_neg.to(dev)
    diffs.sub_(other).sub_((mu_pos - mu_neg).unsqueeze(1))
    return diffs, mu_pos, mu_neg, peak


#: On the CPU, the largest float64 buffer of a chunk stays below this: glibc maps large
#: allocations afresh, so each is page-faulted in again, most of the time of building the
#: differences. A SmolLM2 sweep (280 pairs, 31 layers): 52,000 faults per run at once, 16,000
#: at 16 MiB, none at 8 MiB and 4 MiB, and 20-25% faster.
CPU_CHUNK_BYTES = 8 << 20


def layers_per_chunk(n: int, d: int, itemsize: int, device: torch.device | None = None,
                budget: int = 1 << 30) -> int:
    """Layers per chunk: on the CPU, its largest float64 buffer below ``CPU_CHUNK_BYTES``;
    elsewhere (a GPU wants large batches), the whole float64 working set near ``budget``."""
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
    standardize: bool = True, groups: Sequence | None = None, n_sign_boot: int = N_SIGN_BOOT,
    seed: int = 0,
) -> SweepProbes:
    """Fit ``kinds`` probes on every layer of ``acts`` at once (labels 1 / 2, no ties).

    Works in float64 on ``device`` (default: where ``acts`` are), ``layer_batch`` layers at a
    time, so half-precision activations are never copied whole. ``C`` / ``solver`` / ``tol`` /
    ``max_iter`` / ``direct_max`` / ``standardize``: as for
    :class:`~ppairs_lens.probes.estimators.SupervisedProbe`; ``layers`` labels the layer axis
    (default ``range(L)``); ``groups``: the units of the sign-confidence bootstrap (pairs when
    None).
    """
    kinds = tuple(kinds)
    for k in kinds:
        if k not in KINDS:
            raise ProbeError(f"unknown probe kind {k!r}; choose from {tuple(KINDS)}")
        if k != "supervised" and not issubclass(KINDS[k], ScaledDirectionProbe):
            raise ProbeError(f"probe kind {k!r} learns its own weights (no batched directions):"
                             " fit it one layer at a time with make_probe")
    if not kinds:
        raise ProbeError("no probe kinds requested")
    x_all = _check_sweep_acts(acts)
    n, _, n_layers, d = x_all.shape
    y_int = labels_to_targets(labels)
    if y_int.numel() != n:
        raise ProbeError(f"{n} activation pairs but {y_int.numel()} labels")
    check_classes(y_int)
    if groups is not None and len(groups) != n:
        raise ProbeError(f"{len(groups)} groups for {n} activation pairs")
    layers = tuple(range(n_layers)) if layers is None else tuple(int(v) for v in layers)
    if len(layers) != n_layers:
        raise ProbeError(f"{len(layers)} layer labels for {n_layers} layers of activations")
    dev = torch.device(device) if device is not None else x_all.device
    y = y_int.to(dev, torch.float64)

    mu_pos = torch.empty(n_layers, d, dtype=torch.float64)
    mu_neg = torch.empty_like(mu_pos)
    directions = {k: torch.full((n_layers, d), float("nan"), dtype=torch.float64) for k in kinds}
    scales = {k: torch.full((n_layers,), float("nan"), dtype=torch.float64) for k in kinds}
    flat = torch.zeros(n_layers, dtype=torch.bool)
    n_iter = torch.zeros(n_layers, dtype=torch.long)
    converged = torch.ones(n_layers, dtype=torch.bool)

    projections = {k: torch.empty(n_layers, n, dtype=torch.float64, device=dev) for k in kinds
                   if k != "supervised"}  # training projections on each direction
    step = layer_batch or layers_per_chunk(n, d, x_all.element_size(), dev)
    for l0 in range(0, n_layers, step):
        sl = slice(l0, min(l0 + step, n_layers))
        diffs, mp, mn, peak = chunk_diffs(x_all, sl, dev)
        mu_pos[sl], mu_neg[sl] = mp.cpu(), mn.cpu()
        flat[sl] = is_degenerate(diffs, peak).cpu()
        # n < d: the n x n Gram matrix serves the dual Newton solver and PCA: form it once.
        shared = diffs @ diffs.mT if (n < d and n <= direct_max and solver != "newton-cg"
                                      and {"supervised", "pca"} <= set(kinds)) else None
        for k in kinds:
            if k == "supervised":
                w, it, conv = batched_logistic_regression(
                    diffs, y, C, solver=solver, tol=tol, max_iter=max_iter,
                    direct_max=direct_max, kernel=shared, standardize=standardize)
                norm = w.norm(dim=-1)
                directions[k][sl] = (w / norm[:, None]).cpu()
                scales[k][sl] = norm.cpu()
                n_iter[sl], converged[sl] = it, conv
            else:
                cls = KINDS[k]
                sides = None
                if cls.reads_sides:  # the centred sides, layers first: [l, n, d]
                    xs = x_all[:, :, sl].to(dev, torch.float64)
                    sides = ((xs[:, 0] - mp).transpose(0, 1), (xs[:, 1] - mn).transpose(0, 1))
                v, _ = cls.directions(DirectionBatch(diffs, y_int.to(dev), shared, sides, seed))
                v, proj = orient_to_targets(v, diffs, y)
                directions[k][sl] = v.cpu()
                projections[k][sl] = proj
        del diffs, shared
    # The 1-D scale fits (bisection: many tiny steps) run once for all chunks and kinds.
    sign_conf = {}
    if projections:
        stacked = torch.stack(list(projections.values()))
        fitted = fit_logistic_scale(stacked, y).cpu()
        scales.update(zip(projections, fitted))
        confs = sign_confidence(stacked, y, groups, n_boot=n_sign_boot, seed=seed).cpu()
        sign_conf = dict(zip(projections, confs))

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
        if k in sign_conf:
            sign_conf[k][bad] = float("nan")
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
                       converged=converged if "supervised" in kinds else None,
                       standardize=bool(standardize), sign_confidence=sign_conf)
