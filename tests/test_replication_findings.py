"""``REPORT.md`` is what ``figures/summary.json`` says; claims get verdicts."""

import json
import re
from pathlib import Path

import pytest

from analyses.replication_findings import report_markdown, update_report
from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS
from ppairs_lens.evaluation.verdicts import FAILS, HOLDS, UNDECIDED, interval_verdict

REPO = Path(__file__).resolve().parents[1]


def test_the_report_equals_the_committed_summary():
    summary = json.loads((REPO / "figures" / "summary.json").read_text())
    if summary.get("kind") != "replication":
        pytest.skip("figures/summary.json is not a replication summary")
    assert (REPO / "REPORT.md").read_text("utf-8") == report_markdown(summary), (
        "REPORT.md is stale: run python -m analyses.replication_findings figures REPORT.md")


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


@pytest.mark.parametrize("diff, want", [
    ({"lo": 0.01, "hi": 0.2, "ci_counts": True}, HOLDS),
    ({"lo": -0.3, "hi": -0.02, "ci_counts": True}, FAILS),
    ({"lo": -0.1, "hi": 0.2, "ci_counts": True}, UNDECIDED),
    ({"lo": 0.1, "hi": 0.2, "ci_counts": False}, UNDECIDED),   # too few groups to count
    ({"lo": float("nan"), "hi": 0.2}, UNDECIDED),
])
def test_interval_verdict_for_each_outcome(diff, want):
    assert interval_verdict(diff).startswith(want)


@pytest.mark.parametrize("n, lo, hi, want", [
    (24, 0.5, 0.7, HOLDS),          # the CI above GPT-4's 0.470
    (24, 0.1, 0.3, FAILS),
    (24, 0.3, 0.6, UNDECIDED),
    (6, 0.0, 0.0, UNDECIDED),       # a preview's 6 statements, all wrong: too few to count
    (None, 0.0, 0.0, UNDECIDED),
])
def test_climatex_claims_count_only_over_enough_statements(n, lo, hi, want):
    from analyses.replication_findings import insertion_claims

    # ci_counts as mean_ci gives it for n statements (no groups: each its own)
    row = {"method": "probe", "level": "overall", "accuracy": (lo + hi) / 2, "lo": lo,
           "hi": hi, "n": n, "ci_counts": n is not None and n >= MIN_BOOTSTRAP_GROUPS}
    claims = [c for c in insertion_claims([row]) if "few-shot" in c["claim"]]
    assert len(claims) == 1 and claims[0]["verdict"].startswith(want), claims

