"""Accuracy, macro F1 and AUROC on every bootstrap resample at once.

A bootstrap resample (drawn by :mod:`ppairs_lens.evaluation.bootstrap`) is a vector
of multiplicities (how often each record was drawn); each metric here is a weighted count, so
all resamples are one matrix product instead of a Python loop of metric calls. Values equal
the metrics of :mod:`ppairs_lens.evaluation.metrics` on the resampled records.
"""

from __future__ import annotations

import numpy as np

__all__ = ["weighted_accuracy", "weighted_auroc", "weighted_f1", "WEIGHTED"]


def weighted_accuracy(w: np.ndarray, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    hit = np.where(p == 0.5, 0.5, (p > 0.5) == (y == 1)).astype(float)  # 0.5: no answer
    return w @ hit / w.sum(axis=1)


def weighted_f1(w: np.ndarray, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Macro F1 (both classes; a class neither true nor predicted is left out)."""
    f1s, used = [], []
    for pos, pred in ((y == 1, p >= 0.5), (y != 1, p < 0.5)):
        tp = w @ (pos & pred).astype(float)
        denom = w @ pos.astype(float) + w @ pred.astype(float)
        used.append(denom > 0)
        f1s.append(np.where(denom > 0, 2.0 * tp / np.where(denom > 0, denom, 1.0), 0.0))
    n_used = used[0].astype(int) + used[1].astype(int)
    total = f1s[0] * used[0] + f1s[1] * used[1]
    return np.where(n_used > 0, total / np.maximum(n_used, 1), 0.0)


def weighted_auroc(w: np.ndarray, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Mann-Whitney AUROC (ties count half); NaN for a resample with a single class."""
    order = np.argsort(p, kind="stable")
    ps, ws, is_pos = p[order], w[:, order], (y[order] == 1)
    starts = np.flatnonzero(np.r_[True, ps[1:] != ps[:-1]])    # first record of each value
    pos = np.add.reduceat(ws * is_pos, starts, axis=1)   # [b, value] weight of positives
    neg = np.add.reduceat(ws * ~is_pos, starts, axis=1)
    below = np.cumsum(neg, axis=1) - neg                 # negatives strictly below each value
    num = (pos * (below + 0.5 * neg)).sum(axis=1)
    den = pos.sum(axis=1) * neg.sum(axis=1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


#: The weighted form of each metric of :data:`ppairs_lens.evaluation.metrics.METRICS`.
WEIGHTED = {"accuracy": weighted_accuracy, "f1": weighted_f1, "auroc": weighted_auroc}
