"""Tests for ppairs_lens.ranking: PAIRS merge sort, beam search, insertion, slope and bias.

Synthetic comparators stand in for a probe: hidden scores give the truth, and noise is made
deterministic per pair with a seeded hash so every run sees the same comparisons.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppairs_lens.evaluation.metrics import spearman
from ppairs_lens.judges.calibration import swap_calibrated
from ppairs_lens.ranking.insertion import insertion_score, slope_bias
from ppairs_lens.ranking.merge_sort import (DEFAULT_BEAM_SIZE, DEFAULT_UNCERTAINTY,
                                            CountingComparator, beam_merge_sort, merge_sort)

Comparator = Callable[[Hashable, Hashable], float]


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _hidden_scores(n: int, seed: int) -> dict[int, float]:
    rng = random.Random(seed)
    return {i: rng.gauss(0.0, 1.0) for i in range(n)}


def _perfect(scores: dict[int, float]) -> Comparator:
    return lambda a, b: 1.0 if scores[a] > scores[b] else 0.0


def _pair_uniform(seed: int, a: int, b: int) -> float:
    """A uniform draw fixed per unordered pair (same for (a, b) and (b, a))."""
    lo, hi = min(a, b), max(a, b)
    return random.Random(f"{seed}:{lo}:{hi}").random()


def _right_with_prob(scores: dict[int, float], p: float, seed: int) -> Comparator:
    """Hard comparator that is right with probability p, consistently for both orders."""

    def compare(a: int, b: int) -> float:
        truth = scores[a] > scores[b]
        answer = truth if _pair_uniform(seed, a, b) < p else not truth
        return 1.0 if answer else 0.0

    return compare


def _thurstone(scores: dict[int, float], scale: float, noise: float, seed: int) -> Comparator:
    """Graded comparator sigmoid(scale * (s_a - s_b) + e_ab), e antisymmetric, fixed per pair."""

    def compare(a: int, b: int) -> float:
        lo, hi = min(a, b), max(a, b)
        e = random.Random(f"{seed}:{lo}:{hi}").gauss(0.0, noise)
        return _sigmoid(scale * (scores[a] - scores[b]) + (e if a == lo else -e))

    return compare


def _true_order(scores: dict[int, float]) -> list[int]:
    return sorted(scores, key=lambda k: -scores[k])


# ---------------------------------------------------------------------------------------------
# Greedy merge sort
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 16, 33, 100])
def test_merge_sort_perfect_comparator_exact_and_within_comparison_bound(n: int) -> None:
    scores = _hidden_scores(n, seed=n)
    counter = CountingComparator(_perfect(scores))
    order = merge_sort(list(scores), counter)
    assert order == _true_order(scores)
    bound = n * math.ceil(math.log2(n)) if n > 1 else 0
    assert counter.calls <= bound
    assert counter.unique_calls == counter.calls  # merge sort never asks the same pair twice


def test_merge_sort_ascending_is_reverse_and_input_untouched() -> None:
    scores = _hidden_scores(20, seed=3)
    items = list(scores)
    before = list(items)
    desc = merge_sort(items, _perfect(scores))
    asc = merge_sort(items, _perfect(scores), descending=False)
    assert asc == desc[::-1]
    assert items == before


def test_merge_sort_works_on_string_keys() -> None:
    scores = {"a": 3.0, "b": 1.0, "c": 2.0}
    assert merge_sort(list(scores), _perfect(scores)) == ["a", "c", "b"]  # type: ignore[arg-type]


def test_spearman_degrades_monotonically_with_comparator_accuracy() -> None:
    n, trials = 32, 60
    means = []
    for p in (1.0, 0.9, 0.75, 0.5):
        rhos = []
        for t in range(trials):
            scores = _hidden_scores(n, seed=1000 + t)
            order = merge_sort(list(scores), _right_with_prob(scores, p, seed=t))
            rhos.append(spearman(order, scores))
        means.append(float(np.mean(rhos)))
    assert means[0] == pytest.approx(1.0)
    assert means[0] > means[1] > means[2] > means[3]
    assert means[1] > 0.5 and means[2] > 0.2  # smooth, not a collapse at the first errors
    assert abs(means[3]) < 0.1  # coin-flip comparisons carry no information


# ---------------------------------------------------------------------------------------------
# Beam search
# ---------------------------------------------------------------------------------------------


def _random_table_comparator(seed: int) -> Comparator:
    """Arbitrary (possibly intransitive, position-biased) probabilities, with exact ties and 0/1."""

    def compare(a: int, b: int) -> float:
        rng = random.Random(f"{seed}:{a}:{b}")
        kind = rng.random()
        if kind < 0.15:
            return 0.5
        if kind < 0.25:
            return float(rng.random() < 0.5)
        return rng.random()

    return compare


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 24), seed=st.integers(0, 10**6),
       uncertainty=st.sampled_from([0.0, 0.05, DEFAULT_UNCERTAINTY, 0.3, 0.5]),
       descending=st.booleans())
def test_beam_size_one_equals_greedy(n: int, seed: int, uncertainty: float,
                                     descending: bool) -> None:
    compare = _random_table_comparator(seed)
    items = list(range(n))
    assert beam_merge_sort(items, compare, beam_size=1, uncertainty=uncertainty,
                           descending=descending) == merge_sort(items, compare,
                                                                descending=descending)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 24), seed=st.integers(0, 10**6), beam_size=st.integers(1, 30),
       uncertainty=st.sampled_from([0.0, DEFAULT_UNCERTAINTY, 0.5]))
def test_beam_returns_a_permutation_within_comparison_bound(n: int, seed: int, beam_size: int,
                                                            uncertainty: float) -> None:
    counter = CountingComparator(_random_table_comparator(seed))
    order = beam_merge_sort(list(range(n)), counter, beam_size=beam_size,
                            uncertainty=uncertainty)
    assert sorted(order) == list(range(n))
    log_n = math.ceil(math.log2(n)) if n > 1 else 0
    assert counter.unique_calls <= min(n * (n - 1) // 2, (beam_size + 1) * n * log_n)


@pytest.mark.parametrize("n", [1, 2, 7, 16, 33])
def test_beam_perfect_comparator_exact(n: int) -> None:
    scores = _hidden_scores(n, seed=7 * n)
    counter = CountingComparator(_perfect(scores))
    assert beam_merge_sort(list(scores), counter) == _true_order(scores)
    # A certain comparator never opens a second branch, so the beam costs what greedy costs.
    assert counter.unique_calls <= (n * math.ceil(math.log2(n)) if n > 1 else 0)


def test_beam_not_worse_than_greedy_with_noisy_comparator() -> None:
    n, trials = 24, 150
    greedy, beam, extra = [], [], []
    for t in range(trials):
        scores = _hidden_scores(n, seed=5000 + t)
        compare = _thurstone(scores, scale=3.0, noise=2.0, seed=t)
        g_count, b_count = CountingComparator(compare), CountingComparator(compare)
        greedy.append(spearman(merge_sort(list(scores), g_count), scores))
        beam.append(spearman(beam_merge_sort(list(scores), b_count), scores))
        extra.append(b_count.unique_calls / g_count.unique_calls)
    assert float(np.mean(beam)) >= float(np.mean(greedy))
    assert float(np.mean(extra)) < 2.0  # the beam spends comparisons only on uncertain merges


def test_beam_defaults_documented() -> None:
    assert DEFAULT_BEAM_SIZE == 100
    assert DEFAULT_UNCERTAINTY == pytest.approx(0.15)
    with pytest.raises(ValueError):
        beam_merge_sort([1, 2], lambda a, b: 0.5, beam_size=0)


def test_non_probability_from_comparator_is_refused() -> None:
    with pytest.raises(ValueError, match="probability"):
        merge_sort([1, 2], lambda a, b: float("nan"))
    with pytest.raises(ValueError, match="probability"):
        beam_merge_sort([1, 2], lambda a, b: 1.5)


# ---------------------------------------------------------------------------------------------
# Comparator helpers
# ---------------------------------------------------------------------------------------------


def test_counting_comparator_counts_requests_and_caches_ordered_pairs() -> None:
    ran: list[tuple[int, int]] = []

    def fn(a: int, b: int) -> float:
        ran.append((a, b))
        return 0.7

    c = CountingComparator(fn)
    assert c(1, 2) == c(1, 2) == 0.7
    c(2, 1)
    assert c.calls == 3
    assert c.unique_calls == 2
    assert ran == [(1, 2), (2, 1)]


def test_swap_calibration_removes_constant_position_bias() -> None:
    n, bias = 24, 2.5
    scores = {i: 0.3 * i for i in range(n)}  # neighbours differ by less than the bias

    def biased(a: int, b: int) -> float:
        return _sigmoid(scores[a] - scores[b] + bias)  # favours whichever item comes first

    calibrated = swap_calibrated(biased)
    assert biased(3, 3) > 0.9
    assert calibrated(3, 3) == pytest.approx(0.5)
    for a, b in [(0, 5), (7, 2), (10, 11)]:
        assert calibrated(a, b) + calibrated(b, a) == pytest.approx(1.0)
        assert (calibrated(a, b) > 0.5) == (scores[a] > scores[b])
    assert merge_sort(list(scores), calibrated) == _true_order(scores)
    assert spearman(merge_sort(list(scores), biased), scores) < 0.9


# ---------------------------------------------------------------------------------------------
# Insertion
# ---------------------------------------------------------------------------------------------

LABELS = ["low", "medium", "high", "very high"]


def _level_world(per_label: int) -> tuple[dict[str, list[str]], dict[str, int], Comparator]:
    """References named like 'high#3'; perfect comparator on levels (same level -> 0.5)."""
    refs = {lab: [f"{lab}#{i}" for i in range(per_label)] for lab in LABELS}
    level = {item: LABELS.index(lab) for lab, items in refs.items() for item in items}
    for lab in LABELS:
        level[f"new-{lab}"] = LABELS.index(lab)

    def compare(a: Hashable, b: Hashable) -> float:
        la, lb = level[a], level[b]  # type: ignore[index]
        return 1.0 if la > lb else 0.0 if la < lb else 0.5

    return refs, level, compare


@pytest.mark.parametrize("labels", [LABELS, LABELS[:3], LABELS[:1], LABELS[:2]])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_insertion_perfect_comparator_returns_true_label(labels: list[str], seed: int) -> None:
    refs, _, compare = _level_world(per_label=10)
    for lab in labels:
        got, trace = insertion_score(f"new-{lab}", labels, refs, compare, k=3, seed=seed,
                                     return_trace=True)
        assert got == lab
        steps = math.ceil(math.log2(len(labels))) if len(labels) > 1 else 0
        assert len(trace.steps) <= steps
        assert trace.n_comparisons <= 3 * steps
        assert all(len(s.refs) == 3 for s in trace.steps)
        assert insertion_score(f"new-{lab}", labels, refs, compare, k=3, seed=seed) == lab


def test_insertion_leave_one_out_on_labelled_items() -> None:
    refs, level, compare = _level_world(per_label=4)
    for lab, items in refs.items():
        for item in items:
            assert insertion_score(item, LABELS, refs, compare, k=2, seed=0) == lab


def test_insertion_uses_all_references_when_fewer_than_k_and_is_seeded() -> None:
    refs, _, compare = _level_world(per_label=2)
    _, trace = insertion_score("new-high", LABELS, refs, compare, k=5, return_trace=True)
    assert all(len(s.refs) == 2 for s in trace.steps)
    assert trace.path == ("medium", "high")

    big, _, compare = _level_world(per_label=50)
    picks = [insertion_score("new-low", LABELS, big, compare, k=5, seed=s,
                             return_trace=True)[1].steps[0].refs for s in (0, 0, 1)]
    assert picks[0] == picks[1] != picks[2]


def test_insertion_refuses_missing_references() -> None:
    refs, _, compare = _level_world(per_label=3)
    refs["medium"] = []
    with pytest.raises(ValueError, match="medium"):
        insertion_score("new-high", LABELS, refs, compare)


# ---------------------------------------------------------------------------------------------
# Slope and bias of insertion levels
# ---------------------------------------------------------------------------------------------


def test_slope_bias() -> None:
    true = [0, 1, 2, 3, 0, 2, 3, 1]
    assert slope_bias(true, true) == pytest.approx((1.0, 0.0))
    assert slope_bias([t + 1 for t in true], true) == pytest.approx((1.0, 1.0))
    slope, bias = slope_bias([2 * t for t in true], true)
    assert slope == pytest.approx(2.0) and bias == pytest.approx(float(np.mean(true)))
    assert math.isnan(slope_bias([1, 2], [1, 1])[0])


@pytest.mark.parametrize("p", [0.0, 0.1, 0.3, 1 / 3, 0.7, 0.9, 1.0])
def test_swap_calibration_is_exactly_half_when_both_orders_agree(p):
    """A judge that answers "first" (or "second") with the same probability in both orders
    has no preference: exactly 0.5, so a sort's ``> 0.5`` test never breaks the tie by
    rounding."""
    assert swap_calibrated(lambda a, b: p)("x", "y") == 0.5
