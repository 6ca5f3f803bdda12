"""The layer sweep and transfer steps hand on records (``analyses.layer_sweep.SweepResult``,
``analyses.cross_dataset.TransferHeadline``): the same record fresh and reused, and the JSON the
summary and the claims read exactly as the step wrote it (the committed ``figures/`` read back
key for key)."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from analyses.layer_sweep import SweepEntry, SweepResult, SweepRow, read_sweep
from analyses.cross_dataset import CosineSummary, TransferHeadline, TransferResult, TransferRow
from ppairs_lens.errors import DataError, PPairsError
from ppairs_lens.io.outputs import jsonable, write_csv, write_json
from ppairs_lens.io.records import ABSENT, JSON_KEY, record_data, record_from_data
from ppairs_lens.io.study_runner import StudyRunner

FIGURES = Path(__file__).resolve().parents[1] / "figures"

DIFF = {"value": 0.1, "lo": -0.1, "hi": 0.3, "n_boot_used": 200, "n_groups": 3,
        "ci_counts": False, "a": 0.6, "b": 0.5, "n": 10, "metric": "accuracy",
        "group_diffs": [0.5, 0.0, float("nan")], "about": "prompted judge on 10 of 10 pairs"}
ENTRY = {"dataset": "d", "kind": "supervised", "layer": 2, "hook": "blocks.2.hook_resid_post",
         "val_value": None, "selected_by": "last block", "split_used": "pairs", "n_test": 10,
         "n_groups_test": 3, "ci_unit": "by pair",
         "test": {"metric": "accuracy", "value": 0.6, "lo": 0.4, "hi": 0.8, "ci_counts": False},
         "length_balanced": {"n": 4, "tolerance": 0.1, "accuracy": {"probe": 0.5}},
         "minus": {"zero_shot": DIFF}, "unavailable": {"memorisation": "no ids recur"}}
SUMMARY = {"selection": "best validation read-out", "metric": "accuracy", "ci": "95%",
           "entries": [ENTRY, {**ENTRY, "kind": "pca", "length_balanced": None, "minus": {}}]}
ROW = {"dataset": "d", "kind": "supervised", "layer": 1, "hook": "h", "metric": "accuracy",
       "value": 0.7, "lo": 0.5, "hi": 0.9, "ci_counts": True, "n_train": 12, "n_test": 10,
       "split_used": "pairs", "val_value": 0.6, "sign_confidence": None, "chosen": False,
       "selected_by": "validation", "predictor": ""}
JUDGE = {**ROW, "kind": "zero_shot", "layer": -1, "hook": "", "val_value": None,
         "chosen": None, "selected_by": None, "predictor": "prompted judge"}


def _sweep() -> SweepResult:
    return record_from_data(SweepResult, {**SUMMARY, "rows": [ROW, JUDGE]})


def test_the_sweep_hands_on_the_same_record_fresh_and_reused(tmp_path):
    def step() -> SweepResult:
        return _sweep()

    fresh = StudyRunner(tmp_path, 1).step("layer sweep", step)
    again = StudyRunner(tmp_path, 1)
    reused = again.step("layer sweep", step)
    assert again.reused == ["layer sweep"]
    for got in (fresh, reused):
        assert isinstance(got, SweepResult) and isinstance(got.entries[0], SweepEntry)
        assert got.others("d") == {("zero_shot", "accuracy"): SweepRow(**JUDGE)}
        assert got.chosen() == {("d", "supervised"): 2, ("d", "pca"): 2}
        assert got.datasets() == ["d"] and got.entry("d", "pca").minus == {}
        assert got.entries[0].minus["zero_shot"].group_diffs[:2] == (0.5, 0.0)
        summary = got.summary()
        assert math.isnan(summary["entries"][0]["minus"]["zero_shot"]["group_diffs"][2])
        assert json.dumps(summary) == json.dumps(SUMMARY)
        assert got.table() == [ROW, JUDGE]


def test_a_sweep_entry_without_a_field_is_refused_naming_it():
    broken = {**SUMMARY, "entries": [{k: v for k, v in ENTRY.items() if k != "test"}]}
    with pytest.raises(PPairsError, match=r"SweepResult\.entries\[0\]\.test: required field missing"):
        record_from_data(SweepResult, broken, "SweepResult")


def test_a_written_sweep_reads_back_as_the_same_record(tmp_path):
    sweep = _sweep()
    write_csv(tmp_path / "layer_sweep.csv", sweep.table())
    write_json(tmp_path / "layer_sweep_summary.json", sweep.summary())
    back = read_sweep(tmp_path)
    assert back.rows == sweep.rows and back.chosen() == sweep.chosen()
    assert jsonable(back.summary()) == jsonable(sweep.summary())     # a NaN is written as null


def test_a_sweep_table_cell_that_does_not_fit_is_refused_naming_its_row_and_field(tmp_path):
    sweep = _sweep()
    write_json(tmp_path / "layer_sweep_summary.json", sweep.summary())
    write_csv(tmp_path / "layer_sweep.csv", [ROW, {**JUDGE, "n_test": "ten"}])
    with pytest.raises(DataError, match=r"layer_sweep\.csv, row 3, field 'n_test'"):
        read_sweep(tmp_path)
    write_csv(tmp_path / "layer_sweep.csv", [{k: v for k, v in ROW.items() if k != "layer"}])
    with pytest.raises(DataError, match=r"row 2, field 'layer': column missing"):
        read_sweep(tmp_path)


@pytest.mark.skipif(not (FIGURES / "layer_sweep_summary.json").is_file(),
                    reason="no committed sweep")
def test_the_committed_sweep_reads_back_key_for_key(tmp_path):
    for name in ("layer_sweep_summary.json", "layer_sweep.csv"):
        shutil.copy(FIGURES / name, tmp_path / name)
    summary = json.loads((FIGURES / "layer_sweep_summary.json").read_text("utf-8"))
    sweep = read_sweep(tmp_path)
    assert json.dumps(sweep.summary()) == json.dumps(summary)
    write_csv(tmp_path / "again.csv", sweep.table())
    assert (tmp_path / "again.csv").read_text("utf-8") == \
        (FIGURES / "layer_sweep.csv").read_text("utf-8")


COSINE = {"mean_abs_cos": 0.1, "mean_cos": 0.0, "split_half_abs_cos": 0.2,
          "frac_abs_cos_above_0.7": 0.0, "frac_abs_cos_above_null_p95": 0.5,
          "random_mean_abs_cos": 0.03, "random_p95": 0.08, "random_p99": 0.1,
          "in_distribution": 0.6, "off_diagonal_target": 0.5, "off_diagonal_train": None,
          "off_diagonal": 0.5,
          "agreement": {"outcome": "not tested at this size", "reason": "1 of 2", "rule": "r",
                        "evidence": {"used": ["a"], "below_chance": ["b"]}, "method": "",
                        "needed": None, "in_distribution": {
                            "a": {"value": 0.8, "lo": 0.6, "hi": 1.0}, "b": None}}}
T_ROW = {"train": "a", "test": "b", "kind": "pca", "role": "probe", "center": "target",
         "headline": True, "in_distribution": False, "metric": "accuracy", "value": 0.6,
         "lo": 0.4, "hi": 0.8, "ci_counts": False, "layer": 3, "hook": "h", "layer_rule": "val",
         "val_value": 0.7, "selected_by": "validation", "split_by": "pairs", "refused": "",
         "n_train": 20, "n_test": 10, "n_groups": 2, "group_diffs": [0.1, 0.2]}
F1_ROW = {k: v for k, v in T_ROW.items() if k not in ("n_groups", "group_diffs")}


def test_transfer_hands_on_the_same_record_fresh_and_reused(tmp_path):
    rows = [{**F1_ROW, "metric": "f1"}, T_ROW, {**T_ROW, "kind": "ccs"},
            {**T_ROW, "headline": False}]

    def step() -> TransferHeadline:
        return TransferResult(
            names=("a", "b"), layer=3, hook="h", layers={}, split_by={}, random={},
            per_kind={"pca": record_from_data(CosineSummary, COSINE)},
            rows=tuple(record_from_data(TransferRow, r) for r in rows), cosine=(),
            layer_cosine=()).headline()

    fresh = StudyRunner(tmp_path, 1).step("transfer", step)
    reused = StudyRunner(tmp_path, 1).step("transfer", step)
    for got in (fresh, reused):
        assert isinstance(got.per_kind["pca"], CosineSummary)
        assert got.per_kind["pca"].frac_abs_cos_above_07 == 0.0
        assert got.f1[0].metric == "f1" and got.f1[0].n_groups is ABSENT
        assert [r.kind for r in got.accuracy] == ["pca"]       # headline supervised / PCA
        assert json.dumps(got.data()) == json.dumps(
            {"pca": COSINE, "f1": [rows[0]], "accuracy": [T_ROW]})


def test_a_transfer_section_without_accuracy_or_role_is_refused_naming_the_field():
    no_role = {"pca": COSINE, "f1": [{k: v for k, v in F1_ROW.items() if k != "role"}],
               "accuracy": [T_ROW]}
    with pytest.raises(PPairsError, match=r"TransferHeadline\.f1\[0\]\.role: required field missing"):
        TransferHeadline.from_data(no_role)
    with pytest.raises(PPairsError, match=r"TransferHeadline\.accuracy: required field missing"):
        TransferHeadline.from_data({"pca": COSINE, "f1": [F1_ROW]})


def test_a_transfer_row_with_a_column_it_lacks_is_refused_not_kept_as_a_dict():
    with pytest.raises(PPairsError, match=r"TransferHeadline\.f1\[0\]: extra fields found \(surprise\)"):
        TransferHeadline.from_data({"f1": [{**F1_ROW, "surprise": 1}], "accuracy": []})


@pytest.mark.skipif(not (FIGURES / "summary.json").is_file(), reason="no committed summary")
def test_the_committed_transfer_section_reads_back_key_for_key():
    transfer = json.loads((FIGURES / "summary.json").read_text("utf-8"))["transfer"]
    assert json.dumps(TransferHeadline.from_data(transfer).data()) == json.dumps(transfer)


def test_a_field_keeps_a_json_key_that_is_no_python_name():
    @dataclass(frozen=True)
    class R:
        above: float = field(metadata={JSON_KEY: "above_0.7"})
        n: int = 0

    assert record_data(R(0.5, 2)) == {"above_0.7": 0.5, "n": 2}
    assert record_from_data(R, {"above_0.7": 0.5, "n": 2}) == R(0.5, 2)
    assert record_from_data(R, {"above_0.7": 0.5}) == R(0.5)
    with pytest.raises(PPairsError, match="required field missing"):
        record_from_data(R, {"n": 1})
