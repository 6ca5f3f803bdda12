"""A cross-dataset transfer study: its probes, and what each transferred probe is compared with.

Every probe kind is fitted at every read-out of each store and its read-out chosen on the
source's validation split; CCS (gradient descent, too slow at every read-out) is fitted at the
common (cosine) read-out only.

A probe fitted on dataset A and scored on B's held-out pairs (a cell ``A -> B``) means
something only beside what else could be fitted on A, or asked of the model, for the same
pairs. For every cell, on B's held-out pairs: the no-model baselines fitted on A's training
pairs (memorisation across datasets only where ids name systems in both; the text baselines
when the datasets' texts are given; ``n/a`` with the reason where one cannot be built), the
prompted judges on the part of B's pairs each answered, and each probe of A at its chosen
read-out with its paired difference against every one of them (bootstrap over B's leak
groups). :func:`transfer_comparisons` returns the result table's rows (one block per cell)
and the comparators' rows of ``transfer.csv``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.baselines import (
    CROSS_IDS,
    Baseline,
    cross_dataset_memorisation,
    memorisation_baseline,
    length_baseline,
)
from ppairs_lens.evaluation.paired import paired_difference
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.readout_choice import (VAL_SIZE, ReadoutChoice, add_kinds_at,
                                                   check_layer_setting, choose_readouts,
                                                   common_readout, split_half_directions)
from ppairs_lens.evaluation.result_table import BASELINE_KINDS, JUDGE_KEYS
from ppairs_lens.evaluation.store_split import (
    StoreSplit,
    bootstrap_groups,
    covered_test_pairs,
    held_out_ci_counts,
    split_store,
)
from ppairs_lens.evaluation.sweep_scores import score_pairs
from ppairs_lens.evaluation.text_baselines import text_baselines
from ppairs_lens.evaluation.verdicts import transfer_refusal
from ppairs_lens.probes.estimators import ALL_PROBE_KINDS, PROBE_KINDS
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep

__all__ = ["CENTERINGS", "CROSS_IDS", "METRICS", "NO_TEXTS", "SINGLE_READOUT_KINDS",
           "Comparisons", "FittedStore", "TransferConfig", "add_single_readout_kinds",
           "add_split_halves", "cell_name", "cosine_readout", "fit_store", "fit_stores",
           "swept_kinds", "transfer_comparisons", "transfer_proba"]

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
    #: None: chosen on validation per (source, kind) (cosines: best mean over sources and
    #: kinds); an int forces that read-out index (-2 last block's resid_post, -1 final norm)
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
    """Split ``store``, fit every kind at every read-out and choose each kind's read-out; CCS
    at this store's own common read-out (several stores: :func:`fit_stores`)."""
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
    """CCS (``cfg.kinds`` among :data:`SINGLE_READOUT_KINDS`) fitted at read-out ``li`` only."""
    f.sweep, choices = add_kinds_at(f.split, f.sweep, [k for k in cfg.kinds if k in
                                                       SINGLE_READOUT_KINDS], li,
                                    seed=cfg.settings.seed,
                                    why="the cosine read-out (fitted there only)")
    f.choices.update(choices)
    f.chosen.update({k: c.index for k, c in choices.items()})


def cosine_readout(fitted: list[FittedStore], cfg: TransferConfig) -> int:
    """The one read-out of the cosine views: ``cfg.layer``, or the best validation accuracy
    averaged over sources and the kinds swept at every read-out."""
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
    only says "this prompt ends in Choice 1 / 2". Those offsets differ between datasets, so a
    probe applied to B with A's means adds a constant to every difference, a bias that can
    push every pair to one side. ``center``:

    * ``"target"`` (the headline): B's pairs are centred by *B's own* side means, as CCS and
      PPairS do. The means come from B's held-in part and use no labels, so this is what a
      user with unlabelled data from the target task can do; on the diagonal it is exactly the
      in-distribution probe.
    * ``"train"``: the probe as fitted, training means and all ("ship the probe unchanged")."""
    if bool(src.sweep.degenerate[kind][li]):
        return None
    probe = src.sweep.to_probe(kind, li)
    if center == "target":
        probe.mu_pos_ = dst.sweep.mu_pos[li].numpy().copy()
        probe.mu_neg_ = dst.sweep.mu_neg[li].numpy().copy()
    return probe.predict_proba(dst.split.acts_test[:, :, li])[:, 1]


#: Why the text baselines are missing when a study is run from stores alone.
NO_TEXTS = "needs the datasets' texts (run `ppairs-lens transfer`, not from stores alone)"


def cell_name(src: str, dst: str) -> str:
    """A transfer cell's name in tables: training dataset -> scored dataset."""
    return f"{src} -> {dst}"


@dataclass
class Comparisons:
    """Everything :func:`transfer_comparisons` found: ``table_rows`` / ``entries`` in the
    layer sweep's shape (one ``dataset`` per cell), ``csv_rows`` and ``refused`` cells."""

    table_rows: list[dict] = field(default_factory=list)
    entries: list[dict] = field(default_factory=list)
    csv_rows: list[dict] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def _records(dataset: Dataset, pairs) -> Dataset:
    """``dataset`` with exactly the records of ``pairs`` (a split's side), in their order."""
    by_id = {r.pair_id: r for r in dataset.records}
    return replace(dataset, records=[by_id[p.pair_id] for p in pairs])


