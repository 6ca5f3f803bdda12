"""Log-odds swap calibration (ppairs_lens.judges.calibration) and the zero-shot judge's
log-odds, diagnostics and report (ppairs_lens.judges.zero_shot).

Pure numpy for the rule itself; the tiny random model for the judge (its numbers are
meaningless, but antisymmetry and agreement between read-outs are exact properties).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from ppairs_lens.judges.calibration import TIE_LOGODDS
from ppairs_lens.data.records import Dataset, Statement
from ppairs_lens.activations.few_logits import choice_logodds
from ppairs_lens.judges.calibration import (
    choice_probability,
    judge_diagnostics,
    logit,
    sigmoid,
    swap_calibrate,
    swap_calibrated,
    swap_calibrated_logodds,
)
from ppairs_lens.judges.zero_shot import (
    ZeroShotResult,
    evaluate_zero_shot,
    swapped_dataset,
    zero_shot,
)

from .conftest import small_comparisons


def test_a_constant_position_bias_cancels_exactly_in_logodds():
    s = np.linspace(-3, 3, 13)  # the items' own log-odds difference
    for bias in (-4.0, 0.0, 0.7, 5.0):
        z = swap_calibrated_logodds(s + bias, -s + bias)
        np.testing.assert_allclose(z, s, atol=1e-12)
        # The probability form gives the same: sigmoid(s), whatever the bias.
        np.testing.assert_allclose(swap_calibrate(sigmoid(s + bias), sigmoid(-s + bias)),
                                   sigmoid(s), atol=1e-9)


def test_probability_averaging_would_shrink_a_biased_judge():
    # A judge that nearly always answers "2" (P(1) ~ 0.05), as the small model does: the old
    # rule 0.5 * (p + 1 - p_swapped) sits at 0.5 +- 0.002; the log-odds rule keeps sigmoid(s).
    s, bias = 0.8, -3.0
    po, ps = sigmoid(s + bias), sigmoid(-s + bias)
    averaged = 0.5 * (po + 1 - ps)
    assert abs(averaged - 0.5) < 0.06
    assert swap_calibrate(po, ps) == pytest.approx(sigmoid(s))
    assert isinstance(swap_calibrate(po, ps), float)


def test_swap_calibrated_comparator_is_antisymmetric_and_half_on_ties():
    raw = {("a", "b"): 0.9, ("b", "a"): 0.6, ("a", "a"): 0.97}
    cal = swap_calibrated(lambda x, y: raw[(x, y)])
    assert cal("a", "b") + cal("b", "a") == pytest.approx(1.0)
    assert cal("a", "a") == pytest.approx(0.5)
    assert cal("a", "b") == pytest.approx(sigmoid((logit(0.9) - logit(0.6)) / 2))


def test_logit_and_sigmoid_stay_finite_at_the_ends():
    assert np.isfinite(logit(np.array([0.0, 1.0]))).all()
    assert logit(1.0) == pytest.approx(-logit(0.0))
    assert sigmoid(np.array([-1000.0, 1000.0])).tolist() == [0.0, 1.0]
    assert sigmoid(0.0) == 0.5


def test_choice_logodds_are_read_from_the_logits_not_a_saturated_probability():
    logits = torch.tensor([[10.0, -40.0, 0.0], [0.0, 1.0, 3.0]])
    columns = torch.tensor([[0, 1], [2, 1]])
    ld = choice_logodds(logits, columns)
    assert ld.dtype == np.float64
    np.testing.assert_allclose(ld, [50.0, 2.0])
    # The probability form saturates at 1 and loses the 50; the log-odds keep it.
    p = choice_probability(logits, columns)
    np.testing.assert_allclose(p, sigmoid(ld))
    assert p[0] == 1.0 and logit(p[0]) < 30


def test_diagnostics_of_a_judge_that_always_answers_choice_2():
    # Both orders answer "2"; the items move the log-odds by +-0.5 only.
    s = np.array([0.5, -0.5, 0.5, 0.5])
    res = ZeroShotResult.from_logodds(s - 3.0, -s - 3.0, 8)
    d = judge_diagnostics(res, [1, 2, 2, 0])
    assert d["position_bias_logodds"] == pytest.approx(-3.0)
    assert d["same_raw_answer_share"] == 1.0
    assert d["first_answer_share"] == 0.0
    assert d["p_first_choice"] == pytest.approx(np.mean(sigmoid(np.r_[s - 3, -s - 3])))
    assert d["accuracy_original"] == pytest.approx(2 / 3)  # always "2": right on label 2 only
    assert d["accuracy_swapped"] == pytest.approx(1 / 3)
    assert d["accuracy_calibrated"] == pytest.approx(2 / 3)  # z = s: right on records 0, 1
    np.testing.assert_allclose(res.z, s)
    np.testing.assert_allclose(res.p, sigmoid(s))


def test_zero_shot_calibrates_in_logodds_and_is_antisymmetric(tiny):
    ds = small_comparisons(8)
    res = zero_shot(tiny, ds)
    z = (res.ld_original - res.ld_swapped) / 2
    np.testing.assert_allclose(res.z, np.where(np.abs(z) < TIE_LOGODDS, 0.0, z), atol=1e-12)
    np.testing.assert_allclose(res.p, sigmoid(res.z), atol=1e-12)
    np.testing.assert_allclose(res.p_original, sigmoid(res.ld_original), atol=1e-12)
    assert np.ptp(res.ld_original) > 1e-4  # the items change the answer
    flipped = zero_shot(tiny, swapped_dataset(ds))
    np.testing.assert_allclose(flipped.ld_original, res.ld_swapped, atol=1e-4)
    np.testing.assert_allclose(flipped.z, -res.z, atol=1e-4)
    raw = zero_shot(tiny, ds, calibrate=False)
    assert raw.ld_swapped is None and raw.n_rows == len(ds)
    np.testing.assert_allclose(raw.z, res.ld_original, atol=1e-4)


def test_evaluate_zero_shot_reports_diagnostics_and_answers_by_pair(tiny):
    ds = small_comparisons(8)
    rep = evaluate_zero_shot(tiny, ds)
    res = zero_shot(tiny, ds)
    assert set(rep["p_by_pair"]) == {r.pair_id for r in ds.records}
    for k, r in enumerate(ds.records):
        assert rep["p_by_pair"][r.pair_id] == pytest.approx(res.p[k], abs=1e-6)
        assert rep["z_by_pair"][r.pair_id] == pytest.approx(res.z[k], abs=1e-5)
    d = rep["diagnostics"]
    for key in ("position_bias_logodds", "p_first_choice", "same_raw_answer_share",
                "accuracy_original", "accuracy_swapped", "accuracy_calibrated"):
        assert key in d
    assert rep["n_rows"] == 2 * len(ds) and rep["calibrated"]


def test_statements_keep_their_raw_logodds(tiny):
    recs = [Statement(f"s{i}", f"The number {i} is even.", i % 2 == 0) for i in range(4)]
    ds = Dataset("st", "statement", recs)
    res = zero_shot(tiny, ds)
    assert res.ld_swapped is None and res.p_swapped is None and res.n_rows == 4
    np.testing.assert_allclose(res.z, res.ld_original)
    d = judge_diagnostics(res, ds.labels())
    assert d["same_raw_answer_share"] is None
    assert d["position_bias_logodds"] == pytest.approx(float(np.mean(res.ld_original)))


def test_report_bootstraps_over_leak_groups(tiny):
    # One leak group holding every record: each bootstrap resample is the whole set, so the CI
    # collapses onto the value. (Resampling records instead would give a spread.)
    base = small_comparisons(8, with_context=False)
    one = dataclasses.replace(base, records=[dataclasses.replace(r, group_id="all")
                                             for r in base.records])
    acc = evaluate_zero_shot(tiny, one)["metrics"]["accuracy"]
    assert acc["lo"] == acc["hi"] == acc["value"]
    spread = evaluate_zero_shot(tiny, base)["metrics"]["accuracy"]
    assert spread["lo"] < spread["hi"]
