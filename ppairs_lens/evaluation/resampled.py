"""Accuracy, macro F1 and AUROC on every bootstrap resample at once.

Each metric here is a count weighted by the records' multiplicities, so all resamples are one
matrix product instead of a Python loop of metric calls; values equal the metrics of
:mod:`ppairs_lens.evaluation.metrics` on the resampled records.

Two forms, one formula each: ``weighted_*`` take a dense weights matrix ``[b, n]`` and one
prediction ``[n]``; ``resampled_*`` take :class:`~ppairs_lens.evaluation.bootstrap.Resamples`
and many predictions ``[n, k]`` (a sweep's every layer and kind), and go through the groups'
sums (``[b, g] @ [g, k]``) instead of the ``[b, n]`` matrix. Every sum either form takes is
of counts (integers and halves), which floating point adds exactly in any order, so the two
forms give the same numbers bit for bit (``tests/test_sweep_scores_batch.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from jaxtyping import Float

from ppairs_lens.evaluation.bootstrap import Resamples

__all__ = ["weighted_accuracy", "weighted_auroc", "weighted_f1", "WEIGHTED",
           "resampled_accuracy", "resampled_auroc", "resampled_f1", "RESAMPLED",
           "AUROC_GROUP_FACTOR"]

#: Weighted sums: ``x [n, *k]`` -> ``[b, *k]``.
WSum = Callable[[np.ndarray], np.ndarray]
#: The AUROC goes through the ``[g, g]`` matrix of group-pair counts while ``g * g`` is at
#: most this many times the records (past it, e.g. one group per pair, through the weights).
AUROC_GROUP_FACTOR: int = 64


def _targets_like(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``y == 1`` shaped to broadcast against ``p`` (``[n]`` or ``[n, k]``)."""
    pos = np.asarray(y) == 1
    return pos[:, None] if p.ndim == 2 else pos


def _per_column(v: np.ndarray, p: np.ndarray) -> np.ndarray:
    """A ``[b]`` sum shaped to broadcast against the ``[b, *k]`` sums of ``p``'s columns."""
    return v[:, None] if p.ndim == 2 else v


def _accuracy(wsum: WSum, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    hit = np.where(p == 0.5, 0.5, (p > 0.5) == _targets_like(y, p)).astype(float)  # 0.5: no answer
    return wsum(hit) / _per_column(wsum(np.ones(len(p))), p)


def _f1(wsum: WSum, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Macro F1 (both classes; a class neither true nor predicted is left out)."""
    y1 = np.asarray(y) == 1
    f1s, used = [], []
    for pos, pred in ((y1, p >= 0.5), (~y1, p < 0.5)):
        tp = wsum((_targets_like(pos, p) & pred).astype(float))
        denom = _per_column(wsum(pos.astype(float)), p) + wsum(pred.astype(float))
        used.append(denom > 0)
        f1s.append(np.where(denom > 0, 2.0 * tp / np.where(denom > 0, denom, 1.0), 0.0))
    n_used = used[0].astype(int) + used[1].astype(int)
    total = f1s[0] * used[0] + f1s[1] * used[1]
    return np.where(n_used > 0, total / np.maximum(n_used, 1), 0.0)


def _auroc(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def weighted_accuracy(w: np.ndarray, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return _accuracy(lambda x: w @ x, y, p)


def weighted_f1(w: np.ndarray, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return _f1(lambda x: w @ x, y, p)


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
    return _auroc(num, den)


def resampled_accuracy(r: Resamples, y: np.ndarray, p: Float[np.ndarray, "n k"]
                       ) -> Float[np.ndarray, "b k"]:
    """:func:`weighted_accuracy` of every column of ``p`` on every resample of ``r``."""
    return _accuracy(r.sums, y, p)


def resampled_f1(r: Resamples, y: np.ndarray, p: Float[np.ndarray, "n k"]
                 ) -> Float[np.ndarray, "b k"]:
    """:func:`weighted_f1` of every column of ``p`` on every resample of ``r``."""
    return _f1(r.sums, y, p)


def _group_pairs(codes: np.ndarray, n_groups: int, is_pos: np.ndarray, s: np.ndarray
                 ) -> np.ndarray:
    """``M[g, h]``: over the positives of group ``g`` and the negatives of group ``h``, how
    many pairs the positive scores above (ties half): a resample's Mann-Whitney count is
    ``c @ M @ c`` for its group multiplicities ``c``."""
    _, vid = np.unique(s, return_inverse=True)          # each record's rank among values
    n_val = int(vid.max()) + 1
    neg = np.bincount(vid[~is_pos] * n_groups + codes[~is_pos], minlength=n_val * n_groups)
    neg = neg.reshape(n_val, n_groups).astype(float)   # [value, group] negatives
    beaten = np.cumsum(neg, axis=0) - 0.5 * neg         # below each value, ties half
    # each positive adds its value's row to its group's: summed by group, no matrix product
    order = np.argsort(codes[is_pos], kind="stable")
    g = codes[is_pos][order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    m = np.zeros((n_groups, n_groups))
    if len(g):
        m[g[starts]] = np.add.reduceat(beaten[vid[is_pos][order]], starts, axis=0)
    return m


def resampled_auroc(r: Resamples, y: np.ndarray, p: Float[np.ndarray, "n k"]
                    ) -> Float[np.ndarray, "b k"]:
    """:func:`weighted_auroc` of every column of ``p``: through the groups' pair counts
    (``c M c``) where groups are few, else through the weights."""
    is_pos = np.asarray(y) == 1
    k = p.shape[1]
    out = np.empty((r.counts.shape[0], k))
    if r.n_groups * r.n_groups > AUROC_GROUP_FACTOR * r.n:
        w = r.weights()
        for j in range(k):
            out[:, j] = weighted_auroc(w, y, p[:, j])
        return out
    c, n_g = r.counts, r.n_groups
    n_pos = np.bincount(r.codes[is_pos], minlength=n_g).astype(float)
    n_neg = np.bincount(r.codes[~is_pos], minlength=n_g).astype(float)
    den = (c @ n_pos) * (c @ n_neg)
    step = max(1, 4096 // n_g)                          # columns per matrix product
    for j0 in range(0, k, step):
        js = range(j0, min(j0 + step, k))
        m = np.concatenate([_group_pairs(r.codes, n_g, is_pos, p[:, j]) for j in js], axis=1)
        cm = (c @ m).reshape(len(c), len(js), n_g)     # [b, column, group]
        out[:, j0:j0 + len(js)] = _auroc((cm * c[:, None, :]).sum(axis=2), den[:, None])
    return out


#: The weighted and the batched form of each metric of ``metrics.METRICS``.
WEIGHTED = {"accuracy": weighted_accuracy, "f1": weighted_f1, "auroc": weighted_auroc}
RESAMPLED = {"accuracy": resampled_accuracy, "f1": resampled_f1, "auroc": resampled_auroc}
