"""Frozen records as JSON data and back: what a study step hands the next.

A study's steps pass frozen dataclasses, remembered as JSON
(:class:`~ppairs_lens.io.step_cache.StepCache`) and rebuilt from the type the step declares, so a
reused step hands on the same record, with the same numbers, as a fresh one. Both directions
are one `cattrs <https://catt.rs>`_ converter (:data:`CONVERTER`); ours is only what JSON lacks:

* a table row's field that this row does not have holds :data:`ABSENT`, left out of the row's
  data and restored from the field's default;
* a field whose JSON key cannot be a Python name (``frac_abs_cos_above_0.7``) declares that
  key as ``field(metadata={JSON_KEY: "..."})``;
* JSON's own values are kept (an int where a float is declared becomes one, a null there is
  the NaN ``summary.json`` wrote as null); another type is refused, never coerced; numpy arrays
  are lists; a mapping's int keys, strings in JSON, are ints again.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import cattrs
import cattrs.v
import numpy as np
from cattrs.gen import make_dict_structure_fn, override

from ppairs_lens.errors import DataError, PPairsError
from ppairs_lens.io.outputs import jsonable

__all__ = ["ABSENT", "Absent", "CONVERTER", "JSON_KEY", "StepRows", "is_record_type",
           "record_data", "record_from_data", "rows_from_csv"]


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

_PRIMITIVES = (str, int, float, bool)


def _key(f) -> str:
    return f.metadata.get(JSON_KEY, f.name)


def _is_array(hint: Any) -> bool:
    # jaxtyping's Float[np.ndarray, "n"] names the array type it annotates
    return hint is np.ndarray or getattr(hint, "array_type", None) is np.ndarray


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _own_union(hint: Any) -> bool:
    """A union cattrs leaves to us: one with :class:`Absent`, or of JSON's own values."""
    if not _is_union(hint):
        return False
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return Absent in args or all(a in _PRIMITIVES for a in args)


def _object(v: Any, what: str = "an object") -> Mapping:
    if not isinstance(v, Mapping):
        raise TypeError(f"expected {what}, got {type(v).__name__}")
    return v


def _int_key(k: Any) -> int:
    if type(k) is int:
        return k
    if isinstance(k, str) and k.strip() == k:
        try:
            return int(k)
        except ValueError:
            pass
    raise ValueError(f"expected integer keys, got {k!r:.40}")


def _primitive(v: Any, types_: tuple[type, ...]) -> Any:
    """``v`` where it is one of ``types_`` (an int as a float where a float is declared, a
    numpy scalar as its Python value), else refused."""
    if isinstance(v, np.generic):
        v = v.item()
    if type(v) is int and float in types_ and int not in types_:
        return float(v)
    if v is None and float in types_:   # summary.json writes a NaN as null
        return math.nan
    if type(v) in types_ or (type(v) is int and float in types_):
        return v
    names = " or ".join(t.__name__ for t in types_)
    raise TypeError(f"expected {names}, got {type(v).__name__} {v!r:.40}")


