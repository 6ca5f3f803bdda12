"""Ranking and scoring with probe preferences, against the prompting baselines.

(a) **Ranking** (the layout of the thesis's Table 4.2). On scored-items data (SummEval, HANNA,
any ``path:aspect`` file, or a built-in with item ids and scores per context such as
``story_sentiment``): a probe is trained on the comparisons of a few *training* contexts, then
the items of each disjoint *evaluation* context are ranked by

* PPairS: PAIRS merge sort driven by the probe (greedy, and the uncertainty-guided beam),
  with each comparison harvested on demand (:class:`ppairs_lens.judges.comparators.ProbeComparator`);
* PAIRS with the model's own calibrated zero-shot comparison (greedy and beam);
* direct scoring (argmax of the 1-5 score token) and G-Eval (its probability-weighted mean).

Each ranking is scored by the Spearman correlation with the gold scores within its context,
averaged over contexts with a bootstrap CI over contexts. The cost column counts prompts run
through the model (``n_rows``); a probe method also lists the rows its training harvest took.

(b) **Insertion** (the layout of the thesis's Table 4.4). On ClimateX: a probe trained on
comparisons among ``n_train`` labelled training statements (balanced over the four confidence
levels) scores test statements by binary search over the levels, comparing each with ``k``
reference statements of the middle level (:func:`ppairs_lens.ranking.sorting.insertion_score`); the
same with the zero-shot comparison. Per-level and overall accuracy, slope and bias.

Writes ``ranking.csv`` / ``ranking_contexts.csv`` / ``ranking.config.json`` /
``ranking.{png,svg}`` and ``insertion.csv`` / ``insertion_predictions.csv`` /
``insertion.config.json`` / ``insertion.{png,svg}``.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ppairs_lens.judges.scoring import score_items
from ppairs_lens.judges.comparators import (
    BatchComparator,
    ProbeComparator,
    ZeroShotComparator,
    run_lockstep,
)
from ppairs_lens.data import (CLIMATEX_LEVELS, comparisons_within_contexts, load_climatex,
                              read_climatex)
from ppairs_lens.errors import DataError, ProbeError
from ppairs_lens.io.outputs import save_config, save_figure, write_csv
from ppairs_lens.activations.harvest import HarvestSettings, harvest_pairs, hook_names
from ppairs_lens.evaluation.metrics import bootstrap_ci
from ppairs_lens.models.loading import model_name
from ppairs_lens.io.plotting import caption, color, style
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.ranking.sorting import (
    DEFAULT_BEAM_SIZE,
    DEFAULT_UNCERTAINTY,
    CountingComparator,
    beam_merge_sort,
    insertion_score,
    merge_sort,
    slope_bias,
    spearman,
)
from ppairs_lens.data.records import TIE, Comparison, Dataset, ScoredItem
from ppairs_lens.evaluation.splits import train_test_split_pairs
from ppairs_lens.probes.sweep import fit_sweep

RANKING_METHODS: tuple[str, ...] = ("probe_greedy", "probe_beam", "zero_shot_greedy",
                                    "zero_shot_beam", "direct", "geval")
INSERTION_METHODS: tuple[str, ...] = ("probe", "zero_shot")
METHOD_LABELS = {
    "probe_greedy": "PPairS (probe) merge sort",
    "probe_beam": "PPairS (probe) beam merge sort",
    "zero_shot_greedy": "PAIRS (zero-shot) merge sort",
    "zero_shot_beam": "PAIRS (zero-shot) beam merge sort",
    "direct": "direct scoring (argmax 1-5)",
    "geval": "G-Eval (E[score])",
    "probe": "PPairS (probe) insertion",
    "zero_shot": "zero-shot insertion",
}
_METHOD_COLORS = {"probe": color("supervised"), "zero_shot": color("zero_shot"),
                  "direct": "#ff7f0e", "geval": "#9467bd"}


@dataclass
class RankingConfig:
    """What a ranking run used; saved beside its results."""

    dataset: str = "story_sentiment"  # built-in name, or path:aspect of a scored-items file
    model: str | None = None
    probe_kind: str = "supervised"
    layer: int | None = None  # read-out index; None: chosen on held-out training contexts
    n_train_contexts: int = 10
    max_train_pairs_per_context: int | None = 40
    n_eval_contexts: int = 5
    max_items_per_context: int | None = None
    methods: tuple[str, ...] = RANKING_METHODS
    calibrate_probe: bool = False
    calibrate_zero_shot: bool = True
    beam_size: int = DEFAULT_BEAM_SIZE
    uncertainty: float = DEFAULT_UNCERTAINTY
    n_boot: int = 1000
    seed: int = 0
    token_budget: int | None = None  # None: by device (harvest.default_token_budget)
    verbose: bool = False  # print progress


@dataclass
class InsertionConfig:
    """What an insertion (ClimateX) run used; saved beside its results."""

    path: str = "../shared/datasets/climatex/ipcc_statements_dataset.tsv"
    model: str | None = None
    probe_kind: str = "supervised"
    layer: int | None = None
    n_train: int = 100  # labelled training statements, balanced over the levels
    max_train_pairs: int | None = 400  # comparisons among them used to fit the probe
    max_test: int | None = 40  # test statements, balanced over the levels where possible
    k: int = 5  # references compared per binary-search step
    methods: tuple[str, ...] = INSERTION_METHODS
    calibrate_probe: bool = False
    calibrate_zero_shot: bool = True
    n_boot: int = 1000
    seed: int = 0
    token_budget: int | None = None  # None: by device (harvest.default_token_budget)
    verbose: bool = False  # print progress


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def _say(cfg, msg: str) -> None:
    if getattr(cfg, "verbose", False):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def items_by_context(dataset: Dataset) -> dict[str, dict[str, ScoredItem]]:
    """Scored items per context, recovered from a comparison dataset's records (item ids and
    gold scores are needed: scored-items files and ``story_sentiment`` have them)."""
    out: dict[str, dict[str, ScoredItem]] = {}
    for r in dataset.records:
        if not isinstance(r, Comparison) or None in (r.item1_id, r.item2_id, r.score1, r.score2):
            raise DataError(f"record {getattr(r, 'pair_id', r)!r} of {dataset.name} has no item "
                            "ids or gold scores; ranking needs scored items")
        ctx = str(r.context_id) if r.context_id is not None else "__all__"
        group = out.setdefault(ctx, {})
        for iid, text, score in ((r.item1_id, r.item1, r.score1), (r.item2_id, r.item2, r.score2)):
            group.setdefault(iid, ScoredItem(iid, text, float(score), r.context_id, r.context))
    return out


def _pairs_dataset(meta: Dataset, items: Sequence[ScoredItem], max_pairs: int | None,
                   seed: int) -> Dataset:
    """Training comparisons among ``items`` within each context: ties dropped, then at most
    ``max_pairs`` per context drawn at random (seeded)."""
    recs = [r for r in comparisons_within_contexts(items, swap_seed=seed) if r.label != TIE]
    if max_pairs is not None:
        by: dict[str | None, list[Comparison]] = {}
        for r in recs:
            by.setdefault(r.context_id, []).append(r)
        rng = random.Random(seed)
        keep = {id(r) for g in by.values()
                for r in (g if len(g) <= max_pairs else rng.sample(g, max_pairs))}
        recs = [r for r in recs if id(r) in keep]
    return dataclasses.replace(meta, name=f"{meta.name}:train", records=recs)


# --------------------------------------------------------------------------------------------
# Probe training
# --------------------------------------------------------------------------------------------


@dataclass
class TrainedProbe:
    probe: Any
    layer: int
    hook: str
    n_pairs: int
    n_rows: int
    seconds: float
    layer_scores: list[float] = field(default_factory=list)  # held-out accuracy per read-out
    train_accuracy: float = math.nan


def choose_layer(acts, labels: np.ndarray, contexts: Sequence[Hashable] | None,
                 item_pairs: Sequence[tuple[str, str]], kind: str, seed: int
                 ) -> tuple[int, list[float]]:
    """The read-out whose ``kind`` probe is most accurate on held-out training data, by
    accuracy averaged with the adjacent read-outs; ties go to the read-out nearest two thirds
    of the depth (also the fallback when no split is possible).

    Held out: whole contexts where there are several; without contexts, random pairs (a
    split by item keeps only the pairs among held-out items, about 9% of a sparse sample of
    pairs, too few to rank layers; items recurring across the split matter little for
    choosing a layer)."""
    n_layers = acts.shape[2]
    fallback = (2 * (n_layers - 1)) // 3
    try:
        if contexts is not None and len(set(contexts)) > 1:
            tr, te = train_test_split_pairs(contexts, test_size=0.3, seed=seed, by="context")
        else:
            tr, te = train_test_split_pairs(None, item_pairs, test_size=0.3, seed=seed,
                                            by="pair")
        sw = fit_sweep(acts[tr], labels[tr], kinds=(kind,))
        acc = sw.score(acts[te], labels[te])[kind]
    except ProbeError:
        return fallback, []
    scores = [float(a) for a in acc]
    if not np.isfinite(acc).any():
        return fallback, scores
    # Few held-out pairs make single-layer accuracies noisy: smooth over neighbours first.
    a = np.nan_to_num(np.asarray(acc, dtype=float), nan=0.0)
    smooth = np.array([a[max(0, i - 1):i + 2].mean() for i in range(n_layers)])
    best = max(range(n_layers), key=lambda i: (smooth[i], -abs(i - fallback)))
    return best, scores


def train_probe(bridge, train: Dataset, *, kind: str, layer: int | None, seed: int,
                settings: HarvestSettings) -> TrainedProbe:
    """Harvest ``train``'s comparisons (all read-outs), pick the layer, fit the probe."""
    t0 = time.perf_counter()
    pairs = build_contrast_pairs(bridge.tokenizer, train)
    acts = harvest_pairs(bridge, pairs, settings)
    labels = np.array(train.labels())
    contexts = [r.context_id for r in train.records]
    items = [(r.item1_id, r.item2_id) for r in train.records]
    scores: list[float] = []
    if layer is None:
        layer, scores = choose_layer(acts, labels, contexts, items, kind, seed)
    n_read = acts.shape[2]
    layer = layer % n_read
    # The sweep's solver (exact optimum, robust to tiny activation scales) on that read-out.
    sw = fit_sweep(acts[:, :, layer:layer + 1], labels, kinds=(kind,), layers=(layer,),
                   model_name=model_name(bridge))
    probe = sw.to_probe(kind, 0)
    acc = probe.score(acts[:, :, layer], labels)
    return TrainedProbe(probe, layer, hook_names(bridge.cfg.n_layers)[layer], len(pairs),
                        len(pairs), time.perf_counter() - t0, scores, acc)


