"""The README's replication block is what ``figures/summary.json`` says; claims get verdicts."""

import json
import re
from pathlib import Path

import pytest

from analyses.replication_findings import (
    README_END,
    README_START,
    replication_markdown,
)

REPO = Path(__file__).resolve().parents[1]


def test_readme_block_equals_the_committed_summary():
    summary = json.loads((REPO / "figures" / "summary.json").read_text())
    if summary.get("kind") != "replication":
        pytest.skip("figures/summary.json is not a replication summary")
    text = (REPO / "README.md").read_text()
    block = text.split(README_START, 1)[1].split(README_END, 1)[0].strip()
    assert block == replication_markdown(summary).strip(), (
        "README replication block is stale: run python -m analyses.replication_findings")


def test_every_number_in_the_block_is_in_the_summary():
    summary = json.loads((REPO / "figures" / "summary.json").read_text())
    if summary.get("kind") != "replication":
        pytest.skip("figures/summary.json is not a replication summary")
    text = (REPO / "README.md").read_text()
    block = text.split(README_START, 1)[1].split(README_END, 1)[0]
    values = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", json.dumps(summary))]
    values += [-v for v in values]
    for num in re.findall(r"[+-]?\d+\.\d{2,3}\b", block):
        tol = 0.5 * 10 ** -len(num.split(".")[1]) + 1e-9
        assert any(abs(float(num) - v) <= tol for v in values), f"{num} is not in summary.json"
