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
``group_diffs``, for Table 1's claims, in the returned rows only); at one common read-out (chosen the same way) the directions' cosines
are compared with each other, with the same kind fitted on two halves of one dataset (a
ceiling) and with random unit vectors (a null; ``cosine.csv``); and they are followed across
read-outs (``layer_cosine.csv``). Figures (:mod:`analyses.cross_dataset_plots`): ``transfer``,
``cosine``, ``cosine_distribution`` and ``layer_cosine`` (``.png``, ``.svg``), with
``transfer.config.json`` and ``transfer_summary.json``. CCS (``--kinds``; gradient descent, too
slow at every read-out) is fitted at the cosine read-out only and transfers from there
(:func:`~ppairs_lens.evaluation.transfer_fit.fit_stores`). Beside every transferred probe, on
the same held-out pairs of its target, the no-model baselines fitted on its source and the
prompted judges (:mod:`ppairs_lens.evaluation.transfer_fit`): their rows in
``transfer.csv`` (``role`` baseline / judge), the probes' paired differences against them in
``transfer_summary.json`` (``comparisons``), and one console table per cell. Everything regenerates from stores alone, no model: ``python -m
analyses.cross_dataset STORE [STORE ...] --out DIR``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analyses.cross_dataset_plots import (plot_cosine, plot_cosine_distribution, plot_layer_cosine,
                                          plot_transfer, print_summary)
from ppairs_lens.activations.store import (ActivationStore, check_comparable, readout_index,
                                           unique_names)
from ppairs_lens.errors import PPairsError
from ppairs_lens.evaluation.cosine_verdict import agreement_verdicts
from ppairs_lens.evaluation.metrics import evaluate
from ppairs_lens.evaluation.paired import chance_differences
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.readout_choice import layer_rule, layer_setting
from ppairs_lens.evaluation.result_table import result_tables
from ppairs_lens.evaluation.splits import SPLIT_MODES
from ppairs_lens.evaluation.store_split import bootstrap_groups, held_out_ci_counts
from ppairs_lens.evaluation.transfer_fit import (CENTERINGS, METRICS, SINGLE_READOUT_KINDS,
                                                 FittedStore, TransferConfig,
                                                 add_single_readout_kinds, add_split_halves,
                                                 cosine_readout, fit_store, fit_stores, swept_kinds,
                                                 transfer_comparisons, transfer_proba)
from ppairs_lens.evaluation.verdicts import transfer_refusal
from ppairs_lens.io.outputs import save_config, save_figure, write_csv, write_json
from ppairs_lens.io.records import ABSENT, JSON_KEY, Absent, record_data, record_from_data
from ppairs_lens.probes.direction_similarity import cosine, cosine_pair_rows
from ppairs_lens.probes.direction_similarity import layer_cosine_table, random_reference
from ppairs_lens.probes.estimators import ALL_PROBE_KINDS

__all__ = ["TransferConfig", "FittedStore", "run_transfer", "fit_store", "fit_stores", "cli",
           "add_single_readout_kinds", "SINGLE_READOUT_KINDS", "swept_kinds", "transfer_proba",
           "transfer_rows", "cosine_matrix", "cosine_rows", "layer_cosine_rows", "summarize",
           "cosine_readout", "add_split_halves", "transfer_table_lines", "main",
           "CosineAgreement", "CosineSummary", "InDistributionAccuracy", "TransferHeadline",
           "TransferResult", "TransferRow"]


@dataclass(frozen=True)
class InDistributionAccuracy:
    value: float | None
    lo: float | None
    hi: float | None
    n_groups: int | None | Absent = ABSENT   # the test groups its interval rests on


@dataclass(frozen=True)
class CosineAgreement:
    """The directions' agreement verdict with each dataset's in-distribution accuracy."""

    outcome: str
    reason: str
    rule: str
    evidence: dict[str, Any]
    method: str
    needed: str | None
    in_distribution: dict[str, InDistributionAccuracy | None]


@dataclass(frozen=True)
class CosineSummary:
    """One probe kind: mean |cos| between datasets against the null; its mean transfer."""

    mean_abs_cos: float | None
    mean_cos: float | None
    split_half_abs_cos: float | None
    frac_abs_cos_above_07: float | None = field(
        metadata={JSON_KEY: "frac_abs_cos_above_0.7"})
    frac_abs_cos_above_null_p95: float | None
    random_mean_abs_cos: float | None
    random_p95: float | None
    random_p99: float | None
    in_distribution: float | None
    off_diagonal_target: float | None
    off_diagonal_train: float | None
    off_diagonal: float | None
    agreement: CosineAgreement | Absent = ABSENT


