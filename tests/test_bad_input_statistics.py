"""No statistic claims a resolution it does not have, and no coefficient that is not a number
reaches the model.

* The LEACE null counts only distinct relabellings: a relabelling and its complement give the
  same eraser, and the real labels (or their complement) are no null; more than exist is
  refused, so K and the smallest p are true.
* A label-free direction's sign confidence needs as many resampling units as an interval.
* The cosine verdict cannot "fail" with too few null draws to reach its alpha.
* Steering coefficients must be finite numbers (Python API).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("concept_erasure")

from ppairs_lens.errors import DirectionError, PPairsError, SettingError  # noqa: E402
from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS  # noqa: E402
from ppairs_lens.evaluation.cosine_verdict import cosine_agreement_verdict  # noqa: E402
from ppairs_lens.evaluation.verdicts import NOT_TESTED  # noqa: E402
from ppairs_lens.interventions.leace import (  # noqa: E402
    distinct_relabellings,
    fit_leace,
    n_distinct_nulls,
    permuted_erasers,
)
from ppairs_lens.probes.sign_confidence import MIN_SIGN_GROUPS, sign_confidence  # noqa: E402


def _key(y):
    """A relabelling up to its complement (labels 1 / 2)."""
    a = tuple(int(v) for v in y)
    return min(a, tuple(3 - v for v in a))


@pytest.mark.parametrize("labels, available", [
    ([1, 1, 1, 2, 2, 2], math.comb(6, 3) // 2 - 1),   # balanced: complements pair up -> 9
    ([1, 1, 2, 2, 2], math.comb(5, 2) - 1),           # unbalanced: no complement -> 9
    ([1, 2, 1, 2], 2),                                 # 4 pairs: only 2 distinct nulls
])
def test_only_distinct_relabellings_count_as_nulls(labels, available):
    assert n_distinct_nulls(labels) == available
    got = distinct_relabellings(labels, available, seed=3)
    keys = {_key(y) for y in got}
    assert len(keys) == available                    # all distinct erasers ...
    assert _key(labels) not in keys                  # ... and none is the real one
    for y in got:
        assert sorted(y) == sorted(labels)           # class counts kept
    with pytest.raises(SettingError, match=rf"only {available} distinct permuted-label "
                                           rf"erasers exist.*smallest p would be "
                                           rf"1/{available + 1}"):
        distinct_relabellings(labels, available + 1)


def test_a_relabelling_and_its_complement_give_the_same_eraser():
    """Why complements are counted once: the erasers are equal."""
    g = torch.Generator().manual_seed(0)
    acts = torch.randn(8, 2, 5, generator=g, dtype=torch.float64)
    y = np.array([1, 2, 2, 1, 1, 2, 1, 2])
    a, b = fit_leace(acts, y), fit_leace(acts, 3 - y)
    torch.testing.assert_close(a.proj_left @ a.proj_right, b.proj_left @ b.proj_right)


def test_permuted_erasers_refuse_more_nulls_than_exist():
    acts = torch.randn(6, 2, 4, dtype=torch.float64)
    with pytest.raises(PPairsError, match="only 9 distinct"):
        permuted_erasers(acts, [1, 1, 1, 2, 2, 2], 39)
    assert len(permuted_erasers(acts, [1, 1, 1, 2, 2, 2], 9)) == 9
    with pytest.raises(SettingError, match="exactly two classes"):
        permuted_erasers(acts, [1] * 6, 1)


def test_many_pairs_draw_without_repeats_in_the_same_stream():
    """Above the enumeration limit permutations are drawn as before (same seed, same nulls)
    and a repeat would be drawn again."""
    y = np.where(np.arange(60) % 3 == 0, 2, 1)
    got = distinct_relabellings(y, 39, seed=0)
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(got[0], y[rng.permutation(60)])
    assert len({tuple(v) for v in got}) == 39


def test_sign_confidence_is_nan_with_too_few_groups():
    # a sign vote needs fewer units than a CI that decides a claim (MIN_BOOTSTRAP_GROUPS), but
    # never fewer than the floor: 10 units already give ~92,000 distinct resamples
    assert 10 <= MIN_SIGN_GROUPS <= MIN_BOOTSTRAP_GROUPS
    y = torch.tensor([0.0, 1.0] * 20, dtype=torch.float64)
    proj = 2 * y - 1
    few = [i % 3 for i in range(40)]                 # 3 groups: 1.0 would be a claim
    assert torch.isnan(sign_confidence(proj, y, few, n_boot=50))
    many = [i % 20 for i in range(40)]
    assert float(sign_confidence(proj, y, many, n_boot=50)) == 1.0
    assert torch.isnan(sign_confidence(proj[:6], y[:6], None, n_boot=50))  # 6 pairs alone


def test_the_cosine_verdict_cannot_fail_blind():
    rng = np.random.default_rng(0)
    dirs = rng.normal(size=(3, 16))
    v = cosine_agreement_verdict(dirs, [0.9, 0.9, 0.9], n_sim=50, alpha=0.01)
    assert v.outcome == NOT_TESTED and "smallest p is 1/51" in v.reason


def test_non_finite_steering_coefficients_are_refused_in_python(tiny):
    from analyses.steering import SteeringConfig
    from ppairs_lens.interventions.steering import judge_under_steering
    from ppairs_lens.interventions.steering import steer, steering_vector

    from .conftest import small_comparisons

    r = torch.randn(tiny.cfg.d_model)
    for bad in (float("nan"), float("inf"), "x"):
        with pytest.raises(SettingError, match="steering coefficient alpha must be"):
            steering_vector(r, bad)
        with pytest.raises(SettingError, match="alpha"):
            with steer(tiny, r, bad, ["blocks.0.hook_resid_post"]):
                pass
    with pytest.raises(SettingError, match=r"alphas\[1\] must be a finite number"):
        SteeringConfig(stores=[], alphas=(0.5, float("nan")))
    with pytest.raises(SettingError, match="at least one non-zero"):
        SteeringConfig(stores=[], alphas=(0.0,))
    v = torch.zeros(2, tiny.cfg.d_model)
    v[1, 0] = float("nan")
    with pytest.raises(DirectionError, match="NaN or inf"):
        judge_under_steering(tiny, small_comparisons(2), None, v, ["blocks.0.hook_resid_post"])


def test_analysis_configs_refuse_what_they_cannot_run_at_construction():
    """Before any store or model work, from Python as from the command line."""
    from analyses.ablation import AblationConfig
    from analyses.steering import SteeringConfig

    with pytest.raises(PPairsError, match="positions='last'"):
        AblationConfig(stores=[], positions="all")
    with pytest.raises(PPairsError, match="n_random and n_matched must be at least 1"):
        AblationConfig(stores=[], n_matched=0)
    with pytest.raises(SettingError, match="n_random, n_matched >= 1"):
        SteeringConfig(stores=[], n_random=0)
