"""True/false statement CSV files (Geometry of Truth): single statements with a truth label.

Columns ``statement`` and ``label`` (1/true or 0/false); extra columns are ignored.
"""

from __future__ import annotations

from pathlib import Path

from ppairs_lens.data.fields import choice, text
from ppairs_lens.data.reading import PathLike, dataset_name, read_table, warn
from ppairs_lens.data.records import Dataset, Statement
from ppairs_lens.errors import DataError

__all__ = ["load_true_false_csv"]

_TRUE_FALSE = {"1": True, "0": False, "true": True, "false": False}


def load_true_false_csv(path: PathLike, *, name: str | None = None) -> Dataset:
    """Single statements with a truth label; extra columns are ignored.

    The same statement twice with the same label is kept (with a warning); with opposite
    labels it is an error, since one of them must be wrong.
    """
    p = Path(path)
    file = str(p)
    _, rows = read_table(p, ("statement", "label"))
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
        records.append(Statement(pair_id=f"row{row}", statement=statement, label=label))
    if repeats:
        warn(f"{file}: {repeats} statements repeat an earlier one (same label); kept")
    return Dataset(name=name or dataset_name(p), kind="statement", records=records,
                   aspect="true", item_name="statement", context_name="context", source=file,
                   extra={"format": "true-false", "repeated_statements": repeats})
