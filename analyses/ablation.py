"""Directional ablation: does the model *use* the probe direction? (paper Appendix B)

A probe finding a direction that predicts the model's judgement does not show that the model
uses it. The paper's causal test removes the probe direction ``r`` from the residual stream
while the model runs (vector rejection at every layer and after the final norm) and asks
whether the model's own prompted answer changes. Here, for each dataset:

1. fit every probe kind on the store's *train* split at one read-out (default the last
   block's ``resid_post``) and take their unit directions;
2. on the *test* split (at most ``max_eval_pairs`` records, whole contexts), run the calibrated
   zero-shot evaluator (:func:`ppairs_lens.judges.zero_shot.zero_shot`) with

   * no ablation (the baseline);
   * each probe direction ablated (supervised, unsupervised PCA, mass-mean);
   * ``n_random`` random unit directions ablated: the null distribution of "removing any one
     direction" (reported as each, and as their mean with the 2.5-97.5% range of the deltas);
   * the positive control: the unembedding difference of the two choice tokens rejected at
     ``ln_final.hook_out`` only, which makes the two choice logits equal, so the evaluator
     must sit at p = 0.5 (its ``mean_abs_dev`` = mean |p - 0.5| is ~1e-7, not 0, from float32
     round-off). A control that does nothing would mean the hooks do not reach the output;

   for every ablation ``preset`` (``"paper"``: resid_post + final norm; ``"full"``: embedding,
   every attention and MLP output + final norm; see :mod:`ppairs_lens.interventions.ablation`). Deltas are
   ``metric(ablated) - metric(baseline)`` on the same records, with a paired bootstrap
   (records resampled jointly for both, by context);
3. optionally ("refit"), re-harvest train and test pairs under each ablation and score the
   probes at the ablated read-out and at the final norm's output, both as fitted on clean
   activations (``mode="original"``) and refitted on the ablated ones (``mode="refit"``): a
   refitted probe that recovers means the judgement is still linearly readable in other
   directions, one that falls to chance means the information is gone. A clean probe's
   *accuracy* also drops when an ablation merely shifts every contrast by the same vector
   (its training side means no longer centre the data, so the threshold moves; random
   directions do this); its AUROC, computed on the logits, ignores such a shift.

Metrics per condition (on the evaluator's calibrated P(item 1)):

* ``accuracy``: p within ``tie_tol`` of 0.5 counts half (an exact tie is no answer, and
  scoring it by the ``p >= 0.5`` convention would make the positive control's accuracy the
  fraction of label-1 pairs);
* ``auroc`` (ties, including p within ``tie_tol`` of 0.5, count half), ``p_correct`` (mean
  probability on the gold item);
* ``mean_abs_dev`` (mean |p - 0.5|: how decided the model is), ``tie_fraction``
  (|p - 0.5| <= ``tie_tol``);
* ``p_first_choice``: mean P(first choice token) over both item orders, before calibration
  (the position bias; 0.5 = none), which calibration hides but an ablation can move;
* ``flip_rate`` (fraction of records whose answer differs from the baseline's) and
  ``mean_abs_dp`` (mean |p - p_baseline|): how much the model's judgement changes, gold labels
  aside. For these ``value`` is already a change, so ``delta == value``.

Each row also has ``abs_cos_unembedding``, |cos| between the ablated direction and the
positive control's direction: a diagnostic only (the probe directions live in the residual
stream at their read-out, the unembedding reads after the final norm's gain).

Outputs: ``ablation.csv`` (dataset, preset, condition, metric, value, delta, lo, hi, n, ...),
``ablation_probe_refit.csv``, ``ablation_proba.csv`` (per-record probabilities of every
condition), ``ablation.config.json`` and ``ablation.{png,svg}``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from ppairs_lens.interventions.ablation import (
    FINAL_NORM_HOOK,
    ablation_hook_sets,
    unembedding_direction,
)
from ppairs_lens.errors import PPairsError, ProbeError, StoreError
from ppairs_lens.judges.zero_shot import ZeroShotResult, zero_shot
from ppairs_lens.io.outputs import save_config, save_figure, write_csv
from ppairs_lens.activations.harvest import HarvestSettings, harvest_pairs
from ppairs_lens.evaluation.metrics import auroc, bootstrap_ci
from ppairs_lens.models.loading import model_name
from ppairs_lens.io.plotting import caption, color, label, style
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.activations.prompts import (
    ComparisonTemplate,
    StatementTemplate,
    Template,
    build_contrast_pairs,
    template_hash,
)
from ppairs_lens.data.records import TIE, Dataset
from ppairs_lens.evaluation.splits import train_test_split_pairs
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.specs import subsample_by_context
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep

from .layer_sweep import split_store

__all__ = ["AblationConfig", "ablate_store", "run_ablation", "plot_ablation", "replot",
           "read_rows", "condition_rows", "random_directions", "summary_lines", "cli",
           "CONDITION_ORDER"]

BASELINE = "none"
CONTROL = "unembedding"
RANDOM_NULL = "random"
#: Metrics whose value is itself a change from the baseline (delta == value).
CHANGE_METRICS = ("flip_rate", "mean_abs_dp")
#: Order of conditions in tables and figures (random_XX in between, then the summary row).
CONDITION_ORDER = (BASELINE, *PROBE_KINDS, RANDOM_NULL, CONTROL)


@dataclass
class AblationConfig:
    """What an ablation analysis ran on; saved beside its results."""

    stores: list[str]
    datasets: list[str] = field(default_factory=list)  # dataset names, one per store
    layer: int | None = None  # read-out of the directions; None = n_layers - 1 (last resid_post)
    presets: tuple[str, ...] = ("paper", "full")
    positions: str = "all"  # "all" | "last" (the read-out token only)
    kinds: tuple[str, ...] = PROBE_KINDS
    n_random: int = 10
    seed: int = 0
    n_boot: int = 300
    test_size: float = 0.3
    split_by: str = "context"
    C: float = 1.0
    max_eval_pairs: int | None = 60  # test records run through the evaluator (whole contexts)
    # |p - 0.5| <= tie_tol is "no answer" (half credit, tie_fraction). About the float32
    # round-off of the two choice logits (the positive control lands within ~1e-6 of 0.5); a
    # small model's calibrated answers can sit within 1e-3 of 0.5, so do not make it coarse.
    tie_tol: float = 1e-5
    refit: bool = True
    max_refit_train: int | None = 120  # train pairs re-harvested per ablation for the refit
    refit_random: int = 1  # random directions also re-harvested (a null for the refit)
    plot_metrics: tuple[str, ...] = ("accuracy", "mean_abs_dp")  # one figure row each
    token_budget: int | None = None  # None: by device (harvest.default_token_budget)
    timings: dict[str, float] = field(default_factory=dict)  # filled in: seconds per dataset
    model: str = ""  # filled in: the model's name


# --------------------------------------------------------------------------------------------
# Metrics on targets y (1 = item 1 preferred, 0 = item 2) and P(item 1)
# --------------------------------------------------------------------------------------------

def _answer(p: np.ndarray, tol: float) -> np.ndarray:
    """1 (item 1), 0 (item 2) or 0.5 (no answer: p within ``tol`` of 0.5)."""
    return np.where(np.abs(p - 0.5) <= tol, 0.5, (p > 0.5).astype(float))


def _metric_fns(tol: float) -> dict[str, Callable[[np.ndarray, np.ndarray], float]]:
    def acc(y, p):
        a = _answer(p, tol)
        return float(np.mean(np.where(a == 0.5, 0.5, a == y)))

    return {
        "accuracy": acc,
        "auroc": lambda y, p: auroc(y, np.where(np.abs(p - 0.5) <= tol, 0.5, p)),
        "p_correct": lambda y, p: float(np.mean(np.where(y == 1, p, 1.0 - p))),
        "mean_abs_dev": lambda y, p: float(np.mean(np.abs(p - 0.5))),
        "tie_fraction": lambda y, p: float(np.mean(np.abs(p - 0.5) <= tol)),
    }


def _change_fns(tol: float) -> dict[str, Callable[[np.ndarray, np.ndarray], float]]:
    """Functions of (y, [p_base, p_cond]) measuring how the answers moved."""
    return {
        "flip_rate": lambda y, s: float(np.mean(_answer(s[:, 0], tol) != _answer(s[:, 1], tol))),
        "mean_abs_dp": lambda y, s: float(np.mean(np.abs(s[:, 1] - s[:, 0]))),
    }


def condition_rows(y: np.ndarray, p_base: np.ndarray, p_cond: np.ndarray, groups: list,
                   *, tol: float, n_boot: int, seed: int,
                   first_base: np.ndarray | None = None, first_cond: np.ndarray | None = None
                   ) -> list[dict]:
    """``{metric, value, delta, lo, hi, value_lo, value_hi}`` for one condition.

    ``lo``/``hi`` bound the *delta* by a paired bootstrap (the same resampled records, by
    context, for baseline and condition); ``value_lo``/``value_hi`` bound the value itself.
    The same ``seed`` gives every condition the same resamples. ``first_base`` /
    ``first_cond`` (optional) are P(first choice token) per record, averaged over both item
    orders: their mean is the metric ``p_first_choice`` (the position bias; 0.5 = none).
    """
    both = np.stack([p_base, p_cond], axis=1)
    fns = dict(_metric_fns(tol))
    if first_base is not None and first_cond is not None:
        fns["p_first_choice"] = None  # computed from the first-choice arrays below
    out = []
    for name, fn in fns.items():
        if name == "p_first_choice":
            arr = np.stack([first_base, first_cond, first_base, first_cond], axis=1)
            f1 = lambda yy, q: float(np.mean(q[:, 1]))  # noqa: E731
            f0 = lambda yy, q: float(np.mean(q[:, 0]))  # noqa: E731
        else:
            arr, f1, f0 = both, (lambda yy, q, fn=fn: fn(yy, q[:, 1])), \
                (lambda yy, q, fn=fn: fn(yy, q[:, 0]))
        val = bootstrap_ci(f1, y, arr, n_boot=n_boot, seed=seed, groups=groups)
        dlt = bootstrap_ci(lambda yy, q, f1=f1, f0=f0: f1(yy, q) - f0(yy, q), y, arr,
                           n_boot=n_boot, seed=seed, groups=groups)
        out.append({"metric": name, "value": val["value"], "delta": dlt["value"],
                    "lo": dlt["lo"], "hi": dlt["hi"], "value_lo": val["lo"],
                    "value_hi": val["hi"]})
    for name, fn in _change_fns(tol).items():
        ch = bootstrap_ci(fn, y, both, n_boot=n_boot, seed=seed, groups=groups)
        out.append({"metric": name, "value": ch["value"], "delta": ch["value"], "lo": ch["lo"],
                    "hi": ch["hi"], "value_lo": ch["lo"], "value_hi": ch["hi"]})
    return out


# --------------------------------------------------------------------------------------------
# Store <-> dataset plumbing
# --------------------------------------------------------------------------------------------

def store_template(store: ActivationStore) -> Template:
    """The prompt template a store was harvested with, rebuilt from its metadata."""
    desc = dict(store.meta["template"])
    kind = desc.pop("kind")
    cls = ComparisonTemplate if kind == "comparison" else StatementTemplate
    if "choices" in desc:
        desc["choices"] = tuple(desc["choices"])
    template = cls(**desc)
    if template_hash(template) != store.meta["template_hash"]:
        raise StoreError(f"{store.path}: cannot rebuild the store's prompt template from its "
                         "metadata (hash mismatch)")
    return template


def _check_match(bridge, store: ActivationStore, dataset: Dataset) -> None:
    if store.meta["model"] != model_name(bridge):
        raise StoreError(f"{store.path} was harvested with model {store.meta['model']!r}, but "
                         f"the ablation runs {model_name(bridge)!r}")
    if store.meta["dataset_fingerprint"] != dataset.fingerprint():
        raise StoreError(f"{store.path} holds dataset {store.meta['dataset']!r} "
                         f"(fingerprint {store.meta['dataset_fingerprint']}), not the records of "
                         f"{dataset.name!r} ({dataset.fingerprint()}); pass the dataset the "
                         "store was harvested from")
    ids = [p["pair_id"] for p in store.pairs()]
    if ids != [r.pair_id for r in dataset.records]:
        raise StoreError(f"{store.path}: pair ids differ from the dataset's records")


def _subset(dataset: Dataset, ids: Sequence[str], name: str) -> Dataset:
    keep = set(ids)
    return replace(dataset, name=name, records=[r for r in dataset.records if r.pair_id in keep])


def _split_ids(store: ActivationStore, cfg: AblationConfig, test_ids: list[str]) -> list[str]:
    """Train pair ids of the split :func:`split_store` made (same call, same seed)."""
    pairs = [p for p in store.pairs() if p["label"] != TIE]
    contexts = [p["context_id"] for p in pairs]
    items = ([(p.get("item1_id"), p.get("item2_id")) for p in pairs]
             if cfg.split_by == "item" else None)
    train, test = train_test_split_pairs(contexts, item_ids=items, test_size=cfg.test_size,
                                         seed=cfg.seed, by=cfg.split_by)
    if [pairs[i]["pair_id"] for i in test] != test_ids:
        raise RuntimeError("train/test split differs from split_store's")  # a bug, not user error
    return [pairs[i]["pair_id"] for i in train]


def _choice_ids(bridge, dataset: Dataset, template: Template) -> tuple[int, int]:
    finals = {p.final_ids for p in build_contrast_pairs(bridge.tokenizer, dataset, template)}
    if len(finals) != 1:
        raise PPairsError(f"{dataset.name}: the choice tokens differ between records "
                          f"({sorted(finals)[:3]}); the positive control needs one pair")
    return next(iter(finals))


def random_directions(n: int, d: int, seed: int) -> torch.Tensor:
    """``n`` unit directions uniform on the sphere (own generator; no global RNG)."""
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(n, d, generator=g, dtype=torch.float64)
    return (r / r.norm(dim=-1, keepdim=True)).float()


# --------------------------------------------------------------------------------------------
# One dataset
# --------------------------------------------------------------------------------------------

def ablate_store(bridge, store: ActivationStore, dataset: Dataset,
                 cfg: AblationConfig | None = None, *, log: Callable[[str], None] = print
                 ) -> tuple[list[dict], list[dict], list[dict]]:
    """Rows of ``ablation.csv``, ``ablation_probe_refit.csv`` and ``ablation_proba.csv``
    (per-record probabilities under each condition) for one store.

    ``dataset`` is the one the store was harvested from (checked by fingerprint): the
    evaluator needs the records' text, the store only has activations.
    """
    cfg = cfg or AblationConfig(stores=[str(store.path)])
    if cfg.positions not in ("all", "last"):
        raise PPairsError(f"positions must be 'all' or 'last', got {cfg.positions!r}")
    if cfg.n_random < 1:
        raise PPairsError("n_random must be at least 1 (the null distribution)")
    _check_match(bridge, store, dataset)
    template = store_template(store)
    settings = HarvestSettings(token_budget=cfg.token_budget)
    n_layers = int(store.meta["n_layers"])
    layer = n_layers - 1 if cfg.layer is None else cfg.layer % store.n_readouts
    final = store.n_readouts - 1
    readouts = [layer] if layer == final else [layer, final]
    hooks_of = store.hook_names
    name = store.meta["dataset"]

    # -- probes on the clean train split, at the read-out and the final norm ------------------
    sp = split_store(store, test_size=cfg.test_size, split_by=cfg.split_by, seed=cfg.seed,
                     layers=readouts)
    test_ids = [p["pair_id"] for p in sp.pairs_test]
    train_ids = _split_ids(store, cfg, test_ids)
    probes = fit_sweep(sp.acts_train, sp.labels_train, cfg.kinds, C=cfg.C, layers=readouts,
                       model_name=store.meta["model"])
    directions: dict[str, torch.Tensor] = {}
    for k in cfg.kinds:
        if bool(probes.degenerate[k][0]):
            warnings.warn(f"{name}: the {k} probe is degenerate at read-out {layer}; skipped")
            continue
        directions[k] = torch.from_numpy(probes.to_probe(k, 0).direction_).float()
    rand = random_directions(cfg.n_random, store.d_model, cfg.seed)
    for i in range(cfg.n_random):
        directions[f"random_{i:02d}"] = rand[i]
    choice = _choice_ids(bridge, dataset, template)
    u = unembedding_direction(bridge, *choice)

    # -- the evaluator on (a bounded part of) the test split ------------------------------------
    test_ds = subsample_by_context(_subset(dataset, test_ids, f"{dataset.name}:test"),
                                   cfg.max_eval_pairs, cfg.seed)
    labels = np.asarray(test_ds.labels())
    y = (labels == 1).astype(float)
    groups = list(test_ds.context_ids())
    n = len(test_ds)

    def run(hooks, final_hooks) -> ZeroShotResult:
        return zero_shot(bridge, test_ds, template, hooks=hooks, final_hooks=final_hooks,
                         settings=settings)

    t0 = time.perf_counter()
    p_base = run((), ())
    log(f"{name}: baseline on {n} test records ({time.perf_counter() - t0:.1f} s)")
    ctrl_hooks = ablation_hook_sets(bridge, u, [FINAL_NORM_HOOK], cfg.positions)
    p_ctrl = run(*ctrl_hooks)
    probs: dict[tuple[str, str], ZeroShotResult] = {}
    for preset in cfg.presets:
        t1 = time.perf_counter()
        for cond, r in directions.items():
            probs[preset, cond] = run(*ablation_hook_sets(bridge, r, preset, cfg.positions))
        log(f"{name}: preset {preset!r}, {len(directions)} directions "
            f"({time.perf_counter() - t1:.1f} s)")

    kw = dict(tol=cfg.tie_tol, n_boot=cfg.n_boot, seed=cfg.seed)
    cos_u = {c: float(abs(r @ u)) for c, r in directions.items()}
    rows: list[dict] = []
    proba_rows: list[dict] = []

    def add(preset, cond, kind, hooks_desc, res, extra=None):
        if kind in ("probe", "random"):
            proba_rows.extend(_proba_rows(name, preset, cond, test_ds, res))
        elif preset == cfg.presets[0]:  # the same run serves every preset: write it once
            proba_rows.extend(_proba_rows(name, "", cond, test_ds, res))
        for m in condition_rows(y, p_base.p, res.p, groups, first_base=_first(p_base),
                                first_cond=_first(res), **kw):
            rows.append({"dataset": name, "preset": preset, "condition": cond, **m, "n": n,
                         "kind": kind, "hooks": hooks_desc, "layer": layer,
                         "hook": hooks_of[layer] if kind in ("probe", "random") else "",
                         "abs_cos_unembedding": cos_u.get(cond, 1.0 if cond == CONTROL else
                                                          float("nan")),
                         "positions": cfg.positions, **(extra or {})})

    for preset in cfg.presets:
        add(preset, BASELINE, "baseline", "", p_base)
        for cond in directions:
            kind = "random" if cond.startswith("random_") else "probe"
            add(preset, cond, kind, preset, probs[preset, cond])
        add(preset, CONTROL, "control", FINAL_NORM_HOOK, p_ctrl)
    rows += _random_summary(rows)

    refit_rows: list[dict] = []
    if cfg.refit:
        t2 = time.perf_counter()
        refit_rows = _refit(bridge, store, dataset, template, cfg, probes, readouts, train_ids,
                            test_ds, directions, u, settings)
        log(f"{name}: probe refit ({time.perf_counter() - t2:.1f} s)")
    return rows, refit_rows, proba_rows


def _first(res: ZeroShotResult) -> np.ndarray:
    """P(first choice token) per record, averaged over both item orders when calibrated."""
    if res.p_swapped is None:
        return res.p_original
    return 0.5 * (res.p_original + res.p_swapped)


def _proba_rows(name: str, preset: str, cond: str, ds: Dataset, res: ZeroShotResult
                ) -> list[dict]:
    sw = res.p_swapped if res.p_swapped is not None else [None] * len(ds)
    return [{"dataset": name, "preset": preset, "condition": cond, "pair_id": r.pair_id,
             "label": lab, "p": float(p), "p_original": float(po),
             "p_swapped": None if ps is None else float(ps)}
            for r, lab, p, po, ps in zip(ds.records, ds.labels(), res.p, res.p_original, sw)]


def _random_summary(rows: list[dict]) -> list[dict]:
    """Per (dataset, preset, metric): mean of the random directions' rows, with the 2.5-97.5%
    range of their deltas as ``lo``/``hi`` (a null band, not a confidence interval)."""
    out = []
    keys = dict.fromkeys((r["dataset"], r["preset"], r["metric"]) for r in rows
                         if r["kind"] == "random")
    for ds, preset, metric in keys:
        rs = [r for r in rows if r["kind"] == "random" and r["dataset"] == ds
              and r["preset"] == preset and r["metric"] == metric]
        d = np.array([r["delta"] for r in rs], dtype=float)
        v = np.array([r["value"] for r in rs], dtype=float)
        lo, hi = np.nanquantile(d, [0.025, 0.975])
        out.append({**rs[0], "condition": RANDOM_NULL, "kind": "random_null",
                    "value": float(np.nanmean(v)), "delta": float(np.nanmean(d)),
                    "lo": float(lo), "hi": float(hi), "value_lo": float(np.nanmin(v)),
                    "value_hi": float(np.nanmax(v)), "n_directions": len(rs),
                    "abs_cos_unembedding": float(np.nanmean([r["abs_cos_unembedding"]
                                                             for r in rs]))})
    return out


# --------------------------------------------------------------------------------------------
# The probes under ablation
# --------------------------------------------------------------------------------------------

def _logit_accuracy(y: np.ndarray, z: np.ndarray) -> float:
    return float(np.mean((z >= 0) == (y == 1)))


def _score_probes(sweep: SweepProbes, acts: torch.Tensor, labels: np.ndarray, groups: list,
                  cfg: AblationConfig) -> dict[tuple[str, int], dict]:
    """``{(kind, readout position): {accuracy, auroc}}`` of a sweep over the read-outs.

    AUROC is computed on the logits, not the probabilities: under an ablation a clean probe's
    logits can shift far enough for every probability to round to 0 or 1, which would make
    every pair a tie. Accuracy is ``logit >= 0``.
    """
    logits = sweep.decision_function(acts)
    y = (np.asarray(labels) == 1).astype(float)
    kw = dict(n_boot=cfg.n_boot, seed=cfg.seed, groups=groups)
    out = {}
    for k in sweep.kinds:
        for j in range(sweep.n_layers):
            z = logits[k][j]
            if not np.isfinite(z).all():
                continue  # a degenerate read-out: nothing to score
            out[k, j] = {"accuracy": bootstrap_ci(_logit_accuracy, y, z, **kw),
                         "auroc": bootstrap_ci(auroc, y, z, **kw)}
    return out


def _refit(bridge, store, dataset, template, cfg, probes, readouts, train_ids, test_ds,
           directions, u, settings) -> list[dict]:
    """Probe accuracy on activations harvested under each ablation (see the module doc)."""
    name = store.meta["dataset"]
    train_ds = subsample_by_context(_subset(dataset, train_ids, f"{dataset.name}:train"),
                                    cfg.max_refit_train, cfg.seed)
    train_ds = replace(train_ds, records=[r for r, l in zip(train_ds.records, train_ds.labels())
                                          if l != TIE])
    both = replace(train_ds, records=train_ds.records + test_ds.records)
    pairs = build_contrast_pairs(bridge.tokenizer, both, template)
    n_tr, n_te = len(train_ds), len(test_ds)
    y_tr, y_te = np.asarray(train_ds.labels()), np.asarray(test_ds.labels())
    groups = list(test_ds.context_ids())
    row_of = {p["pair_id"]: i for i, p in enumerate(store.pairs())}
    clean = store.load(readouts)[[row_of[r.pair_id] for r in both.records]]

    conds: list[tuple[str, list[str], object]] = [(BASELINE, list(cfg.presets), None)]
    rand = [c for c in directions if c.startswith("random_")][:cfg.refit_random]
    for preset in cfg.presets:
        conds += [(c, [preset], (directions[c], preset))
                  for c in [*(k for k in cfg.kinds if k in directions), *rand]]
    conds.append((CONTROL, list(cfg.presets), (u, [FINAL_NORM_HOOK])))

    results: dict[str, dict] = {}
    rows = []
    for cond, presets, spec in conds:
        if spec is None:
            acts = clean
        else:
            r, points = spec
            hooks, final_hooks = ablation_hook_sets(bridge, r, points, cfg.positions)
            acts = harvest_pairs(bridge, pairs, settings, hooks=hooks,
                                 final_hooks=final_hooks)[:, :, readouts]
        a_tr, a_te = acts[:n_tr], acts[n_tr:]
        scored = {"original": _score_probes(probes, a_te, y_te, groups, cfg)}
        try:
            refit = fit_sweep(a_tr, y_tr, cfg.kinds, C=cfg.C, layers=readouts)
            scored["refit"] = _score_probes(refit, a_te, y_te, groups, cfg)
        except ProbeError as e:
            warnings.warn(f"{name}: refit under {cond} failed: {e}")
        for mode, res in scored.items():
            for (kind, j), metrics in res.items():
                for metric, s in metrics.items():
                    ref = results.get((BASELINE, mode, kind, j, metric))
                    for preset in presets:
                        rows.append({
                            "dataset": name, "preset": preset, "condition": cond, "mode": mode,
                            "probe_kind": kind, "layer": readouts[j],
                            "hook": store.hook_names[readouts[j]], "metric": metric,
                            "value": s["value"], "lo": s["lo"], "hi": s["hi"],
                            "delta_vs_clean": (s["value"] - ref if ref is not None else 0.0),
                            "n_train": n_tr, "n_test": n_te,
                            "hooks": (FINAL_NORM_HOOK if cond == CONTROL else
                                      "" if cond == BASELINE else preset),
                        })
                    if cond == BASELINE:
                        results[BASELINE, mode, kind, j, metric] = s["value"]
    return rows


# --------------------------------------------------------------------------------------------
# Figure and driver
# --------------------------------------------------------------------------------------------

def _short(cond: str) -> str:
    if cond == RANDOM_NULL:
        return "random directions (null)"
    if cond == CONTROL:
        return "positive control:\nunembedding diff @ ln_final"
    return label(cond)


_XLABEL = {
    "accuracy": "Δ accuracy (ablated − baseline)",
    "mean_abs_dp": "mean |p − p_baseline|",
    "flip_rate": "fraction of answers flipped",
}


def plot_ablation(rows: list[dict], cfg: AblationConfig, model: str):
    """Per dataset x plotted metric (rows) and preset (columns): the change of the metric
    under each condition with its paired CI, the random-direction band, the positive control."""
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    metrics = [m for m in cfg.plot_metrics if any(r["metric"] == m for r in rows)]
    presets = [p for p in cfg.presets if any(r["preset"] == p for r in rows)]
    conds = [c for c in (*cfg.kinds, RANDOM_NULL, CONTROL)
             if any(r["condition"] == c for r in rows)]
    panels = [(ds, m) for ds in datasets for m in metrics]
    with style():
        fig, axes = plt.subplots(len(panels), len(presets),
                                 figsize=(4.3 * len(presets), (0.42 * len(conds) + 1.1)
                                          * len(panels) + 0.3),
                                 squeeze=False, sharey=True)
        for i, (ds, metric) in enumerate(panels):
            sel = {(r["preset"], r["condition"]): r for r in rows
                   if r["dataset"] == ds and r["metric"] == metric}
            for j, preset in enumerate(presets):
                ax = axes[i, j]
                base = sel.get((preset, BASELINE))
                null = sel.get((preset, RANDOM_NULL))
                if null:
                    ax.axvspan(null["lo"], null["hi"], color=color("random"), alpha=0.25, lw=0,
                               label="random directions: 2.5-97.5%")
                    rs = [r["delta"] for r in rows if r["dataset"] == ds and r["preset"] == preset
                          and r["metric"] == metric and r["kind"] == "random"]
                    yk = conds.index(RANDOM_NULL)
                    ax.scatter(rs, [yk] * len(rs), s=9, color=color("random"), zorder=3,
                               edgecolor="k", linewidth=0.3)
                ax.axvline(0, color="k", lw=0.7)
                if base and metric in ("accuracy", "auroc"):
                    ax.axvline(0.5 - base["value"], color="k", ls=":", lw=0.9,
                               label="chance (Δ to 0.5)")
                for yk, c in enumerate(conds):
                    r = sel.get((preset, c))
                    if not r:
                        continue
                    err = [[max(r["delta"] - r["lo"], 0)], [max(r["hi"] - r["delta"], 0)]]
                    if c == CONTROL:
                        ax.errorbar(r["delta"], yk, xerr=err, fmt="*", ms=10, color="#000000",
                                    mfc="#ff7f0e", capsize=2, zorder=4)
                        if metric not in CHANGE_METRICS:
                            dev = next(
                                (q["value"] for q in rows if q["dataset"] == ds
                                 and q["preset"] == preset and q["condition"] == CONTROL
                                 and q["metric"] == "mean_abs_dev"), float("nan"))
                            ax.annotate(f"mean |p−0.5| = {dev:.1e}", (r["delta"], yk),
                                        xytext=(0, 7), textcoords="offset points", fontsize=7,
                                        ha="center")
                    elif c == RANDOM_NULL:
                        ax.errorbar(r["delta"], yk, fmt="|", ms=12, color="#555555", zorder=4)
                    else:
                        ax.errorbar(r["delta"], yk, xerr=err, fmt="o", ms=5, color=color(c),
                                    capsize=2, zorder=4)
                ax.set_yticks(range(len(conds)), [_short(c) for c in conds])
                ax.set_ylim(len(conds) - 0.5, -0.5)  # first condition on top
                if metric in ("accuracy", "auroc"):
                    lo_x, hi_x = ax.get_xlim()
                    ax.set_xlim(min(lo_x, -0.05), max(hi_x, 0.05))
                ax.set_xlabel(_XLABEL.get(metric, f"Δ {metric} (ablated − baseline)"))
                btxt = ""
                if base and metric not in CHANGE_METRICS:
                    btxt = (f"\nbaseline {metric} {base['value']:.3f} [{base['value_lo']:.3f}, "
                            f"{base['value_hi']:.3f}], n={int(base['n'])}")
                ax.set_title(f"{ds} · preset '{preset}'{btxt}")
        handles, labels_ = axes[0, 0].get_legend_handles_labels()
        fig.suptitle(f"Directional ablation of probe directions — {model}", y=1.05)
        fig.tight_layout()
        if handles:
            fig.legend(handles, labels_, loc="lower center", ncol=len(handles), frameon=False,
                       bbox_to_anchor=(0.5, 0.985))
        layer = next((r["hook"] for r in rows if r["hook"]), "")
        caption(fig, f"Calibrated zero-shot evaluator on held-out pairs; directions fitted on "
                     f"the train split at {layer or 'read-out L-1'}; ablated at "
                     f"{'every position' if cfg.positions == 'all' else 'the read-out token'}. "
                     f"'paper': every resid_post + ln_final; 'full': embedding, every attn/MLP "
                     f"output + ln_final. Bars: 95% paired bootstrap CIs by context "
                     f"({cfg.n_boot} resamples). Band: 2.5-97.5% of {cfg.n_random} random unit "
                     f"directions (dots). Positive control (star): the two choice tokens' "
                     f"unembedding difference removed after the final norm only (same run in "
                     f"both columns). Ties (|p−0.5| <= {cfg.tie_tol:g}) score half.")
    return fig


def run_ablation(bridge, items: Sequence[tuple[ActivationStore, Dataset]], out: str | Path,
                 cfg: AblationConfig | None = None, *, log: Callable[[str], None] = print
                 ) -> tuple[list[dict], list[dict]]:
    """Ablate on every (store, dataset); write the tables, figure and config to ``out``.

    Returns the rows of ``ablation.csv`` and of ``ablation_probe_refit.csv``.
    """
    cfg = cfg or AblationConfig(stores=[str(s.path) for s, _ in items])
    if not cfg.datasets:
        cfg.datasets = [d.name for _, d in items]
    cfg.model = model_name(bridge)
    out = Path(out)
    rows: list[dict] = []
    refit_rows: list[dict] = []
    proba_rows: list[dict] = []
    for store, dataset in items:
        t0 = time.perf_counter()
        r, rr, pr = ablate_store(bridge, store, dataset, cfg, log=log)
        cfg.timings[store.meta["dataset"]] = round(time.perf_counter() - t0, 1)
        rows += r
        refit_rows += rr
        proba_rows += pr
    write_csv(out / "ablation.csv", rows)
    write_csv(out / "ablation_proba.csv", proba_rows)
    if refit_rows:
        write_csv(out / "ablation_probe_refit.csv", refit_rows)
    save_config(out, "ablation", cfg)
    fig = plot_ablation(rows, cfg, model_name(bridge))
    save_figure(fig, out, "ablation")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return rows, refit_rows


def read_rows(path: str | Path) -> list[dict]:
    """Rows of a written ``ablation.csv``, numbers as numbers (empty cells as NaN)."""
    import csv

    text_cols = {"dataset", "preset", "condition", "metric", "kind", "hooks", "hook",
                 "positions", "mode", "probe_kind"}
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            rows.append({k: v if k in text_cols else (float(v) if v != "" else float("nan"))
                         for k, v in r.items()})
    return rows


def replot(out: str | Path, model: str | None = None) -> list[Path]:
    """Redraw ``ablation.{png,svg}`` in ``out`` from its ``ablation.csv`` and config."""
    from ppairs_lens.io.outputs import load_config

    out = Path(out)
    rows = read_rows(out / "ablation.csv")
    cfg = load_config(AblationConfig, out / "ablation.config.json")
    fig = plot_ablation(rows, cfg, model if model is not None else cfg.model)
    paths = save_figure(fig, out, "ablation")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return paths


def summary_lines(rows: list[dict], metric: str = "accuracy") -> list[str]:
    """One line per (dataset, preset, condition) of ``metric``: value and delta with CI."""
    lines = []
    for r in rows:
        if r["metric"] != metric or r["kind"] == "random":
            continue
        rng = "range" if r["condition"] == RANDOM_NULL else "CI"
        lines.append(f"{r['dataset']:24s} {r['preset']:6s} {r['condition']:12s} "
                     f"{metric} {r['value']:.3f}  delta {r['delta']:+.3f} "
                     f"{rng} [{r['lo']:+.3f}, {r['hi']:+.3f}]")
    return lines


def cli(args) -> None:
    import torch as _torch

    from ppairs_lens.models.loading import load_model
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data.specs import load_dataset_spec

    specs = args.datasets or ["larger_number", "capital_true"]
    bridge = load_model(args.model, dtype=getattr(_torch, getattr(args, "dtype", "float32")),
                        device=getattr(args, "device", None))
    items = []
    for s in specs:
        ds = load_dataset_spec(s, max_pairs=args.max_pairs, seed=args.seed)
        items.append((ensure_store(bridge, ds, args.stores), ds))
    cfg = AblationConfig(stores=[str(st.path) for st, _ in items], datasets=list(specs),
                         seed=args.seed)
    if getattr(args, "quick", False):
        cfg = replace(cfg, max_eval_pairs=24, n_boot=100, max_refit_train=24)
    rows, _ = run_ablation(bridge, items, args.out, cfg)
    for line in summary_lines(rows):
        print(line)
