"""Insertion scoring on ClimateX with probe preferences, against the zero-shot comparison.

The layout of the thesis's Table 4.4: a probe trained on comparisons among ``n_train``
labelled training statements (balanced over the four confidence levels) scores test statements
by binary search over the levels, comparing each with ``k`` reference statements of the middle
level; the same with the model's zero-shot comparison. Per-level and overall accuracy, slope
and bias (the ClimateX paper's: over the per-level mean predictions); each method is paired
statement by statement with the ClimateX paper's own predictions (``published_predictions/``
beside the data file). Writes ``insertion.csv``, ``insertion_predictions.csv``, the config and
``insertion.{png,svg}``; ``ppairs-lens rank`` runs it on a ClimateX file.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppairs_lens.data import CLIMATEX_LEVELS, load_climatex, read_climatex
from ppairs_lens.data.climatex import published_prediction_sets
from ppairs_lens.data.item_sampling import (balanced_by_score, stratified_by_score,
                                            training_comparisons)
from ppairs_lens.data.specs import spec_format, spec_limit
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.bootstrap import mean_ci
from ppairs_lens.evaluation.level_agreement import (lexical_levels, majority_level,
                                                    paired_with_published, slope_bias)
from ppairs_lens.presets import Preset
from ppairs_lens.evaluation.published import published
from ppairs_lens.io.outputs import save_config, save_figure, write_csv
from ppairs_lens.io.records import ABSENT, Absent, StepRows
from ppairs_lens.io.plotting import caption, style
from ppairs_lens.judges.comparators import (BatchComparator, ProbeComparator, ZeroShotComparator,
                                            run_lockstep)
from ppairs_lens.judges.probe_judge import ProbeJudgeConfig, train_probe
from ppairs_lens.models.loading import model_name
from ppairs_lens.ranking.insertion import insertion_score

__all__ = ["INSERTION_METHODS", "InsertionConfig", "InsertionRow", "InsertionRows",
           "InsertionData", "cli", "insert_dataset", "insertion_data", "pc1_row",
           "place_statements", "print_table", "published_row", "run_insertion",
           "train_insertion_probe"]

INSERTION_METHODS: tuple[str, ...] = ("probe", "zero_shot")
METHOD_LABELS = {"probe": "PPairS (probe) insertion", "zero_shot": "zero-shot insertion"}
NO_MODEL_LABELS = {"majority": "majority level of the train split (no model)",
                   "lexical": "lexical tagger (no model; TF-IDF 1-2 grams, fitted on train)"}


@dataclass
class InsertionConfig(ProbeJudgeConfig):
    """What an insertion (ClimateX) run used; saved beside its results."""

    path: str = "../shared/datasets/climatex/ipcc_statements_dataset.tsv"
    n_train: int = 100  # labelled training statements, balanced over the levels
    max_train_pairs: int | None = 400  # comparisons among them used to fit the probe
    max_test: int | None = 40  # test statements, in the test split's level proportions
    k: int = 5  # references compared per binary-search step
    # disjoint pairs of test statements of different levels for each comparator's pairwise
    # accuracy (the thesis reports its probe's, 72.7%): its skill, before its tags are compared
    pairwise_pairs: int = 60
    methods: tuple[str, ...] = INSERTION_METHODS
    # the ClimateX paper's per-statement predictions; None: published_predictions/ beside path
    predictions_dir: str | None = None


@dataclass(frozen=True)
class InsertionData:
    """What a run places and against what: the file's statements, the balanced training
    statements (the references, by level), the test statements and their true levels."""

    all_items: list
    train_items: list
    test_items: list
    meta: Any  # the comparison question (a Dataset without records)
    levels: list[int]
    references: dict[int, list[str]]
    flat: dict[str, str]  # every statement's text by id
    true: dict[str, int]  # each test statement's level


def insertion_data(cfg: InsertionConfig) -> InsertionData:
    """The statements of a run of ``cfg`` (seeded: the same on every call)."""
    all_items = read_climatex(cfg.path)
    meta = dataclasses.replace(load_climatex(cfg.path, split=None, max_items=4, max_pairs=None),
                               records=[], name="climatex")
    rng = random.Random(cfg.settings.seed)
    train_items = balanced_by_score([i for i in all_items if i.split == "train"], cfg.n_train, rng)
    test_items = stratified_by_score([i for i in all_items if i.split == "test"], cfg.max_test,
                                     rng)
    if not train_items or not test_items:
        raise DataError("ClimateX file needs statements in both the train and the test split",
                        file=cfg.path, field="split")
    levels = list(range(len(CLIMATEX_LEVELS)))
    return InsertionData(
        all_items, train_items, test_items, meta, levels,
        {lv: [i.item_id for i in train_items if int(i.score) == lv] for lv in levels},
        {i.item_id: i.text for i in train_items + test_items},
        {i.item_id: int(i.score) for i in test_items})


def train_insertion_probe(bridge, data: InsertionData, cfg: InsertionConfig):
    """The probe judge of a run: fitted on comparisons among its training statements."""
    train = training_comparisons(data.meta, data.train_items, cfg.max_train_pairs,
                                 cfg.settings.seed)
    cfg.say(f"climatex: harvesting {len(train)} training pairs of {len(data.train_items)} "
            "statements")
    return train_probe(bridge, train, kind=cfg.probe_kind, layer=cfg.layer,
                       seed=cfg.settings.seed, settings=cfg.harvest_settings())


def place_statements(comp: BatchComparator, data: InsertionData, k: int, seed: int) -> dict:
    """Every test statement placed by binary-search insertion, in lockstep: ``{id: (level,
    trace)}``. A step's ``k`` comparisons are one batch, sharing the statement's prompt part."""
    def task(iid: str, j: int):
        return lambda cmp: insertion_score(iid, data.levels, data.references, cmp, k=k,
                                           seed=seed + j, return_trace=True)

    return run_lockstep({iid: task(iid, j) for j, iid in enumerate(data.true)}, comp)


def held_out_pairs(data: InsertionData, n: int, seed: int) -> list[tuple[str, str]]:
    """Up to ``n`` disjoint pairs of test statements whose levels differ (seeded): no
    statement in two pairs, so the pairs are independent units for an interval."""
    ids = sorted(data.true)
    random.Random(seed).shuffle(ids)
    out, left = [], []
    for i in ids:
        j = next((x for x in left if data.true[x] != data.true[i]), None)
        if j is None:
            left.append(i)
        else:
            left.remove(j)
            out.append((j, i))
        if len(out) >= n:
            break
    return out


def pairwise_row(m: str, comp: BatchComparator, data: InsertionData, cfg: InsertionConfig
                 ) -> InsertionRow | None:
    """Comparator ``m``'s accuracy on held-out pairs of test statements (None: no pair)."""
    pairs = held_out_pairs(data, cfg.pairwise_pairs, cfg.settings.seed)
    if not pairs:
        return None
    comp.prefetch(pairs)
    p = [comp(a, b) for a, b in pairs]       # P(a is the more confident), a tie half a hit
    hit = [0.5 if q == 0.5 else float((q > 0.5) == (data.true[a] > data.true[b]))
           for q, (a, b) in zip(p, pairs)]
    acc = mean_ci(hit, **cfg.settings.boot_kwargs())
    return InsertionRow(method=m, label=f"{METHOD_LABELS[m]}: pairwise accuracy on held-out "
                        "pairs", level="pairwise held-out", accuracy=acc["value"], lo=acc["lo"],
                        hi=acc["hi"], ci_counts=acc.get("ci_counts", False), n=len(pairs),
                        slope="", bias="", mean_pred="", n_rows=0, n_comparisons=len(pairs),
                        seconds=0.0)


