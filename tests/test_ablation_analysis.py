"""The ablation analysis on the tiny model: conditions, nulls, p-values, outputs, CLI."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

import analyses.ablation as mod
from analyses.ablation import AblationConfig, run_ablation
from analyses.ablation_plots import read_rows
from ppairs_lens.activations.pipeline import harvest_dataset
from ppairs_lens.data import builtin_dataset
from ppairs_lens.errors import PPairsError, StoreError
from ppairs_lens.interventions.conditions import (
    BASELINE,
    CONTROL,
    CONTROL_AT_READOUT,
    MATCHED_NULL,
    RANDOM_NULL,
)
from ppairs_lens.evaluation.null_test import null_test
from ppairs_lens.evaluation.verdicts import holm
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.evaluation.protocol import EvalSettings

N_RANDOM, N_MATCHED = 12, 9
PRESETS = ("paper", "full")


def _one_thread(fn):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny forwards: one thread avoids oversubscribing shared cores
    try:
        return fn()
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def store_ds(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("ablation")
    ds = builtin_dataset("larger_number", n=40)
    return harvest_dataset(tiny, ds, root / "store", progress=False), ds, root


@pytest.fixture(scope="module")
def ablation_run(tiny, store_ds):
    store, ds, root = store_ds
    cfg = AblationConfig(stores=[str(store.path)], n_random=N_RANDOM, n_matched=N_MATCHED,
                         settings=EvalSettings(n_boot=50), max_eval_pairs=10, presets=PRESETS,
                         tie_tol=1e-6)
    rows = _one_thread(lambda: run_ablation(tiny, [(store, ds)], root / "out", cfg,
                                            log=lambda s: None)).data()
    return rows, read_rows(root / "out" / "ablation_null.csv"), root / "out", cfg


def test_every_condition_and_null_for_each_preset(ablation_run):
    rows, null_rows, _, _ = ablation_run
    for preset in PRESETS:
        conds = [r["condition"] for r in rows if r["preset"] == preset]
        assert conds == [BASELINE, *PROBE_KINDS, CONTROL, RANDOM_NULL, MATCHED_NULL,
                         CONTROL_AT_READOUT]
        nulls = [r["null"] for r in null_rows if r["preset"] == preset]
        assert nulls.count(RANDOM_NULL) == N_RANDOM and nulls.count(MATCHED_NULL) == N_MATCHED
    assert {r["positions"] for r in rows} == {"last"}
    base = [r for r in rows if r["condition"] == BASELINE]
    assert all(r["effect"] == 0.0 and r["margin"] == 0.0 for r in base)


def test_positive_control_collapses_the_judge_in_the_same_preset(ablation_run):
    rows, _, _, _ = ablation_run
    for preset in PRESETS:
        by = {r["condition"]: r for r in rows if r["preset"] == preset}
        ctrl, base = by[CONTROL], by[BASELINE]
        assert ctrl["mean_abs_z"] < 1e-5 < base["mean_abs_z"]
        assert ctrl["effect"] == pytest.approx(base["mean_abs_z"], rel=1e-3)
        assert ctrl["accuracy"] == 0.5  # no answer at all scores half
        assert ctrl["abs_cos_unembedding"] == pytest.approx(1.0)


def test_judge_change_rows_for_the_verdicts(ablation_run):
    rows, _, _, _ = ablation_run
    for preset in PRESETS:
        by = {r["condition"]: r for r in rows if r["preset"] == preset}
        base = by[BASELINE]
        assert base["judge_accuracy_lo"] <= base["judge_accuracy"] <= base["judge_accuracy_hi"]
        assert 0.5 <= base["same_answer_share"] <= 1.0
        for cond in (*PROBE_KINDS, CONTROL, CONTROL_AT_READOUT):
            r = by[cond]
            assert r["delta_accuracy"] == pytest.approx(r["accuracy_delta"])
            for m in ("f1", "accuracy", "logodds"):  # ΔF1: the paper's Table 2 statistic
                # the 90% (TOST) interval sits inside the 95% one, both around the estimate
                assert r[f"delta_{m}_lo"] <= r[f"delta_{m}_tost_lo"] <= r[f"delta_{m}"] \
                    <= r[f"delta_{m}_tost_hi"] <= r[f"delta_{m}_hi"]
            assert "delta_auroc_lo" in r
        # at the read-out hook only, the control is one ablation among others, not z = 0
        ctl = by[CONTROL_AT_READOUT]
        assert ctl["kind"] == "control_readout" and ctl["hook"] == base["hook"]
        after_norm = base["hook"].startswith("ln_final")
        assert (ctl["mean_abs_z"] < 1e-5) == after_norm, base["hook"]
        probes = [r for r in rows if r["preset"] == preset and r["kind"] == "probe"]
        assert [r["p_matched_holm"] for r in probes] == pytest.approx(
            holm([r["p_matched"] for r in probes]).tolist())


def test_control_at_a_block_read_out_is_not_zero_by_construction(tiny, store_ds, tmp_path):
    store, ds, _ = store_ds
    cfg = AblationConfig(stores=[str(store.path)], layer=0, n_random=2, n_matched=2,
                         settings=EvalSettings(n_boot=20),
                         max_eval_pairs=10, tie_tol=1e-6)
    rows = _one_thread(lambda: run_ablation(tiny, [(store, ds)], tmp_path, cfg,
                                            log=lambda s: None)).data()
    by = {r["condition"]: r for r in rows}
    assert by[CONTROL_AT_READOUT]["hook"] == "blocks.0.hook_resid_post"
    assert by[CONTROL]["mean_abs_z"] < 1e-5 < by[CONTROL_AT_READOUT]["mean_abs_z"]


def test_p_values_and_ranks_come_from_the_null_rows(ablation_run):
    rows, null_rows, _, _ = ablation_run
    for r in rows:
        if r["kind"] != "probe":
            continue
        for null in (RANDOM_NULL, MATCHED_NULL):
            e = np.array([q["effect"] for q in null_rows
                          if q["preset"] == r["preset"] and q["null"] == null])
            t = null_test(r["effect"], e)
            assert r[f"p_{null}"] == pytest.approx(t["p"])
            assert r[f"rank_{null}"] == t["rank"] and r[f"n_{null}"] == len(e)
            assert f"excess_{null}" not in r  # the permutation p-value says it
    summ = [r for r in rows if r["kind"] == "null"]
    assert all(r["effect_lo"] <= r["effect"] <= r["effect_hi"] for r in summ)


def test_outputs_and_config_written(ablation_run):
    _, _, out, _ = ablation_run
    for name in ("ablation.csv", "ablation_null.csv", "ablation_z.csv", "ablation.png",
                 "ablation.svg", "ablation.config.json"):
        assert (out / name).is_file(), name
    assert not (out / "ablation_probe_refit.csv").exists()  # refit is off by default
    cfg = json.loads((out / "ablation.config.json").read_text())["config"]
    assert cfg["positions"] == "last" and cfg["settings"]["split_by"] == "auto"
    assert cfg["n_random"] == N_RANDOM and cfg["n_matched"] == N_MATCHED
    found = json.loads((out / "ablation_run.json").read_text())  # results: never in the config
    assert found["layers_used"] and found["splits_used"] and found["timings"]
    assert not {"layers_used", "splits_used", "timings", "model"} & set(cfg)
    header = (out / "ablation.csv").read_text().splitlines()[0].split(",")
    for col in ("effect", "margin", "accuracy", "p_random", "p_matched", "rank_random",
                "rank_matched", "n"):
        assert col in header


def test_defaults_match_the_study():
    cfg = AblationConfig(stores=[])
    assert (cfg.settings.split_by, cfg.n_random, cfg.n_matched, cfg.presets, cfg.positions,
            cfg.max_eval_pairs, cfg.refit) == ("auto", 100, 100, ("paper",), "last", 200, False)


def test_read_out_is_the_validation_choice(tiny, store_ds, tmp_path, monkeypatch):
    import ppairs_lens.evaluation.readout_choice as rc

    store, ds, _ = store_ds
    seen = {}

    def planted(split, **kw):  # the spike sits at read-out 1
        seen["n"] = split.acts_train.shape[0]
        seen["by"] = split.split_used
        n = split.acts_train.shape[2]
        return {k: np.array([0.5, 0.9] + [0.6] * (n - 2)) for k in PROBE_KINDS}

    monkeypatch.setattr(rc, "validation_scores", planted)
    cfg = AblationConfig(stores=[], n_random=2, n_matched=2, settings=EvalSettings(n_boot=10),
                         max_eval_pairs=4)
    rows = _one_thread(lambda: run_ablation(tiny, [(store, ds)], tmp_path, cfg,
                                            log=lambda s: None)).data()
    assert {r["layer"] for r in rows} == {1}
    assert seen["n"] < len(store.pairs())  # train pairs only
    found = json.loads((tmp_path / "ablation_run.json").read_text())
    assert seen["by"] == found["splits_used"][store.meta.dataset]  # made as the test split


def test_refit_when_asked(tiny, store_ds, tmp_path):
    store, ds, _ = store_ds
    cfg = AblationConfig(stores=[], n_random=2, n_matched=2, settings=EvalSettings(n_boot=10),
                         max_eval_pairs=4,
                         refit=True, max_refit_train=10, kinds=("supervised",))
    _one_thread(lambda: run_ablation(tiny, [(store, ds)], tmp_path, cfg, log=lambda s: None))
    text = (tmp_path / "ablation_probe_refit.csv").read_text()
    assert "refit" in text and CONTROL in text and "random_000" in text


def test_refuses_other_records_and_every_position(ablation_run, tiny, store_ds, tmp_path):
    store, _, _ = store_ds
    _, _, _, cfg = ablation_run
    other = builtin_dataset("larger_number", n=40, seed=1)
    with pytest.raises(StoreError, match="fingerprint"):
        run_ablation(tiny, [(store, other)], tmp_path, cfg, log=lambda s: None)
    with pytest.raises(PPairsError, match="positions='last'"):
        run_ablation(tiny, [(store, store_ds[1])], tmp_path, replace(cfg, positions="all"),
                     log=lambda s: None)


def test_replot_from_saved_files(ablation_run):
    from analyses.ablation import replot

    rows, _, out, _ = ablation_run
    (out / "ablation.png").unlink()
    replot(out)
    assert (out / "ablation.png").is_file()
    again = read_rows(out / "ablation.csv")
    assert len(again) == len(rows)
    assert again[1]["effect"] == pytest.approx(rows[1]["effect"])


def test_cli_quick(tiny, tmp_path, monkeypatch, capsys):
    import ppairs_lens.models.loading
    from analyses.cli import build_parser

    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    real = mod.run_ablation
    seen = {}

    def smaller(bridge, items, out, cfg, **kw):  # only the wiring is under test here
        seen["cfg"] = cfg
        return real(bridge, items, out, replace(cfg, n_random=3, n_matched=3), **kw)

    monkeypatch.setattr(mod, "run_ablation", smaller)
    args = build_parser().parse_args(
        ["ablate", "--datasets", "larger_number", "--max-pairs", "24", "--quick",
         "--stores", str(tmp_path / "stores"), "--out", str(tmp_path / "out")])
    _one_thread(lambda: mod.cli(args))
    printed = capsys.readouterr().out
    assert CONTROL in printed and "p random" in printed
    assert (tmp_path / "out" / "ablation.png").is_file()
    assert seen["cfg"].max_eval_pairs == 24 and seen["cfg"].positions == "last"