@dataclass(frozen=True, kw_only=True)
class TransferRow:
    """A probe trained on one dataset scored on another (or its own) at its source's read-out;
    an accuracy row carries its per-group differences from chance (kept out of the CSV)."""

    train: str
    test: str
    kind: str
    role: str
    center: str
    headline: bool
    in_distribution: bool
    metric: str
    value: float | None
    lo: float | None
    hi: float | None
    ci_counts: bool | None
    layer: int
    hook: str
    layer_rule: str
    val_value: float | None
    selected_by: str | None
    split_by: str
    refused: str
    n_train: int
    n_test: int
    n_groups: int | Absent = ABSENT
    group_diffs: tuple[float | None, ...] | Absent = ABSENT


#: The keys of ``summary.json``'s transfer section that are not probe kinds.
_ROW_KEYS = ("f1", "accuracy")


@dataclass(frozen=True)
class TransferHeadline:
    """``summary.json``'s ``transfer``: per kind its cosine summary; F1 rows for the report's
    Table 1, accuracy rows (supervised and PCA) with group differences for its claims."""

    per_kind: dict[str, CosineSummary]
    f1: tuple[TransferRow, ...]
    accuracy: tuple[TransferRow, ...]

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TransferHeadline:
        """The record :meth:`data` wrote; a missing field is refused naming it."""
        return record_from_data(cls, {
            "per_kind": {k: v for k, v in data.items() if k not in _ROW_KEYS},
            **{k: data[k] for k in _ROW_KEYS if k in data}}, cls.__name__)

    def data(self) -> dict:
        """The kinds at the top level, then ``f1`` and ``accuracy``."""
        d = record_data(self)
        return {**d.pop("per_kind"), **d}


@dataclass(frozen=True)
class TransferResult:
    """Everything one transfer run found (its files hold the same): ``layer``/``hook``: the
    cosine views' read-out; ``layers``/``split_by``: each source's transfer read-out per kind
    and split; ``random``: the random null's summary; ``comparisons``: every cell's
    comparators (:class:`~ppairs_lens.evaluation.transfer_fit.Comparisons`)."""

    names: tuple[str, ...]
    layer: int
    hook: str
    layers: dict[str, dict[str, int]]
    split_by: dict[str, str]
    random: dict[str, float]
    per_kind: dict[str, CosineSummary]
    rows: tuple[TransferRow, ...]
    cosine: tuple[dict, ...]
    layer_cosine: tuple[dict, ...]
    comparisons: Any = None

    def headline(self) -> TransferHeadline:
        """The rows at the headline centring: F1, and accuracy of supervised and PCA."""
        head = [r for r in self.rows if r.headline]
        return TransferHeadline(
            self.per_kind, tuple(r for r in head if r.metric == "f1"),
            tuple(r for r in head if r.metric == "accuracy" and r.kind in ("supervised", "pca")))


def transfer_rows(fitted: list[FittedStore], cfg: TransferConfig) -> list[TransferRow]:
    """Every (train, test, kind, center, metric) row, CIs over the target's leak groups."""
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
                        groups_vs_chance = {} if metric != "accuracy" or not chance else {
                            "n_groups": chance["n_groups"],
                            "group_diffs": tuple(chance["group_diffs"])}
                        rows.append(TransferRow(
                            train=src.name, test=dst.name, kind=kind, role="probe",
                            center=center, headline=center == cfg.center_target,
                            in_distribution=same, metric=metric, value=s["value"],
                            lo=s["lo"], hi=s["hi"], ci_counts=held_out_ci_counts(dst.split, s),
                            layer=li, hook=src.hook_names[li], layer_rule=rule,
                            val_value=val, selected_by=src.choices[kind].selected_by,
                            split_by=src.split.split_used, refused=refused or "",
                            n_train=len(src.split.labels_train),
                            n_test=len(dst.split.labels_test), **groups_vs_chance))
    return rows


def cosine_matrix(fitted: list[FittedStore], cfg: TransferConfig
                  ) -> tuple[list[tuple], np.ndarray]:
    """Keys ``(dataset, kind)`` and their signed cosine matrix at the cosine read-out."""
    li = cosine_readout(fitted, cfg)
    keys = [(f.name, k) for f in fitted for k in cfg.kinds]
    mat = np.stack([f.sweep.directions[k][li].numpy() for f in fitted for k in cfg.kinds])
    return keys, cosine(mat[:, None, :], mat[None, :, :])


