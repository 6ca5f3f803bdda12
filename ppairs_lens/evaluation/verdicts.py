"""Verdicts on the published claims: typed outcomes, rules that can go either way.

An outcome (:class:`Outcome`) is *holds*, *fails*, *inconclusive* (the data could have decided
but did not) or *not tested at this size* (no result this run could produce would decide it:
too few groups, a judge that never changes its answer; the size that would test it is given).
A :class:`Verdict` carries the outcome, why, the rule, which interval or test was used and
the numbers. The functions are pure: they take numbers and decide.

Rules, by the kind of claim (each with a smallest effect of interest ``delta``):

* **beats** ("A beats B", the difference ``A - B``): holds when the difference is shown above 0
  (the 95% CI's lower end above 0); fails when it is shown below ``+delta`` (A is not better
  by the smallest effect worth reporting: the upper end below ``delta``); else inconclusive.
* **unchanged** ("removing the direction leaves the judgement unchanged"): holds by
  equivalence within ``±delta`` (two one-sided tests, TOST, at 5%: the 90% CI inside);
  fails when a change is shown (the difference's 95% CI excludes 0 and equivalence is not
  shown); else inconclusive.
* **changes** (ablation, steering, agreement of directions): holds when significant; fails
  only when equivalence within ``±delta`` is shown; non-significance alone is inconclusive.

Each test is two one-sided p-values (:class:`ClaimTest`: one for "holds", one for "fails"),
and :func:`decide_family` applies Holm's step-down correction to each over the claims of one
family. The p-values come from a valid interval at the size used: a group bootstrap interval
only over at least :data:`~ppairs_lens.evaluation.bootstrap.MIN_BOOTSTRAP_GROUPS` groups (p by
the normal approximation of that interval, ``SE = width / 3.92``); with fewer groups the
sign-flip permutation test on the group-level differences
(:func:`~ppairs_lens.evaluation.sign_flip.sign_flip_test`), whose smallest attainable p is
checked against Holm's first threshold before anything is concluded.
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
from ppairs_lens.evaluation.power import (
    equivalence_groups_needed,
    groups_needed,
    sd_from_interval,
)
from ppairs_lens.evaluation.sign_flip import groups_for_p, sign_flip_test

__all__ = ["ALPHA", "CLAIM_KINDS", "FAILS", "HOLDS", "INCONCLUSIVE", "NOT_TESTED", "ClaimTest",
           "Difference", "Outcome", "Verdict", "beats_chance", "claim_test", "decide_family",
           "groups_to_decide", "holm", "intersection_test", "interval_p", "interval_verdict",
           "transfer_refusal"]

#: Level of every claim's test (two-sided 95% intervals; TOST at 5% reads the 90% interval).
ALPHA = 0.05
#: The kinds of claim and the rule each gets (module doc).
CLAIM_KINDS = ("beats", "unchanged", "changes")


class Outcome(StrEnum):
    """A claim's outcome; its value is the word the report prints."""

    HOLDS = "holds"
    FAILS = "fails"
    INCONCLUSIVE = "inconclusive"
    NOT_TESTED = "not tested at this size"


HOLDS, FAILS = Outcome.HOLDS, Outcome.FAILS
INCONCLUSIVE, NOT_TESTED = Outcome.INCONCLUSIVE, Outcome.NOT_TESTED


@dataclass(frozen=True)
class Verdict:
    """A claim's outcome, why, the rule applied, the interval or test used (``method``), the
    numbers it rests on, and (not tested) the size that would test it (``needed``)."""

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
        """``"holds: reason"`` etc., for a caption or the README."""
        return f"{self.outcome}: {self.reason}"

    def __str__(self) -> str:
        return self.text

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "outcome": str(self.outcome)}


# ------------------------------------------------------------------ differences and tests

def _num(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class Difference:
    """A claim's statistic on this run: the difference, its 95% bootstrap interval, the
    groups that interval resampled, the pairs, and (where recorded) one difference per group
    for the sign-flip test."""

    value: float | None
    lo: float | None = None
    hi: float | None = None
    n_groups: int | None = None
    n_pairs: int | None = None
    group_diffs: tuple[float, ...] | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any], value_key: str = "value") -> "Difference":
        """From a paired-difference dict (``value``/``lo``/``hi``/``n_groups``/``n``/
        ``group_diffs``; ``value_key`` names the value where a row calls it otherwise)."""
        gd = row.get("group_diffs")
        n_groups = row.get("n_groups")
        return cls(_num(row.get(value_key)), _num(row.get("lo")), _num(row.get("hi")),
                   None if n_groups is None else int(n_groups),
                   None if row.get("n") is None else int(row["n"]),
                   None if gd is None else tuple(float(x) for x in gd))


