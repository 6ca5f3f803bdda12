"""Controls with known answers, reported before the seeds' claims: the same verdict machinery
on a task the embedded model solves (``larger_number``; 40 number blocks, each a leak group).

A supervised probe is fitted at the read-out chosen on validation, once on the training labels
and once on them shuffled (seeded). Per test group: ``supervised - chance`` must **hold**,
``shuffled - chance`` must **not** beat chance, and ``shuffled - supervised`` must **fail**.
Each row keeps its group differences, so the claims registry decides them like the seeds'
claims (:mod:`analyses.replication.claims`, family "ours: controls"). Writes ``controls.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ppairs_lens.evaluation.bootstrap import mean_ci
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.readout_choice import choose_readout
from ppairs_lens.evaluation.store_split import split_store
from ppairs_lens.io.outputs import write_csv
from ppairs_lens.io.records import StepRows, record_data
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["CONTROL_DATASET", "ControlRow", "ControlRows", "ControlsConfig", "control_rows",
           "run_controls"]

#: The built-in the controls run on: the embedded model's probes solve it.
CONTROL_DATASET = "larger_number"


@dataclass(frozen=True)
class ControlsConfig:
    """The controls' built-in and its size (pairs; 40 blocks whatever the size)."""

    dataset: str = CONTROL_DATASET
    n_pairs: int = 160
    settings: EvalSettings = field(default_factory=EvalSettings)


def _hits(split, labels_train: np.ndarray, layer: int, seed: int) -> np.ndarray:
    acts = split.acts_train[:, :, layer:layer + 1]
    sweep = fit_sweep(acts, labels_train, kinds=("supervised",), seed=seed)
    pred = sweep.predict(split.acts_test[:, :, layer:layer + 1])["supervised"][0]
    return (pred == split.labels_test).astype(float)


@dataclass(frozen=True)
class ControlRow:
    """One control: a mean of per-pair differences, its interval, per-group differences."""

    control: str
    statement: str
    value: float
    lo: float
    hi: float
    n: int
    n_groups: int
    group_diffs: tuple[float, ...]


@dataclass(frozen=True)
class ControlRows(StepRows):
    rows: tuple[ControlRow, ...] = ()


def _row(name: str, what: str, per_pair: np.ndarray, groups: list[str],
         settings: EvalSettings) -> ControlRow:
    order = list(dict.fromkeys(groups))
    diffs = tuple(float(per_pair[[g == k for g in groups]].mean()) for k in order)
    ci = mean_ci(per_pair, groups, **settings.boot_kwargs())
    return ControlRow(control=name, statement=what, value=ci["value"], lo=ci["lo"],
                      hi=ci["hi"], n=len(per_pair), n_groups=len(order), group_diffs=diffs)


def control_rows(store, cfg: ControlsConfig) -> ControlRows:
    """The three controls' rows (module doc) on ``store``, a harvest of the built-in."""
    s = cfg.settings
    split = split_store(store, **s.split_kwargs())
    layer = choose_readout(split, "supervised", seed=s.seed).index
    shuffled = np.random.default_rng(s.seed).permutation(split.labels_train)
    true_hits = _hits(split, split.labels_train, layer, s.seed)
    shuffled_hits = _hits(split, shuffled, layer, s.seed)
    g = split.groups_test
    return ControlRows(rows=(_row("supervised-beats-chance", "the supervised probe beats chance",
                 true_hits - 0.5, g, s),
            _row("shuffled-beats-chance", "a probe trained on shuffled labels beats chance",
                 shuffled_hits - 0.5, g, s),
            _row("shuffled-beats-supervised", "a probe trained on shuffled labels beats the "
                 "one trained on the labels", shuffled_hits - true_hits, g, s)))


def run_controls(store, cfg: ControlsConfig, out) -> ControlRows:
    """The controls' rows, written as ``controls.csv`` (group differences left out)."""
    rec = control_rows(store, cfg)
    write_csv(f"{out}/controls.csv", [{k: v for k, v in record_data(r).items()
                                       if k != "group_diffs"} for r in rec.rows])
    return rec
