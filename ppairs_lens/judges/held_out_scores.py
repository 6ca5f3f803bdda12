"""Direct scoring and G-Eval on a held-out set of comparisons, as pairwise answers.

Each held-out item (a summary within its article, a story within its prompt) is rated once
(:func:`ppairs_lens.judges.scoring.score_items`: one forward per item, items of one context
sharing its prefix, and, since an article has only its ten or so items here, the contexts of
many articles run in one pass: ``batch_contexts``); a comparison's answer is then the higher
score (direct: the most likely score, equal scores count half; G-Eval: the
probability-weighted score). Items are keyed ``context_id/item_id``, so a ranking can read
the scores of every item of a context.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.data.records import Dataset, ScoredItem
from ppairs_lens.judges.scoring import score_items

__all__ = ["HeldOutScores", "held_out_items", "item_key", "score_held_out"]


def item_key(context_id: str | None, item_id: str | None) -> str:
    return f"{context_id}/{item_id}"


def held_out_items(test: Dataset) -> dict[str, ScoredItem]:
    """The items of ``test``'s comparisons (each once), with their gold scores."""
    out: dict[str, ScoredItem] = {}
    for r in test.records:
        for iid, text, score in ((r.item1_id, r.item1, r.score1), (r.item2_id, r.item2, r.score2)):
            k = item_key(r.context_id, iid)
            out[k] = ScoredItem(k, text, score, r.context_id, r.context)
    return out


@dataclass(frozen=True)
class HeldOutScores:
    """Per item its direct and G-Eval score; per comparison P(item 1) from each."""

    direct_scores: dict[str, float]
    geval_scores: dict[str, float]
    direct_p: dict[str, float]
    geval_p: dict[str, float]
    n_prompts: int

    def p_by_pair(self) -> dict[str, dict[str, float]]:
        """Under the keys the layer sweep reads (:data:`analyses.layer_sweep.JUDGES`)."""
        return {"direct_p_by_pair": self.direct_p, "geval_p_by_pair": self.geval_p}


def _pairwise(test: Dataset, scores: dict[str, float]) -> dict[str, float]:
    return {r.pair_id: float(0.5 + 0.5 * np.sign(scores[item_key(r.context_id, r.item1_id)]
                                                 - scores[item_key(r.context_id, r.item2_id)]))
            for r in test.records}


def score_held_out(bridge, test: Dataset,
                   settings: HarvestSettings = HarvestSettings(batch_contexts=True)
                   ) -> HeldOutScores:
    """Rate every held-out item once; both forms of answer for every comparison.
    ``settings``: how the prompts are batched (never the numbers, beyond float rounding)."""
    items = held_out_items(test)
    s = score_items(bridge, items, test, settings=settings)
    direct, geval = s.as_dict("direct"), s.as_dict("geval")
    return HeldOutScores(direct, geval, _pairwise(test, direct), _pairwise(test, geval),
                         len(items))
