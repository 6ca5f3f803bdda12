"""Directional ablation: does the model *use* the probe direction? (paper Appendix B)

A probe direction that predicts the judgement does not show that the model uses it; removing it
should move the model's own prompted judgement more than removing a direction that is not
special. Per dataset, probe directions (every kind, at the read-out chosen on a validation split
of the training data, never the test split) are removed while the swap-calibrated zero-shot
judge answers the test records, **at the judge's read-out token only** (``positions="last"``;
the probes are read at the contrast token, the judge decides at the token before:
``ablate(positions="all")`` is the check), all directions in one pass. Against: isotropic and
variance-matched random directions (the nulls), and the choice tokens' unembedding difference
as positive control, in the same preset and at the probes' read-out hook only. Effect = mean
|z - z_base| in the judge's calibrated log-odds, permutation p-values against each null (Holm
over the run's probe tests), and paired CIs over leak groups. ``refit`` rescores the probes on
re-harvested activations.

Outputs: ``ablation.csv`` (dataset x preset x condition), ``ablation_null.csv`` (every null
direction's effect), ``ablation_z.csv`` (per-record log-odds), ``ablation_probe_refit.csv``
(with ``refit``), ``ablation.config.json``, ``ablation_run.json`` (what the run found:
:class:`AblationRun`) and ``ablation.{png,svg}``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from analyses.ablation_plots import plot_ablation, read_rows, summary_lines
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.pipeline import check_store_matches, store_template
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import Dataset
from ppairs_lens.data.specs import load_dataset_spec, subsample_by_context
from ppairs_lens.errors import PPairsError
from ppairs_lens.interventions.conditions import (BASELINE, CONTROL, CONTROL_AT_READOUT,
                                                  MATCHED_NULL, RANDOM_NULL)
from ppairs_lens.evaluation.judge_change import condition_change, judge_baseline, judge_change
from ppairs_lens.evaluation.readout_choice import VAL_SIZE, choose_readout_index
from ppairs_lens.evaluation.null_test import direction_effects, null_test, sign_accuracy
from ppairs_lens.presets import Preset
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.store_split import StoreSplit, held_out_records, split_store
from ppairs_lens.evaluation.verdicts import holm
from ppairs_lens.interventions.batched import batched_rejection_hooks, judge_under_direction_sets
from ppairs_lens.interventions.directions import (choice_unembedding_direction, null_directions,
                                                  probe_directions)
from ppairs_lens.interventions.refit import refit_rows
from ppairs_lens.io.outputs import load_config, save_config, save_figure, write_csv, write_json
from ppairs_lens.io.records import ABSENT, Absent, StepRows
from ppairs_lens.models.loading import model_name
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["AblationConfig", "AblationRow", "AblationRows", "AblationRun", "ablate_store",
           "plan_ablation", "run_ablation", "replot", "cli"]


@dataclass
class AblationConfig:
    """What an ablation analysis ran on; saved beside its results."""

    stores: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)  # dataset names, one per store
    layer: int | None = None  # read-out of the directions; None: chosen on validation
    layer_kind: str = "supervised"  # whose validation accuracy chooses the read-out
    presets: tuple[str, ...] = ("paper",)
    positions: str = "last"  # the read-out token only, at every hook point of the preset
    kinds: tuple[str, ...] = PROBE_KINDS
    n_random: int = 100  # isotropic random unit directions (null 1)
    n_matched: int = 100  # directions from the training contrast covariance (null 2)
    settings: EvalSettings = EvalSettings()  # seed, n_boot (CIs over leak groups), split
    val_size: float = VAL_SIZE  # share of training groups that choose the read-out
    C: float = 1.0
    # |z| <= tie_tol is "no answer" (half credit): float32 round-off of two equal choice logits
    # (SmolLM2's control lands within ~2e-5 of 0, its logits being ~40); its clean judge sits
    # at mean |z| ~0.03, so do not make it coarse.
    tie_tol: float = 1e-4
    max_eval_pairs: int | None = 200  # test records run through the judge (whole contexts)
    directions_per_pass: int | None = None  # None: every direction in one run_branches call
    # "Unchanged" is an equivalence test (TOST at alpha): the 90% paired CIs of Δaccuracy and of
    # the Δlog-odds margin inside these; 0.2 log-odds is ~5 points of probability near 0.5.
    accuracy_margin: float = 0.05
    logodds_margin: float = 0.2
    alpha: float = 0.05
    refit: bool = False  # re-harvest under each ablation and refit the probes (slow)
    max_refit_train: int | None = 120
    refit_random: int = 1  # random directions also re-harvested for the refit (its null)
    token_budget: int | None = None  # None: by device (runner.default_token_budget)

    def __post_init__(self):  # refused at construction, before any store or model work
        if self.positions != "last":
            raise PPairsError(f"the ablation analysis ablates at the read-out token "
                              f"(positions='last'); got {self.positions!r}. Every-position "
                              "ablation needs a forward pass per direction: use "
                              "ppairs_lens.interventions.ablation.ablate(positions='all')")
        if self.n_random < 1 or self.n_matched < 1:
            raise PPairsError("n_random and n_matched must be at least 1 (the null "
                              "distributions)")


@dataclass
class AblationRun:
    """What a run found out (never written into its config): saved as ``ablation_run.json``."""

    model: str = ""
    datasets: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds
    layers_used: dict[str, str] = field(default_factory=dict)  # read-out and rule
    splits_used: dict[str, str] = field(default_factory=dict)  # resolved split


def choose_layer(sp: StoreSplit, cfg: AblationConfig) -> tuple[int, str]:
    """The directions' read-out and its rule: the ``layer_kind`` probe's validation choice."""
    return choose_readout_index(sp, cfg.layer_kind, layer=cfg.layer, seed=cfg.settings.seed,
                                val_size=cfg.val_size, C=cfg.C)


def _direction_table(bridge, store, dataset, template, sp, layer, cfg, log):
    """``(names, kinds, directions [D, d])``: baseline (zero), probes, control, the nulls."""
    name = store.meta.dataset
    probes, kept, probe_rows = probe_directions(sp.acts_train, sp.labels_train, layer,
                                                cfg.kinds, C=cfg.C, name=name)
    names = [BASELINE, *kept, CONTROL]
    kinds = ["baseline", *["probe"] * len(kept), "control"]
    rows = [torch.zeros(store.d_model), *probe_rows,
            choice_unembedding_direction(bridge, dataset, template)]
    n_names, n_kinds, n_rows = null_directions(sp.acts_train, layer, cfg.n_random,
                                               cfg.n_matched, cfg.settings.seed)
    names, kinds, rows = names + n_names, kinds + n_kinds, rows + n_rows
    log(f"{name}: {len(names)} directions at read-out {layer} ({store.hook_names[layer]})")
    return names, kinds, torch.stack(rows), probes


def _condition_rows(base: dict, names, kinds, r, z, ld_o, ld_s, y, groups, cfg,
                    sign_confidence: Callable[[str], float | None]
                    ) -> tuple[list[AblationRow], list[dict]]:
    """Rows of ``ablation.csv`` and ``ablation_null.csv`` for one preset
    (``sign_confidence``: a probe kind's, by condition name)."""
    eff, margin = direction_effects(z[:, 0], z, y)
    acc = np.array([sign_accuracy(z[:, j], y, cfg.tie_tol) for j in range(z.shape[1])])
    bias = ((ld_o + ld_s) / 2).mean(0) if ld_s is not None else np.full(len(names), np.nan)
    cos_u = (r @ r[names.index(CONTROL)]).abs().numpy()
    null_idx = {n: [j for j, k in enumerate(kinds) if k == n] for n in (RANDOM_NULL, MATCHED_NULL)}
    common = lambda j: dict(  # noqa: E731
        effect=float(eff[j]), margin=float(margin[j]), accuracy=float(acc[j]),
        accuracy_delta=float(acc[j] - acc[0]), mean_abs_z=float(np.abs(z[:, j]).mean()),
        position_bias_logodds=float(bias[j]), abs_cos_unembedding=float(cos_u[j]))
    rows, null_rows = [], []
    for j, (cond, kind) in enumerate(zip(names, kinds)):
        if kind in null_idx:
            null_rows.append({**base, "null": kind, "condition": cond, **common(j)})
            continue
        change = (judge_baseline(y, z[:, 0], ld_o[:, 0], None if ld_s is None else ld_s[:, 0],
                                 groups, **cfg.settings.boot_kwargs(), tol=cfg.tie_tol)
                  if j == 0 else judge_change(y, z[:, 0], z[:, j], groups,
                                              **cfg.settings.boot_kwargs(), tol=cfg.tie_tol))
        tests = {}
        for null, idx in null_idx.items():
            # the permutation p-value says whether the probe beats the null; no "excess over
            # the null median" CI: one that held the null directions fixed overstated it
            t = null_test(eff[j], eff[idx])
            tests |= {f"rank_{null}": t["rank"], f"n_{null}": t["n_null"], f"p_{null}": t["p"]}
        own = {"sign_confidence": sign_confidence(cond)} if kind == "probe" else {}
        rows.append(AblationRow(**{**base, "condition": cond, "kind": kind, **common(j),
                                   **change, **tests, **own}))
    for null, idx in null_idx.items():
        if idx:
            lo, med, hi = np.quantile(eff[idx], [0.025, 0.5, 0.975])
            rows.append(AblationRow(
                **base, condition=null, kind="null", effect=float(med),
                margin=float(np.median(margin[idx])), accuracy=float(acc[idx].mean()),
                accuracy_delta=float(acc[idx].mean() - acc[0]),
                mean_abs_z=float(np.abs(z[:, idx]).mean()),
                position_bias_logodds=(float(np.mean(bias[idx])) if
                                       np.isfinite(bias[idx]).all() else np.nan),
                abs_cos_unembedding=float(cos_u[idx].mean()), effect_lo=float(lo),
                effect_hi=float(hi), **{f"n_{null}": len(idx)}))
    return rows, null_rows


def ablate_store(bridge, store: ActivationStore, dataset: Dataset,
                 cfg: AblationConfig | None = None, *, log: Callable[[str], None] = print,
                 run: AblationRun | None = None
                 ) -> tuple[list[AblationRow], list[dict], list[dict], list[dict]]:
    """Rows of the four ablation tables for one store. ``dataset``: the one the store was
    harvested from (checked by fingerprint; the judge needs its text). ``run`` records the
    read-out, split and timings found (never the config)."""
    cfg = cfg or AblationConfig(stores=[str(store.path)])
    run = run if run is not None else AblationRun()
    check_store_matches(bridge, store, dataset)
    template = store_template(store)
    settings = HarvestSettings(token_budget=cfg.token_budget)
    name = store.meta.dataset
    sp = split_store(store, **cfg.settings.split_kwargs())
    split_used = str(getattr(sp, "split_used", cfg.settings.split_by))
    layer, rule = choose_layer(sp, cfg)
    run.layers_used[name] = f"{store.hook_names[layer]}: {rule}"
    run.splits_used[name] = split_used
    names, kinds, r, probes = _direction_table(bridge, store, dataset, template, sp, layer,
                                               cfg, log)
    test_ds = held_out_records(dataset, [p.pair_id for p in sp.pairs_test],
                               cfg.max_eval_pairs, cfg.settings.seed)
    if cfg.max_eval_pairs is not None and len(test_ds) < cfg.max_eval_pairs:
        log(f"{name}: only {len(test_ds)} test pairs (max_eval_pairs {cfg.max_eval_pairs}: "
            "whole leak groups go to one side); raise test_size for more")
    y = (np.asarray(test_ds.labels()) == 1).astype(int)
    groups = list(test_ds.group_ids())
    rows, null_rows, z_rows = [], [], []
    for k, preset in enumerate(cfg.presets):
        t0 = time.perf_counter()
        ctrl_set = [(r[[names.index(CONTROL)]], [store.hook_names[layer]])] if k == 0 else []
        both = judge_under_direction_sets(
            bridge, test_ds, template, [(r, preset), *ctrl_set], settings=settings,
            directions_per_pass=cfg.directions_per_pass, desc=f"ablated judge {name} ({preset})")
        out = {key: None if v is None else v[:, :len(names)] for key, v in both.items()}
        if k == 0:  # the read-out control rode the first preset's pass: clean z, control z
            ctrl = both["z"][:, [0, len(names)]]
        secs = time.perf_counter() - t0
        run.timings[f"{name}/{preset}"] = round(secs, 1)
        log(f"{name}: preset {preset!r}, {len(names)} directions x {len(test_ds)} records "
            f"({secs:.1f} s)")
        base = {"dataset": name, "preset": preset, "n": len(test_ds),
                "n_groups": len(set(groups)), "layer": layer, "hook": store.hook_names[layer],
                "positions": cfg.positions, "split_used": split_used,
                "accuracy_margin": cfg.accuracy_margin, "logodds_margin": cfg.logodds_margin}
        rr, nr = _condition_rows(base, names, kinds, r, out["z"], out["ld_original"],
                                 out["ld_swapped"], y, groups, cfg, lambda condition: getattr(
                                     probes.to_probe(condition, 0), "sign_confidence_",
                                     math.nan))
        # the control removed at the read-out hook only (ctrl's column 1; column 0 clean)
        rows += rr + [AblationRow(**base, condition=CONTROL_AT_READOUT, kind="control_readout",
                                  **condition_change(y, ctrl[:, 0], ctrl[:, 1], groups,
                                                     **cfg.settings.boot_kwargs(),
                                                     tol=cfg.tie_tol))]
        null_rows += nr
        z_rows += _z_rows(base, names, kinds, test_ds, out)
    refit = _refit(bridge, store, dataset, template, cfg, sp, layer, names, kinds, r, test_ds,
                   settings, log) if cfg.refit else []
    return rows, null_rows, z_rows, refit


def _with_holm(rows: list[AblationRow]) -> list[AblationRow]:
    """``p_<null>_holm``: Holm over every probe test of a preset (all datasets and kinds)."""
    rows = list(rows)
    for preset in dict.fromkeys(r.preset for r in rows):
        here = [k for k, r in enumerate(rows) if r.preset == preset and r.kind == "probe"]
        for null in (RANDOM_NULL, MATCHED_NULL):
            ps = [getattr(rows[k], f"p_{null}") for k in here]
            for k, q in zip(here, holm([math.nan if p is ABSENT else p for p in ps])):
                rows[k] = replace(rows[k], **{f"p_{null}_holm": float(q)})
    return rows


def _z_rows(base: dict, names, kinds, ds: Dataset, out: dict) -> list[dict]:
    """Per-record log-odds of the baseline, the probes and the control."""
    sw = out["ld_swapped"]
    return [{"dataset": base["dataset"], "preset": base["preset"], "condition": c,
             "pair_id": rec.pair_id, "label": lab, "z": float(out["z"][i, j]),
             "ld_original": float(out["ld_original"][i, j]),
             "ld_swapped": None if sw is None else float(sw[i, j])}
            for j, (c, k) in enumerate(zip(names, kinds)) if k in ("baseline", "probe", "control")
            for i, (rec, lab) in enumerate(zip(ds.records, ds.labels()))]


def _refit(bridge, store, dataset, template, cfg, sp, layer, names, kinds, r, test_ds,
           settings, log) -> list[dict]:
    """Probe scores on activations re-harvested under each ablation (module doc)."""
    t0 = time.perf_counter()
    final = store.n_readouts - 1
    readouts = [layer] if layer == final else [layer, final]
    probes = fit_sweep(sp.acts_train[:, :, readouts], sp.labels_train, cfg.kinds, C=cfg.C,
                       layers=readouts)
    train_ids = {p.pair_id for p in sp.pairs_train}
    train_ds = subsample_by_context(
        replace(dataset, name=f"{dataset.name}:train",
                records=[rec for rec in dataset.records if rec.pair_id in train_ids]),
        cfg.max_refit_train, cfg.settings.seed)
    keep = [j for j, k in enumerate(kinds) if k in ("probe", "control")]
    keep += [j for j, k in enumerate(kinds) if k == RANDOM_NULL][:cfg.refit_random]
    rows = []
    for preset in cfg.presets:
        conds = {BASELINE: None, **{names[j]: (r[j], preset) for j in keep}}
        rows += [{**row, "preset": preset} for row in refit_rows(
            bridge, store, train_ds, test_ds, template, probes, readouts, conds,
            kinds=cfg.kinds, C=cfg.C, positions=cfg.positions, **cfg.settings.boot_kwargs(),
            settings=settings)]
    log(f"{store.meta.dataset}: probe refit ({time.perf_counter() - t0:.1f} s)")
    return rows


@dataclass(frozen=True, kw_only=True)
class AblationRow:
    """One condition of one preset: its effect on the judge's log-odds, the judge's change
    (ΔF1, Δaccuracy, ΔAUROC, Δlog-odds with equivalence bounds) or, for the baseline, the
    judge itself; a probe's rank among the nulls with Holm's p; a null's spread."""

    dataset: str
    preset: str
    n: int
    n_groups: int
    layer: int
    hook: str
    positions: str
    split_used: str
    accuracy_margin: float
    logodds_margin: float
    condition: str
    kind: str
    effect: float
    margin: float
    accuracy: float
    accuracy_delta: float
    mean_abs_z: float
    position_bias_logodds: float | Absent = ABSENT
    abs_cos_unembedding: float | Absent = ABSENT
    effect_lo: float | Absent = ABSENT
    effect_hi: float | Absent = ABSENT
    delta_f1: float | Absent = ABSENT
    delta_ci_counts: bool | Absent = ABSENT
    delta_f1_lo: float | Absent = ABSENT
    delta_f1_hi: float | Absent = ABSENT
    delta_f1_tost_lo: float | Absent = ABSENT
    delta_f1_tost_hi: float | Absent = ABSENT
    delta_accuracy: float | Absent = ABSENT
    delta_accuracy_lo: float | Absent = ABSENT
    delta_accuracy_hi: float | Absent = ABSENT
    delta_accuracy_tost_lo: float | Absent = ABSENT
    delta_accuracy_tost_hi: float | Absent = ABSENT
    delta_auroc: float | Absent = ABSENT
    delta_auroc_lo: float | Absent = ABSENT
    delta_auroc_hi: float | Absent = ABSENT
    delta_auroc_tost_lo: float | Absent = ABSENT
    delta_auroc_tost_hi: float | Absent = ABSENT
    delta_logodds: float | Absent = ABSENT
    delta_logodds_lo: float | Absent = ABSENT
    delta_logodds_hi: float | Absent = ABSENT
    delta_logodds_tost_lo: float | Absent = ABSENT
    delta_logodds_tost_hi: float | Absent = ABSENT
    judge_f1: float | Absent = ABSENT
    judge_f1_lo: float | Absent = ABSENT
    judge_f1_hi: float | Absent = ABSENT
    judge_accuracy: float | Absent = ABSENT
    judge_accuracy_lo: float | Absent = ABSENT
    judge_accuracy_hi: float | Absent = ABSENT
    judge_auroc: float | Absent = ABSENT
    judge_auroc_lo: float | Absent = ABSENT
    judge_auroc_hi: float | Absent = ABSENT
    same_answer_share: float | Absent = ABSENT
    rank_random: int | Absent = ABSENT
    n_random: int | Absent = ABSENT
    p_random: float | Absent = ABSENT
    rank_matched: int | Absent = ABSENT
    n_matched: int | Absent = ABSENT
    p_matched: float | Absent = ABSENT
    sign_confidence: float | None | Absent = ABSENT
    p_random_holm: float | Absent = ABSENT
    p_matched_holm: float | Absent = ABSENT


@dataclass(frozen=True)
class AblationRows(StepRows):
    rows: tuple[AblationRow, ...] = ()


def run_ablation(bridge, items: Sequence[tuple[ActivationStore, Dataset]], out: str | Path,
                 cfg: AblationConfig | None = None, *, log: Callable[[str], None] = print
                 ) -> AblationRows:
    """Ablate on every (store, dataset); write the tables, figure and config to ``out``."""
    cfg = cfg or AblationConfig(stores=[str(s.path) for s, _ in items])
    run = AblationRun(model=model_name(bridge),
                      datasets=list(cfg.datasets) or [d.name for _, d in items])
    out = Path(out)
    rows, null_rows, z_rows, refit = [], [], [], []
    for store, dataset in items:
        t0 = time.perf_counter()
        a, b, c, d = ablate_store(bridge, store, dataset, cfg, log=log, run=run)
        run.timings[store.meta.dataset] = round(time.perf_counter() - t0, 1)
        rows, null_rows, z_rows, refit = rows + a, null_rows + b, z_rows + c, refit + d
    result = AblationRows(rows=tuple(_with_holm(rows)))
    write_csv(out / "ablation.csv", result.table())
    write_csv(out / "ablation_null.csv", null_rows)
    write_csv(out / "ablation_z.csv", z_rows)
    if refit:
        write_csv(out / "ablation_probe_refit.csv", refit)
    save_config(out, "ablation", cfg)
    write_json(out / "ablation_run.json", run)
    _draw(result.rows, null_rows, cfg, run.model, out)
    return result


def _draw(rows, null_rows, cfg, model, out) -> list[Path]:
    import matplotlib.pyplot as plt

    fig = plot_ablation(rows, null_rows, cfg, model)
    paths = save_figure(fig, out, "ablation", preview=cfg.settings.quick)
    plt.close(fig)
    return paths


#: How each preset differs from the defaults (``ppairs-lens ablate``'s demo): a quick run
#: judges 24 held-out pairs and refits on 24.
PRESETS: dict[str, Preset] = {
    "quick": Preset(changes={"max_eval_pairs": 24, "max_refit_train": 24})}


def replot(out: str | Path, model: str | None = None) -> list[Path]:
    """Redraw ``ablation.{png,svg}`` in ``out`` from its CSVs, config and run record."""
    from ppairs_lens.io.json_fields import read_json_object

    out = Path(out)
    cfg = load_config(AblationConfig, out / "ablation.config.json")
    if model is None:
        model = read_json_object(out / "ablation_run.json").get("model", "")
    return _draw(AblationRows.read_csv(out / "ablation.csv").rows,
                 read_rows(out / "ablation_null.csv"), cfg, model, out)


def plan_ablation(bridge, datasets: Sequence[Dataset], root, cfg: AblationConfig,
                  template=None) -> list:
    """The model passes of :func:`run_ablation`, for its estimate: each store's harvest, then
    per dataset and preset the judge on its test records with every direction a branch (at
    most: a degenerate probe kind is skipped), the read-out control in the first preset's."""
    from ppairs_lens.judges.run_estimate import PlannedStep, held_out_part, plan_held_out_run
    from ppairs_lens.judges.zero_shot import judge_prompts

    steps = plan_held_out_run(bridge, datasets, root, template=template, split=None, forms=())
    n_directions = 2 + len(cfg.kinds) + cfg.n_random + cfg.n_matched  # baseline, control too
    for d in datasets:
        tpl, test = held_out_part(bridge, d, root, template=template,
                                  split=cfg.settings.split_kwargs(),
                                  max_pairs=cfg.max_eval_pairs, seed=cfg.settings.seed)
        prompts = tuple(judge_prompts(bridge.tokenizer, test, tpl))
        for k, preset in enumerate(cfg.presets):
            n = n_directions + (k == 0)
            steps.append(PlannedStep(d.name, "ablated_judge", prompts, branches=n,
                                     final_hooks=lambda b, n=n, preset=preset:  # zero rows
                                     batched_rejection_hooks(b, torch.zeros(n, b.cfg.d_model),
                                                             preset)))
    return steps


def cli(args, bridge=None) -> None:
    """``ppairs-lens ablate``; ``bridge``: the model (default: ``--model``, after the datasets)."""
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.judges.run_estimate import announce
    from ppairs_lens.models.loading import load_model
    from ppairs_lens.models.spec import ModelSpec

    specs = args.datasets or ["larger_number", "capital_true"]
    datasets = [load_dataset_spec(s, max_pairs=args.max_pairs, seed=args.seed) for s in specs]
    if bridge is None:
        bridge = load_model(ModelSpec.from_args(args))
    cfg = args.config(AblationConfig, PRESETS, stores=[], datasets=list(specs))
    if args.n_random and not args.n_matched:    # one null's size given: both nulls that size
        cfg = replace(cfg, n_matched=args.n_random)
    announce(bridge, plan_ablation(bridge, datasets, args.stores, cfg, args.template),
             measure=not args.no_calibration)
    items = [(ensure_store(bridge, ds, args.stores, template=args.template), ds)
             for ds in datasets]
    cfg = replace(cfg, stores=[str(st.path) for st, _ in items])
    for line in summary_lines(run_ablation(bridge, items, args.out, cfg).rows):
        print(line)
