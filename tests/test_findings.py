"""The README's findings come from the committed ``figures/summary.json``, and the claims'
verdicts follow their stated rules."""

import json
import re
from pathlib import Path

import pytest

from analyses.findings import BEGIN, END, claims, findings_markdown

ROOT = Path(__file__).resolve().parents[1]


def test_readme_findings_block_is_generated_from_committed_summary():
    summary = json.loads((ROOT / "figures" / "summary.json").read_text())
    readme = (ROOT / "README.md").read_text()
    assert BEGIN in readme and END in readme, "the README lost its findings block"
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert block == findings_markdown(summary).strip(), (
        "README findings differ from figures/summary.json: run `python -m analyses.findings`")


def test_every_number_in_the_findings_is_in_the_summary():
    summary_text = json.dumps(json.loads((ROOT / "figures" / "summary.json").read_text()))
    readme = (ROOT / "README.md").read_text()
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    values = {float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", summary_text)}
    for num in re.findall(r"[+-]?\d+\.\d{3}", block):
        x = float(num)
        assert any(abs(x - v) <= 5e-4 for v in values), f"{num} is not in summary.json"


def _entry(ds, lo_zero, lo_few):
    d = {"value": 0.1, "hi": 0.2}
    return {"dataset": ds, "kind": "supervised", "layer": 3, "test": {"value": 0.8},
            "minus": {"zero_shot": {**d, "lo": lo_zero}, "few_shot": {**d, "lo": lo_few}}}


@pytest.mark.parametrize("lo_zero,lo_few,holds", [(0.01, 0.02, 1), (0.01, -0.01, 0),
                                                  (-0.2, 0.3, 0)])
def test_probes_beat_prompting_needs_every_judge_beaten(lo_zero, lo_few, holds):
    c = claims([_entry("a", lo_zero, lo_few)], None, [])
    assert c["probes_beat_prompting"]["holds_on"] == holds


def test_probes_beat_prompting_does_not_count_an_optimistic_ci():
    few_groups = {**_entry("a", 0.01, 0.02), "n_groups_test": 6}
    c = claims([few_groups, {**_entry("b", 0.01, 0.02), "n_groups_test": 40}], None, [])
    p = c["probes_beat_prompting"]
    assert p["holds_on"] == 1 and p["optimistic_only"] == ["a"]


def _control(ds, p_matched):
    return {"kind": "control", "dataset": ds, "condition": "unembedding", "effect": 2.0,
            "p_random": 0.01, "p_matched": p_matched}


def test_ablation_claim_fails_when_a_probe_beats_the_matched_null():
    rows = [{"kind": "probe", "dataset": "a", "condition": "supervised", "effect": 1.0,
             "p_random": 0.01, "p_matched": 0.01},
            {"kind": "probe", "dataset": "a", "condition": "pca", "effect": 0.1,
             "p_random": 0.5, "p_matched": 0.6}, _control("a", 0.02)]
    c = claims([], None, rows)["ablation_leaves_judgement_unchanged"]
    assert not c["holds"] and c["directions_that_move_it"] == 1
    assert claims([], None, rows[1:])["ablation_leaves_judgement_unchanged"]["holds"]


def test_a_failing_ablation_claim_names_where_it_fails_and_where_it_holds():
    probe = {"kind": "probe", "dataset": "a", "condition": "pca", "effect": 1.0,
             "p_random": 0.01, "p_matched": 0.01}
    rows = [probe, _control("a", 0.01), {**probe, "dataset": "b", "p_matched": 0.6},
            _control("b", 0.01)]
    c = claims([], None, rows)["ablation_leaves_judgement_unchanged"]
    assert not c["holds"]
    text = findings_markdown({"model": "m", "timings_s": {"x": 1.0}, "sweep": [], "judges": {},
                              "claims": {"ablation_leaves_judgement_unchanged": c}})
    assert "fails on a, holds on b;" in text


def test_ablation_claim_is_inconclusive_where_the_control_is_not_detected():
    probe = {"kind": "probe", "dataset": "a", "condition": "pca", "effect": 0.1,
             "p_random": 0.5, "p_matched": 0.6}
    blind = claims([], None, [probe, _control("a", 0.06)])["ablation_leaves_judgement_unchanged"]
    assert not blind["holds"] and blind["inconclusive_on"] == ["a"]
    assert not claims([], None, [probe])["ablation_leaves_judgement_unchanged"]["holds"]
    mixed = claims([], None, [probe, _control("a", 0.06), {**probe, "dataset": "b"},
                              _control("b", 0.01)])["ablation_leaves_judgement_unchanged"]
    assert mixed["holds"] and mixed["control_detected_on"] == ["b"]
    assert mixed["inconclusive_on"] == ["a"]
    assert "inconclusive on a" in findings_markdown({
        "model": "m", "timings_s": {"x": 1.0}, "sweep": [], "judges": {},
        "claims": {"ablation_leaves_judgement_unchanged": mixed}})


def test_unsupervised_agreement_compares_with_the_random_null():
    t = {"per_kind": {"pca": {"mean_abs_cos": 0.05, "random_p99": 0.11}}}
    assert not claims([], t, [])["unsupervised_directions_agree"]["holds"]
    t["per_kind"]["pca"]["mean_abs_cos"] = 0.4
    assert claims([], t, [])["unsupervised_directions_agree"]["holds"]
