"""Verdicts on the published claims: typed outcomes, rules that can go either way.

An :class:`Outcome` is *holds*, *fails*, *inconclusive* (the data could have decided but did
not) or *not tested at this size* (no result this run could produce would decide it: too few
groups, a judge that never changes its answer; the size that would test it is given). The
functions are pure: they take numbers and decide.

Rules, by the kind of claim (each with a smallest effect of interest ``delta``):

* **beats** (the difference ``A - B``): holds when shown above 0 (the 95% CI's lower end above
  0); fails when shown below ``+delta`` (not better by the smallest effect worth reporting);
  both is its own outcome, *beats, by less than δ*; else inconclusive.
* **unchanged** ("removing the direction leaves the judgement unchanged"): holds by
  equivalence within ``±delta`` (TOST at 5%: the 90% CI inside); fails when a change is shown
  and equivalence is not; else inconclusive.
* **changes** (ablation, steering, agreement of directions): holds when significant; fails
  only when equivalence within ``±delta`` is shown; non-significance alone is inconclusive.

Each test is two one-sided p-values (:class:`ClaimTest`), and :func:`decide_family` applies
Holm's step-down correction to each over the claims of one family that could reach it. The
p-values come from the recorded group differences wherever a run recorded them: at 0 the
sign-flip test (exact under the paired design's null that the two methods are exchangeable
within a group); at ``±delta`` :func:`~ppairs_lens.evaluation.sign_flip.margin_test`, since
the sign-flip test's symmetry does not hold there when groups tie. Where only an interval is
recorded (statements of ClimateX, the shift's drops), its normal approximation over at least
:data:`~ppairs_lens.evaluation.bootstrap.MIN_BOOTSTRAP_GROUPS` groups (``SE = width / 3.92``).
``tests/test_margin_test.py`` simulates each rule at its boundary.

A claim made for other models than the run's is reported *outside the claim's scope*; a step
the run's preset does not include is *not run in this preset*. Neither counts in Holm's ``m``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
from jaxtyping import Float
from scipy.stats import norm

from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS
from ppairs_lens.evaluation.sign_flip import groups_for_p, margin_test, sign_flip_test

__all__ = ["ACCURACY_DELTA", "ALPHA", "BEATS_LESS", "CLAIM_KINDS", "FAILS", "HOLDS", "INCONCLUSIVE",
           "NOT_RUN", "NOT_TESTED", "NO_SKILL", "NOT_TESTABLE", "OUTSIDE_SCOPE", "POWER",
           "ClaimTest", "all_but_one_test", "at_least_test", "Difference", "Outcome", "Verdict",
           "beats_chance", "claim_test", "decide_family", "equivalence_groups_needed",
           "finite_float", "groups_needed", "groups_to_decide", "holm", "intersection_test",
           "interval_note", "interval_p", "interval_verdict", "no_skill", "sd_from_interval",
           "transfer_refusal"]

#: Level of every claim's test (two-sided 95% intervals; TOST at 5% reads the 90% interval).
ALPHA = 0.05
#: The smallest gap in pairwise accuracy worth reporting (one pair in 20): a smaller gap
#: between two judges would not change which one to use. The commands' own tables decide
#: "beats" with it; the replication's claim families state theirs beside their reasons.
ACCURACY_DELTA: float = 0.05
#: The kinds of claim and the rule each gets (module doc).
CLAIM_KINDS = ("beats", "unchanged", "changes")


class Outcome(StrEnum):
    """A claim's outcome; its value is the word the report prints."""

    HOLDS = "holds"
    BEATS_LESS = "beats, by less than δ"
    FAILS = "fails"
    INCONCLUSIVE = "inconclusive"
    NOT_TESTED = "not tested at this size"
    NO_SKILL = "not tested: no skill shown first"
    NOT_TESTABLE = "not testable as stated"
    NOT_RUN = "not run in this preset"
    OUTSIDE_SCOPE = "outside the claim's scope"