def _converter() -> cattrs.Converter:
    c = cattrs.Converter(forbid_extra_keys=True)
    for t in (str, int, bool, float):
        c.register_structure_hook(t, lambda v, t: _primitive(v, (t,)))
    c.register_structure_hook_func(
        _is_array, lambda v, t: np.asarray(v, dtype=np.float64 if "Float" in str(t) else None))

    def union(v: Any, hint: Any) -> Any:
        args = [a for a in typing.get_args(hint) if a is not Absent]  # never in data
        if v is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        if all(a in _PRIMITIVES for a in rest):
            return _primitive(v, tuple(rest))
        return c.structure(v, rest[0] if len(rest) == 1 else typing.Union[tuple(rest)])
    c.register_structure_hook_func(_own_union, union)

    def structure_record(cls: type):   # a field's JSON key where it has its own
        build = make_dict_structure_fn(cls, c, _cattrs_forbid_extra_keys=True, **{
            f.name: override(rename=_key(f)) for f in fields(cls) if JSON_KEY in f.metadata})

        return lambda v, t: build(_object(v, f"an object of {cls.__name__}'s fields"), t)
    c.register_structure_hook_factory(lambda t: isinstance(t, type) and is_dataclass(t),
                                      structure_record)

    def mapping(hint: Any):
        """A mapping with int keys: JSON wrote them as strings."""
        value = typing.get_args(hint)[1]
        return lambda v, _: {_int_key(k): c.structure(x, value) for k, x in _object(v).items()}
    c.register_structure_hook_factory(
        lambda t: typing.get_origin(t) in (dict, Mapping) and typing.get_args(t)[:1] == (int,),
        mapping)

    def unstructure(obj: Any) -> Any:
        if is_dataclass(obj) and not isinstance(obj, type):
            return {_key(f): unstructure(v) for f in fields(obj)
                    if (v := getattr(obj, f.name)) is not ABSENT}
        if isinstance(obj, np.ndarray) and obj.ndim > 0:
            return obj.tolist()
        if isinstance(obj, Mapping):
            return {str(k): unstructure(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [unstructure(v) for v in obj]
        return jsonable(obj, keep_nan=True)
    c.register_unstructure_hook_func(lambda t: True, unstructure)
    return c


CONVERTER = _converter()


def record_data(obj: Any) -> Any:
    """``obj`` as JSON data (fields holding :data:`ABSENT` left out; a NaN stays a NaN)."""
    return CONVERTER.unstructure(obj)


def is_record_type(hint: Any) -> bool:
    params = getattr(hint, "__dataclass_params__", None)
    return isinstance(hint, type) and is_dataclass(hint) and bool(params and params.frozen)


def record_from_data(hint: Any, data: Any, where: str = "result") -> Any:
    """The value of type ``hint`` that :func:`record_data` wrote as ``data`` (a missing field at
    its default); data that does not fit is refused in one line naming the field (``where``)."""
    if hint is None or hint is Any or hint is object:
        return data
    try:
        return CONVERTER.structure(data, hint)
    except (cattrs.BaseValidationError, cattrs.StructureHandlerNotFoundError, TypeError,
            ValueError, KeyError, AttributeError) as e:
        said = (cattrs.transform_error(e, path=where, format_exception=_said)
                if isinstance(e, cattrs.BaseValidationError) else [f"{e} @ {where}"])
        said = [": ".join(reversed(m.rsplit(" @ ", 1))) for m in said]  # "field: what"
        more = f" (and {len(said) - 3} more)" if len(said) > 3 else ""
        raise PPairsError("; ".join(said[:3]) + more) from None


def _cell(text: str, hint: Any) -> Any:
    """A CSV cell as ``hint`` declares it. An empty cell is None, else :data:`ABSENT`, else a
    NaN, as the field allows (each is written empty, so a NaN or empty text in a field the row
    may lack reads back as ABSENT)."""
    args = set(typing.get_args(hint)) if _is_union(hint) else {hint}
    if text == "":
        if type(None) in args:
            return None
        if Absent in args:
            return ABSENT
        if float in args:
            return math.nan
    for t in (bool, int, float, str):
        if t in args:
            if t is bool and text in ("True", "False"):
                return text == "True"
            if t is not bool:
                return t(text)
    raise ValueError(f"expected {hint}, got {text!r}")


def rows_from_csv(row_type: type, path) -> list[dict]:
    """A CSV table written from ``row_type`` records, as their data for
    :func:`record_from_data`; what does not fit is refused naming file, row and field."""
    import csv

    hints = typing.get_type_hints(row_type)
    out = []
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            for i, r in enumerate(csv.DictReader(fh), 2):
                row = {}
                for f in fields(row_type):
                    if _key(f) not in r:
                        if f.default is ABSENT:
                            continue
                        raise DataError("column missing", file=str(path), row=i, field=_key(f))
                    try:
                        value = _cell(r[_key(f)], hints[f.name])
                    except ValueError as e:
                        raise DataError(str(e), file=str(path), row=i, field=_key(f)) from None
                    if value is not ABSENT:
                        row[_key(f)] = value
                out.append(row)
    except OSError as e:
        raise DataError(f"cannot read: {e}", file=str(path)) from None
    return out


def _said(exc: BaseException, hint: Any) -> str:
    """What was wrong with one value: our own messages as written, else cattrs' wording."""
    if isinstance(exc, (TypeError, ValueError)) and exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return cattrs.v.format_exception(exc, hint)


@dataclass(frozen=True)
class StepRows:
    """A step's table, its rows in order (a subclass declares ``rows`` with its row record)."""

    rows: tuple = ()

    @classmethod
    def row_type(cls) -> type:
        return typing.get_args(typing.get_type_hints(cls)["rows"])[0]

    @classmethod
    def from_data(cls, data: list):
        return record_from_data(cls, {"rows": data}, cls.__name__)

    @classmethod
    def read_csv(cls, path):
        """The record whose :meth:`table` was written to ``path``; one row record only (which
        kind a row of several was cannot be told from its cells)."""
        if _is_union(cls.row_type()):
            raise PPairsError(f"{cls.__name__} holds rows of several kinds: its CSV cannot be "
                              "read back into them")
        return cls.from_data(rows_from_csv(cls.row_type(), path))

    def data(self) -> list[dict]:
        return [record_data(r) for r in self.rows]

    def table(self) -> list[dict]:
        """The step's CSV: every column some row has, in row-record order."""
        rows = self.data()
        have = {k for r in rows for k in r}
        cols = [c for t in typing.get_args(self.row_type()) or (self.row_type(),)
                for c in map(_key, fields(t)) if c in have]
        cols = list(dict.fromkeys(cols))
        return [{c: r.get(c) for c in cols} for r in rows]
