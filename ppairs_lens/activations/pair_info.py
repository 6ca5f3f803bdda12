"""One :class:`PairInfo` per line of a store's ``pairs.jsonl``: what analyses read without the
model (split ids and leak groups, the baselines' item ids and lengths, gold scores). Typed, so
that a misspelt field fails where it is written, not as a ``KeyError`` deep in an analysis.

The JSON keys are those the harvest writes, in its order (a store's fingerprint digests the
file's bytes): ``pair_id, label, context_id, group_id, item1_id, item2_id, score1, score2,
len1, len2``; a statement has no item or score keys, and ``len2`` null. A store's line without
``group_id`` or the lengths is refused; a record built in code writes None there as null (so
that its store reads back).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ppairs_lens.data.records import Comparison, Dataset

__all__ = ["PairInfo", "pair_info"]

_ITEM_KEYS = ("item1_id", "item2_id", "score1", "score2")


@dataclass(frozen=True)
class PairInfo:
    """One pair of a store, as ``pairs.jsonl`` holds it."""

    pair_id: str
    label: int  # 1, 2, or 0 for a tie
    # Pairs sharing a context share a prompt prefix; a group stays on one side of every split.
    # ``group_id`` None: the context, as :meth:`~ppairs_lens.data.records.Dataset.group_ids`
    # falls back.
    context_id: str | None = None
    group_id: str | None = None
    # Comparisons only: item ids (memorisation baseline, item splits), gold scores.
    item1_id: str | None = None
    item2_id: str | None = None
    score1: float | None = None
    score2: float | None = None
    # Character lengths of the items (a statement: its length and None), for the length baseline.
    len1: int | None = None
    len2: int | None = None
    # Not a JSON key: whether the line carries the item keys.
    kind: Literal["comparison", "statement"] = "comparison"

    @property
    def group(self) -> str:
        """The leak group: ``group_id``, else the context, else the pair (as
        :meth:`~ppairs_lens.data.records.Dataset.group_ids` falls back)."""
        if self.group_id is not None:
            return self.group_id
        return self.context_id if self.context_id is not None else self.pair_id

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pair_id": self.pair_id, "label": self.label,
                               "context_id": self.context_id, "group_id": self.group_id}
        if self.kind == "comparison":
            out.update({k: getattr(self, k) for k in _ITEM_KEYS})
        return {**out, "len1": self.len1, "len2": self.len2}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> PairInfo:
        known = {k: row[k] for k in ("pair_id", "label", "context_id", "group_id",
                                     *_ITEM_KEYS, "len1", "len2") if k in row}
        return cls(**known, kind="comparison" if "item1_id" in row else "statement")


def pair_info(dataset: Dataset) -> list[PairInfo]:
    labels, contexts, groups = dataset.labels(), dataset.context_ids(), dataset.group_ids()
    info = []
    for rec, label, ctx, group in zip(dataset.records, labels, contexts, groups):
        if isinstance(rec, Comparison):
            info.append(PairInfo(rec.pair_id, label, ctx, group, rec.item1_id, rec.item2_id,
                                 rec.score1, rec.score2, len(rec.item1), len(rec.item2)))
        else:
            info.append(PairInfo(rec.pair_id, label, ctx, group, len1=len(rec.statement),
                                 kind="statement"))
    return info
