"""A step of the main job is one ``TableStep`` (docs/architecture.md, "A step of the main
job"): the worked example there, taken from the document itself, runs inside the main job on
the tiny model, its record lands in ``summary.json`` under its section, comes back as its
record type when the run is repeated and when it is re-decided, and the step is remembered
like the built-in ones."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest

from analyses.replication.config import BUILTINS, replication_config
from analyses.replication.run import refresh, run_replication
from analyses.replication.steps import TABLE_STEPS, TableStep, sections
from ppairs_lens.evaluation.protocol import EvalSettings

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _worked_example(monkeypatch) -> dict:
    """The names the document's example defines (its one block that makes a TableStep), run
    as a module of its own, as a newcomer's file would be."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text("utf-8"), re.S)
    code = next(b for b in blocks if "def label_balance" in b)
    entry = next(b for b in blocks if b.lstrip().startswith("TableStep("))
    module = types.ModuleType("worked_example")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look it up
    exec(compile(re.sub(r"(?m)^  ", "", code), str(DOC), "exec"), vars(module))  # noqa: S102
    assert "analyses.replication.steps" not in code   # steps.py imports it: no circle
    # the entry steps.py adds to TABLE_STEPS, built from the document's second block
    vars(module)["STEP"] = eval(entry.strip(), {"TableStep": TableStep, **vars(module)})  # noqa: S307
    return vars(module)


def test_the_documented_step_runs_in_the_main_job_and_is_remembered(tiny, tmp_path,
                                                                    monkeypatch):
    ns = _worked_example(monkeypatch)
    step = ns["STEP"]
    assert isinstance(step, TableStep)
    steps = (*TABLE_STEPS, step)
    assert sections(steps)["label_balance"] is ns["BalanceRows"]
    cfg = replication_config("quick", **{**BUILTINS, "datasets": ("larger_number",
                                                                  "story_sentiment")},
                             max_pairs=32, settings=EvalSettings(n_boot=20),
                             shared_data=str(tmp_path / "no-shared"),
                             stores=str(tmp_path / "stores"), out=str(tmp_path / "out"))
    first = run_replication(cfg, bridge=tiny, steps=steps)
    rows = first["label_balance"]
    assert [r["dataset"] for r in rows] == ["larger_number", "story_sentiment"]
    assert all(r["n_test"] > 0 and 0 <= r["share_first"] <= 1 for r in rows)
    assert (tmp_path / "out" / "label_balance.csv").is_file()
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert saved["label_balance"] == first["label_balance"]
    again = run_replication(cfg, bridge=tiny, steps=steps)
    assert "label balance" in again["reused_steps"]
    assert again["label_balance"] == first["label_balance"]
    # re-deciding the run from its outputs reads the new section back as its record
    assert refresh(tmp_path / "out", steps=steps)["label_balance"] == first["label_balance"]
    # the saved config shows the one protocol every step ran under
    saved_cfg = json.loads((tmp_path / "out" / "replication.config.json").read_text())["config"]
    assert saved_cfg["sweep"]["settings"] == saved_cfg["settings"] == saved_cfg["ablation"][
        "settings"] == saved_cfg["judges"]["protocol"]
    # without the step, the run has no such section: nothing else had to change
    assert "label_balance" not in run_replication(cfg, bridge=tiny)
