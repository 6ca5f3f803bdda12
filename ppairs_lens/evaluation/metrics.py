"""Scores of pairwise predictions with bootstrap confidence intervals.

Every metric comes as ``{"value", "lo", "hi"}``: the value on all the data and a percentile
bootstrap interval over whole groups (comparisons that share a context are not independent).
Resamples where a metric is undefined (a single-class resample for AUROC, a context with
constant gold scores) are skipped rather than counted as 0.

Conventions: ``y_true`` are labels 1 (item 1 preferred) / 2, as in the store; ties (0) must be
dropped first (0/1 targets are refused because 0 would be ambiguous). ``proba`` is P(item 1
preferred): ``[n]`` or a ``predict_proba`` matrix ``[n, 2]`` (column 1 is used). A pair is
predicted "item 1" when ``proba >= 0.5``. F1 is macro (the mean over item 1 and item 2 as the
positive class), so it does not depend on the order the items of a pair are listed in.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from jaxtyping import Float
from scipy.stats import rankdata

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.bootstrap import (ALPHA, N_BOOT, Interval, Resamples,
                                              batch_intervals, draw_resamples, mean_ci)
from ppairs_lens.evaluation.resampled import RESAMPLED
from ppairs_lens.probes.features import labels_to_targets

__all__ = ["evaluate", "evaluate_batch", "evaluate_targets", "spearman",
           "within_context_spearman", "within_context_spearman_batch", "accuracy", "f1",
           "f1_item1", "auroc", "METRICS", "targets", "proba_vector", "context_rhos"]


def proba_vector(proba: Any) -> np.ndarray:
    """P(item 1) as a float vector ``[n]`` from a vector or a ``predict_proba`` matrix."""
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim == 2 and p.shape[1] == 2:
        p = p[:, 1]
    if p.ndim != 1:
        raise ProbeError(f"proba must be P(item 1) of shape [n] or [n, 2], got {p.shape}")
    return p


def targets(y_true: Any) -> np.ndarray:
    """0/1 targets (1 = item 1 preferred) from labels 1 / 2 (ties refused)."""
    return labels_to_targets(y_true).numpy()


# Metrics on targets (1 = item 1 preferred) and P(item 1); raise ValueError when undefined.
# Written out (same values as sklearn's accuracy_score / f1_score(average="macro",
# zero_division=0) / roc_auc_score, checked in the tests) because the bootstrap calls them
# thousands of times and sklearn's input validation costs ~1 ms a call.
def accuracy(y: np.ndarray, p: np.ndarray) -> float:
    """Share of pairs on the gold side of 0.5; an exact 0.5 (no answer) counts half, so saying
    nothing scores chance, not the share of label-1 pairs."""
    return float(np.mean(np.where(p == 0.5, 0.5, (p > 0.5) == (y == 1))))


def f1_item1(y: np.ndarray, p: np.ndarray) -> float:
    """Binary F1 with "item 1 preferred" as the positive class (order-dependent); 0 undefined."""
    pos, pred = y == 1, p >= 0.5
    tp = np.count_nonzero(pos & pred)
    denom = np.count_nonzero(pos) + np.count_nonzero(pred)
    return 2.0 * tp / denom if denom else 0.0


def f1(y: np.ndarray, p: np.ndarray) -> float:
    """Macro F1; a class neither true nor predicted anywhere is left out of the mean (as
    sklearn's ``f1_score(average="macro")``)."""
    out = []
    for pos, pred in ((y == 1, p >= 0.5), (y != 1, p < 0.5)):
        denom = np.count_nonzero(pos) + np.count_nonzero(pred)
        if denom:
            out.append(2.0 * np.count_nonzero(pos & pred) / denom)
    return float(np.mean(out)) if out else 0.0


def auroc(y: np.ndarray, p: np.ndarray) -> float:
    """Mann-Whitney AUROC (ties count half); ValueError with a single class."""
    pos = y == 1
    n1 = int(pos.sum())
    n0 = len(y) - n1
    if n1 == 0 or n0 == 0:
        raise ValueError("AUROC is undefined with a single class")
    ranks = rankdata(p)
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _safe(metric_fn: Callable[..., float], *args: Any) -> float:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(metric_fn(*args))
    except ValueError:
        return float("nan")


#: The pairwise metrics every table reports, by name (value of ``metric`` arguments).
METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "accuracy": accuracy, "f1": f1, "auroc": auroc}


