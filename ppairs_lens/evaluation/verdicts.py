"""Verdicts on the paper's claims, each drawn with the statistic the claim needs.

A verdict is one of :data:`HOLDS`, :data:`FAILS` or :data:`UNDECIDED` ("cannot be decided
here"), with the reason in words and the numbers it rests on (:class:`Verdict`). The functions
here are pure: they take numbers (intervals, p-values, directions) and decide; the analyses
compute those numbers and call them.

* :func:`cosine_agreement_verdict`: "probe directions agree across datasets". The statistic is
  the mean |cos| over every pair of the directions of probes that beat chance in distribution;
  it is compared with the *same* statistic (same number of directions, so same number of
  pairs) under two nulls: isotropic random unit vectors (:func:`isotropic_mean_abs_cos`) and
  random vectors drawn from each dataset's own training contrast covariance
  (:func:`covariance_mean_abs_cos`), since the residual stream is anisotropic.
* :func:`ablation_changes_verdict`: "ablating the direction changes the judgement": Holm-
  corrected permutation p-values; undecided when even the smallest reachable p (``1 /
  (n_null + 1)``) cannot pass Holm's smallest threshold.
* :func:`ablation_unchanged_verdict`: "ablating the direction leaves the judgement unchanged":
  an equivalence test (two one-sided tests, i.e. the ``1 - 2 alpha`` CI inside the margin) on
  Δaccuracy and on the Δlog-odds margin, on a judge that decides, with a positive control that
  shows the read-out can move the judgement at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
from jaxtyping import Float

__all__ = ["FAILS", "HOLDS", "UNDECIDED", "Verdict", "ablation_changes_verdict",
           "ablation_unchanged_verdict", "beats_chance", "covariance_mean_abs_cos", "holm",
           "isotropic_mean_abs_cos", "judge_decides", "mean_abs_pairwise_cos",
           "cosine_agreement_verdict", "cosine_rule", "interval_verdict", "permutation_p",
           "transfer_refusal", "unchanged_rule"]

HOLDS = "holds"
FAILS = "fails"
UNDECIDED = "cannot be decided here"


@dataclass(frozen=True)
class Verdict:
    """A claim's outcome (:data:`HOLDS` / :data:`FAILS` / :data:`UNDECIDED`), why, the rule
    applied and the numbers it rests on."""

    outcome: str
    reason: str
    rule: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.outcome not in (HOLDS, FAILS, UNDECIDED):
            raise ValueError(f"unknown outcome {self.outcome!r}")

    @property
    def text(self) -> str:
        """``"holds: reason"`` etc., for a caption or the README."""
        return f"{self.outcome}: {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------ cosine agreement

def beats_chance(acc_lo: float | None, chance: float = 0.5) -> bool:
    """A probe works in distribution: its held-out accuracy CI's lower end is above chance."""
    return acc_lo is not None and bool(np.isfinite(acc_lo)) and acc_lo > chance


def mean_abs_pairwise_cos(directions: Float[np.ndarray, "m d"]) -> float:
    """Mean |cos| over every unordered pair of rows."""
    u = np.asarray(directions, dtype=float)
    u = u / np.linalg.norm(u, axis=1, keepdims=True)
    c = u @ u.T
    i, j = np.triu_indices(len(u), k=1)
    return float(np.abs(c[i, j]).mean())


def _pairwise_stat(u: Float[np.ndarray, "s m d"]) -> Float[np.ndarray, "s"]:
    u = u / np.linalg.norm(u, axis=-1, keepdims=True)
    c = np.einsum("smd,snd->smn", u, u)
    i, j = np.triu_indices(u.shape[1], k=1)
    return np.abs(c[:, i, j]).mean(1)