# --------------------------------------------------------------------------------------------
# (a) Ranking
# --------------------------------------------------------------------------------------------


def _context_rho(pred: Sequence | Mapping, gold: Mapping[str, float]) -> tuple[float, bool]:
    """Spearman within one context; a constant prediction counts as 0 (no ranking)."""
    rho = spearman(pred, gold)
    if math.isnan(rho):
        return 0.0, True
    return rho, False


def _mean_ci(values: Sequence[float], n_boot: int, seed: int) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    return bootstrap_ci(lambda y, _s: float(np.mean(y)), v, v, n_boot=n_boot, seed=seed)


def _presentations(counter: CountingComparator, calibrated: bool) -> int:
    """Distinct prompts a sort needed alone: its ordered pairs, both orders when calibrated."""
    keys = set(counter.cache)
    if calibrated:
        keys |= {(b, a) for a, b in keys}
    return len(keys)


def _sort_all(comparator: BatchComparator, orders: Mapping[str, list[str]],
              sorter: Callable[[list[str], Callable], list[str]]
              ) -> tuple[dict[str, list[str]], dict[str, CountingComparator], float, int]:
    """Sort every context in lockstep; returns orders, per-context counters, seconds, rows."""
    counters: dict[str, CountingComparator] = {}

    def task(ctx: str):
        def run(cmp):
            counters[ctx] = CountingComparator(cmp)
            return sorter(list(orders[ctx]), counters[ctx])
        return run

    rows0, t0 = comparator.n_rows, time.perf_counter()
    ranked = run_lockstep({c: task(c) for c in orders}, comparator)
    return ranked, counters, time.perf_counter() - t0, comparator.n_rows - rows0


