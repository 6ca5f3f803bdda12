"""Thesis Tables 4.1 and 4.2 on SummEval and NEWSROOM.

Per dataset and aspect, on each store's held-out articles: Table 4.1, pairwise accuracy of
direct scoring (higher 1-5 score wins, equal counts half), PAIRS (calibrated zero-shot
comparison) and PPAIRS (the supervised probe at the sweep's validation read-out); Table 4.2,
mean Spearman with the human scores after sorting each article's summaries (PAIRS and PPAIRS by
the beam merge sort, beam 1000, uncertainty 0.6 as the thesis, over the comparisons already
scored; direct and G-Eval by their scores). Every method is scored on the same articles
(3+ summaries whose human scores differ; :func:`article_rho`); one that ranks all summaries
equal scores rho = 0, never a dropped article. Human ties are never asked; in the sorts they
count p = 0.5. The thesis's NEWSROOM "CON" column is informativeness (as in the PPairS authors'
code). Writes ``thesis_tables.csv``, ``thesis_tables.{png,svg}`` and the config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from analyses.thesis_tables_plots import plot_tables
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import TIE, Dataset, ScoredItem
from ppairs_lens.evaluation.bootstrap import mean_ci
from ppairs_lens.evaluation.metrics import evaluate, spearman
from ppairs_lens.evaluation.paired import paired_difference
from ppairs_lens.evaluation.protocol import PAPER_TEST_SIZE, EvalSettings
from ppairs_lens.evaluation.published import citation, published
from ppairs_lens.evaluation.store_split import split_store
from ppairs_lens.io.outputs import save_config, save_figure, write_csv
from ppairs_lens.io.records import StepRows
from ppairs_lens.judges.held_out import HeldOutScores, held_out_items
from ppairs_lens.probes.estimators import SupervisedProbe
from ppairs_lens.ranking.merge_sort import beam_merge_sort

__all__ = ["ThesisCell", "ThesisDifference", "ThesisPublished", "ThesisRow", "ThesisRows",
           "ThesisTablesConfig", "article_rho", "published_rows", "run_thesis_tables",
           "thesis_cell", "thesis_rows"]

METHODS = ("direct", "G-Eval", "PAIRS", "PPAIRS")


@dataclass
class ThesisTablesConfig:
    stores: list[str] = field(default_factory=list)
    settings: EvalSettings = EvalSettings(test_size=PAPER_TEST_SIZE)  # the paper's halves
    beam_size: int = 1000
    uncertainty: float = 0.6
    C: float = 1.0


def _pair_p(test: Dataset, p: Mapping[str, float]) -> dict[tuple[str, str], float]:
    """P(a better than b) for both orders of every held-out pair with a score."""
    out = {}
    for r in test.records:
        if r.pair_id in p:
            a, b = f"{r.context_id}/{r.item1_id}", f"{r.context_id}/{r.item2_id}"
            out[(a, b)] = p[r.pair_id]
            out[(b, a)] = 1.0 - p[r.pair_id]
    return out


def _articles(items: dict[str, ScoredItem]) -> dict[str, list[str]]:
    """Held-out articles a Spearman is taken on: 3+ summaries whose human scores differ."""
    by_ctx: dict[str, list[str]] = {}
    for k, it in items.items():
        by_ctx.setdefault(it.context_id, []).append(k)
    return {c: keys for c, keys in by_ctx.items()
            if len(keys) >= 3 and len({items[k].score for k in keys}) > 1}


def article_rho(pred: Sequence[str] | Mapping[str, float], gold: Mapping[str, float]) -> float:
    """Spearman of one article's predicted order or scores against its human scores; a
    prediction that ranks every summary equal has no correlation: 0, not a dropped article."""
    if isinstance(pred, Mapping) and len(set(pred.values())) <= 1:
        return 0.0
    return spearman(pred, gold)


def _per_article(items: dict[str, ScoredItem], p_ab: Mapping[tuple[str, str], float],
                 cfg: ThesisTablesConfig) -> dict[str, float]:
    """Spearman per article after the beam merge sort; a pair without a score (the humans
    tie it, so it was never asked) counts as p = 0.5."""
    out = {}
    for c, keys in _articles(items).items():
        order = beam_merge_sort(keys, lambda a, b: p_ab.get((a, b), 0.5),
                                beam_size=cfg.beam_size, uncertainty=cfg.uncertainty)
        out[c] = article_rho(order, {k: items[k].score for k in keys})
    return out


def _per_article_of(items: dict[str, ScoredItem], scores: Mapping[str, float]
                    ) -> dict[str, float]:
    return {c: article_rho({k: scores[k] for k in keys}, {k: items[k].score for k in keys})
            for c, keys in _articles(items).items()}


def _probe_p(store: ActivationStore, layer: int, cfg: ThesisTablesConfig) -> dict[str, float]:
    """The supervised probe's P(item 1) on held-out pairs, at the read-out the sweep chose."""
    sp = split_store(store, **cfg.settings.split_kwargs())
    probe = SupervisedProbe(C=cfg.C).fit(sp.acts_train[:, :, layer], sp.labels_train)
    p = probe.predict_proba(sp.acts_test[:, :, layer])[:, 1]  # P(item 1)
    return {q.pair_id: float(v) for q, v in zip(sp.pairs_test, p)}


