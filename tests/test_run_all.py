"""The main job end to end on the tiny model: every output, and reruns that reuse steps."""

import json
from dataclasses import replace

from analyses.run_all import StudyConfig, quick, run
from ppairs_lens.evaluation.protocol import EvalSettings


def test_study_writes_everything_and_reuses_unchanged_steps(tiny, tmp_path, capsys):
    cfg = quick(StudyConfig(datasets=["larger_number", "story_sentiment"], max_pairs=32,
                            stores=str(tmp_path / "stores"), out=str(tmp_path / "out"),
                            ranking_dataset="story_sentiment", settings=EvalSettings(n_boot=20),
                            shared_data=str(tmp_path / "no-shared")))
    first = run(cfg, bridge=tiny)
    out = tmp_path / "out"
    for name in ("layer_sweep", "transfer", "cosine_distribution", "ablation", "ranking"):
        # a preview saves PNGs only (save_figure's preview rule)
        assert (out / f"{name}.png").is_file() and not (out / f"{name}.svg").exists(), name
    for table in ("layer_sweep.csv", "transfer.csv", "ablation.csv", "ranking.csv",
                  "summary.json", "study.config.json"):
        assert (out / table).is_file(), table
    assert first["reused_steps"] == []
    assert "real datasets skipped" in capsys.readouterr().out  # with the missing folder named
    saved = json.loads((out / "summary.json").read_text())
    assert saved["sweep"] == first["sweep"]
    assert {e["kind"] for e in saved["sweep"]} == {"supervised", "pca", "mass_mean"}
    # every probe entry is paired with the judges and the no-model baselines
    # (memorisation: paired where a held-out item recurs, else unavailable with its reason)
    e = saved["sweep"][0]
    assert "zero_shot" in e["minus"] and "memorisation" in {*e["minus"], *e["unavailable"]}
    assert set(saved["claims"]) >= {"probes_beat_prompting", "ablation_leaves_judgement_unchanged"}

    again = run(cfg, bridge=tiny)  # nothing changed: every analysis step is taken as it was
    assert again["reused_steps"] == ["prompted judges", "layer sweep", "transfer",
                                     "ablation", "ranking"]
    assert again["sweep"] == first["sweep"]
    assert again["ablation"] == first["ablation"] and again["ranking"] == first["ranking"]
    assert "reused from the last run" in capsys.readouterr().out

    (out / "ranking.png").unlink()  # a missing output is recomputed
    changed = run(replace(cfg, settings=cfg.settings.but(n_boot=21)), bridge=tiny)  # a config change recomputes all
    assert changed["reused_steps"] == []
    assert (out / "ranking.png").is_file()
    forced = run(cfg, bridge=tiny, reuse=False)
    assert forced["reused_steps"] == []
