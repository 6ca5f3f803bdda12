"""The published numbers: every table of the seed notes, transcribed and findable."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import pytest

from ppairs_lens.evaluation.published import (ASPECTS, DATASETS, PUBLISHED, SEVERAL, Published,
                                              citation, published)


def _one(**match) -> Published:
    found = published(**match)
    assert len(found) == 1, (match, found)
    return found[0]


def test_counts_per_table_match_the_notes():
    n = Counter((p.source, p.table) for p in PUBLISHED)
    assert n["thesis", "Table 4.1"] == 3 * 3 * 8          # 3 models x 3 methods x 8 cells
    assert n["thesis", "Table 4.2"] == 3 * 3 * 8 + 2 * 8  # + GPT-4-Turbo direct and PAIRS
    assert n["thesis", "Table 4.4"] == 5 + 1              # AR3..AR6, overall; the probe
    # 6 rows x 2 metrics in Table 4, x 2 in Table 1 with the WG slopes, the humans in Table 5
    assert (n["climatex", "Table 4"], n["climatex", "Table 1"], n["climatex", "Table 5"]) == (
        12, 12 + 2, 1)
    assert n["paper", "Table 1"] == 6 * 5 * 2             # off-diagonal cells, sup and unsup
    assert n["paper", "Table 2"] == 5 * 2
    for fig in ("Figure 1", "Figure 2", "Figure 3", "Figure 4", "Figure 5", "Appendix A"):
        assert n["paper", fig] >= 1, fig


def test_thesis_cells():
    assert _one(table="Table 4.1", model="Mistral-7B-Instruct-v0.1", method="PPAIRS",
                dataset="SummEval", aspect="consistency").value == 0.92
    assert _one(table="Table 4.1", model="Llama-3-8B-Instruct", method="PAIRS",
                dataset="NEWSROOM", aspect="coherence").value == 0.71
    assert _one(table="Table 4.2", model="Llama-2-7B-chat", method="direct",
                dataset="NEWSROOM", aspect="consistency").value == -0.02
    gpt = _one(table="Table 4.2", model="GPT-4-Turbo (preview)", method="PAIRS",
               dataset="SummEval", aspect="relevance")
    assert gpt.value == 0.59 and "PAIRS paper" in gpt.note
    assert _one(table="Table 4.2", model="Llama-3-8B-Instruct", method="PPAIRS",
                dataset="SummEval", aspect="coherence").note is None
    assert {p.aspect for p in published(table="Table 4.1")} == set(ASPECTS)


def test_climatex_numbers():
    assert _one(table="Table 4.4", setting="AR3").value == 0.69
    assert _one(table="Table 4.4", method="PPAIRS_INSERT", setting="overall").value == 0.64
    assert _one(table="Table 4.4", method="PPAIRS").value == 0.727
    assert _one(source="climatex", model="GPT-4", method="zero-shot", metric="accuracy").value \
        == 0.443
    assert _one(source="climatex", model="GPT-4", method="few-shot", metric="accuracy",
                setting="overall").value == 0.470
    assert _one(source="climatex", model="Cohere Command-XL", method="zero-shot",
                metric="bias").value == 0.708
    assert _one(source="climatex", model="GPT-3.5-turbo", method="few-shot",
                metric="bias").value == -0.054
    assert _one(source="climatex", method="human").value == 0.362
    assert _one(source="climatex", setting="WGI").value == 0.445
    assert _one(source="climatex", setting="WGII/III").value == 0.297


def test_paper_tables():
    assert published(table="Table 1", method="supervised", dataset="ROCStories",
                     train_dataset="MCTACO")[0].value == 0.99
    assert _one(table="Table 1", method="unsupervised", dataset="HANNA",
                train_dataset="CaTeRS").value == 0.70
    assert _one(table="Table 1", method="supervised", dataset="SummEval",
                train_dataset="CaTeRS").value == 0.58
    assert not published(table="Table 1", dataset="HANNA", train_dataset="HANNA")  # "-" cells
    assert {p.model for p in published(source="paper", table="Table 1")} == {"Llama 3.1 70B"}
    assert _one(table="Table 2", model="Gemma 2 2B", method="unsupervised").value == -0.01
    assert _one(table="Table 2", model="Llama 3.1 70B", method="supervised").value == 0.03
    assert {p.metric for p in published(table="Table 2")} == {"delta F1"}


def test_figure_claims_carry_their_words():
    fig1 = published(table="Figure 1", dataset="MT-Bench")
    assert {p.method for p in fig1} == {"supervised", "unsupervised"}
    assert all(p.value == 0.8 and "approximate" in p.note for p in fig1)
    assert any("40-50%" in p.note for p in published(table="Appendix A"))


def test_every_record_is_well_formed():
    for p in PUBLISHED:
        assert p.source in ("thesis", "paper", "climatex")
        assert p.dataset in DATASETS or (p.dataset == SEVERAL and p.note)
        assert not math.isnan(p.value) or p.note, citation(p)
    with pytest.raises(ValueError, match="note"):
        Published("paper", "Figure 9", "m", "MT-Bench", "x", "F1", float("nan"))
    with pytest.raises(ValueError, match="dataset"):
        Published("paper", "Figure 9", "m", "Summeval", "x", "F1", 0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        PUBLISHED[0].value = 1.0  # type: ignore[misc]
    assert len(set(PUBLISHED)) == len(PUBLISHED)          # no cell transcribed twice


def test_filter_and_citation():
    assert published() == list(PUBLISHED)
    with pytest.raises(TypeError, match="no field"):
        published(modle="GPT-4")
    p = _one(table="Table 4.1", model="Mistral-7B-Instruct-v0.1", method="direct",
             dataset="NEWSROOM", aspect="coherence")
    assert citation(p) == "thesis Table 4.1 (Mistral-7B-Instruct-v0.1)"