def evaluate(y_true: Any, proba: Any, groups: Sequence[Hashable] | None = None,
             n_boot: int = N_BOOT, alpha: float = ALPHA, seed: int = 0) -> dict[str, Interval]:
    """Accuracy, macro F1 and AUROC, each with a CI (``groups`` resampled whole; the three on
    the same resamples). ``y_true``: labels 1 / 2 as in a store."""
    return evaluate_targets(targets(y_true), proba, groups, n_boot=n_boot, alpha=alpha,
                            seed=seed)


def evaluate_targets(y: np.ndarray, proba: Any, groups: Sequence[Hashable] | None = None,
                     n_boot: int = N_BOOT, alpha: float = ALPHA, seed: int = 0
                     ) -> dict[str, Interval]:
    """:func:`evaluate` on 0/1 targets (1 where item 1 is gold)."""
    p = proba_vector(proba)
    return evaluate_batch(y, p[:, None], groups, n_boot=n_boot, alpha=alpha, seed=seed)[0]


def evaluate_batch(y: np.ndarray, proba: Float[np.ndarray, "n k"],
                   groups: Sequence[Hashable] | None = None, n_boot: int = N_BOOT,
                   alpha: float = ALPHA, seed: int = 0) -> list[dict[str, Interval]]:
    """:func:`evaluate_targets` of every column of ``proba`` (``k`` predictors on the same
    records: a sweep's layers and kinds) on one draw of the resamples; each column's numbers
    are those of its own :func:`evaluate_targets` call."""
    y = np.asarray(y)
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim != 2:
        raise ProbeError(f"proba must be [n, k] (one column per predictor), got {p.shape}")
    if len(p) != len(y):
        raise ProbeError(f"{len(y)} labels but {len(p)} probabilities")
    if not np.isfinite(p).all():
        raise ProbeError(f"{int((~np.isfinite(p)).sum())} probabilities are NaN/inf "
                         f"(a degenerate layer?)")
    if len(y) == 0:
        raise ProbeError("cannot bootstrap zero records")
    if not 0.0 < alpha < 1.0:
        raise ProbeError(f"alpha must be in (0, 1), got {alpha}")
    r = draw_resamples(len(y), groups, n_boot, seed)
    stats = {name: (lambda r, f=RESAMPLED[name]: f(r, y, p)) for name in METRICS}
    values = {name: [_safe(fn, y, p[:, j]) for j in range(p.shape[1])]
              for name, fn in METRICS.items()}
    return batch_intervals(stats, r, values, alpha=alpha)


def spearman(order_or_scores: Sequence[Any] | Mapping[Hashable, float],
             gold: Sequence[float] | Mapping[Hashable, float]) -> float:
    """Spearman rank correlation between a predicted ranking or scores and gold scores.

    One helper for three shapes (a ranked list from a sort, a dict of scores, two aligned
    arrays), so all agree on the sign convention: with ``gold`` a mapping, ``order_or_scores``
    is either items ordered most-preferred first (a perfect descending order gives +1) or a
    mapping item -> predicted score, compared on the items of ``order_or_scores``; else both
    are aligned scores. Items missing from ``gold`` are an error. Ties get average ranks;
    ``nan`` for fewer than two items or a constant side.
    """
    if isinstance(gold, Mapping):
        keys = list(order_or_scores)
        if isinstance(order_or_scores, Mapping):
            pred = [float(order_or_scores[k]) for k in keys]
        else:
            pred = [float(len(keys) - pos) for pos in range(len(keys))]
        missing = [k for k in keys if k not in gold]
        if missing:
            raise ValueError(f"{len(missing)} items have no gold score, e.g. {missing[0]!r}")
        ref = [float(gold[k]) for k in keys]
    else:
        if isinstance(order_or_scores, Mapping):
            raise TypeError("with gold as a sequence, order_or_scores must be a sequence of "
                            "scores")
        pred = [float(x) for x in order_or_scores]
        ref = [float(x) for x in gold]
        if len(pred) != len(ref):
            raise ValueError(f"length mismatch: {len(pred)} predictions, {len(ref)} gold scores")
    if len(pred) < 2:
        return math.nan
    rp, rg = rankdata(pred), rankdata(ref)
    if np.std(rp) == 0 or np.std(rg) == 0:
        return math.nan
    return float(np.corrcoef(rp, rg)[0, 1])


