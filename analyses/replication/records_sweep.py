"""The record the main job's transfer step hands on.

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
from dataclasses import dataclass, field
from typing import Any

from ppairs_lens.io.records import ABSENT, JSON_KEY, Absent, record_data, record_from_data

__all__ = ["CosineAgreement", "CosineSummary", "InDistributionAccuracy", "TransferResult",
           "TransferRow"]


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
