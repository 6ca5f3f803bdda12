"""Direct scoring and G-Eval on a held-out set of comparisons, as pairwise answers.

Each held-out item (a summary within its article, a story within its prompt) is rated once
(:func:`ppairs_lens.judges.scoring.score_item_sets`: one forward per item, items of one
context sharing its prefix, across a corpus's aspects too, and, since an article has only a
few held-out items, the contexts of many articles run in one pass: ``batch_contexts``); a
comparison's answer is then the higher
score (direct: the most likely score, equal scores count half; G-Eval: the
probability-weighted score). Items are keyed ``context_id/item_id``, so a ranking can read
the scores of every item of a context.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.data.records import Dataset, ScoredItem
from ppairs_lens.judges.scoring import score_item_sets

__all__ = ["HeldOutScores", "held_out_items", "item_key", "score_held_out",
           "score_held_out_sets"]


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
    return score_held_out_sets(bridge, {"test": test}, settings)["test"]


def score_held_out_sets(bridge, tests: Mapping[str, Dataset],
                        settings: HarvestSettings = HarvestSettings(batch_contexts=True)
                        ) -> dict[str, HeldOutScores]:
    """:func:`score_held_out` of several held-out sets in one pass
    (:func:`ppairs_lens.judges.scoring.score_item_sets`: a corpus's aspects rate the same
    summaries, so each article and summary runs once for all of them)."""
    items = {n: held_out_items(t) for n, t in tests.items()}
    scored = score_item_sets(bridge, [(items[n], t) for n, t in tests.items()],
                             settings=settings)
    out = {}
    for (n, test), s in zip(tests.items(), scored):
        direct, geval = s.as_dict("direct"), s.as_dict("geval")
        out[n] = HeldOutScores(direct, geval, _pairwise(test, direct), _pairwise(test, geval),
                               len(items[n]))
    return out
