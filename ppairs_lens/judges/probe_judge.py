"""Training one probe to judge items: harvest comparisons, choose the read-out, fit.

Ranking and insertion scoring pit a trained probe against the model's own prompted
judgement. :func:`train_probe` harvests a training set of comparisons at every read-out,
picks the read-out on a validation split of the training data (:func:`choose_layer`; never
on the pairs a run evaluates) unless one is given, and fits the probe there;
:class:`ProbeJudgeConfig` holds the settings every such run shares.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.harvest import HarvestSettings, harvest_pairs
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.splits import resolve_split_by
from ppairs_lens.evaluation.store_split import validation_split
from ppairs_lens.models.hook_points import READOUT_PRESET, hook_points
from ppairs_lens.models.loading import model_name
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["LayerChoice", "ProbeJudgeConfig", "TrainedProbe", "choose_layer", "train_probe"]


@dataclass(kw_only=True)
class ProbeJudgeConfig:
    """Settings shared by runs that judge with a trained probe and with the prompted model."""

    model: str | None = None
    probe_kind: str = "supervised"
    layer: int | None = None  # read-out index; None: chosen on held-out training data
    calibrate_probe: bool = False
    calibrate_zero_shot: bool = True
    n_boot: int = 1000
    seed: int = 0
    token_budget: int | None = None  # None: by device (harvest.default_token_budget)
    verbose: bool = False  # print progress

    def harvest_settings(self) -> HarvestSettings:
        return HarvestSettings(token_budget=self.token_budget)

    def say(self, msg: str) -> None:
        """Print a timestamped progress line when ``verbose``."""
        if self.verbose:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


@dataclass(frozen=True)
class LayerChoice:
    """The read-out chosen on a validation split of the training pairs, and how."""

    layer: int
    val_scores: list[float]  # validation accuracy per read-out (empty: no split was possible)
    split: str  # how the training pairs were split: "group", "item", "pair" or "none"
    n_fit: int
    n_val: int

    def describe(self) -> str:
        if self.split == "none":
            return "fallback read-out at 2/3 depth (training pairs could not be split)"
        return (f"validation split of the training pairs by {self.split} "
                f"({self.n_fit} fit / {self.n_val} validation pairs)")


@dataclass
class TrainedProbe:
    """A fitted probe, its read-out and what training it cost."""

    probe: Any
    layer: int
    hook: str
    n_pairs: int
    n_rows: int
    seconds: float
    layer_scores: list[float] = field(default_factory=list)  # validation accuracy per read-out
    train_accuracy: float = math.nan
    layer_selection: str = "given"  # how the read-out was chosen

    def run_info(self) -> dict[str, Any]:
        """What a run's saved config records about the probe."""
        return {"layer": self.layer, "hook": self.hook, "n_train_pairs": self.n_pairs,
                "train_seconds": self.seconds, "train_accuracy": self.train_accuracy,
                "layer_scores": self.layer_scores, "layer_selection": self.layer_selection}

    def cost_columns(self) -> dict[str, Any]:
        """The training cost, as columns of a result row."""
        return {"layer": self.layer, "layer_selection": self.layer_selection,
                "train_pairs": self.n_pairs, "train_rows": self.n_rows,
                "train_seconds": round(self.seconds, 2)}


