"""Scored items (text and gold score, within a context) for ranking and insertion scoring:
recovered from a comparison dataset, sampled by score level, and compared for training."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from ppairs_lens.data.records import TIE, Comparison, Dataset, ScoredItem
from ppairs_lens.data.scored_items import comparisons_within_contexts
from ppairs_lens.errors import DataError

__all__ = ["balanced_by_score", "items_by_context", "stratified_by_score", "training_comparisons"]


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


def training_comparisons(meta: Dataset, items: Sequence[ScoredItem], max_pairs: int | None,
                         seed: int) -> Dataset:
    """Comparisons among ``items`` within each context (``meta``'s fields, name
    ``<name>:train``), ties dropped, at most ``max_pairs`` per context (seeded)."""
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


def _shuffled_levels(items: Sequence[ScoredItem], rng: random.Random
                     ) -> dict[float, list[ScoredItem]]:
    """The items of each score level, each level shuffled (levels in first-seen order)."""
    by: dict[float, list[ScoredItem]] = {}
    for it in items:
        by.setdefault(it.score, []).append(it)
    for v in by.values():
        rng.shuffle(v)
    return by


def stratified_by_score(items: Sequence[ScoredItem], n: int | None, rng: random.Random
                        ) -> list[ScoredItem]:
    """``n`` items keeping each score level's share of ``items`` (ClimateX's test split is
    50 low, 100 medium, 100 high, 50 very high: a sample keeps those proportions, so accuracy
    means what it means on the whole split); ``None``: all of them, level by level."""
    by = _shuffled_levels(items, rng)
    if n is None or n >= len(items):
        return [it for lv in sorted(by) for it in by[lv]]
    want = {lv: n * len(v) / len(items) for lv, v in by.items()}
    take = {lv: int(w) for lv, w in want.items()}
    for lv in sorted(want, key=lambda lv: want[lv] - take[lv], reverse=True)[:n - sum(take.values())]:
        take[lv] += 1  # largest remainders get the leftover places
    return [it for lv in sorted(by) for it in by[lv][:take[lv]]]


def balanced_by_score(items: Sequence[ScoredItem], n: int | None, rng: random.Random
                      ) -> list[ScoredItem]:
    """``n`` items dealt round robin over the shuffled score levels; ``None``: all, by level."""
    by = _shuffled_levels(items, rng)
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
