"""Paired differences of two predictors on the same records."""

from __future__ import annotations

import numpy as np
import pytest

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.paired import paired_difference


def _two_predictors(n: int = 600, seed: int = 0):
    """Labels, a predictor right on 80% of records and one right on 60%, in 100 groups."""
    rng = np.random.default_rng(seed)
    y = rng.choice([1, 2], size=n)
    right_a = rng.random(n) < 0.8
    right_b = rng.random(n) < 0.6
    truth = (y == 1).astype(float)
    p_a = np.where(right_a, 0.8 * truth + 0.1, 0.9 - 0.8 * truth)
    p_b = np.where(right_b, 0.8 * truth + 0.1, 0.9 - 0.8 * truth)
    groups = [f"g{i % 100}" for i in range(n)]
    return y, p_a, p_b, groups, right_a.mean() - right_b.mean()


def test_a_known_difference_lies_inside_its_interval():
    y, p_a, p_b, groups, diff = _two_predictors()
    out = paired_difference(y, p_a, p_b, groups, n_boot=400, seed=1)
    assert out["value"] == pytest.approx(diff)
    assert out["value"] == pytest.approx(out["a"] - out["b"])
    assert out["lo"] < out["value"] < out["hi"]
    assert out["lo"] > 0.0                                   # 0.2 apart: clearly a > b
    assert 0.13 < out["lo"] and out["hi"] < 0.27
    assert out["n"] == 600 and out["n_groups"] == 100
    flipped = paired_difference(y, p_b, p_a, groups, n_boot=400, seed=1)
    assert flipped["value"] == pytest.approx(-out["value"])


def test_identical_predictors_differ_by_zero_with_no_width():
    y, p_a, _, groups, _ = _two_predictors()
    for metric in ("accuracy", "f1", "auroc"):
        out = paired_difference(y, p_a, p_a.copy(), groups, metric=metric, n_boot=100, seed=0)
        assert out["value"] == 0.0 and out["lo"] == 0.0 and out["hi"] == 0.0


def test_pairing_narrows_the_interval():
    """b is a with a few records flipped: a separate-CI view would overlap entirely, the
    paired interval is narrow and excludes 0."""
    y, p_a, _, groups, _ = _two_predictors(seed=2)
    p_b = p_a.copy()
    flip = np.arange(0, 600, 10)                                  # 60 records, 10%
    p_b[flip] = 1.0 - p_b[flip]
    out = paired_difference(y, p_a, p_b, groups, n_boot=300, seed=0)
    assert out["hi"] - out["lo"] < 0.12 and (out["lo"] > 0 or out["hi"] < 0)


def test_refusals():
    y, p_a, p_b, groups, _ = _two_predictors(n=20)
    with pytest.raises(ProbeError, match="unknown metric"):
        paired_difference(y, p_a, p_b, groups, metric="spearman")
    with pytest.raises(ProbeError, match="probabilities"):
        paired_difference(y, p_a, p_b[:5], groups)
    with pytest.raises(ProbeError, match="tie"):
        paired_difference(np.r_[0, y[1:]], p_a, p_b, groups)


def test_the_targets_form_is_the_labels_form_without_the_conversion():
    from ppairs_lens.evaluation.metrics import evaluate, evaluate_targets
    from ppairs_lens.evaluation.paired import paired_target_difference

    rng = np.random.default_rng(5)
    labels = rng.integers(1, 3, 40)
    t = (labels == 1).astype(int)
    pa, pb = rng.uniform(size=40), rng.uniform(size=40)
    groups = [k // 4 for k in range(40)]
    for metric in ("accuracy", "f1", "auroc"):
        want = paired_difference(labels, pa, pb, groups, metric=metric, n_boot=50)
        got = paired_target_difference(t, pa, pb, groups, metric=metric, n_boot=50)
        assert got == want
    assert evaluate_targets(t, pa, groups, n_boot=50) == evaluate(labels, pa, groups, n_boot=50)