def _validation_split(groups: Sequence[Hashable] | None, item_pairs: Sequence[tuple[str, str]],
                      val_size: float, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Fit / validation indices of the training pairs, leak-free where the data allows
    (:func:`~ppairs_lens.evaluation.store_split.validation_split`): whole groups when some
    group holds several pairs, else disjoint items (cross pairs dropped), else pairs; an item
    split that leaves a side empty falls back to pairs (and says so)."""
    n = len(item_pairs)
    items = item_pairs if all(a is not None and b is not None for a, b in item_pairs) else None
    if groups is not None and len(set(groups)) < 2:
        groups = None  # one group cannot be split: fall back to items
    ids = list(groups) if groups is not None else [str(i) for i in range(n)]
    by = resolve_split_by(groups, items)
    try:
        fit, val = validation_split(ids, items, val_size=val_size, seed=seed, by=by)
    except ProbeError:
        if by != "item":
            raise
        fit, val = validation_split(ids, items, val_size=val_size, seed=seed, by="pair")
        return fit, val, "pair (too few items for an item split)"
    return fit, val, "group" if by == "context" else by


def choose_layer(acts: Float[Tensor, "n 2 layer d_model"], labels: np.ndarray,
                 groups: Sequence[Hashable] | None, item_pairs: Sequence[tuple[str, str]],
                 kind: str, seed: int, val_size: float = 0.3) -> LayerChoice:
    """The read-out whose ``kind`` probe, fitted on part of the training pairs, is most
    accurate on the rest (a validation split: nothing outside ``acts`` is read). Equal
    accuracies (common with few validation pairs) go to the read-out whose neighbours score
    better, then to the one nearest two thirds of the depth (also the fallback when no split
    is possible).

    ``groups[i]`` is pair ``i``'s leak group (``group_id``, else context): validation pairs
    come from whole groups where a group holds several pairs, else from disjoint items."""
    n_layers = acts.shape[2]
    fallback = (2 * (n_layers - 1)) // 3
    try:
        fit, val, how = _validation_split(groups, item_pairs, val_size, seed)
        sw = fit_sweep(acts[fit], labels[fit], kinds=(kind,))
        acc = sw.score(acts[val], labels[val])[kind]
    except ProbeError:
        return LayerChoice(fallback, [], "none", 0, 0)
    scores = [float(a) for a in acc]
    if not np.isfinite(acc).any():
        return LayerChoice(fallback, scores, how, len(fit), len(val))
    a = np.nan_to_num(np.asarray(acc, dtype=float), nan=-1.0)
    smooth = np.array([a[max(0, i - 1):i + 2].mean() for i in range(n_layers)])
    best = max(range(n_layers), key=lambda i: (a[i], smooth[i], -abs(i - fallback)))
    return LayerChoice(best, scores, how, len(fit), len(val))


def train_probe(bridge, train: Dataset, *, kind: str, layer: int | None, seed: int,
                settings: HarvestSettings, groups: Sequence[Hashable] | None = None
                ) -> TrainedProbe:
    """Harvest ``train``'s comparisons (all read-outs), pick the layer on a validation split
    of them (unless ``layer`` is given), fit the probe on all of them. ``groups``: each
    record's leak group (default: ``train.group_ids()``)."""
    t0 = time.perf_counter()
    pairs = build_contrast_pairs(bridge.tokenizer, train)
    acts = harvest_pairs(bridge, pairs, settings)
    labels = np.array(train.labels())
    groups = train.group_ids() if groups is None else groups
    if len(groups) != len(train.records):
        raise ProbeError(f"{len(groups)} groups for {len(train.records)} training records")
    items = [(r.item1_id, r.item2_id) for r in train.records]
    scores: list[float] = []
    how = "given"
    if layer is None:
        choice = choose_layer(acts, labels, groups, items, kind, seed)
        layer, scores, how = choice.layer, choice.val_scores, choice.describe()
    n_read = acts.shape[2]
    layer = layer % n_read
    # The sweep's solver (exact optimum, robust to tiny activation scales) on that read-out.
    sw = fit_sweep(acts[:, :, layer:layer + 1], labels, kinds=(kind,), layers=(layer,),
                   model_name=model_name(bridge))
    probe = sw.to_probe(kind, 0)
    acc = probe.score(acts[:, :, layer], labels)
    return TrainedProbe(probe, layer, hook_points(READOUT_PRESET, bridge.cfg.n_layers)[layer],
                        len(pairs), len(pairs), time.perf_counter() - t0, scores, acc, how)
