"""Hugging Face ``datasets.Dataset`` objects (or any sequence of dict rows) as records.

The named columns of each row go through the file loaders' checks, so a bad value is reported
at its 1-based row and column (``file <hf imdb>, row 7, field 'label': ...``). ``datasets`` is
not imported: anything with ``len``, integer indexing to a dict and optionally
``column_names`` works.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ppairs_lens.data.reading import ITEM_LABELS, choice, text, unique_text
from ppairs_lens.data.records import Comparison, Dataset, Statement
from ppairs_lens.errors import DataError

__all__ = ["comparisons_from_hf", "statements_from_hf", "from_hf", "STATEMENT_LABELS", "hf_label"]

#: A truth label as a column may hold it -> the statement's label.
STATEMENT_LABELS: dict[str, bool] = {"1": True, "0": False, "true": True, "false": False}


def _source(ds: Any, name: str | None) -> str:
    info = getattr(ds, "info", None)
    return f"<hf {name or getattr(info, 'dataset_name', None) or 'dataset'}>"


def _check_columns(ds: Any, columns: Mapping[str, str | None], src: str) -> None:
    have = getattr(ds, "column_names", None)
    if have is None:
        return
    for role, col in columns.items():
        if col is not None and col not in have:
            raise DataError(f"no column {col!r} (the {role} column); columns: {list(have)}",
                            file=src, field=col)


def _rows(ds: Any, src: str):
    if len(ds) == 0:
        raise DataError("the dataset has no rows", file=src)
    for i in range(len(ds)):
        row = ds[i]
        if not isinstance(row, Mapping):
            raise DataError(f"expected a row of columns, got {type(row).__name__}", file=src,
                            row=i + 1)
        yield i + 1, row


def _optional_id(row: Mapping, col: str | None, src: str, r: int) -> str | None:
    if col is None:
        return None
    value = row[col]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    return text(value, src, r, col).strip()


def hf_label(value: Any, allowed: dict[str, Any], mapping: Mapping | None, src: str, r: int,
             col: str, what: str) -> Any:
    """A label through ``mapping`` (e.g. ``{0: 1, 1: 2}``) if given, then ``allowed``."""
    if mapping is not None:
        if value not in mapping:
            raise DataError(f"label {value!r} is not in label_map {dict(mapping)}", file=src,
                            row=r, field=col)
        value = mapping[value]
    if isinstance(value, bool) and True in allowed.values() and False in allowed.values():
        return value
    return choice(value, allowed, src, r, col, what)


def comparisons_from_hf(ds: Any, *, item1: str, item2: str, label: str = "label",
                        context: str | None = None, group: str | None = None,
                        id: str | None = None, label_map: Mapping | None = None,
                        name: str | None = None, **meta: Any) -> Dataset:
    """Comparisons from the columns ``item1``, ``item2``, ``label`` (1 or 2, or any values
    through ``label_map``), optional ``context`` (records with the same text share a context
    id), ``group`` (the leak group) and ``id`` (unique; default ``row<N>``). ``meta``: the
    :class:`Dataset` fields (aspect, item_name, context_name, aspect_description)."""
    src = _source(ds, name)
    _check_columns(ds, {"item1": item1, "item2": item2, "label": label, "context": context,
                        "group": group, "id": id}, src)
    records, seen, contexts = [], {}, {}
    for r, row in _rows(ds, src):
        pid = unique_text(str(row[id]) if id else f"row{r}", seen, src, r, id or "row", "id")
        ctx = text(row[context], src, r, context) if context else None
        cid = contexts.setdefault(ctx, f"ctx{len(contexts)}") if ctx is not None else None
        records.append(Comparison(
            pair_id=pid, item1=text(row[item1], src, r, item1),
            item2=text(row[item2], src, r, item2),
            label=hf_label(row[label], ITEM_LABELS, label_map, src, r, label,
                           "label must be 1 or 2 (the preferred item); pass label_map"),
            context=ctx, context_id=cid, group_id=_optional_id(row, group, src, r)))
    return Dataset(name=name or src.strip("<>").removeprefix("hf "), kind="comparison",
                   records=records, source=src, extra={"format": "hf"}, **meta)


def statements_from_hf(ds: Any, *, statement: str, label: str = "label",
                       group: str | None = None, context: str | None = None,
                       id: str | None = None, label_map: Mapping | None = None,
                       name: str | None = None, **meta: Any) -> Dataset:
    """Statements from the columns ``statement`` and ``label`` (true / false, 1 / 0, or any
    values through ``label_map``), optional ``group`` (leak group), ``context`` (its id column)
    and ``id``."""
    src = _source(ds, name)
    _check_columns(ds, {"statement": statement, "label": label, "group": group,
                        "context": context, "id": id}, src)
    records, seen = [], {}
    for r, row in _rows(ds, src):
        pid = unique_text(str(row[id]) if id else f"row{r}", seen, src, r, id or "row", "id")
        records.append(Statement(
            pair_id=pid, statement=text(row[statement], src, r, statement),
            label=hf_label(row[label], STATEMENT_LABELS, label_map, src, r, label,
                           "label must be true/false or 1/0; pass label_map"),
            context_id=_optional_id(row, context, src, r),
            group_id=_optional_id(row, group, src, r)))
    return Dataset(name=name or src.strip("<>").removeprefix("hf "), kind="statement",
                   records=records, source=src, extra={"format": "hf"}, **meta)


def from_hf(cls, ds: Any, *, item1: str | None = None, item2: str | None = None,
            statement: str | None = None, label: str = "label", **kw: Any) -> Dataset:
    """Comparisons (``item1=``, ``item2=``, ...: :func:`comparisons_from_hf`) or statements
    (``statement=``, ...: :func:`statements_from_hf`) from a Hugging Face dataset's columns."""
    if statement is not None:
        if item1 is not None or item2 is not None:
            raise TypeError("pass statement= or item1=/item2=, not both")
        return statements_from_hf(ds, statement=statement, label=label, **kw)
    if item1 is None or item2 is None:
        raise TypeError("from_hf needs item1= and item2= (comparisons) or statement=")
    return comparisons_from_hf(ds, item1=item1, item2=item2, label=label, **kw)


# Defined here, by the field checks (records.py imports no loader); ppairs_lens.data imports it.
Dataset.from_hf = classmethod(from_hf)
