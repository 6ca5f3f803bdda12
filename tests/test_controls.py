"""The controls with known answers: their rows carry the group differences the registry tests,
the shuffled probe learns nothing, and the verdicts come out as designed on a model that
solves the task (the embedded one) and not as designed on one that does not (a random model):
a control can fail."""

from __future__ import annotations

import numpy as np
import pytest

from analyses.replication.claims import CONTROL_EXPECT, evaluate_claims
from analyses.controls import ControlsConfig, control_rows, run_controls
from ppairs_lens.activations.pipeline import ensure_store
from ppairs_lens.data import builtin_dataset
from ppairs_lens.evaluation.protocol import EvalSettings

SETTINGS = EvalSettings(test_size=0.5, n_boot=200)


def _claims(rows, model="x"):
    out = evaluate_claims({"model": model, "controls": rows}, None)["claims"]
    return {c["id"]: c for c in out if c["id"] in CONTROL_EXPECT}


def test_rows_keep_one_difference_per_test_group(tiny, tmp_path):
    store = ensure_store(tiny, builtin_dataset("larger_number", n=80), tmp_path / "stores")
    rec = run_controls(store, ControlsConfig(n_pairs=80, settings=SETTINGS), tmp_path)
    assert [r.control for r in rec.rows] == ["supervised-beats-chance", "shuffled-beats-chance",
                                             "shuffled-beats-supervised"]
    for r in rec.rows:
        assert len(r.group_diffs) == r.n_groups >= 10
        assert r.lo <= r.value <= r.hi
    assert (tmp_path / "controls.csv").is_file()
    # a random model's probe has nothing to learn: a control may come out otherwise
    got = _claims(rec.data())
    assert set(got) == set(CONTROL_EXPECT)
    assert all(c["outcome"] for c in got.values())


def test_the_verdicts_can_hold_and_fail_as_designed():
    """Synthetic rows of a solved task: the true probe holds, the shuffled one fails against
    it; and a planted failure (the true probe at chance) is reported as not as expected."""
    rng = np.random.default_rng(0)
    g = 20

    def row(name, diffs):
        d = list(map(float, diffs))
        return {"control": name, "statement": name, "value": float(np.mean(d)),
                "lo": float(np.min(d)), "hi": float(np.max(d)), "n": 4 * g, "n_groups": g,
                "group_diffs": d}
    solved = [row("supervised-beats-chance", rng.uniform(0.3, 0.5, g)),
              row("shuffled-beats-chance", rng.choice([-0.25, 0.0, 0.25], g)),
              row("shuffled-beats-supervised", rng.uniform(-0.8, -0.4, g))]
    got = _claims(solved)
    assert all(c["as_expected"] for c in got.values()), {k: c["outcome"] for k, c in got.items()}
    broken = [row("supervised-beats-chance", rng.choice([-0.25, 0.0, 0.25], g)), *solved[1:]]
    assert not _claims(broken)["ours.control.supervised-beats-chance"]["as_expected"]


@pytest.mark.integration
def test_the_embedded_model_passes_its_controls(smol, tmp_path):
    store = ensure_store(smol, builtin_dataset("larger_number", n=160), tmp_path / "stores")
    got = _claims(control_rows(store, ControlsConfig(settings=SETTINGS)).data())
    assert all(c["as_expected"] for c in got.values()), {k: (c["outcome"], c["value"])
                                                          for k, c in got.items()}

