"""The main job's table steps hand on typed rows (each declared beside its step): a row keeps the
columns it had, in order, through the step cache and back from ``summary.json``; a column no
row record knows is refused, naming it."""

from __future__ import annotations

import json
import math

import pytest

from analyses.ablation import AblationRows
from analyses.distribution_shift import ShiftResult
from analyses.insertion import InsertionRows
from analyses.steering import SteeringRow, SteeringRows
from analyses.thesis_tables import ThesisCell, ThesisPublished, ThesisRows
from ppairs_lens.errors import PPairsError
from ppairs_lens.io.records import ABSENT, record_from_data
from ppairs_lens.io.study_runner import StudyRunner

BASE = {"dataset": "mt-bench", "hook": "blocks.1.hook_resid_post", "layer": 1, "n": 6,
        "norm_unit": 2.5, "split_used": "context", "condition": "none", "kind": "baseline",
        "alpha": 0.0, "delta_z": 0.0}
STEERING = [{**BASE, "mean_z": -0.1, "accuracy": 0.5},
            {**BASE, "condition": "random", "kind": "null", "alpha": 1.0, "delta_z": 0.2,
             "delta_z_lo": 0.1, "delta_z_hi": 0.3, "mean_z": 0.0, "accuracy": 0.5,
             "slope": float("nan"), "n_random": 4}]


def test_rows_keep_their_own_columns_in_order_fresh_and_reused(tmp_path):
    def work() -> SteeringRows:
        return SteeringRows(rows=(SteeringRow(**STEERING[0]), SteeringRow(**STEERING[1])))

    fresh = StudyRunner(tmp_path, 1).step("steering", work)
    again = StudyRunner(tmp_path, 1)
    reused = again.step("steering", work)
    assert again.reused == ["steering"] and isinstance(reused, SteeringRows)
    assert reused.rows[0].delta_z_lo is ABSENT and reused.rows[1].n_random == 4
    for got in (fresh, reused):
        data = got.data()
        assert [list(r) for r in data] == [list(r) for r in STEERING]   # same keys, same order
        assert math.isnan(data[1]["slope"]) and data[0] == STEERING[0]


def test_a_column_no_row_record_has_is_refused_naming_it():
    with pytest.raises(PPairsError,
                       match=r"SteeringRows.rows\[0\]: extra fields found \(surprise\)"):
        SteeringRows.from_data([{**STEERING[0], "surprise": 1}])
    with pytest.raises(PPairsError, match="required field missing"):
        record_from_data(SteeringRows, {"rows": [{"dataset": "x"}]})


def test_a_table_of_several_row_kinds_rebuilds_each_kind():
    cell = {"dataset": "SummEval", "aspect": "coherence", "thesis_column": "CH",
            "model": "ours", "n_spearman_articles": 3, "n_test_pairs": 9, "n_test_articles": 3,
            "n_items_per_article": 3.0, "read_out": 2, "table": "4.1", "method": "PAIRS",
            "metric": "pairwise accuracy", "value": 0.5, "lo": 0.2, "hi": 0.8, "n": 9,
            "ci_counts": False}
    pub = {"table": "4.1", "dataset": "SummEval", "aspect": "coherence",
           "thesis_column": "CH", "method": "PPAIRS", "metric": "pairwise accuracy",
           "model": "Llama-3-8B-Instruct", "value": 0.7, "lo": None, "hi": None,
           "source": "thesis"}
    rows = ThesisRows(rows=(ThesisCell(**cell), ThesisPublished(**pub)))
    assert ThesisRows.from_data([cell, pub]) == rows
    assert [type(r) for r in rows.rows] == [ThesisCell, ThesisPublished]
    back = ThesisRows.from_data(json.loads(json.dumps(rows.data())))
    assert back == rows and json.dumps(back.data()) == json.dumps([cell, pub])


def test_shift_verdicts_stay_only_on_the_rows_that_decide_a_claim():
    res = {"rows": [{"dataset": "a", "role": "in distribution", "method": "pca",
                     "accuracy": 0.6, "lo": 0.5, "hi": 0.7, "ci_counts": True, "n": 30,
                     "read_out": None}],
           "drops": [{"shifted": "b", "method": "pca", "drop": 0.1, "lo": 0.0, "hi": 0.2,
                      "ci_counts": True, "n_groups": 6},
                     {"shifted": "b", "method": "zero_shot drop - pca drop", "drop": 0.1,
                      "lo": 0.0, "hi": 0.2, "ci_counts": True, "n_groups": 6,
                      "verdict": "inconclusive"}],
           "published": [{"source": "paper", "note": "n"}], "read_outs": {"pca": 3}}
    rec = ShiftResult.from_data(res)
    assert not rec.drops[0].verdict and rec.drops[1].verdict == "inconclusive"
    assert json.dumps(ShiftResult.from_data(json.loads(json.dumps(rec.data()))).data()) \
        == json.dumps(res)


