"""Probes against finetuning the judge on the same labels (the paper's Section 5.2, Fig. 3).

On each store's held-out split five judges give P(item 1) on the same test pairs: the
supervised and PCA probes (read-out chosen on validation), the model finetuned with LoRA and
fully on the same ``max_train`` training comparisons, both item orders (a copy of the weights),
and the zero-shot judge (finetuned and prompted judges swap-calibrated). ``finetuning.csv``:
accuracy with a CI over leak groups, the paired difference to the supervised probe, and the
training cost (a probe's includes its harvest).

The label curve (``finetuning_curve.csv``/``.png``) repeats probe, LoRA and full finetuning at
growing, nested label counts (a seeded, stratified order per seed): where, if anywhere,
finetuning overtakes the probe. A finetuned judge is trained once per (method, seed) and read
after each size, its batches never crossing the smaller sizes, so the main comparison depends
on ``curve_sizes`` only through its batch draw.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from analyses.finetuning_plots import plot_comparison, plot_curve
from ppairs_lens.activations.harvest import harvest_pairs
from ppairs_lens.activations.runner import model_device
from ppairs_lens.activations.pipeline import check_store_matches, store_template
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import PPairsError
from ppairs_lens.evaluation.metrics import evaluate
from ppairs_lens.evaluation.paired import paired_difference
from ppairs_lens.presets import Preset
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.readout_choice import choose_readout
from ppairs_lens.evaluation.store_split import (StoreSplit, bootstrap_groups, held_out_ci_counts,
                                                split_records, split_store)
from ppairs_lens.finetuning.cost import Cost, measure
from ppairs_lens.finetuning.judge import curve_rows, finetune_curve, nested_order
from ppairs_lens.finetuning.train import TrainingConfig
from ppairs_lens.io.outputs import save_config, save_figure, write_csv, write_json
from ppairs_lens.io.records import ABSENT, Absent, StepRows
from ppairs_lens.judges.calibration import sigmoid
from ppairs_lens.judges.held_out import held_out_datasets
from ppairs_lens.judges.zero_shot import judge_prompts, zero_shot
from ppairs_lens.models.loading import model_name
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["FinetuningConfig", "FinetuningRow", "FinetuningRows", "METHODS", "nested_order",
           "plan_finetuning", "prepare_comparison", "run_finetuning", "cli"]

#: Every judge of the comparison, in table order.
METHODS: tuple[str, ...] = ("supervised", "pca", "lora", "full", "zero_shot")
PROBES = ("supervised", "pca")
TUNED = ("lora", "full")


@dataclass(frozen=True)
class FinetuningConfig:
    """What the comparison and the label curve ran with (saved as ``finetuning.config.json``).

    ``max_train``: training comparisons every method gets (None: all); ``max_test``: test
    pairs every judge answers (a seeded subset, the same for all; None: all); ``curve_sizes``:
    the curve's label counts (above the training side: all of it), nested, for every seed of
    ``curve_seeds``; ``curve_sizes_full``: full finetuning's (None: ``curve_sizes``), as its
    steps cost more; ``curve_methods``: who is trained at each. The default is small: on the
    embedded 135M model (~150-token prompts, a shared 2-core CPU) a training example cost 1-2
    CPU-seconds; the curve costs about one run on its largest size plus a test read per point
    (~0.45 s a pair there: most of the cost). On a GPU raise ``max_train``, ``max_test`` and
    ``curve_sizes`` (e.g. 25, 50, 100, 200).
    """

    settings: EvalSettings = EvalSettings()
    max_train: int | None = 8
    max_test: int | None = 16
    methods: tuple[str, ...] = METHODS
    lora: TrainingConfig = field(default_factory=lambda: TrainingConfig(method="lora"))
    full: TrainingConfig = field(default_factory=lambda: TrainingConfig(method="full"))
    curve_sizes: tuple[int, ...] = (4, 8)
    curve_sizes_full: tuple[int, ...] | None = None
    curve_seeds: tuple[int, ...] = (0,)
    curve_methods: tuple[str, ...] = ("supervised", "lora", "full")
    layer: int | None = None  # None: chosen on validation
    val_size: float = 0.25
    C: float = 1.0

    def __post_init__(self) -> None:
        bad = [m for m in (*self.methods, *self.curve_methods) if m not in METHODS]
        if bad:
            raise PPairsError(f"unknown method(s) {bad}; choose from {METHODS}")
        if self.max_train is not None and self.max_train < 4:
            raise PPairsError(f"max_train must be at least 4, got {self.max_train}")

    def tuning(self, method: str, seed: int) -> TrainingConfig:
        return replace(self.lora if method == "lora" else self.full, seed=seed)

    def sizes_of(self, method: str) -> tuple[int, ...]:
        """The curve sizes ``method`` is scored at."""
        full = method == "full" and self.curve_sizes_full is not None
        return self.curve_sizes_full if full else self.curve_sizes


#: How each preset differs from the defaults (``ppairs-lens finetune``'s demo): a quick run
#: trains on 4 comparisons, tests on 8 pairs, one curve point.
PRESETS: dict[str, Preset] = {
    "quick": Preset(changes={"max_train": 4, "max_test": 8, "curve_sizes": (4,)})}


@dataclass(frozen=True)
class Scored:
    """One method's answers on the test pairs (P(item 1)) and what its training cost."""

    p: np.ndarray
    cost: Cost
    trainable_params: int
    extra: dict


