"""The records the main job's table steps hand on: each step's rows as typed row records.

A table step (distribution shift, finetuning, steering, insertion, thesis tables, ...) makes
rows, writes them as its CSV and hands them to the summary. Between the step and the summary
(and through the step cache on resume, and ``refresh`` reading ``summary.json`` back) they
travel as one of these frozen records: a :class:`~ppairs_lens.io.records.StepRows` of row
records whose fields are the table's columns. A column a row does not have holds
:data:`~ppairs_lens.io.records.ABSENT` (steering's baseline row has no null ranks), so a
row's data (``StepRows.data``) has exactly the keys, in the order, the analysis wrote. An
analysis that adds a column must add the field here: ``StepRows.of`` refuses a row with a
column its record lacks, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ppairs_lens.io.records import (ABSENT, Absent, StepRows, as_row, record_data,
                                    record_from_data)

__all__ = ["AblationRow", "AblationRows", "ControlRow", "ControlRows", "FinetuningRow", "FinetuningRows", "InsertionRow",
           "InsertionRows", "PublishedNote", "PvPRow", "PvPRows", "ShiftDrop", "ShiftResult", "ShiftRow", "SteeringRow", "SteeringRows", "ThesisCell",
           "ThesisDifference", "ThesisPublished", "ThesisRow", "ThesisRows"]


# -- distribution shift (paper Figure 4) ---------------------------------------------------------

@dataclass(frozen=True)
class ShiftRow:
    """One method's accuracy on one set, in distribution or shifted."""

    dataset: str
    role: str
    method: str
    accuracy: float
    lo: float
    hi: float
    ci_counts: bool
    n: int
    read_out: int | None = None  # a probe's read-out index; None for a judge


@dataclass(frozen=True)
class ShiftDrop:
    """A method's drop (in distribution minus shifted), or a judge's drop minus a probe's
    with its verdict."""

    shifted: str
    method: str
    drop: float
    lo: float
    hi: float
    ci_counts: bool
    n_groups: int
    verdict: str | Absent = ABSENT  # only a judge-minus-probe row decides a claim


@dataclass(frozen=True)
class PublishedNote:
    source: str
    note: str


@dataclass(frozen=True)
class ShiftResult:
    """What ``run_shift`` found: accuracies, drops, the published claim, the read-outs."""

    rows: tuple[ShiftRow, ...]
    drops: tuple[ShiftDrop, ...]
    published: tuple[PublishedNote, ...]
    read_outs: dict[str, int]

    @classmethod
    def of(cls, result: Mapping[str, Any]) -> ShiftResult:
        return cls(rows=tuple(as_row(ShiftRow, r, "shift row") for r in result["rows"]),
                   drops=tuple(as_row(ShiftDrop, d, "shift drop") for d in result["drops"]),
                   published=tuple(as_row(PublishedNote, p, "shift published")
                                   for p in result["published"]),
                   read_outs=dict(result["read_outs"]))

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ShiftResult:
        return record_from_data(cls, dict(data), cls.__name__)

    def data(self) -> dict:
        return record_data(self)


# -- finetuning (paper Section 5.2) --------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class FinetuningRow:
    """One method's held-out accuracy beside the supervised probe's (when the supervised
    probe is among the methods), and its cost."""

    dataset: str
    method: str
    n_train: int
    n_test: int
    accuracy: float
    lo: float
    hi: float
    ci_counts: bool | None
    minus_supervised: float | Absent = ABSENT
    minus_supervised_lo: float | Absent = ABSENT
    minus_supervised_hi: float | Absent = ABSENT
    minus_supervised_ci_counts: bool | Absent = ABSENT
    n_groups: int | Absent = ABSENT
    minus_supervised_group_diffs: tuple[float, ...] | Absent = ABSENT
    train_seconds: float
    train_cpu_seconds: float
    peak_mb: float
    memory_kind: str
    trainable_params: int
    layer: int | None
    hook: str | None
    layer_rule: str | None
    examples_per_s: float | None
    cpu_seconds_per_example: float | None
    loss_first: float | None
    loss_last: float | None
    split_used: str
    ci_unit: str


@dataclass(frozen=True)
class FinetuningRows(StepRows):
    rows: tuple[FinetuningRow, ...] = ()


