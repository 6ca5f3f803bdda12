"""How many groups would decide an effect: a normal approximation from the group-level SD.

For a claim decided by a one-sided test at ``alpha`` on the mean of ``k`` group-level
differences with standard deviation ``sd``, the groups needed for ``power`` to detect a true
mean ``effect`` away from the boundary are ``((z_{1-alpha} + z_{power}) sd / effect)^2``
(a simple normal approximation; it ignores the t correction at small ``k``). An equivalence
claim (TOST within ``±delta``) must pass *both* one-sided tests, each at ``alpha``: its power
at a true mean ``v`` is ``Phi((delta - v) / se - z) + Phi((delta + v) / se - z) - 1`` with
``se = sd / sqrt(k)`` and ``z = z_{1-alpha}`` (:func:`equivalence_groups_needed`); at ``v = 0``
that is ``((z_{1-alpha} + z_{1-(1-power)/2}) sd / delta)^2``, more than the single nearer
margin's ``((z_{1-alpha} + z_{power}) sd / (delta - |v|))^2`` suggests. The group-level
SD is the one observed in this run: the SD of the group differences where they were recorded,
else read back from the width of the 95% bootstrap interval (``sd = sqrt(k) (hi - lo) /
3.92``).
"""

from __future__ import annotations

import math

from scipy.stats import norm

__all__ = ["POWER", "equivalence_groups_needed", "groups_needed", "sd_from_interval"]

#: The power a size is chosen for.
POWER = 0.8


def sd_from_interval(lo: float, hi: float, n_groups: int, level: float = 0.95) -> float:
    """The group-level SD a ``level`` interval of a mean over ``n_groups`` groups implies."""
    z = float(norm.ppf(0.5 + level / 2))
    return math.sqrt(n_groups) * (hi - lo) / (2 * z)


def groups_needed(effect: float, sd: float, *, alpha: float = 0.025,
                  power: float = POWER) -> int | None:
    """Groups for a one-sided test at ``alpha`` to detect ``effect`` (> 0: the distance from
    the observed mean to the boundary it must clear) with ``power``; None when the effect is
    not in the direction the test looks (``effect <= 0``) or ``sd`` is unknown."""
    if not (math.isfinite(effect) and math.isfinite(sd)) or effect <= 0 or sd < 0:
        return None
    if sd == 0:
        return 2
    z = float(norm.ppf(1 - alpha) + norm.ppf(power))
    return max(2, math.ceil((z * sd / effect) ** 2))


def _tost_power(value: float, delta: float, sd: float, k: int, alpha: float) -> float:
    se, z = sd / math.sqrt(k), float(norm.ppf(1 - alpha))
    return max(0.0, float(norm.cdf((delta - value) / se - z) + norm.cdf((delta + value) / se - z)
                          - 1.0))


def equivalence_groups_needed(value: float, delta: float, sd: float, *, alpha: float = 0.05,
                              power: float = POWER, most: int = 10**8) -> int | None:
    """Fewest groups at which two one-sided tests, each at ``alpha``, show equivalence within
    ``±delta`` with ``power`` when the true mean is ``value`` (module doc); None when
    ``|value| >= delta`` (equivalence is false there), ``sd`` is unknown, or more than
    ``most`` groups would be needed."""
    if not (math.isfinite(value) and math.isfinite(sd) and delta and math.isfinite(delta)) \
            or abs(value) >= delta or sd < 0:
        return None
    if sd == 0:
        return 2
    hi = 2
    while _tost_power(value, delta, sd, hi, alpha) < power:
        hi *= 2
        if hi > most:
            return None
    lo = max(2, hi // 2)
    while lo < hi:                                  # power rises with k: bisect
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if _tost_power(value, delta, sd, mid, alpha) < power else (lo, mid)
    return lo
