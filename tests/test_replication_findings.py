"""``REPORT.md`` is what ``figures/summary.json`` says (the claims' rules: test_claim_rules.py)."""

import json
import re
from pathlib import Path

import pytest

from analyses.replication.findings import report_markdown, update_report

REPO = Path(__file__).resolve().parents[1]


def test_the_report_equals_the_committed_summary():
    summary = json.loads((REPO / "figures" / "summary.json").read_text())
    if summary.get("kind") != "replication":
        pytest.skip("figures/summary.json is not a replication summary")
    assert (REPO / "REPORT.md").read_text("utf-8") == report_markdown(summary), (
        "REPORT.md is stale: run python -m analyses.replication.findings figures REPORT.md")


def test_the_readme_links_the_report():
    assert "(REPORT.md)" in (REPO / "README.md").read_text("utf-8")


def test_update_report_writes_the_file_and_leaves_a_builtins_summary_alone(tmp_path):
    summary = json.loads((REPO / "figures" / "summary.json").read_text())
    if summary.get("kind") != "replication":
        pytest.skip("figures/summary.json is not a replication summary")
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    text = update_report(tmp_path, tmp_path / "REPORT.md")
    assert (tmp_path / "REPORT.md").read_text("utf-8") == text == report_markdown(summary)
    (tmp_path / "summary.json").write_text(json.dumps({**summary, "kind": "builtins"}))
    (tmp_path / "REPORT.md").write_text("kept")
    assert update_report(tmp_path, tmp_path / "REPORT.md") is None
    assert (tmp_path / "REPORT.md").read_text("utf-8") == "kept"


def test_every_number_in_the_report_is_in_the_summary():
    summary = json.loads((REPO / "figures" / "summary.json").read_text())
    if summary.get("kind") != "replication":
        pytest.skip("figures/summary.json is not a replication summary")
    block = (REPO / "REPORT.md").read_text("utf-8")
    values = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", json.dumps(summary))]
    values += [-v for v in values]
    for num in re.findall(r"[+-]?\d+\.\d{2,3}\b", block):
        tol = 0.5 * 10 ** -len(num.split(".")[1]) + 1e-9
        assert any(abs(float(num) - v) <= tol for v in values), f"{num} is not in summary.json"


def test_the_report_flags_thin_cells_files_that_are_not_their_table_and_unskilled_wins():
    from analyses.replication.findings import (f1_cell, prediction_file,
                                               unskilled_comparators)

    assert f1_cell({"value": 0.74, "lo": 0.74, "hi": 0.74, "ci_counts": False}) == "n/a"
    assert f1_cell({"value": 0.6, "lo": 0.4, "hi": 0.8, "ci_counts": False}) == "0.60†"
    assert f1_cell({"value": 0.6, "lo": 0.5, "hi": 0.7, "ci_counts": True}) == "0.60"
    assert f1_cell(None) == "—"
    row = {"versus": "GPT-3.5-turbo few-shot", "n": 300, "n_unparsed": 2,
           "theirs_accuracy": 0.44}
    assert "not the table's 0.417" in prediction_file(row)          # 132 of 298 parsed
    assert "not the table" not in prediction_file(
        {**row, "versus": "GPT-4 few-shot", "n_unparsed": 0, "theirs_accuracy": 0.47})
    assert "no statement parsed" in prediction_file({**row, "n_unparsed": 300})
    s = {"thesis_tables": [{"model": "ours", "table": "4.1", "method": "G-Eval",
                            "dataset": "SummEval", "aspect": "relevance", "value": 0.37,
                            "lo": 0.17, "hi": 0.58}]}
    won = {"id": "x", "outcome": "holds",
           "comparison": ["summeval-relevance", "PPAIRS", "G-Eval", "pairwise accuracy"]}
    said = unskilled_comparators(s, [won])
    assert said and "G-Eval itself scores 0.37 [0.17, 0.58]" in said[1]
    assert not unskilled_comparators(s, [{**won, "outcome": "inconclusive"}])
    s["thesis_tables"][0]["lo"] = 0.55
    assert not unskilled_comparators(s, [won])
