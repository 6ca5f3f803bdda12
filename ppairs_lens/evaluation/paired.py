"""Paired comparison of two predictors on the same records: the difference of a metric, a - b.

Two predictors scored on the same pairs are correlated (easy pairs are easy for both), so
their difference has a much narrower interval than two separate CIs suggest, and overlapping
separate CIs say nothing about whether a beats b. Each resample of the groups scores both
predictors, so the interval is the one of the difference itself.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from jaxtyping import Float

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.metrics import METRICS, proba_vector, targets
from ppairs_lens.evaluation.bootstrap import ALPHA, N_BOOT, batch_intervals, draw_resamples
from ppairs_lens.evaluation.resampled import RESAMPLED

__all__ = ["chance_differences", "group_differences", "paired_difference",
           "paired_target_difference"]


def _value(fn, t: np.ndarray, p: np.ndarray) -> float:
    try:
        return float(fn(t, p))
    except ValueError:          # undefined on these records (AUROC with one class)
        return float("nan")


def paired_difference(y: Any, p_a: Float[np.ndarray, " n"] | Sequence[float],
                      p_b: Float[np.ndarray, " n"] | Sequence[float],
                      groups: Sequence[Hashable] | None, *, metric: str = "accuracy",
                      n_boot: int = N_BOOT, seed: int = 0, alpha: float = ALPHA) -> dict:
    """metric(a) - metric(b) on labels ``y`` (1 / 2, as in a store) with a percentile interval
    (``value``, ``lo``, ``hi``, ``n``, ``n_groups``, ``n_boot_used``, ``ci_counts``), ``a`` /
    ``b`` (the two values on all records) and ``group_diffs``. ``p_a`` / ``p_b``: P(item 1) of
    the two predictors on the same records; ``groups`` (None: records) are resampled jointly
    for both."""
    return paired_target_difference(targets(y), p_a, p_b, groups, metric=metric,
                                    n_boot=n_boot, seed=seed, alpha=alpha)


def paired_target_difference(t: Any, p_a: Float[np.ndarray, " n"] | Sequence[float],
                             p_b: Float[np.ndarray, " n"] | Sequence[float],
                             groups: Sequence[Hashable] | None, *, metric: str = "accuracy",
                             n_boot: int = N_BOOT, seed: int = 0, alpha: float = ALPHA
                             ) -> dict:
    """:func:`paired_difference` on 0/1 targets ``t`` (1 where item 1 is gold, as the
    metrics and the interventions read them)."""
    if metric not in METRICS:
        raise ProbeError(f"unknown metric {metric!r}; use one of {sorted(METRICS)}")
    t = np.asarray(t)
    a, b = proba_vector(p_a), proba_vector(p_b)
    if not len(t) == len(a) == len(b):
        raise ProbeError(f"{len(t)} labels but {len(a)} and {len(b)} probabilities")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ProbeError("probabilities are NaN/inf: score finite predictions only")
    if len(t) == 0:
        raise ProbeError("cannot bootstrap zero records")
    fn, rfn = METRICS[metric], RESAMPLED[metric]
    va, vb = _value(fn, t, a), _value(fn, t, b)
    both = np.stack([a, b], axis=1)
    # both predictors on one draw, through the groups' sums (the weighted metrics' numbers)
    ci = batch_intervals({"d": lambda r: np.diff(rfn(r, t, both)[:, ::-1], axis=1)},
                         draw_resamples(len(t), groups, n_boot, seed), {"d": [va - vb]},
                         alpha=alpha)[0]["d"]
    return {**ci, "a": va, "b": vb, "n": len(t), "metric": metric,
            "group_diffs": group_differences(fn, t, a, b, groups)}


def group_differences(fn, t: np.ndarray, a: np.ndarray, b: np.ndarray,
                      groups: Sequence[Hashable] | None) -> list[float]:
    """metric(a) - metric(b) inside each group (first-appearance order; NaN where undefined):
    what a sign-flip test reads when there are too few groups for a bootstrap interval."""
    keys = list(range(len(t))) if groups is None else list(groups)
    where: dict[Hashable, list[int]] = {}
    for i, g in enumerate(keys):
        where.setdefault(g, []).append(i)
    return [_value(fn, t[ix], a[ix]) - _value(fn, t[ix], b[ix])
            for ix in (np.array(v) for v in where.values())]


def chance_differences(y: Any, p: Float[np.ndarray, " n"] | Sequence[float],
                       groups: Sequence[Hashable] | None) -> dict:
    """``{"n_groups", "group_diffs"}``: accuracy minus chance (0.5) inside each group, in
    first-appearance order, so that rows scored on the same records line up group by group for
    a sign-flip test."""
    t, a = targets(y), proba_vector(p)
    d = group_differences(METRICS["accuracy"], t, a, np.full(len(a), 0.5), groups)
    return {"n_groups": len(d), "group_diffs": d}