def harvest_cost(bridge, train: Dataset, template) -> Cost:
    """Time and peak memory of harvesting ``train``: the model part of a probe's cost."""
    pairs = build_contrast_pairs(bridge.tokenizer, train, template)
    with measure(model_device(bridge)) as m:
        harvest_pairs(bridge, pairs)
    assert m.cost is not None
    return m.cost


def probe_answers(sp: StoreSplit, kind: str, cfg: FinetuningConfig, seed: int,
                  harvest: Cost | None = None) -> Scored:
    """A probe of ``kind`` fitted on ``sp``'s training pairs, P(item 1) on the test pairs. Its
    cost adds ``harvest`` to choosing the read-out and fitting; the validation fit serves every
    kind at once (memoised), so the first kind asked carries its time."""
    with measure() as mf, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a fallback read-out: in selected_by
        choice = choose_readout(sp, kind, layer=cfg.layer, seed=seed, val_size=cfg.val_size,
                                C=cfg.C)
        li = choice.index
        sw = fit_sweep(sp.acts_train[:, :, [li]], sp.labels_train, (kind,), C=cfg.C,
                       groups=sp.groups_train, seed=seed)
    p = sw.predict_proba(sp.acts_test[:, :, [li]])[kind][0]
    trainable = sp.acts_train.shape[-1] + (1 if kind == "supervised" else 0)
    cost = mf.cost if harvest is None else harvest.plus(mf.cost)
    return Scored(p, cost, trainable, {"layer": li, "hook": choice.hook,
                                       "layer_rule": choice.selected_by})


def answers(sp: StoreSplit, bridge, test: Dataset, method: str, cfg: FinetuningConfig,
            seed: int, template, harvest: Cost | None = None,
            known_z: Mapping[str, float] | None = None) -> Scored:
    """A probe's or the zero-shot judge's answers (from ``known_z`` where it has them all)."""
    if method in PROBES:
        return probe_answers(sp, method, cfg, seed, harvest)
    ids = [r.pair_id for r in test.records]
    reused = known_z is not None and all(i in known_z for i in ids)
    p = sigmoid(np.array([known_z[i] for i in ids])) if reused else zero_shot(bridge, test,
                                                                               template).p
    return Scored(p, Cost(0.0, 0.0, "none", 0.0), 0, {"zero_shot": "reused"} if reused else {})


def prepare_comparison(bridge, store: ActivationStore, dataset: Dataset, cfg: FinetuningConfig
                       ):
    """``(template, split, train, test)``: the store's split, its test cut to ``max_test``."""
    check_store_matches(bridge, store, dataset)
    template = store_template(store)
    sp = split_store(store, **cfg.settings.split_kwargs())
    train, test, _ = held_out_datasets(store, dataset, **cfg.settings.split_kwargs())
    if ([r.pair_id for r in train.records] != [p.pair_id for p in sp.pairs_train]
            or [r.pair_id for r in test.records] != [p.pair_id for p in sp.pairs_test]):
        raise PPairsError(f"{dataset.name}: the dataset's split differs from the store's")
    keep = _test_keep(len(test.records), cfg)
    if keep is not None:
        sp = replace(sp, acts_test=sp.acts_test[keep], labels_test=sp.labels_test[keep],
                     pairs_test=[sp.pairs_test[i] for i in keep],
                     groups_test=[sp.groups_test[i] for i in keep])
        test = replace(test, records=[test.records[i] for i in keep])
    return template, sp, train, test


