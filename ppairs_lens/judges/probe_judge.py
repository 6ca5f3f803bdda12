"""Training one probe to judge items: harvest comparisons, choose the read-out, fit.

Ranking and insertion scoring pit a trained probe against the model's own prompted
judgement. :func:`train_probe` harvests a training set of comparisons at every read-out,
picks the read-out on held-out training data (:func:`choose_layer`) unless one is given, and
fits the probe there; :class:`ProbeJudgeConfig` holds the settings every such run shares.
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
from ppairs_lens.evaluation.splits import train_test_split_pairs
from ppairs_lens.models.hook_points import READOUT_PRESET, hook_points
from ppairs_lens.models.loading import model_name
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["ProbeJudgeConfig", "TrainedProbe", "choose_layer", "train_probe"]


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


@dataclass
class TrainedProbe:
    """A fitted probe, its read-out and what training it cost."""

    probe: Any
    layer: int
    hook: str
    n_pairs: int
    n_rows: int
    seconds: float
    layer_scores: list[float] = field(default_factory=list)  # held-out accuracy per read-out
    train_accuracy: float = math.nan

    def run_info(self) -> dict[str, Any]:
        """What a run's saved config records about the probe."""
        return dict(layer=self.layer, hook=self.hook, n_train_pairs=self.n_pairs,
                    train_seconds=self.seconds, train_accuracy=self.train_accuracy,
                    layer_scores=self.layer_scores)

    def cost_columns(self) -> dict[str, Any]:
        """The training cost, as columns of a result row."""
        return dict(layer=self.layer, train_pairs=self.n_pairs, train_rows=self.n_rows,
                    train_seconds=round(self.seconds, 2))


def choose_layer(acts: Float[Tensor, "n 2 layer d_model"], labels: np.ndarray,
                 contexts: Sequence[Hashable] | None, item_pairs: Sequence[tuple[str, str]],
                 kind: str, seed: int) -> tuple[int, list[float]]:
    """The read-out whose ``kind`` probe is most accurate on held-out training data, by
    accuracy averaged with the adjacent read-outs; ties go to the read-out nearest two thirds
    of the depth (also the fallback when no split is possible).

    Held out: whole contexts where there are several; without contexts, random pairs (a
    split by item keeps only the pairs among held-out items, about 9% of a sparse sample of
    pairs, too few to rank layers; items recurring across the split matter little for
    choosing a layer)."""
    n_layers = acts.shape[2]
    fallback = (2 * (n_layers - 1)) // 3
    try:
        if contexts is not None and len(set(contexts)) > 1:
            tr, te = train_test_split_pairs(contexts, test_size=0.3, seed=seed, by="context")
        else:
            tr, te = train_test_split_pairs(None, item_pairs, test_size=0.3, seed=seed,
                                            by="pair")
        sw = fit_sweep(acts[tr], labels[tr], kinds=(kind,))
        acc = sw.score(acts[te], labels[te])[kind]
    except ProbeError:
        return fallback, []
    scores = [float(a) for a in acc]
    if not np.isfinite(acc).any():
        return fallback, scores
    # Few held-out pairs make single-layer accuracies noisy: smooth over neighbours first.
    a = np.nan_to_num(np.asarray(acc, dtype=float), nan=0.0)
    smooth = np.array([a[max(0, i - 1):i + 2].mean() for i in range(n_layers)])
    best = max(range(n_layers), key=lambda i: (smooth[i], -abs(i - fallback)))
    return best, scores


def train_probe(bridge, train: Dataset, *, kind: str, layer: int | None, seed: int,
                settings: HarvestSettings) -> TrainedProbe:
    """Harvest ``train``'s comparisons (all read-outs), pick the layer, fit the probe."""
    t0 = time.perf_counter()
    pairs = build_contrast_pairs(bridge.tokenizer, train)
    acts = harvest_pairs(bridge, pairs, settings)
    labels = np.array(train.labels())
    contexts = [r.context_id for r in train.records]
    items = [(r.item1_id, r.item2_id) for r in train.records]
    scores: list[float] = []
    if layer is None:
        layer, scores = choose_layer(acts, labels, contexts, items, kind, seed)
    n_read = acts.shape[2]
    layer = layer % n_read
    # The sweep's solver (exact optimum, robust to tiny activation scales) on that read-out.
    sw = fit_sweep(acts[:, :, layer:layer + 1], labels, kinds=(kind,), layers=(layer,),
                   model_name=model_name(bridge))
    probe = sw.to_probe(kind, 0)
    acc = probe.score(acts[:, :, layer], labels)
    return TrainedProbe(probe, layer, hook_points(READOUT_PRESET, bridge.cfg.n_layers)[layer],
                        len(pairs), len(pairs), time.perf_counter() - t0, scores, acc)