def rank_dataset(bridge, cfg: RankingConfig, dataset: Dataset | None = None
                 ) -> tuple[list[dict], list[dict], dict]:
    """Run (a) on one dataset; returns (method rows, per-context rows, info)."""
    from ppairs_lens.data.specs import load_dataset_spec

    ds = dataset if dataset is not None else load_dataset_spec(cfg.dataset)
    meta = dataclasses.replace(ds, records=[])
    groups = items_by_context(ds)
    rng = random.Random(cfg.seed)
    ctx_ids = sorted(groups)
    rng.shuffle(ctx_ids)
    usable = [c for c in ctx_ids if len(groups[c]) >= 2]
    train_ctx = usable[:cfg.n_train_contexts]
    rest = [c for c in usable[cfg.n_train_contexts:]
            if len({it.score for it in groups[c].values()}) > 1]  # gold must rank something
    eval_ctx = rest[:cfg.n_eval_contexts]
    if not train_ctx or not eval_ctx:
        raise DataError(f"{ds.name}: {len(usable)} contexts with 2+ items is too few for "
                        f"{cfg.n_train_contexts} training and {cfg.n_eval_contexts} evaluation "
                        "contexts")
    settings = HarvestSettings(token_budget=cfg.token_budget)

    # Item ids need only be unique within a context (SummEval's "S8" is in every article):
    # key them "context::item".
    eval_items: dict[str, dict[str, ScoredItem]] = {}
    for c in eval_ctx:
        ids = sorted(groups[c])
        rng.shuffle(ids)  # the sort's start order must not follow the gold order
        if cfg.max_items_per_context is not None:
            ids = ids[:cfg.max_items_per_context]
        eval_items[c] = {f"{c}::{i}": groups[c][i] for i in ids}
    flat = {i: it for g in eval_items.values() for i, it in g.items()}
    orders = {c: list(g) for c, g in eval_items.items()}
    gold = {c: {i: it.score for i, it in g.items()} for c, g in eval_items.items()}

    results: dict[str, dict[str, Any]] = {}  # method -> {pred: {ctx: order|scores}, cost...}
    info: dict[str, Any] = {"dataset": ds.name, "model": model_name(bridge),
                            "train_contexts": train_ctx, "eval_contexts": eval_ctx}
    want = set(cfg.methods)
    unknown = want - set(RANKING_METHODS)
    if unknown:
        raise ValueError(f"unknown ranking methods {sorted(unknown)}; choose from "
                         f"{RANKING_METHODS}")

    trained = None
    if want & {"probe_greedy", "probe_beam"}:
        train_items = [it for c in train_ctx for it in groups[c].values()]
        train = _pairs_dataset(meta, train_items, cfg.max_train_pairs_per_context, cfg.seed)
        _say(cfg, f"{ds.name}: harvesting {len(train)} training pairs of {len(train_ctx)} contexts")
        trained = train_probe(bridge, train, kind=cfg.probe_kind, layer=cfg.layer,
                              seed=cfg.seed, settings=settings)
        info.update(layer=trained.layer, hook=trained.hook, n_train_pairs=trained.n_pairs,
                    train_seconds=trained.seconds, train_accuracy=trained.train_accuracy,
                    layer_scores=trained.layer_scores)
        _say(cfg, f"probe at read-out {trained.layer} ({trained.seconds:.0f}s); ranking "
                  f"{len(flat)} items of {len(eval_ctx)} contexts")
        comp = ProbeComparator(bridge, trained.probe, trained.layer, flat, meta,
                               calibrate=cfg.calibrate_probe, settings=settings)
        _sorting_methods(results, "probe", comp, orders, cfg, want)
        info["probe_cost"] = comp.cost()
        comp.runner.clear()

    if want & {"zero_shot_greedy", "zero_shot_beam"}:
        comp = ZeroShotComparator(bridge, flat, meta, calibrate=cfg.calibrate_zero_shot,
                                  settings=settings)
        _say(cfg, "zero-shot comparisons")
        _sorting_methods(results, "zero_shot", comp, orders, cfg, want)
        info["zero_shot_cost"] = comp.cost()
        comp.runner.clear()

    if want & {"direct", "geval"}:
        _say(cfg, "direct scoring / G-Eval")
        t0 = time.perf_counter()
        sc = score_items(bridge, flat, meta, settings=settings)
        secs = time.perf_counter() - t0
        for m in ("direct", "geval"):
            if m in want:
                s = sc.as_dict(m)
                results[m] = {"pred": {c: {i: s[i] for i in g} for c, g in eval_items.items()},
                              "n_rows": sc.n_rows, "n_rows_spent": sc.n_rows,
                              "n_comparisons": 0, "seconds": secs,
                              "note": "direct and G-Eval share one forward per item"}

    rows, ctx_rows = [], []
    for m in RANKING_METHODS:
        if m not in results:
            continue
        r = results[m]
        rhos, n_const = [], 0
        for c in eval_ctx:
            rho, const = _context_rho(r["pred"][c], gold[c])
            n_const += const
            rhos.append(rho)
            ctx_rows.append({"dataset": ds.name, "method": m, "context_id": c,
                             "n_items": len(gold[c]), "spearman": rho, "constant": const})
        ci = _mean_ci(rhos, cfg.n_boot, cfg.seed)
        row = {"dataset": ds.name, "method": m, "label": METHOD_LABELS[m],
               "spearman": ci["value"], "lo": ci["lo"], "hi": ci["hi"],
               "n_contexts": len(eval_ctx), "n_items": sum(len(g) for g in gold.values()),
               "n_constant": n_const, "n_rows": r["n_rows"], "n_rows_spent": r["n_rows_spent"],
               "n_comparisons": r["n_comparisons"], "seconds": round(r["seconds"], 2)}
        if m.startswith("probe") and trained is not None:
            row.update(layer=trained.layer, train_pairs=trained.n_pairs,
                       train_rows=trained.n_rows, train_seconds=round(trained.seconds, 2))
        rows.append(row)
    return rows, ctx_rows, info


