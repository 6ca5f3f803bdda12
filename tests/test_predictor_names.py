"""One name per predictor (ppairs_lens.evaluation.predictors): every key the commands write
is in the one list, the figures' legends and ticks print its names, and the docs use no
retired name."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from ppairs_lens.evaluation.predictors import (
    BASELINE_NAMES,
    JUDGE_NAMES,
    PREDICTORS,
    label,
    short,
)
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.result_table import BASELINE_KINDS, JUDGE_KEYS, TEXT_BASELINE_KEYS
from ppairs_lens.judges.held_out import JUDGE_FORMS
from ppairs_lens.probes.estimators import KINDS

ROOT = Path(__file__).resolve().parent.parent
#: Names the predictors had before they had one (docs and figures must not use them).
RETIRED = ("surface", "TF-IDF logistic regression", "unigram bag of words",
           "embedding layer: pooled", "zero-shot, paper form", "zero-shot prompt (calibrated)")


def test_every_key_the_commands_write_is_in_the_one_list():
    keys = {*BASELINE_KINDS, *JUDGE_KEYS, *TEXT_BASELINE_KEYS, *JUDGE_FORMS, *KINDS}
    assert keys <= set(PREDICTORS), keys - set(PREDICTORS)
    assert set(BASELINE_KINDS) == set(BASELINE_NAMES)
    assert set(JUDGE_KEYS) <= set(JUDGE_NAMES)
    assert len({p.label for p in PREDICTORS.values()}) == len(PREDICTORS)   # no two alike
    assert len({p.short for p in PREDICTORS.values()}) == len(PREDICTORS)


@pytest.mark.parametrize("doc", sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]),
                         ids=lambda p: p.name)
def test_the_docs_use_no_retired_name(doc):
    text = doc.read_text("utf-8")
    found = [r for r in RETIRED if re.search(rf"\b{re.escape(r)}\b", text, re.I)]
    # "surface" survives only as the plain English of an API's public surface
    found = [r for r in found if not (r == "surface" and not re.search(
        r"\bsurface\b(?! (of|area|feature))", text.replace("public surface", "")))]
    assert not found, f"{doc.name} names a predictor by a retired name: {found}"


def _texts(fig) -> list[str]:
    out = []
    for ax in fig.axes:
        out += [t.get_text() for t in ax.get_xticklabels()]
        leg = ax.get_legend()
        out += [t.get_text() for t in leg.get_texts()] if leg else []
    for leg in fig.legends:
        out += [t.get_text() for t in leg.get_texts()]
    return [t for t in out if t]


def test_the_layer_sweep_legend_names_each_predictor_by_its_label():
    from analyses.layer_sweep_plots import plot_sweep
    from tests.sweeps import sweep_of

    rows = [{"dataset": "d", "kind": k, "layer": layer, "metric": "accuracy", "value": 0.6,
             "lo": 0.5, "hi": 0.7, "n_test": 40, "split_used": "pair"}
            for k in ("supervised", "pca") for layer in range(3)]
    rows += [{"dataset": "d", "kind": k, "layer": -1, "metric": "accuracy", "value": 0.55,
              "lo": 0.5, "hi": 0.6, "n_test": 40, "split_used": "pair"}
             for k in ("length", "lexical", "zero_shot")]
    cfg = SimpleNamespace(kinds=("supervised", "pca"), metric="accuracy",
                          settings=EvalSettings(), val_size=0.25, val_repeats=3)
    fig = plot_sweep(sweep_of({"rows": rows}), cfg, "tiny")
    texts = _texts(fig)
    for k in ("supervised", "pca", "length", "lexical", "zero_shot"):
        assert label(k) in texts, (k, texts)
    assert not [t for t in texts if any(r.lower() in t.lower() for r in RETIRED)]


def test_the_shift_figure_ticks_are_the_short_names():
    from analyses.distribution_shift import ShiftRow
    from analyses.distribution_shift_plots import plot_shift

    rows = [ShiftRow(dataset=ds, role=role, method=m, accuracy=0.6, lo=0.5, hi=0.7,
                     ci_counts=True, n=30)
            for ds, role in (("a", "in distribution"), ("b", "shifted"))
            for m in ("supervised", "length", "lexical", "zero_shot")]
    cfg = SimpleNamespace(train=["a"], test=["b"], settings=EvalSettings(),
                          judge_max_pairs={})
    texts = _texts(plot_shift(rows, "tiny", cfg, {}))
    assert {short(m) for m in ("supervised", "length", "lexical", "zero_shot")} <= set(texts)