def _test_keep(n_test: int, cfg: FinetuningConfig) -> np.ndarray | None:
    """Sorted indices of a seeded ``max_test`` of the test pairs, or None: all of them."""
    if cfg.max_test is None or cfg.max_test >= n_test:
        return None
    return np.sort(np.random.default_rng(cfg.settings.seed).permutation(n_test)[:cfg.max_test])


def _training_order(labels_train: np.ndarray, cfg: FinetuningConfig, n_main: int,
                    seed: int) -> np.ndarray:
    """The nested, stratified order in which seed ``seed``'s label sets take the training
    pairs (:func:`nested_order` at every size the comparison and the curve read)."""
    n_all = len(labels_train)
    every = {n_main, *(min(n, n_all) for n in cfg.curve_sizes),
             *(min(n, n_all) for n in cfg.sizes_of("full"))}
    return nested_order(labels_train, every, seed)


def _tuned_sizes(cfg: FinetuningConfig, method: str, seed: int, n_main: int, n_all: int
                 ) -> set[int]:
    """The label counts one finetuning run of ``(method, seed)`` is read at (one run gives
    every point of its curve and the comparison's)."""
    want = ({min(n, n_all) for n in cfg.sizes_of(method)}
            if method in cfg.curve_methods and seed in cfg.curve_seeds else set())
    if seed == cfg.settings.seed and method in cfg.methods:
        want.add(n_main)
    return want


def _take(sp: StoreSplit, train: Dataset, idx: np.ndarray) -> tuple[StoreSplit, Dataset]:
    """The training pairs ``idx`` of ``sp`` and of ``train``."""
    return (replace(sp, acts_train=sp.acts_train[idx], labels_train=sp.labels_train[idx],
                    pairs_train=[sp.pairs_train[i] for i in idx],
                    groups_train=[sp.groups_train[i] for i in idx]),
            replace(train, records=[train.records[i] for i in idx]))


