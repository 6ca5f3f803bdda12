"""Steering dose-response: does *adding* the probe direction move the model's own judgement?

The complement of :mod:`analyses.ablation`, with the read-out, probe directions (unit, "+" =
item 1 preferred) and nulls chosen as it chooses them (never on the test split). For each
``alpha``, ``alpha * norm_unit * r`` is added for every direction ``r`` at the read-out's hook,
at the read-out token only, while the swap-calibrated zero-shot judge answers the test records
(the swapped order gets ``-v``; all in one pass). ``norm_unit`` is the median norm of the
read-out's activations on the training pairs, so an ``alpha`` is the same push on any model.
Reported: per direction and alpha the mean change of the calibrated log-odds (``delta_z``) and
the accuracy; per probe the least-squares slope of ``delta_z`` on ``alpha`` and its one-sided
permutation p-value among the nulls' slopes.

Outputs: ``steering.csv`` (dataset x condition x alpha; probes, the baseline and the nulls'
median with their 2.5-97.5% band), ``steering.config.json``, ``steering_run.json`` (what the
run found: :class:`SteeringRun`) and ``steering.{png,svg}``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from analyses.steering_plots import plot_steering
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.pipeline import check_store_matches, store_template
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import SettingError
from ppairs_lens.interventions.conditions import BASELINE, MATCHED_NULL, RANDOM_NULL
from ppairs_lens.evaluation.readout_choice import VAL_SIZE, choose_readout_index
from ppairs_lens.evaluation.null_test import null_test, sign_accuracy
from ppairs_lens.presets import Preset
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.store_split import held_out_records, split_store
from ppairs_lens.interventions.directions import null_directions, probe_directions
from ppairs_lens.interventions.steering import (batched_steering_hooks, check_alpha,
                                                judge_under_steering)
from ppairs_lens.io.outputs import save_config, save_figure, write_csv, write_json
from ppairs_lens.io.records import ABSENT, Absent, StepRows
from ppairs_lens.models.loading import model_name
from ppairs_lens.probes.estimators import PROBE_KINDS

__all__ = ["SteeringConfig", "SteeringRow", "SteeringRows", "SteeringRun", "plan_steering",
           "steer_store", "run_steering", "cli"]


@dataclass
class SteeringConfig:
    """What a steering analysis ran on; saved beside its results."""

    stores: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    alphas: tuple[float, ...] = (-1.0, -0.5, -0.25, 0.25, 0.5, 1.0)  # x norm_unit
    layer: int | None = None  # read-out (and steering hook); None: chosen on validation
    layer_kind: str = "supervised"
    kinds: tuple[str, ...] = PROBE_KINDS
    n_random: int = 20
    n_matched: int = 20
    settings: EvalSettings = EvalSettings()  # seed, test share, split_by
    val_size: float = VAL_SIZE
    C: float = 1.0
    tie_tol: float = 1e-4  # |z| <= tie_tol counts half in the accuracy (as in the ablation)
    max_eval_pairs: int | None = 100
    directions_per_pass: int | None = None
    token_budget: int | None = None

    def __post_init__(self):
        # refused at construction (Python API and CLI alike), before any model runs
        self.alphas = tuple(check_alpha(a, f"alphas[{i}]") for i, a in enumerate(self.alphas))
        if not any(self.alphas):
            raise SettingError(f"alphas {list(self.alphas)}: at least one non-zero steering "
                               "coefficient is needed (the slope is fitted on them)")
        if self.n_random < 1 or self.n_matched < 1:
            raise SettingError("steering needs n_random, n_matched >= 1 (the nulls)")


@dataclass
class SteeringRun:
    """What a run found out (never written into its config): saved as ``steering_run.json``."""

    model: str = ""
    datasets: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds
    layers_used: dict[str, str] = field(default_factory=dict)  # hook and rule
    norm_units: dict[str, float] = field(default_factory=dict)  # per dataset


@dataclass(frozen=True, kw_only=True)
class SteeringRow:
    """One steering condition at one dose; null and slope columns where the row has them."""

    dataset: str
    hook: str
    layer: int
    n: int
    norm_unit: float
    split_used: str
    condition: str
    kind: str
    alpha: float
    delta_z: float
    delta_z_lo: float | Absent = ABSENT
    delta_z_hi: float | Absent = ABSENT
    mean_z: float
    accuracy: float
    slope: float | Absent = ABSENT
    n_matched: int | Absent = ABSENT
    n_random: int | Absent = ABSENT
    p_slope_random: float | Absent = ABSENT
    p_slope_matched: float | Absent = ABSENT
    slope_rank_random: int | Absent = ABSENT
    slope_rank_matched: int | Absent = ABSENT
    n_slope_random: int | Absent = ABSENT
    n_slope_matched: int | Absent = ABSENT


@dataclass(frozen=True)
class SteeringRows(StepRows):
    rows: tuple[SteeringRow, ...] = ()


def steer_store(bridge, store: ActivationStore, dataset: Dataset,
                cfg: SteeringConfig | None = None, *, log: Callable[[str], None] = print,
                run: SteeringRun | None = None) -> list[SteeringRow]:
    """The rows of ``steering.csv`` for one store (``dataset``: its harvest's records, checked
    by fingerprint); ``run`` records what was found (never the config)."""
    cfg = cfg or SteeringConfig(stores=[str(store.path)])
    run = run if run is not None else SteeringRun()
    check_store_matches(bridge, store, dataset)
    template = store_template(store)
    name = store.meta.dataset
    sp = split_store(store, **cfg.settings.split_kwargs())
    # the read-out (and steering hook) as the ablation chooses it; never on the test split
    layer, rule = choose_readout_index(sp, cfg.layer_kind, layer=cfg.layer,
                                       seed=cfg.settings.seed, val_size=cfg.val_size, C=cfg.C)
    hook = store.hook_names[layer]
    run.layers_used[name] = f"{hook}: {rule}"
    # unit rows [D, d]: the probe directions, then the two nulls
    _, names, rows = probe_directions(sp.acts_train, sp.labels_train, layer, cfg.kinds,
                                      C=cfg.C, name=name)
    n_names, kinds, n_rows = null_directions(sp.acts_train, layer, cfg.n_random,
                                             cfg.n_matched, cfg.settings.seed)
    names, kinds, r = names + n_names, ["probe"] * len(names) + kinds, torch.stack(rows + n_rows)
    unit = float(sp.acts_train[:, 0, layer].double().norm(dim=-1).median())
    run.norm_units[name] = unit
    test_ds = held_out_records(dataset, [p.pair_id for p in sp.pairs_test],
                               cfg.max_eval_pairs, cfg.settings.seed)
    y = (np.asarray(test_ds.labels()) == 1).astype(int)
    settings = HarvestSettings(token_budget=cfg.token_budget)
    t0 = time.perf_counter()

    alphas = np.asarray(cfg.alphas, dtype=float)
    # The unsteered judge (a zero vector) and every alpha x direction in one pass over the
    # prompts: their prefixes, most of the cost, run once, not once per alpha
    vectors = torch.cat([torch.zeros(1, store.d_model), *(float(a) * unit * r for a in alphas)])
    zz = judge_under_steering(bridge, test_ds, template, vectors, [hook], settings=settings,
                              vectors_per_pass=cfg.directions_per_pass,
                              desc=f"steered judge {name}")["z"]
    z0 = zz[:, 0]
    z = zz[:, 1:].reshape(len(test_ds), len(alphas), len(names)).transpose(1, 0, 2)  # [A, n, D]
    run.timings[name] = round(time.perf_counter() - t0, 1)
    log(f"{name}: {len(names)} directions x {len(alphas)} alphas x {len(test_ds)} records at "
        f"{hook} ({run.timings[name]:.1f} s)")
    dz = (z - z0[None, :, None]).mean(1)  # [A, D]
    acc = np.array([[sign_accuracy(z[a, :, j], y, cfg.tie_tol) for j in range(len(names))]
                    for a in range(len(alphas))])
    slope = (alphas[:, None] * dz).sum(0) / float((alphas ** 2).sum())  # LS through the origin
    base = {"dataset": name, "hook": hook, "layer": layer, "n": len(test_ds),
            "norm_unit": unit, "split_used": sp.split_used}
    rows = [SteeringRow(**base, condition=BASELINE, kind="baseline", alpha=0.0, delta_z=0.0,
                        mean_z=float(z0.mean()), accuracy=sign_accuracy(z0, y, cfg.tie_tol))]
    idx = {n: [j for j, k in enumerate(kinds) if k == n] for n in (RANDOM_NULL, MATCHED_NULL)}
    for j, (cond, kind) in enumerate(zip(names, kinds)):
        if kind != "probe":
            continue
        tests = {n: null_test(slope[j], slope[i]) for n, i in idx.items()}
        for a, alpha in enumerate(alphas):
            rows.append(SteeringRow(
                **base, condition=cond, kind="probe", alpha=float(alpha),
                delta_z=float(dz[a, j]), mean_z=float(z[a, :, j].mean()),
                accuracy=float(acc[a, j]), slope=float(slope[j]),
                **{f"p_slope_{n}": t["p"] for n, t in tests.items()},
                **{f"slope_rank_{n}": t["rank"] for n, t in tests.items()},
                # the nulls the p-value counts (non-finite slopes dropped)
                **{f"n_slope_{n}": t["n_null"] for n, t in tests.items()}))
    for null, i in idx.items():
        for a, alpha in enumerate(alphas):
            lo, med, hi = np.quantile(dz[a, i], [0.025, 0.5, 0.975])
            rows.append(SteeringRow(
                **base, condition=null, kind="null", alpha=float(alpha), delta_z=float(med),
                delta_z_lo=float(lo), delta_z_hi=float(hi), mean_z=float(z[a][:, i].mean()),
                accuracy=float(acc[a, i].mean()), slope=float(np.median(slope[i])),
                **{f"n_{null}": len(i)}))
    return rows


def run_steering(bridge, items: Sequence[tuple[ActivationStore, Dataset]], out: str | Path,
                 cfg: SteeringConfig | None = None, *, log: Callable[[str], None] = print
                 ) -> SteeringRows:
    """Steer on every (store, dataset); write the table, figure and config to ``out``."""
    cfg = cfg or SteeringConfig(stores=[str(s.path) for s, _ in items])
    run = SteeringRun(model=model_name(bridge),
                      datasets=list(cfg.datasets) or [d.name for _, d in items])
    out = Path(out)
    result = SteeringRows(rows=tuple(r for store, dataset in items for r in steer_store(
        bridge, store, dataset, cfg, log=log, run=run)))
    write_csv(out / "steering.csv", result.table())
    save_config(out, "steering", cfg)
    write_json(out / "steering_run.json", run)
    import matplotlib.pyplot as plt

    fig = plot_steering(result.rows, run.model)
    save_figure(fig, out, "steering", preview=cfg.settings.quick)
    plt.close(fig)
    return result


#: How each preset differs from the defaults (``ppairs-lens steer``'s demo).
PRESETS: dict[str, Preset] = {
    "quick": Preset(changes={"max_eval_pairs": 24, "n_random": 8, "n_matched": 8})}


def plan_steering(bridge, datasets: Sequence[Dataset], root, cfg: SteeringConfig,
                  template=None) -> list:
    """The model passes of :func:`run_steering`, for its estimate: every alpha x direction a
    branch, one pass per item order. Timed at ``cfg.layer``'s read-out, else the last (the
    validation choice is not known before the harvest; where a hook sits changes no cost)."""
    from ppairs_lens.activations.harvest import readout_names
    from ppairs_lens.activations.prompts import build_contrast_pairs
    from ppairs_lens.judges.run_estimate import PlannedStep, held_out_part, plan_held_out_run
    from ppairs_lens.judges.zero_shot import swapped_dataset

    steps = plan_held_out_run(bridge, datasets, root, template=template, split=None, forms=())
    branches = 1 + len(cfg.alphas) * (len(cfg.kinds) + cfg.n_random + cfg.n_matched)
    hook = readout_names(bridge, None)[cfg.layer if cfg.layer is not None else -1]

    def hooks(model):  # zero vectors: the same work as the steered ones
        return batched_steering_hooks(model, torch.zeros(branches, model.cfg.d_model), [hook])
    for d in datasets:
        tpl, test = held_out_part(bridge, d, root, template=template,
                                  split=cfg.settings.split_kwargs(),
                                  max_pairs=cfg.max_eval_pairs, seed=cfg.settings.seed)
        orders = [(d.name, test)] + ([(f"{d.name} swapped", swapped_dataset(test))]
                                     if test.kind == "comparison" else [])
        for label, part in orders:
            steps.append(PlannedStep(label, "steered_judge",
                                     tuple(build_contrast_pairs(bridge.tokenizer, part, tpl)),
                                     branches=branches, final_hooks=hooks))
    return steps


def cli(args, bridge=None) -> None:
    """``ppairs-lens steer`` on the model ``bridge`` (loaded by :mod:`analyses.cli`)."""
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data.specs import load_dataset_spec
    from ppairs_lens.judges.run_estimate import announce

    specs = args.datasets or ["larger_number", "capital_true"]
    datasets = [load_dataset_spec(s, max_pairs=args.max_pairs, seed=args.seed) for s in specs]
    cfg = args.config(SteeringConfig, PRESETS, stores=[], datasets=list(specs))
    announce(bridge, plan_steering(bridge, datasets, args.stores, cfg, args.template),
             measure=not args.no_calibration)
    items = [(ensure_store(bridge, ds, args.stores, template=args.template), ds)
             for ds in datasets]
    cfg = replace(cfg, stores=[str(s.path) for s, _ in items])
    for r in run_steering(bridge, items, args.out, cfg).rows:
        if r.kind == "probe" and r.alpha == max(cfg.alphas):
            print(f"{r.dataset:28s} {r.condition:10s} slope {r.slope:+.3f} log-odds "
                  f"per alpha (p vs random {r.p_slope_random:.3f}, vs matched "
                  f"{r.p_slope_matched:.3f})")
