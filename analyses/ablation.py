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
   every attention and MLP output + final norm; see :mod:`ppairs_lens.interventions.ablation`).
   Deltas are ``metric(ablated) - metric(baseline)`` on the same records, with a paired
   bootstrap (records resampled jointly for both, by context);
3. optionally ("refit"), re-harvest train and test pairs under each ablation and score the
   probes at the ablated read-out and at the final norm's output, both as fitted on clean
   activations (``mode="original"``) and refitted on the ablated ones (``mode="refit"``): a
   refitted probe that recovers means the judgement is still linearly readable in other
   directions, one that falls to chance means the information is gone. A clean probe's
   *accuracy* also drops when an ablation merely shifts every contrast by the same vector
   (its training side means no longer centre the data, so the threshold moves; random
   directions do this); its AUROC, computed on the logits, ignores such a shift.

Metrics per condition (on the evaluator's calibrated P(item 1)) and their paired-bootstrap
changes from the baseline: :mod:`ppairs_lens.evaluation.answer_change` (accuracy, AUROC,
p_correct, mean |p - 0.5|, tie fraction, P(first choice token), flip rate, mean |dp|).

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

from analyses.ablation_plots import plot_ablation, read_rows, summary_lines
from ppairs_lens.activations.harvest import HarvestSettings, harvest_pairs
from ppairs_lens.activations.pipeline import check_store_matches, store_template
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.activations.store_sets import readout_index
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import TIE, Dataset
from ppairs_lens.data.specs import subsample_by_context
from ppairs_lens.errors import PPairsError, ProbeError
from ppairs_lens.evaluation.answer_change import BASELINE, CONTROL, RANDOM_NULL, condition_rows
from ppairs_lens.evaluation.store_split import split_store
from ppairs_lens.evaluation.sweep_scores import score_sweep_logits
from ppairs_lens.interventions.ablation import ablation_hook_sets
from ppairs_lens.interventions.directions import choice_unembedding_direction, random_directions
from ppairs_lens.io.outputs import save_config, save_figure, write_csv
from ppairs_lens.judges.zero_shot import ZeroShotResult, zero_shot
from ppairs_lens.models.hook_points import FINAL_NORM_HOOK
from ppairs_lens.models.loading import model_name
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["AblationConfig", "ablate_store", "run_ablation", "replot", "cli"]


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


def _subset(dataset: Dataset, ids: Sequence[str], name: str) -> Dataset:
    keep = set(ids)
    return replace(dataset, name=name, records=[r for r in dataset.records if r.pair_id in keep])


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
    check_store_matches(bridge, store, dataset)
    template = store_template(store)
    settings = HarvestSettings(token_budget=cfg.token_budget)
    n_layers = int(store.meta["n_layers"])
    layer = n_layers - 1 if cfg.layer is None else readout_index(cfg.layer, store.n_readouts)
    final = store.n_readouts - 1
    readouts = [layer] if layer == final else [layer, final]
    hooks_of = store.hook_names
    name = store.meta["dataset"]

    # -- probes on the clean train split, at the read-out and the final norm ------------------
    sp = split_store(store, test_size=cfg.test_size, split_by=cfg.split_by, seed=cfg.seed,
                     layers=readouts)
    test_ids = [p["pair_id"] for p in sp.pairs_test]
    train_ids = [p["pair_id"] for p in sp.pairs_train]
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
    u = choice_unembedding_direction(bridge, dataset, template)

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

    boot = dict(n_boot=cfg.n_boot, seed=cfg.seed)
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
        scored = {"original": score_sweep_logits(probes, a_te, y_te, groups, **boot)}
        try:
            refit = fit_sweep(a_tr, y_tr, cfg.kinds, C=cfg.C, layers=readouts)
            scored["refit"] = score_sweep_logits(refit, a_te, y_te, groups, **boot)
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


def cli(args, bridge=None) -> None:
    """``ppairs-lens ablate``; ``bridge``: the model (default: ``--model``, after the datasets)."""
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data.specs import load_dataset_spec
    from ppairs_lens.models.loading import load_model

    specs = args.datasets or ["larger_number", "capital_true"]
    datasets = [load_dataset_spec(s, max_pairs=args.max_pairs, seed=args.seed) for s in specs]
    if bridge is None:
        bridge = load_model(args.model, dtype=getattr(torch, args.dtype), device=args.device,
                            device_map=args.device_map, backend=args.backend)
    items = [(ensure_store(bridge, ds, args.stores, template=args.template), ds)
             for ds in datasets]
    cfg = AblationConfig(stores=[str(st.path) for st, _ in items], datasets=list(specs),
                         seed=args.seed, layer=args.layer, n_random=args.n_random,
                         split_by=args.split)
    if getattr(args, "quick", False):
        cfg = replace(cfg, max_eval_pairs=24, n_boot=100, max_refit_train=24)
    rows, _ = run_ablation(bridge, items, args.out, cfg)
    for line in summary_lines(rows):
        print(line)
