"""Cross-dataset transfer and cosine similarity of probe directions (paper Table 1, Fig. 5).

The claim under test: unsupervised (PCA) probes fitted on different datasets find nearly the
same direction and transfer across tasks, while supervised probes' directions are nearly
orthogonal yet still transfer fairly well. Every store (one model, same read-outs) is split
leak-free (:func:`ppairs_lens.evaluation.store_split.split_store`, ``split_by="auto"``: no
group or item on both sides) and every probe kind is fitted on its held-in part at every
read-out at once (supervised probes on standardised features). Each (source, kind) probe is
taken at the read-out chosen on a validation split of the *source's* training pairs
(``cfg.layer=None``, :mod:`ppairs_lens.evaluation.readout_choice`; an int forces one read-out,
-2 the last block's ``resid_post``, -1 the final norm's output) and scored on every dataset's
held-out pairs (``transfer.csv``, bootstrap CIs over leak groups, centrings in
:func:`transfer_proba`; accuracy rows also carry each group's accuracy minus chance,
``group_diffs``, for Table 1's claims, in the returned rows only); at one common read-out the
directions' cosines are compared with each other, with the same kind fitted on two halves of
one dataset (a ceiling) and with random unit vectors (``cosine.csv``), and across read-outs
(``layer_cosine.csv``). Figures (:mod:`analyses.cross_dataset_plots`): ``transfer``, ``cosine``,
``cosine_distribution``, ``layer_cosine``; ``transfer(.config|_summary).json``. CCS (too slow
at every read-out) is fitted at the cosine read-out only and transfers from there. From stores
alone, no model: ``python -m analyses.cross_dataset STORE [STORE ...] --out DIR``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from analyses.cross_dataset_plots import (
    CENTERINGS,
    METRICS,
    plot_cosine,
    plot_cosine_distribution,
    plot_layer_cosine,
    plot_transfer,
    print_summary,
    summarize,
)
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.activations.store_sets import check_comparable, readout_index, unique_names
from ppairs_lens.errors import PPairsError, ProbeError
from ppairs_lens.evaluation.direction_agreement import agreement_verdicts
from ppairs_lens.evaluation.metrics import evaluate
from ppairs_lens.evaluation.paired import chance_differences
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.readout_choice import VAL_SIZE, ReadoutChoice, add_kinds_at
from ppairs_lens.evaluation.readout_choice import check_layer_setting, choose_readouts
from ppairs_lens.evaluation.readout_choice import common_readout, layer_rule, layer_setting
from ppairs_lens.evaluation.readout_choice import split_half_directions
from ppairs_lens.evaluation.splits import SPLIT_MODES
from ppairs_lens.evaluation.store_split import StoreSplit, bootstrap_groups, split_store
from ppairs_lens.evaluation.store_split import held_out_ci_counts
from ppairs_lens.evaluation.verdicts import transfer_refusal
from ppairs_lens.io.outputs import save_config, save_figure, write_csv, write_json
from ppairs_lens.probes.direction_similarity import cosine, cosine_pair_rows
from ppairs_lens.probes.direction_similarity import layer_cosine_table, random_reference
from ppairs_lens.probes.estimators import ALL_PROBE_KINDS, PROBE_KINDS
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep

__all__ = ["TransferConfig", "FittedStore", "run_transfer", "fit_store", "fit_stores", "cli",
           "add_single_readout_kinds", "SINGLE_READOUT_KINDS", "swept_kinds", "transfer_proba",
           "transfer_rows", "cosine_matrix", "cosine_rows", "layer_cosine_rows", "summarize",
           "main"]

#: Kinds fitted at the cosine read-out only (CCS, 5 tries x 400 Adam steps: at every read-out
#: and on every validation split it would double the step's time)
SINGLE_READOUT_KINDS = ("ccs",)


@dataclass
class TransferConfig:
    """What a transfer / cosine analysis ran on; saved beside its results."""

    stores: list[str]
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
    read-out
    and choose each kind's read-out (on validation, or ``cfg.layer``); CCS at this store's
    own common read-out (several stores: :func:`fit_stores`, at their cosine read-out)."""
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
                                    seed=cfg.settings.seed, why="the cosine read-out (fitted there only)")
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
        f.halves = split_half_directions(f.split, li, cfg.kinds, seed=cfg.settings.seed, C=cfg.C,
                                         standardize=cfg.standardize)


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