def _sorting_methods(results: dict, family: str, comp: BatchComparator,
                     orders: Mapping[str, list[str]], cfg: RankingConfig, want: set[str]) -> None:
    """Greedy then beam merge sort of every context with ``comp`` (beam reuses the cache)."""
    sorters = {
        "greedy": lambda items, cmp: merge_sort(items, cmp),
        "beam": lambda items, cmp: beam_merge_sort(items, cmp, beam_size=cfg.beam_size,
                                                   uncertainty=cfg.uncertainty),
    }
    for variant, sorter in sorters.items():
        m = f"{family}_{variant}"
        if m not in want:
            continue
        ranked, counters, secs, spent = _sort_all(comp, orders, sorter)
        _say(cfg, f"{m}: {spent} new rows, {secs:.0f}s")
        results[m] = {
            "pred": ranked,
            "n_rows": sum(_presentations(c, comp.calibrate) for c in counters.values()),
            "n_rows_spent": spent,
            "n_comparisons": sum(c.unique_calls for c in counters.values()),
            "seconds": secs,
        }


def plot_ranking(rows: list[dict], model: str, cfgs: Sequence[RankingConfig]):
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    with style():
        fig, axes = plt.subplots(1, len(datasets), figsize=(6.4 * len(datasets), 3.0),
                                 squeeze=False)
        for ax, ds in zip(axes.flat, datasets):
            rs = [r for r in rows if r["dataset"] == ds]
            y = np.arange(len(rs))[::-1]
            for yi, r in zip(y, rs):
                fam = ("probe" if r["method"].startswith("probe") else
                       "zero_shot" if r["method"].startswith("zero_shot") else r["method"])
                v, lo, hi = r["spearman"], r["lo"], r["hi"]
                err = [[max(v - lo, 0) if np.isfinite(lo) else 0],
                       [max(hi - v, 0) if np.isfinite(hi) else 0]]
                ax.errorbar([v], [yi], xerr=err, fmt="o", color=_METHOD_COLORS.get(fam),
                            capsize=3, ms=5)
                ax.annotate(f"{r['n_rows']} rows", (1.0, yi), xycoords=("axes fraction", "data"),
                            xytext=(3, 0), textcoords="offset points", va="center", fontsize=7,
                            color="#555555")
            ax.set_yticks(y, [r["label"] for r in rs])
            ax.axvline(0, color="k", lw=0.6, alpha=0.5)
            ax.set_xlim(-1.05, 1.05)
            ax.set_xlabel("Spearman with gold scores (mean over contexts)")
            n_ctx = rs[0]["n_contexts"] if rs else 0
            ax.set_title(f"{ds} ({n_ctx} evaluation contexts)")
        fig.suptitle(f"Ranking items within a context: PPairS vs prompting — {model}", y=1.02)
        c = cfgs[0] if cfgs else RankingConfig()
        caption(fig, f"95% bootstrap CIs over contexts ({c.n_boot} resamples). Probe "
                     f"({c.probe_kind}) trained on {c.n_train_contexts} disjoint contexts; "
                     f"beam {c.beam_size}, uncertainty {c.uncertainty}; zero-shot "
                     f"{'calibrated' if c.calibrate_zero_shot else 'uncalibrated'}. "
                     "Rows = prompts run per method alone.")
        fig.tight_layout()
    return fig