def compare_store(bridge, store: ActivationStore, dataset: Dataset, cfg: FinetuningConfig,
                  known_z: Mapping[str, float] | None = None
                  ) -> tuple[list[FinetuningRow], list[dict], dict]:
    """``(rows, curve rows, summary)`` of one dataset: the comparison and the label curve."""
    template, sp, train, test = prepare_comparison(bridge, store, dataset, cfg)
    groups, unit = bootstrap_groups(sp)
    y = sp.labels_test
    n_all = len(train.records)
    cache: dict[tuple[str, int, int], Scored] = {}
    n_main = min(cfg.max_train or n_all, n_all)
    orders = {}

    def order(seed: int) -> np.ndarray:
        if seed not in orders:
            orders[seed] = _training_order(sp.labels_train, cfg, n_main, seed)
        return orders[seed]

    def run(method: str, size: int, seed: int, harvest: Cost | None = None) -> Scored:
        key = (method, size, seed)
        if key in cache:
            return cache[key]
        if method in TUNED:  # the whole curve of (method, seed) in one run, read after each n
            want = {size} | _tuned_sizes(cfg, method, seed, n_main, n_all)
            _, sub_train = _take(sp, train, order(seed)[:max(want)])
            tune = cfg.tuning(method, seed)
            points = finetune_curve(bridge, sub_train, test, sorted(want), template, tune)
            curve = {pt.n_train: Scored(pt.result.p, pt.cost, pt.trainable_params,
                                        pt.summary(tune)) for pt in points}
            gc.collect()
            cache.update({(method, n, seed): sc for n, sc in curve.items()})
            return cache[key]
        sub_sp, _ = _take(sp, train, order(seed)[:size])
        cache[key] = answers(sub_sp, bridge, test, method, cfg, seed, template, harvest,
                             known_z)
        return cache[key]

    harvest = (harvest_cost(bridge, _take(sp, train, order(cfg.settings.seed)[:n_main])[1],
                            template) if any(m in PROBES for m in cfg.methods) else None)
    main = {m: run(m, n_main, cfg.settings.seed, harvest) for m in cfg.methods}
    rows = []
    for m, s in main.items():
        acc = evaluate(y, s.p, groups=groups, **cfg.settings.boot_kwargs())["accuracy"]
        versus = {}
        if "supervised" in main:
            d = paired_difference(y, s.p, main["supervised"].p, groups,
                                  **cfg.settings.boot_kwargs())
            versus = dict(minus_supervised=d["value"], minus_supervised_lo=d["lo"],
                          minus_supervised_hi=d["hi"],
                          minus_supervised_ci_counts=held_out_ci_counts(sp, d),
                          n_groups=len(d["group_diffs"]),
                          minus_supervised_group_diffs=tuple(d["group_diffs"]))
        rows.append(FinetuningRow(
            dataset=dataset.name, method=m, n_train=0 if m == "zero_shot" else n_main,
            n_test=len(y), accuracy=acc["value"], lo=acc["lo"], hi=acc["hi"],
            ci_counts=acc.get("ci_counts"), **versus, train_seconds=s.cost.seconds,
            train_cpu_seconds=s.cost.cpu_seconds, peak_mb=s.cost.peak_mb,
            memory_kind=s.cost.memory_kind, trainable_params=s.trainable_params,
            layer=s.extra.get("layer"), hook=s.extra.get("hook"),
            layer_rule=s.extra.get("layer_rule"), examples_per_s=s.extra.get("examples_per_s"),
            cpu_seconds_per_example=s.extra.get("cpu_seconds_per_example"),
            loss_first=s.extra.get("loss_first"), loss_last=s.extra.get("loss_last"),
            split_used=sp.split_used, ci_unit=unit))
    curve = curve_rows(dataset.name, n_all, cfg, run, y, groups)
    return rows, curve, {"split_used": sp.split_used, "ci_unit": unit,
                         "n_train_available": n_all, "n_train": n_main, "n_test": len(y),
                         "tuned": {m: s.extra for m, s in main.items() if m in TUNED}}


@dataclass(frozen=True, kw_only=True)
class FinetuningRow:
    """One method's held-out accuracy beside the supervised probe's, and its cost."""

    dataset: str
    method: str
    n_train: int
    n_test: int
    accuracy: float
    lo: float
    hi: float
    ci_counts: bool | None
    minus_supervised: float | Absent = ABSENT
    minus_supervised_lo: float | Absent = ABSENT
    minus_supervised_hi: float | Absent = ABSENT
    minus_supervised_ci_counts: bool | Absent = ABSENT
    n_groups: int | Absent = ABSENT
    minus_supervised_group_diffs: tuple[float, ...] | Absent = ABSENT
    train_seconds: float
    train_cpu_seconds: float
    peak_mb: float
    memory_kind: str
    trainable_params: int
    layer: int | None
    hook: str | None
    layer_rule: str | None
    examples_per_s: float | None
    cpu_seconds_per_example: float | None
    loss_first: float | None
    loss_last: float | None
    split_used: str
    ci_unit: str


@dataclass(frozen=True)
class FinetuningRows(StepRows):
    rows: tuple[FinetuningRow, ...] = ()


def run_finetuning(bridge, stores: list[tuple[ActivationStore, Dataset]], out: str | Path,
                   cfg: FinetuningConfig | None = None,
                   zero_shot_z: Mapping[str, Mapping[str, float]] | None = None
                   ) -> FinetuningRows:
    """The comparison and the label curve on every ``(store, dataset)`` (the store harvested
    from the dataset with ``bridge``'s model); writes ``finetuning.csv``,
    ``finetuning_curve.csv``, ``finetuning_summary.json``, their figures and the config into
    ``out``, and returns the comparison rows. ``bridge`` is not changed. ``zero_shot_z``: per
    dataset, the zero-shot judge's calibrated log-odds by pair id where a caller has them
    (``HeldOutJudges.zero_shot_z``), so it is not asked twice."""
    cfg = cfg or FinetuningConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows, curve, summary = [], [], {}
    for store, dataset in stores:
        if dataset.kind != "comparison":
            warnings.warn(f"{dataset.name}: finetuning compares comparisons; skipped")
            continue
        r, c, s = compare_store(bridge, store, dataset, cfg,
                                (zero_shot_z or {}).get(dataset.name))
        rows += r
        curve += c
        summary[dataset.name] = s
    model = model_name(bridge)
    result = FinetuningRows(rows=tuple(rows))
    write_csv(out / "finetuning.csv", result.table())
    write_csv(out / "finetuning_curve.csv", curve)
    write_json(out / "finetuning_summary.json", {"model": model, "datasets": summary})
    save_config(out, "finetuning", cfg)
    import matplotlib.pyplot as plt

    for name, fig in (("finetuning", plot_comparison(result.rows, model, cfg)),
                      ("finetuning_curve", plot_curve(curve, result.rows, model, cfg))):
        save_figure(fig, out, name, preview=cfg.settings.quick)
        plt.close(fig)
    return result


