"""True/false statement CSV files (Geometry of Truth): single statements with a truth label.

Columns ``statement`` and ``label`` (1/true or 0/false); extra columns are ignored, except the
statement's subject, which becomes its ``group_id`` so that the true and the false statement
about a city are never split between train and test: the first of ``city`` (cities,
neg_cities), ``n1`` (larger_than, smaller_than), ``subject``, ``group`` the file has. A file
with none groups only repeated statements (``extra["group_by"]``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

from ppairs_lens.data.reading import PathLike, choice, dataset_name, read_table, text, warn
from ppairs_lens.data.records import Dataset, Statement
from ppairs_lens.errors import DataError

__all__ = ["SUBJECT_COLUMNS", "load_true_false_csv"]

_TRUE_FALSE = {"1": True, "0": False, "true": True, "false": False}
#: Columns naming a statement's subject, in order of preference.
SUBJECT_COLUMNS: tuple[str, ...] = ("city", "n1", "subject", "group")


def load_true_false_csv(path: PathLike, *, name: str | None = None) -> Dataset:
    """Statements with a truth label; a repeat is kept (warned, one group) with the same label,
    an error with the opposite one, since one of them must be wrong."""
    p = Path(path)
    file = str(p)
    header, rows = read_table(p, ("statement", "label"))
    group_by = next((c for c in SUBJECT_COLUMNS if c in header), None)
    records: list[Statement] = []
    seen: dict[str, tuple[int, bool]] = {}
    repeats = 0
    for row, values in rows:
        statement = text(values["statement"], file, row, "statement").strip()
        label = choice(values["label"], _TRUE_FALSE, file, row, "label",
                       "label must be 1 (true) or 0 (false)")
        if statement in seen:
            first_row, first_label = seen[statement]
            if first_label != label:
                raise DataError(f"the same statement is labelled {int(first_label)} at row "
                                f"{first_row} and {int(label)} here", file=file, row=row,
                                field="label")
            repeats += 1
        else:
            seen[statement] = (row, label)
        group = (f"{group_by}:{text(values[group_by], file, row, group_by).strip()}"
                 if group_by else None)
        records.append(Statement(pair_id=f"row{row}", statement=statement, label=label,
                                 group_id=group))
    if repeats:
        warn(f"{file}: {repeats} statements repeat an earlier one (same label); kept")
        if group_by is None:  # copies of one statement must not fall on both sides
            records = _group_repeats(records, seen)
    return Dataset(name=name or dataset_name(p), kind="statement", records=records,
                   aspect="true", item_name="statement", context_name="context", source=file,
                   extra={"format": "true-false", "repeated_statements": repeats,
                          "group_by": group_by or ("repeated statements" if repeats else None)})


def _group_repeats(records: list[Statement],
                   first: dict[str, tuple[int, bool]]) -> list[Statement]:
    """Statements that occur more than once get one group, named after their first row."""
    counts = Counter(r.statement for r in records)
    return [replace(r, group_id=f"statement:row{first[r.statement][0]}")
            if counts[r.statement] > 1 else r for r in records]
