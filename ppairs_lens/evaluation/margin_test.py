"""A one-sided test of the mean of group differences at a margin (``shift = ±δ``), valid with few
groups and many ties.

The sign-flip test (:mod:`~ppairs_lens.evaluation.sign_flip`) assumes the differences are
symmetric about the value tested. At ``shift = 0`` that is the paired design's own null (the
two methods are exchangeable within a group); at ``shift = δ`` it is not: with many tied
groups (difference 0) every tie lies below δ and counts as evidence against it, so a claim
whose true effect is exactly δ is called "fails" far more often than the nominal level.

Here, at a margin:

* with at least :data:`MIN_INFORMATIVE` groups whose difference is not 0, Student's one-sample
  t-test (``scipy.stats.ttest_1samp``, ``k - 1`` degrees of freedom) on the group differences;
* otherwise a betting test that is valid for *any* distribution of differences within
  ``[-bound, bound]`` whose mean lies at the margin: the wealth of constant bets
  ``prod_g (1 + lam * y_g)`` (``y_g`` the difference's distance from the margin, in the
  alternative's direction) is a nonnegative e-value with expectation at most 1 under the null
  for each ``lam`` that keeps every factor positive; the average over a fixed grid of ``lam``
  is one too, and ``p = min(1, 1 / wealth)`` (Markov's inequality). It is conservative: its
  price is power, not size.

``tests/test_margin_test.py`` simulates both routes at the boundary (true mean exactly δ, few
groups, 50-95% ties) and keeps the rate of false rejections within 1.2x the nominal level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import ttest_1samp

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.sign_flip import group_differences_checked

__all__ = ["BET_GRID", "MIN_INFORMATIVE", "MarginTest", "betting_p", "margin_test"]

#: Groups with a nonzero difference from which the t-test's size holds at the boundary (the
#: simulation in ``tests/test_margin_test.py``; below it, ties make the t-test too liberal).
MIN_INFORMATIVE = 20
#: Constant bets averaged by the betting test: ``lam = c * j / BET_GRID`` of the largest bet
#: that keeps every factor positive, ``j = 1..BET_GRID``.
BET_GRID = 16
_BET_CAP = 0.95


@dataclass(frozen=True)
class MarginTest:
    """One one-sided test at a margin: ``p``, the smallest p this many groups could give, and
    the method's name."""

    p: float
    smallest_p: float
    method: str
    route: str          # "t-test" or "betting test"


def _distance(d: np.ndarray, shift: float, alternative: str) -> np.ndarray:
    return (d - shift) if alternative == "greater" else (shift - d)


def betting_p(diffs: Sequence[float], shift: float, alternative: str, bound: float) -> float:
    """The betting test's p (module doc) of ``mean > shift`` (``"greater"``) or ``mean < shift``
    (``"less"``) for differences known to lie in ``[-bound, bound]``."""
    d = np.asarray(diffs, dtype=float)
    if np.any(np.abs(d) > bound * (1 + 1e-9)):
        raise ProbeError(f"a group difference of {np.abs(d).max():.3g} lies outside the "
                         f"bound ±{bound:g} the betting test is valid for")
    y = _distance(d, shift, alternative)
    worst = bound + shift if alternative == "greater" else bound - shift  # -min(y) at a bound
    if worst <= 0:
        raise ProbeError(f"shift {shift:g} lies outside the bound ±{bound:g}")
    lam = _BET_CAP / worst * np.arange(1, BET_GRID + 1) / BET_GRID
    log_wealth = np.log1p(np.outer(lam, y)).sum(axis=1)
    top = float(log_wealth.max())      # p = 1 / mean wealth, in logs: no overflow however many
    log_mean = top + math.log(float(np.mean(np.exp(log_wealth - top))))     # groups bet
    return float(math.exp(-log_mean)) if log_mean > 0 else 1.0


def margin_test(diffs: Sequence[float], *, shift: float, alternative: str,
                bound: float) -> MarginTest:
    """One-sided test of the mean of ``diffs`` (one per group, each in ``[-bound, bound]``)
    against ``shift`` (module doc). NaN differences are dropped; fewer than 2 refused."""
    d = group_differences_checked(diffs, alternative, "a test at the margin")
    k, informative = len(d), int(np.sum(d != 0))
    if informative >= MIN_INFORMATIVE and float(np.std(d)) > 0:
        p = float(ttest_1samp(d, shift, alternative=alternative).pvalue)
        return MarginTest(p, 0.0, f"t-test on {k} group differences ({informative} untied)",
                          "t-test")
    # the most extreme data this many groups could show, for "could any result decide it?"
    extreme = np.full(k, bound if alternative == "greater" else -bound)
    return MarginTest(betting_p(d, shift, alternative, bound),
                      betting_p(extreme, shift, alternative, bound),
                      f"betting test on {k} group differences ({informative} untied, fewer "
                      f"than {MIN_INFORMATIVE} for a t-test)", "betting test")
