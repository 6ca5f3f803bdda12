"""Presets as data: each experiment declares how ``quick`` and ``full`` differ from its
defaults (the demo) once, in its ``PRESETS``; the demo's sizes are those that made
``figures/``; no preset restates a default; the command line picks one by name."""

from __future__ import annotations

from dataclasses import asdict, fields, is_dataclass

import pytest

from analyses import ablation, finetuning, insertion, ranking, steering
from analyses.cli import build_parser
from analyses.replication.config import PRESETS, ReplicationConfig, replication_config as rc
from analyses.replication.sets import ReplicationSizes
from ppairs_lens.errors import PPairsError
from ppairs_lens.presets import PRESET_NAMES, PREVIEWS, Preset, at_preset
from ppairs_lens.evaluation.protocol import PAPER_TEST_SIZE
from ppairs_lens.judges.study import AllureConfig
from ppairs_lens.probes.estimators import ALL_PROBE_KINDS

#: Each experiment's presets and a config at its defaults.
EXPERIMENTS = {
    "replication": (PRESETS, ReplicationConfig()),
    "ablation": (ablation.PRESETS, ablation.AblationConfig()),
    "steering": (steering.PRESETS, steering.SteeringConfig()),
    "insertion": (insertion.PRESETS, insertion.InsertionConfig()),
    "ranking": (ranking.PRESETS, ranking.RankingConfig()),
    "finetuning": (finetuning.PRESETS, finetuning.FinetuningConfig()),
}


def test_the_demo_is_the_defaults_and_keeps_the_sizes_behind_figures():
    """figures/ was made at these sizes: a change here changes its numbers."""
    cfg = rc("demo")
    assert cfg == ReplicationConfig()
    assert asdict(cfg.sizes) == asdict(ReplicationSizes(
        summeval_contexts=24, summeval_items=3,
        summeval_aspects=("coherence", "consistency", "fluency", "relevance"),
        newsroom_contexts=2, newsroom_items=7, newsroom_aspects=("coherence",),
        hanna_contexts=8, hanna_items=3, hanna_aspect="coherence", story_cloze_pairs=100,
        mctaco_pairs=160, mctaco_per_question=1, mt_bench_pairs=52, mt_bench_per_question=1, llmbar_pairs=60,
        llmbar_adversarial=("Adversarial_Neighbor", "Adversarial_GPTOut"),
        llmbar_adversarial_pairs=12))
    assert cfg.settings.test_size == PAPER_TEST_SIZE and not cfg.settings.quick
    assert cfg.datasets is None and cfg.max_pairs is None
    assert (cfg.judges.train_pairs, cfg.judges.allure) == (
        6, AllureConfig(per_round=1, pool=6, test_pairs=2))
    assert (cfg.ablation_dataset, cfg.ablation.n_random, cfg.ablation.n_matched,
            cfg.ablation.max_eval_pairs) == ("mt-bench", 20, 20, 12)
    f = cfg.finetuning
    assert (cfg.finetune_datasets, f.max_train, f.max_test, f.curve_sizes,
            f.curve_sizes_full) == (("rocstories",), 8, 20, (8,), None)
    st = cfg.steering
    assert (st.n_random, st.n_matched, st.max_eval_pairs, st.alphas) == (4, 4, 4, (-1.0, 1.0))
    i = cfg.insertion
    assert (i.max_test, i.k, i.n_train, i.max_train_pairs, i.pairwise_pairs, i.methods) == (
        300, 2, 60, 120, 60, ("probe",))
    assert cfg.controls.n_pairs == 160 and cfg.transfer.kinds == ALL_PROBE_KINDS