def within_context_spearman(pairs: Sequence[tuple[Hashable, Hashable, Hashable]], proba: Any,
                            gold_scores: Mapping[Hashable, float], n_boot: int = N_BOOT,
                            alpha: float = ALPHA, seed: int = 0) -> dict[str, float]:
    """Mean over contexts of Spearman(win rate, gold score), with a bootstrap over contexts.

    ``pairs[i] = (context_id, item1_id, item2_id)``. An item's win rate is its mean probability
    of winning over its comparisons; contexts without a rank correlation are skipped
    (``n_contexts`` counts the rest). ``context_id=None`` for all pairs when items do not
    share contexts (one global ranking; then the interval is NaN).
    """
    p = proba_vector(proba)
    (out,) = within_context_spearman_batch(pairs, p[:, None], gold_scores, n_boot=n_boot,
                                           alpha=alpha, seed=seed)
    if out is None:
        raise ProbeError("no context has at least two items with different gold scores; "
                         "within-context Spearman is undefined")
    return out


def within_context_spearman_batch(pairs: Sequence[tuple[Hashable, Hashable, Hashable]],
                                  proba: Float[np.ndarray, "n k"],
                                  gold_scores: Mapping[Hashable, float], n_boot: int = N_BOOT,
                                  alpha: float = ALPHA, seed: int = 0
                                  ) -> list[dict[str, float] | None]:
    """:func:`within_context_spearman` of every column of ``proba`` (None: no context ranked)."""
    p = np.asarray(proba, dtype=np.float64)
    pairs = [tuple(t) for t in pairs]
    if p.ndim != 2:
        raise ProbeError(f"proba must be [n, k] (one column per predictor), got {p.shape}")
    if len(pairs) != len(p):
        raise ProbeError(f"{len(pairs)} pairs but {len(p)} probabilities")
    if any(len(t) != 3 for t in pairs):
        raise ProbeError("each pair must be (context_id, item1_id, item2_id)")
    drawn: dict[int, Resamples] = {}
    out: list[dict[str, float] | None] = []
    for _, rhos in context_rhos(pairs, p, gold_scores):
        if len(rhos) == 0:
            out.append(None)
            continue
        if len(rhos) not in drawn:
            drawn[len(rhos)] = draw_resamples(len(rhos), None, n_boot, seed)
        ci = mean_ci(rhos, n_boot=n_boot, seed=seed, alpha=alpha,   # contexts resampled
                     resamples=drawn[len(rhos)])
        if len(rhos) < 2:
            ci["lo"] = ci["hi"] = float("nan")
        out.append({**ci, "n_contexts": len(rhos)})
    return out


def _layout(pairs: Sequence[tuple[Hashable, Hashable, Hashable]], gold: Mapping[Hashable, float]
            ) -> tuple[list[Hashable], list[list[list[int]]], list[np.ndarray]]:
    """Contexts with 2+ items and varied gold scores, each item's comparisons (pair index ``i``
    as item 1, ``~i`` as item 2), and the items' gold scores."""
    per: dict[Hashable, dict[Hashable, list[int]]] = {}
    for i, (ctx, a, b) in enumerate(pairs):
        items = per.setdefault(ctx, {})
        items.setdefault(a, []).append(i)
        items.setdefault(b, []).append(~i)
    ctxs, comps, golds = [], [], []
    for ctx, items in per.items():
        if len(items) < 2:
            continue
        missing = [i for i in items if i not in gold]
        if missing:
            raise ProbeError(f"no gold score for item {missing[0]!r} (context {ctx!r})")
        g = np.array([gold[i] for i in items], dtype=np.float64)
        if np.ptp(g) == 0:                     # rank correlation undefined
            continue
        ctxs.append(ctx)
        comps.append(list(items.values()))
        golds.append(g)
    return ctxs, comps, golds


