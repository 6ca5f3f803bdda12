"""The verdicts and claim tests of the intervention claims (ablation, steering).

* :func:`judge_decides`: a precondition of every such claim: the unablated judge must decide.
* :func:`ablation_changes_verdict`: the step's own verdict on "removing (adding) the direction
  changes the judgement": Holm-corrected permutation p-values against null directions hold
  it; only equivalence fails it.

The claim tests below give p-values that enter their family's Holm
(:func:`~ppairs_lens.evaluation.verdicts.decide_family`):

* :func:`equivalence_test`: "removing the direction leaves the judgement unchanged" (paper
  Table 2). Per statistic (ΔF1 or Δaccuracy, and the Δlog-odds margin) the two one-sided
  p-values against ``±margin`` from the run's paired 90% interval, by its normal
  approximation (so ``p < ALPHA`` exactly where a symmetric interval lies inside the margin);
  the claim's TOST p is the largest over both sides and the statistics (intersection-union:
  all must be equivalent). "A change is shown" is each statistic's two-sided p against 0 from
  its 95% interval, Bonferroni over the statistics. Not tested under 20 groups.
* :func:`permutation_union_test`: "a probe direction changes the judgement more than null
  directions", over ``m`` directions: holds when any does (Bonferroni's ``m min p``, its
  smallest reachable ``m / (n_null + 1)``); fails only by equivalence of every direction (the
  largest of their TOST p's), else cannot fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS
from ppairs_lens.evaluation.verdicts import (
    ALPHA,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTED,
    ClaimTest,
    Verdict,
    beats_chance,
    finite_float,
    holm,
    interval_p,
    no_skill,
    sd_from_interval,
)

__all__ = ["ablation_changes_verdict", "equivalence_test", "judge_decides",
           "permutation_union_test"]

NAN = float("nan")


def judge_decides(accuracy_lo: float | None, same_answer_share: float | None, *,
                  chance: float = 0.5, max_same: float = 0.95, n_groups: int | None = None
                  ) -> tuple[bool, str]:
    """``(decides, reason)``: the judge's accuracy CI is above chance and it does not give one
    raw answer (the same position, or the same "True"/"False") on ``max_same`` of records."""
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
    """"Removing (or adding) these directions changes the judgement" (module doc); fails only
    when equivalence is shown for every direction (``equivalent``); not tested when
    ``1 / (n_null + 1)`` cannot pass Holm's first threshold ``alpha / m``."""
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


def _stat(row: Mapping[str, Any], name: str) -> tuple[float, ...] | None:
    """(value, 95% lo, hi, 90% lo, hi) of ``delta_<name>`` in an ablation row, or None."""
    got = tuple(finite_float(row.get(f"delta_{name}{t}"))
                for t in ("", "_lo", "_hi", "_tost_lo", "_tost_hi"))
    return None if None in got else got  # type: ignore[return-value]


def equivalence_test(row: Mapping[str, Any], *, margins: Mapping[str, float],
                     n_groups: int | None, precondition: str | None = None,
                     kind: str = "unchanged") -> ClaimTest | Verdict:
    """The "unchanged" claim test of one ablation row (module doc). ``margins`` maps each
    statistic's name in the row (``"f1"``, ``"accuracy"``, ``"logodds"``) to its equivalence
    margin; the first is the claim's own (its value, SD and δ). ``precondition``: why the claim
    cannot be tested (a judge that does not decide, a control that does not move it)."""
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
    return None if finite_float(x) is None else int(float(x))


def permutation_union_test(p_values: Sequence[float], n_null: int, *, delta: float,
                           value: float, names: Sequence[str] = (),
                           p_equivalent: Sequence[float] | None = None,
                           what: str = "null directions") -> ClaimTest | Verdict:
    """"Some of these directions change the judgement more than the null" (module doc):
    ``p_equivalent`` each direction's TOST p where one exists; ``value`` the effect to print."""
    ps = [p for p in (finite_float(x) for x in p_values) if p is not None]
    method = f"permutation test against {n_null} {what}, Bonferroni over {len(ps)} directions"
    if not ps:
        return Verdict(NOT_TESTED, "no direction was tested", method=method,
                       needed="the step's permutation test")
    m = len(ps)
    eq = [p for p in (finite_float(x) for x in (p_equivalent or ())) if p is not None]
    p_fails = max(eq) if eq and len(eq) == m else NAN
    return ClaimTest("changes", float(delta), min(1.0, m * min(ps)), p_fails,
                     min(1.0, m / (n_null + 1)),
                     method + (f" ({', '.join(names)})" if names else ""), float(value), NAN,
                     None, None, n_null=int(n_null), n_tests=m)