def test_the_quick_preset_is_the_preview_it_was():
    q = rc("quick")
    assert q.settings.quick and q.settings.n_boot == PREVIEWS["quick"].n_boot
    s = q.sizes
    assert (s.summeval_contexts, s.summeval_items, s.summeval_aspects, s.hanna_contexts,
            s.story_cloze_pairs, s.mctaco_pairs, s.mctaco_per_question, s.mt_bench_pairs,
            s.mt_bench_per_question, s.llmbar_pairs, s.newsroom_contexts, s.llmbar_adversarial,
            s.llmbar_adversarial_pairs) == (
        6, 3, ("coherence",), 0, 16, 16, None, 12, None, 16, 0, ("Adversarial_GPTOut",), 12)
    assert (q.judges.train_pairs, q.judges.allure) == (
        3, AllureConfig(rounds=1, per_round=1, pool=4, test_pairs=2))
    a, st = q.ablation, q.steering
    assert (a.n_random, a.n_matched, a.max_eval_pairs, st.n_random, st.n_matched,
            st.max_eval_pairs, st.alphas) == (4, 4, 2, 2, 2, 2, (-1.0, 1.0))
    f = q.finetuning
    assert (q.finetune_datasets, f.max_train, f.max_test, f.curve_sizes) == (
        ("rocstories",), 4, 4, (4,))
    i = q.insertion
    assert (i.max_test, i.k, i.n_train, i.max_train_pairs, i.pairwise_pairs) == (
        4, 2, 16, 16, 2)
    assert q.controls.n_pairs == 80

@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_a_preset_names_only_fields_it_changes(name):
    presets, default = EXPERIMENTS[name]
    assert set(presets) <= set(PRESET_NAMES) and "demo" not in presets
    for preset_name, preset in presets.items():
        at = at_preset(default, presets, preset_name)
        assert at != default or preset_name in PREVIEWS
        for field_name, value in preset.changes.items():
            current = getattr(default, field_name)
            if is_dataclass(current) and isinstance(value, dict):
                for k, v in value.items():  # a size restated at its default is a duplicate
                    assert getattr(current, k) != v, f"{name} {preset_name}: {field_name}.{k}"
            else:
                assert current != value, f"{name} {preset_name}: {field_name}"


def test_presets_apply_nested_sizes_and_refuse_what_they_cannot():
    full = rc("full", out="x")
    assert full.out == "x" and full.sizes.llmbar_pairs is None
    assert full.sizes.hanna_aspect == ReplicationSizes().hanna_aspect  # untouched fields stay
    with pytest.raises(PPairsError, match="has no full preset"):
        at_preset(ablation.AblationConfig(stores=[]), ablation.PRESETS, "full")
    with pytest.raises(PPairsError, match="unknown preset"):
        rc("huge")
    with pytest.raises(PPairsError, match="names no field of it: nope"):
        Preset(changes={"nope": 1}).apply(ReplicationConfig())
    assert at_preset(ReplicationConfig(), PRESETS, "quick").settings.quick
    assert not PRESETS["quick"].apply(ReplicationConfig()).settings.quick  # sizes only
    given = rc("quick", max_pairs=5, settings=ReplicationConfig().settings)
    assert given.max_pairs == 5 and given.settings.quick  # a field given wins; still a preview


def test_the_command_line_picks_the_preset_by_name():
    parse = build_parser().parse_args
    assert parse(["run", "--quick"]).preset == "quick"
    assert parse(["run", "--full"]).preset == "full"
    assert parse(["run"]).preset == "demo"
    assert parse(["ablate", "--quick"]).preset == "quick"


def test_an_option_given_wins_over_the_preset(monkeypatch, tmp_path):
    import analyses.steering as mod
    from analyses import cli

    seen = {}
    monkeypatch.setattr(cli, "load_model_from_args", lambda args: "model")
    monkeypatch.setattr(mod, "run_steering", lambda b, items, out, cfg, **k: seen.update(
        cfg=cfg) or mod.SteeringRows())
    monkeypatch.setattr("ppairs_lens.activations.pipeline.ensure_store",
                        lambda *a, **k: type("S", (), {"path": "s"})())
    monkeypatch.setattr(mod, "plan_steering", lambda *a, **k: [])  # no model to plan with
    assert cli.main(["steer", "--quick", "--datasets", "larger_number", "--n-random", "3",
                     "--out", str(tmp_path)]) == 0
    cfg = seen["cfg"]
    assert (cfg.n_random, cfg.n_matched, cfg.max_eval_pairs) == (3, 8, 24)
    assert {f.name for f in fields(cfg)} >= {"n_random", "n_matched"}
