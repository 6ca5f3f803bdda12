"""Frozen records as JSON data and back: the one codec for what a study step hands the next.

A study's steps pass records (frozen dataclasses), never loose dicts or strings. Each step's
result is remembered as JSON (:class:`~ppairs_lens.io.step_cache.StepCache`):
:func:`record_data` writes a record (nested records, numpy arrays, tuples, mappings) as JSON
data, and :func:`record_from_data` rebuilds it from the type the step declares, so a reused
step hands on the same record type, with the same numbers, as a fresh one
(:meth:`ppairs_lens.io.study_runner.StudyRunner.step` reads the declared type from the step
function's return annotation).

A table's rows need not all have every column: a row record's field that this row does not
have holds :data:`ABSENT`, which :func:`record_data` leaves out (so the row's data has the
keys it had) and :func:`record_from_data` restores from the field's default.
:class:`StepRows` is a step's table as such rows (:func:`as_row` makes one from a row dict,
refusing a column its record lacks). A field whose JSON key cannot be a Python name
(``frac_abs_cos_above_0.7``) declares that key as ``field(metadata={JSON_KEY: "..."})``; the
codec writes and reads the field under it.
"""

from __future__ import annotations

import collections.abc as cabc
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass
from typing import Any

import numpy as np

from ppairs_lens.errors import PPairsError
from ppairs_lens.io.outputs import jsonable

__all__ = ["ABSENT", "Absent", "JSON_KEY", "StepRows", "as_row", "is_record_type",
           "record_data", "record_from_data"]

_SEQUENCES = (list, tuple, cabc.Sequence)
_MAPPINGS = (dict, cabc.Mapping, cabc.MutableMapping)


class Absent:
    """The type of :data:`ABSENT`, a column a row does not have (not a value: None is one)."""

    _one: Absent | None = None

    def __new__(cls) -> Absent:
        if cls._one is None:
            cls._one = super().__new__(cls)
        return cls._one

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"


#: A row record's field that this row does not have: left out of its data.
ABSENT = Absent()

#: The metadata key of a field whose JSON key differs from its name.
JSON_KEY = "json_key"


def _key(f) -> str:
    """The JSON key of the dataclass field ``f``."""
    return f.metadata.get(JSON_KEY, f.name)