def _win_rates(comps: list[list[list[int]]], p: Float[np.ndarray, "n k"]
               ) -> list[Float[np.ndarray, "k m"]]:
    """Each context's items' win rates, one row per column of ``p``."""
    flat = [c for items in comps for c in items]
    out = np.empty((p.shape[1], len(flat)))
    pt = np.ascontiguousarray(p.T)
    by_len: dict[int, list[int]] = {}
    for j, c in enumerate(flat):
        by_len.setdefault(len(c), []).append(j)
    for _, js in by_len.items():
        code = np.array([flat[j] for j in js])           # [m, c]
        second = code < 0
        idx = np.where(second, ~code, code)
        vals = pt[:, idx]                                # [k, m, c]
        # C order: numpy sums pairwise (as np.mean of one item's list) only along the
        # contiguous axis; fancy indexing may leave another axis innermost
        vals = np.ascontiguousarray(np.where(second, 1.0 - vals, vals))
        out[:, js] = vals.mean(axis=-1)
    bounds = np.cumsum([0] + [len(items) for items in comps])
    return [out[:, a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _rhos(g: Float[np.ndarray, "c m"], w: Float[np.ndarray, "k c m"]
          ) -> Float[np.ndarray, "k c"]:
    """Spearman rho of gold ``g`` and win rates ``w`` per context (NaN where ``w`` is
    constant), as ``np.corrcoef(rankdata(g), rankdata(w))[0, 1]`` rounds it."""
    m = g.shape[-1]
    rg = rankdata(g, axis=-1)
    rw = rankdata(w, axis=-1)
    xg = rg - rg.mean(axis=-1, keepdims=True)            # exact: ranks are halves
    xw = rw - rw.mean(axis=-1, keepdims=True)
    inv = np.true_divide(1, m - 1)
    cross = (xg * xw).sum(axis=-1) * inv
    sd_g = np.sqrt((xg * xg).sum(axis=-1) * inv)
    sd_w = np.sqrt((xw * xw).sum(axis=-1) * inv)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.clip(cross / sd_g / sd_w, -1, 1)
    return np.where(np.ptp(w, axis=-1) == 0, np.nan, rho)


def context_rhos(pairs: Sequence[tuple[Hashable, Hashable, Hashable]],
                 p: Float[np.ndarray, "n k"], gold: Mapping[Hashable, float]
                 ) -> list[tuple[list[Hashable], Float[np.ndarray, " c"]]]:
    """Per column of ``p``: the contexts that have a rank correlation and their Spearman rho
    of win rate vs gold score (contexts with fewer than two items, constant gold scores or
    constant win rates are left out).

    Array operations over contexts of equal size, equal to :func:`spearman`'s per context bit
    for bit (``tests/test_sweep_scores_batch.py``): each win rate is a mean along a contiguous
    row (numpy's pairwise sum, as the mean of a list), ranks are exact halves, so their centred
    sums of products are exact, and ``np.corrcoef``'s one rounding step (the scaling by
    ``1 / (m - 1)`` and the two square roots) is repeated in its order."""
    ctxs, comps, golds = _layout(pairs, gold)
    rho = np.full((p.shape[1], len(ctxs)), np.nan)
    rates = _win_rates(comps, np.asarray(p, dtype=np.float64)) if ctxs else []
    by_size: dict[int, list[int]] = {}
    for c, g in enumerate(golds):
        by_size.setdefault(len(g), []).append(c)
    for _, cs in by_size.items():
        rho[:, cs] = _rhos(np.stack([golds[c] for c in cs]),
                           np.stack([rates[c] for c in cs], axis=1))
    keeps = [np.flatnonzero(np.isfinite(row)) for row in rho]
    return [([ctxs[c] for c in keep], rho[j, keep]) for j, keep in enumerate(keeps)]
