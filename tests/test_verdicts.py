"""Each verdict function, fed a planted case for each outcome: holds, fails, cannot be decided."""

from __future__ import annotations

import numpy as np
import pytest

from ppairs_lens.evaluation.intervention_tests import ablation_changes_verdict, judge_decides
from ppairs_lens.evaluation.cosine_verdict import (
    cosine_agreement_verdict,
    covariance_mean_abs_cos,
    isotropic_mean_abs_cos,
    mean_abs_pairwise_cos,
)
from ppairs_lens.evaluation.verdicts import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTED,
    holm,
)

D = 64
FAST = dict(n_sim=300, seed=0)


def _unit(v):
    return v / np.linalg.norm(v)


def _features(rng, n=80, spread=None):
    """Contrast differences whose covariance is ``diag(spread)`` (isotropic by default)."""
    spread = np.ones(D) if spread is None else spread
    return rng.standard_normal((n, D)) * np.sqrt(spread)


# ------------------------------------------------------------------ cosine agreement

def test_isotropic_null_is_the_mean_over_pairs_not_one_pair():
    one = isotropic_mean_abs_cos(2, D, 2000, 0)     # one pair
    six = isotropic_mean_abs_cos(6, D, 2000, 0)     # 15 pairs
    assert one.mean() == pytest.approx(six.mean(), rel=0.05)
    assert np.quantile(six, 0.99) < 0.8 * np.quantile(one, 0.99)  # the mean of 15 is tighter


def test_cosine_holds_for_a_shared_direction():
    rng = np.random.default_rng(0)
    shared = _unit(rng.standard_normal(D))
    dirs = [_unit(shared + 0.2 * rng.standard_normal(D) / np.sqrt(D)) for _ in range(4)]
    v = cosine_agreement_verdict(dirs, [0.8, 0.7, 0.9, 0.75],
                                 features=[_features(rng) for _ in range(4)], **FAST)
    assert v.outcome == HOLDS, v.reason
    assert v.evidence["n_pairs"] == 6 and v.evidence["mean_abs_cos"] > 0.9


def test_cosine_is_inconclusive_not_failed_for_independent_directions():
    """Not beating the null is absence of evidence: no equivalence test, so no "fails"."""
    rng = np.random.default_rng(1)
    dirs = [_unit(rng.standard_normal(D)) for _ in range(4)]
    v = cosine_agreement_verdict(dirs, [0.8] * 4, features=[_features(rng) for _ in range(4)],
                                 **FAST)
    assert v.outcome == INCONCLUSIVE and "isotropic" in v.reason


def test_cosine_is_inconclusive_when_the_anisotropic_null_explains_the_agreement():
    """Directions that all lie along the stream's one big axis agree with each other more
    than isotropic vectors do, but no more than random directions of that covariance."""
    rng = np.random.default_rng(2)
    spread = np.full(D, 0.01)
    spread[0] = 100.0
    feats = [_features(rng, spread=spread) for _ in range(4)]
    dirs = [_unit(rng.standard_normal(len(f)) @ f) for f in feats]
    v = cosine_agreement_verdict(dirs, [0.8] * 4, features=feats, **FAST)
    assert v.evidence["p_isotropic"] < 0.01
    assert v.outcome == INCONCLUSIVE and "covariance" in v.reason


def test_cosine_is_not_tested_with_fewer_than_two_working_probes():
    rng = np.random.default_rng(3)
    dirs = [_unit(rng.standard_normal(D)) for _ in range(3)]
    v = cosine_agreement_verdict(dirs, [0.8, 0.45, 0.5], names=["a", "b", "c"], **FAST)
    assert v.outcome == NOT_TESTED and "only 1 of 3" in v.reason
    assert v.evidence["below_chance"] == ["b", "c"]


def test_cosine_without_a_covariance_null_cannot_hold():
    rng = np.random.default_rng(4)
    shared = _unit(rng.standard_normal(D))
    v = cosine_agreement_verdict([shared, shared, shared], [0.9] * 3, **FAST)
    assert v.outcome == INCONCLUSIVE and "covariance" in v.reason


def test_the_statistic_and_the_covariance_null():
    e = np.eye(3)
    assert mean_abs_pairwise_cos(np.stack([e[0], e[0], e[1]])) == pytest.approx(1 / 3)
    rng = np.random.default_rng(5)
    flat = covariance_mean_abs_cos([_features(rng) for _ in range(3)], 500, 0)
    assert flat.mean() == pytest.approx(isotropic_mean_abs_cos(3, D, 500, 0).mean(), rel=0.1)


# ------------------------------------------------------------------ ablation

def test_holm_matches_the_step_down_rule():
    adj = holm([0.01, 0.04, 0.03, np.nan])
    assert adj[:3] == pytest.approx([0.03, 0.06, 0.06]) and np.isnan(adj[3])


def test_changes_holds_when_enough_nulls_and_a_small_p():
    v = ablation_changes_verdict([0.001, 0.5, 0.9], n_null=1000, names=["a", "b", "c"])
    assert v.outcome == HOLDS and v.evidence["moved"] == ["a"]


def test_changes_is_inconclusive_on_non_significance_and_fails_only_by_equivalence():
    v = ablation_changes_verdict([0.03, 0.5, 0.9], n_null=1000)
    assert v.outcome == INCONCLUSIVE          # absence of evidence is not evidence of absence
    v = ablation_changes_verdict([0.03, 0.5, 0.9], n_null=1000, equivalent=[True] * 3)
    assert v.outcome == FAILS
    v = ablation_changes_verdict([0.03, 0.5, 0.9], n_null=1000, equivalent=[True, False, True])
    assert v.outcome == INCONCLUSIVE


def test_changes_cannot_be_decided_when_the_smallest_p_cannot_pass_holm():
    v = ablation_changes_verdict([1 / 101] * 9, n_null=100)   # the committed study's design
    assert v.outcome == NOT_TESTED and "1/101" in v.reason and "0.05/9" in v.reason
    assert v.needed == "180 null directions"   # 9 / (180 + 1) < 0.05; 9 / 180 is not


def test_judge_decides():
    assert judge_decides(0.6, 0.3)[0]
    assert not judge_decides(0.49, 0.3)[0] and not judge_decides(None, None)[0]
    assert not judge_decides(0.9, 0.96)[0]
