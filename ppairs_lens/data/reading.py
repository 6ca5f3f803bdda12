"""Reading a data file into rows, with every problem placed at (file, row, field).

Bytes are decoded as UTF-8 one line at a time, then parsed as JSON, JSONL or CSV/TSV. Every
problem is a :class:`DataError` naming the file, the 1-based row (line, or JSON list index + 1)
and where it can be told the field, so the user can open the file at that spot; no raw
``KeyError``/``ValueError``/``JSONDecodeError`` leaks out. Oddities that leave the file usable
are a :class:`DataWarning`. The format loaders pass each value through the checks at the end
of this module, which return it in the records' form or raise at its (file, row, field).
"""

from __future__ import annotations

import csv
import json
import os
import re
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ppairs_lens.data.records import ITEM1, ITEM2
from ppairs_lens.errors import DataError

__all__ = ["ITEM_LABELS", "DataWarning", "PathLike", "check_width", "choice", "dataset_name",
           "get", "is_number", "kind_of", "read_delimited", "read_json_document", "read_jsonl",
           "read_table", "split_header", "text", "unique_text", "warn"]

#: What the loaders accept as a file name.
PathLike = str | os.PathLike[str]


class DataWarning(UserWarning):
    """Something in a dataset file is odd but loading can go on (the message says what)."""


def warn(message: str) -> None:
    """A :class:`DataWarning` attributed to the caller of the loader that found it."""
    warnings.warn(message, DataWarning, stacklevel=3)


def dataset_name(path: Path) -> str:
    """A dataset name from its path; 'dataset.json' is uninformative, so use its folder."""
    return path.parent.name if path.stem in {"dataset", "data", "test", "dev", "train"} \
        and path.parent.name else path.stem


def kind_of(value: Any) -> str:
    """How a parsed JSON value is described in an error message."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


#: Given a raw line, the byte offset of a problem and the lines decoded before it, the field
#: the offset falls in (None when unknown).
_FieldAt = Callable[[bytes, int, Sequence[str]], "str | None"]

_JSON_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')


def _json_key_before(text: str, pos: int) -> str | None:
    """The last object key before ``pos``: the field a JSON error or bad byte sits in."""
    keys = _JSON_KEY.findall(text[:pos])
    return keys[-1] if keys else None


def _jsonl_field_at(raw: bytes, pos: int, _previous: Sequence[str]) -> str | None:
    return _json_key_before(raw[:pos].decode("utf-8", "replace"), pos)


def _delimited_field_at(delimiter: str, columns: Sequence[str] | None,
                        quoted: bool) -> _FieldAt:
    """A byte offset's column name, from the header (line 1) or fixed ``columns``."""
    def field_at(raw: bytes, pos: int, previous: Sequence[str]) -> str | None:
        names = columns
        if names is None:
            if not previous:
                return None
            names = split_header(previous[0], delimiter, quoted)
        head = raw[:pos].decode("utf-8", "replace")
        index = head.count(delimiter)
        if quoted:
            try:
                index = len(next(csv.reader([head], delimiter=delimiter))) - 1
            except (csv.Error, StopIteration):
                pass
        return names[index] if 0 <= index < len(names) else f"column {index + 1}"
    return field_at


def split_header(line: str, delimiter: str, quoted: bool) -> list[str]:
    """The column names of a header line (falling back to a plain split if quoting is off)."""
    if quoted:
        try:
            return [c.strip() for c in next(csv.reader([line], delimiter=delimiter))]
        except (csv.Error, StopIteration):
            pass
    return [c.strip() for c in line.rstrip("\r\n").split(delimiter)]


