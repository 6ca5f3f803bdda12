"""Checking one value of a parsed row: required text, present keys, labels, unique ids.

The format loaders read a row with :mod:`ppairs_lens.data.reading` and pass each value through
these checks, which either return it in the form the records want or raise a
:class:`DataError` at the value's (file, row, field).
"""

from __future__ import annotations

from typing import Any

from ppairs_lens.data.reading import kind_of
from ppairs_lens.data.records import ITEM1, ITEM2
from ppairs_lens.errors import DataError

__all__ = ["ITEM_LABELS", "choice", "get", "is_number", "text", "unique_text"]

#: A "which of two is better" label as written in a file (1 or 2) -> the record's label.
ITEM_LABELS: dict[str, int] = {"1": ITEM1, "2": ITEM2}


def text(value: Any, file: str, row: int, field: str, *, allow_empty: bool = False) -> str:
    """A required text field: must be a string, non-blank unless ``allow_empty``."""
    if not isinstance(value, str):
        raise DataError(f"expected text, got {kind_of(value)}", file=file, row=row, field=field)
    if not allow_empty and not value.strip():
        raise DataError("empty text", file=file, row=row, field=field)
    return value


def get(obj: dict[str, Any], key: str, file: str, row: int) -> Any:
    """The value of a required key of a JSON object."""
    if key not in obj:
        raise DataError(f"missing key '{key}'", file=file, row=row, field=key)
    return obj[key]


def choice(value: Any, allowed: dict[str, Any], file: str, row: int, field: str,
           what: str) -> Any:
    """Map a label-like value (string or int; not bool, not float) onto ``allowed``."""
    key = value.strip().lower() if isinstance(value, str) else (
        str(value) if isinstance(value, int) and not isinstance(value, bool) else None)
    if key is None or key not in allowed:
        raise DataError(f"{what}, got {value!r}", file=file, row=row, field=field)
    return allowed[key]


def unique_text(value: Any, seen: dict[str, int], file: str, row: int, field: str,
                what: str) -> str:
    """A required id (stripped text) that no earlier row used; records it in ``seen``
    (id -> row), since two rows with one id would be mixed up downstream."""
    key = text(value, file, row, field).strip()
    if key in seen:
        raise DataError(f"duplicate {what} {key!r} (first at row {seen[key]})", file=file,
                        row=row, field=field)
    seen[key] = row
    return key


def is_number(value: Any) -> bool:
    """An int or float as JSON gives it (a bool is not a number here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