def insert_dataset(bridge, cfg: InsertionConfig
                   ) -> tuple[list[InsertionRow], list[dict], dict]:
    """Insertion-score ClimateX; returns (table rows, per-statement predictions, info)."""
    data = insertion_data(cfg)
    true, flat, meta = data.true, data.flat, data.meta
    settings = cfg.harvest_settings()
    info: dict[str, Any] = {"model": model_name(bridge), "n_train": len(data.train_items),
                            "n_test": len(data.test_items),
                            "train_levels": {CLIMATEX_LEVELS[lv]: len(v)
                                             for lv, v in data.references.items()}}
    unknown = set(cfg.methods) - set(INSERTION_METHODS)
    if unknown:
        raise ValueError(f"unknown insertion methods {sorted(unknown)}; choose from "
                         f"{INSERTION_METHODS}")
    comparators: dict[str, BatchComparator] = {}
    trained = None
    if "probe" in cfg.methods:
        trained = train_insertion_probe(bridge, data, cfg)
        info.update(trained.run_info())
        comparators["probe"] = ProbeComparator(bridge, trained.probe, trained.layer, flat, meta,
                                               calibrate=cfg.calibrate_probe, settings=settings)
    if "zero_shot" in cfg.methods:
        comparators["zero_shot"] = ZeroShotComparator(bridge, flat, meta,
                                                      calibrate=cfg.calibrate_zero_shot,
                                                      settings=settings)
    rows, preds = [], []
    hits: dict[str, np.ndarray] = {}
    published_sets = published_prediction_sets(
        cfg.predictions_dir or Path(cfg.path).parent / "published_predictions")
    for m, comp in comparators.items():
        cfg.say(f"{m}: inserting {len(true)} test statements")
        t0, r0 = time.perf_counter(), comp.n_rows
        out = place_statements(comp, data, cfg.k, cfg.settings.seed)
        secs = time.perf_counter() - t0
        ids = list(true)
        y = np.array([true[i] for i in ids])
        p = np.array([out[i][0] for i in ids])
        n_cmp = sum(out[i][1].n_comparisons for i in ids)
        for i in ids:
            preds.append({"method": m, "item_id": i, "true": true[i], "pred": int(out[i][0]),
                          "true_level": CLIMATEX_LEVELS[true[i]],
                          "pred_level": CLIMATEX_LEVELS[int(out[i][0])],
                          "path": "/".join(CLIMATEX_LEVELS[lv] for lv in out[i][1].path)})
        slope, bias = slope_bias(p, y)
        hits[m] = hit = (p == y).astype(float)
        cost = {"n_rows": comp.n_rows - r0, "n_comparisons": n_cmp, "seconds": round(secs, 2)}
        if m == "probe" and trained is not None:
            cost.update(trained.cost_columns())
        for lv in data.levels:
            sel = y == lv
            acc = mean_ci(hit[sel], **cfg.settings.boot_kwargs()) if sel.any() else {
                "value": math.nan, "lo": math.nan, "hi": math.nan}
            rows.append(InsertionRow(
                method=m, label=METHOD_LABELS[m], level=CLIMATEX_LEVELS[lv],
                accuracy=acc["value"], lo=acc["lo"], hi=acc["hi"],
                ci_counts=acc.get("ci_counts", False), n=int(sel.sum()), slope="", bias="",
                mean_pred=float(p[sel].mean()) if sel.any() else math.nan, **cost))
        acc = mean_ci(hit, **cfg.settings.boot_kwargs())
        rows.append(InsertionRow(
            method=m, label=METHOD_LABELS[m], level="overall", accuracy=acc["value"],
            lo=acc["lo"], hi=acc["hi"], ci_counts=acc.get("ci_counts", False), n=len(y),
            slope=slope, bias=bias, mean_pred=float(p.mean()), **cost))
        info[f"{m}_cost"] = comp.cost()
        tags = {i: int(out[i][0]) for i in ids}
        pair_row = pairwise_row(m, comp, data, cfg)
        rows += [pair_row] if pair_row else []
        if m == "probe" and trained is not None:
            rows.append(pc1_row(trained))
        rows += [published_row(m, paired_with_published(tags, true, pub,
                                                        **cfg.settings.boot_kwargs()))
                 for pub in published_sets]
    rows += _no_model_rows(data.all_items, data.train_items, data.test_items, hits, cfg)
    return rows, preds, info