def isotropic_mean_abs_cos(m: int, d: int, n_sim: int = 2000, seed: int = 0
                           ) -> Float[np.ndarray, "n_sim"]:
    """The statistic under the isotropic null: mean |cos| over all pairs of ``m`` independent
    uniform unit vectors in ``R^d``, ``n_sim`` times (seeded)."""
    rng = np.random.default_rng(seed)
    out = [_pairwise_stat(rng.standard_normal((min(500, n_sim - s), m, d)))
           for s in range(0, n_sim, 500)]
    return np.concatenate(out)


def covariance_mean_abs_cos(features: Sequence[Float[np.ndarray, "n d"]], n_sim: int = 2000,
                            seed: int = 0) -> Float[np.ndarray, "n_sim"]:
    """The statistic under the residual stream's own geometry: direction ``i`` is ``g' X_i``
    (``g ~ N(0, I)``, ``X_i`` the centred training contrast differences of dataset ``i``, so
    its covariance is ``X_i' X_i``), normalised; mean |cos| over all pairs, ``n_sim`` times."""
    rng = np.random.default_rng(seed)
    xs = [np.asarray(x, dtype=float) - np.asarray(x, dtype=float).mean(0) for x in features]
    out = []
    for s in range(0, n_sim, 500):
        b = min(500, n_sim - s)
        out.append(_pairwise_stat(np.stack([rng.standard_normal((b, len(x))) @ x for x in xs],
                                           axis=1)))
    return np.concatenate(out)


def permutation_p(observed: float, null: Float[np.ndarray, "n"]) -> float:
    """One-sided ``(1 + #{null >= observed}) / (1 + n)``."""
    null = np.asarray(null, dtype=float)
    return float((1 + np.sum(null >= observed)) / (1 + len(null)))


def _frac(p: float, n_sim: int) -> str:
    """A permutation p as the exact count it is, ``k/(n_sim + 1)`` (no rounding to 0)."""
    return f"{round(p * (n_sim + 1))}/{n_sim + 1}"


def cosine_rule(chance: float = 0.5, n_sim: int = 2000, alpha: float = 0.01) -> str:
    """The rule :func:`cosine_agreement_verdict` applies, in words."""
    return (f"mean |cos| over all pairs of directions of probes whose in-distribution accuracy "
            f"CI lower end is above {chance}, against the same statistic for as many random "
            f"directions (isotropic, and drawn from each dataset's training contrast "
            f"covariance; {n_sim} draws each): one-sided p < {alpha} against both")