def run_ranking(bridge, cfgs: RankingConfig | Sequence[RankingConfig], out: str | Path
                ) -> list[dict]:
    """(a) for each config; writes ranking.csv, ranking_contexts.csv, config and figure."""
    cfgs = [cfgs] if isinstance(cfgs, RankingConfig) else list(cfgs)
    out = Path(out)
    rows, ctx_rows, infos = [], [], []
    for cfg in cfgs:
        r, c, info = rank_dataset(bridge, cfg)
        rows += r
        ctx_rows += c
        infos.append(info)
    write_csv(out / "ranking.csv", rows)
    write_csv(out / "ranking_contexts.csv", ctx_rows)
    save_config(out, "ranking", {"configs": cfgs, "runs": infos})
    save_figure(plot_ranking(rows, model_name(bridge), cfgs), out, "ranking")
    return rows


# --------------------------------------------------------------------------------------------
# (b) Insertion (ClimateX)
# --------------------------------------------------------------------------------------------


def _balanced(items: Sequence[ScoredItem], n: int | None, rng: random.Random
              ) -> list[ScoredItem]:
    """``n`` items spread evenly over the score levels (round robin over shuffled levels)."""
    by: dict[float, list[ScoredItem]] = {}
    for it in items:
        by.setdefault(it.score, []).append(it)
    for v in by.values():
        rng.shuffle(v)
    if n is None:
        return [it for lv in sorted(by) for it in by[lv]]
    out: list[ScoredItem] = []
    levels = sorted(by)
    pos = dict.fromkeys(levels, 0)
    while len(out) < n and any(pos[lv] < len(by[lv]) for lv in levels):
        for lv in levels:
            if len(out) < n and pos[lv] < len(by[lv]):
                out.append(by[lv][pos[lv]])
                pos[lv] += 1
    return out


