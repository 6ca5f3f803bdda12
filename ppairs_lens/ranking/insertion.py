"""Scoring an item on an ordered label scale by binary-search insertion (PPAIRS_INSERT).

Where :mod:`ppairs_lens.ranking.merge_sort` ranks a set of items against each other, insertion
places one new item on a fixed, labelled reference scale (e.g. ClimateX confidence ``low <
medium < high < very high``) with ``O(k log(#labels))`` comparisons, and :func:`slope_bias`
measures how such predicted levels spread against the true ones. The comparator is any
``compare(a, b) -> P(a preferred over b)``; the reference subsets are drawn from a seeded
``random.Random``, so results are reproducible. A comparator that evaluates pairs in batches
may offer ``compare.prefetch(pairs)``: each step announces its ``k`` pairs there before asking
them one by one, so they run together (the same numbers; a comparator without it is asked one
pair at a time).
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar, overload

import numpy as np

from ppairs_lens.evaluation.level_agreement import slope_bias  # re-exported: the one definition
from ppairs_lens.ranking.merge_sort import Comparator

__all__ = ["InsertionStep", "InsertionTrace", "insertion_score", "slope_bias"]

L = TypeVar("L", bound=Hashable)


@dataclass(frozen=True)
class InsertionStep:
    """One binary-search step: the label compared against, how, and which way the search went."""

    label: Hashable
    refs: tuple[Hashable, ...]
    mean_p: float
    went_up: bool


@dataclass(frozen=True)
class InsertionTrace:
    """What :func:`insertion_score` did: its steps and how many comparisons they took."""

    steps: tuple[InsertionStep, ...] = field(default_factory=tuple)

    @property
    def n_comparisons(self) -> int:
        return sum(len(s.refs) for s in self.steps)

    @property
    def path(self) -> tuple[Hashable, ...]:
        """The labels compared against, in order."""
        return tuple(s.label for s in self.steps)


@overload
def insertion_score(item: Hashable, labels_ordered: Sequence[L],
                    references: Mapping[L, Sequence[Hashable]], compare: Comparator, k: int = ...,
                    seed: int = ..., return_trace: Literal[False] = ...) -> L: ...


@overload
def insertion_score(item: Hashable, labels_ordered: Sequence[L],
                    references: Mapping[L, Sequence[Hashable]], compare: Comparator, k: int = ...,
                    seed: int = ..., *,
                    return_trace: Literal[True]) -> tuple[L, InsertionTrace]: ...


def insertion_score(item: Hashable, labels_ordered: Sequence[L],
                    references: Mapping[L, Sequence[Hashable]], compare: Comparator, k: int = 5,
                    seed: int = 0,
                    return_trace: bool = False) -> L | tuple[L, InsertionTrace]:
    """Give ``item`` a label by binary search over ordered labels (PPAIRS_INSERT, Appendix D):
    ``O(k log(#labels))`` comparisons instead of re-ranking everything.

    ``labels_ordered`` runs from lowest to highest. Each step takes the middle label of the
    remaining range ``[lo, hi]`` (``mid = (lo + hi) // 2``), compares ``item`` with a random
    subset of ``k`` of that label's references (all of them if there are fewer than ``k``), and
    if the mean of ``compare(item, ref)`` is ``> 0.5`` continues above ``mid``, else at or below
    it; it ends when one label is left. So an item exactly as preferred as the middle label's
    references (mean 0.5) stays at that label. References equal to ``item`` are skipped (for
    leave-one-out scoring of labelled items). The subsets are drawn from ``random.Random(seed)``.

    Returns the label, or ``(label, InsertionTrace)`` when ``return_trace=True``.
    """
    labels = list(labels_ordered)
    if not labels:
        raise ValueError("labels_ordered is empty")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    rng = random.Random(seed)
    steps: list[InsertionStep] = []
    lo, hi = 0, len(labels) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        label = labels[mid]
        pool = [r for r in references.get(label, ()) if r != item]
        if not pool:
            raise ValueError(f"no reference items for label {label!r} (other than the item)")
        refs = pool if len(pool) <= k else rng.sample(pool, k)
        prefetch = getattr(compare, "prefetch", None)
        if prefetch is not None:  # the step's pairs in one batch (the item's prompt part once)
            prefetch([(item, r) for r in refs])
        mean_p = float(np.mean([float(compare(item, r)) for r in refs]))
        went_up = mean_p > 0.5
        steps.append(InsertionStep(label, tuple(refs), mean_p, went_up))
        if went_up:
            lo = mid + 1
        else:
            hi = mid
    result = labels[lo]
    return (result, InsertionTrace(tuple(steps))) if return_trace else result
