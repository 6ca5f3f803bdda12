"""Choosing a read-out without looking at the test set.

A sweep scores 30-odd layers; the maximum of 30 noisy test scores is biased upwards (the
maximum of a chance-level curve looks like signal). So the layer is chosen on a *validation*
split of the training data, split the same leak-free way as train/test (whole groups on one
side), by a probe fitted on the rest of train; the number reported is the test score at that
layer. :func:`select_layer` is the rule, :func:`validation_scores` computes what it reads.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.store_split import validation_split
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["select_layer", "validation_indices", "validation_scores", "VAL_SIZE"]

#: Share of the training groups held out to choose the layer.
VAL_SIZE: float = 0.25


def select_layer(val_scores: Float[np.ndarray, " layer"] | Sequence[float]) -> int:
    """Position of the best validation score (the first on ties; NaN layers skipped)."""
    v = np.asarray(val_scores, dtype=np.float64)
    if v.ndim != 1 or not len(v):
        raise ProbeError(f"val_scores must be a non-empty vector, got shape {v.shape}")
    if np.isnan(v).all():
        raise ProbeError("every layer's validation score is NaN: no layer can be chosen")
    return int(np.nanargmax(v))                   # nanargmax returns the first maximum


def validation_indices(groups: Sequence[Hashable], item_ids: Sequence[tuple] | None, *,
                       val_size: float = VAL_SIZE, seed: int = 0, by: str = "auto"
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``(fit, val)`` positions within the training pairs, no group (or item) on both sides:
    :func:`ppairs_lens.evaluation.store_split.validation_split` (pass the test split's
    ``split_used`` as ``by``)."""
    fit, val = validation_split(list(groups), item_ids, val_size=val_size, seed=seed, by=by)
    return np.asarray(fit, dtype=np.int64), np.asarray(val, dtype=np.int64)


def validation_scores(acts_train: Float[Tensor, "n 2 layer d"], labels_train: Any,
                      groups: Sequence[Hashable], item_ids: Sequence[tuple] | None = None, *,
                      kinds: Sequence[str] = PROBE_KINDS, val_size: float = VAL_SIZE,
                      seed: int = 0, by: str = "auto", repeats: int = 1,
                      **fit_kw: Any) -> dict[str, np.ndarray]:
    """``{kind: [layer]}`` validation accuracy of probes fitted on the fit part of train.

    ``groups`` (one per training pair) and ``item_ids`` keep the validation split leak-free
    (``by``: the test split's mode, ``StoreSplit.split_used``); ``repeats`` > 1 averages over
    that many validation splits (seeds ``seed``, ``seed + 1``, ...), weighting each by its
    validation pairs: a split by item leaves few validation pairs, and one small split ties
    and jitters. ``fit_kw`` go to :func:`ppairs_lens.probes.sweep.fit_sweep` (``C``,
    ``standardize``...). Degenerate layers score NaN (never chosen).
    """
    if repeats < 1:
        raise ProbeError(f"repeats must be at least 1, got {repeats}")
    y = np.asarray(labels_train)
    total: dict[str, np.ndarray] = {}
    n_val = 0
    problems = []
    for r in range(repeats):
        try:
            fit, val = validation_indices(groups, item_ids, val_size=val_size, seed=seed + r,
                                          by=by)
        except ProbeError as e:
            problems.append(str(e))
            continue
        bad = [part for part, idx in (("fit", fit), ("validation", val))
               if len(np.unique(y[idx])) < 2]
        if bad:                      # a small split by item can leave one class: skip it
            problems.append(f"the {bad[0]} part holds pairs of one class only")
            continue
        g_fit = [groups[i] for i in fit]
        probes = fit_sweep(acts_train[fit], y[fit], kinds, groups=g_fit, seed=seed, **fit_kw)
        for kind, acc in probes.score(acts_train[val], y[val]).items():
            total[kind] = total.get(kind, 0.0) + acc * len(val)
        n_val += len(val)
    if not n_val:
        raise ProbeError(f"no usable validation split of {len(y)} training pairs in {repeats} "
                         f"tries ({problems[-1]}): too few training groups to choose a layer "
                         f"on validation; use more data")
    return {kind: v / n_val for kind, v in total.items()}