def cosine_agreement_verdict(directions: Sequence[Float[np.ndarray, "d"]],
                             accuracy_lo: Sequence[float | None], *,
                             features: Sequence[Float[np.ndarray, "n d"]] | None = None,
                             names: Sequence[str] | None = None, n_sim: int = 2000,
                             seed: int = 0, alpha: float = 0.01, chance: float = 0.5
                             ) -> Verdict:
    """Do the directions of probes that work agree across datasets (module doc)?

    ``directions[i]`` is dataset ``i``'s probe direction, ``accuracy_lo[i]`` the lower end of
    its in-distribution held-out accuracy CI, ``features[i]`` its training contrast
    differences at the same read-out (the covariance null; None: isotropic only, and then the
    claim cannot hold). Holds when the statistic beats both nulls at ``alpha``; fails when it
    does not beat one of them; undecided with fewer than 2 probes above chance.
    """
    names = list(names or [str(i) for i in range(len(directions))])
    keep = [i for i, lo in enumerate(accuracy_lo) if beats_chance(lo, chance)]
    rule = cosine_rule(chance, n_sim, alpha)
    ev: dict[str, Any] = {"used": [names[i] for i in keep],
                          "below_chance": [names[i] for i in range(len(names)) if i not in keep]}
    if len(keep) < 2:
        return Verdict(UNDECIDED, f"only {len(keep)} of {len(names)} probes beat chance in "
                       f"distribution; agreement needs at least 2", rule, ev)
    if 1 / (n_sim + 1) >= alpha:  # no draw count could pass: "fails" would be claimed blind
        return Verdict(UNDECIDED, f"with {n_sim} null draws the smallest p is 1/{n_sim + 1}, "
                       f"not below {alpha} (that needs at least {int(np.ceil(1 / alpha))} "
                       "draws)", rule, ev)
    dirs = np.stack([np.asarray(directions[i], dtype=float) for i in keep])
    obs = mean_abs_pairwise_cos(dirs)
    iso = isotropic_mean_abs_cos(len(keep), dirs.shape[1], n_sim, seed)
    ev.update(mean_abs_cos=obs, n_pairs=len(list(combinations(keep, 2))),
              isotropic_p99=float(np.quantile(iso, 0.99)), p_isotropic=permutation_p(obs, iso))
    cov = None
    if features is not None:
        cov = covariance_mean_abs_cos([features[i] for i in keep], n_sim, seed + 1)
        ev.update(covariance_p99=float(np.quantile(cov, 0.99)),
                  p_covariance=permutation_p(obs, cov))
    if ev["p_isotropic"] >= alpha:
        return Verdict(FAILS, f"mean |cos| {obs:.3f} is within the isotropic null (p = "
                       f"{_frac(ev['p_isotropic'], n_sim)})", rule, ev)
    if cov is None:
        return Verdict(UNDECIDED, f"mean |cos| {obs:.3f} beats the isotropic null, but no "
                       "covariance null was drawn (no training contrasts given)", rule, ev)
    if ev["p_covariance"] >= alpha:
        return Verdict(FAILS, f"mean |cos| {obs:.3f} beats isotropic vectors but not random "
                       f"directions of the residual stream's own covariance (p = "
                       f"{_frac(ev['p_covariance'], n_sim)})", rule, ev)
    return Verdict(HOLDS, f"mean |cos| {obs:.3f} beats both nulls (p = "
                   f"{_frac(ev['p_isotropic'], n_sim)}, {_frac(ev['p_covariance'], n_sim)})",
                   rule, ev)


# ------------------------------------------------------------------ ablation

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


def ablation_changes_verdict(p_values: Sequence[float], n_null: int, alpha: float = 0.05,
                             names: Sequence[str] | None = None) -> Verdict:
    """"Ablating these directions changes the judgement": holds for the directions whose
    Holm-adjusted permutation p (over all ``p_values``, one family) is below ``alpha``; fails
    when none is; undecided when ``1 / (n_null + 1)`` is above Holm's smallest threshold
    ``alpha / m`` (no result could pass)."""
    p = np.asarray(p_values, dtype=float)
    m = int(np.isfinite(p).sum())
    names = list(names or [str(i) for i in range(len(p))])
    rule = (f"permutation p against {n_null} null directions, Holm-corrected over the {m} "
            f"tests, below {alpha}")
    adj = holm(p)
    ev = {"p": p.tolist(), "p_holm": adj.tolist(), "n_null": n_null, "n_tests": m,
          "smallest_reachable_p": 1 / (n_null + 1), "holm_threshold": alpha / max(m, 1)}
    if m == 0:
        return Verdict(UNDECIDED, "no test was made", rule, ev)
    if 1 / (n_null + 1) > alpha / m:
        return Verdict(UNDECIDED, f"with {n_null} null directions the smallest p is "
                       f"1/{n_null + 1}, above Holm's threshold {alpha}/{m} for {m} tests "
                       f"(that needs at least {int(np.ceil(m / alpha)) - 1} null directions)",
                       rule, ev)
    moved = [n for n, a in zip(names, adj) if np.isfinite(a) and a < alpha]
    ev["moved"] = moved
    if moved:
        return Verdict(HOLDS, f"{', '.join(moved)} move the judgement more than the null "
                       f"(Holm p < {alpha})", rule, ev)
    return Verdict(FAILS, f"no direction moves the judgement more than the null (smallest Holm "
                   f"p {np.nanmin(adj):.3f})", rule, ev)