def thesis_rows(store: ActivationStore, test: Dataset, judge_p: Mapping[str, float],
                scores: HeldOutScores, layer: int, cfg: ThesisTablesConfig
                ) -> list[ThesisCell | ThesisDifference]:
    """Our rows of Tables 4.1 and 4.2 for one (dataset, aspect) store."""
    test = Dataset(**{**test.__dict__, "records": [r for r in test.records if r.label != TIE]})
    items = held_out_items(test)
    probe = _probe_p(store, layer, cfg)
    y = np.array(test.labels())
    groups = [r.context_id for r in test.records]
    pair_ps = {"direct": dict(scores.direct_p), "G-Eval": dict(scores.geval_p),
               "PAIRS": dict(judge_p), "PPAIRS": probe,
               "direct scores": scores.direct_scores, "G-Eval scores": scores.geval_scores}
    dataset, aspect = thesis_cell(store.meta.dataset, store.meta.aspect)
    rows = _paired_rows(y, groups, test, pair_ps, items, cfg, dataset, aspect)
    base = {"dataset": dataset, "aspect": aspect,
            "thesis_column": THESIS_COLUMNS.get(aspect, aspect),
            "model": "ours", "n_spearman_articles": len(_articles(items)),
            "n_test_pairs": len(test), "n_test_articles": len(set(groups)),
            "n_items_per_article": round(len(items) / max(1, len(set(groups))), 1),
            "read_out": layer}
    for method in METHODS:
        ids = [i for i, r in enumerate(test.records) if r.pair_id in pair_ps[method]]
        p = np.array([pair_ps[method][test.records[i].pair_id] for i in ids])
        acc = evaluate(y[ids], p, groups=[groups[i] for i in ids], n_boot=cfg.settings.n_boot,
                       seed=cfg.settings.seed)["accuracy"]
        rows.append(ThesisCell(**base, table="4.1", method=method, metric="pairwise accuracy",
                               value=acc["value"], lo=acc["lo"], hi=acc["hi"], n=len(ids),
                               ci_counts=acc.get("ci_counts", False)))
        if method in ("direct", "G-Eval"):
            rhos = list(_per_article_of(items, pair_ps[f"{method} scores"]).values())
        else:
            rhos = list(_per_article(items, _pair_p(test, pair_ps[method]), cfg).values())
        ci = mean_ci(rhos, **cfg.settings.boot_kwargs()) if rhos else \
            {"value": float("nan"), "lo": float("nan"), "hi": float("nan")}
        rows.append(ThesisCell(**base, table="4.2", method=method, metric="spearman",
                               value=ci["value"], lo=ci["lo"], hi=ci["hi"], n=len(rhos),
                               ci_counts=ci.get("ci_counts", False)))
    return rows


def _paired_rows(y, groups, test: Dataset, pair_ps: dict, items, cfg: ThesisTablesConfig,
                 dataset: str, aspect: str) -> list[ThesisDifference]:
    """PPAIRS minus each other method: pairwise accuracy and Spearman, CIs over articles."""
    rows = []
    ids = [i for i, r in enumerate(test.records)
           if all(r.pair_id in pair_ps[m] for m in METHODS)]
    g = [groups[i] for i in ids]
    probe = np.array([pair_ps["PPAIRS"][test.records[i].pair_id] for i in ids])
    sorted_probe = _per_article(items, _pair_p(test, pair_ps["PPAIRS"]), cfg)
    articles = _articles(items)
    for other in ("direct", "G-Eval", "PAIRS"):
        q = np.array([pair_ps[other][test.records[i].pair_id] for i in ids])
        d = paired_difference(y[ids], probe, q, g, **cfg.settings.boot_kwargs())
        rows.append(ThesisDifference(
            table="4.1", dataset=dataset, aspect=aspect, model="ours",
            method=f"PPAIRS - {other}", metric="pairwise accuracy difference",
            value=d["value"], lo=d["lo"], hi=d["hi"], n=d["n"], ci_counts=d["ci_counts"],
            n_groups=len(d["group_diffs"]), group_diffs=tuple(d["group_diffs"])))
        if other == "PAIRS":
            theirs = _per_article(items, _pair_p(test, pair_ps[other]), cfg)
        else:
            theirs = _per_article_of(items, pair_ps[f"{other} scores"])
        common = sorted(set(sorted_probe) & set(theirs))
        diffs = [sorted_probe[c] - theirs[c] for c in common]
        sizes = [len(articles[c]) for c in common]
        ci = mean_ci(diffs, **cfg.settings.boot_kwargs()) if diffs else \
            {"value": float("nan"), "lo": float("nan"), "hi": float("nan"), "ci_counts": False}
        rows.append(ThesisDifference(   # an article is the unit: its rho difference
            table="4.2", dataset=dataset, aspect=aspect, model="ours",
            method=f"PPAIRS - {other}", metric="spearman difference",
            value=ci["value"], lo=ci["lo"], hi=ci["hi"], n=len(diffs),
            ci_counts=ci.get("ci_counts"), n_groups=len(diffs), group_diffs=tuple(diffs),
            min_items_sorted=min(sizes, default=0)))
    return rows