def pc1_row(trained) -> InsertionRow:
    """The probe's |cos| with the first principal component of its own training differences
    (thesis Section 4.3.3, Appendix C.5), in ``abs_cos``; no accuracy, no interval."""
    return InsertionRow(method="probe", label=f"{METHOD_LABELS['probe']}: |cos| of its "
                        "direction with PC1 of its training differences",
                        level="direction vs PC1", accuracy=math.nan,
                        abs_cos=trained.pc1_abs_cos, lo=math.nan, hi=math.nan, ci_counts=False,
                        n=trained.n_pairs, slope="", bias="", mean_pred="", n_rows=0,
                        n_comparisons=0, seconds=0.0, **trained.cost_columns())


def published_row(method: str, d: dict) -> InsertionRow:
    """``method`` minus a published model on the same statements (``accuracy``/``lo``/``hi``:
    the paired difference of hits)."""
    return InsertionRow(
        method=f"{method} - {d['versus']}",
        label=f"{METHOD_LABELS[method]} minus {d['versus']} (published predictions, same "
              "statements)", level="published paired", accuracy=d["difference"], lo=d["lo"],
        hi=d["hi"], ci_counts=d["ci_counts"], n=d["n"], slope=d["ours_slope"],
        bias=d["ours_bias"], mean_pred="", n_rows=0, n_comparisons=0, seconds=0.0,
        ours=method, **{k: d[k] for k in ("versus", "model", "setting", "n_unparsed",
                                           "ours_accuracy", "theirs_accuracy", "theirs_slope",
                                           "theirs_bias")})


