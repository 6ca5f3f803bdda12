"""The registry holds what the seeds claim, each once, cited to a place that exists, scoped to the
models the claim was made for; our own questions apart; verdicts outside the scope are not
verdicts."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from analyses.replication.claims import CLAIMS, check_registry, evaluate_claims
from tests.sweeps import sweep_of
from analyses.replication.claim_families import FAMILIES, SCOPES
from ppairs_lens.evaluation.verdicts import OUTSIDE_SCOPE

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"


@pytest.mark.shared_data
def test_every_cited_place_exists_in_its_seed():
    if not SEEDS.is_dir():
        pytest.skip(f"{SEEDS} is absent")
    for c in CLAIMS:
        if c.scope is None:
            assert c.source.startswith("ours"), c.id
            continue
        name = re.search(r"(\d{3}_[0-9a-f]{16}\.txt)", c.source)
        assert name, f"{c.id}: its source names no seed file: {c.source!r}"
        text = (SEEDS / name.group(1)).read_text("utf-8")
        places = re.findall(r"(?:Figure|Table|Appendix|Section) [0-9A-F][0-9.]*", c.source)
        assert places, f"{c.id}: no place cited in {c.source!r}"
        for place in places:
            kind, where = place.split(" ", 1)
            where = where.rstrip(".")
            pattern = (rf"^#*\s*{re.escape(where)} " if kind == "Section" else
                       rf"{kind} {re.escape(where)}\b")
            assert re.search(pattern, text, re.M), f"{c.id}: {place} is not in {name.group(1)}"


def test_seed_claims_are_scoped_and_ours_are_marked():
    for c in CLAIMS:
        fam = FAMILIES[c.family]
        assert fam.ours == (c.scope is None) == c.id.startswith("ours."), c.id


def test_two_claims_on_the_same_data_under_other_names_are_refused():
    """PPAIRS is the supervised probe and PAIRS the zero-shot judge: a Figure 1 claim on
    SummEval would compare what Table 4.1's PPAIRS-vs-PAIRS claim compares."""
    t41 = next(c for c in CLAIMS if c.id == "thesis4.1.ppairs-vs-pairs.summeval-coherence")
    twin = replace(t41, id="fig1.supervised-vs-zero-shot.summeval-coherence",
                   comparison=("summeval-coherence", "supervised", "zero_shot", "accuracy"))
    with pytest.raises(ValueError, match="compare the same data"):
        check_registry((*CLAIMS, twin))


def test_what_the_seeds_do_not_claim_is_not_in_the_seed_families():
    seed_ids = {c.id for c in CLAIMS if c.scope is not None}
    # G-Eval is in the paper's Figure 2 (the PCA probe against it), not in the thesis
    assert not any(("g-eval" in i and not i.startswith("fig2.pca-vs-g-eval.")) or
                   "mass_mean" in i for i in seed_ids)
    assert not any(i.startswith("fig1.") and not i.endswith("mt-bench") for i in seed_ids)
    assert "ours.ablation.changes" in {c.id for c in CLAIMS}   # the reverse of Table 2
    fig5 = next(c for c in CLAIMS if c.id == "fig5.supervised-near-zero")
    assert "do not agree" in fig5.statement
    for c in CLAIMS:
        if c.family == "probe vs finetuning":
            assert "mt-bench" not in c.datasets and c.scope == SCOPES["paper Gemma 2"]


def test_scope_turns_a_decision_into_outside_the_claims_scope():
    """The same numbers: on the embedded model a seed claim is outside its scope; named as a
    model it was made for, it gets a real verdict."""
    diffs = [0.5] * 30 + [0.0] * 10
    entry = {"dataset": "mt-bench", "kind": "supervised", "n_test": 80,
             "test": {"lo": 0.7, "value": 0.8},
             "minus": {"zero_shot": {"value": 0.375, "lo": 0.3, "hi": 0.45, "n": 80,
                                     "n_groups": 40, "group_diffs": diffs}}}
    sweep = sweep_of({"entries": [entry]})
    for model, want in (("SmolLM2-135M-Instruct", str(OUTSIDE_SCOPE)),
                        ("meta-llama/Llama-3.1-70B-Instruct", "holds")):
        rows = {r["id"]: r for r in evaluate_claims({"model": model}, sweep)["claims"]}
        r = rows["fig1.supervised-vs-zero-shot.mt-bench"]
        assert r["outcome"] == want and r["value"] == pytest.approx(0.375), (model, r)
        assert rows["fig1.supervised-vs-zero-shot.mt-bench"]["scope"].startswith("the paper")


def test_a_step_the_preset_did_not_run_is_not_run_not_not_tested():
    rows = {r["id"]: r for r in evaluate_claims({"model": "x"}, None)["claims"]}
    assert rows["fig3.supervised-vs-lora.caters"]["outcome"] == "not run in this preset"


def test_the_commands_tables_decide_with_the_families_delta():
    """The sweep's and shift's own tables decide "beats" with the library's ACCURACY_DELTA;
    the replication's families must say the same, or a table and a claim would disagree."""
    from ppairs_lens.evaluation.result_table import BEATS_DELTA
    from ppairs_lens.evaluation.shift import SHIFT_DELTA

    assert BEATS_DELTA == FAMILIES["probe vs prompting"].delta
    assert SHIFT_DELTA == FAMILIES["robustness to shift"].delta
