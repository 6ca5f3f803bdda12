"""Plain records for the two kinds of data PPairS reads: pairwise comparisons and statements."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Literal

#: Label values of a comparison: item 1 is "more X", item 2 is, or neither (a tie).
ITEM1: int = 1
ITEM2: int = 2
TIE: int = 0


@dataclass(frozen=True)
class Comparison:
    """One pairwise comparison: which of ``item1`` / ``item2`` is more <aspect>.

    ``label`` is 1 (item 1 more <aspect>), 2 (item 2 more) or 0 (tie: kept in datasets, left
    out of probe fitting and scoring).
    ``context`` is the optional text both items refer to; comparisons with one ``context_id``
    share it (splits and prefix sharing rely on that). ``score1``/``score2`` are gold scores
    where the data has them (for ranking). ``group_id`` is the leak unit kept on one side of
    every split (None: :meth:`Dataset.group_ids`); it is last, so positional use keeps working.
    """

    pair_id: str
    item1: str
    item2: str
    label: int
    context: str | None = None
    context_id: str | None = None
    item1_id: str | None = None
    item2_id: str | None = None
    score1: float | None = None
    score2: float | None = None
    group_id: str | None = None


@dataclass(frozen=True)
class Statement:
    """A single statement with a truth label; becomes a contrast pair True vs False.

    ``group_id`` is its subject (a city, a number), so a true and a false statement about Paris
    are never split between train and test (None: the context, else the statement itself).
    """

    pair_id: str
    statement: str
    label: bool
    context_id: str | None = None
    group_id: str | None = None


@dataclass(frozen=True)
class ScoredItem:
    """One item with a gold score (SummEval summary, HANNA story, ClimateX statement);
    items of one ``context_id`` are compared, ``context`` None when they stand alone."""

    item_id: str
    text: str
    score: float
    context_id: str | None = None
    context: str | None = None
    split: str | None = None


Record = Comparison | Statement


@dataclass(frozen=True)
class Sampled:
    """What a seeded pair limit draws from: ``whole``'s records in the order whose prefixes
    every limit takes, ``file_order`` each one's place among them in the file's order."""

    whole: Dataset
    file_order: tuple[int, ...]
    seed: int
    per_context: int | None = None


@dataclass
class Dataset:
    """A named list of records of one kind, plus what the comparison asks about.

    ``aspect`` is the question's adjective ("coherent"), ``item_name`` what an item is
    ("summary"), ``context_name`` the shared context ("article"), ``aspect_description`` an
    optional definition (as in the paper's appendix). ``Dataset.from_hf`` is defined in
    :mod:`ppairs_lens.data.hf`.
    """

    name: str
    kind: Literal["comparison", "statement"]
    records: list[Comparison] | list[Statement]
    aspect: str = "better"
    item_name: str = "item"
    context_name: str = "context"
    aspect_description: str | None = None
    source: str | None = None
    extra: dict = field(default_factory=dict)
    #: Where a seeded pair limit drew this dataset from: that whole's store serves every limit.
    sampled_from: Sampled | None = field(default=None, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.records)

    def fingerprint(self) -> str:
        """A content hash: two datasets with the same records and question hash the same."""
        h = hashlib.sha256()
        head = {k: getattr(self, k) for k in
                ("kind", "aspect", "item_name", "context_name", "aspect_description")}
        h.update(json.dumps(head, sort_keys=True).encode())
        for r in self.records:
            h.update(json.dumps(asdict(r), sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]

    def labels(self) -> list[int]:
        """Labels as 1 / 2 / 0 (tie); a true statement counts as 1 (the 'True' side)."""
        if self.kind == "statement":
            return [ITEM1 if r.label else ITEM2 for r in self.records]
        return [r.label for r in self.records]

    def context_ids(self) -> list[str]:
        """The group each record belongs to (its context, else its own id)."""
        return [r.context_id if r.context_id is not None else r.pair_id for r in self.records]

    def group_ids(self) -> list[str]:
        """The leak unit of each record, kept on one side of every split: its ``group_id``,
        else its context, else its own id."""
        return [r.group_id if r.group_id is not None else ctx
                for r, ctx in zip(self.records, self.context_ids())]