@dataclass(frozen=True)
class ClaimTest:
    """The two one-sided tests of one claim, each as a p comparable with :data:`ALPHA`
    (``p_holds``: against "the claim is false in its own direction"; ``p_fails``: against
    "it is not false by the margin"), the smallest p reachable at this size, the method, and
    what the power table needs (the observed value and group-level SD). A test against
    ``n_null`` null draws (a permutation test, ``n_tests`` of them pooled in the claim by
    Bonferroni) says so: its size is counted in null draws, not groups."""

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


def _normal_p(value: float, se: float, shift: float, greater: bool) -> float:
    if se <= 0:
        return 0.0 if (value > shift if greater else value < shift) else 1.0
    z = (value - shift) / se
    return float(norm.sf(z) if greater else norm.cdf(z))


def interval_p(value: float, lo: float, hi: float, shift: float, greater: bool,
               level: float = 1 - ALPHA) -> float:
    """One-sided p of ``mean > shift`` (``greater``) or ``mean < shift`` from a ``level``
    interval ``[lo, hi]`` around ``value``, by its normal approximation
    (``SE = (hi - lo) / (2 z_{(1 + level) / 2})``): the p every interval-based claim uses."""
    return _normal_p(value, (hi - lo) / (2 * norm.ppf(0.5 + level / 2)), shift, greater)


def _one_sided(d: Difference, shift: float, greater: bool, seed: int, boot: bool
               ) -> tuple[float, float]:
    """(p, smallest reachable p) of one one-sided test at ``shift``: the interval's normal
    approximation where ``claim_test`` chose the bootstrap, else the sign-flip test (one
    choice, made once: a row's group count alone must not switch the route)."""
    if boot:
        return interval_p(d.value, d.lo, d.hi, shift, greater), 0.0
    t = sign_flip_test(d.group_diffs, shift=shift, alternative="greater" if greater else "less",
                       seed=seed)
    return t.p, t.smallest_p


def claim_test(d: Difference, kind: str, delta: float, *, seed: int = 0
               ) -> ClaimTest | Verdict:
    """The :class:`ClaimTest` of a claim of ``kind`` (:data:`CLAIM_KINDS`) with margin
    ``delta`` on ``d``, or a *not tested* :class:`Verdict` when no valid test exists here
    (no value; fewer than the bootstrap's minimum groups and no group differences)."""
    if kind not in CLAIM_KINDS:
        raise ValueError(f"unknown claim kind {kind!r}; use one of {CLAIM_KINDS}")
    if delta is None or not delta > 0:
        raise ValueError(f"a {kind!r} claim needs a smallest effect of interest delta > 0, "
                         f"got {delta!r}")
    k = d.n_groups or 0
    boot = k >= MIN_BOOTSTRAP_GROUPS and None not in (d.value, d.lo, d.hi)
    flips = [x for x in (d.group_diffs or ()) if math.isfinite(x)]
    if d.value is None or (not boot and len(flips) < 2):
        had = ("the row records no group count" if d.n_groups is None else f"{k} groups")
        why = ("no value: nothing was scored" if d.value is None else
               f"{had}: a bootstrap interval needs {MIN_BOOTSTRAP_GROUPS} and no "
               "group-level differences were recorded for a sign-flip test")
        ev: dict[str, Any] = {"n_groups": d.n_groups, "n_pairs": d.n_pairs, "value": d.value}
        if None not in (d.value, d.lo, d.hi) and k >= 2:   # power from the interval shown
            ev["groups_to_decide"] = _groups_for(kind, d.value, delta,
                                                 sd_from_interval(d.lo, d.hi, k), 0.8)
        return Verdict(NOT_TESTED, why, method="none",
                       needed=f"{MIN_BOOTSTRAP_GROUPS} groups", evidence=ev)
    if boot:
        method = f"group bootstrap 95% CI over {k} groups (p by its normal approximation)"
        sd = sd_from_interval(d.lo, d.hi, k)
    else:
        d = Difference(float(np.mean(flips)), d.lo, d.hi, len(flips), d.n_pairs, tuple(flips))
        k = len(flips)
        method = "sign-flip permutation test on group-level differences"
        sd = float(np.std(flips, ddof=1))
    one = lambda s, g: _one_sided(d, s, g, seed, boot)  # noqa: E731
    if kind == "beats":                  # p's doubled: comparable with the two-sided ALPHA
        (ph, sh), (pf, sf) = one(0.0, True), one(delta, False)
        ph, pf, small = min(1.0, 2 * ph), min(1.0, 2 * pf), min(1.0, 2 * min(sh, sf))
    else:
        (gp, gs), (lp, ls) = one(0.0, True), one(0.0, False)
        change = min(1.0, 2 * min(gp, lp))
        (ap, as_), (bp, bs) = one(-delta, True), one(delta, False)
        equiv = max(ap, bp)
        small = min(min(1.0, 2 * min(gs, ls)), max(as_, bs))
        ph, pf = (change, equiv) if kind == "changes" else (equiv, change)
    if not boot:
        method += f" ({'exact' if k <= 16 else 'Monte Carlo'}, {k} groups)"
    return ClaimTest(kind, float(delta), ph, pf, small, method, float(d.value), sd, k,
                     d.n_pairs)