def _no_model_rows(all_items, train_items, test_items, hits: dict[str, np.ndarray],
                   cfg: InsertionConfig) -> list[InsertionRow]:
    """The train split's majority level and a lexical tagger fitted on the probe's training
    statements; each model method minus each (paired: the difference of hits per statement)."""
    y = np.array([int(i.score) for i in test_items])
    preds = {"majority": majority_level([int(i.score) for i in all_items if i.split == "train"],
                                        len(y)),
             "lexical": lexical_levels([i.text for i in train_items],
                                       [int(i.score) for i in train_items],
                                       [i.text for i in test_items], seed=cfg.settings.seed)}
    rows = []
    for m, p in preds.items():
        hit = (p == y).astype(float)
        acc = mean_ci(hit, **cfg.settings.boot_kwargs())
        slope, bias = slope_bias(p, y)
        rows.append(InsertionRow(
            method=m, label=NO_MODEL_LABELS[m], level="overall", accuracy=acc["value"],
            lo=acc["lo"], hi=acc["hi"], ci_counts=acc.get("ci_counts", False), n=len(y),
            slope=slope, bias=bias, mean_pred=float(p.mean()), n_rows=0, n_comparisons=0,
            seconds=0.0))
        for mm, h in hits.items():
            d = mean_ci(h - hit, **cfg.settings.boot_kwargs())
            rows.append(InsertionRow(
                method=f"{mm} - {m}", label=f"{METHOD_LABELS[mm]} minus {NO_MODEL_LABELS[m]}",
                level="difference", accuracy=d["value"], lo=d["lo"], hi=d["hi"],
                ci_counts=d["ci_counts"], n=len(y), slope="", bias="", mean_pred="", n_rows=0,
                n_comparisons=0, seconds=0.0))
    return rows


def _beside(rows: Sequence[InsertionRow]) -> str:
    """The no-model rows and the published numbers, for the caption."""
    own = "; ".join(f"{r.label} {r.accuracy:.2f}" for r in rows if r.method in NO_MODEL_LABELS)
    pub = "; ".join(f"{p.model} {p.method} {p.value:.3f}" for p in
                    published(source="climatex", dataset="ClimateX", metric="accuracy"))
    thesis = "; ".join(f"{p.setting} {p.value:.2f}" for p in
                       published(source="thesis", dataset="ClimateX", metric="accuracy"))
    paired = "; ".join(f"{r.ours} - {r.versus} {r.accuracy:+.2f} [{r.lo:+.2f}, {r.hi:+.2f}]"
                       for r in rows if r.level == "published paired")
    paired = (f" Paired with the paper's own predictions on these statements (accuracy "
              f"difference, 95% CI over statements): {paired}." if paired else "")
    return (f"Same test statements, no model: {own}. Published on the 300-statement test "
            f"split (ClimateX paper Table 4; GPT-3.5 over the 295 it answered, Cohere few-shot "
            f"over 297): {pub}.{paired} "
            f"Paired rows use the paper's prediction files, unparsed answers wrong. Thesis "
            f"PPAIRS_INSERT (Llama-3-8B-Instruct) "
            f"by assessment cycle: {thesis}.")


def plot_insertion(preds: list[dict], rows: Sequence[InsertionRow], model: str,
                   cfg: InsertionConfig):
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(p["method"] for p in preds))
    n = len(CLIMATEX_LEVELS)
    with style():
        fig, axes = plt.subplots(1, len(methods), figsize=(3.3 * len(methods), 3.1),
                                 squeeze=False)
        for ax, m in zip(axes.flat, methods):
            cm = np.zeros((n, n), dtype=int)
            for p in preds:
                if p["method"] == m:
                    cm[p["true"], p["pred"]] += 1
            ax.imshow(cm, cmap="Blues", vmin=0)
            for i in range(n):
                for j in range(n):
                    ax.text(j, i, str(cm[i, j]), ha="center", va="center", fontsize=8,
                            color="white" if cm[i, j] > cm.max() / 2 else "black")
            ax.set_xticks(range(n), CLIMATEX_LEVELS, rotation=30)
            ax.set_yticks(range(n), CLIMATEX_LEVELS)
            ax.set_xlabel("predicted confidence")
            ax.set_ylabel("IPCC confidence")
            ax.grid(False)
            o = next(r for r in rows if r.method == m and r.level == "overall")
            ax.set_title(f"{METHOD_LABELS[m]}\nacc {o.accuracy:.2f}, slope {o.slope:.2f}, "
                         f"bias {o.bias:+.2f}")
        fig.suptitle(f"ClimateX insertion scoring — {model}", y=1.03)
        probe = next((r for r in rows if r.method == "probe" and r.layer is not ABSENT), None)
        layer = f" Read-out {probe.layer}: {probe.layer_selection}." if probe else ""
        caption(fig, f"Binary search over levels, k={cfg.k} references per step from "
                     f"{cfg.n_train} balanced labelled training statements (the file's train "
                     f"split; test statements from its test split, in its level proportions); "
                     f"probe ({cfg.probe_kind}) "
                     f"trained on up to {cfg.max_train_pairs} comparisons among them.{layer} "
                     f"{_beside(rows)}")
        fig.tight_layout()
    return fig