def transfer_rows(fitted: list[FittedStore], cfg: TransferConfig) -> list[dict]:
    """(train, test, kind, center, metric) rows with value and 95% CI (bootstrap over the
    target's leak groups), each probe at its source's read-out ``src.chosen[kind]``
    (``layer_rule`` says how that was chosen; ``val_value``: its validation accuracy)."""
    rule = layer_rule(cfg.layer)
    rows = []
    for src in fitted:
        for dst in fitted:
            groups = bootstrap_groups(dst.split)[0]
            refused = transfer_refusal(src.prompt_kind, dst.prompt_kind)  # then NaN cells
            for kind in cfg.kinds:
                li = src.chosen[kind]
                val = src.choices[kind].val_value
                cache = None
                for center in CENTERINGS:
                    same = src is dst  # both centrings are the in-distribution probe
                    if not (same and cache is not None):
                        p = None if refused else transfer_proba(src, dst, kind, li, center)
                        y = dst.split.labels_test
                        cache = (None, {}) if p is None else (evaluate(
                            y, p, groups=groups, **cfg.settings.boot_kwargs()),
                            chance_differences(y, p, groups))
                    scores, chance = cache
                    for metric in METRICS:
                        s = scores[metric] if scores else {"value": np.nan, "lo": np.nan,
                                                           "hi": np.nan}
                        rows.append({"train": src.name, "test": dst.name, "kind": kind,
                                     "center": center, "headline": center == cfg.center_target,
                                     "in_distribution": same, "metric": metric,
                                     "value": s["value"], "lo": s["lo"], "hi": s["hi"],
                                     "ci_counts": held_out_ci_counts(dst.split, s),
                                     "layer": li, "hook": src.hook_names[li],
                                     "layer_rule": rule, "val_value": val,
                                     "selected_by": src.choices[kind].selected_by,
                                     "split_by": src.split.split_used, "refused": refused or "",
                                     "n_train": len(src.split.labels_train),
                                     "n_test": len(dst.split.labels_test),
                                     **(chance if metric == "accuracy" else {})})
    return rows


def cosine_matrix(fitted: list[FittedStore], cfg: TransferConfig
                  ) -> tuple[list[tuple], np.ndarray]:
    """Keys ``(dataset, kind)`` and their signed cosine matrix at the cosine read-out."""
    li = cosine_readout(fitted, cfg)
    keys = [(f.name, k) for f in fitted for k in cfg.kinds]
    mat = np.stack([f.sweep.directions[k][li].numpy() for f in fitted for k in cfg.kinds])
    return keys, cosine(mat[:, None, :], mat[None, :, :])


def cosine_rows(fitted: list[FittedStore], cfg: TransferConfig) -> list[dict]:
    """Cosine of every pair of (dataset, kind) directions and every split-half pair, at the
    cosine read-out (:func:`ppairs_lens.probes.direction_similarity.cosine_pair_rows`)."""
    li = cosine_readout(fitted, cfg)
    dirs = {(f.name, k): f.sweep.directions[k][li].numpy() for f in fitted for k in cfg.kinds}
    halves = {(f.name, k): ab for f in fitted for k, ab in f.halves.items()}
    return cosine_pair_rows(dirs, halves, layer=li, hook=fitted[0].hook_names[li])


def layer_cosine_rows(fitted: list[FittedStore], cfg: TransferConfig) -> list[dict]:
    """Per-read-out cosines (adjacent read-outs, between kinds, between datasets; see
    :func:`ppairs_lens.probes.direction_similarity.layer_cosine_table`). The last step (last
    block -> final norm) compares two bases (the norm rescales each coordinate). Kinds swept
    at every read-out only (CCS is at one)."""
    return layer_cosine_table({f.name: {k: f.sweep.directions[k].numpy()
                                        for k in swept_kinds(cfg)}
                               for f in fitted}, fitted[0].hook_names)


