"""The records the main job's layer sweep and transfer steps hand on.

The layer sweep (paper Appendix A) hands on :class:`SweepResult`: its summary
(``layer_sweep_summary.json``: per dataset and probe kind the read-out chosen on validation,
its test accuracy, its paired differences against every baseline and judge), the baseline and
judge rows of its table (``layer = -1``) and the per-layer accuracy rows the Appendix A claims
read. Later steps read it by attribute (the read-outs the thesis tables use); the analyses
and the claims registry that read JSON get :meth:`SweepResult.data`, the dict they read before.

Transfer (paper Table 1, Figure 5) hands on :class:`TransferResult`: per probe kind its cosine
summary (:class:`CosineSummary`, with the direction-agreement verdict) and the headline
transfer rows (F1 for the report's Table 1, accuracy with its per-group differences from
chance for Table 1's claims). Its :meth:`TransferResult.data` is ``summary.json``'s
``transfer`` section exactly as written before the records (the kinds at the top level beside
``f1`` and ``accuracy``; the key ``frac_abs_cos_above_0.7`` kept through the codec's JSON
key); a section without ``f1``, ``accuracy`` or a row's ``role`` is refused naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ppairs_lens.io.records import ABSENT, JSON_KEY, Absent, record_data, record_from_data

__all__ = ["CosineAgreement", "CosineSummary", "InDistributionAccuracy", "LayerScore",
           "LengthBalanced", "OtherScore", "PairedDifference", "SweepEntry", "SweepResult",
           "SweepTest", "TransferResult", "TransferRow"]


# -- layer sweep (paper Appendix A) --------------------------------------------------------------

@dataclass(frozen=True)
class SweepTest:
    """A probe's test score at its chosen read-out, with its bootstrap interval."""

    metric: str
    value: float | None
    lo: float | None
    hi: float | None
    ci_counts: bool | None


@dataclass(frozen=True)
class PairedDifference:
    """The probe minus another predictor on the test pairs both scored (paired bootstrap over
    the leak groups; ``group_diffs``: one difference per group, for the sign-flip test)."""

    value: float | None
    lo: float | None
    hi: float | None
    n_boot_used: int
    n_groups: int
    ci_counts: bool | None
    a: float | None
    b: float | None
    n: int
    metric: str
    group_diffs: tuple[float | None, ...]
    about: str


@dataclass(frozen=True)
class LengthBalanced:
    """Accuracies on the length-balanced test pairs (where the sweep found enough of them)."""

    n: int
    tolerance: float
    accuracy: dict[str, float | None]


@dataclass(frozen=True)
class SweepEntry:
    """One (dataset, probe kind): the read-out chosen on validation and what it scored."""

    dataset: str
    kind: str
    layer: int
    hook: str
    val_value: float | None
    selected_by: str | None
    split_used: str
    n_test: int
    n_groups_test: int
    ci_unit: str
    test: SweepTest
    length_balanced: LengthBalanced | None
    minus: dict[str, PairedDifference]
    unavailable: dict[str, str]


@dataclass(frozen=True)
class OtherScore:
    """A baseline's or a prompted judge's score in the sweep's table (``layer = -1``)."""

    dataset: str
    kind: str
    layer: int
    hook: str
    metric: str
    value: float | None
    lo: float | None
    hi: float | None
    ci_counts: bool | None
    n_test: int
    predictor: str


@dataclass(frozen=True)
class LayerScore:
    """A probe's test accuracy at one read-out (what the Appendix A claims read)."""

    dataset: str
    kind: str
    layer: int
    metric: str
    value: float | None
    lo: float | None
    hi: float | None
    ci_counts: bool | None
    n_test: int


def _columns(cls: type, row: Mapping[str, Any]) -> dict[str, Any]:
    """The columns of the table row ``row`` that the record ``cls`` keeps."""
    return {f.name: row[f.name] for f in fields(cls)}


