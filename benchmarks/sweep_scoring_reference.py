"""The layer sweep's scoring one layer at a time, as it was before batching: the reference
that :func:`ppairs_lens.evaluation.sweep_scores.score_pairs_batch` is timed against
(``bench_sweep.py``) and checked against bit for bit (``tests/test_sweep_scores_batch.py``).

Per layer: a dense ``[b, n]`` weights matrix drawn again, accuracy / F1 / AUROC as weighted
counts on it (:data:`ppairs_lens.evaluation.resampled.WEIGHTED`), and the within-context
Spearman as a Python loop over contexts calling
:func:`ppairs_lens.evaluation.metrics.spearman` (scipy ranks) per context.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.evaluation.bootstrap import intervals, mean_ci
from ppairs_lens.evaluation.metrics import METRICS, spearman, targets
from ppairs_lens.evaluation.resampled import WEIGHTED
from ppairs_lens.evaluation.sweep_scores import rank_contexts

__all__ = ["context_rhos_loop", "per_layer_scores"]


def _safe(fn, y: np.ndarray, p: np.ndarray) -> float:
    try:
        return float(fn(y, p))
    except ValueError:
        return float("nan")


def context_rhos_loop(trip: Sequence[tuple[Hashable, Hashable, Hashable]], p: np.ndarray,
                      gold: dict) -> np.ndarray:
    """Spearman(gold, win rate) of each context that has one, in first-appearance order."""
    wins: dict = {}
    for (ctx, a, b), pa in zip(trip, p):
        per = wins.setdefault(ctx, {})
        per.setdefault(a, []).append(pa)
        per.setdefault(b, []).append(1.0 - pa)
    rhos = []
    for per in wins.values():
        items = list(per)
        if len(items) < 2:
            continue
        g = np.array([gold[i] for i in items], dtype=np.float64)
        w = np.array([np.mean(per[i]) for i in items])
        if np.ptp(g) == 0 or np.ptp(w) == 0:
            continue
        rho = spearman(g, w)
        if np.isfinite(rho):
            rhos.append(rho)
    return np.asarray(rhos)


def per_layer_scores(labels: np.ndarray, p: np.ndarray, pairs: Sequence[PairInfo],
                     groups: Sequence[Hashable] | None, *, n_boot: int, seed: int) -> dict:
    """One layer's ``{"accuracy", "f1", "auroc"[, "spearman"]}`` with CIs."""
    y, p = targets(labels), np.asarray(p, dtype=np.float64)
    stats = {name: (lambda w, f=WEIGHTED[name]: f(w, y, p)) for name in METRICS}
    out = intervals(stats, len(y), groups, n_boot=n_boot, seed=seed,
                    values={name: _safe(fn, y, p) for name, fn in METRICS.items()})
    ctxs = set(rank_contexts(pairs))
    if ctxs:
        keep = [i for i, q in enumerate(pairs) if q.context_id in ctxs]
        gold, trip = {}, []
        for i in keep:
            q = pairs[i]
            a, b = (q.context_id, q.item1_id), (q.context_id, q.item2_id)
            gold[a], gold[b] = q.score1, q.score2
            trip.append((q.context_id, a, b))
        rhos = context_rhos_loop(trip, p[keep], gold)
        if len(rhos) == 0:
            nan = float("nan")
            out["spearman"] = {"value": nan, "lo": nan, "hi": nan, "n_contexts": 0}
        else:
            ci = mean_ci(rhos, n_boot=n_boot, seed=seed)
            if len(rhos) < 2:
                ci["lo"] = ci["hi"] = float("nan")
            out["spearman"] = {**ci, "n_contexts": len(rhos)}
    return out


def synthetic_contexts(n_ctx: int = 20, n_items: int = 10, n_cols: int = 5, seed: int = 0,
                       decimals: int = 2):
    """``(labels, p [n, n_cols], pairs)``: every ordered pair of ``n_items`` gold-scored items
    in each of ``n_ctx`` contexts (the leak groups; each item in ``2 * (n_items - 1)``
    comparisons, past numpy's 8-term sum blocks with 10 items), and P(item 1) of ``n_cols``
    predictors from chance to informative, rounded to ``decimals`` so that some tie, as a
    sweep's probes' do."""
    rng = np.random.default_rng(seed)
    pairs = []
    for c in range(n_ctx):
        gold = rng.integers(1, 6, size=n_items).astype(float)
        for a in range(n_items):
            for b in range(n_items):
                if a != b:
                    lab = 1 if gold[a] > gold[b] or (gold[a] == gold[b] and rng.random() < .5) else 2
                    pairs.append(PairInfo(f"c{c}-{a}-{b}", lab, f"c{c}", f"c{c}", f"S{a}",
                                          f"S{b}", gold[a], gold[b]))
    y = np.array([q.label for q in pairs])
    sig = np.where(y == 1, 1.0, -1.0)[:, None]
    p = 1 / (1 + np.exp(-(sig * np.linspace(0, 2, n_cols) + rng.normal(size=(len(y), n_cols)))))
    return y, np.round(p, decimals), pairs