def insert_dataset(bridge, cfg: InsertionConfig) -> tuple[list[dict], list[dict], dict]:
    """Run (b); returns (table rows, per-statement predictions, info)."""
    all_items = read_climatex(cfg.path)
    meta = dataclasses.replace(load_climatex(cfg.path, split=None, max_items=4, max_pairs=None),
                               records=[], name="climatex")
    rng = random.Random(cfg.seed)
    train_items = _balanced([i for i in all_items if i.split == "train"], cfg.n_train, rng)
    test_items = _balanced([i for i in all_items if i.split == "test"], cfg.max_test, rng)
    if not train_items or not test_items:
        raise DataError("ClimateX file needs statements in both the train and the test split",
                        file=cfg.path, field="split")
    settings = HarvestSettings(token_budget=cfg.token_budget)
    levels = list(range(len(CLIMATEX_LEVELS)))
    references = {lv: [i.item_id for i in train_items if int(i.score) == lv] for lv in levels}
    flat = {i.item_id: i.text for i in train_items + test_items}
    true = {i.item_id: int(i.score) for i in test_items}
    info: dict[str, Any] = {"model": model_name(bridge), "n_train": len(train_items),
                            "n_test": len(test_items),
                            "train_levels": {CLIMATEX_LEVELS[lv]: len(v)
                                             for lv, v in references.items()}}
    unknown = set(cfg.methods) - set(INSERTION_METHODS)
    if unknown:
        raise ValueError(f"unknown insertion methods {sorted(unknown)}; choose from "
                         f"{INSERTION_METHODS}")
    comparators: dict[str, BatchComparator] = {}
    trained = None
    if "probe" in cfg.methods:
        train = _pairs_dataset(meta, train_items, cfg.max_train_pairs, cfg.seed)
        _say(cfg, f"climatex: harvesting {len(train)} training pairs of {len(train_items)} "
                  "statements")
        trained = train_probe(bridge, train, kind=cfg.probe_kind, layer=cfg.layer,
                              seed=cfg.seed, settings=settings)
        info.update(layer=trained.layer, hook=trained.hook, n_train_pairs=trained.n_pairs,
                    train_seconds=trained.seconds, train_accuracy=trained.train_accuracy,
                    layer_scores=trained.layer_scores)
        comparators["probe"] = ProbeComparator(bridge, trained.probe, trained.layer, flat, meta,
                                               calibrate=cfg.calibrate_probe, settings=settings)
    if "zero_shot" in cfg.methods:
        comparators["zero_shot"] = ZeroShotComparator(bridge, flat, meta,
                                                      calibrate=cfg.calibrate_zero_shot,
                                                      settings=settings)
    rows, preds = [], []
    for m, comp in comparators.items():
        def task(iid: str, k: int):
            return lambda cmp: insertion_score(iid, levels, references, cmp, k=cfg.k,
                                               seed=cfg.seed + k, return_trace=True)

        _say(cfg, f"{m}: inserting {len(true)} test statements")
        t0, r0 = time.perf_counter(), comp.n_rows
        out = run_lockstep({iid: task(iid, k) for k, iid in enumerate(true)}, comp)
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
        hit = (p == y).astype(float)
        cost = {"n_rows": comp.n_rows - r0, "n_comparisons": n_cmp, "seconds": round(secs, 2)}
        if m == "probe" and trained is not None:
            cost.update(layer=trained.layer, train_pairs=trained.n_pairs,
                        train_rows=trained.n_rows, train_seconds=round(trained.seconds, 2))
        for lv in levels:
            sel = y == lv
            acc = _mean_ci(hit[sel], cfg.n_boot, cfg.seed) if sel.any() else {
                "value": math.nan, "lo": math.nan, "hi": math.nan}
            rows.append({"method": m, "label": METHOD_LABELS[m], "level": CLIMATEX_LEVELS[lv],
                         "accuracy": acc["value"], "lo": acc["lo"], "hi": acc["hi"],
                         "n": int(sel.sum()), "slope": "", "bias": "",
                         "mean_pred": float(p[sel].mean()) if sel.any() else math.nan,
                         **cost})
        acc = _mean_ci(hit, cfg.n_boot, cfg.seed)
        rows.append({"method": m, "label": METHOD_LABELS[m], "level": "overall",
                     "accuracy": acc["value"], "lo": acc["lo"], "hi": acc["hi"], "n": len(y),
                     "slope": slope, "bias": bias, "mean_pred": float(p.mean()), **cost})
        info[f"{m}_cost"] = comp.cost()
    return rows, preds, info


