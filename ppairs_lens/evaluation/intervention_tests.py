"""The claim tests of the intervention claims (ablation, steering) and of direction agreement,
as p-values that enter their family's Holm (:func:`~ppairs_lens.evaluation.verdicts.decide_family`)
rather than verdicts decided alone.

* :func:`equivalence_test`: "removing the direction leaves the judgement unchanged" (paper
  Table 2). Per statistic (ΔF1 or Δaccuracy, and the Δlog-odds margin) the two one-sided
  p-values against ``±margin`` from the run's own paired 90% interval (the interval the TOST
  reads; ``p`` by its normal approximation, :func:`~ppairs_lens.evaluation.verdicts.interval_p`,
  so ``p < ALPHA`` exactly where that interval lies inside the margin for a symmetric
  interval); a statistic's TOST p is the larger of its two, the claim's the larger over the
  statistics (intersection-union: both must be equivalent). "A change is shown" (fails) is
  each statistic's two-sided p against 0 from its 95% interval, Bonferroni over the
  statistics. The interval counts only over 20+ groups (else not tested); a judge that does
  not decide or a positive control that does not move it leaves the claim not tested.
* :func:`permutation_union_test`: "removing (adding) a probe direction changes the judgement
  more than null directions", over ``m`` directions: holds when any direction does, so the
  claim's p is Bonferroni's ``m min p`` (its smallest reachable ``m / (n_null + 1)``); fails
  only by equivalence of every direction (the largest of their TOST p's), else cannot fail.
* :func:`agreement_test`: "directions agree" (Figure 5): the statistic must beat both nulls,
  so p is the larger of the two permutation p's; it cannot fail (no equivalence test).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS
from ppairs_lens.evaluation.power import sd_from_interval
from ppairs_lens.evaluation.verdicts import (
    ALPHA,
    NOT_TESTED,
    ClaimTest,
    Verdict,
    interval_p,
)

__all__ = ["agreement_test", "equivalence_test", "permutation_union_test"]

NAN = float("nan")


def _f(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _stat(row: Mapping[str, Any], name: str) -> tuple[float, ...] | None:
    """(value, 95% lo, hi, 90% lo, hi) of ``delta_<name>`` in an ablation row, or None."""
    got = tuple(_f(row.get(f"delta_{name}{t}")) for t in ("", "_lo", "_hi", "_tost_lo",
                                                           "_tost_hi"))
    return None if None in got else got  # type: ignore[return-value]


def equivalence_test(row: Mapping[str, Any], *, margins: Mapping[str, float],
                     n_groups: int | None, precondition: str | None = None,
                     kind: str = "unchanged") -> ClaimTest | Verdict:
    """The "unchanged" claim test of one ablation row (module doc). ``margins`` maps each
    statistic's name in the row (``"f1"``, ``"accuracy"``, ``"logodds"``) to its equivalence
    margin; the first is the claim's own (its value, SD and δ). ``precondition``: why the
    claim cannot be tested (a judge that does not decide, a control that does not move it)."""
    method = (f"TOST on the paired 90% intervals of {' and '.join('Δ' + n for n in margins)} "
              "(p by their normal approximation); a change by the 95% intervals, Bonferroni")
    if precondition:
        return Verdict(NOT_TESTED, precondition, method="precondition",
                       needed="a judge that decides and a control that moves it")
    stats = {n: _stat(row, n) for n in margins}
    if any(v is None for v in stats.values()):
        missing = [n for n, v in stats.items() if v is None]
        return Verdict(NOT_TESTED, f"the run recorded no paired interval of Δ{missing[0]}",
                       method=method, needed="the ablation step's paired intervals")
    if n_groups is None or n_groups < MIN_BOOTSTRAP_GROUPS:
        return Verdict(NOT_TESTED, f"the intervals resample {n_groups} groups: a bootstrap "
                       f"interval needs {MIN_BOOTSTRAP_GROUPS} and no group-level differences "
                       "were recorded for a sign-flip test", method=method,
                       needed=f"{MIN_BOOTSTRAP_GROUPS} groups",
                       evidence={"n_groups": n_groups, "n_pairs": row.get("n")})
    tost, change = [], []
    for name, (v, lo, hi, tlo, thi) in stats.items():
        d = margins[name]
        tost.append(max(interval_p(v, tlo, thi, -d, True, 1 - 2 * ALPHA),
                        interval_p(v, tlo, thi, d, False, 1 - 2 * ALPHA)))
        change.append(min(1.0, 2 * min(interval_p(v, lo, hi, 0.0, True),
                                       interval_p(v, lo, hi, 0.0, False))))
    p_equiv, p_change = max(tost), min(1.0, len(change) * min(change))
    first = next(iter(margins))
    v, lo, hi = stats[first][:3]
    ph, pf = (p_equiv, p_change) if kind == "unchanged" else (p_change, p_equiv)
    return ClaimTest(kind, float(margins[first]), ph, pf, 0.0,
                     f"group bootstrap intervals over {n_groups} groups; " + method, v,
                     sd_from_interval(lo, hi, n_groups), n_groups, _int(row.get("n")))


def _int(x) -> int | None:
    return None if _f(x) is None else int(float(x))


def permutation_union_test(p_values: Sequence[float], n_null: int, *, delta: float,
                           value: float, names: Sequence[str] = (),
                           p_equivalent: Sequence[float] | None = None,
                           what: str = "null directions") -> ClaimTest | Verdict:
    """"Some of these directions change the judgement more than the null" as one "changes"
    claim test (module doc): ``p_values`` one permutation p per direction against ``n_null``
    null draws; ``p_equivalent`` each direction's equivalence (TOST) p where one exists (the
    claim fails only when all are equivalent); ``value`` the effect to print."""
    ps = [p for p in (_f(x) for x in p_values) if p is not None]
    method = f"permutation test against {n_null} {what}, Bonferroni over {len(ps)} directions"
    if not ps:
        return Verdict(NOT_TESTED, "no direction was tested", method=method,
                       needed="the step's permutation test")
    m = len(ps)
    eq = [p for p in (_f(x) for x in (p_equivalent or ())) if p is not None]
    p_fails = max(eq) if eq and len(eq) == m else NAN
    return ClaimTest("changes", float(delta), min(1.0, m * min(ps)), p_fails,
                     min(1.0, m / (n_null + 1)),
                     method + (f" ({', '.join(names)})" if names else ""), float(value), NAN,
                     None, None, n_null=int(n_null), n_tests=m)


def agreement_test(evidence: Mapping[str, Any], n_sim: int) -> ClaimTest | Verdict:
    """"The directions agree" from the transfer step's evidence (``mean_abs_cos``,
    ``p_isotropic``, ``p_covariance``): p the larger of the two nulls' (module doc); without
    a covariance null it cannot hold (p = 1)."""
    p_iso, p_cov = _f(evidence.get("p_isotropic")), _f(evidence.get("p_covariance"))
    if p_iso is None:
        return Verdict(NOT_TESTED, "the transfer step recorded no permutation p against the "
                       "nulls; rerun it", method="permutation against nulls",
                       needed="the transfer step's null draws")
    return ClaimTest("changes", NAN, max(p_iso, 1.0 if p_cov is None else p_cov), NAN,
                     1 / (n_sim + 1), f"permutation against {n_sim} isotropic and covariance "
                     "null draws (the larger p: both must be beaten)",
                     float(evidence.get("mean_abs_cos") or NAN), NAN, None,
                     _int(evidence.get("n_pairs")), n_null=int(n_sim))