def _inside(ci: Sequence[float], margin: float) -> bool:
    return bool(np.all(np.isfinite(ci))) and -margin < ci[0] and ci[1] < margin


def _beyond(ci: Sequence[float], margin: float) -> bool:
    return bool(np.all(np.isfinite(ci))) and (ci[0] > margin or ci[1] < -margin)


def unchanged_rule(accuracy_margin: float, logodds_margin: float, alpha: float = 0.05) -> str:
    """The rule :func:`ablation_unchanged_verdict` applies, in words."""
    return (f"two one-sided tests at {alpha}: the {1 - 2 * alpha:.0%} paired CIs (leak groups "
            f"resampled) of Δaccuracy within ±{accuracy_margin} and of the Δlog-odds margin "
            f"within ±{logodds_margin}, on a judge that decides (accuracy CI above 0.5, not "
            f"the same raw answer on 95% of pairs), where the positive control at the probe's "
            f"read-out changes accuracy by more than the margin")


def ablation_unchanged_verdict(delta_accuracy_ci: Sequence[float],
                               delta_logodds_ci: Sequence[float], *, accuracy_margin: float,
                               logodds_margin: float, judge_accuracy_lo: float | None,
                               same_answer_share: float | None,
                               control_accuracy_ci: Sequence[float] | None,
                               moved_by_test: bool = False, ci_counts: bool = True,
                               alpha: float = 0.05) -> Verdict:
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
    rule = unchanged_rule(accuracy_margin, logodds_margin, alpha)
    ev = {"delta_accuracy_ci": list(map(float, delta_accuracy_ci)),
          "delta_logodds_ci": list(map(float, delta_logodds_ci)),
          "accuracy_margin": accuracy_margin, "logodds_margin": logodds_margin,
          "control_accuracy_ci": (None if control_accuracy_ci is None
                                  else list(map(float, control_accuracy_ci)))}
    decides, why = judge_decides(judge_accuracy_lo, same_answer_share)
    if not decides:
        return Verdict(UNDECIDED, why, rule, ev)
    if moved_by_test or _beyond(delta_accuracy_ci, accuracy_margin) \
            or _beyond(delta_logodds_ci, logodds_margin):
        return Verdict(FAILS, "the ablation changes the judgement beyond the margin"
                       + (" (Holm-corrected permutation test)" if moved_by_test else ""), rule, ev)
    if not ci_counts:
        return Verdict(UNDECIDED, "the CIs resample too few leak groups to count toward a claim",
                       rule, ev)
    if control_accuracy_ci is None or not _beyond(control_accuracy_ci, accuracy_margin):
        return Verdict(UNDECIDED, "the positive control at the probe's read-out does not move "
                       "the judgement beyond the margin either, so no change could be seen",
                       rule, ev)
    if _inside(delta_accuracy_ci, accuracy_margin) and _inside(delta_logodds_ci, logodds_margin):
        return Verdict(HOLDS, "Δaccuracy and Δlog-odds are both within their margins", rule, ev)
    return Verdict(UNDECIDED, "the CIs cross the margin: neither equivalence nor a change is "
                   "shown", rule, ev)


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


def interval_verdict(diff: dict) -> str:
    """"a beats b" from the paired CI of a - b (:func:`ppairs_lens.evaluation.paired.
    paired_difference`): holds when the CI lies above 0, fails below 0, else cannot be decided;
    an interval over too few groups to count (``ci_counts`` False) decides nothing."""
    if diff.get("ci_counts") is False:
        return f"{UNDECIDED}: the CI resamples fewer than the minimum number of groups"
    lo, hi = diff.get("lo"), diff.get("hi")
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{UNDECIDED}: no interval"
    if lo > 0:
        return HOLDS
    if hi < 0:
        return FAILS
    return f"{UNDECIDED}: the 95% CI [{lo:+.3f}, {hi:+.3f}] contains 0"
