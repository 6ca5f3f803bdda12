"""How many groups would decide an effect: a normal approximation from the group-level SD.

For a claim decided by a one-sided test at ``alpha`` on the mean of ``k`` group-level
differences with standard deviation ``sd``, the groups needed for ``power`` to detect a true
mean ``effect`` away from the boundary are ``((z_{1-alpha} + z_{power}) sd / effect)^2``
(a simple normal approximation; it ignores the t correction at small ``k``). The group-level
SD is the one observed in this run: the SD of the group differences where they were recorded,
else read back from the width of the 95% bootstrap interval (``sd = sqrt(k) (hi - lo) /
3.92``).
"""

from __future__ import annotations

import math

from scipy.stats import norm

__all__ = ["POWER", "groups_needed", "sd_from_interval"]

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
