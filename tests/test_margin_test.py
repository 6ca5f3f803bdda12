"""Each decision rule's false-verdict rate at its boundary, by simulation (few groups, many
ties): a "beats" claim whose true difference is exactly δ must not be called "fails", one whose
true difference is exactly 0 must not be called "holds", and an equivalence whose true
difference is exactly ±δ must not hold, more often than 1.2x the nominal 5%."""

from __future__ import annotations

import numpy as np
import pytest

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.sign_flip import MIN_INFORMATIVE, betting_p, margin_test
from ppairs_lens.evaluation.verdicts import (
    ALPHA,
    BEATS_LESS,
    FAILS,
    HOLDS,
    ClaimTest,
    Difference,
    claim_test,
    decide_family,
)

DELTA = 0.05
LIMIT = 1.2 * ALPHA


def _groups(rng, k: int, ties: float, per_group: int, mean: float) -> np.ndarray:
    """``k`` group differences, each the mean of ``per_group`` pair differences in {-1, 0, 1}
    with P(0) = ``ties`` and expectation ``mean``."""
    up, down = (1 - ties + mean) / 2, (1 - ties - mean) / 2
    x = rng.choice([1.0, 0.0, -1.0], p=[up, ties, down], size=(k, per_group))
    return x.mean(axis=1)


def _rate(kind: str, mean: float, k: int, ties: float, per_group: int, outcome,
          reps: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        d = _groups(rng, k, ties, per_group, mean)
        t = claim_test(Difference(float(d.mean()), n_groups=k, n_pairs=k * per_group,
                                  group_diffs=tuple(d)), kind, DELTA)
        v = decide_family([t])[0] if isinstance(t, ClaimTest) else t
        hits += v.outcome in outcome
    return hits / reps


# the cells where the old sign-flip test at δ went wrong (85% ties), and around them
CELLS = [(k, ties, per) for k in (8, 20, 40) for ties in (0.5, 0.85, 0.95) for per in (1, 3)]


@pytest.mark.parametrize("k,ties,per_group", CELLS)
def test_a_beats_claim_at_exactly_delta_fails_at_most_at_the_nominal_rate(k, ties, per_group):
    """The "fails" side of a "beats" claim is the margin test at δ, its p doubled (two-sided
    5%): simulated on the test itself, many draws."""
    rng = np.random.default_rng(k * 100 + per_group)
    p = np.array([margin_test(_groups(rng, k, ties, per_group, DELTA), shift=DELTA,
                              alternative="less", bound=1.0).p for _ in range(2000)])
    assert np.mean(np.minimum(1.0, 2 * p) < ALPHA) <= LIMIT
    assert np.mean(p < ALPHA) <= LIMIT          # even undoubled, one-sided at 5%


def test_the_whole_rule_at_exactly_delta_rarely_fails():
    """The same through claim_test and Holm, where the sign-flip test's old route failed
    17.7% of the time (85% ties)."""
    assert _rate("beats", DELTA, 20, 0.85, 1, (FAILS,), reps=300, seed=1) <= LIMIT


@pytest.mark.parametrize("k,ties,per_group", [(8, 0.5, 1), (16, 0.85, 3), (40, 0.5, 1)])
def test_a_beats_claim_at_exactly_zero_holds_at_most_at_the_nominal_rate(k, ties, per_group):
    rate = _rate("beats", 0.0, k, ties, per_group, (HOLDS, BEATS_LESS), reps=300, seed=7 + k)
    assert rate <= LIMIT, rate


@pytest.mark.parametrize("k,ties", [(20, 0.5), (40, 0.85), (80, 0.5)])
def test_an_equivalence_at_the_margin_holds_at_most_at_the_nominal_rate(k, ties):
    rate = _rate("unchanged", DELTA, k, ties, 1, (HOLDS,), reps=300, seed=11 + k)
    assert rate <= LIMIT, rate


def test_the_t_route_at_the_boundary_with_many_untied_groups_keeps_its_size():
    """Where the t-test is used (20+ untied groups), its rate at δ over many draws."""
    rng = np.random.default_rng(3)
    p = [margin_test(_groups(rng, 40, 0.3, 1, DELTA), shift=DELTA, alternative="less",
                     bound=1.0).p for _ in range(2000)]
    assert np.mean(np.asarray(p) < ALPHA) <= LIMIT


def test_the_rules_can_decide_both_ways():
    """Power: a clear win holds, a clear loss fails, a small win is beats by less than δ."""
    rng = np.random.default_rng(5)
    def verdict(mean, ties=0.3, k=60):
        d = _groups(rng, k, ties, 3, mean)
        return decide_family([claim_test(Difference(float(d.mean()), n_groups=k,
                                                    group_diffs=tuple(d)), "beats", DELTA)])[0]
    assert verdict(0.4).outcome == HOLDS
    assert verdict(-0.3).outcome == FAILS
    small = np.full(400, 0.02) + rng.normal(0, 0.02, 400)
    v = decide_family([claim_test(Difference(float(small.mean()), n_groups=400,
                                             group_diffs=tuple(small)), "beats", DELTA)])[0]
    assert v.outcome == BEATS_LESS


def test_all_ties_decide_nothing_at_the_margin():
    """Every group tied: the t-test is undefined and the betting test gains nothing."""
    m = margin_test([0.0] * 12, shift=DELTA, alternative="less", bound=1.0)
    assert m.p > 0.5 and "betting" in m.method


def test_betting_refuses_a_difference_outside_its_bound():
    with pytest.raises(ProbeError, match="outside the bound"):
        betting_p([0.5, 1.5], 0.05, "less", bound=1.0)


def test_the_t_route_needs_enough_untied_groups():
    d = [0.1] * (MIN_INFORMATIVE - 1) + [0.0] * 30
    assert "betting" in margin_test(d, shift=DELTA, alternative="less", bound=1.0).method
    d = [0.1, -0.1] * MIN_INFORMATIVE
    assert "t-test" in margin_test(d, shift=DELTA, alternative="less", bound=1.0).method
