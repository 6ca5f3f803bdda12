"""The directional-ablation analysis end to end on the tiny random model."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from analyses.ablation import AblationConfig, run_ablation
from ppairs_lens.evaluation.answer_change import BASELINE, CONTROL, RANDOM_NULL
from ppairs_lens.activations.pipeline import harvest_dataset
from ppairs_lens.data import builtin_dataset
from ppairs_lens.errors import StoreError
from ppairs_lens.evaluation.answer_change import condition_rows
from ppairs_lens.interventions.directions import random_directions
from ppairs_lens.probes.estimators import PROBE_KINDS

N_RANDOM = 3
PRESETS = ("paper", "full")


@pytest.fixture(scope="module")
def ablation_run(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("ablation")
    ds = builtin_dataset("larger_number", n=30)
    store = harvest_dataset(tiny, ds, root / "store", progress=False)
    # The random tiny model answers within ~1e-4 of 0.5, the positive control within ~1e-9:
    # the default tie tolerance (1e-5) tells them apart.
    cfg = AblationConfig(stores=[str(store.path)], n_random=N_RANDOM, n_boot=30,
                         max_eval_pairs=8, max_refit_train=12, refit_random=1)
    # ~60 tiny forward passes: one thread avoids oversubscribing shared cores (3-10x faster).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows, refit_rows = run_ablation(tiny, [(store, ds)], root / "out", cfg,
                                        log=lambda s: None)
    finally:
        torch.set_num_threads(threads)
    return rows, refit_rows, root / "out", cfg, store, ds


def test_every_condition_for_both_presets(ablation_run):
    rows, _, _, cfg, _, _ = ablation_run
    conds = {BASELINE, *PROBE_KINDS, *(f"random_{i:02d}" for i in range(N_RANDOM)),
             RANDOM_NULL, CONTROL}
    for preset in PRESETS:
        for metric in ("accuracy", "auroc", "p_correct", "mean_abs_dev", "tie_fraction",
                       "p_first_choice", "flip_rate", "mean_abs_dp"):
            got = {r["condition"] for r in rows if r["preset"] == preset and r["metric"] == metric}
            assert got == conds, (preset, metric)
    base = [r for r in rows if r["condition"] == BASELINE]
    assert all(r["delta"] == 0 and r["lo"] == 0 and r["hi"] == 0 for r in base)
    assert all(r["n"] == 8 for r in rows)


def test_positive_control_forces_ties(ablation_run):
    rows, *_ = ablation_run
    ctrl = {(r["preset"], r["metric"]): r for r in rows if r["condition"] == CONTROL}
    for preset in PRESETS:
        assert ctrl[preset, "mean_abs_dev"]["value"] < 1e-4
        assert ctrl[preset, "tie_fraction"]["value"] == 1.0
        assert ctrl[preset, "accuracy"]["value"] == 0.5  # every tie scores half
        assert ctrl[preset, "auroc"]["value"] == 0.5
        # Equal choice logits in both item orders: no position bias left either.
        assert abs(ctrl[preset, "p_first_choice"]["value"] - 0.5) < 1e-4
    base = {r["metric"]: r for r in rows if r["condition"] == BASELINE}
    assert base["tie_fraction"]["value"] < 1.0  # the baseline does answer


def test_random_null_is_finite_and_summarised(ablation_run):
    rows, *_ = ablation_run
    for preset in PRESETS:
        rs = [r for r in rows if r["preset"] == preset and r["kind"] == "random"
              and r["metric"] == "p_correct"]
        assert len(rs) == N_RANDOM
        assert all(math.isfinite(r["delta"]) for r in rs)
        null = next(r for r in rows if r["preset"] == preset and r["condition"] == RANDOM_NULL
                    and r["metric"] == "p_correct")
        d = [r["delta"] for r in rs]
        assert null["n_directions"] == N_RANDOM
        assert null["delta"] == pytest.approx(np.mean(d))
        assert min(d) <= null["lo"] <= null["hi"] <= max(d)


def test_outputs_and_config_written(ablation_run):
    rows, refit_rows, out, cfg, store, _ = ablation_run
    for name in ("ablation.csv", "ablation_probe_refit.csv", "ablation_proba.csv",
                 "ablation.config.json", "ablation.png", "ablation.svg"):
        assert (out / name).is_file(), name
    import csv

    proba = list(csv.DictReader((out / "ablation_proba.csv").open()))
    # baseline and control once, each direction once per preset; 8 records each
    assert len(proba) == 8 * (2 + len(PRESETS) * (len(PROBE_KINDS) + N_RANDOM))
    ctrl = [float(r["p"]) for r in proba if r["condition"] == CONTROL]
    assert max(abs(p - 0.5) for p in ctrl) <= cfg.tie_tol
    saved = json.loads((out / "ablation.config.json").read_text())["config"]
    assert saved["presets"] == list(PRESETS) and saved["n_random"] == N_RANDOM
    assert saved["stores"] == [str(store.path)] and saved["timings"]
    header = (out / "ablation.csv").read_text().splitlines()[0].split(",")
    assert header[:9] == ["dataset", "preset", "condition", "metric", "value", "delta", "lo",
                          "hi", "value_lo"]
    assert "n" in header


def test_probe_refit_table(ablation_run, tiny):
    _, refit_rows, _, _, store, _ = ablation_run
    n_layers = tiny.cfg.n_layers
    assert {r["layer"] for r in refit_rows} == {n_layers - 1, n_layers}
    assert {r["mode"] for r in refit_rows} == {"original", "refit"}
    conds = {r["condition"] for r in refit_rows}
    assert conds == {BASELINE, *PROBE_KINDS, "random_00", CONTROL}
    assert all(math.isfinite(r["value"]) for r in refit_rows)
    # The positive control only acts after the final norm: the last block's read-out is the
    # clean one (up to batching round-off), so the clean probes score as on clean data.
    for r in refit_rows:
        if (r["condition"] == CONTROL and r["layer"] == n_layers - 1 and r["mode"] == "original"
                and r["metric"] == "accuracy"):
            assert abs(r["delta_vs_clean"]) <= 1 / r["n_test"] + 1e-9
    clean = [r for r in refit_rows if r["condition"] == BASELINE]
    assert all(r["delta_vs_clean"] == 0 for r in clean)


def test_condition_rows_paired_deltas():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 40).astype(float)
    p = np.clip(np.where(y == 1, 0.7, 0.3) + rng.normal(0, 0.15, 40), 0.01, 0.99)
    same = condition_rows(y, p, p, list(range(40)), tol=1e-3, n_boot=50, seed=0)
    assert all(r["delta"] == 0 and r["lo"] == 0 and r["hi"] == 0 for r in same)
    tie = condition_rows(y, p, np.full(40, 0.5), list(range(40)), tol=1e-3, n_boot=50, seed=0)
    m = {r["metric"]: r for r in tie}
    assert m["accuracy"]["value"] == 0.5 and m["tie_fraction"]["value"] == 1.0
    assert m["flip_rate"]["value"] == 1.0 and m["flip_rate"]["delta"] == 1.0
    assert m["accuracy"]["lo"] <= m["accuracy"]["delta"] <= m["accuracy"]["hi"] < 0


def test_random_directions_are_unit_and_seeded():
    a, b = random_directions(4, 16, 3), random_directions(4, 16, 3)
    assert np.allclose(a.norm(dim=-1).numpy(), 1.0)
    assert (a == b).all() and not (a == random_directions(4, 16, 4)).all()


def test_refuses_a_store_of_other_records(ablation_run, tiny, tmp_path):
    _, _, _, cfg, store, _ = ablation_run
    other = builtin_dataset("larger_number", n=30, seed=1)
    with pytest.raises(StoreError, match="fingerprint"):
        run_ablation(tiny, [(store, other)], tmp_path, cfg, log=lambda s: None)


def test_replot_from_saved_files(ablation_run):
    from analyses.ablation import replot
    from analyses.ablation_plots import read_rows

    rows, _, out, _, _, _ = ablation_run
    (out / "ablation.png").unlink()
    replot(out)
    assert (out / "ablation.png").is_file()
    again = read_rows(out / "ablation.csv")
    assert len(again) == len(rows)
    assert again[0]["value"] == pytest.approx(rows[0]["value"])


def test_cli_quick(tiny, tmp_path, monkeypatch, capsys):
    import ppairs_lens.models.loading
    from analyses.ablation import cli
    from analyses.cli import build_parser

    import analyses.ablation as mod

    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    real = mod.run_ablation
    seen = {}

    def smaller(bridge, items, out, cfg, **kw):  # only the wiring is under test here
        seen["cfg"] = cfg
        from dataclasses import replace as _replace
        return real(bridge, items, out, _replace(cfg, n_random=2, refit=False), **kw)

    monkeypatch.setattr(mod, "run_ablation", smaller)
    args = build_parser().parse_args(
        ["ablate", "--datasets", "larger_number", "--max-pairs", "24", "--quick",
         "--stores", str(tmp_path / "stores"), "--out", str(tmp_path / "out")])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cli(args)
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out
    assert "unembedding" in printed and "random" in printed
    assert (tmp_path / "out" / "ablation.png").is_file()
    assert seen["cfg"].max_eval_pairs == 24 and seen["cfg"].n_random == 10  # --quick settings