def plan_finetuning(bridge, datasets: list[Dataset], root, cfg: FinetuningConfig,
                    template=None) -> list:
    """The model passes of :func:`run_finetuning`, for its estimate. A finetuned copy runs on
    its own runner, whose rate the model's prompts do not measure: planned by size, untimed."""
    from ppairs_lens.activations.pair_info import pair_info
    from ppairs_lens.judges.run_estimate import (PlannedStep, plan_held_out_run,
                                                 planned_template)

    steps = plan_held_out_run(bridge, datasets, root, template=template, split=None, forms=())
    split = cfg.settings.split_kwargs()
    for d in datasets:
        tpl = planned_template(bridge, d, root, template=template)[1]
        train, test, _ = split_records(pair_info(d), d, **split)
        keep = _test_keep(len(test.records), cfg)
        if keep is not None:
            test = replace(test, records=[test.records[i] for i in keep])
        n_all = len(train.records)
        n_main = min(cfg.max_train or n_all, n_all)
        seed = cfg.settings.seed
        if any(m in PROBES for m in cfg.methods):
            order = _training_order(np.asarray(train.labels()), cfg, n_main, seed)
            part = replace(train, records=[train.records[i] for i in order[:n_main]])
            steps.append(PlannedStep(f"{d.name} probe training", "harvest",
                                     tuple(build_contrast_pairs(bridge.tokenizer, part, tpl))))
        if "zero_shot" in cfg.methods:
            steps.append(PlannedStep(d.name, "zero_shot",
                                     tuple(judge_prompts(bridge.tokenizer, test, tpl))))
        for method in TUNED:
            runs = [w for s in {seed, *cfg.curve_seeds}
                    if (w := _tuned_sizes(cfg, method, s, n_main, n_all))]
            if runs:
                epochs = cfg.tuning(method, seed).epochs
                steps.append(PlannedStep.untimed(d.name, f"{method} training",
                                                 epochs * sum(max(w) for w in runs),
                                                 "comparisons, both orders"))
                steps.append(PlannedStep.untimed(d.name, f"{method} reads",
                                                 2 * len(test.records) * sum(map(len, runs)),
                                                 "prompts"))
    return steps


def cli(args, bridge) -> None:
    """``ppairs-lens finetune`` on the model ``bridge`` (loaded by :mod:`analyses.cli`)."""
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data import BUILTIN_NAMES
    from ppairs_lens.data.specs import load_dataset_spec
    from ppairs_lens.judges.run_estimate import announce

    specs = args.datasets or list(BUILTIN_NAMES)
    datasets = [ds for ds in (load_dataset_spec(spec, max_pairs=args.max_pairs, seed=args.seed)
                              for spec in specs) if ds.kind == "comparison"]
    cfg = args.config(FinetuningConfig, PRESETS)
    announce(bridge, plan_finetuning(bridge, datasets, args.stores, cfg, args.template),
             measure=not args.no_calibration)
    pairs = [(ensure_store(bridge, ds, args.stores, template=args.template), ds)
             for ds in datasets]
    for r in run_finetuning(bridge, pairs, args.out, cfg).rows:
        print(f"{r.dataset:24s} {r.method:10s} acc {r.accuracy:.3f} "
              f"[{r.lo:.3f}, {r.hi:.3f}]  train {r.train_seconds:.1f} s  "
              f"{r.trainable_params} params  peak {r.peak_mb:.0f} MB")
