"""Layer choice reads the validation split, never the test set."""

from __future__ import annotations

import numpy as np
import pytest

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.best_layers import best_layers
from ppairs_lens.evaluation.layer_selection import (
    select_layer,
    validation_indices,
    validation_scores,
)

from .test_sweep import planted_layers


def _rows(test: list[float], val: list[float], kind: str = "supervised") -> list[dict]:
    return [{"dataset": "d", "kind": kind, "layer": li, "hook": f"h{li}", "metric": "accuracy",
             "value": t, "lo": t - 0.05, "hi": t + 0.05, "val_value": v}
            for li, (t, v) in enumerate(zip(test, val))]


def test_select_layer_argmax_first_on_ties_nan_skipped():
    assert select_layer([0.5, 0.7, 0.7, 0.6]) == 1
    assert select_layer([np.nan, 0.6, np.nan, 0.9]) == 3
    with pytest.raises(ProbeError, match="NaN"):
        select_layer([np.nan, np.nan])
    with pytest.raises(ProbeError, match="non-empty"):
        select_layer([])


def test_a_test_only_spike_is_not_selected():
    """Layer 3 is the best on test (0.95) but not on validation: it must not be chosen, and
    the reported number is the test score at the validation-best layer."""
    test = [0.6, 0.7, 0.72, 0.95, 0.71]
    val = [0.6, 0.74, 0.73, 0.65, 0.70]
    (best,) = best_layers(_rows(test, val))
    assert best["layer"] == 1 and best["value"] == 0.7
    assert best["selected_by"] == "validation"


def test_a_validation_spike_is_selected():
    test = [0.6, 0.7, 0.72, 0.69, 0.71]
    val = [0.6, 0.62, 0.61, 0.90, 0.63]
    (best,) = best_layers(_rows(test, val))
    assert best["layer"] == 3 and best["value"] == 0.69


def test_best_layers_refuses_rows_without_validation_and_skips_baselines():
    rows = _rows([0.6, 0.7], [0.6, 0.7])
    rows.append({"dataset": "d", "kind": "memorisation", "layer": -1, "hook": "",
                 "metric": "accuracy", "value": 0.99, "lo": 0.9, "hi": 1.0})
    assert [r["kind"] for r in best_layers(rows)] == ["supervised"]
    for r in rows:
        r.pop("val_value", None)
    with pytest.raises(ProbeError, match="val_value"):
        best_layers(rows)


def test_validation_split_is_leak_free_and_scores_planted_layers():
    acts, labels, _ = planted_layers(n=300, n_layers=4, d=16, seed=3)
    groups = [f"g{i // 3}" for i in range(300)]                  # 100 groups of 3 pairs
    fit, val = validation_indices(groups, None, val_size=0.25, seed=0)
    assert not {groups[i] for i in fit} & {groups[i] for i in val}
    assert len(val) > 0 and len(fit) > 0
    scores = validation_scores(acts, labels, groups, kinds=("supervised", "mass_mean"), seed=0)
    for kind, v in scores.items():
        assert v.shape == (4,)
        assert v[3] > v[0], kind                                 # signal grows with depth
        assert select_layer(v) >= 2, kind
    twice = validation_scores(acts, labels, groups, kinds=("mass_mean",), seed=0, repeats=2)
    assert twice["mass_mean"].shape == (4,) and not np.array_equal(twice["mass_mean"],
                                                                   scores["mass_mean"])


def test_no_validation_split_is_a_clear_error():
    acts, labels, _ = planted_layers(n=40, n_layers=2, d=8, seed=4)
    with pytest.raises(ProbeError, match="validation"):
        validation_scores(acts, labels, ["one"] * 40, kinds=("mass_mean",))