def plot_insertion(preds: list[dict], rows: list[dict], model: str, cfg: InsertionConfig):
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
            o = next(r for r in rows if r["method"] == m and r["level"] == "overall")
            ax.set_title(f"{METHOD_LABELS[m]}\nacc {o['accuracy']:.2f}, slope {o['slope']:.2f}, "
                         f"bias {o['bias']:+.2f}")
        fig.suptitle(f"ClimateX insertion scoring — {model}", y=1.03)
        caption(fig, f"Binary search over levels, k={cfg.k} references per step from "
                     f"{cfg.n_train} balanced labelled training statements; probe "
                     f"({cfg.probe_kind}) trained on up to {cfg.max_train_pairs} comparisons "
                     "among them.")
        fig.tight_layout()
    return fig


def run_insertion(bridge, cfg: InsertionConfig, out: str | Path) -> list[dict]:
    """(b); writes insertion.csv, insertion_predictions.csv, config and figure."""
    out = Path(out)
    rows, preds, info = insert_dataset(bridge, cfg)
    write_csv(out / "insertion.csv", rows)
    write_csv(out / "insertion_predictions.csv", preds)
    save_config(out, "insertion", {"config": cfg, "run": info})
    save_figure(plot_insertion(preds, rows, model_name(bridge), cfg), out, "insertion")
    return rows


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _default_specs() -> list[str]:
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
    specs = ["story_sentiment"]
    if (shared / "summeval" / "summeval.jsonl").exists():
        specs.append(f"{shared / 'summeval' / 'summeval.jsonl'}:coherence")
    if (shared / "climatex" / "ipcc_statements_dataset.tsv").exists():
        specs.append(str(shared / "climatex" / "ipcc_statements_dataset.tsv"))
    return specs


