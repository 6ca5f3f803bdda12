"""Tests of the mean of group-level differences that are valid with few groups.

A group bootstrap's percentile interval is too narrow with few groups (at 10 groups of 2-3
pairs a simulated 5% test rejects 7% of the time), so a claim resting on fewer than
:data:`~ppairs_lens.evaluation.bootstrap.MIN_BOOTSTRAP_GROUPS` groups is tested here instead.

*The sign-flip test*. Under the null "the difference is ``shift`` and symmetric about it",
each group's ``d_g - shift`` is as likely negative as positive, so the mean of the group
differences is compared with its value under every sign vector (all ``2^k`` up to
:data:`EXACT_MAX_GROUPS` groups, else :data:`N_MONTE_CARLO` seeded ones). The smallest p the
test can give at this size (all signs agreeing; groups of difference exactly ``shift`` do not
change sign, so they raise it) is reported with every p, so that a claim no data could pass
is said to be untestable at this size rather than inconclusive.

*The margin test* (``shift = ±δ``). The symmetry holds at ``shift = 0`` (the paired design's
own null: the two methods are exchangeable within a group) but not at ``shift = δ``: with
many tied groups (difference 0) every tie lies below δ and counts as evidence against it, so
a claim whose true effect is exactly δ is called "fails" far more often than the nominal
level. Here, at a margin:

* with at least :data:`MIN_INFORMATIVE` untied groups, Student's one-sample t-test;
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
from itertools import product

import numpy as np
from scipy.stats import ttest_1samp

from ppairs_lens.errors import ProbeError

__all__ = ["BET_GRID", "EXACT_MAX_GROUPS", "MIN_INFORMATIVE", "MarginTest", "N_MONTE_CARLO",
           "SignFlip", "betting_p", "group_differences_checked", "groups_for_p", "margin_test",
           "sign_flip_test"]

#: Up to this many groups every sign vector is enumerated (2^16 = 65 536 vectors).
EXACT_MAX_GROUPS = 16
#: Random sign vectors above that (seeded).
N_MONTE_CARLO = 20_000
#: Groups with a nonzero difference from which the t-test's size holds at the boundary (the
#: simulation in ``tests/test_margin_test.py``; below it, ties make the t-test too liberal).
MIN_INFORMATIVE = 20
#: Constant bets averaged by the betting test: ``lam = c * j / BET_GRID`` of the largest bet
#: that keeps every factor positive, ``j = 1..BET_GRID``.
BET_GRID = 16
_BET_CAP = 0.95


@dataclass(frozen=True)
class SignFlip:
    """One one-sided sign-flip test: ``p``, the smallest p reachable at this size, and how it
    was computed (exact or Monte Carlo)."""

    p: float
    smallest_p: float
    n_groups: int
    mean: float
    sd: float
    method: str


def _signs(k: int, n_mc: int, seed: int) -> tuple[np.ndarray, bool]:
    if k <= EXACT_MAX_GROUPS:
        return np.array(list(product((1.0, -1.0), repeat=k))), True
    return np.random.default_rng(seed).choice((1.0, -1.0), size=(n_mc, k)), False


def group_differences_checked(diffs: Sequence[float], alternative: str, test: str
                              ) -> np.ndarray:
    """The finite group differences a one-sided ``test`` reads (NaN: a group where the metric
    is undefined, dropped); fewer than 2 are refused."""
    if alternative not in ("greater", "less"):
        raise ProbeError(f"alternative must be 'greater' or 'less', got {alternative!r}")
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        raise ProbeError(f"{test} needs at least 2 groups, got {len(d)}")
    return d


def sign_flip_test(diffs: Sequence[float], *, shift: float = 0.0,
                   alternative: str = "greater", n_mc: int = N_MONTE_CARLO,
                   seed: int = 0) -> SignFlip:
    """One-sided sign-flip test of the mean of ``diffs`` (one per group) against ``shift``."""
    d = group_differences_checked(diffs, alternative, "a sign-flip test")
    k = len(d)
    x = (d - shift) * (1.0 if alternative == "greater" else -1.0)
    signs, exact = _signs(k, n_mc, seed)
    null = signs @ np.abs(x) / k               # each |x_g| with every sign: the null means
    obs = float(x.mean())
    tol = 1e-12 * max(1.0, float(np.abs(x).max()))
    top = float(np.abs(x).sum() / k)            # the most extreme mean reachable
    if exact:
        p = float(np.mean(null >= obs - tol))
        smallest = float(np.mean(null >= top - tol))
        how = f"exact over all 2^{k} sign vectors"
    else:
        n = len(null)
        p = float((1 + np.sum(null >= obs - tol)) / (1 + n))
        zeros = int(np.sum(np.abs(x) <= tol))
        smallest = max(1.0 / (n + 1), 2.0 ** (zeros - k))
        how = f"Monte Carlo over {n} seeded sign vectors"
    return SignFlip(p=p, smallest_p=smallest, n_groups=k, mean=float(d.mean()),
                    sd=float(d.std(ddof=1)), method=how)


def groups_for_p(alpha: float) -> int:
    """Fewest groups whose exact sign-flip test can reach ``p <= alpha`` (``2^-k <= alpha``)."""
    return int(np.ceil(np.log2(1.0 / alpha)))


@dataclass(frozen=True)
class MarginTest:
    """One one-sided test at a margin: ``p`` and the smallest p this many groups could give."""

    p: float
    smallest_p: float
    method: str
    route: str          # "t-test" or "betting test"


def betting_p(diffs: Sequence[float], shift: float, alternative: str, bound: float) -> float:
    """The betting test's p (module doc) for differences known to lie in ``[-bound, bound]``."""
    d = np.asarray(diffs, dtype=float)
    if np.any(np.abs(d) > bound * (1 + 1e-9)):
        raise ProbeError(f"a group difference of {np.abs(d).max():.3g} lies outside the "
                         f"bound ±{bound:g} the betting test is valid for")
    y = (d - shift) if alternative == "greater" else (shift - d)
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
    against the margin ``shift`` (module doc)."""
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
