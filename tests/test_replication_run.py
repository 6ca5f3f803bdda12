"""The replication main job end to end on the tiny random model (the shared data's files, at
the --quick sizes): every experiment writes its table, every claim gets a verdict, and a
second run reuses every finished step."""

import json
from pathlib import Path

import pytest

from analyses.replication import run as replication
from analyses.replication import steps as replication_steps
from analyses.replication.run import ReplicationConfig, run_replication
from analyses.replication.config import replication_config
from analyses.replication.findings import replication_markdown
from ppairs_lens.evaluation.verdicts import Outcome

pytestmark = [pytest.mark.shared_data, pytest.mark.usefixtures("one_torch_thread")]

OUTPUTS = ("layer_sweep.csv", "probes_vs_prompting.csv", "probes_vs_prompting_claims.csv",
           "thesis_tables.csv", "transfer.csv", "distribution_shift.csv", "ablation.csv",
           "insertion.csv", "summary.json", "replication.config.json")


class Cut(Exception):
    """A run stopped part way (a lent machine's time running out)."""


def test_replication_runs_every_experiment_and_resumes(tiny, shared_datasets, tmp_path,
                                                       monkeypatch, capsys):
    cfg = replication_config("quick", shared_data=str(shared_datasets),
                             out=str(tmp_path / "fig"), stores=str(tmp_path / "stores"))
    # First the run is cut inside the ablation step: every step before it has finished.
    real_ablation = replication_steps.run_ablation

    def cut(*a, **k):
        raise Cut
    monkeypatch.setattr(replication_steps, "run_ablation", cut)
    with pytest.raises(Cut):
        run_replication(cfg, bridge=tiny)
    shards = {p: p.stat().st_mtime_ns for p in (tmp_path / "stores").rglob("*.safetensors")}
    assert shards
    monkeypatch.setattr(replication_steps, "run_ablation", real_ablation)
    s = run_replication(cfg, bridge=tiny)
    # The rerun redid no finished step and no harvest; it ran the cut step and those after.
    before = {"prompted judges", "text baselines", "direct scoring and G-Eval", "layer sweep",
              "probes vs prompting", "thesis tables", "transfer", "distribution shift",
              "finetuning"}
    assert before <= set(s["reused_steps"])
    assert not {"ablation", "steering", "insertion"} & set(s["reused_steps"])
    assert {p: p.stat().st_mtime_ns for p in shards} == shards
    for name in OUTPUTS:
        assert (tmp_path / "fig" / name).is_file(), name
    assert s["kind"] == "replication" and s["claims"]
    assert all(c["outcome"] in {str(o) for o in Outcome} for c in s["claims"])
    thesis = [r for r in s["thesis_tables"] if r["model"] == "ours" and r["table"] == "4.1"]
    assert {r["method"] for r in thesis} >= {"direct", "G-Eval", "PAIRS", "PPAIRS"}
    assert any(r["model"] == "Llama-3-8B-Instruct" for r in s["thesis_tables"])  # published
    kinds = {r["kind"] for r in s["probes_vs_prompting"]}
    assert {"supervised", "pca", "zero_shot", "zero_shot_threshold", "length", "lexical",
            "embedding"} <= kinds
    assert replication_markdown(json.loads((tmp_path / "fig" / "summary.json").read_text()))
    # Table 1's and Appendix A's claims get what they are decided on from this run's steps
    assert s["transfer"]["accuracy"] and all(len(r["group_diffs"]) == r["n_groups"]
                                             for r in s["transfer"]["accuracy"])
    by = {c["id"]: c for c in s["claims"]}
    assert by["appendixA.pca-jump"]["reason"] != "this run did not produce it"
    assert not any("recorded no per-group" in c["reason"] for c in s["claims"]
                   if c["id"].startswith("table1.") and c["datasets"][0] in s["datasets"])
    capsys.readouterr()
    again = run_replication(cfg, bridge=tiny)
    # its plan knows the judge study is remembered: no prompts of it estimated
    plan = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith("  ") and line.split()[1:2] == ["zero_shot"]]
    assert plan and all(line.endswith("on disk, reused") for line in plan), plan
    assert set(again["reused_steps"]) >= {"prompted judges", "layer sweep", "thesis tables",
                                          "transfer", "ablation", "insertion"}
    # reused steps hand on the records fresh ones did (io/records.py), so the same numbers
    for key in ("judges", "probes_vs_prompting", "thesis_tables", "transfer", "shift",
                "finetuning", "ablation", "steering", "insertion", "claims"):
        assert json.dumps(again[key], sort_keys=True, default=str) == json.dumps(
            s[key], sort_keys=True, default=str), key


def test_without_the_data_folder_nothing_runs_and_the_reason_is_printed(tiny, tmp_path, capsys):
    cfg = ReplicationConfig(shared_data=str(tmp_path / "absent"), out=str(tmp_path / "fig"))
    assert run_replication(cfg, bridge=tiny) is None
    assert "does not exist" in capsys.readouterr().out


def test_refresh_refuses_a_summary_whose_sizes_predate_a_field(tmp_path):
    import shutil

    from ppairs_lens.errors import DataError

    fig = tmp_path / "figures"
    shutil.copytree(Path(__file__).resolve().parent.parent / "figures", fig)
    s = json.loads((fig / "summary.json").read_text())
    s["sizes"].pop("mt_bench_per_question")
    (fig / "summary.json").write_text(json.dumps(s))
    with pytest.raises(DataError, match="'sizes' lacks .*mt_bench_per_question"):
        replication.refresh(fig)


@pytest.mark.parametrize("edit", ["crlf", "rows deleted"])
def test_refresh_refuses_an_output_changed_since_the_run(tmp_path, edit):
    """A table re-saved by a spreadsheet (CRLF line ends, a byte-order mark) or with rows
    deleted is refused by name, not re-decided on what is left."""
    import shutil

    from ppairs_lens.errors import DataError

    fig = tmp_path / "figures"
    shutil.copytree(Path(__file__).resolve().parent.parent / "figures", fig)
    assert json.loads((fig / "summary.json").read_text())["outputs_sha256"]
    table = fig / "layer_sweep.csv"
    lines = table.read_text(encoding="utf-8").splitlines()
    table.write_text("\ufeff" + "\r\n".join(lines) + "\r\n" if edit == "crlf"
                     else "\n".join(lines[:-3]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="layer_sweep.csv.*changed since the run"):
        replication.refresh(fig)


def test_refresh_refuses_outputs_that_name_the_length_baseline_surface(tmp_path):
    """A run from before the length baseline had its one name: re-deciding it would leave
    that baseline out of every "beats every baseline" claim without a word."""
    import shutil

    from ppairs_lens.errors import DataError

    fig = tmp_path / "figures"
    shutil.copytree(Path(__file__).resolve().parent.parent / "figures", fig)
    s = json.loads((fig / "summary.json").read_text())
    s.pop("outputs_sha256")          # an older run: no checksums either
    (fig / "summary.json").write_text(json.dumps(s))
    table = fig / "layer_sweep.csv"
    table.write_text(table.read_text(encoding="utf-8").replace(",length,", ",surface,"),
                     encoding="utf-8")
    with pytest.raises(DataError, match="layer_sweep.csv.*'surface'.*rerun"):
        replication.refresh(fig)
