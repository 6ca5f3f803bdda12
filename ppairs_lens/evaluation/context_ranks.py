"""Within-context rank correlations of many predictions at once (a sweep's every layer).

Within a context, each item's win rate is the mean probability of it winning over its
comparisons (``p`` as item 1, ``1 - p`` as item 2); its Spearman rho against the items' gold
scores says how well the predictions rank that context. :func:`context_rhos` computes it for
every context and every column of ``p [n, k]``: the layout (contexts, items, their
comparisons, the gold ranks) is built once, the win rates and ranks are array operations over
contexts of equal size.

The numbers are :func:`ppairs_lens.evaluation.metrics.spearman`'s ``spearman(gold,
win_rate)`` per context bit for bit (``tests/test_sweep_scores_batch.py``): each win rate is
a mean along a contiguous row (numpy's pairwise sum, as the mean of a list), ranks are exact
halves, so their centred sums of products are exact, and the one rounding step of
``np.corrcoef`` (the scaling by ``1 / (m - 1)`` and the two square roots) is repeated in its
order.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np
from jaxtyping import Float
from scipy.stats import rankdata

from ppairs_lens.errors import ProbeError

__all__ = ["context_rhos"]


def _layout(pairs: Sequence[tuple[Hashable, Hashable, Hashable]], gold: Mapping[Hashable, float]
            ) -> tuple[list[Hashable], list[list[list[int]]], list[np.ndarray]]:
    """Contexts with two or more items and varied gold scores (first-appearance order), each
    item's comparisons (pair index ``i`` as item 1, ``~i`` as item 2, in pair order), and the
    items' gold scores."""
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
    of win rate vs gold score (``pairs[i] = (context_id, item1_id, item2_id)``, ``p[i]`` =
    P(item 1 preferred)). Contexts with fewer than two items, constant gold scores or
    constant win rates are left out."""
    ctxs, comps, golds = _layout(pairs, gold)
    k = p.shape[1]
    rho = np.full((k, len(ctxs)), np.nan)
    rates = _win_rates(comps, np.asarray(p, dtype=np.float64)) if ctxs else []
    by_size: dict[int, list[int]] = {}
    for c, g in enumerate(golds):
        by_size.setdefault(len(g), []).append(c)
    for _, cs in by_size.items():
        rho[:, cs] = _rhos(np.stack([golds[c] for c in cs]),
                           np.stack([rates[c] for c in cs], axis=1))
    out = []
    for j in range(k):
        keep = np.flatnonzero(np.isfinite(rho[j]))
        out.append(([ctxs[c] for c in keep], rho[j, keep]))
    return out