#: The store's aspect adjective -> the aspect's name in the tables.
_ASPECTS = {"coherent": "coherence", "consistent": "consistency", "fluent": "fluency",
            "relevant": "relevance", "informative": "informativeness"}
#: Our aspect -> the thesis's column (NEWSROOM's CON column is informativeness).
THESIS_COLUMNS = {"coherence": "CH", "consistency": "CON", "informativeness": "CON",
                  "fluency": "FLU", "relevance": "RE"}
#: Store name prefix -> the dataset's name in the published records.
THESIS_DATASETS = {"summeval": "SummEval", "newsroom": "NEWSROOM"}


def thesis_cell(store_name: str, aspect: str) -> tuple[str, str]:
    """(dataset, aspect) of a store's cells: ``("NEWSROOM", "informativeness")``."""
    prefix = store_name.split("-")[0].lower()
    return THESIS_DATASETS.get(prefix, store_name), _ASPECTS.get(aspect, aspect)


def published_rows(cells: Sequence[tuple[str, str]]) -> list[ThesisPublished]:
    """The thesis's numbers for the same (dataset, aspect) cells, labelled with their model;
    NEWSROOM's published CON column stands beside our informativeness."""
    out = []
    for table, metric in (("Table 4.1", "pairwise accuracy"), ("Table 4.2", "spearman")):
        for p in published(source="thesis", table=table):
            aspect = ("informativeness" if p.dataset == "NEWSROOM" and p.aspect == "consistency"
                      else p.aspect)
            if (p.dataset, aspect) in cells:
                out.append(ThesisPublished(
                    table=table.split()[-1], dataset=p.dataset, aspect=aspect,
                    thesis_column=THESIS_COLUMNS.get(aspect, aspect), method=p.method,
                    metric=metric, model=p.model, value=p.value, lo=None, hi=None,
                    source=citation(p)))
    return out


@dataclass(frozen=True)
class ThesisCell:
    """One of our methods in one (corpus, aspect) cell: accuracy (4.1) or Spearman (4.2)."""

    dataset: str
    aspect: str
    thesis_column: str
    model: str
    n_spearman_articles: int
    n_test_pairs: int
    n_test_articles: int
    n_items_per_article: float
    read_out: int
    table: str
    method: str
    metric: str
    value: float
    lo: float
    hi: float
    n: int
    ci_counts: bool | None


@dataclass(frozen=True)
class ThesisDifference:
    """PPAIRS minus another method in one cell, with the per-group differences behind it."""

    table: str
    dataset: str
    aspect: str
    model: str
    method: str
    metric: str
    value: float
    lo: float
    hi: float
    n: int
    ci_counts: bool | None
    n_groups: int
    group_diffs: tuple[float, ...]
    min_items_sorted: int | None = None   # Table 4.2: the fewest summaries an article sorts


@dataclass(frozen=True)
class ThesisPublished:
    """The thesis's number for the same cell (no interval published)."""

    table: str
    dataset: str
    aspect: str
    thesis_column: str
    method: str
    metric: str
    model: str
    value: float
    lo: float | None
    hi: float | None
    source: str


ThesisRow = ThesisCell | ThesisDifference | ThesisPublished


@dataclass(frozen=True)
class ThesisRows(StepRows):
    rows: tuple[ThesisRow, ...] = ()


def run_thesis_tables(items: Sequence[tuple[ActivationStore, Dataset]],
                      judges: Mapping[str, Mapping[str, float]],
                      scores: Mapping[str, HeldOutScores],
                      layers: Mapping[str, int], out, cfg: ThesisTablesConfig
                      ) -> ThesisRows:
    """``items``: (store, held-out Dataset) per SummEval / NEWSROOM aspect (a store named
    ``summeval-*`` or ``newsroom-*``); per store name, ``judges``: the zero-shot judge's
    P(item 1) per pair id (paper form), ``scores``: the held-out items' direct and G-Eval
    ratings, ``layers``: the read-out the sweep chose for the supervised probe."""
    rows = []
    for store, test in items:
        name = store.meta.dataset
        rows += thesis_rows(store, test, judges[name], scores[name], layers[name], cfg)
    rows += published_rows(sorted({(r.dataset, r.aspect) for r in rows}))
    result = ThesisRows(rows=tuple(rows))
    write_csv(f"{out}/thesis_tables.csv", result.table())
    save_config(out, "thesis_tables", cfg)
    save_figure(plot_tables(result.rows, items[0][0].meta.model), out, "thesis_tables",
                preview=cfg.settings.quick)
    return result
