"""Ranking items with probe preferences, against the prompting baselines (thesis Table 4.2).

On scored-items data (SummEval, HANNA, any ``path:aspect`` file, or a built-in such as
``story_sentiment``) a probe is trained on the comparisons of a few *training* contexts, then
each disjoint *evaluation* context's items are ranked by PPairS (merge sort driven by the
probe, greedy and uncertainty-guided beam), PAIRS with the calibrated zero-shot comparison,
direct scoring, G-Eval, and two no-model baselines fitted on the training contexts: item length
(sign chosen there) and memorised win rates (unseen items tie). Training and evaluation
contexts come from different leak groups; the probe's read-out is chosen on a validation split
of the training pairs. Score: Spearman with the gold scores within each context of 3+ items
(with 2 it is +-1), averaged with a bootstrap CI over contexts; ``n_rows`` counts prompts run
through the model. Writes ``ranking.csv``, ``ranking_contexts.csv``, the config and
``ranking.{png,svg}``; ClimateX files are :mod:`analyses.insertion`'s.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyses.ranking_plots import plot_ranking
from ppairs_lens.data.item_sampling import items_by_context, training_comparisons
from ppairs_lens.data.records import Dataset, ScoredItem
from ppairs_lens.data.specs import load_dataset_spec, spec_format, spec_limit
from ppairs_lens.evaluation.bootstrap import mean_ci
from ppairs_lens.evaluation.metrics import spearman
from ppairs_lens.presets import Preset
from ppairs_lens.io.outputs import save_config, save_figure, write_csv
from ppairs_lens.io.records import ABSENT, Absent, StepRows
from ppairs_lens.judges.comparators import (BatchComparator, ProbeComparator, ZeroShotComparator,
                                            run_lockstep)
from ppairs_lens.judges.probe_judge import ProbeJudgeConfig, train_probe
from ppairs_lens.judges.scoring import score_items
from ppairs_lens.models.loading import model_name
from ppairs_lens.ranking.baselines import length_scores, length_sign, memorised_scores, win_rates
from ppairs_lens.ranking.context_split import MIN_RANK_ITEMS, ContextSplit, split_for_ranking
from ppairs_lens.ranking.merge_sort import (DEFAULT_BEAM_SIZE, DEFAULT_UNCERTAINTY,
                                            CountingComparator, beam_merge_sort, merge_sort)

__all__ = ["RANKING_METHODS", "RankingConfig", "RankingInputs", "RankingRow", "RankingRows",
           "cli", "figure_caption",
           "plan_ranking", "print_table", "rank_dataset", "ranking_inputs", "run_ranking"]

RANKING_METHODS: tuple[str, ...] = ("probe_greedy", "probe_beam", "zero_shot_greedy",
                                    "zero_shot_beam", "direct", "geval", "length", "memorised")
METHOD_LABELS = {
    "probe_greedy": "PPairS (probe) merge sort",
    "probe_beam": "PPairS (probe) beam merge sort",
    "zero_shot_greedy": "PAIRS (zero-shot) merge sort",
    "zero_shot_beam": "PAIRS (zero-shot) beam merge sort",
    "direct": "direct scoring (argmax 1-5)",
    "geval": "G-Eval (E[score])",
    "length": "length: item length (sign from train; no model)",
    "memorised": "memorised training win rates",
}


@dataclass
class RankingConfig(ProbeJudgeConfig):
    """What a ranking run used; saved beside its results."""

    dataset: str = "story_sentiment"  # built-in name, or path:aspect of a scored-items file
    n_train_contexts: int = 10
    max_train_pairs_per_context: int | None = 40
    n_eval_contexts: int = 20  # from leak groups disjoint from the training contexts' groups
    max_items_per_context: int | None = None
    methods: tuple[str, ...] = RANKING_METHODS
    beam_size: int = DEFAULT_BEAM_SIZE
    uncertainty: float = DEFAULT_UNCERTAINTY


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


@dataclass(frozen=True)
class RankingInputs:
    """What a ranking run works on, fixed before any model runs: the contexts' split, the
    evaluation items (in a shuffled start order) and the probe's training comparisons."""

    split: ContextSplit
    groups: dict
    eval_items: dict[str, dict[str, ScoredItem]]
    train: Dataset