HOLDS, FAILS, BEATS_LESS = Outcome.HOLDS, Outcome.FAILS, Outcome.BEATS_LESS
INCONCLUSIVE, NOT_TESTED = Outcome.INCONCLUSIVE, Outcome.NOT_TESTED
NO_SKILL, NOT_TESTABLE = Outcome.NO_SKILL, Outcome.NOT_TESTABLE
NOT_RUN, OUTSIDE_SCOPE = Outcome.NOT_RUN, Outcome.OUTSIDE_SCOPE


@dataclass(frozen=True)
class Verdict:
    """A claim's outcome, why, the rule, the test used, its numbers, and (not tested) the size
    that would test it."""

    outcome: Outcome
    reason: str
    rule: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    needed: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", Outcome(self.outcome))  # refuses unknown words

    @property
    def text(self) -> str:
        return f"{self.outcome}: {self.reason}"

    def __str__(self) -> str:
        return self.text

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "outcome": str(self.outcome)}


# ------------------------------------------------------------------ differences and tests

def finite_float(x) -> float | None:
    """``float(x)``, or None where that fails or is not finite (a row's missing number)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class Difference:
    """A claim's statistic on this run, its 95% bootstrap interval, and (where recorded) one
    difference per group for the sign-flip test."""

    value: float | None
    lo: float | None = None
    hi: float | None = None
    n_groups: int | None = None
    n_pairs: int | None = None
    group_diffs: tuple[float, ...] | None = None
    interval: str | None = None    # how the interval is made where not a group bootstrap

    @classmethod
    def from_row(cls, row: Mapping[str, Any], value_key: str = "value") -> "Difference":
        """From a paired-difference dict (``value``/``lo``/``hi``/``n_groups``/``n``/
        ``group_diffs``)."""
        gd = row.get("group_diffs")
        n_groups = row.get("n_groups")
        return cls(finite_float(row.get(value_key)), finite_float(row.get("lo")),
                   finite_float(row.get("hi")),
                   None if n_groups is None else int(n_groups),
                   None if row.get("n") is None else int(row["n"]),
                   None if gd is None else tuple(float(x) for x in gd))


@dataclass(frozen=True)
class ClaimTest:
    """The two one-sided tests of one claim, each a p comparable with :data:`ALPHA`
    (``p_holds``: against "the claim is false in its own direction"; ``p_fails``: against
    "it is not false by the margin"), the smallest p reachable at this size, and what the power
    table needs (value, group-level SD). A test against ``n_null`` null draws (a permutation
    test, ``n_tests`` of them pooled by Bonferroni) is sized in null draws, not groups."""

    kind: str
    delta: float
    p_holds: float
    p_fails: float
    smallest_p: float
    method: str
    value: float
    sd: float
    n_groups: int | None
    n_pairs: int | None
    n_null: int | None = None
    n_tests: int = 1
    smallest_p_holds: float | None = None
    smallest_p_fails: float | None = None

    def smallest(self, side: str) -> float:
        """The smallest p ``side`` ("holds" or "fails") can reach at this size."""
        got = self.smallest_p_holds if side == "holds" else self.smallest_p_fails
        return self.smallest_p if got is None else got


def interval_p(value: float, lo: float, hi: float, shift: float, greater: bool,
               level: float = 1 - ALPHA) -> float:
    """One-sided p of ``mean > shift`` (``greater``) or ``< shift`` from a ``level`` interval
    around ``value``, by its normal approximation (``SE = (hi - lo) / (2 z_{(1 + level) / 2})``)."""
    se = (hi - lo) / (2 * norm.ppf(0.5 + level / 2))
    if se <= 0:
        return 0.0 if (value > shift if greater else value < shift) else 1.0
    z = (value - shift) / se
    return float(norm.sf(z) if greater else norm.cdf(z))


def _one_sided(d: Difference, shift: float, greater: bool, seed: int, boot: bool,
               bound: float) -> tuple[float, float, str]:
    """(p, smallest reachable p, method) of one one-sided test at ``shift``: the interval's
    normal approximation (``boot``), else the sign-flip test at 0, the margin test elsewhere."""
    alt = "greater" if greater else "less"
    if boot:
        return interval_p(d.value, d.lo, d.hi, shift, greater), 0.0, "interval"
    if shift == 0:
        t = sign_flip_test(d.group_diffs, shift=0.0, alternative=alt, seed=seed)
        return t.p, t.smallest_p, "sign-flip"
    m = margin_test(d.group_diffs, shift=shift, alternative=alt, bound=bound)
    return m.p, m.smallest_p, m.route


def claim_test(d: Difference, kind: str, delta: float, *, seed: int = 0, bound: float = 1.0
               ) -> ClaimTest | Verdict:
    """The :class:`ClaimTest` of a claim of ``kind`` with margin ``delta`` on ``d``, or a *not
    tested* :class:`Verdict` when no valid test exists (no value; no group differences and
    fewer than the bootstrap's minimum groups). ``bound``: the largest absolute group
    difference the statistic allows (1 for accuracies, 2 for correlations; the margin test's)."""
    if kind not in CLAIM_KINDS:
        raise ValueError(f"unknown claim kind {kind!r}; use one of {CLAIM_KINDS}")
    if delta is None or not delta > 0:
        raise ValueError(f"a {kind!r} claim needs a smallest effect of interest delta > 0, "
                         f"got {delta!r}")
    k = d.n_groups or 0
    flips = [x for x in (d.group_diffs or ()) if math.isfinite(x)]
    boot = (len(flips) < 2 and k >= MIN_BOOTSTRAP_GROUPS
            and None not in (d.value, d.lo, d.hi))
    if d.value is None or (not boot and len(flips) < 2):
        had = ("the row records no group count" if d.n_groups is None else
               f"{k} group{'s' if k != 1 else ''}")
        why = ("no value: nothing was scored" if d.value is None else
               f"{had}: a test needs the differences of 2+ groups (or an interval over "
               f"{MIN_BOOTSTRAP_GROUPS}+)")
        ev: dict[str, Any] = {"n_groups": d.n_groups, "n_pairs": d.n_pairs, "value": d.value}
        if None not in (d.value, d.lo, d.hi) and k >= 2:   # power from the interval shown
            ev["groups_to_decide"] = _groups_for(kind, delta,
                                                 sd_from_interval(d.lo, d.hi, k), 0.8)
        return Verdict(NOT_TESTED, why, method="none",
                       needed=f"{MIN_BOOTSTRAP_GROUPS} groups", evidence=ev)
    if boot:
        method = (f"{d.interval or f'group bootstrap 95% CI over {k} groups'} (no group "
                  "differences recorded; p by its normal approximation)")
        sd = sd_from_interval(d.lo, d.hi, k)
    else:
        d = Difference(float(np.mean(flips)), d.lo, d.hi, len(flips), d.n_pairs, tuple(flips))
        k = len(flips)
        sd = float(np.std(flips, ddof=1))
    used: list[str] = []

    def one(shift: float, greater: bool) -> tuple[float, float]:
        p, small, how = _one_sided(d, shift, greater, seed, boot, bound)
        used.append(f"{how} at {shift:+g}")
        return p, small

    if kind == "beats":                  # p's doubled: comparable with the two-sided ALPHA
        (ph, sh), (pf, sf) = one(0.0, True), one(delta, False)
        ph, pf, sh, sf = (min(1.0, 2 * x) for x in (ph, pf, sh, sf))
    else:
        (gp, gs), (lp, ls) = one(0.0, True), one(0.0, False)
        change, s_change = min(1.0, 2 * min(gp, lp)), min(1.0, 2 * min(gs, ls))
        (ap, as_), (bp, bs) = one(-delta, True), one(delta, False)
        equiv, s_equiv = max(ap, bp), max(as_, bs)
        ph, pf = (change, equiv) if kind == "changes" else (equiv, change)
        sh, sf = (s_change, s_equiv) if kind == "changes" else (s_equiv, s_change)
    if not boot:
        method = (f"group differences ({k} groups, {sum(x != 0 for x in flips)} untied): "
                  + "; ".join(dict.fromkeys(used)))
    return ClaimTest(kind, float(delta), ph, pf, min(sh, sf), method, float(d.value), sd, k,
                     d.n_pairs, smallest_p_holds=sh, smallest_p_fails=sf)


def _value_or_inf(x) -> float:
    v = finite_float(x)
    return math.inf if v is None else v


def intersection_test(tests: Sequence[ClaimTest | Verdict]) -> ClaimTest | Verdict:
    """"A beats each of B_1..B_m" (e.g. every no-model baseline, so no strongest one is chosen
    on test pairs): holds only when each holds (intersection-union test: ``p`` the largest);
    fails when any one fails (Bonferroni: ``m`` times the smallest). An untested comparator
    keeps the claim from holding. Value, SD and sizes are the closest comparator's."""
    ok = [t for t in tests if isinstance(t, ClaimTest)]
    if not tests:
        raise ValueError("an intersection test needs at least one comparison")
    if not ok:                        # none testable: report the comparator closest to A
        return min(tests, key=lambda v: _value_or_inf(v.evidence.get("value")))
    m = len(ok)
    worst = min(ok, key=lambda t: t.value)
    p_h = 1.0 if len(ok) < len(tests) else max(t.p_holds for t in ok)
    p_f = min(1.0, m * min(t.p_fails for t in ok))
    s_h = 1.0 if len(ok) < len(tests) else max(t.smallest("holds") for t in ok)
    s_f = min(1.0, m * min(t.smallest("fails") for t in ok))
    return ClaimTest(worst.kind, worst.delta, p_h, p_f, min(s_h, s_f),
                     f"intersection-union over {len(tests)} comparators ({len(ok)} tested); "
                     f"{worst.method}", worst.value, worst.sd, worst.n_groups, worst.n_pairs,
                     smallest_p_holds=s_h, smallest_p_fails=s_f)


def all_but_one_test(tests: Sequence[ClaimTest | Verdict]) -> ClaimTest | Verdict:
    """"A beats B on all but at most one of m sets" (paper Figure 4). Holds when all but one
    set hold at ``alpha / 2`` each (the second largest "holds" p, doubled: were two sets null,
    one of their p-values would have to fall below the cut, at most twice its level); fails
    when Holm over the "fails" p-values rejects twice (``max(m p_(1), (m - 1) p_(2))``). Not
    tested with fewer than 2 sets or more than one untested."""
    ok = [t for t in tests if isinstance(t, ClaimTest)]
    m = len(tests)
    if m < 2 or len(ok) < m - 1:
        why = (f"{m} set{'s' if m != 1 else ''}: all but one needs 2 or more" if m < 2 else
               f"{m - len(ok)} of {m} sets untested: more than the one exception allowed")
        return Verdict(NOT_TESTED, why, method="none", needed="2+ sets, all but one tested")
    hold = sorted(t.p_holds for t in ok) + [1.0] * (m - len(ok))
    fail = sorted(t.p_fails for t in ok)
    s_hold = sorted(t.smallest("holds") for t in ok) + [1.0] * (m - len(ok))
    s_fail = sorted(t.smallest("fails") for t in ok)
    p_h, s_h = min(1.0, 2 * hold[m - 2]), min(1.0, 2 * s_hold[m - 2])
    p_f = min(1.0, max(m * fail[0], (m - 1) * fail[1])) if len(fail) >= 2 else 1.0
    s_f = min(1.0, max(m * s_fail[0], (m - 1) * s_fail[1])) if len(s_fail) >= 2 else 1.0
    worst = sorted(ok, key=lambda t: t.value)[min(1, len(ok) - 1)]  # the exception spared
    return ClaimTest(worst.kind, worst.delta, p_h, p_f, min(s_h, s_f),
                     f"all but one of {m} sets ({len(ok)} tested); {worst.method}",
                     worst.value, worst.sd, worst.n_groups, worst.n_pairs,
                     smallest_p_holds=s_h, smallest_p_fails=s_f)


def at_least_test(holds: Sequence[ClaimTest | Verdict], fails: Sequence[ClaimTest | Verdict],
                  k: int) -> ClaimTest | Verdict:
    """"A reaches a level in at least ``k`` of ``m`` cells" (paper Table 1's "several cases",
    read as 2 or more), from each cell's "above" (``holds[i].p_holds``) and "below"
    (``fails[i].p_fails``) test. Holds when Holm over the "above" p-values rejects ``k`` times
    (were fewer than ``k`` cells truly above, one of those rejections would be false, which
    Holm keeps under its level); fails when Holm over the "below" p-values rejects
    ``m - k + 1`` times. An untested cell counts as p = 1; the value is the ``k``-th best's."""
    m = len(holds)
    if m != len(fails):
        raise ValueError(f"{m} 'above' tests for {len(fails)} 'below' tests")
    ok_h = [t for t in holds if isinstance(t, ClaimTest)]
    if m < k or not ok_h:
        return Verdict(NOT_TESTED, f"{m} cell{'s' if m != 1 else ''} ({len(ok_h)} tested): "
                       f"'at least {k}' needs {k}+ tested cells", method="none",
                       needed=f"{k}+ tested cells")

    def holm_k(ps: list[float], r: int) -> float:
        ps = sorted(ps)
        return min(1.0, max((m - j) * ps[j] for j in range(r)))

    ph = [t.p_holds if isinstance(t, ClaimTest) else 1.0 for t in holds]
    sh = [t.smallest("holds") if isinstance(t, ClaimTest) else 1.0 for t in holds]
    pf = [t.p_fails if isinstance(t, ClaimTest) else 1.0 for t in fails]
    sf = [t.smallest("fails") if isinstance(t, ClaimTest) else 1.0 for t in fails]
    p_h, s_h = holm_k(ph, k), holm_k(sh, k)
    p_f, s_f = holm_k(pf, m - k + 1), holm_k(sf, m - k + 1)
    ranked = sorted(ok_h, key=lambda t: t.value, reverse=True)
    kth = ranked[min(k, len(ranked)) - 1]
    return ClaimTest(kth.kind, kth.delta, p_h, p_f, min(s_h, s_f),
                     f"at least {k} of {m} cells ({len(ok_h)} tested; Holm over the cells on "
                     f"each side); {kth.method}", kth.value, kth.sd, kth.n_groups,
                     kth.n_pairs, smallest_p_holds=s_h, smallest_p_fails=s_f)


# ------------------------------------------------------------------ power
# How many groups would decide an effect: a normal approximation from the group-level SD (it
# ignores the t correction at small ``k``). A one-sided test at ``alpha`` detects a true mean
# ``effect`` away from its boundary with ``power`` at ``k = ((z_{1-alpha} + z_{power}) sd /
# effect)^2``. An equivalence claim (TOST within ``±delta``) must pass *both* one-sided tests:
# its power at a true mean ``v`` is ``Phi((delta - v) / se - z) + Phi((delta + v) / se - z) - 1``
# (``se = sd / sqrt(k)``, ``z = z_{1-alpha}``), at ``v = 0`` more groups than the single nearer
# margin suggests. The SD is this run's: of the group differences where recorded, else read
# back from the 95% interval's width (``sd = sqrt(k) (hi - lo) / 3.92``).

POWER = 0.8    # the power a size is chosen for


def sd_from_interval(lo: float, hi: float, n_groups: int, level: float = 0.95) -> float:
    """The group-level SD a ``level`` interval of a mean over ``n_groups`` groups implies."""
    z = float(norm.ppf(0.5 + level / 2))
    return math.sqrt(n_groups) * (hi - lo) / (2 * z)


def groups_needed(effect: float, sd: float, *, alpha: float = 0.025,
                  power: float = POWER) -> int | None:
    """Groups for a one-sided test at ``alpha`` to detect ``effect`` (the distance from the
    mean to the boundary it must clear) with ``power``; None for ``effect <= 0`` or no ``sd``."""
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
    """Fewest groups at which TOST, each side at ``alpha``, shows equivalence within ``±delta``
    with ``power`` at true mean ``value`` (comment above); None when ``|value| >= delta``,
    ``sd`` is unknown, or more than ``most`` groups would be needed."""
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


def _groups_for(kind: str, delta: float, sd: float, power: float, m: int = 1) -> int | None:
    """Groups that would decide a true effect at the planning value with ``power`` at Holm's
    strictest threshold ``ALPHA / m``: "beats" at a true difference ``delta`` (or 0: the same
    distance), equivalence at 0; never less than the sign-flip test's floor there."""
    a = ALPHA / max(m, 1)
    if not (math.isfinite(delta) and math.isfinite(sd)):
        return None
    if kind == "beats":
        n = groups_needed(delta, sd, alpha=a / 2, power=power)
    else:
        n = equivalence_groups_needed(0.0, delta, sd, alpha=a, power=power)
    floor = groups_for_p(a / 2 if kind == "beats" else a)
    return None if n is None else max(n, floor)


def groups_to_decide(t: ClaimTest, power: float = 0.8, m: int = 1) -> int | None:
    """Groups that would decide the claim with ``power`` in a family of ``m`` tests, planned at
    the margin (not at the observed effect) from the observed SD; None for null-draw tests."""
    if t.n_null is not None or not (t.delta and math.isfinite(t.delta)):
        return None
    return _groups_for(t.kind, t.delta, t.sd, power, m)


def holm(p: Sequence[float]) -> Float[np.ndarray, "m"]:
    """Holm-adjusted p-values (step-down, monotone, capped at 1); NaN stays NaN, uncounted."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order]) if m else np.array([])
    out[order] = np.minimum(adj, 1.0)
    return out


def _rule(kind: str, delta: float, m: int) -> str:
    if not math.isfinite(delta):        # no margin: a "changes" claim that cannot fail
        return (f"{kind}: holds when a change is shown; cannot fail (no equivalence test); "
                f"Holm over the {m} claims of its family at {ALPHA}")
    what = {"beats": f"holds when the difference is above 0, fails when it is below +{delta:g}"
                     ", both: beats by less than the margin",
            "unchanged": f"holds by equivalence within ±{delta:g} (TOST), fails when a change "
                         "is shown",
            "changes": f"holds when a change is shown, fails only by equivalence within "
                       f"±{delta:g} (TOST)"}[kind]
    return f"{kind}: {what}; Holm over the {m} claims of its family at {ALPHA}"


def decide_family(tests: Sequence[ClaimTest | Verdict], alpha: float = ALPHA) -> list[Verdict]:
    """Verdicts of one family: Holm over its "holds" p-values and, separately, its "fails"
    p-values, each over the claims whose side could reach ``alpha`` at all (a side whose
    smallest attainable p is not below ``alpha`` passes none of Holm's thresholds, so it is not
    counted in ``m``); a claim neither of whose sides could is *not tested at this size*.
    Verdicts passed in stay and are not counted."""
    idx = [i for i, t in enumerate(tests) if isinstance(t, ClaimTest)]
    sides = {side: [i for i in idx if tests[i].smallest(side) < alpha]
             for side in ("holds", "fails")}
    adj = {side: dict(zip(ids, holm([getattr(tests[i], f"p_{side}") for i in ids])))
           for side, ids in sides.items()}
    m_all = len(set(sides["holds"]) | set(sides["fails"]))
    out: list[Verdict] = [t if isinstance(t, Verdict) else None for t in tests]  # type: ignore
    for i in idx:
        t: ClaimTest = tests[i]  # type: ignore[assignment]
        ah, af = adj["holds"].get(i, math.nan), adj["fails"].get(i, math.nan)
        m = max(1, len(sides["holds"]), len(sides["fails"]))
        ev = {"value": t.value, "p_holds": t.p_holds, "p_fails": t.p_fails,
              "p_holds_holm": None if math.isnan(ah) else float(ah),
              "p_fails_holm": None if math.isnan(af) else float(af),
              "smallest_p": t.smallest_p, "family_size": m_all, "n_groups": t.n_groups,
              "n_pairs": t.n_pairs, "group_sd": t.sd, "delta": t.delta,
              "groups_to_decide": groups_to_decide(t, m=m), "n_null": t.n_null}
        rule = _rule(t.kind, t.delta, m_all)
        h, f = ah < alpha, af < alpha
        if h and f and t.kind == "beats":
            v = Verdict(BEATS_LESS, f"above 0 (Holm p {ah:.3g}) and below the margin "
                        f"{t.delta:g} (Holm p {af:.3g})", rule, ev, t.method)
        elif h and f and t.kind == "changes":   # shown, but within ±δ, which is no change
            v = Verdict(FAILS, f"a change is shown (Holm p {ah:.3g}) but within ±{t.delta:g} "
                        f"(Holm p {af:.3g}): smaller than the margin is no change", rule, ev,
                        t.method)
        elif h and f:               # "unchanged": within ±δ, though not exactly 0
            v = Verdict(HOLDS, f"within ±{t.delta:g} (Holm p {ah:.3g}), though not exactly 0 "
                        f"(Holm p {af:.3g}): smaller than the margin is no change", rule, ev,
                        t.method)
        elif h:
            v = Verdict(HOLDS, f"Holm p {ah:.3g} < {alpha}", rule, ev, t.method)
        elif f:
            v = Verdict(FAILS, f"Holm p {af:.3g} < {alpha} against the margin "
                        f"{t.delta:g}", rule, ev, t.method)
        elif i not in sides["holds"] and i not in sides["fails"]:
            if t.n_null is not None:    # n_tests / (n_null + 1) < alpha
                size = f"{t.n_null} null draws"
                need = f"{int(math.floor(t.n_tests / alpha + 1e-9))} null draws"
            else:
                size = f"{t.n_groups} groups"
                need = f"{ev['groups_to_decide'] or '?'} groups (planned at the margin)"
            v = Verdict(NOT_TESTED, f"with {size} the smallest p this test can give is "
                        f"{t.smallest_p:.3g}, not below {alpha}", rule, ev, t.method,
                        needed=need)
        else:
            v = Verdict(INCONCLUSIVE, "neither a difference nor its absence is shown (Holm "
                        f"p {_f3(ah)} / {_f3(af)})", rule, ev, t.method)
        out[i] = v
    return out


def _f3(p: float) -> str:
    return "—" if math.isnan(p) else f"{p:.3g}"


def interval_verdict(diff: Mapping[str, Any], delta: float, kind: str = "beats") -> Verdict:
    """One claim alone (a family of one) from a paired-difference dict."""
    return decide_family([claim_test(Difference.from_row(diff), kind, delta)])[0]


# ------------------------------------------------------------------ shared checks

def interval_note(lo: float | None, hi: float | None, n_groups: int | None) -> str | None:
    """Why an interval is not an ordinary 95% CI (None: it is)."""
    if lo is None or hi is None:
        return None
    if n_groups is not None and n_groups <= 1:
        return "n/a, 1 group"
    if hi - lo <= 0:
        return "n/a, zero width: one group, or every resample alike"
    if n_groups is not None and n_groups < MIN_BOOTSTRAP_GROUPS:
        return f"small sample: {n_groups} groups (the test uses the group differences)"
    return None


def beats_chance(acc_lo: float | None, chance: float = 0.5, *, n_groups: int | None = None
                 ) -> bool:
    """A probe or judge works: its held-out accuracy CI's lower end is above chance, over 2+
    test groups where known (one group's interval, every resample the same, shows no skill)."""
    if acc_lo is None or not np.isfinite(acc_lo) or acc_lo <= chance:
        return False
    return n_groups is None or n_groups >= 2


def no_skill(acc_lo: float | None, n_groups: int | None, chance: float = 0.5) -> str:
    """Why :func:`beats_chance` refused, in a precondition's words."""
    if n_groups is not None and n_groups < 2:
        return f"it rests on {n_groups} test group{'s' if n_groups != 1 else ''}"
    lo = "n/a" if acc_lo is None else f"{acc_lo:.3f}"
    return f"its 95% CI's lower end {lo} is not above chance ({chance:g})"


# ------------------------------------------------------------------ transfer

def transfer_refusal(kind_a: str | None, kind_b: str | None) -> str | None:
    """Why a probe of one prompt kind is not scored on another (None: same kind, or unknown):
    which of "Choice 1/2" maps onto which of "True/False" is arbitrary, so a below-chance cell
    would only reflect that mapping, not a failed transfer."""
    if kind_a and kind_b and kind_a != kind_b:
        return (f"{kind_a} -> {kind_b}: prompt kinds differ, so the answer mapping between them "
                "is arbitrary")
    return None
