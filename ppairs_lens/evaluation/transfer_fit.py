"""Probes fitted for a cross-dataset transfer study: one store's split, every probe kind at
every read-out, each kind's read-out chosen on the source's validation split, and a probe of
one store applied to another store's held-out pairs (:func:`transfer_proba`).

:class:`TransferConfig` is what such a study runs with (``analyses.cross_dataset`` saves it
beside its results); :func:`fit_stores` fits every store of a study; CCS (gradient descent,
too slow at every read-out) is fitted at the common (cosine) read-out only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.readout_choice import (VAL_SIZE, ReadoutChoice, add_kinds_at,
                                                   check_layer_setting, choose_readouts,
                                                   common_readout, split_half_directions)
from ppairs_lens.evaluation.store_split import StoreSplit, split_store
from ppairs_lens.probes.estimators import ALL_PROBE_KINDS, PROBE_KINDS
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep

__all__ = ["CENTERINGS", "METRICS", "SINGLE_READOUT_KINDS", "FittedStore", "TransferConfig",
           "add_single_readout_kinds", "add_split_halves", "cosine_readout", "fit_store",
           "fit_stores", "swept_kinds", "transfer_proba"]

#: How a probe from A centres B's pairs (see :func:`transfer_proba`).
CENTERINGS = ("target", "train")
METRICS = ("accuracy", "f1", "auroc")
#: Kinds fitted at the cosine read-out only (CCS, 5 tries x 400 Adam steps: at every read-out
#: and on every validation split it would double the step's time)
SINGLE_READOUT_KINDS = ("ccs",)


@dataclass
class TransferConfig:
    """What a transfer / cosine analysis ran on; saved beside its results."""

    stores: list[str] = field(default_factory=list)
    #: None: per (source, kind) the read-out with the best accuracy on a validation split
    #: of the source's training pairs (cosines: best mean over sources and kinds); an int
    #: forces that read-out index (-2 last block's resid_post, -1 final norm)
    layer: int | None = None
    kinds: tuple[str, ...] = ALL_PROBE_KINDS  # "ccs": at the cosine read-out only
    settings: EvalSettings = EvalSettings()  # seed, n_boot, test share, split_by
    C: float = 1.0
    standardize: bool = True     # supervised probes on features / their training RMS
    val_size: float = VAL_SIZE   # share of the training groups that chooses the read-out
    metric: str = "accuracy"     # plotted / summarised metric: accuracy | f1 (| auroc)
    center_target: str = "target"  # headline centring of B when a probe from A is applied to B
    n_random: int = 10_000       # random unit-vector pairs for the |cos| null

    def validate(self) -> None:
        check_layer_setting(self.layer)
        if self.metric not in METRICS:
            raise ProbeError(f"metric must be one of {METRICS}, got {self.metric!r}")
        if self.center_target not in CENTERINGS:
            raise ProbeError(f"center_target must be 'target' (each dataset centred by its own "
                             f"side means, as in the paper) or 'train' (the probe's training "
                             f"means), got {self.center_target!r}")
        bad = [k for k in self.kinds if k not in ALL_PROBE_KINDS]
        if bad or not self.kinds:
            raise ProbeError(f"unknown probe kind(s) {bad}; choose from {ALL_PROBE_KINDS}")
        if not swept_kinds(self):
            raise ProbeError(f"{self.kinds} are fitted at the read-out the other kinds choose "
                             f"on validation: add one of {PROBE_KINDS}")
        if self.n_random < 100:
            raise ProbeError(f"n_random must be at least 100, got {self.n_random}")


def swept_kinds(cfg: TransferConfig) -> tuple[str, ...]:
    """The kinds fitted at every read-out (all but :data:`SINGLE_READOUT_KINDS`)."""
    return tuple(k for k in cfg.kinds if k not in SINGLE_READOUT_KINDS)


@dataclass
class FittedStore:
    """One store's split, its probes at every read-out and the read-out chosen per kind."""

    name: str
    split: StoreSplit
    sweep: SweepProbes
    hook_names: list[str]
    #: kind -> read-out index a probe of this source is used at (transfer)
    chosen: dict[str, int] = field(default_factory=dict)
    #: kind -> [read-out] validation accuracy on the source's training pairs (layer=None)
    val_scores: dict[str, np.ndarray] | None = None
    #: kind -> (direction on one half, direction on the other half) of the held-in pairs at
    #: the common read-out: the self-agreement reference (empty when not fitted).
    halves: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    choices: dict[str, ReadoutChoice] = field(default_factory=dict)  # kind -> how chosen
    prompt_kind: str | None = None  # "comparison" | "statement" (the store's meta)