def _split_lines(data: bytes) -> list[bytes]:
    """Lines ending in b"\n" (kept). A bare carriage return is not a line break: it may sit
    inside a quoted CSV field, and CRLF endings are stripped where values are read."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    return lines + [parts[-1]] if parts[-1] else lines


def _read_bytes(path: Path) -> bytes:
    file = str(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError("no such file", file=file) from None
    except IsADirectoryError:
        raise DataError("is a directory, expected a data file", file=file) from None
    except OSError as e:
        raise DataError(f"cannot read the file ({e.strerror or e})", file=file) from None


def _bad_utf8(raw: bytes, pos: int) -> str:
    return (f"not valid UTF-8: byte 0x{raw[pos]:02x} at byte {pos + 1} of the line (re-save "
            "the file as UTF-8)")


def _read_lines(path: Path, field_at: _FieldAt | None = None) -> list[str]:
    """The file decoded line by line, so a bad byte is reported at its line and field (UTF-8
    never uses the newline byte inside a character); a leading byte-order mark dropped."""
    lines: list[str] = []
    for lineno, raw in enumerate(_split_lines(_read_bytes(path)), 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            field = field_at(raw, e.start, lines) if field_at else None
            raise DataError(_bad_utf8(raw, e.start), file=str(path), row=lineno,
                            field=field) from None
        lines.append(text.removeprefix("\ufeff") if lineno == 1 else text)
    if not any(line.strip() for line in lines):
        raise DataError("the file is empty", file=str(path), row=1)
    return lines


_SURROGATE = re.compile("[\udc80-\udcff]")


def _with_bad_bytes(value: Any) -> bool:
    """Whether a parsed JSON value holds undecodable bytes (as surrogate escapes)."""
    if isinstance(value, str):
        return bool(_SURROGATE.search(value))
    if isinstance(value, list):
        return any(map(_with_bad_bytes, value))
    if isinstance(value, dict):
        return any(_with_bad_bytes(k) or _with_bad_bytes(v) for k, v in value.items())
    return False


def read_json_document(path: Path) -> Any:
    """A whole JSON file; a bad byte in a list element is reported at its row and key."""
    file = str(path)
    data = _read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_start = data.rfind(b"\n", 0, e.start) + 1
        line = data[line_start:].split(b"\n", 1)[0]
        lineno = data.count(b"\n", 0, e.start) + 1
        escaped = data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
        try:
            parsed = json.loads(escaped)
        except (ValueError, RecursionError):
            parsed = None
        for row, obj in enumerate(parsed if isinstance(parsed, list) else [], 1):
            items = obj.items() if isinstance(obj, dict) else [(None, obj)]
            for key, value in items:
                if _with_bad_bytes(key) or _with_bad_bytes(value):
                    raise DataError(f"{_bad_utf8(line, e.start - line_start)}, line {lineno}",
                                    file=file, row=row, field=key) from None
        raise DataError(_bad_utf8(line, e.start - line_start), file=file, row=lineno,
                        field=_jsonl_field_at(line, e.start - line_start, [])) from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise DataError("the file is empty", file=file, row=1)
    return _parse_json(text, file, None)


class _DuplicateKey(Exception):
    """An object has the key ``args[0]`` twice (the last would silently win)."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _parse_json(text: str, file: str, row: int | None, *, line_offset: int = 0) -> Any:
    """Parse JSON, turning every parse failure into a DataError at its line and key."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as e:
        where = row if row is not None else e.lineno + line_offset
        raise DataError(f"invalid JSON: {e.msg} (line {e.lineno + line_offset}, column "
                        f"{e.colno})", file=file, row=where,
                        field=_json_key_before(text, e.pos)) from None
    except _DuplicateKey as e:
        raise DataError("the same key appears twice in one object", file=file, row=row,
                        field=e.args[0]) from None
    except RecursionError:
        raise DataError("JSON nested too deeply", file=file, row=row) from None


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; each line must be one JSON object."""
    file = str(path)
    rows: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in enumerate(_read_lines(path, _jsonl_field_at), 1):
        if not line.strip():
            continue
        obj = _parse_json(line, file, lineno)
        if not isinstance(obj, dict):
            raise DataError(f"expected a JSON object on each line, got {kind_of(obj)}",
                            file=file, row=lineno)
        rows.append((lineno, obj))
    return rows


def read_delimited(path: Path, *, delimiter: str, quoted: bool,
                    columns: Sequence[str] | None = None) -> list[tuple[int, list[str]]]:
    """(first line of the record, values) for each non-blank record.

    ``quoted`` uses the csv module (quoted fields may span lines); otherwise lines are split
    as they are (TSV files here are not quoted and contain stray quote characters).
    ``columns`` names a headerless file's fields in errors.
    """
    file = str(path)
    lines = _read_lines(path, _delimited_field_at(delimiter, columns, quoted))
    records: list[tuple[int, list[str]]] = []
    if not quoted:
        for lineno, line in enumerate(lines, 1):
            if line.strip():
                records.append((lineno, line.rstrip("\r\n").split(delimiter)))
        return records
    reader = csv.reader(lines, delimiter=delimiter, strict=True)
    start = 1
    while True:
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            raise DataError(f"malformed CSV: {e}", file=file, row=start) from None
        if values and any(v.strip() for v in values):
            records.append((start, values))
        start = reader.line_num + 1
    return records


def read_table(path: Path, required: Sequence[str], *, delimiter: str = ",",
                quoted: bool = True) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header plus one dict per data row; required columns and each row's width checked
    (extra columns are fine)."""
    file = str(path)
    records = read_delimited(path, delimiter=delimiter, quoted=quoted)
    if not records:
        raise DataError("the file has only empty values, no header", file=file, row=1)
    header_line, header = records[0]
    header = [h.strip() for h in header]
    for name in required:
        if name not in header:
            raise DataError(f"missing required column '{name}' (header has: "
                            f"{', '.join(header)})", file=file, row=header_line, field=name)
    repeated = [h for h, c in Counter(header).items() if c > 1 and h]
    if repeated:
        raise DataError("column appears twice in the header", file=file, row=header_line,
                        field=repeated[0])
    if len(records) < 2:
        raise DataError("no data rows after the header", file=file, row=header_line + 1)
    for row, values in records[1:]:
        check_width(values, header, file, row)
    return header, [(row, dict(zip(header, values))) for row, values in records[1:]]


def check_width(values: Sequence[str], columns: Sequence[str], file: str, row: int) -> None:
    """A row must have one value per column, else its values would land in the wrong ones."""
    if len(values) < len(columns):
        raise DataError(f"row has {len(values)} values but {len(columns)} columns are expected; "
                        f"'{columns[len(values)]}' and after are missing", file=file, row=row,
                        field=columns[len(values)])
    if len(values) > len(columns):
        raise DataError(f"row has {len(values)} values, more than the {len(columns)} columns "
                        "(a stray delimiter or unbalanced quote?)", file=file, row=row,
                        field=f"column {len(columns) + 1}")


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
