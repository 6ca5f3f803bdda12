"""The main job on the built-ins (``--builtins``, or a clone without the data): the same config
and runner as the replication, on the tiny model; every step that has data writes its table,
and a rerun reuses every finished step."""

import json

import pytest

from analyses.replication.run import run_replication
from analyses.replication.config import BUILTINS, replication_config
from ppairs_lens.evaluation.protocol import EvalSettings

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_builtins_run_through_the_one_runner_and_reuse_steps(tiny, tmp_path, capsys):
    cfg = replication_config("quick", **{**BUILTINS, "datasets": ("larger_number",
                                                                  "story_sentiment")},
                             max_pairs=32, settings=EvalSettings(n_boot=20),
                             shared_data=str(tmp_path / "no-shared"),
                             stores=str(tmp_path / "stores"), out=str(tmp_path / "out"))
    first = run_replication(cfg, bridge=tiny)
    out = tmp_path / "out"
    assert first["kind"] == "builtins" and set(first["datasets"]) == {
        "larger_number", "story_sentiment"}
    for name in ("layer_sweep.csv", "probes_vs_prompting.csv", "transfer.csv", "ablation.csv",
                 "steering.csv", "summary.json", "replication.config.json"):
        assert (out / name).is_file(), name
    assert (out / "layer_sweep.png").is_file() and not (out / "layer_sweep.svg").exists()
    assert first["ablation"] and first["thesis_tables"] == [] and first["insertion"] == []
    saved = json.loads((out / "summary.json").read_text())
    assert saved["kind"] == "builtins" and saved["quick"]
    assert json.loads((out / "replication.config.json").read_text())["config"]["datasets"] == [
        "larger_number", "story_sentiment"]

    again = run_replication(cfg, bridge=tiny)
    assert {"prompted judges", "layer sweep", "transfer", "ablation"} <= set(
        again["reused_steps"])
    assert again["ablation"] == first["ablation"]