@dataclass(frozen=True)
class SweepResult:
    """What the layer sweep hands on: its summary's entries and the table rows read later."""

    selection: str
    metric: str
    ci: str
    entries: tuple[SweepEntry, ...]
    others: tuple[OtherScore, ...] = ()
    per_layer: tuple[LayerScore, ...] = ()

    @classmethod
    def of(cls, summary: Mapping[str, Any], rows: Iterable[Mapping[str, Any]],
           per_layer: Iterable[Mapping[str, Any]]) -> SweepResult:
        """From the sweep's summary (``layer_sweep_summary.json``), its table's rows
        (``layer_sweep.csv``, numbers parsed: the baselines' and judges' are kept) and the
        per-layer accuracy rows the claims read (:func:`analyses.replication.claims.per_layer`)."""
        return record_from_data(cls, {
            **summary, "others": [_columns(OtherScore, r) for r in rows if int(r["layer"]) < 0],
            "per_layer": list(per_layer)}, cls.__name__)

    def chosen(self) -> dict[tuple[str, str], int]:
        """(dataset, probe kind) -> the read-out chosen on validation."""
        return {(e.dataset, e.kind): e.layer for e in self.entries}

    def datasets(self) -> list[str]:
        """The swept datasets, in order."""
        return list(dict.fromkeys(e.dataset for e in self.entries))

    def data(self) -> dict:
        """As JSON data: the summary's keys with ``others`` and ``per_layer`` beside them."""
        return record_data(self)


# -- transfer and cosine similarity (paper Table 1, Figure 5) ------------------------------------

@dataclass(frozen=True)
class InDistributionAccuracy:
    value: float | None
    lo: float | None
    hi: float | None
    n_groups: int | None | Absent = ABSENT   # the test groups its interval rests on


@dataclass(frozen=True)
class CosineAgreement:
    """The directions' agreement verdict (a :class:`~ppairs_lens.evaluation.verdicts.Verdict`'s
    fields) with each dataset's in-distribution accuracy at the cosine read-out."""

    outcome: str
    reason: str
    rule: str
    evidence: dict[str, Any]
    method: str
    needed: str | None
    in_distribution: dict[str, InDistributionAccuracy | None]


@dataclass(frozen=True)
class CosineSummary:
    """One probe kind: mean |cos| between datasets against the random null, and its mean
    transfer on and off the diagonal."""

    mean_abs_cos: float | None
    mean_cos: float | None
    split_half_abs_cos: float | None
    frac_abs_cos_above_07: float | None = field(
        metadata={JSON_KEY: "frac_abs_cos_above_0.7"})
    frac_abs_cos_above_null_p95: float | None
    random_mean_abs_cos: float | None
    random_p95: float | None
    random_p99: float | None
    in_distribution: float | None
    off_diagonal_target: float | None
    off_diagonal_train: float | None
    off_diagonal: float | None
    agreement: CosineAgreement | Absent = ABSENT


@dataclass(frozen=True, kw_only=True)
class TransferRow:
    """A probe trained on one dataset scored on another (or its own) at its source's
    read-out; an accuracy row carries its per-group differences from chance."""

    train: str
    test: str
    kind: str
    role: str
    center: str
    headline: bool
    in_distribution: bool
    metric: str
    value: float | None
    lo: float | None
    hi: float | None
    ci_counts: bool | None
    layer: int
    hook: str
    layer_rule: str
    val_value: float | None
    selected_by: str | None
    split_by: str
    refused: str
    n_train: int
    n_test: int
    n_groups: int | Absent = ABSENT
    group_diffs: tuple[float | None, ...] | Absent = ABSENT


#: The keys of ``summary.json``'s transfer section that are not probe kinds.
_ROW_KEYS = ("f1", "accuracy")


@dataclass(frozen=True)
class TransferResult:
    """What the transfer step hands on: per kind its cosine summary, and the headline rows."""

    per_kind: dict[str, CosineSummary]
    f1: tuple[TransferRow, ...]
    accuracy: tuple[TransferRow, ...]

    @classmethod
    def of(cls, summary: Mapping[str, Mapping], rows: Iterable[Mapping[str, Any]]
           ) -> TransferResult:
        """From ``run_transfer``'s per-kind summary and its probe rows: F1 for the report's
        Table 1; accuracy with its group differences (supervised and PCA) for its claims."""
        head = [r for r in rows if r.get("headline")]
        return cls.from_data({**summary, "f1": [r for r in head if r["metric"] == "f1"],
                              "accuracy": [r for r in head if r["metric"] == "accuracy"
                                           and r["kind"] in ("supervised", "pca")]})

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TransferResult:
        """The record :meth:`data` wrote (``summary.json``'s ``transfer``)."""
        return record_from_data(cls, {
            "per_kind": {k: v for k, v in data.items() if k not in _ROW_KEYS},
            **{k: data[k] for k in _ROW_KEYS if k in data}}, cls.__name__)

    def data(self) -> dict:
        """``summary.json``'s ``transfer``: the kinds, then ``f1`` and ``accuracy``."""
        d = record_data(self)
        return {**d.pop("per_kind"), **d}
