"""Layer sweep: how well each probe type reads the judgement at every layer (paper Figs 6-7).

Per store: drop ties, split leak-free (``split_by="auto"``: whole groups, else items, else
pairs), fit every probe kind at every read-out on the training pairs and score the held-out
pairs with bootstrap CIs over leak groups; beside them, on the same pairs, the no-model
baselines fitted on train, ``memorisation`` (training win rates of items) and ``length`` (the
longer item wins), and the judges and text baselines the caller measured (``judges``, a
:class:`PairScores`: an input, never part of the config). The layer is chosen by its accuracy
on a leak-free validation split of the training pairs (``val_value``), never by the test score.

Writes ``layer_sweep.csv`` (dataset x kind x layer x metric; baselines and judges at
``layer = -1``), ``layer_sweep_summary.json`` (chosen layers, test accuracy, paired
differences), ``layer_sweep.config.json`` and ``layer_sweep.{png,svg,md}``; ``ppairs-lens
sweep`` also ``layer_sweep_judges.json`` (rewritten as each judge finishes; judges are
remembered in their store's ``judges/`` folder, so a cut run redoes none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from analyses.layer_sweep_plots import plot_sweep
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.evaluation.baselines import (length_balanced_accuracy, memorisation_baseline,
                                              length_baseline)
from ppairs_lens.evaluation.paired import paired_difference
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.result_table import JUDGE_KEYS, TEXT_BASELINE_KEYS, result_tables
from ppairs_lens.evaluation.verdicts import Difference
from ppairs_lens.io.json_fields import read_json_object
from ppairs_lens.io.records import record_data, record_from_data, rows_from_csv
from ppairs_lens.evaluation.readout_choice import (VAL_REPEATS, VAL_SIZE, ReadoutChoice,
                                                   choose_readouts)
from ppairs_lens.evaluation.store_split import (StoreSplit, bootstrap_groups, covered_test_pairs,
                                                held_out_ci_counts, split_store,
                                                undecidable_at_size)
from ppairs_lens.evaluation.sweep_scores import score_pairs_batch
from ppairs_lens.io.outputs import save_config, save_figure, write_csv, write_json
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["JUDGES", "LengthBalanced", "PairScores", "PairedDifference", "SweepConfig",
           "SweepEntry", "SweepResult", "SweepRow", "SweepTest", "pair_scores", "read_sweep",
           "run_sweep", "sweep_split", "sweep_store"]

#: Prompted judges a caller may pass per-pair probabilities for (kind -> key in their
#: reports), and the no-model predictors that need the items' texts, passed the same way.
JUDGES: dict[str, str] = JUDGE_KEYS
TEXT_BASELINES: dict[str, str] = TEXT_BASELINE_KEYS
BASELINES = ("memorisation", "length")


@dataclass(frozen=True)
class PairScores:
    """What a sweep scores beside its probes, measured by the caller: dataset -> predictor
    kind (a key of :data:`JUDGES` or :data:`TEXT_BASELINES`) -> {pair_id: P(item 1)}. An input
    of :func:`run_sweep` (a study's step cache keys on it), never part of :class:`SweepConfig`:
    a config says what a sweep ran with, not what others found."""

    by_dataset: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)

    def of(self, dataset: str, kind: str) -> Mapping[str, float]:
        """``kind``'s P(item 1) per pair id on ``dataset`` (empty: not measured there)."""
        return self.by_dataset.get(dataset, {}).get(kind, {})


def pair_scores(entries: Mapping[str, Mapping]) -> PairScores:
    """The :class:`PairScores` among per-dataset entries keyed as the judges' reports key them
    (``p_by_pair``, ``few_shot_p_by_pair``, ``lexical_p_by_pair`` ...), without metrics,
    diagnostics or demonstrations."""
    return PairScores({ds: {kind: dict(e[key]) for kind, key in {**JUDGES, **TEXT_BASELINES}.items()
                            if e.get(key)} for ds, e in entries.items()})


@dataclass(frozen=True, kw_only=True)
class SweepRow:
    """A row of ``layer_sweep.csv``: a probe kind at one read-out, or a baseline or judge
    (``layer = -1``), on one metric of the held-out pairs."""

    dataset: str
    kind: str
    layer: int
    hook: str
    metric: str
    value: float | None
    lo: float | None
    hi: float | None
    ci_counts: bool | None
    n_train: int
    n_test: int
    split_used: str
    val_value: float | None = None       # the layer's validation accuracy (probes)
    sign_confidence: float | None = None
    chosen: bool | None = None           # the read-out chosen on validation (probes)
    selected_by: str | None = None
    predictor: str = ""                  # what a baseline or judge is


@dataclass(frozen=True)
class SweepTest:
    """A probe's test score at its chosen read-out, with its bootstrap interval."""

    metric: str
    value: float | None
    lo: float | None
    hi: float | None
    ci_counts: bool | None


@dataclass(frozen=True)
class PairedDifference:
    """The probe minus another predictor on the test pairs both scored (paired bootstrap over
    the leak groups; ``group_diffs``: one difference per group, for the sign-flip test)."""

    value: float | None
    lo: float | None
    hi: float | None
    n_boot_used: int
    n_groups: int
    ci_counts: bool | None
    a: float | None
    b: float | None
    n: int
    metric: str
    group_diffs: tuple[float | None, ...]
    about: str

    def difference(self) -> Difference:
        """As the claims' :class:`~ppairs_lens.evaluation.verdicts.Difference`."""
        return Difference.from_row(record_data(self))


@dataclass(frozen=True)
class LengthBalanced:
    """Accuracies on the length-balanced test pairs (where the sweep found enough of them)."""

    n: int
    tolerance: float
    accuracy: dict[str, float | None]


@dataclass(frozen=True)
class SweepEntry:
    """One (dataset, probe kind): the read-out chosen on validation and what it scored."""

    dataset: str
    kind: str
    layer: int
    hook: str
    val_value: float | None
    selected_by: str | None
    split_used: str
    n_test: int
    n_groups_test: int
    ci_unit: str
    test: SweepTest
    length_balanced: LengthBalanced | None
    minus: dict[str, PairedDifference]
    unavailable: dict[str, str]


@dataclass(frozen=True)
class SweepResult:
    """``layer_sweep_summary.json`` (a :class:`SweepEntry` per dataset, kind) and rows."""

    selection: str
    metric: str
    ci: str
    entries: tuple[SweepEntry, ...]
    rows: tuple[SweepRow, ...] = ()

    def chosen(self) -> dict[tuple[str, str], int]:
        """(dataset, probe kind) -> the read-out chosen on validation."""
        return {(e.dataset, e.kind): e.layer for e in self.entries}

    def datasets(self) -> list[str]:
        """The swept datasets, in order."""
        return list(dict.fromkeys(e.dataset for e in self.entries))

    def entry(self, dataset: str, kind: str) -> SweepEntry | None:
        return next((e for e in self.entries if e.dataset == dataset and e.kind == kind), None)

    def others(self, dataset: str) -> dict[tuple[str, str], SweepRow]:
        """(kind, metric) -> the row of each baseline and judge on ``dataset``."""
        return {(r.kind, r.metric): r for r in self.rows if r.dataset == dataset and r.layer < 0}

    def summary(self) -> dict:
        """``layer_sweep_summary.json``."""
        return {f.name: record_data(getattr(self, f.name)) for f in fields(self)
                if f.name != "rows"}

    def table(self) -> list[dict]:
        """``layer_sweep.csv``."""
        return [record_data(r) for r in self.rows]


def read_sweep(folder: str | Path) -> SweepResult:
    """The sweep a run wrote into ``folder``; a misfit is refused naming file, row, field."""
    folder = Path(folder)
    path = folder / "layer_sweep_summary.json"
    return record_from_data(SweepResult, {
        **read_json_object(path), "rows": rows_from_csv(SweepRow, folder / "layer_sweep.csv")},
        str(path))


@dataclass
class SweepConfig:
    """What a layer sweep ran on; saved beside its results."""

    stores: list[str] = field(default_factory=list)
    kinds: tuple[str, ...] = PROBE_KINDS
    settings: EvalSettings = EvalSettings()  # seed, n_boot, test share, split_by
    val_size: float = VAL_SIZE  # share of training groups that choose the layer
    val_repeats: int = VAL_REPEATS  # validation splits averaged
    C: float = 1.0
    standardize: bool = True  # supervised probes on features scaled by training RMS
    metric: str = "accuracy"  # plotted metric: accuracy | f1 (macro) | auroc


def _row(sp: StoreSplit, kind: str, layer: int, hook: str, metric: str, s: dict, n: int,
         **extra) -> SweepRow:
    return SweepRow(dataset=sp.name, kind=kind, layer=layer, hook=hook, metric=metric,
                    value=s["value"], lo=s["lo"], hi=s["hi"], ci_counts=s.get("ci_counts"),
                    n_train=len(sp.labels_train), n_test=n, split_used=sp.split_used, **extra)


def _scored(sp: StoreSplit, p: np.ndarray, idx: np.ndarray | None, cfg: SweepConfig) -> dict:
    return _scored_batch(sp, np.asarray(p, dtype=np.float64)[:, None], idx, cfg)[0]


def _scored_batch(sp: StoreSplit, p: np.ndarray, idx: np.ndarray | None, cfg: SweepConfig
                  ) -> list[dict]:
    """Per column of ``p`` (P(item 1) on the test pairs ``idx``): its scores with CIs, all
    columns on one draw of the resamples (:func:`score_pairs_batch`)."""
    idx = np.arange(len(sp.labels_test)) if idx is None else idx
    unit = bootstrap_groups(sp)[0]
    batch = score_pairs_batch(sp.labels_test[idx], p, [sp.pairs_test[i] for i in idx],
                              [unit[i] for i in idx], **cfg.settings.boot_kwargs())
    return [{m: {**s, "ci_counts": held_out_ci_counts(sp, s)} for m, s in scores.items()}
            for scores in batch]


def sweep_split(sp: StoreSplit, hook_names: list[str], model: str, cfg: SweepConfig,
                judges: PairScores | None = None) -> tuple[list[SweepRow], list[SweepEntry]]:
    """``(rows, summary entries)`` of one split store, ``judges`` on the pairs they cover."""
    fit_kw = {"C": cfg.C, "standardize": cfg.standardize, "model_name": model}
    probes = fit_sweep(sp.acts_train, sp.labels_train, cfg.kinds, groups=sp.groups_train,
                       seed=cfg.settings.seed, **fit_kw)
    choice = choose_readouts(sp, cfg.kinds, seed=cfg.settings.seed, val_size=cfg.val_size,
                             repeats=cfg.val_repeats, C=cfg.C, standardize=cfg.standardize)
    proba = probes.predict_proba(sp.acts_test)
    sign_conf = getattr(probes, "sign_confidence", {}) or {}
    n_test = len(sp.labels_test)
    # every (kind, layer) scored at once; a degenerate layer (NaN) has nothing to score
    cols = [(kind, li) for kind in cfg.kinds for li in range(len(hook_names))
            if not np.isnan(proba[kind][li]).any()]
    scored = dict(zip(cols, _scored_batch(
        sp, np.stack([proba[k][li] for k, li in cols], axis=1), None, cfg) if cols else []))
    rows: list[SweepRow] = []
    for kind, li in cols:
        sc = float(sign_conf[kind][li]) if kind in sign_conf else None
        c = choice[kind]
        for metric, s in scored[kind, li].items():
            rows.append(_row(sp, kind, li, hook_names[li], metric, s, n_test,
                             val_value=c.val_scores[li] if c.val_scores else None,
                             sign_confidence=sc, chosen=li == c.index,
                             selected_by=c.selected_by))
    others: dict[str, tuple[np.ndarray | None, np.ndarray]] = {}
    notes: dict[str, str] = {}
    for make in (memorisation_baseline, length_baseline):
        b = make(sp.pairs_train, sp.labels_train, sp.pairs_test)
        if not b.available:
            notes[b.kind] = b.reason or "unavailable"
            continue
        others[b.kind] = (None, b.p)
        notes[b.kind] = b.predictor
        for metric, s in _scored(sp, b.p, None, cfg).items():
            rows.append(_row(sp, b.kind, -1, "", metric, s, n_test, predictor=b.predictor))
    judges = judges or PairScores()
    for kind in {**JUDGES, **TEXT_BASELINES}:  # on the test pairs each covers
        if (covered := covered_test_pairs(sp, judges.of(sp.name, kind))) is None:
            continue
        idx, p = others[kind] = covered
        what = "no-model baseline" if kind in TEXT_BASELINES else "prompted judge"
        notes[kind] = f"{what} on {len(idx)} of {n_test} test pairs"
        for metric, s in _scored(sp, p, idx, cfg).items():
            rows.append(_row(sp, kind, -1, "", metric, s, len(idx), predictor=notes[kind]))
    return rows, _summary_entries(sp, cfg, proba, choice, others, notes)


def _summary_entries(sp: StoreSplit, cfg: SweepConfig, proba: dict,
                     choice: dict[str, ReadoutChoice], others: dict, notes: dict
                     ) -> list[SweepEntry]:
    """Per probe kind: chosen read-out, test accuracy, paired differences."""
    y = sp.labels_test
    g, ci_unit = bootstrap_groups(sp)
    boot = {"n_boot": cfg.settings.n_boot, "seed": cfg.settings.seed}
    out = []
    for kind in cfg.kinds:
        c = choice[kind]
        li = c.index
        pk = proba[kind][li]
        if np.isnan(pk).any():       # degenerate on the whole training split: no score
            continue
        balanced = length_balanced_accuracy(
            y, {"probe": pk, **{k: p for k, (i, p) in others.items() if i is None}},
            sp.pairs_test)
        # the other probe kinds at their own chosen read-outs (supervised - unsupervised)
        kinds = {f"probe:{k}": (None, proba[k][choice[k].index]) for k in cfg.kinds
                 if k != kind and not np.isnan(proba[k][choice[k].index]).any()}
        minus = {}
        for other, (idx, p) in {**others, **kinds}.items():
            sel = np.arange(len(y)) if idx is None else idx
            d = paired_difference(y[sel], pk[sel], p, [g[i] for i in sel], **boot)
            minus[other] = PairedDifference(
                **{**d, "ci_counts": held_out_ci_counts(sp, d),
                   "group_diffs": tuple(d["group_diffs"]),
                   "about": notes.get(other, "probe at its chosen read-out")})
        s = _scored(sp, pk, None, cfg)["accuracy"]
        out.append(SweepEntry(
            dataset=sp.name, kind=kind, layer=li, hook=c.hook, val_value=c.val_value,
            selected_by=c.selected_by, split_used=sp.split_used, n_test=len(y),
            n_groups_test=len(set(sp.groups_test)), ci_unit=ci_unit,
            test=SweepTest(metric="accuracy", value=s["value"], lo=s["lo"], hi=s["hi"],
                           ci_counts=s["ci_counts"]),
            length_balanced=None if balanced is None else LengthBalanced(**balanced),
            minus=minus, unavailable={k: v for k, v in notes.items() if k not in others}))
    return out


def sweep_store(store: ActivationStore, cfg: SweepConfig, judges: PairScores | None = None
                ) -> list[SweepRow]:
    """The table rows of one store."""
    return _sweep_one(store, cfg, judges)[0]


def _sweep_one(store: ActivationStore, cfg: SweepConfig, judges: PairScores | None
               ) -> tuple[list[SweepRow], list[SweepEntry]]:
    return sweep_split(split_store(store, **cfg.settings.split_kwargs()), store.hook_names,
                       store.meta.model, cfg, judges)


def run_sweep(stores: list[ActivationStore], out: str | Path, cfg: SweepConfig | None = None,
              *, judges: PairScores | None = None) -> SweepResult:
    """Sweep every store, ``judges`` beside; write table, summary, figure and config."""
    cfg = cfg or SweepConfig(stores=[str(s.path) for s in stores])
    out = Path(out)
    rows, entries = [], []
    for s in stores:
        r, e = _sweep_one(s, cfg, judges)
        rows += r
        entries += e
    result = SweepResult(
        selection="read-out with the best validation accuracy (probes fitted on "
                  f"{1 - cfg.val_size:.0%} of the training groups, scored on the rest, "
                  f"{cfg.val_repeats} splits made as the test split; first maximum); "
                  "without a validation split the last block's resid_post; test set "
                  "never read to choose",
        metric="accuracy",
        ci=f"95% percentile bootstrap over leak groups ({cfg.settings.n_boot} resamples), "
           "paired for differences",
        entries=tuple(entries), rows=tuple(rows))
    write_csv(out / "layer_sweep.csv", result.table())
    write_json(out / "layer_sweep_summary.json", result.summary())
    save_config(out, "layer_sweep", cfg)
    save_figure(plot_sweep(result, cfg, stores[0].meta.model), out, "layer_sweep",
                preview=cfg.settings.quick)
    return result


def cli(args, bridge) -> None:
    """``ppairs-lens sweep``: the probes, every no-model baseline and the judges of
    ``--judges`` on the same test pairs; each judge is remembered beside its store as it
    finishes (a rerun redoes none), its report written at once."""
    import time

    from ppairs_lens.activations.pair_info import pair_info
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data import BUILTIN_NAMES
    from ppairs_lens.data.specs import load_dataset_spec
    from ppairs_lens.evaluation.text_baselines import held_out_text_baselines
    from ppairs_lens.judges.held_out import (HeldOutJudgeRun, judge_cache_dir, judge_entry,
                                             judge_held_out)
    from ppairs_lens.judges.run_estimate import announce, plan_held_out_run

    t0 = time.perf_counter()
    specs = args.datasets or list(BUILTIN_NAMES)
    datasets = [load_dataset_spec(s, max_pairs=args.max_pairs, seed=args.seed) for s in specs]
    split = args.settings.split_kwargs()
    forms = tuple(f for f in dict.fromkeys(getattr(args, "judges", None) or ())
                  if f != "none")
    limits = dict(getattr(args, "judge_max_pairs", None) or ())
    where = {"template": args.template, "names": args.hooks}
    small = [w for d in datasets
             if (w := undecidable_at_size([pair_info(d)], d.name, **split))]
    if small:        # said before any model work, so the limits can change first
        print("cannot be decided at these sizes:", *(f"  {w}" for w in small), sep="\n",
              flush=True)
    steps = plan_held_out_run(bridge, datasets, args.stores, split=split, forms=forms,
                              max_pairs=limits, **where)
    estimate = announce(bridge, steps, names=args.hooks, measure=not args.no_calibration)
    took: dict[tuple[str, str], float] = {}    # (dataset, step) -> seconds, vs the plan
    on_disk = {(s.dataset, s.kind) for s in steps if s.done}
    stores = []
    for d in datasets:
        t = time.perf_counter()
        stores.append(ensure_store(bridge, d, args.stores, **where))
        took[d.name, "harvest"] = time.perf_counter() - t
        if (d.name, "harvest") not in on_disk:
            print(estimate.remaining(took), flush=True)
    cfg = args.config(SweepConfig, stores=[str(s.path) for s in stores])
    out = Path(args.out)
    entries: dict[str, dict] = {}

    def written(name: str):
        last = [time.perf_counter()]

        def done(form: str, result: HeldOutJudgeRun) -> None:   # as each judge finishes
            took[name, form] = time.perf_counter() - last[0]
            last[0] = time.perf_counter()
            entries[name] = judge_entry(result)
            write_json(out / "layer_sweep_judges.json", entries)
            if form not in result.reused:
                print(estimate.remaining(took), flush=True)
        return done

    scores: dict[str, dict] = {}
    for s, d in zip(stores, datasets):
        name = s.meta.dataset
        res = judge_held_out(bridge, s, d, **split, forms=forms, max_pairs=limits,
                             cache_dir=judge_cache_dir(s), on_done=written(name))
        entries[name] = judge_entry(res)
        if res.reused:
            print(f"{name}: judges reused from {judge_cache_dir(s)}: {', '.join(res.reused)}")
        texts = held_out_text_baselines(s.pairs(), d, embedding=bridge.W_E.detach(),
                                        tokenizer=bridge.tokenizer, **split).p_by_pair()
        scores[name] = {**entries[name], **texts}
    write_json(out / "layer_sweep_judges.json", entries)
    result = run_sweep(stores, args.out, cfg, judges=pair_scores(scores))
    print("\n".join(result_tables(result.table(), result.summary()["entries"],
                                   test_size=cfg.settings.test_size)))
    print("", *estimate.compared(took), sep="\n")
    print(f"took {time.perf_counter() - t0:.0f} s in all (estimated model time "
          f"~{estimate.seconds:.0f} s)")