def cosine_rows(fitted: list[FittedStore], cfg: TransferConfig) -> list[dict]:
    """Cosines of every pair of (dataset, kind) directions and split halves, at the cosine
    read-out."""
    li = cosine_readout(fitted, cfg)
    dirs = {(f.name, k): f.sweep.directions[k][li].numpy() for f in fitted for k in cfg.kinds}
    halves = {(f.name, k): ab for f in fitted for k, ab in f.halves.items()}
    return cosine_pair_rows(dirs, halves, layer=li, hook=fitted[0].hook_names[li])


def layer_cosine_rows(fitted: list[FittedStore], cfg: TransferConfig) -> list[dict]:
    """Per-read-out cosines (adjacent read-outs, between kinds, between datasets) of the kinds
    swept at every read-out (CCS is at one); the last step (block -> final norm) compares two
    bases (the norm rescales each coordinate)."""
    return layer_cosine_table({f.name: {k: f.sweep.directions[k].numpy()
                                        for k in swept_kinds(cfg)}
                               for f in fitted}, fitted[0].hook_names)


def _nanmean(xs) -> float:
    xs = [x for x in xs if x == x]
    return float(np.mean(xs)) if xs else float("nan")


def _agreement(v: Mapping[str, Any]) -> CosineAgreement:
    """An ``agreement_verdicts`` entry (``Verdict.as_dict()`` and in-distribution accuracies)."""
    return CosineAgreement(
        outcome=v["outcome"], reason=v["reason"], rule=v["rule"], evidence=v["evidence"],
        method=v["method"], needed=v["needed"],
        in_distribution={n: None if a is None else InDistributionAccuracy(**a)
                         for n, a in v["in_distribution"].items()})


def summarize(t_rows: list[TransferRow], c_rows: list[dict], ref: dict, cfg: TransferConfig,
              agreements: Mapping[str, Mapping[str, Any]] | None = None
              ) -> dict[str, CosineSummary]:
    """Per kind: mean |cos| between datasets vs the null, mean on/off-diagonal transfer, and
    the directions' agreement verdict where ``agreements`` has one."""
    out = {}
    for k in cfg.kinds:
        pairs = [r for r in c_rows if r["relation"] == "between_datasets" and r["kind_a"] == k]
        between, signed = [r["abs_cos"] for r in pairs], [r["cos"] for r in pairs]
        tr = [r for r in t_rows if r.kind == k and r.metric == cfg.metric]
        halves = [r["abs_cos"] for r in c_rows if r["relation"] == "split_half"
                  and r["kind_a"] == k]
        off = {c: _nanmean(r.value for r in tr if not r.in_distribution and r.center == c)
               for c in CENTERINGS}
        out[k] = CosineSummary(
            mean_abs_cos=_nanmean(between), mean_cos=_nanmean(signed),
            split_half_abs_cos=_nanmean(halves),
            frac_abs_cos_above_07=(float(np.mean(np.array(between) > 0.7))
                                   if between else float("nan")),
            frac_abs_cos_above_null_p95=(float(np.mean(np.array(between) > ref["p95"]))
                                         if between else float("nan")),
            random_mean_abs_cos=ref["mean"], random_p95=ref["p95"], random_p99=ref["p99"],
            in_distribution=_nanmean(r.value for r in tr if r.in_distribution
                                     and r.center == cfg.center_target),
            off_diagonal_target=off["target"], off_diagonal_train=off["train"],
            off_diagonal=off[cfg.center_target],
            agreement=(_agreement(agreements[k]) if agreements and k in agreements
                       else ABSENT))
    return out


