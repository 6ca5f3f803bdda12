"""Verdicts of the ablation claims (paper Table 2) and of steering, by the rules of
:mod:`ppairs_lens.evaluation.verdicts`.

* :func:`ablation_changes_verdict`: "removing (adding) the direction changes the judgement", a
  "changes" claim: Holm-corrected permutation p-values against null directions hold it; only
  equivalence fails it; not tested when even the smallest reachable p (``1 / (n_null + 1)``)
  cannot pass Holm's first threshold.
* :func:`ablation_unchanged_verdict`: "removing the direction leaves the judgement unchanged",
  an "unchanged" claim: equivalence (TOST, the ``1 - 2 alpha`` CI inside the margin) on
  Δaccuracy and on the Δlog-odds margin, on a judge that decides (else not tested), with a
  positive control that shows the read-out can move the judgement at all.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS
from ppairs_lens.evaluation.verdicts import (
    ALPHA,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTED,
    Verdict,
    beats_chance,
    holm,
)

__all__ = ["ablation_changes_verdict", "ablation_unchanged_verdict", "judge_decides",
           "unchanged_rule"]


def judge_decides(accuracy_lo: float | None, same_answer_share: float | None, *,
                  chance: float = 0.5, max_same: float = 0.95) -> tuple[bool, str]:
    """``(decides, reason)``: the unablated judge's accuracy CI is above chance and it does not
    give one raw answer (the same position, or the same "True"/"False") on ``max_same`` of
    the records."""
    if same_answer_share is not None and np.isfinite(same_answer_share) \
            and same_answer_share >= max_same:
        return False, (f"the judge does not decide: it gives the same raw answer on "
                       f"{same_answer_share:.0%} of pairs")
    if not beats_chance(accuracy_lo, chance):
        lo = "n/a" if accuracy_lo is None else f"{accuracy_lo:.3f}"
        return False, f"the judge does not decide: its accuracy CI reaches chance (lower end {lo})"
    return True, "the judge decides"


def ablation_changes_verdict(p_values: Sequence[float], n_null: int, alpha: float = ALPHA,
                             names: Sequence[str] | None = None,
                             equivalent: Sequence[bool] | None = None) -> Verdict:
    """"Removing (or adding) these directions changes the judgement", a "changes" claim:
    holds for the directions whose Holm-adjusted permutation p (over all ``p_values``, one
    family) is below ``alpha``; fails only when equivalence within the margin is shown for
    every direction (``equivalent``, e.g. the TOST of
    :func:`ablation_unchanged_verdict`); non-significance alone is inconclusive; not tested
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


def _inside(ci: Sequence[float], margin: float) -> bool:
    return bool(np.all(np.isfinite(ci))) and -margin < ci[0] and ci[1] < margin


def _beyond(ci: Sequence[float], margin: float) -> bool:
    return bool(np.all(np.isfinite(ci))) and (ci[0] > margin or ci[1] < -margin)


def unchanged_rule(accuracy_margin: float, logodds_margin: float, alpha: float = ALPHA,
                   statistic: str = "Δaccuracy") -> str:
    """The rule :func:`ablation_unchanged_verdict` applies, in words."""
    return (f"two one-sided tests at {alpha}: the {1 - 2 * alpha:.0%} paired CIs (leak groups "
            f"resampled) of {statistic} within ±{accuracy_margin} and of the Δlog-odds margin "
            f"within ±{logodds_margin}, on a judge that decides (accuracy CI above 0.5, not "
            f"the same raw answer on 95% of pairs), where the positive control at the probe's "
            f"read-out changes accuracy by more than the margin")


def ablation_unchanged_verdict(delta_accuracy_ci: Sequence[float],
                               delta_logodds_ci: Sequence[float], *, accuracy_margin: float,
                               logodds_margin: float, judge_accuracy_lo: float | None,
                               same_answer_share: float | None,
                               control_accuracy_ci: Sequence[float] | None,
                               moved_by_test: bool = False, ci_counts: bool = True,
                               alpha: float = ALPHA, statistic: str = "Δaccuracy") -> Verdict:
    """"Ablating the direction leaves the judgement unchanged", by equivalence (TOST).

    ``delta_*_ci``: the ``1 - 2 alpha`` paired CIs (ablated minus unablated, same records,
    leak groups resampled) of accuracy and of the mean signed log-odds change towards the gold
    item; ``control_accuracy_ci``: the same Δaccuracy CI for the positive control at the
    probe's own read-out. Holds when both CIs lie inside ``±margin`` (both one-sided tests at
    ``alpha`` reject a larger change) on a judge that decides and a read-out whose control
    moves it beyond the margin; fails when a CI lies wholly beyond the margin or
    ``moved_by_test`` (the Holm-corrected permutation test found a change); else undecided
    (also when ``ci_counts`` is False: the CIs resample too few leak groups to count).
    """
    # ``statistic``: what ``delta_accuracy_ci`` holds (the paper's Table 2 reads macro ΔF1)
    rule = unchanged_rule(accuracy_margin, logodds_margin, alpha, statistic)
    ev = {"delta_accuracy_ci": list(map(float, delta_accuracy_ci)),
          "delta_logodds_ci": list(map(float, delta_logodds_ci)),
          "accuracy_margin": accuracy_margin, "logodds_margin": logodds_margin,
          "control_accuracy_ci": (None if control_accuracy_ci is None
                                  else list(map(float, control_accuracy_ci)))}
    decides, why = judge_decides(judge_accuracy_lo, same_answer_share)
    if not decides:
        return Verdict(NOT_TESTED, why, rule, ev, needed="a judge that decides (a larger "
                       "model, or a prompt it answers both ways)")
    if moved_by_test or _beyond(delta_accuracy_ci, accuracy_margin) \
            or _beyond(delta_logodds_ci, logodds_margin):
        return Verdict(FAILS, "the ablation changes the judgement beyond the margin"
                       + (" (Holm-corrected permutation test)" if moved_by_test else ""), rule, ev)
    if not ci_counts:
        return Verdict(NOT_TESTED, "the CIs resample too few leak groups to count toward a claim",
                       rule, ev, needed=f"{MIN_BOOTSTRAP_GROUPS} groups")
    if control_accuracy_ci is None or not _beyond(control_accuracy_ci, accuracy_margin):
        return Verdict(NOT_TESTED, "the positive control at the probe's read-out does not move "
                       "the judgement beyond the margin either, so no change could be seen",
                       rule, ev, needed="a read-out whose positive control moves the judge")
    if _inside(delta_accuracy_ci, accuracy_margin) and _inside(delta_logodds_ci, logodds_margin):
        return Verdict(HOLDS, f"{statistic} and Δlog-odds are both within their margins", rule,
                       ev)
    return Verdict(INCONCLUSIVE, "the CIs cross the margin: neither equivalence nor a change is "
                   "shown", rule, ev)
