"""Verdicts of the ablation and steering experiments, by the rules of
:mod:`ppairs_lens.evaluation.verdicts`.

* :func:`judge_decides`: a precondition of every such claim: the unablated judge must decide.
* :func:`ablation_changes_verdict`: "removing (adding) the direction changes the judgement", a
  "changes" claim: Holm-corrected permutation p-values against null directions hold it; only
  equivalence fails it; not tested when even the smallest reachable p (``1 / (n_null + 1)``)
  cannot pass Holm's first threshold.

The registry's "unchanged" claim (paper Table 2) is the equivalence test of
:func:`ppairs_lens.evaluation.intervention_tests.equivalence_test`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ppairs_lens.evaluation.verdicts import (
    ALPHA,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTED,
    Verdict,
    beats_chance,
    no_skill,
    holm,
)

__all__ = ["ablation_changes_verdict", "judge_decides"]


def judge_decides(accuracy_lo: float | None, same_answer_share: float | None, *,
                  chance: float = 0.5, max_same: float = 0.95, n_groups: int | None = None
                  ) -> tuple[bool, str]:
    """``(decides, reason)``: the unablated judge's accuracy CI is above chance and it does not
    give one raw answer (the same position, or the same "True"/"False") on ``max_same`` of
    the records."""
    if same_answer_share is not None and np.isfinite(same_answer_share) \
            and same_answer_share >= max_same:
        return False, (f"the judge does not decide: it gives the same raw answer on "
                       f"{same_answer_share:.0%} of pairs")
    if not beats_chance(accuracy_lo, chance, n_groups=n_groups):
        return False, (f"the judge does not decide: its accuracy "
                       f"{no_skill(accuracy_lo, n_groups, chance).removeprefix('its ')}")
    return True, "the judge decides"


def ablation_changes_verdict(p_values: Sequence[float], n_null: int, alpha: float = ALPHA,
                             names: Sequence[str] | None = None,
                             equivalent: Sequence[bool] | None = None) -> Verdict:
    """"Removing (or adding) these directions changes the judgement", a "changes" claim:
    holds for the directions whose Holm-adjusted permutation p (over all ``p_values``, one
    family) is below ``alpha``; fails only when equivalence within the margin is shown for
    every direction (``equivalent``, e.g. by
    :func:`~ppairs_lens.evaluation.intervention_tests.equivalence_test`); non-significance alone is inconclusive; not tested
    when ``1 / (n_null + 1)`` cannot pass Holm's first threshold ``alpha / m``."""
    p = np.asarray(p_values, dtype=float)
    m = int(np.isfinite(p).sum())
    names = list(names or [str(i) for i in range(len(p))])
    rule = (f"changes: permutation p against {n_null} null directions, Holm over the {m} "
            f"tests of the family, below {alpha} holds; fails only by equivalence")
    adj = holm(p)
    method = f"permutation test against {n_null} null directions"
    ev = {"p": p.tolist(), "p_holm": adj.tolist(), "n_null": n_null, "n_tests": m,
          "smallest_reachable_p": 1 / (n_null + 1), "holm_threshold": alpha / max(m, 1)}
    if m == 0:
        return Verdict(NOT_TESTED, "no test was made", rule, ev, method)
    moved = [n for n, a in zip(names, adj) if np.isfinite(a) and a < alpha]
    ev["moved"] = moved
    if moved:
        return Verdict(HOLDS, f"{', '.join(moved)} move the judgement more than the null "
                       f"(Holm p < {alpha})", rule, ev, method)
    if equivalent is not None and len(equivalent) == m and all(equivalent):
        return Verdict(FAILS, "every direction's change is shown to lie within the margin "
                       "(equivalence)", rule, ev, method)
    # Holm's first step needs m / (n_null + 1) < alpha: n_null + 1 > m / alpha
    if n_null + 1 <= m / alpha + 1e-9:
        need = int(np.floor(m / alpha + 1e-9))
        return Verdict(NOT_TESTED, f"with {n_null} null directions the smallest p is "
                       f"1/{n_null + 1}, above Holm's threshold {alpha}/{m} for {m} tests",
                       rule, ev, method, needed=f"{need} null directions")
    return Verdict(INCONCLUSIVE, f"no direction moves the judgement more than the null "
                   f"(smallest Holm p {np.nanmin(adj):.3f}) and no equivalence is shown", rule,
                   ev, method)