def run_transfer(stores: list[ActivationStore], out: str | Path,
                 cfg: TransferConfig | None = None, *, datasets=None, embedding=None,
                 tokenizer=None, judges=None) -> TransferResult:
    """Transfer matrix, cosine tables and per-layer cosines; tables and figures into ``out``.

    The result's ``rows`` hold the probes only, its ``comparisons`` every cell's baselines and
    judges. ``datasets`` (one per store, in order): the records the text baselines read (else
    n/a); ``embedding`` / ``tokenizer``: the model's ``W_E`` and tokenizer, for the
    input-embedding baseline; ``judges``: per dataset name, key -> {pair_id: P(item 1)} of each
    prompted judge (inputs beside the config, never part of it)."""
    cfg = cfg or TransferConfig(stores=[str(s.path) for s in stores])
    cfg.validate()
    check_comparable(stores)
    if cfg.layer is not None:
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
    comp = transfer_comparisons(fitted, cfg,
                                texts=None if datasets is None else dict(zip(names, datasets)),
                                embedding=embedding, tokenizer=tokenizer, judges=judges)
    c_rows = cosine_rows(fitted, cfg)
    l_rows = layer_cosine_rows(fitted, cfg)
    ref = random_reference(stores[0].d_model, cfg.n_random, cfg.settings.seed)
    summary = summarize(t_rows, c_rows, ref, cfg, agreement_verdicts(  # like-for-like nulls
        [(f.name, f.split, f.sweep) for f in fitted], cfg.kinds, li, **cfg.settings.boot_kwargs()))
    ref_public = {k: v for k, v in ref.items() if k != "samples"}
    result = TransferResult(
        names=tuple(names), layer=li, hook=hook, layers=layers, split_by=splits,
        random=ref_public, per_kind=summary, rows=tuple(t_rows), cosine=tuple(c_rows),
        layer_cosine=tuple(l_rows), comparisons=comp)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "transfer.csv", [{k: v for k, v in record_data(r).items()
                                      if k != "group_diffs"} for r in t_rows]
              + comp.csv_rows)
    write_csv(out / "cosine.csv", c_rows)
    write_csv(out / "layer_cosine.csv", l_rows)
    write_json(out / "transfer_summary.json",
               {"model": model, "layer": li, "hook": hook, "datasets": names,
                "layer_rule": layer_rule(cfg.layer), "transfer_layers": layers,
                "split_by": splits, "standardize": cfg.standardize,
                "metric": cfg.metric, "center_target": cfg.center_target,
                "random_reference": ref_public, "per_kind": record_data(summary),
                "comparisons": comp.entries, "refused_cells": comp.refused})
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
    return result


def cli(args, bridge) -> None:
    """``ppairs-lens transfer``: beside every transferred probe the no-model baselines and the
    judges of ``--judges`` (remembered beside the store, as the sweep's are) on the same
    held-out pairs; one table per (training, scored) cell last."""
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data import BUILTIN_NAMES
    from ppairs_lens.data.specs import load_dataset_spec
    from ppairs_lens.judges.held_out import held_out_judge_scores
    from ppairs_lens.judges.run_estimate import announce, plan_held_out_run

    specs = args.datasets or list(BUILTIN_NAMES)
    datasets = [load_dataset_spec(s, max_pairs=args.max_pairs, seed=args.seed) for s in specs]
    split = args.settings.split_kwargs()
    forms = tuple(f for f in dict.fromkeys(getattr(args, "judges", None) or ()) if f != "none")
    limits = dict(getattr(args, "judge_max_pairs", None) or ())
    where = {"template": args.template, "names": args.hooks}
    steps = plan_held_out_run(bridge, datasets, args.stores, split=split, forms=forms,
                              max_pairs=limits, **where)
    announce(bridge, steps, names=args.hooks, measure=not args.no_calibration)
    stores = [ensure_store(bridge, d, args.stores, **where) for d in datasets]
    names = unique_names(stores)
    judges = {n: held_out_judge_scores(bridge, s, d, split=split, forms=forms,
                                       max_pairs=limits)
              for n, s, d in zip(names, stores, datasets)}
    cfg = args.config(TransferConfig, stores=[str(s.path) for s in stores])
    res = run_transfer(stores, args.out, cfg, datasets=datasets,
                       embedding=bridge.W_E.detach(), tokenizer=bridge.tokenizer,
                       judges=judges)
    print_summary(res, cfg)
    print("\n".join(transfer_table_lines(res, cfg)))


def transfer_table_lines(res: TransferResult, cfg: TransferConfig) -> list[str]:
    """One result table per (training -> scored) cell; refused cells with why."""
    comp = res.comparisons
    if comp is None:
        return []
    lines = result_tables(comp.table_rows, comp.entries, test_size=cfg.settings.test_size)
    return lines + [f"{cell}: not scored ({why})" for cell, why in comp.refused.items()]


def main(argv: list[str] | None = None) -> int:
    """Regenerate everything from existing stores (no model)."""
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
        res = run_transfer(stores, args.out, cfg)
        print_summary(res, cfg)
        print("\n".join(transfer_table_lines(res, cfg)))
    except PPairsError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
