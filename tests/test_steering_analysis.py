"""The steering dose-response on the tiny model: rows, nulls, outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from analyses.steering import SteeringConfig, run_steering
from ppairs_lens.activations.pipeline import harvest_dataset
from ppairs_lens.data import builtin_dataset
from ppairs_lens.interventions.conditions import BASELINE, MATCHED_NULL, RANDOM_NULL

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def steering_run(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("steering")
    ds = builtin_dataset("larger_number", n=40)
    store = harvest_dataset(tiny, ds, root / "store", progress=False)
    cfg = SteeringConfig(stores=[str(store.path)], n_random=5, n_matched=4, max_eval_pairs=8,
                         alphas=(-0.5, 0.5, 1.0))
    rows = run_steering(tiny, [(store, ds)], root / "out", cfg, log=lambda s: None).data()
    return rows, root / "out", cfg


def test_rows_cover_probes_and_nulls_at_every_alpha(steering_run):
    rows, out, cfg = steering_run
    conds = {r["condition"] for r in rows}
    assert {BASELINE, RANDOM_NULL, MATCHED_NULL} <= conds
    probes = [r for r in rows if r["kind"] == "probe"]
    assert probes and {r["alpha"] for r in probes} == set(cfg.alphas)
    for r in probes:
        assert np.isfinite(r["delta_z"]) and 0 <= r["accuracy"] <= 1
        assert 0 < r["p_slope_random"] <= 1 and 0 < r["p_slope_matched"] <= 1
    for r in rows:
        if r["kind"] == "null":
            assert r["delta_z_lo"] <= r["delta_z"] <= r["delta_z_hi"]
    assert all((out / f) .is_file() for f in ("steering.csv", "steering.png",
                                               "steering.config.json"))
    found = json.loads((out / "steering_run.json").read_text())  # results: never in the config
    assert found["norm_units"] and found["layers_used"]


def test_judge_under_steering_zero_vector_is_unsteered(tiny):
    from ppairs_lens.interventions.steering import judge_under_steering

    ds = builtin_dataset("larger_number", n=6)
    d = tiny.cfg.d_model
    v = torch.zeros(2, d)
    v[1, 0] = 5.0
    out = judge_under_steering(tiny, ds, None, v, ["blocks.1.hook_resid_post"])
    assert out["z"].shape == (6, 2)
    again = judge_under_steering(tiny, ds, None, v[:1], ["blocks.1.hook_resid_post"])
    np.testing.assert_allclose(out["z"][:, 0], again["z"][:, 0], atol=1e-5)
    assert not np.allclose(out["z"][:, 0], out["z"][:, 1])


def test_steer_command_passes_its_options(tiny, tmp_path, monkeypatch):
    import analyses.steering
    import ppairs_lens.models.loading
    from analyses.cli import main

    got = {}
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    monkeypatch.setattr(analyses.steering, "run_steering",
                        lambda bridge, items, out, cfg: got.setdefault("cfg", cfg)
                        and analyses.steering.SteeringRows())
    argv = ["steer", "--datasets", "larger_number", "--max-pairs", "16", "--layer", "1",
            "--n-random", "3", "--n-matched", "2", "--alphas", "-1", "2", "--split", "pair",
            "--stores", str(tmp_path / "stores"), "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    cfg = got["cfg"]
    assert (cfg.layer, cfg.n_random, cfg.n_matched, cfg.alphas, cfg.settings.split_by) == (
        1, 3, 2, (-1.0, 2.0), "pair")


def test_one_pass_for_every_alpha_equals_a_pass_each(tiny):
    """The steering's fast path (the unsteered judge and every alpha x direction in one pass)
    gives what a pass per alpha gave."""
    from ppairs_lens.interventions.steering import judge_under_steering

    ds = builtin_dataset("larger_number", n=6)
    hook = ["blocks.1.hook_resid_post"]
    r = torch.nn.functional.normalize(torch.randn(3, tiny.cfg.d_model,
                                                  generator=torch.Generator().manual_seed(0)))
    alphas = (-2.0, 3.0)
    z = {a: judge_under_steering(tiny, ds, None, a * r, hook)["z"] for a in alphas}
    z0 = judge_under_steering(tiny, ds, None, torch.zeros(1, tiny.cfg.d_model), hook)["z"]
    one = judge_under_steering(tiny, ds, None, torch.cat([torch.zeros(1, tiny.cfg.d_model),
                                                          *(a * r for a in alphas)]), hook)["z"]
    np.testing.assert_allclose(one[:, 0], z0[:, 0], atol=1e-5)
    per = one[:, 1:].reshape(len(ds), len(alphas), 3).transpose(1, 0, 2)  # as steer_store
    for k, a in enumerate(alphas):
        np.testing.assert_allclose(per[k], z[a], atol=1e-5)
    assert np.abs(per[1] - z0).max() > 1e-4  # the vectors acted
