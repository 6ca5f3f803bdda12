"""The one evaluation protocol (``EvalSettings``): every experiment config holds it, and the main
job hands the SAME record to every step (on the seed experiments' data or on the built-ins),
so that no step splits or resamples differently."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, fields

import pytest

from analyses.ablation import AblationConfig
from analyses.cli import build_parser
from analyses.replication.run import ReplicationConfig, step_configs
from analyses.replication.config import BUILTINS, replication_config
from ppairs_lens.errors import PPairsError
from ppairs_lens.evaluation.bootstrap import N_BOOT
from ppairs_lens.presets import PREVIEWS, settings_at
from ppairs_lens.evaluation.protocol import BUILTIN_TEST_SIZE, PAPER_TEST_SIZE, EvalSettings
from ppairs_lens.io.outputs import load_config, save_config

SHARED = {"seed", "n_boot", "test_size", "split_by"}


def test_the_record_is_frozen_checked_and_gives_the_split_keywords():
    s = EvalSettings()
    assert (s.seed, s.n_boot, s.test_size, s.split_by, s.quick) == (
        0, N_BOOT, BUILTIN_TEST_SIZE, "auto", False)
    assert s.split_kwargs() == {"test_size": 0.3, "split_by": "auto", "seed": 0}
    assert s.boot_kwargs() == {"n_boot": N_BOOT, "seed": 0}
    with pytest.raises(FrozenInstanceError):
        s.seed = 1  # type: ignore[misc]
    q = settings_at(s, "quick")
    assert q.quick and q.n_boot == PREVIEWS["quick"].n_boot and settings_at(q, "quick") == q
    assert settings_at(EvalSettings(n_boot=20), "quick").n_boot == 20  # never more resamples
    assert settings_at(s, "demo") is s and settings_at(s, "full") is s
    for bad in ({"split_by": "contexts"}, {"test_size": 1.0}, {"test_size": 0}, {"n_boot": 0}):
        with pytest.raises(PPairsError):
            EvalSettings(**bad)


def test_no_config_repeats_the_shared_fields():
    from analyses.cross_dataset import TransferConfig
    from analyses.distribution_shift import ShiftConfig
    from analyses.finetuning import FinetuningConfig
    from analyses.insertion import InsertionConfig
    from analyses.layer_sweep import SweepConfig
    from analyses.probes_vs_prompting import PvPConfig
    from analyses.ranking import RankingConfig
    from analyses.steering import SteeringConfig
    from analyses.thesis_tables import ThesisTablesConfig

    for cls in (AblationConfig, TransferConfig, ShiftConfig, SweepConfig, PvPConfig,
                SteeringConfig, ThesisTablesConfig, InsertionConfig, RankingConfig,
                ReplicationConfig, FinetuningConfig):
        names = {f.name for f in fields(cls)}
        assert "settings" in names and not names & (SHARED | {"quick"}), cls.__name__


def test_the_builtins_choice_passes_one_record_to_every_step():
    cfg = replication_config("quick", **BUILTINS,
                             settings=EvalSettings(seed=3, split_by="item"))
    paths = {"larger_number": "a", "capital_true": "b"}
    cfgs = step_configs(cfg, paths, {"larger_number": "comparison", "capital_true": "statement"})
    for name, sub in cfgs.items():
        assert sub.settings is cfg.settings, name  # the ablation's test share included
    assert cfg.settings.quick and cfg.settings.seed == 3
    assert cfgs["ablation"].stores == ["a"] == cfgs["steering"].stores


def test_the_replication_passes_one_record_to_every_step(tmp_path):
    cfg = replication_config("quick", shared_data=str(tmp_path))
    assert cfg.settings.test_size == PAPER_TEST_SIZE and cfg.settings.quick
    paths = {"summeval-coherence": "s1", "summeval-fluency": "s2", "mt-bench": "m",
             "llmbar-clean": "l", "cities": "c"}
    kinds = {n: "statement" if n == "cities" else "comparison" for n in paths}
    cfgs = step_configs(cfg, paths, kinds)
    for name, sub in cfgs.items():
        assert sub.settings is cfg.settings, name
    assert cfgs["thesis tables"].stores == ["s1", "s2"]
    assert cfgs["transfer"].stores == ["s1", "m", "l"]  # one SummEval aspect, no statements
    assert cfgs["ablation"].stores == ["m"] == cfgs["steering"].stores


def test_the_command_line_builds_one_record():
    args = build_parser().parse_args(["sweep", "--quick", "--seed", "4", "--n-boot", "7",
                                      "--test-size", "0.4", "--split-by", "pair"])
    assert args.settings == EvalSettings(seed=4, n_boot=7, test_size=0.4, split_by="pair",
                                         quick=True)
    args = build_parser().parse_args(["rank", "--quick"])
    assert args.settings == settings_at(EvalSettings(), "quick")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["ablate", "--test-size", "1.5"])


def test_saved_configs_nest_the_record_and_load_back(tmp_path):
    cfg = AblationConfig(stores=["x"], settings=EvalSettings(seed=2, test_size=0.4))
    save_config(tmp_path, "ablation", cfg)
    saved = json.loads((tmp_path / "ablation.config.json").read_text())["config"]
    assert saved["settings"]["test_size"] == 0.4 and "seed" not in saved
    back = load_config(AblationConfig, tmp_path / "ablation.config.json")
    assert back.settings == cfg.settings and back.kinds == cfg.kinds
    # the record's fields at the top level instead (no version wrote that): refused, one line
    flat = {k: v for k, v in saved.items() if k != "settings"}
    flat.update(seed=2, n_boot=N_BOOT, test_size=0.4, split_by="auto")
    (tmp_path / "flat.config.json").write_text(json.dumps({"config": flat,
                                                           "package_version": "0.1.0"}))
    with pytest.raises(PPairsError, match=r"flat.config.json: field 'config' does not fit "
                       r"AblationConfig \(saved by ppairs-lens 0.1.0\): AblationConfig has no "
                       r"field\(s\) \['n_boot', 'seed', 'split_by', 'test_size'\]"):
        load_config(AblationConfig, tmp_path / "flat.config.json")


def test_a_quick_record_stays_as_given_and_optional_records_load_back(tmp_path):
    # --quick --n-boot 300: the explicit count survives the preset applied a second time
    s = EvalSettings(n_boot=300, quick=True)
    assert settings_at(s, "quick") is s and replication_config("quick", settings=s).settings is s
    assert settings_at(EvalSettings(n_boot=5000), "quick").n_boot == PREVIEWS["quick"].n_boot
    # nested records come back as their records, an optional one (the judges' allure:
    # AllureConfig | None) too, and so does each step's config
    cfg = ReplicationConfig(settings=EvalSettings(seed=3, test_size=PAPER_TEST_SIZE))
    save_config(tmp_path, "replication", cfg)
    back = load_config(ReplicationConfig, tmp_path / "replication.config.json")
    assert back.judges.allure == cfg.judges.allure and back.settings == cfg.settings
    assert (back.insertion, back.finetuning, back.controls) == (cfg.insertion, cfg.finetuning,
                                                                cfg.controls)
    assert back.sizes == cfg.sizes


def test_save_figure_writes_svg_text_as_text_and_a_preview_png_only(tmp_path):
    import matplotlib.pyplot as plt

    from ppairs_lens.io.outputs import save_figure

    fig, ax = plt.subplots()
    ax.set_title("coherence 0.57")
    (tmp_path / "a").mkdir()
    full = save_figure(fig, tmp_path / "a", "f")
    assert [p.suffix for p in full] == [".png", ".svg"]
    svg = full[1].read_text()
    assert "<text" in svg and "coherence 0.57" in svg  # editable text, not glyph paths
    (tmp_path / "b").mkdir()
    assert [p.name for p in save_figure(fig, tmp_path / "b", "f", preview=True)] == ["f.png"]
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["f.png"]
    save_figure(fig, tmp_path / "a", "f", preview=True)  # a full run's SVG would not match
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["f.png"]
    plt.close(fig)