# -- steering ------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class SteeringRow:
    """One steering condition at one dose; null and slope columns where the row has them."""

    dataset: str
    hook: str
    layer: int
    n: int
    norm_unit: float
    split_used: str
    condition: str
    kind: str
    alpha: float
    delta_z: float
    delta_z_lo: float | Absent = ABSENT
    delta_z_hi: float | Absent = ABSENT
    mean_z: float
    accuracy: float
    slope: float | Absent = ABSENT
    n_matched: int | Absent = ABSENT
    n_random: int | Absent = ABSENT
    p_slope_random: float | Absent = ABSENT
    p_slope_matched: float | Absent = ABSENT
    slope_rank_random: int | Absent = ABSENT
    slope_rank_matched: int | Absent = ABSENT
    n_slope_random: int | Absent = ABSENT
    n_slope_matched: int | Absent = ABSENT


@dataclass(frozen=True)
class SteeringRows(StepRows):
    rows: tuple[SteeringRow, ...] = ()


# -- thesis Tables 4.1 and 4.2 -------------------------------------------------------------------

@dataclass(frozen=True)
class ThesisCell:
    """One of our methods in one (corpus, aspect) cell: accuracy (4.1) or Spearman (4.2)."""

    dataset: str
    aspect: str
    thesis_column: str
    model: str
    n_spearman_articles: int
    n_test_pairs: int
    n_test_articles: int
    n_items_per_article: float
    read_out: int
    table: str
    method: str
    metric: str
    value: float
    lo: float
    hi: float
    n: int
    ci_counts: bool | None


@dataclass(frozen=True)
class ThesisDifference:
    """PPAIRS minus another method in one cell, with the per-group differences behind it."""

    table: str
    dataset: str
    aspect: str
    model: str
    method: str
    metric: str
    value: float
    lo: float
    hi: float
    n: int
    ci_counts: bool | None
    n_groups: int
    group_diffs: tuple[float, ...]
    min_items_sorted: int | None = None   # Table 4.2: the fewest summaries an article sorts


@dataclass(frozen=True)
class ThesisPublished:
    """The thesis's number for the same cell (no interval published)."""

    table: str
    dataset: str
    aspect: str
    thesis_column: str
    method: str
    metric: str
    model: str
    value: float
    lo: float | None
    hi: float | None
    source: str


ThesisRow = ThesisCell | ThesisDifference | ThesisPublished


@dataclass(frozen=True)
class ThesisRows(StepRows):
    rows: tuple[ThesisRow, ...] = ()


# -- controls with known answers ------------------------------------------------------------------

@dataclass(frozen=True)
class ControlRow:
    """One control: its statistic (a mean of per-pair differences), interval and the
    differences per test group the claims test."""

    control: str
    statement: str
    value: float
    lo: float
    hi: float
    n: int
    n_groups: int
    group_diffs: tuple[float, ...]


@dataclass(frozen=True)
class ControlRows(StepRows):
    rows: tuple[ControlRow, ...] = ()


# -- ClimateX insertion (thesis Table 4.4) -------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class InsertionRow:
    """One method's level accuracy (per level, overall, a difference, or paired with a
    published model's predictions), or the probe's |cos| with PC1 (``abs_cos``, its
    accuracy NaN); slope and bias are ``""`` where a row has none."""

    method: str
    label: str
    level: str
    accuracy: float
    lo: float
    hi: float
    ci_counts: bool
    n: int
    slope: float | str
    bias: float | str
    mean_pred: float | str
    n_rows: int
    n_comparisons: int
    seconds: float
    ours: str | Absent = ABSENT  # a published-paired row: our method and theirs
    versus: str | Absent = ABSENT
    model: str | Absent = ABSENT
    setting: str | Absent = ABSENT
    n_unparsed: int | Absent = ABSENT
    ours_accuracy: float | Absent = ABSENT
    theirs_accuracy: float | Absent = ABSENT
    theirs_slope: float | Absent = ABSENT
    theirs_bias: float | Absent = ABSENT
    layer: int | Absent = ABSENT  # the probe's rows: its training cost
    layer_selection: str | Absent = ABSENT
    train_pairs: int | Absent = ABSENT
    train_rows: int | Absent = ABSENT
    train_seconds: float | Absent = ABSENT
    abs_cos: float | Absent = ABSENT  # "direction vs PC1": the probe's |cos| with PC1


