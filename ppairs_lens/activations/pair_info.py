"""What a store keeps per pair besides its activations: one :class:`PairInfo` per line of
``pairs.jsonl``, which analyses read without the model (splits need the ids and leak groups,
the no-model baselines the item ids and text lengths, a rank correlation the gold scores).
Typed, so that a misspelt field fails where it is written, not as a ``KeyError`` deep in an
analysis.

The JSON keys are exactly those the harvest writes, in its order (a store's fingerprint is a
digest of ``pairs.jsonl``'s bytes): a comparison ``pair_id, label, context_id, group_id,
item1_id, item2_id, score1, score2, len1, len2``; a statement has no item or score keys, and
``len2`` null. A store's line without ``group_id`` or the lengths is refused
(:meth:`ppairs_lens.activations.store.ActivationStore.pairs`); a record built in code may
leave them None, written as null (so that its store reads back).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ppairs_lens.data.records import Comparison, Dataset

__all__ = ["PairInfo", "pair_info"]

#: The keys only a comparison's line carries (a statement has no items).
_ITEM_KEYS = ("item1_id", "item2_id", "score1", "score2")


@dataclass(frozen=True)
class PairInfo:
    """One pair of a store, as ``pairs.jsonl`` holds it."""

    # Identity and target: which record this is (the dataset's ``pair_id``, checked against
    # the records when an analysis re-runs the model) and its label (1, 2, or 0 for a tie).
    pair_id: str
    label: int
    # Leak units: pairs sharing a context share a prompt prefix; pairs sharing a group stay on
    # one side of every split. ``group_id`` None (a record built in code without one): the
    # context, as :meth:`ppairs_lens.data.records.Dataset.group_ids` falls back.
    context_id: str | None = None
    group_id: str | None = None
    # The two items (comparisons only; None for statements and for unnamed items): ids the
    # memorisation baseline and a split by item key on, gold scores for rank correlations.
    item1_id: str | None = None
    item2_id: str | None = None
    score1: float | None = None
    score2: float | None = None
    # Character lengths of the two items (a statement's length and None), for the length
    # baseline; None in a record built in code without them.
    len1: int | None = None
    len2: int | None = None
    # Not a JSON key: it says whether the line carries the item keys (a statement's does not).
    kind: Literal["comparison", "statement"] = "comparison"

    @property
    def group(self) -> str:
        """The leak group a split keeps whole: ``group_id``, else the context, else the pair
        itself (the fallbacks of :meth:`~ppairs_lens.data.records.Dataset.group_ids`)."""
        if self.group_id is not None:
            return self.group_id
        return self.context_id if self.context_id is not None else self.pair_id

    def to_json(self) -> dict[str, Any]:
        """The line's keys, in the order the harvest writes them (see the module's doc)."""
        out: dict[str, Any] = {"pair_id": self.pair_id, "label": self.label,
                               "context_id": self.context_id, "group_id": self.group_id}
        if self.kind == "comparison":
            out.update({k: getattr(self, k) for k in _ITEM_KEYS})
        return {**out, "len1": self.len1, "len2": self.len2}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> PairInfo:
        """A line of ``pairs.jsonl``; a line with item keys is a comparison."""
        known = {k: row[k] for k in ("pair_id", "label", "context_id", "group_id",
                                     *_ITEM_KEYS, "len1", "len2") if k in row}
        return cls(**known, kind="comparison" if "item1_id" in row else "statement")


def pair_info(dataset: Dataset) -> list[PairInfo]:
    """The :class:`PairInfo` of every record of ``dataset``."""
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