@dataclass(frozen=True, kw_only=True)
class InsertionRow:
    """One method's level accuracy (per level, overall, a difference, or paired with a
    published model's), or the probe's |cos| with PC1; ``""`` where a row has no value."""

    method: str
    label: str
    level: str
    accuracy: float
    lo: float
    hi: float
    ci_counts: bool
    n: int
    slope: float | str
    bias: float | str
    mean_pred: float | str
    n_rows: int
    n_comparisons: int
    seconds: float
    ours: str | Absent = ABSENT  # a published-paired row: our method and theirs
    versus: str | Absent = ABSENT
    model: str | Absent = ABSENT
    setting: str | Absent = ABSENT
    n_unparsed: int | Absent = ABSENT
    ours_accuracy: float | Absent = ABSENT
    theirs_accuracy: float | Absent = ABSENT
    theirs_slope: float | Absent = ABSENT
    theirs_bias: float | Absent = ABSENT
    layer: int | Absent = ABSENT  # the probe's rows: its training cost
    layer_selection: str | Absent = ABSENT
    train_pairs: int | Absent = ABSENT
    train_rows: int | Absent = ABSENT
    train_seconds: float | Absent = ABSENT
    abs_cos: float | Absent = ABSENT  # "direction vs PC1": the probe's |cos| with PC1


@dataclass(frozen=True)
class InsertionRows(StepRows):
    rows: tuple[InsertionRow, ...] = ()


def run_insertion(bridge, cfg: InsertionConfig, out: str | Path) -> InsertionRows:
    """Insertion-score ClimateX; writes the tables, config and figure into ``out``."""
    out = Path(out)
    rows, preds, info = insert_dataset(bridge, cfg)
    result = InsertionRows(rows=tuple(rows))
    write_csv(out / "insertion.csv", result.table())
    write_csv(out / "insertion_predictions.csv", preds)
    save_config(out, "insertion", {"config": cfg, "run": info})
    save_figure(plot_insertion(preds, result.rows, model_name(bridge), cfg), out,
                "insertion", preview=cfg.settings.quick)
    return result


#: How each preset differs from the defaults (the ClimateX part of ``ppairs-lens rank``; the
#: main job sets its own sizes, ``analyses.replication.config.PRESETS``).
PRESETS: dict[str, Preset] = {
    "quick": Preset(changes={"n_train": 20, "max_train_pairs": 60, "max_test": 8, "k": 3})}


def print_table(rows: Sequence[InsertionRow]) -> None:
    for r in rows:
        extra = f" slope {r.slope:+.2f} bias {r.bias:+.2f}" if r.level == "overall" else ""
        stat, v = ("|cos|", r.abs_cos) if r.abs_cos is not ABSENT else ("acc", r.accuracy)
        print(f"climatex {r.label:28s} {r.level:9s} {stat} {v:.3f} (n={r.n}){extra}  "
              f"rows {r.n_rows}")


def _specs(args) -> list[str]:
    """The ClimateX file among ``--datasets`` (default: the shared one, when present)."""
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
    default = shared / "climatex" / "ipcc_statements_dataset.tsv"
    specs = args.datasets or ([str(default)] if default.exists() else [])
    specs = [s for s in specs if spec_format(s) == "climatex"]
    if len(specs) > 1:
        raise DataError("give at most one ClimateX file")
    return specs


def wants_model(args) -> bool:
    """Whether :func:`cli` has a ClimateX file to score (else it returns without a model)."""
    return bool(_specs(args))


def cli(args, bridge=None) -> None:
    """The ClimateX part of ``ppairs-lens rank`` (``bridge`` default: load ``--model``)."""
    specs = _specs(args)
    if not specs:
        return
    cfg = args.config(InsertionConfig, PRESETS, path=specs[0], model=args.model, verbose=True)
    # a limit given wins over the preset
    if (limit := spec_limit(args.max_pairs, specs[0])) is not None:
        cfg = dataclasses.replace(cfg, max_train_pairs=limit)
    if bridge is None:
        from ppairs_lens.models.loading import load_model
        from ppairs_lens.models.spec import ModelSpec

        bridge = load_model(ModelSpec.from_args(args))
    print_table(run_insertion(bridge, cfg, args.out).rows)