def intersection_test(tests: Sequence[ClaimTest | Verdict]) -> ClaimTest | Verdict:
    """"A beats each of B_1..B_m" (e.g. every no-model baseline: the strongest with no choice
    of which, so nothing is chosen on test pairs) from one claim test per comparator: holds
    only when each holds (intersection-union test: ``p`` the largest, no correction needed);
    fails when any one fails (Bonferroni: ``m`` times the smallest). A comparator that could
    not be tested keeps the claim from holding. The value, SD and sizes are those of the
    comparator closest to the probe (smallest difference)."""
    ok = [t for t in tests if isinstance(t, ClaimTest)]
    if not tests:
        raise ValueError("an intersection test needs at least one comparison")
    if not ok:                        # none testable: report the comparator closest to A
        return min(tests, key=lambda v: _num(v.evidence.get("value")) or math.inf)
    m = len(ok)
    worst = min(ok, key=lambda t: t.value)
    p_h = 1.0 if len(ok) < len(tests) else max(t.p_holds for t in ok)
    p_f = min(1.0, m * min(t.p_fails for t in ok))
    small = min(max(t.smallest_p for t in ok), min(1.0, m * min(t.smallest_p for t in ok)))
    return ClaimTest(worst.kind, worst.delta, p_h, p_f, small,
                     f"intersection-union over {len(tests)} comparators ({len(ok)} tested); "
                     f"{worst.method}", worst.value, worst.sd, worst.n_groups, worst.n_pairs)


def _groups_for(kind: str, value: float, delta: float, sd: float, power: float,
                m: int = 1) -> int | None:
    """At Holm's strictest threshold ``ALPHA / m``: a two-sided test of a difference at
    ``ALPHA / (2 m)`` one-sided; an equivalence (TOST) at ``ALPHA / m`` on each side, with the
    power of *both* one-sided tests passing."""
    a = ALPHA / max(m, 1)
    if not (math.isfinite(value) and math.isfinite(sd)):
        return None
    one = lambda x: groups_needed(x, sd, alpha=a / 2, power=power)  # noqa: E731
    if kind == "beats":
        found = [one(value), one(delta - value)]
    else:
        equiv = equivalence_groups_needed(value, delta, sd, alpha=a, power=power)
        found = [one(abs(value)), equiv]
    found = [n for n in found if n is not None]
    return min(found) if found else None


def groups_to_decide(t: ClaimTest, power: float = 0.8, m: int = 1) -> int | None:
    """Groups that would decide the observed effect with ``power`` in a family of ``m`` tests
    (normal approximation from the observed group-level SD at Holm's first threshold
    ``ALPHA / m``, :func:`~ppairs_lens.evaluation.power.groups_needed`; an equivalence by the
    power of both one-sided tests,
    :func:`~ppairs_lens.evaluation.power.equivalence_groups_needed`): the fewer of the two
    directions the value leans towards; None for a test counted in null draws."""
    if t.n_null is not None or not (t.delta and math.isfinite(t.delta)):
        return None
    return _groups_for(t.kind, t.value, t.delta, t.sd, power, m)