def fit_store(store: ActivationStore, cfg: TransferConfig, name: str | None = None
              ) -> FittedStore:
    """Split ``store`` (ties dropped, by ``cfg.settings.split_by``), fit every kind at every
    read-out and choose each kind's read-out (on validation, or ``cfg.layer``); CCS at this
    store's own common read-out (several stores: :func:`fit_stores`, at their cosine
    read-out)."""
    sp = split_store(store, **cfg.settings.split_kwargs())
    fit_kw = {"C": cfg.C, "standardize": cfg.standardize}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # degenerate read-outs: reported as NaN
        probes = fit_sweep(sp.acts_train, sp.labels_train, swept_kinds(cfg),
                           model_name=store.meta.model, groups=sp.groups_train,
                           seed=cfg.settings.seed, **fit_kw)
    choices = choose_readouts(sp, swept_kinds(cfg), layer=cfg.layer, seed=cfg.settings.seed,
                              val_size=cfg.val_size, **fit_kw)
    chosen, val = {k: c.index for k, c in choices.items()}, {
        k: np.asarray(c.val_scores) for k, c in choices.items() if c.val_scores} or None
    f = FittedStore(name or sp.name, sp, probes, store.hook_names, chosen, val,
                    choices=choices, prompt_kind=store.meta.kind)
    add_single_readout_kinds(f, cfg, cosine_readout([f], cfg))
    return f


def fit_stores(stores: list[ActivationStore], cfg: TransferConfig,
               names: list[str] | None = None) -> list[FittedStore]:
    """:func:`fit_store` of every store, CCS at their common (cosine) read-out."""
    swept = replace(cfg, kinds=swept_kinds(cfg))
    fitted = [fit_store(s, swept, n) for s, n in zip(stores, names or [None] * len(stores))]
    li = cosine_readout(fitted, cfg)
    for f in fitted:
        add_single_readout_kinds(f, cfg, li)
    return fitted


def add_single_readout_kinds(f: FittedStore, cfg: TransferConfig, li: int) -> None:
    """CCS (``cfg.kinds`` among :data:`SINGLE_READOUT_KINDS`) fitted at read-out ``li`` only
    (:func:`ppairs_lens.evaluation.readout_choice.add_kinds_at`)."""
    f.sweep, choices = add_kinds_at(f.split, f.sweep, [k for k in cfg.kinds if k in
                                                       SINGLE_READOUT_KINDS], li,
                                    seed=cfg.settings.seed,
                                    why="the cosine read-out (fitted there only)")
    f.choices.update(choices)
    f.chosen.update({k: c.index for k, c in choices.items()})


def cosine_readout(fitted: list[FittedStore], cfg: TransferConfig) -> int:
    """The one read-out of the cosine views: ``cfg.layer``, or the best validation accuracy
    averaged over sources and the kinds swept at every read-out
    (:func:`ppairs_lens.evaluation.readout_choice.common_readout`)."""
    return common_readout([{k: c for k, c in f.choices.items() if k not in SINGLE_READOUT_KINDS}
                           for f in fitted], fitted[0].hook_names, layer=cfg.layer).index


def add_split_halves(fitted: list[FittedStore], cfg: TransferConfig, li: int) -> None:
    """Fill each store's ``halves`` at read-out ``li`` (every kind, CCS too)."""
    for f in fitted:
        f.halves = split_half_directions(f.split, li, cfg.kinds, seed=cfg.settings.seed,
                                         C=cfg.C, standardize=cfg.standardize)


def transfer_proba(src: FittedStore, dst: FittedStore, kind: str, li: int, center: str
                   ) -> np.ndarray | None:
    """P(item 1) of ``dst``'s test pairs under ``src``'s ``kind`` probe at read-out ``li``
    (None where that probe is degenerate).

    *Centring.* A probe sees ``(x0 - mu_pos) - (x1 - mu_neg)``; the side means remove what
    only says "this prompt ends in Choice 1 / 2". Those offsets differ between datasets (other
    template text, other item lengths), so a probe applied to B with A's means adds the
    constant ``(mu_pos_B - mu_neg_B) - (mu_pos_A - mu_neg_A)`` to every difference, a bias that
    can push every pair to one side. ``center``:

    * ``"target"`` (the default headline, ``TransferConfig.center_target``): B's pairs are
      centred by *B's own* side means, as CCS and PPairS do. The means come from B's held-in
      part (never from the test pairs being scored) and use no labels, so this is what a user
      with unlabelled data from the target task can do. On the diagonal it is exactly the
      in-distribution probe (training means = B's held-in means).
    * ``"train"``: the probe as fitted, training means and all (the honest "ship the probe
      unchanged" default of :mod:`ppairs_lens.probes.features`)."""
    if bool(src.sweep.degenerate[kind][li]):
        return None
    probe = src.sweep.to_probe(kind, li)
    if center == "target":
        probe.mu_pos_ = dst.sweep.mu_pos[li].numpy().copy()
        probe.mu_neg_ = dst.sweep.mu_neg[li].numpy().copy()
    return probe.predict_proba(dst.split.acts_test[:, :, li])[:, 1]