def run_transfer(stores: list[ActivationStore], out: str | Path,
                 cfg: TransferConfig | None = None) -> dict:
    """Transfer matrix, cosine tables and per-layer cosines; tables and figures into ``out``.

    Returns ``{"transfer", "cosine", "layer_cosine"}`` (lists of rows, as in the CSVs),
    ``"random"`` (the null's summary), ``"summary"`` (per kind, see :func:`summarize`),
    ``"names"``, ``"hook"`` (the cosine views' read-out), ``"layers"`` (``{source: {kind:
    read-out index}}`` of the transfer probes) and ``"split_by"`` (per dataset's split)."""
    cfg = cfg or TransferConfig(stores=[str(s.path) for s in stores])
    cfg.validate()
    check_comparable(stores)
    if layer_rule(cfg.layer) == "fixed":
        readout_index(int(cfg.layer), stores[0].n_readouts)    # out of range: fail before fits
    model = stores[0].meta.model
    names = unique_names(stores)
    fitted = fit_stores(stores, cfg, names)
    li = cosine_readout(fitted, cfg)
    hook = stores[0].hook_names[li]
    add_split_halves(fitted, cfg, li)
    layers = {f.name: dict(f.chosen) for f in fitted}
    splits = {f.name: f.split.split_used for f in fitted}
    t_rows = transfer_rows(fitted, cfg)
    c_rows = cosine_rows(fitted, cfg)
    l_rows = layer_cosine_rows(fitted, cfg)
    ref = random_reference(stores[0].d_model, cfg.n_random, cfg.settings.seed)
    summary = summarize(t_rows, c_rows, ref, cfg)
    for k, v in agreement_verdicts([(f.name, f.split, f.sweep) for f in fitted], cfg.kinds, li,
                                   **cfg.settings.boot_kwargs()).items():
        summary[k]["agreement"] = v  # the cosine claim, like-for-like nulls
    ref_public = {k: v for k, v in ref.items() if k != "samples"}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "transfer.csv", [{k: v for k, v in r.items() if k != "group_diffs"}
                                     for r in t_rows])
    write_csv(out / "cosine.csv", c_rows)
    write_csv(out / "layer_cosine.csv", l_rows)
    write_json(out / "transfer_summary.json",
               {"model": model, "layer": li, "hook": hook, "datasets": names,
                "layer_rule": layer_rule(cfg.layer), "transfer_layers": layers,
                "split_by": splits, "standardize": cfg.standardize,
                "metric": cfg.metric, "center_target": cfg.center_target,
                "random_reference": ref_public, "per_kind": summary})
    save_config(out, "transfer", cfg)
    import matplotlib.pyplot as plt

    keys, cos = cosine_matrix(fitted, cfg)
    for name, fig in (
            ("transfer", plot_transfer(t_rows, names, cfg, model, layers, splits)),
            ("cosine", plot_cosine(keys, cos, cfg, model, hook, ref)),
            ("cosine_distribution", plot_cosine_distribution(c_rows, cfg, model, hook, ref)),
            ("layer_cosine", plot_layer_cosine(l_rows, names, cfg, model, ref, li))):
        save_figure(fig, out, name, preview=cfg.settings.quick)
        plt.close(fig)
    return {"transfer": t_rows, "cosine": c_rows, "layer_cosine": l_rows, "random": ref_public,
            "summary": summary, "names": names, "hook": hook, "layers": layers,
            "split_by": splits}


def cli(args, bridge) -> None:
    """``ppairs-lens transfer`` on the model ``bridge`` (loaded by :mod:`analyses.cli`)."""
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data import BUILTIN_NAMES
    from ppairs_lens.data.specs import load_dataset_spec

    specs = args.datasets or list(BUILTIN_NAMES)
    stores = [ensure_store(bridge, load_dataset_spec(s, max_pairs=args.max_pairs, seed=args.seed),
                           args.stores, template=args.template, names=args.hooks) for s in specs]
    cfg = TransferConfig(stores=[str(s.path) for s in stores], settings=args.settings,
                         layer=args.layer,
                         kinds=tuple(getattr(args, "kinds", None) or ALL_PROBE_KINDS))
    print_summary(run_transfer(stores, args.out, cfg), cfg)


def main(argv: list[str] | None = None) -> int:
    """Regenerate everything from existing stores (no model): ``python -m
    analyses.cross_dataset STORE STORE ... --out DIR``."""
    p = argparse.ArgumentParser(prog="python -m analyses.cross_dataset", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stores", nargs="+", help="activation store folders (same model)")
    p.add_argument("--out", default="figures/transfer")
    p.add_argument("--layer", type=layer_setting, default=None,
                   help="'val' (default: each source's read-out chosen on a validation split "
                        "of its training pairs) or a read-out index (-2 last block's "
                        "resid_post, -1 final norm)")
    p.add_argument("--split-by", "--split", dest="split", choices=SPLIT_MODES, default="auto",
                   help="how held-out pairs are chosen (auto: whole groups, else items, else "
                        "pairs)")
    p.add_argument("--kinds", nargs="+", choices=ALL_PROBE_KINDS, default=ALL_PROBE_KINDS,
                   help="probe kinds (default: all four; ccs at the cosine read-out only)")
    p.add_argument("--center-target", choices=CENTERINGS, default="target")
    p.add_argument("--metric", choices=METRICS, default="accuracy")
    base = EvalSettings()  # the defaults of every other command
    p.add_argument("--n-boot", type=int, default=base.n_boot)
    p.add_argument("--test-size", type=float, default=base.test_size)
    p.add_argument("--seed", type=int, default=base.seed)
    args = p.parse_args(argv)
    try:
        stores = [ActivationStore.open(s) for s in args.stores]
        cfg = TransferConfig(
            stores=[str(s.path) for s in stores], layer=args.layer, kinds=tuple(args.kinds),
            center_target=args.center_target, metric=args.metric,
            settings=EvalSettings(seed=args.seed, n_boot=args.n_boot, test_size=args.test_size,
                                  split_by=args.split))
        print_summary(run_transfer(stores, args.out, cfg), cfg)
    except PPairsError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
