"""Held-out scores of a sweep's predictions, with bootstrap CIs over leak groups.

:func:`score_pairs` scores any P(item 1) on a store's test pairs (a probe, a no-model
baseline, a prompted judge) the same way: accuracy, macro F1, AUROC, and a within-context
Spearman only where it means something (gold scores, and contexts of at least
:data:`MIN_RANK_ITEMS` items: where a context is one pair, Spearman is just 2 * accuracy - 1).
:func:`score_sweep_logits` scores a sweep on its logits, which stay meaningful when the
activations move far from where the probes were fitted (under an intervention, say): a
shifted logit can round every probability to 0 or 1, which would make every pair a tie.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.evaluation.bootstrap import Interval, intervals
from ppairs_lens.evaluation.metrics import (auroc, evaluate_batch, targets,
                                            within_context_spearman_batch)
from ppairs_lens.evaluation.resampled import weighted_auroc
from ppairs_lens.probes.sweep import SweepProbes

__all__ = ["score_sweep_logits", "score_pairs", "score_pairs_batch", "rank_contexts",
           "MIN_RANK_ITEMS"]

#: A context needs this many distinct items for a within-context rank correlation to say
#: more than the pairwise accuracy does.
MIN_RANK_ITEMS: int = 3


def rank_contexts(pairs: Sequence[PairInfo]) -> list[Hashable]:
    """Contexts that have gold scores and at least :data:`MIN_RANK_ITEMS` items; empty unless
    there are two or more (a mean over one context has no interval)."""
    items: dict[Hashable, set] = {}
    for p in pairs:
        if p.score1 is None or p.score2 is None or p.item1_id is None:
            continue
        items.setdefault(p.context_id, set()).update((p.item1_id, p.item2_id))
    ctxs = [c for c, its in items.items() if len(its) >= MIN_RANK_ITEMS]
    return ctxs if len(ctxs) >= 2 else []


def score_pairs(labels: np.ndarray, p: np.ndarray, pairs: Sequence[PairInfo],
                groups: Sequence[Hashable], *, n_boot: int, seed: int) -> dict[str, Interval]:
    """``{"accuracy", "f1", "auroc"[, "spearman"]}`` of P(item 1) ``p`` on ``pairs``,
    bootstrapping whole ``groups``; ``spearman`` (bootstrap over contexts) only for the
    contexts :func:`rank_contexts` keeps, NaN where the predictions rank none."""
    return score_pairs_batch(labels, np.asarray(p, dtype=np.float64)[:, None], pairs, groups,
                             n_boot=n_boot, seed=seed)[0]


def score_pairs_batch(labels: np.ndarray, p: Float[np.ndarray, "n k"],
                      pairs: Sequence[PairInfo], groups: Sequence[Hashable], *, n_boot: int,
                      seed: int) -> list[dict[str, Interval]]:
    """:func:`score_pairs` of every column of ``p`` (a sweep's every layer and kind) on one
    draw of the resamples; each column's numbers are those of its own :func:`score_pairs`."""
    scores = evaluate_batch(targets(labels), p, groups=groups, n_boot=n_boot, seed=seed)
    ctxs = set(rank_contexts(pairs))
    if ctxs:
        keep = [i for i, q in enumerate(pairs) if q.context_id in ctxs]
        # Item ids may recur across contexts (SummEval's S0..S15): key gold by context too.
        gold, trip = {}, []
        for i in keep:
            q = pairs[i]
            a, b = (q.context_id, q.item1_id), (q.context_id, q.item2_id)
            gold[a], gold[b] = q.score1, q.score2
            trip.append((q.context_id, a, b))
        nan = float("nan")
        rhos = within_context_spearman_batch(trip, np.asarray(p)[keep], gold, n_boot=n_boot,
                                             seed=seed)
        for s, rho in zip(scores, rhos):
            # None: constant predictions (an uninformed baseline) rank no context
            s["spearman"] = (rho if rho is not None
                             else {"value": nan, "lo": nan, "hi": nan, "n_contexts": 0})
    return scores


def score_sweep_logits(sweep: SweepProbes, acts: Float[Tensor, "n 2 layer d_model"],
                       labels: np.ndarray, groups: Sequence[Hashable], *, n_boot: int,
                       seed: int) -> dict[tuple[str, int], dict[str, Interval]]:
    """``{(kind, read-out position): {"accuracy", "auroc"}}`` of every probe of ``sweep`` on
    its logits (accuracy: ``logit >= 0``); degenerate read-outs are left out."""
    logits = sweep.decision_function(acts)
    y = (np.asarray(labels) == 1).astype(float)
    out = {}
    for k in sweep.kinds:
        for j in range(sweep.n_layers):
            z = logits[k][j]
            if not np.isfinite(z).all():
                continue  # a degenerate read-out: nothing to score
            hit = ((z >= 0) == (y == 1)).astype(float)
            stats = {"accuracy": lambda w, h=hit: (w @ h) / w.sum(axis=1),
                     "auroc": lambda w, z=z: weighted_auroc(w, y, z)}
            try:
                exact_auroc = auroc(y, z)
            except ValueError:          # one class: undefined
                exact_auroc = float("nan")
            out[k, j] = intervals(stats, len(y), groups, n_boot=n_boot, seed=seed,
                                  values={"accuracy": float(hit.mean()), "auroc": exact_auroc})
    return out
