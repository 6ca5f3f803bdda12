"""The rules that decide a claim (beats / unchanged / changes), the sign-flip test behind them
at few groups, Holm within a family, and the power approximation: planted numbers, no model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS
from ppairs_lens.evaluation.verdicts import groups_needed, sd_from_interval
from ppairs_lens.evaluation.sign_flip import groups_for_p, sign_flip_test
from ppairs_lens.evaluation.verdicts import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTED,
    ClaimTest,
    Difference,
    Outcome,
    Verdict,
    claim_test,
    decide_family,
    interval_verdict,
)
from ppairs_lens.io.outputs import jsonable


def _boot(value, lo, hi, k=30):
    return Difference(value, lo, hi, n_groups=k, n_pairs=3 * k)


# ------------------------------------------------------------------ sign flip

def test_sign_flip_exact_p_and_smallest_attainable_p():
    t = sign_flip_test([1.0, 1.0, 1.0, 1.0])           # every group positive, 4 groups
    assert t.p == pytest.approx(1 / 16) and t.smallest_p == pytest.approx(1 / 16)
    assert t.method.startswith("exact") and t.n_groups == 4
    t = sign_flip_test([1.0, 1.0, 0.0, 0.0])           # zero groups do not change sign
    assert t.smallest_p == pytest.approx(1 / 4)
    assert sign_flip_test([1.0, -1.0, 1.0, -1.0]).p > 0.5
    assert sign_flip_test([-1.0] * 5, alternative="less").p == pytest.approx(1 / 32)


def test_sign_flip_shift_tests_against_a_margin():
    d = [0.01, 0.02, -0.01, 0.0, 0.015, 0.005, 0.01, -0.005]
    assert sign_flip_test(d, shift=0.1, alternative="less").p == pytest.approx(1 / 256)


def test_sign_flip_monte_carlo_is_seeded_and_bounded():
    rng = np.random.default_rng(0)
    d = rng.normal(0.3, 1.0, 40)
    a, b = sign_flip_test(d, seed=1), sign_flip_test(d, seed=1)
    assert a == b and a.method.startswith("Monte Carlo")
    assert a.smallest_p == pytest.approx(1 / 20_001)


def test_sign_flip_refuses_fewer_than_two_groups():
    with pytest.raises(Exception, match="at least 2 groups"):
        sign_flip_test([0.3, float("nan")])


def test_sign_flip_holds_its_level_under_the_null():
    rng = np.random.default_rng(3)
    rejections = np.mean([sign_flip_test(rng.normal(0, 1, 8)).p <= 0.05 for _ in range(300)])
    assert rejections <= 0.08


# ------------------------------------------------------------------ beats

@pytest.mark.parametrize("d, want", [
    (_boot(0.2, 0.05, 0.35), HOLDS),            # lower end above 0
    (_boot(-0.1, -0.2, 0.0), FAILS),            # upper end below +delta
    (_boot(0.04, -0.01, 0.09), INCONCLUSIVE),   # crosses 0 and reaches delta
])
def test_beats_can_go_either_way(d, want):
    v = decide_family([claim_test(d, "beats", 0.05)])[0]
    assert v.outcome == want, v.reason
    assert "bootstrap" in v.method and "Holm" in v.rule


def test_beats_fails_when_equal_methods_are_measured_precisely():
    """Two truly equal methods: with enough groups the CI sits inside (-delta, +delta), so
    the claim fails instead of staying undecided at any size."""
    v = interval_verdict({"value": 0.0, "lo": -0.02, "hi": 0.02, "n_groups": 200}, 0.05)
    assert v.outcome == FAILS


def test_beats_needs_a_delta():
    with pytest.raises(ValueError, match="delta"):
        claim_test(_boot(0.2, 0.1, 0.3), "beats", None)
    with pytest.raises(ValueError, match="delta"):
        claim_test(_boot(0.2, 0.1, 0.3), "beats", 0.0)


def test_few_groups_use_the_sign_flip_test_not_the_bootstrap():
    d = Difference(0.3, 0.1, 0.5, n_groups=8, group_diffs=(0.3,) * 8)
    t = claim_test(d, "beats", 0.05)
    assert isinstance(t, ClaimTest) and "sign-flip" in t.method and "group differences" in t.method
    assert decide_family([t])[0].outcome == HOLDS     # 2 / 2^8 < 0.05


def test_too_few_groups_without_group_differences_is_not_tested():
    v = claim_test(Difference(0.3, 0.1, 0.5, n_groups=MIN_BOOTSTRAP_GROUPS - 1), "beats", 0.05)
    assert isinstance(v, Verdict) and v.outcome == NOT_TESTED
    assert v.needed == f"{MIN_BOOTSTRAP_GROUPS} groups"


def test_a_test_that_cannot_reach_holms_threshold_is_not_tested_not_inconclusive():
    # 4 groups: the smallest two-sided-equivalent p is 2/16 > 0.05
    d = Difference(0.5, None, None, n_groups=4, group_diffs=(0.5, 0.5, 0.5, 0.5))
    v = decide_family([claim_test(d, "beats", 0.05)])[0]
    assert v.outcome == NOT_TESTED and v.needed.endswith("groups (planned at the margin)")
    assert int(v.needed.split()[0]) >= groups_for_p(0.025)


def test_holm_within_a_family_can_turn_a_single_hold_into_inconclusive():
    alone = _boot(0.2, 0.01, 0.39)
    assert decide_family([claim_test(alone, "beats", 0.05)])[0].outcome == HOLDS
    family = [claim_test(alone, "beats", 0.05)] + [
        claim_test(_boot(0.0, -0.2, 0.2), "beats", 0.5) for _ in range(4)]
    v = decide_family(family)[0]
    assert v.outcome == INCONCLUSIVE and v.evidence["family_size"] == 5
    assert v.evidence["p_holds_holm"] > v.evidence["p_holds"]


# ------------------------------------------------------------------ unchanged / changes

def test_unchanged_by_tost_and_changes_only_fails_by_equivalence():
    tiny = _boot(0.0, -0.02, 0.02)
    big = _boot(-0.3, -0.4, -0.2)
    wide = _boot(0.0, -0.3, 0.3)
    out = {k: [v.outcome for v in decide_family([claim_test(d, k, 0.05) for d in
                                                 (tiny, big, wide)])]
           for k in ("unchanged", "changes")}
    assert out["unchanged"] == [HOLDS, FAILS, INCONCLUSIVE]
    assert out["changes"] == [FAILS, HOLDS, INCONCLUSIVE]


def test_a_change_inside_the_margin_is_unchanged_not_a_failure():
    """A small shift shown to be non-zero but inside ±δ: the "unchanged" claim holds (the
    margin is what "unchanged" means), the "changes" claim fails."""
    inside = _boot(0.02, 0.01, 0.03)
    assert decide_family([claim_test(inside, "unchanged", 0.05)])[0].outcome == HOLDS
    assert decide_family([claim_test(inside, "changes", 0.05)])[0].outcome == FAILS


# ------------------------------------------------------------------ records and power

def test_verdicts_are_typed_records_end_to_end():
    v = interval_verdict({"value": 0.2, "lo": 0.05, "hi": 0.35, "n_groups": 40}, 0.05)
    assert isinstance(v.outcome, Outcome) and str(v) == f"holds: {v.reason}"
    back = json.loads(json.dumps(jsonable(v)))
    assert back["outcome"] == "holds" and back["method"].startswith("group bootstrap")
    with pytest.raises(ValueError):
        Verdict("cannot be decided here", "old word")


def test_power_from_the_group_sd():
    assert sd_from_interval(-0.196, 0.196, 100) == pytest.approx(1.0, rel=1e-3)
    # (1.96 + 0.84)^2 = 7.85: an effect of one SD needs 8 groups
    assert groups_needed(1.0, 1.0) == 8
    assert groups_needed(0.5, 1.0) == 32
    assert groups_needed(-0.1, 1.0) is None
    t = claim_test(_boot(0.02, -0.08, 0.12, k=25), "beats", 0.05)
    v = decide_family([t])[0]
    assert v.outcome == INCONCLUSIVE and v.evidence["groups_to_decide"] > 25


def test_beating_every_comparator_holds_only_when_each_holds_and_fails_on_one():
    from ppairs_lens.evaluation.verdicts import intersection_test

    far, near, equal = (_boot(0.3, 0.2, 0.4), _boot(0.2, 0.1, 0.3), _boot(0.0, -0.03, 0.03))
    both = intersection_test([claim_test(d, "beats", 0.05) for d in (far, near)])
    assert decide_family([both])[0].outcome == HOLDS and both.value == pytest.approx(0.2)
    one_equal = intersection_test([claim_test(d, "beats", 0.05) for d in (far, equal)])
    assert decide_family([one_equal])[0].outcome == FAILS      # not better than one of them
    untested = claim_test(Difference(0.3, 0.2, 0.4, n_groups=5), "beats", 0.05)
    partial = intersection_test([claim_test(far, "beats", 0.05), untested])
    assert partial.p_holds == 1.0                               # cannot hold past an untested one


def test_paired_differences_carry_one_difference_per_group():
    from ppairs_lens.evaluation.paired import paired_difference

    y = np.array([1, 2, 1, 2, 1, 2])
    a = np.array([0.9, 0.1, 0.9, 0.1, 0.9, 0.9])     # right on all but the last
    b = np.array([0.1, 0.1, 0.9, 0.9, 0.9, 0.9])     # right on 3 of 6
    d = paired_difference(y, a, b, ["g1", "g1", "g2", "g2", "g3", "g3"], n_boot=50)
    assert d["group_diffs"] == pytest.approx([0.5, 0.5, 0.0])
    assert d["n_groups"] == 3 and d["value"] == pytest.approx(np.mean([0.5, 0.5, 0.0]))


def test_sign_flip_route_is_kept_when_a_row_has_many_group_differences_but_no_count():
    """The route is chosen once: a row without a group count (or below the bootstrap's
    minimum) but with 25 group differences is decided by the sign-flip test, never by the
    normal approximation of an interval it may not have."""
    from ppairs_lens.evaluation.verdicts import Difference, claim_test

    diffs = tuple([0.2] * 20 + [-0.1] * 5)
    with_count = claim_test(Difference(0.14, -0.5, 0.9, 5, 100, diffs), "beats", 0.05)
    no_interval = claim_test(Difference(0.14, None, None, None, 100, diffs), "beats", 0.05)
    assert "sign-flip" in with_count.method and "sign-flip" in no_interval.method
    assert with_count.p_holds == no_interval.p_holds < 0.01


def _ct(p_holds, p_fails, value=0.1):
    return ClaimTest("beats", 0.05, p_holds, p_fails, min(p_holds, p_fails), "m", value, 0.1,
                     30, 60, smallest_p_holds=1e-6, smallest_p_fails=1e-6)


def test_all_but_one_holds_when_all_but_one_set_holds_at_half_alpha():
    from ppairs_lens.evaluation.verdicts import all_but_one_test

    t = all_but_one_test([_ct(0.001, 1), _ct(0.02, 1), _ct(0.9, 1, value=-0.1)])
    assert t.p_holds == pytest.approx(0.04)          # the second largest, doubled
    assert decide_family([t])[0].outcome == HOLDS
    # two sets that do not hold: the claim does not hold
    t = all_but_one_test([_ct(0.001, 1), _ct(0.6, 1), _ct(0.9, 1)])
    assert decide_family([t])[0].outcome != HOLDS


def test_all_but_one_fails_only_when_two_sets_fail():
    from ppairs_lens.evaluation.verdicts import all_but_one_test

    one = all_but_one_test([_ct(1, 0.001), _ct(0.001, 1), _ct(0.001, 1)])
    assert decide_family([one])[0].outcome != FAILS   # the one exception allowed
    two = all_but_one_test([_ct(1, 0.001), _ct(1, 0.002), _ct(0.001, 1)])
    assert decide_family([two])[0].outcome == FAILS


def test_all_but_one_needs_two_sets_and_at_most_one_untested():
    from ppairs_lens.evaluation.verdicts import all_but_one_test

    untested = Verdict(NOT_TESTED, "few groups")
    assert all_but_one_test([_ct(0.001, 1)]).outcome == NOT_TESTED
    assert all_but_one_test([_ct(0.001, 1), untested, untested]).outcome == NOT_TESTED
    assert isinstance(all_but_one_test([_ct(0.001, 1), _ct(0.001, 1), untested]), ClaimTest)


def test_a_change_shown_within_the_margin_is_no_change():
    t = ClaimTest("changes", 0.05, 0.001, 0.001, 1e-6, "m", 0.01, 0.01, 200, 200,
                  smallest_p_holds=1e-6, smallest_p_fails=1e-6)
    assert decide_family([t])[0].outcome == FAILS


def test_skill_needs_a_lower_end_above_chance_over_two_groups_or_more():
    from ppairs_lens.evaluation.verdicts import beats_chance, no_skill

    assert beats_chance(0.55) and beats_chance(0.55, n_groups=12)
    assert beats_chance(1.0, n_groups=50)        # a perfect probe: zero width, still skill
    assert not beats_chance(0.737, n_groups=1)   # one group: every resample the same
    assert "1 test group" in no_skill(0.737, 1)
    assert not beats_chance(0.5, n_groups=30) and not beats_chance(None, n_groups=30)
    assert "0.480 is not above chance" in no_skill(0.48, 30)
    assert not beats_chance(float("nan"))
    assert beats_chance(0.30, chance=0.25, n_groups=4)


def test_an_interval_that_is_no_group_bootstrap_says_what_it_is():
    pooled = Difference(0.1, 0.0, 0.2, 62, 200, interval="normal approximation over 62 groups")
    assert claim_test(pooled, "beats", 0.05).method.startswith(
        "normal approximation over 62 groups (no group differences recorded")
    assert claim_test(Difference(0.1, 0.0, 0.2, 62, 200), "beats", 0.05).method.startswith(
        "group bootstrap 95% CI over 62 groups")


def test_the_pooled_task_claims_say_how_their_interval_is_made():
    summary = json.loads((Path(__file__).resolve().parents[1] / "figures" /
                          "summary.json").read_text())
    claims = {c["id"]: c for c in summary.get("claims", [])}
    for cid in ("fig3.gain-larger-on-text-quality", "fig2.qwen-0.5b-exception"):
        if cid in claims and claims[cid].get("value") is not None:
            assert claims[cid]["method"].startswith("normal approximation over "), cid
            assert claims[cid]["lo"] is not None and claims[cid]["lo"] < claims[cid]["hi"]
