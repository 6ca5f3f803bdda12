"""Paper Table 1 (transfer) and Appendix A (layer) claims: decided from the rows a run
records, not tested where a run lacks them, never from invented numbers."""

from __future__ import annotations

import pytest

from analyses.claims import CLAIMS, evaluate_claims, per_layer
from ppairs_lens.evaluation.paper_claims import TABLE1_DATASETS

L = 30


def _layers(profile, ds="mt-bench", kind="supervised", half=0.05, counts=True):
    return [{"dataset": ds, "kind": kind, "layer": i, "metric": "accuracy", "value": v,
             "lo": v - half, "hi": v + half, "ci_counts": counts, "n_test": 40}
            for i, v in enumerate(profile)]


def _sweep(rows, k=40):
    kinds = {(r["dataset"], r["kind"]) for r in rows}
    return {"entries": [{"dataset": d, "kind": kd, "n_groups_test": k, "n_test": 40, "minus": {}}
                        for d, kd in kinds],
            "per_layer": rows}


def _by(summary, sweep):
    """Verdicts for a model the paper's claims were made for (Llama 3.1 70B)."""
    summary = {"model": "meta-llama/Llama-3.1-70B-Instruct", **summary}
    return {c["id"]: c for c in evaluate_claims(summary, sweep)["claims"]}


def test_each_table1_dataset_and_the_layer_claims_are_registered_once():
    ids = {c.id for c in CLAIMS}
    for ds in TABLE1_DATASETS.values():
        assert {f"table1.supervised-transfers.{ds}", f"table1.pca-transfers.{ds}",
                f"ours.table1.pca-as-in-domain.{ds}", f"table1.pca-transfers-better.{ds}"} <= ids
    assert {"appendixA.supervised-plateau", "appendixA.pca-jump"} <= ids


def test_a_plateau_holds_and_a_late_rise_fails_it():
    flat = [0.5 + 0.3 * min(i, 10) / 10 for i in range(L)]          # flat from a third down
    late = [0.5 + 0.4 * i / (L - 1) for i in range(L)]               # still rising at the end
    tight = _by({}, _sweep(_layers(flat, half=0.01)))
    assert tight["appendixA.supervised-plateau"]["outcome"] == "holds"
    rising = _by({}, _sweep(_layers(late, half=0.01)))
    assert rising["appendixA.supervised-plateau"]["outcome"] == "fails"
    assert "bounded by the sum" in rising["appendixA.supervised-plateau"]["method"]


def test_a_jump_holds_and_a_flat_profile_fails_it():
    jump = [0.5] * 8 + [0.8] * (L - 8)
    rows = _layers(jump, kind="pca", half=0.02)
    assert _by({}, _sweep(rows))["appendixA.pca-jump"]["outcome"] == "holds"
    flat = _layers([0.6] * L, kind="pca", half=0.01)
    assert _by({}, _sweep(flat))["appendixA.pca-jump"]["outcome"] == "fails"


def test_layer_claims_need_twenty_groups_and_a_run_that_recorded_the_layers():
    rows = _layers([0.6] * L, kind="pca", half=0.01)
    few = _by({}, _sweep(rows, k=10))["appendixA.pca-jump"]
    assert few["outcome"] == "not tested at this size" and "mt-bench (10)" in few["reason"]
    assert few["needed"] == "20 test groups on a swept dataset"
    none = _by({}, {"entries": []})["appendixA.pca-jump"]
    assert none["outcome"] in ("not tested at this size", "not run in this preset")
    assert none["needed"]


def test_per_layer_keeps_the_probe_accuracy_rows_only():
    rows = _layers([0.6] * 3) + [{**_layers([0.6])[0], "metric": "f1"},
                                 {**_layers([0.6])[0], "layer": -1, "kind": "lexical"},
                                 {**_layers([0.6])[0], "kind": "mass_mean"}]
    assert len(per_layer(rows)) == 3


def _transfer(diffs_by_source, own, ds="mctaco", kind="pca"):
    rows = [{"train": src, "test": ds, "kind": kind, "n_test": 3 * len(d),
             "group_diffs": d, "refused": ""} for src, d in diffs_by_source.items()]
    return rows + [{"train": ds, "test": ds, "kind": kind, "n_test": 3 * len(own),
                    "group_diffs": own, "refused": ""}]


def test_table1_claims_from_group_differences_and_only_table1_sources():
    import numpy as np

    g = list(np.random.default_rng(0).normal(0.3, 0.05, 25))
    rows = _transfer({"rocstories": g, "hanna-coherence": g,
                      "mt-bench": [-0.5] * 25},      # not a Table 1 dataset: not a source
                     own=[x + e for x, e in zip(g, np.random.default_rng(1).normal(0, 0.02, 25))])
    by = _by({"transfer": {"accuracy": rows}}, None)
    c = by["table1.pca-transfers.mctaco"]
    assert c["outcome"] == "holds" and c["value"] == pytest.approx(np.mean(g))
    assert "sign-flip" in c["method"] and c["n_groups"] == 25
    assert by["ours.table1.pca-as-in-domain.mctaco"]["outcome"] == "holds"   # within ±0.05
    older = _by({"transfer": {"f1": [{"train": "a"}]}}, None)["table1.pca-transfers.mctaco"]
    assert older["outcome"] == "not run in this preset" and older["needed"]
