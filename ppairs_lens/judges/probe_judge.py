"""Training one probe to judge items (ranking, insertion scoring): harvest comparisons at
every read-out, choose the read-out as every analysis does (on the training pairs, never on
those a run evaluates), fit the probe there."""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.harvest import harvest_pairs
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.cosine_verdict import pc1_alignment
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.readout_choice import ReadoutChoice, choose_readout
from ppairs_lens.evaluation.store_split import training_split
from ppairs_lens.models.hook_points import READOUT_PRESET, hook_points
from ppairs_lens.models.loading import model_name
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["ProbeJudgeConfig", "TrainedProbe", "choose_probe_readout", "train_probe"]


@dataclass(kw_only=True)
class ProbeJudgeConfig:
    """Settings shared by runs that judge with a trained probe and with the prompted model."""

    model: str | None = None
    probe_kind: str = "supervised"
    layer: int | None = None  # read-out index; None: chosen on held-out training data
    calibrate_probe: bool = False
    calibrate_zero_shot: bool = True
    settings: EvalSettings = EvalSettings()  # seed and n_boot (no held-out split of its own)
    token_budget: int | None = None  # None: by device (runner.default_token_budget)
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
    layer_scores: list[float] = field(default_factory=list)  # validation accuracy per read-out
    train_accuracy: float = math.nan
    layer_selection: str = "given"  # how the read-out was chosen
    pc1_abs_cos: float = math.nan  # |cos| with PC1 of the same differences at that read-out

    def run_info(self) -> dict[str, Any]:
        """What a run's saved config records about the probe."""
        return {"layer": self.layer, "hook": self.hook, "n_train_pairs": self.n_pairs,
                "train_seconds": self.seconds, "train_accuracy": self.train_accuracy,
                "layer_scores": self.layer_scores, "layer_selection": self.layer_selection,
                "pc1_abs_cos": self.pc1_abs_cos}

    def cost_columns(self) -> dict[str, Any]:
        """The training cost, as columns of a result row."""
        return {"layer": self.layer, "layer_selection": self.layer_selection,
                "train_pairs": self.n_pairs, "train_rows": self.n_rows,
                "train_seconds": round(self.seconds, 2)}


def choose_probe_readout(acts: Float[Tensor, "n 2 layer d_model"], labels: np.ndarray,
                         groups: Sequence[Hashable], items: Sequence[tuple] | None,
                         hook_names: Sequence[str], *, kind: str, layer: int | None, seed: int,
                         name: str = "train") -> ReadoutChoice:
    """The read-out choice on these training pairs (validation split as ``"auto"`` resolves on
    ``groups`` / ``items``), or ``layer``."""
    return choose_readout(training_split(name, acts, labels, groups, items, hook_names), kind,
                          layer=layer, seed=seed)


def train_probe(bridge, train: Dataset, *, kind: str, layer: int | None, seed: int,
                settings: HarvestSettings, groups: Sequence[Hashable] | None = None
                ) -> TrainedProbe:
    """Harvest ``train``'s comparisons, pick the layer on a validation split of them (unless
    given), fit the probe on all of them; ``groups``: default ``train.group_ids()``."""
    t0 = time.perf_counter()
    pairs = build_contrast_pairs(bridge.tokenizer, train)
    acts = harvest_pairs(bridge, pairs, settings)
    labels = np.array(train.labels())
    groups = train.group_ids() if groups is None else groups
    if len(groups) != len(train.records):
        raise ProbeError(f"{len(groups)} groups for {len(train.records)} training records")
    items = [(r.item1_id, r.item2_id) for r in train.records]
    hooks = hook_points(READOUT_PRESET, bridge.cfg.n_layers)
    choice = choose_probe_readout(acts, labels, groups, items, hooks, kind=kind, layer=layer,
                                  seed=seed, name=train.name)
    layer, scores, how = choice.index, list(choice.val_scores), choice.selected_by
    # The sweep's solver (exact optimum, robust to tiny activation scales) on that read-out.
    sw = fit_sweep(acts[:, :, layer:layer + 1], labels, kinds=(kind,), layers=(layer,),
                   model_name=model_name(bridge))
    probe = sw.to_probe(kind, 0)
    acc = probe.score(acts[:, :, layer], labels)
    return TrainedProbe(probe, layer, hooks[layer],
                        len(pairs), len(pairs), time.perf_counter() - t0, scores, acc, how,
                        pc1_alignment(acts, labels, layer, kind=kind, seed=seed))
