"""Metrics with bootstrap intervals, and within-context rank correlation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.metrics import (
    auroc,
    evaluate,
    f1,
    f1_item1,
    spearman,
    within_context_spearman,
)


def _noisy(n: int = 400, seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = rng.choice([1, 2], size=n)
    proba = np.clip(np.where(labels == 1, 0.65, 0.35) + rng.normal(0, 0.25, n), 0, 1)
    proba[:10] = 0.5                                   # ties in the scores
    return labels, proba


def test_a_predictor_that_never_answers_scores_chance_not_the_label_share():
    labels = np.array([1] * 30 + [2] * 10)
    out = evaluate(labels, np.full(40, 0.5), n_boot=20, seed=0)
    assert out["accuracy"]["value"] == 0.5


def test_evaluate_matches_sklearn_and_intervals_bracket_values():
    labels, proba = _noisy()
    out = evaluate(labels, proba, n_boot=300, seed=1)
    y = labels == 1
    decided = proba != 0.5  # an exact 0.5 is no answer: half credit
    assert out["accuracy"]["value"] == pytest.approx(
        (accuracy_score(y[decided], proba[decided] > 0.5) * decided.sum()
         + 0.5 * (~decided).sum()) / len(y))
    assert out["f1"]["value"] == pytest.approx(f1_score(y, proba >= 0.5, average="macro"))
    assert out["auroc"]["value"] == pytest.approx(roc_auc_score(y, proba))
    for m in out.values():
        assert m["lo"] <= m["value"] <= m["hi"] and m["hi"] - m["lo"] < 0.2
    two_col = evaluate(labels, np.stack([1 - proba, proba], 1), n_boot=300, seed=1)
    assert two_col == out
    assert evaluate(labels, proba, n_boot=300, seed=1) == out          # seeded
    perfect = evaluate(labels, (labels == 1).astype(float), n_boot=50)
    assert all(perfect[k]["value"] == 1.0 for k in perfect)


def test_metric_edge_cases():
    y = np.array([0, 0, 1])
    assert f1_item1(y, np.zeros(3)) == 0.0 == f1_score(y, np.zeros(3), zero_division=0)
    assert f1(y, np.zeros(3)) == pytest.approx(f1_score(y, np.zeros(3), average="macro",
                                                        zero_division=0))
    assert f1(np.ones(4), np.ones(4)) == 1.0 == f1_score(np.ones(4), np.ones(4), average="macro")
    with pytest.raises(ValueError):
        auroc(np.ones(4), np.linspace(0, 1, 4))
    with pytest.raises(ProbeError, match="tie"):
        evaluate([1, 0, 2], [0.2, 0.5, 0.7])
    with pytest.raises(ProbeError, match="NaN"):
        evaluate([1, 2], [np.nan, 0.3])
    with pytest.raises(ProbeError, match="probabilities"):
        evaluate([1, 2], [0.3])


def test_single_class_resamples_are_skipped_for_auroc():
    y = np.r_[1, np.full(29, 2)]
    s = np.linspace(1, 0, 30)                          # the positive scores highest
    ci = evaluate(y, s, n_boot=400, seed=0)["auroc"]
    assert 200 < ci["n_boot_used"] < 400               # ~ (1 - (29/30)^30) resamples have the 1
    assert ci["value"] == ci["lo"] == ci["hi"] == 1.0


def _ranked_pairs(n_ctx: int = 8, n_items: int = 5, seed: int = 3):
    rng = np.random.default_rng(seed)
    gold, pairs, proba = {}, [], []
    for c in range(n_ctx):
        scores = rng.normal(size=n_items)
        for i in range(n_items):
            gold[f"c{c}i{i}"] = scores[i]
        for i in range(n_items):
            for j in range(n_items):
                if i != j:
                    pairs.append((f"c{c}", f"c{c}i{i}", f"c{c}i{j}"))
                    proba.append(1 / (1 + np.exp(-(scores[i] - scores[j]))))
    return pairs, np.array(proba), gold


def test_within_context_spearman():
    pairs, proba, gold = _ranked_pairs()
    out = within_context_spearman(pairs, proba, gold, n_boot=200)
    assert out["value"] == pytest.approx(1.0) and out["n_contexts"] == 8
    assert out["lo"] == pytest.approx(1.0) and out["hi"] == pytest.approx(1.0)
    flipped = within_context_spearman(pairs, 1 - proba, gold, n_boot=200)
    assert flipped["value"] == pytest.approx(-1.0)
    noisy = within_context_spearman(
        pairs, np.random.default_rng(0).random(len(pairs)), gold, n_boot=200)
    assert -1 <= noisy["lo"] <= noisy["value"] <= noisy["hi"] <= 1
    # A context with constant gold scores has no rank correlation: skipped, not counted.
    flat = dict(gold) | {f"c0i{i}": 1.0 for i in range(5)}
    assert within_context_spearman(pairs, proba, flat, n_boot=50)["n_contexts"] == 7
    with pytest.raises(ProbeError, match="no gold score"):
        within_context_spearman(pairs, proba, {k: v for k, v in gold.items() if k != "c3i2"})
    with pytest.raises(ProbeError, match="undefined"):
        within_context_spearman(pairs[:20], proba[:20], {k: 0.0 for k in gold})


def test_spearman_shapes_agree() -> None:
    gold = {"a": 3.0, "b": 2.0, "c": 1.0, "d": 0.0}
    assert spearman(["a", "b", "c", "d"], gold) == pytest.approx(1.0)
    assert spearman(["d", "c", "b", "a"], gold) == pytest.approx(-1.0)
    assert spearman({"a": 10, "b": 5, "c": 4, "d": -1}, gold) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert math.isnan(spearman([1], [1]))
    with pytest.raises(ValueError):
        spearman(["a", "z"], gold)


def test_spearman_gold_first_is_scipys_number_bit_for_bit() -> None:
    # within_context_spearman's numbers are spearman(gold, win_rate)'s (context_rhos
    # repeats its rounding; tests/test_sweep_scores_batch.py checks it), so they stay those
    # of scipy's spearmanr(win_rate, gold), which it used before.
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(3, 30))
        w = np.round(rng.random(n) * 6) / 6  # ties, as win rates have
        g = rng.integers(0, 5, n).astype(float)
        if np.ptp(w) and np.ptp(g):
            assert spearman(g, w) == float(spearmanr(w, g).statistic)


def test_f1_is_symmetric_in_the_item_order():
    """Swapping every pair's items (labels 1 <-> 2, p -> 1 - p) leaves the reported F1 as it
    is; the item-1 F1 it replaced changes (so this test can fail)."""
    rng = np.random.default_rng(3)
    y = (rng.random(200) < 0.7).astype(float)               # unbalanced: item 1 mostly wins
    p = np.clip(np.where(y == 1, 0.6, 0.4) + rng.normal(0, 0.3, 200), 0, 1)
    p[p == 0.5] = 0.51                                        # no exact ties at the threshold
    assert f1(y, p) == pytest.approx(f1(1 - y, 1 - p))
    assert abs(f1_item1(y, p) - f1_item1(1 - y, 1 - p)) > 0.05


def test_weighted_resamples_equal_the_metrics_on_index_resamples():
    """evaluate scores all resamples at once as weighted counts: each one equals the metric
    computed on the resample's records (ties in p, single-class resamples, groups)."""
    from ppairs_lens.evaluation.metrics import accuracy
    from ppairs_lens.evaluation.bootstrap import resample_weights
    from ppairs_lens.evaluation.resampled import WEIGHTED

    labels, proba = _noisy(n=60, seed=5)
    y = (labels == 1).astype(float)
    proba = np.round(proba, 1)                                      # many ties
    groups = [i // 4 for i in range(60)]
    for g in (groups, None):
        w = resample_weights(60, g, 40, seed=2)
        assert (w.sum(axis=1) == 60).all()
        for name, fn in (("accuracy", accuracy), ("f1", f1), ("auroc", auroc)):
            got = WEIGHTED[name](w, y, proba)
            for b in range(40):
                idx = np.repeat(np.arange(60), w[b].astype(int))
                assert got[b] == pytest.approx(fn(y[idx], proba[idx]), abs=1e-12)
    one_class = WEIGHTED["auroc"](np.eye(60)[:2] * 60, y, proba)   # one record drawn 60 times
    assert np.isnan(one_class).all()