def ranking_inputs(ds: Dataset, cfg: RankingConfig) -> RankingInputs:
    """:class:`RankingInputs` of ``ds`` under ``cfg`` (seeded: the same every call)."""
    meta = dataclasses.replace(ds, records=[])
    groups = items_by_context(ds)
    split = split_for_ranking(ds, groups, n_train=cfg.n_train_contexts,
                              n_eval=cfg.n_eval_contexts, seed=cfg.settings.seed,
                              max_items=cfg.max_items_per_context)
    rng = random.Random(cfg.settings.seed)

    # ids are unique only within a context (SummEval's "S8" is in every article): "ctx::item"
    eval_items: dict[str, dict[str, ScoredItem]] = {}
    for c in split.eval:
        ids = sorted(groups[c])
        rng.shuffle(ids)  # the sort's start order must not follow the gold order
        if cfg.max_items_per_context is not None:
            ids = ids[:cfg.max_items_per_context]
        eval_items[c] = {f"{c}::{i}": groups[c][i] for i in ids}
    train_items = [it for c in split.train for it in groups[c].values()]
    train = training_comparisons(meta, train_items, cfg.max_train_pairs_per_context,
                                 cfg.settings.seed)
    return RankingInputs(split, groups, eval_items, train)


def _check_methods(cfg: RankingConfig) -> set[str]:
    want = set(cfg.methods)
    if unknown := want - set(RANKING_METHODS):
        raise ValueError(f"unknown ranking methods {sorted(unknown)}; choose from "
                         f"{RANKING_METHODS}")
    return want


def rank_dataset(bridge, cfg: RankingConfig, dataset: Dataset | None = None
                 ) -> tuple[list[RankingRow], list[dict], dict]:
    """Rank one dataset; returns (method rows, per-context rows, info)."""
    ds = dataset if dataset is not None else load_dataset_spec(cfg.dataset)
    meta = dataclasses.replace(ds, records=[])
    want = _check_methods(cfg)
    inputs = ranking_inputs(ds, cfg)
    split, groups, eval_items, train = inputs.split, inputs.groups, inputs.eval_items, inputs.train
    train_ctx, eval_ctx = split.train, split.eval
    settings = cfg.harvest_settings()
    flat = {i: it for g in eval_items.values() for i, it in g.items()}
    orders = {c: list(g) for c, g in eval_items.items()}
    gold = {c: {i: it.score for i, it in g.items()} for c, g in eval_items.items()}

    results: dict[str, dict[str, Any]] = {}  # method -> {pred: {ctx: order|scores}, cost...}
    info: dict[str, Any] = {"dataset": ds.name, "model": model_name(bridge),
                            "split": split.as_info(), "train_contexts": train_ctx,
                            "eval_contexts": eval_ctx, "min_items_per_context": MIN_RANK_ITEMS,
                            "n_contexts_too_small": split.n_too_small}
    _no_model_methods(results, {c: groups[c] for c in train_ctx}, train, eval_items, want, info)

    trained = None
    if want & {"probe_greedy", "probe_beam"}:
        # Layer choice holds out whole leak groups of the training contexts where there are
        # two or more, else whole contexts (keyed as items_by_context keys them).
        by_group = len(split.groups_train) > 1
        keys = [str(r.context_id) if r.context_id is not None else "__all__"
                for r in train.records]
        rec_groups = [split.group_of[k] if by_group else k for k in keys]
        cfg.say(f"{ds.name}: harvesting {len(train)} training pairs of {len(train_ctx)} contexts")
        trained = train_probe(bridge, train, kind=cfg.probe_kind, layer=cfg.layer,
                              seed=cfg.settings.seed, settings=settings, groups=rec_groups)
        info.update(trained.run_info())
        cfg.say(f"probe at read-out {trained.layer} ({trained.seconds:.0f}s); ranking "
                f"{len(flat)} items of {len(eval_ctx)} contexts")
        comp = ProbeComparator(bridge, trained.probe, trained.layer, flat, meta,
                               calibrate=cfg.calibrate_probe, settings=settings)
        _sorting_methods(results, "probe", comp, orders, cfg, want)
        info["probe_cost"] = comp.cost()
        comp.runner.clear()

    if want & {"zero_shot_greedy", "zero_shot_beam"}:
        comp = ZeroShotComparator(bridge, flat, meta, calibrate=cfg.calibrate_zero_shot,
                                  settings=settings)
        cfg.say("zero-shot comparisons")
        _sorting_methods(results, "zero_shot", comp, orders, cfg, want)
        info["zero_shot_cost"] = comp.cost()
        comp.runner.clear()

    if want & {"direct", "geval"}:
        cfg.say("direct scoring / G-Eval")
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
    rows, ctx_rows = _score(results, ds.name, eval_ctx, gold, split, cfg, trained)
    return rows, ctx_rows, info


