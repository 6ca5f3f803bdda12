"""No-model rankings a probe's ranking must beat: item length and memorised win rates.

A probe that only reads how long an item is, or only remembers which items won in training,
ranks as well as these do. Both are fitted on the training contexts only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ppairs_lens.data.records import ITEM1, ITEM2, Dataset, ScoredItem
from ppairs_lens.evaluation.metrics import spearman

__all__ = ["WinRates", "length_scores", "length_sign", "memorised_scores", "win_rates"]


def length_sign(contexts: Mapping[str, Mapping[str, ScoredItem]]) -> tuple[int, float]:
    """``(sign, rho)``: ``rho`` the mean within-context Spearman of length with gold score
    (constant contexts left out; none left: ``(+1, nan)``), ``sign`` +1 when ``rho >= 0``."""
    rhos = [spearman({i: float(len(it.text)) for i, it in g.items()},
                     {i: it.score for i, it in g.items()}) for g in contexts.values()]
    finite = [r for r in rhos if math.isfinite(r)]
    if not finite:
        return 1, math.nan
    rho = float(np.mean(finite))
    return (1 if rho >= 0 else -1), rho


def length_scores(items: Mapping[str, ScoredItem], sign: int) -> dict[str, float]:
    """``sign`` times each item's length in characters."""
    return {k: float(sign * len(it.text)) for k, it in items.items()}


class WinRates:
    """Training win rates of items, looked up by item id, else by exact text."""

    def __init__(self, by_id: Mapping[str, float], by_text: Mapping[str, float]):
        self.by_id, self.by_text = dict(by_id), dict(by_text)

    def lookup(self, item: ScoredItem) -> float | None:
        """The item's training win rate, or None when neither its id nor its text was seen."""
        if item.item_id in self.by_id:
            return self.by_id[item.item_id]
        return self.by_text.get(item.text)


def win_rates(train: Dataset) -> WinRates:
    """Win rates over ``train``'s comparisons by item id and text (a tie: half to each)."""
    tallies: dict[str, dict[str, list[float]]] = {"id": {}, "text": {}}
    for r in train.records:
        w1 = 1.0 if r.label == ITEM1 else 0.0 if r.label == ITEM2 else 0.5
        for iid, text, w in ((r.item1_id, r.item1, w1), (r.item2_id, r.item2, 1.0 - w1)):
            if iid is not None:
                tallies["id"].setdefault(str(iid), []).append(w)
            tallies["text"].setdefault(text, []).append(w)
    rates = {k: {key: float(np.mean(v)) for key, v in t.items()} for k, t in tallies.items()}
    return WinRates(rates["id"], rates["text"])


def memorised_scores(items: Mapping[str, ScoredItem], rates: WinRates
                     ) -> tuple[dict[str, float], int]:
    """``(scores, n_seen)``: each item's training win rate (0.5 when unseen)."""
    scores, seen = {}, 0
    for k, it in items.items():
        r = rates.lookup(it)
        seen += r is not None
        scores[k] = 0.5 if r is None else r
    return scores, seen
