"""Scoring an item on an ordered label scale by binary-search insertion (PPAIRS_INSERT).

Insertion places one new item on a fixed, labelled reference scale (e.g. ClimateX confidence
``low < medium < high < very high``) with ``O(k log(#labels))`` comparisons; :func:`slope_bias`
measures how such predicted levels spread against the true ones. A batching comparator may
offer ``compare.prefetch(pairs)``: each step announces its ``k`` pairs there before asking them
one by one, so they run together (the same numbers).
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
    """Give ``item`` a label by binary search over ordered labels (PPAIRS_INSERT, Appendix D).

    ``labels_ordered`` runs from lowest to highest. Each step compares ``item`` with a seeded
    subset of ``k`` references of the middle label ``(lo + hi) // 2`` (all of them if there are
    fewer than ``k``) and goes above it if the mean ``compare(item, ref)`` is ``> 0.5``, else
    stays at or below it, so an item as preferred as the middle label's references stays there.
    References equal to ``item`` are skipped (leave-one-out scoring). ``return_trace=True`` also
    returns the :class:`InsertionTrace`.
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
        lo, hi = (mid + 1, hi) if went_up else (lo, mid)
    result = labels[lo]
    return (result, InsertionTrace(tuple(steps))) if return_trace else result