def _no_model_methods(results: dict, train_groups: Mapping[str, Mapping[str, ScoredItem]],
                      train: Dataset, eval_items: Mapping[str, Mapping[str, ScoredItem]],
                      want: set[str], info: dict) -> None:
    """The length and memorisation rankings, fitted on the training contexts."""
    if "length" in want:
        t0 = time.perf_counter()
        sign, rho = length_sign(train_groups)
        results["length"] = {
            "pred": {c: length_scores(g, sign) for c, g in eval_items.items()},
            "n_rows": 0, "n_rows_spent": 0, "n_comparisons": 0,
            "seconds": time.perf_counter() - t0,
            "note": f"{'longer' if sign > 0 else 'shorter'} ranks higher (training contexts: "
                    f"mean Spearman of length with gold {rho:+.3f})"}
        info["length_sign"], info["length_train_spearman"] = sign, rho
    if "memorised" in want:
        t0 = time.perf_counter()
        rates = win_rates(train)
        pred, seen = {}, 0
        for c, g in eval_items.items():
            pred[c], k = memorised_scores(g, rates)
            seen += k
        n = sum(len(g) for g in eval_items.values())
        results["memorised"] = {
            "pred": pred, "n_rows": 0, "n_rows_spent": 0, "n_comparisons": 0,
            "seconds": time.perf_counter() - t0,
            "note": f"{seen} of {n} evaluation items seen in training (by id or text); "
                    "unseen items tie"}
        info["memorised_items_seen"] = seen


def _score(results: Mapping[str, dict], name: str, eval_ctx: Sequence[str],
           gold: Mapping[str, Mapping[str, float]], split: ContextSplit, cfg: RankingConfig,
           trained) -> tuple[list[RankingRow], list[dict]]:
    """Per-method rows (mean within-context Spearman, CI over contexts) and per-context rows."""
    rows, ctx_rows = [], []
    for m in RANKING_METHODS:
        if m not in results:
            continue
        r = results[m]
        rhos, n_const = [], 0
        for c in eval_ctx:
            rho = spearman(r["pred"][c], gold[c])
            const = math.isnan(rho)  # a constant prediction counts as 0 (no ranking)
            rho = 0.0 if const else rho
            n_const += const
            rhos.append(rho)
            ctx_rows.append({"dataset": name, "method": m, "context_id": c,
                             "group": split.group_of[c],
                             "n_items": len(gold[c]), "spearman": rho, "constant": const})
        ci = mean_ci(rhos, **cfg.settings.boot_kwargs())
        cost = trained.cost_columns() if m.startswith("probe") and trained is not None else {}
        rows.append(RankingRow(
            dataset=name, method=m, label=METHOD_LABELS[m], spearman=ci["value"], lo=ci["lo"],
            hi=ci["hi"], n_contexts=len(eval_ctx), n_items=sum(len(g) for g in gold.values()),
            n_constant=n_const, n_rows=r["n_rows"], n_rows_spent=r["n_rows_spent"],
            n_comparisons=r["n_comparisons"], seconds=round(r["seconds"], 2),
            split_unit=split.unit, n_eval_groups=len(split.groups_eval),
            n_train_contexts=len(split.train), note=r.get("note", ""), **cost))
    return rows, ctx_rows


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
        cfg.say(f"{m}: {spent} new rows, {secs:.0f}s")
        results[m] = {"pred": ranked,
                      "n_rows": sum(_presentations(c, comp.calibrate) for c in counters.values()),
                      "n_rows_spent": spent,
                      "n_comparisons": sum(c.unique_calls for c in counters.values()),
                      "seconds": secs}


@dataclass(frozen=True, kw_only=True)
class RankingRow:
    """One method's mean within-context Spearman on one dataset and what it cost."""

    dataset: str
    method: str
    label: str
    spearman: float
    lo: float
    hi: float
    n_contexts: int
    n_items: int
    n_constant: int
    n_rows: int
    n_rows_spent: int
    n_comparisons: int
    seconds: float
    split_unit: str
    n_eval_groups: int
    n_train_contexts: int
    note: str
    layer: int | Absent = ABSENT  # the probe's rows: its read-out and training cost
    layer_selection: str | Absent = ABSENT
    train_pairs: int | Absent = ABSENT
    train_rows: int | Absent = ABSENT
    train_seconds: float | Absent = ABSENT


@dataclass(frozen=True)
class RankingRows(StepRows):
    rows: tuple[RankingRow, ...] = ()


def run_ranking(bridge, cfgs: RankingConfig | Sequence[RankingConfig], out: str | Path
                ) -> RankingRows:
    """Rank for each config; writes ranking.csv, ranking_contexts.csv, config and figure."""
    cfgs = [cfgs] if isinstance(cfgs, RankingConfig) else list(cfgs)
    out = Path(out)
    rows, ctx_rows, infos = [], [], []
    for cfg in cfgs:
        r, c, info = rank_dataset(bridge, cfg)
        rows += r
        ctx_rows += c
        infos.append(info)
    result = RankingRows(rows=tuple(rows))
    write_csv(out / "ranking.csv", result.table())
    write_csv(out / "ranking_contexts.csv", ctx_rows)
    save_config(out, "ranking", {
        "configs": cfgs, "splits": {i["dataset"]: i["split"]["description"] for i in infos},
        "runs": infos})
    save_figure(plot_ranking(result.rows, model_name(bridge), figure_caption(cfgs, infos)), out,
                "ranking", preview=all(c.settings.quick for c in cfgs))
    return result