def _by_name(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (keyed as :func:`record_data` writes ``cls``) keyed by field name."""
    names = {_key(f): f.name for f in fields(cls)}
    return {names.get(k, k): v for k, v in data.items()}


def record_data(obj: Any) -> Any:
    """``obj`` as JSON data: a record's fields by name (those holding :data:`ABSENT` left
    out), arrays as (nested) lists, tuples as lists, mapping keys as strings; a NaN stays a
    NaN (the step cache writes it as ``NaN``)."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return {_key(f): record_data(v) for f in fields(obj)
                if (v := getattr(obj, f.name)) is not ABSENT}
    if isinstance(obj, np.ndarray) and obj.ndim > 0:
        return obj.tolist()
    if isinstance(obj, cabc.Mapping):
        return {str(k): record_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [record_data(v) for v in obj]
    return jsonable(obj, keep_nan=True)


def is_record_type(hint: Any) -> bool:
    """Whether ``hint`` is a frozen dataclass."""
    params = getattr(hint, "__dataclass_params__", None)
    return isinstance(hint, type) and is_dataclass(hint) and bool(params and params.frozen)


def _is_array(hint: Any) -> bool:
    # jaxtyping's Float[np.ndarray, "n"] names the array type it annotates
    return hint is np.ndarray or getattr(hint, "array_type", None) is np.ndarray


def record_from_data(hint: Any, data: Any, where: str = "result") -> Any:
    """The value of type ``hint`` that :func:`record_data` wrote as ``data``: records rebuilt
    field by field from their annotations, lists back to tuples or arrays where declared.
    A field missing from the data takes its default (:data:`ABSENT` for a column the row
    does not have). Data that does not fit is refused naming the field (``where``)."""
    if hint is None or hint is Any or hint is object:
        return data
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        # never ABSENT in data (an absent column is a missing key): no fallback to raw data
        options = [a for a in args if a not in (type(None), Absent)]
        errors = []
        for a in options:
            try:
                return record_from_data(a, data, where)
            except (PPairsError, TypeError, ValueError) as e:
                errors.append(str(e))
        raise PPairsError(f"{where}: fits none of {options} ({'; '.join(errors)})")
    if _is_array(hint):
        return np.asarray(data, dtype=np.float64 if "Float" in str(hint) else None)
    if is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(data, dict):
            raise PPairsError(f"{where}: expected an object for {hint.__name__}, got {data!r:.60}")
        hints = typing.get_type_hints(hint)
        data = _by_name(hint, data)
        known = {f.name for f in fields(hint)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise PPairsError(f"{where}: {hint.__name__} has no field(s) {unknown}")
        missing = sorted(f.name for f in fields(hint) if f.name not in data
                         and f.default is MISSING and f.default_factory is MISSING)
        if missing:
            raise PPairsError(f"{where}: {hint.__name__} needs field(s) {missing}")
        return hint(**{k: record_from_data(hints.get(k), v, f"{where}.{k}")
                       for k, v in data.items()})
    if origin in _MAPPINGS or hint in (dict, cabc.Mapping):
        if not isinstance(data, dict):
            raise PPairsError(f"{where}: expected an object, got {data!r:.60}")
        kh, vh = args if len(args) == 2 else (None, None)
        key = (lambda k: kh(k)) if kh in (int, float) else (lambda k: k)
        return {key(k): record_from_data(vh, v, f"{where}[{k!r}]") for k, v in data.items()}
    if origin in _SEQUENCES or hint in (list, tuple):
        if not isinstance(data, list):
            raise PPairsError(f"{where}: expected an array, got {data!r:.60}")
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            items = [record_from_data(a, v, f"{where}[{i}]")
                     for i, (a, v) in enumerate(zip(args, data))] if args else list(data)
        else:
            item = args[0] if args else None
            items = [record_from_data(item, v, f"{where}[{i}]") for i, v in enumerate(data)]
        return tuple(items) if origin is tuple or hint is tuple else items
    if hint is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    return data


def as_row(row_type: Any, row: Mapping[str, Any], where: str):
    """``row`` as ``row_type`` (or, for a union of row records, the one whose columns it
    has), refused naming the columns that fit no record."""
    options = typing.get_args(row_type) or (row_type,)
    for t in options:
        named = _by_name(t, row)
        known = {f.name for f in fields(t)}
        needed = {f.name for f in fields(t)
                  if f.default is MISSING and f.default_factory is MISSING}
        if set(named) <= known and needed <= set(named):
            return t(**named)
    names = " or ".join(t.__name__ for t in options)
    raise PPairsError(f"{where}: columns {sorted(row)} fit no {names}; add the new ones to "
                      "its row record")


@dataclass(frozen=True)
class StepRows:
    """A step's table, its rows in order (each subclass declares ``rows`` with its row
    record)."""

    rows: tuple = ()

    @classmethod
    def row_type(cls) -> type:
        return typing.get_args(typing.get_type_hints(cls)["rows"])[0]

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]):
        """The record of an analysis's row dicts (a column the row record lacks is refused)."""
        t = cls.row_type()
        return cls(rows=tuple(as_row(t, r, f"{cls.__name__} row {i}")
                              for i, r in enumerate(rows)))

    @classmethod
    def from_data(cls, data: list):
        """The record :meth:`data` wrote (``summary.json``'s section)."""
        return record_from_data(cls, {"rows": data}, cls.__name__)

    def data(self) -> list[dict]:
        """The rows as the summary writes them: each with the columns it has, in order."""
        return [record_data(r) for r in self.rows]