@dataclass(frozen=True)
class InsertionRows(StepRows):
    rows: tuple[InsertionRow, ...] = ()


# -- ablation (paper Table 2) --------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class AblationRow:
    """One condition of one preset: its effect on the judge's log-odds, the judge's change
    (ΔF1, Δaccuracy, ΔAUROC, Δlog-odds with equivalence bounds) or, for the baseline, the
    judge itself; a probe's rank among the nulls with Holm's p; a null's spread."""

    dataset: str
    preset: str
    n: int
    n_groups: int
    layer: int
    hook: str
    positions: str
    split_used: str
    accuracy_margin: float
    logodds_margin: float
    condition: str
    kind: str
    effect: float
    margin: float
    accuracy: float
    accuracy_delta: float
    mean_abs_z: float
    position_bias_logodds: float | Absent = ABSENT
    abs_cos_unembedding: float | Absent = ABSENT
    effect_lo: float | Absent = ABSENT
    effect_hi: float | Absent = ABSENT
    delta_f1: float | Absent = ABSENT
    delta_ci_counts: bool | Absent = ABSENT
    delta_f1_lo: float | Absent = ABSENT
    delta_f1_hi: float | Absent = ABSENT
    delta_f1_tost_lo: float | Absent = ABSENT
    delta_f1_tost_hi: float | Absent = ABSENT
    delta_accuracy: float | Absent = ABSENT
    delta_accuracy_lo: float | Absent = ABSENT
    delta_accuracy_hi: float | Absent = ABSENT
    delta_accuracy_tost_lo: float | Absent = ABSENT
    delta_accuracy_tost_hi: float | Absent = ABSENT
    delta_auroc: float | Absent = ABSENT
    delta_auroc_lo: float | Absent = ABSENT
    delta_auroc_hi: float | Absent = ABSENT
    delta_auroc_tost_lo: float | Absent = ABSENT
    delta_auroc_tost_hi: float | Absent = ABSENT
    delta_logodds: float | Absent = ABSENT
    delta_logodds_lo: float | Absent = ABSENT
    delta_logodds_hi: float | Absent = ABSENT
    delta_logodds_tost_lo: float | Absent = ABSENT
    delta_logodds_tost_hi: float | Absent = ABSENT
    judge_f1: float | Absent = ABSENT
    judge_f1_lo: float | Absent = ABSENT
    judge_f1_hi: float | Absent = ABSENT
    judge_accuracy: float | Absent = ABSENT
    judge_accuracy_lo: float | Absent = ABSENT
    judge_accuracy_hi: float | Absent = ABSENT
    judge_auroc: float | Absent = ABSENT
    judge_auroc_lo: float | Absent = ABSENT
    judge_auroc_hi: float | Absent = ABSENT
    same_answer_share: float | Absent = ABSENT
    rank_random: int | Absent = ABSENT
    n_random: int | Absent = ABSENT
    p_random: float | Absent = ABSENT
    rank_matched: int | Absent = ABSENT
    n_matched: int | Absent = ABSENT
    p_matched: float | Absent = ABSENT
    sign_confidence: float | None | Absent = ABSENT
    p_random_holm: float | Absent = ABSENT
    p_matched_holm: float | Absent = ABSENT


@dataclass(frozen=True)
class AblationRows(StepRows):
    rows: tuple[AblationRow, ...] = ()


# -- probes against prompting (paper Figures 1-3) ------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class PvPRow:
    """A probe, a prompted judge or a baseline on one dataset's held-out pairs."""

    dataset: str
    method: str
    kind: str
    family: str  # "probe", "judge" or "baseline"
    accuracy: float
    lo: float
    hi: float
    ci_counts: bool | None
    read_out: int | None
    selected_by: str | None
    n: int
    auroc: float | None
    f1: float | None
    length_balanced_accuracy: float | Absent = ABSENT  # where the sweep balanced 30+ pairs
    n_length_balanced: int | Absent = ABSENT
    same_raw_answer_share: float | None | Absent = ABSENT  # a judge's: does it decide at all?


@dataclass(frozen=True)
class PvPRows(StepRows):
    rows: tuple[PvPRow, ...] = ()
