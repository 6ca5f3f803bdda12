"""Every tested claim of a family enters that family's Holm: the intervention claims (ablation,
steering) and direction agreement are pooled as p-values, never decided alone; the power
table's sizes are those at which the equivalence or Holm test could pass."""

from __future__ import annotations

import pytest

import analyses.replication.claims as claims
from analyses.replication.claims import CLAIMS, evaluate_claims
from ppairs_lens.interventions.conditions import BASELINE, CONTROL_AT_READOUT
from ppairs_lens.evaluation.intervention_tests import equivalence_test, permutation_union_test
from ppairs_lens.evaluation.verdicts import equivalence_groups_needed, groups_needed
from ppairs_lens.evaluation.verdicts import (
    FAILS,
    HOLDS,
    NOT_TESTED,
    ClaimTest,
    Verdict,
    claim_test,
    decide_family,
    Difference,
)

POOLED = ("ours: interventions change the judgement", "ablation leaves the judgement unchanged")


def _delta(v, half, half90):
    return {"": v, "_lo": v - half, "_hi": v + half, "_tost_lo": v - half90,
            "_tost_hi": v + half90}


def _ablation_row(cond, v=0.0, p=0.001, k=25, **kw):
    r = {"dataset": "mt-bench", "preset": "paper", "condition": cond, "kind": "probe",
         "n": 3 * k, "n_groups": k, "accuracy_margin": 0.05, "logodds_margin": 0.2,
         "p_matched": p, "n_matched": 400, "effect": 0.1, **kw}
    for stat, half in (("f1", 0.02), ("logodds", 0.05)):
        r.update({f"delta_{stat}{t}": x for t, x in _delta(v, half, half * 0.84).items()})
    return r


def _summary(equal=True):
    ablation = [{"dataset": "mt-bench", "preset": "paper", "condition": BASELINE,
                 "kind": "baseline", "judge_accuracy_lo": 0.7, "same_answer_share": 0.6},
                {"dataset": "mt-bench", "preset": "paper", "condition": CONTROL_AT_READOUT,
                 "kind": "control", "delta_f1": -0.3, "delta_f1_lo": -0.4,
                 "delta_f1_hi": -0.2}]
    ablation += [_ablation_row(c, 0.0 if equal else 0.3) for c in ("supervised", "pca",
                                                                     "mass_mean")]
    steering = [{"condition": c, "kind": "probe", "p_slope_matched": p, "n_slope_matched": 400,
                 "slope": 0.2} for c, p in (("supervised", 0.002), ("pca", 0.5),
                                            ("mass_mean", 0.5))]
    ev = {"used": ["a", "b", "c"], "mean_abs_cos": 0.8, "n_pairs": 3,
          "p_isotropic": 1 / 2001, "p_covariance": 1 / 2001}
    agreement = {"outcome": "holds", "reason": "r", "rule": "2000 draws each", "evidence": ev}
    transfer = {k: {"agreement": agreement} for k in ("pca", "supervised")}
    return {"ablation": ablation, "steering": steering, "transfer": transfer, "judges": {}}


def test_every_tested_member_of_a_pooled_family_enters_its_holm():
    out = evaluate_claims({**_summary(), "model": "google/gemma-2-9b-it"}, None)
    for fam in POOLED:
        rows = [r for r in out["claims"] if r["family"] == fam]
        assert rows and len(rows) == sum(c.family == fam for c in CLAIMS)
        for r in rows:      # each tested: a Holm-adjusted p over the whole family
            assert r["outcome"] != str(NOT_TESTED), (r["id"], r["reason"])
            assert r["p_holds_holm"] is not None, r["id"]
        sizes = {r["id"]: r["family_size"] for r in rows}
        assert set(sizes.values()) == {len(rows)}, sizes
    by = {r["id"]: r for r in out["claims"]}
    assert by["table2.supervised-unchanged"]["outcome"] == str(HOLDS)    # 90% CIs inside
    assert by["ours.steering.changes"]["outcome"] == str(HOLDS)          # 3 x 0.002 < 0.025
    # against its nulls the agreement could only hold: without an interval it is not tested
    assert by["fig5.pca-agree"]["outcome"] != str(HOLDS)
    changed = {r["id"]: r for r in evaluate_claims(
        {**_summary(equal=False), "model": "google/gemma-2-9b-it"}, None)["claims"]}
    assert changed["table2.pca-unchanged"]["outcome"] == str(FAILS)       # a change shown


def test_a_reader_that_decides_a_claim_alone_is_refused(monkeypatch):
    decided = lambda c, s, sw: Verdict(HOLDS, "decided alone")  # noqa: E731
    monkeypatch.setitem(claims.READERS, "steering", decided)
    with pytest.raises(ValueError, match="outside the Holm"):
        evaluate_claims({}, None)


def test_permutation_claims_name_the_null_draws_they_need():
    t = permutation_union_test([0.1, 0.2, 0.5], 10, delta=0.05, value=0.1)
    assert isinstance(t, ClaimTest) and t.p_holds == pytest.approx(0.3)
    two = decide_family([t, t])
    # a side whose smallest p cannot pass 5% is not counted in Holm's m: 3 / 0.05
    assert two[0].outcome == NOT_TESTED and two[0].needed == "60 null draws"


def test_equivalence_needs_twenty_groups_and_a_judge_that_decides():
    row = _ablation_row("pca", k=9)
    assert equivalence_test(row, margins={"f1": 0.05}, n_groups=9).outcome == NOT_TESTED
    v = equivalence_test(row, margins={"f1": 0.05}, n_groups=25, precondition="no judge")
    assert v.outcome == NOT_TESTED and v.reason == "no judge"


def test_equivalence_size_counts_both_one_sided_tests():
    # at a true difference of 0 both sides must pass: z_{0.95} + z_{0.90}, not z_{0.975} + z_{0.8}
    n = equivalence_groups_needed(0.0, 0.05, 0.2)
    assert n == pytest.approx(((1.6449 + 1.2816) * 0.2 / 0.05) ** 2, abs=1.5)
    assert n > groups_needed(0.05, 0.2)
    assert equivalence_groups_needed(0.06, 0.05, 0.2) is None
    # a simulated TOST at that size passes with about the power asked for
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(0.0, 0.2, size=(4000, n))
    m, se = x.mean(1), x.std(1, ddof=1) / np.sqrt(n)
    passed = ((m - 1.6449 * se > -0.05) & (m + 1.6449 * se < 0.05)).mean()
    assert 0.77 < passed < 0.85
    # the power table uses it, at Holm's first threshold for the family's size
    t = claim_test(Difference(0.0, -0.03, 0.03, n_groups=25, n_pairs=75), "unchanged", 0.05)
    one, four = (decide_family([t] * m)[0].evidence["groups_to_decide"] for m in (1, 4))
    assert four > one >= equivalence_groups_needed(0.0, 0.05, t.sd) - 1
