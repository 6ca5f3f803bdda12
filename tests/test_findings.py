"""The built-ins study's claims follow their stated rules (the README shows the replication's
findings instead: tests/test_replication_findings.py)."""


import pytest

from analyses.findings import claims, findings_markdown



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


def _ablation_rows(ds, *, judge_lo=0.7, same=0.4, acc=(-0.02, 0.03), p=0.5, holm_p=0.9,
                   control=(-0.3, -0.2)):
    """Rows of one dataset as ``ablation.csv`` has them: baseline, one probe, the control at
    the probe's read-out."""
    def delta(lo, hi, tag=""):
        return {f"delta_accuracy{tag}_lo": lo, f"delta_accuracy{tag}_hi": hi}

    base = {"dataset": ds, "preset": "paper", "condition": "none", "kind": "baseline",
            "judge_accuracy_lo": judge_lo, "same_answer_share": same}
    probe = {"dataset": ds, "preset": "paper", "condition": "pca", "kind": "probe",
             "effect": 0.1, "p_matched": p, "p_matched_holm": holm_p, "n_matched": 1000,
             "delta_accuracy": sum(acc) / 2, **delta(*acc), **delta(*acc, "_tost"),
             "delta_auroc": 0.0, "delta_auroc_lo": -0.01, "delta_auroc_hi": 0.01,
             "delta_logodds_tost_lo": -0.1, "delta_logodds_tost_hi": 0.1}
    ctl = {"dataset": ds, "preset": "paper", "condition": "unembedding_at_readout",
           "kind": "control_readout", **delta(*control)}
    return [base, probe, ctl]


def _ablation_claim(rows, judges=None):
    return claims([], None, rows, judges)["ablation_leaves_judgement_unchanged"]


def _markdown(c):
    return findings_markdown({"model": "m", "timings_s": {"x": 1.0}, "sweep": [], "judges": {},
                              "claims": c})


def test_ablation_claim_holds_by_equivalence_and_fails_on_a_change():
    ok = _ablation_claim(_ablation_rows("a"))
    assert ok["outcome"] == "holds" and ok["holds_on"] == ["a"]
    moved = _ablation_rows("b", acc=(-0.3, -0.1), p=0.001, holm_p=0.002)
    c = _ablation_claim(_ablation_rows("a") + moved)
    assert c["outcome"] == "fails" and c["fails_on"] == ["b"] and c["holds_on"] == ["a"]
    assert c["changes"]["outcome"] == "holds"          # the opposite claim: it changes
    text = _markdown({"ablation_leaves_judgement_unchanged": c})
    assert "holds on a; fails on b" in text and "Δaccuracy -0.200 [-0.300, -0.100]" in text


def test_ablation_claim_is_not_tested_on_a_judge_that_does_not_decide():
    c = _ablation_claim(_ablation_rows("a", same=1.0) + _ablation_rows("b", judge_lo=0.45))
    assert c["outcome"] == "not tested at this size" and c["undecided_on"] == ["a", "b"]
    assert all("does not decide" in e["reason"] for e in c["evidence"])


def test_ablation_claim_without_a_working_control_is_not_tested():
    c = _ablation_claim(_ablation_rows("a", control=(-0.02, 0.01)))
    assert c["outcome"] == "not tested at this size"
    assert "positive control" in c["evidence"][0]["reason"]


def test_older_ablation_rows_use_the_study_judge_and_report_unreachable_holm():
    rows = [{"dataset": "a", "preset": "paper", "condition": "none", "kind": "baseline"},
            {"dataset": "a", "preset": "paper", "condition": "pca", "kind": "probe",
             "effect": 0.02, "p_matched": 0.0297, "n_matched": 100}]
    judges = {"a": {"zero_shot_accuracy": {"lo": 0.44},
                    "zero_shot": {"same_raw_answer_share": 1.0}}}
    c = _ablation_claim(rows, judges)
    assert c["outcome"] == "not tested at this size" and "100%" in c["evidence"][0]["reason"]
    many = [{**rows[1], "condition": k} for k in ("pca", "supervised", "mass_mean")] * 3
    c = _ablation_claim(rows[:1] + many, judges)
    # a judge that never changes its answer cannot show a change either
    assert c["changes"]["outcome"] == "not tested at this size"
    assert "does not decide" in c["changes"]["reason"]
    deciding = {"a": {"zero_shot_accuracy": {"lo": 0.6},
                      "zero_shot": {"same_raw_answer_share": 0.5}}}
    c = _ablation_claim(rows[:1] + many, deciding)
    assert c["changes"]["outcome"] == "not tested at this size"
    assert "1/101" in c["changes"]["reason"]  # Holm out of reach with 100 nulls


def test_cosine_claim_comes_from_the_transfer_verdict_or_cannot_be_decided():
    old = {"per_kind": {"pca": {"mean_abs_cos": 0.085, "random_p99": 0.11}}}
    u = claims([], old, [])["unsupervised_directions_agree"]
    assert u["outcome"] == "not tested at this size"
    verdict = {"outcome": "fails", "reason": "within the isotropic null", "rule": "r",
               "evidence": {"used": ["x", "y"]}}
    new = {"per_kind": {"pca": {"mean_abs_cos": 0.05, "agreement": verdict}}}
    u = claims([], new, [])["unsupervised_directions_agree"]
    assert u["outcome"] == "fails"
    assert "fails: within the isotropic null; probes above chance in distribution: x, y" in (
        _markdown({"unsupervised_directions_agree": u}))
