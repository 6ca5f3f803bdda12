"""The claims registry: each claim once, a δ for every "beats" claim, comparators fixed
before the test pairs are read, verdicts and the power table from synthetic step outputs."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from analyses.replication.claims import CLAIMS, FAMILIES, check_registry, evaluate_claims
from analyses.probes_vs_prompting import COMPARISONS, dataset_rows
from analyses.replication.findings import replication_markdown
from ppairs_lens.evaluation.verdicts import Outcome
from tests.sweeps import sweep_of

#: A model the paper's claims were made for, so that they get verdicts.
IN_SCOPE = {"model": "meta-llama/Llama-3.1-70B-Instruct"}


def test_the_registry_holds_each_claim_once_with_a_delta_per_beats_family():
    check_registry(CLAIMS)
    assert len({c.comparison for c in CLAIMS}) == len(CLAIMS)
    for f in FAMILIES.values():
        assert f.why and (f.kind == "changes" or f.delta > 0)
        assert any(c.family == f.name for c in CLAIMS)


def test_two_claims_on_one_comparison_are_refused():
    twin = replace(CLAIMS[1], id="twin")
    with pytest.raises(ValueError, match="compare the same data"):
        check_registry([*CLAIMS, twin])
    with pytest.raises(ValueError, match="appears twice"):
        check_registry([*CLAIMS, replace(CLAIMS[1], comparison=("x", "y", "z", "w"))])


def test_a_beats_claim_without_a_delta_is_refused(monkeypatch):
    import analyses.replication.claims as claims

    fam = CLAIMS[0].family
    monkeypatch.setitem(claims.FAMILIES, fam, replace(claims.FAMILIES[fam], delta=None))
    with pytest.raises(ValueError, match="needs a delta"):
        check_registry(CLAIMS)


# ------------------------------------------------------------------ synthetic outputs

def _diff(a, b, n=40, k=40, half=0.1):
    return {"value": a - b, "lo": a - b - half, "hi": a - b + half, "a": a, "b": b, "n": n,
            "n_groups": k, "metric": "accuracy", "about": ""}


def _sweep(ds="rocstories", k=40, judge=0.6, length=0.55):
    minus = {"zero_shot": _diff(0.9, judge, k=k), "zero_shot_threshold": _diff(0.9, 0.95, k=k),
             "direct": _diff(0.9, 0.97, k=k), "length": _diff(0.9, length, k=k),
             "memorisation": _diff(0.9, 0.5, k=k), "lexical": _diff(0.9, 0.6, k=k),
             "embedding": _diff(0.9, 0.62, k=k), "probe:pca": _diff(0.9, 0.88, k=k),
             "allure": _diff(0.9, 1.0, n=4, k=2)}
    entry = {"dataset": ds, "kind": "supervised", "layer": 3, "selected_by": "validation",
             "n_test": 40, "n_groups_test": k, "test": {"value": 0.9, "lo": 0.8, "hi": 1.0},
             "minus": minus}
    pca = {**entry, "kind": "pca", "minus": {k_: v for k_, v in minus.items()
                                            if k_ != "probe:pca"}}
    return {"entries": [entry, pca]}


def test_comparators_are_fixed_in_advance_not_chosen_on_test_pairs():
    """Raising another judge form's or baseline's test accuracy never changes which
    comparison a claim makes: the claims read the paper's form and every baseline."""
    base = _sweep()
    _, before = dataset_rows(sweep_of(base), "rocstories")
    moved = copy.deepcopy(base)
    for e in moved["entries"]:
        e["minus"]["direct"] = _diff(0.9, 0.99)          # a form that would now be "best"
        e["minus"]["zero_shot"] = _diff(0.9, 0.2)
    _, after = dataset_rows(sweep_of(moved), "rocstories")
    assert [(c["probe"], c["against"]) for c in before] == \
           [(c["probe"], c["against"]) for c in after]
    assert "direct" not in COMPARISONS["supervised"]
    fig1 = [c for c in CLAIMS if c.id == "fig1.supervised-vs-zero-shot.mt-bench"][0]
    assert fig1.args == ("supervised", "zero_shot")