def _is_climatex(spec: str) -> bool:
    from ppairs_lens.data import sniff_format
    from ppairs_lens.data.specs import parse_spec

    path, _ = parse_spec(spec)
    p = Path(path)
    return p.is_file() and sniff_format(p) == "climatex"


def print_tables(rank_rows: list[dict], ins_rows: list[dict]) -> None:
    for r in rank_rows:
        print(f"{r['dataset'][:28]:28s} {r['label']:36s} rho {r['spearman']:+.3f} "
              f"[{r['lo']:+.3f}, {r['hi']:+.3f}]  rows {r['n_rows']:5d}  {r['seconds']:7.1f}s")
    for r in ins_rows:
        extra = (f" slope {r['slope']:+.2f} bias {r['bias']:+.2f}" if r["level"] == "overall"
                 else "")
        print(f"climatex {r['label']:28s} {r['level']:9s} acc {r['accuracy']:.3f} "
              f"(n={r['n']}){extra}  rows {r['n_rows']}")


def cli(args) -> None:
    import torch

    from ppairs_lens.models.loading import load_model

    specs = args.datasets or _default_specs()
    bridge = load_model(args.model, dtype=getattr(torch, getattr(args, "dtype", "float32")),
                        device=getattr(args, "device", None))
    quick = getattr(args, "quick", False)
    out = Path(args.out)
    rank_cfgs, ins_cfgs = [], []
    for spec in specs:
        if _is_climatex(spec):
            cfg = InsertionConfig(path=spec, model=args.model, seed=args.seed, verbose=True)
            if quick:
                cfg = dataclasses.replace(cfg, n_train=20, max_train_pairs=60, max_test=8, k=3)
            if args.max_pairs:
                cfg.max_train_pairs = args.max_pairs
            ins_cfgs.append(cfg)
        else:
            cfg = RankingConfig(dataset=spec, model=args.model, seed=args.seed, verbose=True)
            if quick:
                cfg = dataclasses.replace(cfg, n_train_contexts=3, max_train_pairs_per_context=10,
                                          n_eval_contexts=3, max_items_per_context=6,
                                          n_boot=200)
            if args.max_pairs:
                cfg.max_train_pairs_per_context = args.max_pairs
            rank_cfgs.append(cfg)
    rank_rows = run_ranking(bridge, rank_cfgs, out) if rank_cfgs else []
    ins_rows: list[dict] = []
    if len(ins_cfgs) > 1:
        raise DataError("give at most one ClimateX file")
    if ins_cfgs:
        ins_rows = run_insertion(bridge, ins_cfgs[0], out)
    print_tables(rank_rows, ins_rows)