def _baselines(src: FittedStore, dst: FittedStore, texts: Mapping[str, Dataset] | None,
               embedding, tokenizer, seed: int) -> list[Baseline]:
    """Every no-model baseline fitted on ``src``'s training pairs, on ``dst``'s test pairs."""
    a, b = src.split, dst.split
    memo = memorisation_baseline if src is dst else cross_dataset_memorisation
    out = [memo(a.pairs_train, a.labels_train, b.pairs_test),
           length_baseline(a.pairs_train, a.labels_train, b.pairs_test)]
    if texts is None or src.name not in texts or dst.name not in texts:
        return out + [Baseline(k, None, "", reason=NO_TEXTS) for k in ("lexical", "embedding")]
    return out + text_baselines(_records(texts[src.name], a.pairs_train),
                                _records(texts[dst.name], b.pairs_test), embedding=embedding,
                                tokenizer=tokenizer, seed=seed)


def _judged(sp: StoreSplit, by_key: Mapping[str, Mapping[str, float]]
            ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per judge form: (positions of ``sp``'s test pairs it answered, its P(item 1) there)."""
    covered = {kind: covered_test_pairs(sp, by_key.get(key)) for kind, key in JUDGE_KEYS.items()}
    return {kind: c for kind, c in covered.items() if c is not None}


def transfer_comparisons(fitted: list[FittedStore], cfg: TransferConfig, *,
                         texts: Mapping[str, Dataset] | None = None, embedding=None,
                         tokenizer=None,
                         judges: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None
                         ) -> Comparisons:
    """Every cell's probes, baselines and judges on its held-out pairs (module doc).
    ``texts``: each store's dataset by name (without, the text baselines are ``n/a``);
    ``judges``: per scored dataset, key -> {pair_id: P(item 1)}."""
    boot = cfg.settings.boot_kwargs()
    res = Comparisons()
    for src in fitted:
        for dst in fitted:
            name = cell_name(src.name, dst.name)
            refused = transfer_refusal(src.prompt_kind, dst.prompt_kind)
            if refused:
                res.refused[name] = refused
                continue
            _cell(res, name, src, dst, cfg, boot,
                  _baselines(src, dst, texts, embedding, tokenizer, cfg.settings.seed),
                  _judged(dst.split, (judges or {}).get(dst.name, {})))
    return res


def _cell(res: Comparisons, name: str, src: FittedStore, dst: FittedStore,
          cfg: TransferConfig, boot: dict, baselines: list[Baseline], judged: dict) -> None:
    sp = dst.split
    y, n = sp.labels_test, len(sp.labels_test)
    unit, ci_unit = bootstrap_groups(sp)

    def scored(p, idx):
        sc = score_pairs(y[idx], p, [sp.pairs_test[i] for i in idx], [unit[i] for i in idx],
                         **boot)
        return {m: {**s, "ci_counts": held_out_ci_counts(sp, s)} for m, s in sc.items()}

    every = np.arange(n)
    others: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    notes: dict[str, str] = {}
    for b in baselines:
        if b.available:
            others[b.kind], notes[b.kind] = (every, b.p), b.predictor
        else:
            notes[b.kind] = b.reason or "unavailable"
    for kind, (idx, p) in judged.items():
        others[kind] = (idx, p)
        notes[kind] = f"prompted judge on {len(idx)} of {n} test pairs"
    for kind, (idx, p) in others.items():
        role = "baseline" if kind in BASELINE_KINDS else "judge"
        for metric, s in scored(p, idx).items():
            row = {"metric": metric, "value": s["value"], "lo": s["lo"], "hi": s["hi"],
                   "ci_counts": s["ci_counts"], "n_train": len(src.split.labels_train),
                   "n_test": len(idx)}
            res.table_rows.append({"dataset": name, "kind": kind, "layer": -1, "hook": "",
                                   "split_used": sp.split_used, **row})
            res.csv_rows.append({"train": src.name, "test": dst.name, "kind": kind,
                                 "role": role, "center": "", "headline": True,
                                 "in_distribution": src is dst, "layer": None, "hook": "",
                                 "predictor": notes[kind], "split_by": sp.split_used, **row})
    probes = {}
    for kind in cfg.kinds:
        li = src.chosen[kind]
        p = transfer_proba(src, dst, kind, li, cfg.center_target)
        if p is not None and np.isfinite(p).all():
            probes[kind] = (li, p)
    for kind, (li, p) in probes.items():
        c = src.choices[kind]
        test = scored(p, every)["accuracy"]
        entry = {"dataset": name, "kind": kind, "layer": li, "hook": src.hook_names[li],
                 "val_value": c.val_value, "selected_by": c.selected_by,
                 "split_used": sp.split_used, "n_test": n,
                 "n_train": len(src.split.labels_train),
                 "n_groups_test": len(set(sp.groups_test)), "ci_unit": ci_unit,
                 "test": {"metric": "accuracy", **{k: test[k] for k in
                                                   ("value", "lo", "hi", "ci_counts")}},
                 "minus": {}, "unavailable": {k: v for k, v in notes.items()
                                              if k not in others}}
        vs = {**others, **{f"probe:{k}": (every, q) for k, (_, q) in probes.items()
                           if k != kind}}
        for other, (idx, q) in vs.items():
            d = paired_difference(y[idx], p[idx], q, [unit[i] for i in idx], **boot)
            entry["minus"][other] = {**d, "ci_counts": held_out_ci_counts(sp, d),
                                     "about": notes.get(other, "probe at its chosen read-out")}
        res.entries.append(entry)