def test_verdicts_and_power_from_synthetic_outputs():
    out = evaluate_claims(IN_SCOPE, sweep_of(_sweep()))
    by = {c["id"]: c for c in out["claims"]}
    assert len(out["claims"]) == len(CLAIMS)
    # +0.30 [0.20, 0.40] over 40 groups: holds after Holm over the family
    assert by["fig2.pca-vs-zero-shot.rocstories"]["outcome"] == "holds"
    assert "bootstrap" in by["fig2.pca-vs-zero-shot.rocstories"]["method"]
    # every baseline beaten by 0.28 or more: the intersection-union claim holds
    assert by["ours.baselines.supervised.rocstories"]["outcome"] == "holds"
    # supervised - pca = +0.02 [-0.08, +0.12]: neither shown
    fig3 = by["fig3.supervised-vs-pca.rocstories"]
    assert fig3["outcome"] == "inconclusive" and fig3["groups_to_decide"] > 40
    assert fig3["pairs_to_decide"] == fig3["groups_to_decide"]     # one pair per group here
    # a dataset this run did not have: not run, with why
    assert by["fig1.supervised-vs-zero-shot.mt-bench"]["outcome"] == "not run in this preset"
    assert sum(out["verdict_counts"].values()) == len(CLAIMS)
    assert set(out["verdict_counts"]) == {str(o) for o in Outcome}


def test_a_strong_baseline_makes_the_baseline_claim_fail_not_hold():
    out = evaluate_claims({}, sweep_of(_sweep(length=0.99)))
    by = {c["id"]: c for c in out["claims"]}
    assert by["ours.baselines.supervised.rocstories"]["outcome"] == "fails"   # length wins


def test_few_groups_with_group_differences_use_the_sign_flip_test():
    sw = _sweep(ds="mt-bench", k=10)
    for e in sw["entries"]:
        for d in e["minus"].values():
            d["group_diffs"] = [d["value"]] * d["n_groups"]
    by = {c["id"]: c for c in evaluate_claims(IN_SCOPE, sweep_of(sw))["claims"]}
    c = by["fig1.supervised-vs-zero-shot.mt-bench"]
    assert "sign-flip" in c["method"] and c["outcome"] == "holds"


def test_the_report_is_generated_from_the_registry():
    s = {"model": "m", "split_by": "auto", "n_boot": 10, "datasets": {"rocstories": 80},
         "timings_s": {"x": 1.0}, **evaluate_claims(IN_SCOPE, sweep_of(_sweep()))}
    text = replication_markdown(s)
    for f in FAMILIES.values():
        assert f.name in text and f.why in text
    assert "fig2.pca-vs-zero-shot.rocstories" in text and "**Power**" in text
    assert "Holm" in text and "sign-flip" in text


def test_a_sign_flip_row_prints_the_mean_it_tests_beside_the_pooled_difference():
    sw = _sweep(ds="mt-bench", k=10)
    for e in sw["entries"]:
        for d in e["minus"].values():
            d["group_diffs"] = [d["value"] + 0.1] * 5 + [d["value"] - 0.05] * 5
    out = evaluate_claims(IN_SCOPE, sweep_of(sw))
    c = {r["id"]: r for r in out["claims"]}["fig1.supervised-vs-zero-shot.mt-bench"]
    assert "sign-flip" in c["method"]
    assert c["value"] == pytest.approx(0.3 + 0.025) and c["pooled_value"] == pytest.approx(0.3)
    s = {"model": "m", "split_by": "auto", "n_boot": 10, "datasets": {"mt-bench": 20},
         "timings_s": {"x": 1.0}, **out}
    assert "+0.325 (mean of group differences, tested); pooled +0.300" in \
        replication_markdown(s)
