"""The sign-flip permutation test on group-level differences: valid with few groups.

A group bootstrap's percentile interval is too narrow with few groups (at 10 groups of 2-3
pairs a simulated 5% test rejects 7% of the time), so a claim resting on fewer than
:data:`~ppairs_lens.evaluation.bootstrap.MIN_BOOTSTRAP_GROUPS` groups is tested here instead.
Under the null "the difference is ``shift`` and symmetric about it", each group's
``d_g - shift`` is as likely negative as positive, so the mean of the group differences is
compared with its value under every sign vector: exactly over all ``2^k`` when ``k`` is at
most :data:`EXACT_MAX_GROUPS`, else over :data:`N_MONTE_CARLO` seeded random sign vectors
(``p = (1 + #) / (1 + n)``). The smallest p the test can give at this size
(``smallest_p``: all groups' signs agreeing; groups of difference exactly ``shift`` do not
change sign, so they raise it) is reported with every p, so that a claim no data could pass is
said to be untestable at this size rather than inconclusive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from ppairs_lens.errors import ProbeError

__all__ = ["EXACT_MAX_GROUPS", "N_MONTE_CARLO", "SignFlip", "group_differences_checked",
           "groups_for_p", "sign_flip_test"]

#: Up to this many groups every sign vector is enumerated (2^16 = 65 536 vectors).
EXACT_MAX_GROUPS = 16
#: Random sign vectors above that (seeded).
N_MONTE_CARLO = 20_000


@dataclass(frozen=True)
class SignFlip:
    """One one-sided sign-flip test: ``p`` of the alternative ``mean > shift`` (``"greater"``)
    or ``mean < shift`` (``"less"``), the smallest p reachable at this size, and how it was
    computed (``"exact over 2^k sign vectors"`` or ``"Monte Carlo, n sign vectors"``)."""

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
    is undefined, dropped), refused in one line with fewer than 2 or another alternative."""
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
    """One-sided sign-flip test of the mean of ``diffs`` (one difference per group) against
    ``shift`` (module doc). NaN differences (a group where the metric is undefined) are
    dropped; fewer than 2 groups left is refused."""
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
    """Fewest groups whose exact sign-flip test can reach ``p <= alpha`` at all
    (``2^-k <= alpha``)."""
    return int(np.ceil(np.log2(1.0 / alpha)))