def holm(p: Sequence[float]) -> Float[np.ndarray, "m"]:
    """Holm-adjusted p-values (step-down, monotone, capped at 1); NaN stays NaN and is not
    counted among the tests."""
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
    what = {"beats": f"holds when the difference is above 0, fails when it is below +{delta:g}",
            "unchanged": f"holds by equivalence within ±{delta:g} (TOST), fails when a change "
                         "is shown",
            "changes": f"holds when a change is shown, fails only by equivalence within "
                       f"±{delta:g} (TOST)"}[kind]
    return f"{kind}: {what}; Holm over the {m} claims of its family at {ALPHA}"


def decide_family(tests: Sequence[ClaimTest | Verdict], alpha: float = ALPHA) -> list[Verdict]:
    """Verdicts of one family of claims: Holm over the family's "holds" p-values and,
    separately, over its "fails" p-values; a claim whose smallest reachable p cannot pass
    Holm's first threshold ``alpha / m`` is *not tested at this size* (with the groups an
    exact sign-flip test would need). Verdicts passed in (already not tested) stay."""
    idx = [i for i, t in enumerate(tests) if isinstance(t, ClaimTest)]
    m = len(idx)
    adj_h = holm([tests[i].p_holds for i in idx])
    adj_f = holm([tests[i].p_fails for i in idx])
    out: list[Verdict] = [t if isinstance(t, Verdict) else None for t in tests]  # type: ignore
    for j, i in enumerate(idx):
        t: ClaimTest = tests[i]  # type: ignore[assignment]
        ev = {"value": t.value, "p_holds": t.p_holds, "p_fails": t.p_fails,
              "p_holds_holm": float(adj_h[j]), "p_fails_holm": float(adj_f[j]),
              "smallest_p": t.smallest_p, "family_size": m, "n_groups": t.n_groups,
              "n_pairs": t.n_pairs, "group_sd": t.sd, "delta": t.delta,
              "groups_to_decide": groups_to_decide(t, m=m), "n_null": t.n_null}
        rule = _rule(t.kind, t.delta, m)
        if adj_h[j] < alpha:
            v = Verdict(HOLDS, f"Holm p {adj_h[j]:.3g} < {alpha}", rule, ev, t.method)
        elif adj_f[j] < alpha:
            v = Verdict(FAILS, f"Holm p {adj_f[j]:.3g} < {alpha} against the margin "
                        f"{t.delta:g}", rule, ev, t.method)
        elif t.smallest_p >= alpha / m:
            if t.n_null is not None:    # n_tests / (n_null + 1) < alpha / m
                size = f"{t.n_null} null draws"
                need = f"{int(math.floor(t.n_tests * m / alpha + 1e-9))} null draws"
            else:
                size = f"{t.n_groups} groups"
                need = f"{groups_for_p(alpha / (2 * m) if t.kind == 'beats' else alpha / m)}" \
                       " groups"
            v = Verdict(NOT_TESTED, f"with {size} the smallest p this test can give is "
                        f"{t.smallest_p:.3g}, not below Holm's first threshold {alpha}/{m}",
                        rule, ev, t.method, needed=need)
        else:
            v = Verdict(INCONCLUSIVE, f"neither a difference nor its absence is shown (Holm "
                        f"p {adj_h[j]:.3g} / {adj_f[j]:.3g})", rule, ev, t.method)
        out[i] = v
    return out


def interval_verdict(diff: Mapping[str, Any], delta: float, kind: str = "beats") -> Verdict:
    """One claim alone (a family of one) from a paired-difference dict
    (:meth:`Difference.from_row`)."""
    return decide_family([claim_test(Difference.from_row(diff), kind, delta)])[0]


# ------------------------------------------------------------------ shared checks

def beats_chance(acc_lo: float | None, chance: float = 0.5) -> bool:
    """A probe or judge works: its held-out accuracy CI's lower end is above chance."""
    return acc_lo is not None and bool(np.isfinite(acc_lo)) and acc_lo > chance



# ------------------------------------------------------------------ transfer

def transfer_refusal(kind_a: str | None, kind_b: str | None) -> str | None:
    """Why a probe of one prompt kind is not scored on another (None: same kind, or unknown).

    A comparison prompt ends in "Choice 1/2", a statement prompt in "True/False": which of one
    maps onto which of the other is arbitrary, so a below-chance cell would only reflect that
    mapping, not a failed transfer.
    """
    if kind_a and kind_b and kind_a != kind_b:
        return (f"{kind_a} -> {kind_b}: prompt kinds differ, so the answer mapping between them "
                "is arbitrary")
    return None