def figure_caption(cfgs: Sequence[RankingConfig], infos: Sequence[dict]) -> str:
    """How the figure was made: split, probe read-out, baselines, bootstrap."""
    c = cfgs[0] if cfgs else RankingConfig()
    parts = [(f"95% bootstrap CIs over evaluation contexts ({c.settings.n_boot} resamples); "
              f"Spearman only for contexts of {MIN_RANK_ITEMS}+ items.")]
    for i in infos:
        layer = (f" Probe ({c.probe_kind}) read-out {i['layer']}: {i['layer_selection']}."
                 if "layer" in i else "")
        parts.append(f"{i['dataset']}: {i['split']['description']}.{layer}")
    parts.append(f"Beam {c.beam_size}, uncertainty {c.uncertainty}; zero-shot "
                 f"{'calibrated' if c.calibrate_zero_shot else 'uncalibrated'}. Length: sign "
                 "chosen on training contexts; memorised: training win rates, unseen items tie. "
                 "Rows = prompts run per method alone.")
    return " ".join(parts)


#: How each preset differs from the defaults (``ppairs-lens rank``'s demo).
PRESETS: dict[str, Preset] = {
    "quick": Preset(changes={"n_train_contexts": 3, "max_train_pairs_per_context": 10,
                             "n_eval_contexts": 3, "max_items_per_context": 6})}


def print_table(rows: Sequence[RankingRow]) -> None:
    for r in rows:
        print(f"{r.dataset[:28]:28s} {r.label:36s} rho {r.spearman:+.3f} "
              f"[{r.lo:+.3f}, {r.hi:+.3f}]  rows {r.n_rows:5d}  {r.seconds:7.1f}s")


def _specs(args) -> list[str]:
    """Every dataset among ``--datasets`` but a ClimateX file (default: ``story_sentiment``
    and the shared SummEval file, when present)."""
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
    summeval = shared / "summeval" / "summeval.jsonl"
    specs = args.datasets or ["story_sentiment"] + ([f"{summeval}:coherence"]
                                                    if summeval.exists() else [])
    return [s for s in specs if spec_format(s) != "climatex"]


def wants_model(args) -> bool:
    """Whether :func:`cli` has any dataset to rank (else it returns without a model)."""
    return bool(_specs(args))


def plan_ranking(bridge, cfgs: Sequence[RankingConfig]) -> list:
    """The model passes of :func:`run_ranking`, for its estimate; the merge sorts planned by
    a greedy sort's most comparisons, untimed (how many a sort asks depends on the answers)."""
    from ppairs_lens.activations.prompts import build_contrast_pairs
    from ppairs_lens.judges.progress import sort_comparisons_bound
    from ppairs_lens.judges.run_estimate import PlannedStep

    steps = []
    for cfg in cfgs:
        ds = load_dataset_spec(cfg.dataset)
        want, inputs = _check_methods(cfg), ranking_inputs(ds, cfg)
        items = [c for c, g in inputs.eval_items.items() for _ in g]
        bound = sort_comparisons_bound(items)
        if want & {"probe_greedy", "probe_beam"}:
            steps.append(PlannedStep(ds.name, "harvest", tuple(build_contrast_pairs(
                bridge.tokenizer, inputs.train))))
        for family in ("probe", "zero_shot"):
            sorts = [m for m in want if m.startswith(f"{family}_")]
            if sorts:
                steps.append(PlannedStep.untimed(
                    ds.name, f"{family} sorts", bound,
                    f"comparisons a greedy sort asks at most ({len(sorts)} sorts)"))
        if want & {"direct", "geval"}:
            steps.append(PlannedStep.untimed(ds.name, "direct scoring", len(items), "items"))
    return steps


def cli(args, bridge=None) -> None:
    """The ranking part of ``ppairs-lens rank`` (``bridge`` default: load ``--model``)."""
    from ppairs_lens.judges.run_estimate import announce

    specs = _specs(args)
    if not specs:
        return
    cfgs = []
    for spec in specs:
        cfg = args.config(RankingConfig, PRESETS, dataset=spec, model=args.model, verbose=True)
        # a limit given wins over the preset
        if (limit := spec_limit(args.max_pairs, spec)) is not None:
            cfg = dataclasses.replace(cfg, max_train_pairs_per_context=limit)
        cfgs.append(cfg)
    if bridge is None:
        from ppairs_lens.models.loading import load_model
        from ppairs_lens.models.spec import ModelSpec

        bridge = load_model(ModelSpec.from_args(args))
    announce(bridge, plan_ranking(bridge, cfgs), measure=not args.no_calibration)
    print_table(run_ranking(bridge, cfgs, args.out).rows)