def test_empty_tables_and_records_without_a_row_kind_round_trip():
    for cls in (AblationRows, InsertionRows, SteeringRows):
        assert cls.from_data([]) == cls() and cls.from_data([]).table() == []


def test_data_of_the_wrong_kind_is_refused_naming_the_field_never_coerced():
    from dataclasses import dataclass

    from ppairs_lens.io.records import record_data

    @dataclass(frozen=True)
    class Rec:
        by_level: dict[int, list[str]]
        value: int | float
        pair: tuple[int, int]
        share: float = 0.0

    rec = Rec({3: ["a"]}, 2, (1, 2), 1.0)
    back = record_from_data(Rec, json.loads(json.dumps(record_data(rec))))
    assert back == rec and type(back.value) is int and list(back.by_level) == [3]
    assert type(record_from_data(Rec, {**record_data(rec), "share": 4}).share) is float
    good = record_data(rec)
    for bad, said in [([1], "result: expected an object of Rec's fields, got list"),
                      ({**good, "value": "2"}, "result.value: expected int or float, got str"),
                      ({**good, "value": True}, "result.value: expected int or float, got bool"),
                      ({**good, "pair": [1]}, "result.pair: Not enough values"),
                      ({**good, "by_level": {"x": []}}, "result.by_level: expected integer keys"),
                      ({**good, "by_level": []}, "result.by_level: expected an object, got list"),
                      ({**good, "share": "0.5"}, "result.share: expected float, got str")]:
        with pytest.raises(PPairsError) as e:
            record_from_data(Rec, bad)
        assert str(e.value).startswith(said), str(e.value)


def test_a_tables_columns_follow_its_row_records_and_numpy_scalars_read_as_values():
    import numpy as np

    from analyses.thesis_tables import ThesisDifference

    diff = ThesisDifference(table="4.1", dataset="SummEval", aspect="coherence", model="ours",
                            method="PPAIRS - PAIRS", metric="pairwise accuracy difference",
                            value=0.1, lo=-0.1, hi=0.3, n=9, ci_counts=False, n_groups=3,
                            group_diffs=(0.1, 0.0, 0.2))
    pub = ThesisPublished(table="4.1", dataset="SummEval", aspect="coherence",
                          thesis_column="CH", method="PPAIRS", metric="pairwise accuracy",
                          model="Llama-3-8B-Instruct", value=0.7, lo=None, hi=None,
                          source="thesis")
    table = ThesisRows(rows=(diff, pub)).table()
    cells = [f.name for f in __import__("dataclasses").fields(ThesisCell)]
    assert list(table[0])[:4] == [c for c in cells if c in table[0]][:4]   # the record's order
    assert table[0]["source"] is None and table[1]["group_diffs"] is None   # a cell it lacks
    back = record_from_data(ThesisRows, {"rows": [{**diff.__dict__, "value": np.float64(0.1),
                                                   "n": np.int64(9)}]})
    assert type(back.rows[0].value) is float and type(back.rows[0].n) is int
    # summary.json writes a NaN as null: a float field reads it back as NaN
    nan = record_from_data(ThesisRows, {"rows": [{**diff.__dict__, "value": None}]})
    assert math.isnan(nan.rows[0].value)


def test_a_written_table_reads_back_as_its_rows_absent_columns_absent(tmp_path):
    """``StepRows.read_csv``: the CSV its ``table()`` wrote gives the same rows back: a column
    no row had, or an empty cell in a field the row may lack, is ABSENT again; an empty cell
    of a float the row must have is NaN. A table of several row kinds is refused."""
    from ppairs_lens.errors import DataError
    from ppairs_lens.io.outputs import write_csv

    rows = SteeringRows(rows=(SteeringRow(**STEERING[0]),
                              SteeringRow(**{**STEERING[1], "slope": 0.5})))
    write_csv(tmp_path / "steering.csv", rows.table())
    assert SteeringRows.read_csv(tmp_path / "steering.csv") == rows
    nan = SteeringRows(rows=(SteeringRow(**{**STEERING[0], "mean_z": float("nan")}),))
    write_csv(tmp_path / "nan.csv", nan.table())
    assert math.isnan(SteeringRows.read_csv(tmp_path / "nan.csv").rows[0].mean_z)
    with pytest.raises(PPairsError, match="ThesisRows holds rows of several kinds"):
        ThesisRows.read_csv(tmp_path / "steering.csv")
    bad = (tmp_path / "steering.csv").read_text().replace(",4\n", ",four\n")
    (tmp_path / "bad.csv").write_text(bad)
    with pytest.raises(DataError, match=r"bad.csv, row 3, field 'n_random'"):
        SteeringRows.read_csv(tmp_path / "bad.csv")
    with pytest.raises(DataError, match="cannot read"):
        SteeringRows.read_csv(tmp_path / "missing.csv")
