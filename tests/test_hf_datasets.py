"""Hugging Face datasets as records: columns named, values checked at (row, column)."""

from __future__ import annotations

import pytest

datasets = pytest.importorskip("datasets", reason="needs ppairs-lens[hf] (datasets)")

from ppairs_lens.data.records import Dataset  # noqa: E402
from ppairs_lens.errors import DataError  # noqa: E402


def comparisons(**over):
    cols = {"a": ["one", "three", "five"], "b": ["two", "four", "six"], "y": [1, 2, 1],
            "ctx": ["c1", "c1", "c2"], "blk": ["g1", "g1", "g2"]}
    cols.update(over)
    return datasets.Dataset.from_dict(cols)


def test_comparisons_with_context_and_groups():
    ds = Dataset.from_hf(comparisons(), item1="a", item2="b", label="y", context="ctx",
                         group="blk", name="toy", aspect="larger")
    assert ds.kind == "comparison" and len(ds) == 3 and ds.aspect == "larger"
    assert ds.labels() == [1, 2, 1] and ds.group_ids() == ["g1", "g1", "g2"]
    assert ds.records[0].context_id == ds.records[1].context_id != ds.records[2].context_id
    assert ds.fingerprint() == Dataset.from_hf(comparisons(), item1="a", item2="b", label="y",
                                               context="ctx", group="blk", name="toy",
                                               aspect="larger").fingerprint()


def test_label_map_and_errors_name_row_and_column():
    ds = Dataset.from_hf(comparisons(y=[0, 1, 0]), item1="a", item2="b", label="y",
                         label_map={0: 1, 1: 2})
    assert ds.labels() == [1, 2, 1]
    with pytest.raises(DataError, match=r"row 2, field 'y': label must be 1 or 2"):
        Dataset.from_hf(comparisons(y=[1, 3, 1]), item1="a", item2="b", label="y")
    with pytest.raises(DataError, match=r"row 3, field 'b': empty text"):
        Dataset.from_hf(comparisons(b=["x", "y", " "]), item1="a", item2="b", label="y")
    with pytest.raises(DataError, match=r"field 'itemz': no column 'itemz'"):
        Dataset.from_hf(comparisons(), item1="itemz", item2="b", label="y")
    with pytest.raises(TypeError):
        Dataset.from_hf(comparisons(), item1="a")


def test_statements():
    hf = datasets.Dataset.from_dict({"text": ["Paris is in France.", "Paris is in Peru."],
                                     "truth": [True, False], "subject": ["paris", "paris"]})
    ds = Dataset.from_hf(hf, statement="text", label="truth", group="subject")
    assert ds.kind == "statement" and ds.labels() == [1, 2] and ds.group_ids() == ["paris"] * 2
    bad = datasets.Dataset.from_dict({"text": ["a", "b"], "truth": ["yes", "no"]})
    with pytest.raises(DataError, match=r"row 1, field 'truth'"):
        Dataset.from_hf(bad, statement="text", label="truth")


def test_labelled_texts_feed_a_sweep(tiny):
    from ppairs_lens.activations.texts import harvest_labelled_texts
    from ppairs_lens.probes.sweep import fit_sweep

    hf = datasets.Dataset.from_dict({
        "prompt": [f"Is {a} larger than {b}? Answer:" for a, b in
                   [(9, 2), (3, 8), (7, 1), (2, 6), (8, 4), (1, 5)]],
        "y": [True, False, True, False, True, False], "g": ["a", "a", "b", "b", "c", "c"]})
    out = harvest_labelled_texts(tiny, hf["prompt"], hf["y"], hf["g"], choices=(" yes", " no"))
    assert out.acts.shape[:2] == (6, 2) and out.labels.tolist() == [1, 2, 1, 2, 1, 2]
    assert out.groups == ("a", "a", "b", "b", "c", "c")
    fit_sweep(out.acts, out.labels, kinds=("mass_mean",), groups=list(out.groups))
    with pytest.raises(DataError, match=r"row 2, field 'label'"):
        harvest_labelled_texts(tiny, hf["prompt"][:2], [1, "x"])
