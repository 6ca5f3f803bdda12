"""Loaders for the dataset formats PPairS reads, each turning a file into a :class:`Dataset`.

Every problem with an input file is reported as a :class:`DataError` naming the file, the
1-based row (line for JSONL/CSV/TSV, list index + 1 for a JSON list) and the field, so the user
can open the file at that spot. No raw ``KeyError``/``ValueError``/``JSONDecodeError`` leaks
out: a loader either returns well-formed records or says exactly what to fix.

Warnings (contexts with a single item, questions without both kinds of answer, repeated
statements) use :class:`DataWarning`; they do not stop loading because the rest of the file is
still usable.
"""

from __future__ import annotations

import csv
import hashlib
import inspect
import json
import math
import os
import random
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppairs_lens.errors import DataError
from ppairs_lens.data.records import ITEM1, ITEM2, TIE, Comparison, Dataset, ScoredItem, Statement
from ppairs_lens.data.builtin import BUILTIN, builtin_dataset

PathLike = str | os.PathLike[str]

__all__ = [
    "CLIMATEX_LEVELS", "FORMATS", "DataWarning", "PathLike", "comparisons_within_contexts",
    "load_climatex", "load_dataset", "load_mctaco", "load_pairwise_json", "load_scored_items",
    "load_story_cloze", "load_true_false_csv", "read_climatex", "read_scored_items",
    "scored_item_aspects", "sniff_format",
]


class DataWarning(UserWarning):
    """Something in a dataset file is odd but loading can go on (the message says what)."""


#: One line per supported format, for ``ppairs-lens datasets``.
FORMATS: dict[str, str] = {
    "scored-items": "JSONL, one scored item per line, compared within each context (SummEval, "
                    "HANNA): <context>_id, <item>_id, <context>, <item>, numeric aspects; "
                    "needs aspect=",
    "pairwise": "JSON list of {input, output_1, output_2, label 1|2} (LLMBar, MT-Bench): which "
                "output answers the instruction better",
    "story-cloze": "CSV with InputStoryid, InputSentence1-4, RandomFifthSentenceQuiz1/2, "
                   "AnswerRightEnding (Story Cloze): which ending is plausible",
    "mctaco": "TSV without header: sentence, question, answer, yes/no, category (MC-TACO): "
              "a plausible vs an implausible answer to one question",
    "true-false": "CSV with columns statement, label (1 true / 0 false), extra columns ignored "
                  "(Geometry of Truth): single true/false statements",
    "climatex": "TSV with header statement_idx, report, page_num, sent_num, statement, "
                "confidence, score (0-3), split (ClimateX): which statement has higher expert "
                "confidence",
    "builtin": "generated in code, no file: " + ", ".join(BUILTIN),
}

# --------------------------------------------------------------------------------------------
# Reading text safely
# --------------------------------------------------------------------------------------------

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
    """Map a byte offset to a column name, from the header (line 1) or fixed ``columns``."""
    def field_at(raw: bytes, pos: int, previous: Sequence[str]) -> str | None:
        names = columns
        if names is None:
            if not previous:
                return None
            names = _split_header(previous[0], delimiter, quoted)
        head = raw[:pos].decode("utf-8", "replace")
        if quoted:
            try:
                index = len(next(csv.reader([head], delimiter=delimiter))) - 1
            except (csv.Error, StopIteration):
                index = head.count(delimiter)
        else:
            index = head.count(delimiter)
        return names[index] if 0 <= index < len(names) else f"column {index + 1}"
    return field_at


def _split_header(line: str, delimiter: str, quoted: bool) -> list[str]:
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
    """Decode the file one line at a time so a bad byte is reported at its line and field.

    UTF-8 never uses the newline byte inside a multi-byte character, so splitting the raw
    bytes on newlines first is safe. A leading byte-order mark is dropped.
    """
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


def _read_json_document(path: Path) -> Any:
    """Parse a whole JSON file. A bad byte inside a list element is reported at that
    element's position (the row of a JSON list) and key, not just at a line."""
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
    """Raised inside json parsing: an object has the same key twice (the last would win)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


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
                        field=e.key) from None
    except RecursionError:
        raise DataError("JSON nested too deeply", file=file, row=row) from None


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; each line must be one JSON object."""
    file = str(path)
    rows: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in enumerate(_read_lines(path, _jsonl_field_at), 1):
        if not line.strip():
            continue
        obj = _parse_json(line, file, lineno)
        if not isinstance(obj, dict):
            raise DataError(f"expected a JSON object on each line, got {_kind(obj)}",
                            file=file, row=lineno)
        rows.append((lineno, obj))
    return rows


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _read_delimited(path: Path, *, delimiter: str, quoted: bool,
                    columns: Sequence[str] | None = None) -> list[tuple[int, list[str]]]:
    """(first line of the record, values) for each non-blank record.

    ``quoted`` uses the csv module (fields may be quoted and span lines); otherwise lines are
    split on the delimiter as they are (TSV files here are not quoted, and their text contains
    stray quote characters). ``columns`` names the fields of a headerless file for error
    messages.
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


def _read_table(path: Path, required: Sequence[str], *, delimiter: str = ",",
                quoted: bool = True) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header plus one dict per data row; checks required columns and each row's width.

    Extra columns in the header are fine (ignored by the caller); a row with fewer or more
    values than the header is an error, because its values would land in the wrong columns.
    """
    file = str(path)
    records = _read_delimited(path, delimiter=delimiter, quoted=quoted)
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
    rows: list[tuple[int, dict[str, str]]] = []
    for row, values in records[1:]:
        _check_width(values, header, file, row)
        rows.append((row, dict(zip(header, values))))
    return header, rows


def _check_width(values: Sequence[str], columns: Sequence[str], file: str, row: int) -> None:
    if len(values) < len(columns):
        raise DataError(f"row has {len(values)} values but {len(columns)} columns are expected; "
                        f"'{columns[len(values)]}' and after are missing", file=file, row=row,
                        field=columns[len(values)])
    if len(values) > len(columns):
        raise DataError(f"row has {len(values)} values, more than the {len(columns)} columns "
                        "(a stray delimiter or unbalanced quote?)", file=file, row=row,
                        field=f"column {len(columns) + 1}")


def _text(value: Any, file: str, row: int, field: str, *, allow_empty: bool = False) -> str:
    """A required text field: must be a string, non-blank unless ``allow_empty``."""
    if not isinstance(value, str):
        raise DataError(f"expected text, got {_kind(value)}", file=file, row=row, field=field)
    if not allow_empty and not value.strip():
        raise DataError("empty text", file=file, row=row, field=field)
    return value


def _get(obj: dict[str, Any], key: str, file: str, row: int) -> Any:
    if key not in obj:
        raise DataError(f"missing key '{key}'", file=file, row=row, field=key)
    return obj[key]


def _choice(value: Any, allowed: dict[str, Any], file: str, row: int, field: str,
            what: str) -> Any:
    """Map a label-like value (string or int; not bool, not float) onto ``allowed``."""
    key = value.strip().lower() if isinstance(value, str) else (
        str(value) if isinstance(value, int) and not isinstance(value, bool) else None)
    if key is None or key not in allowed:
        raise DataError(f"{what}, got {value!r}", file=file, row=row, field=field)
    return allowed[key]


def _name_of(path: Path) -> str:
    """A dataset name from its path; 'dataset.json' is uninformative, so use its folder."""
    return path.parent.name if path.stem in {"dataset", "data", "test", "dev", "train"} \
        and path.parent.name else path.stem


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def _coin(seed: int, key: str) -> bool:
    """A fair coin fixed by (seed, key): the same pair flips the same way whatever else
    is in the dataset, so sub-sampling does not reshuffle orientations."""
    return bool(hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=1).digest()[0] & 1)


def _warn(message: str) -> None:
    warnings.warn(message, DataWarning, stacklevel=3)


# --------------------------------------------------------------------------------------------
# Scored items (SummEval, HANNA, and files of the same shape)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _ScoredFields:
    """Which JSON keys hold what in a scored-items file."""

    item: str
    item_id: str | None
    context: str | None
    context_id: str | None
    aspects: tuple[str, ...]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _majority_keys(rows: Sequence[tuple[int, dict[str, Any]]]) -> list[str]:
    """Keys present in more than half the rows, in first-seen order: the file's schema,
    robust to a malformed row missing (or adding) a key."""
    counts: Counter[str] = Counter()
    for _, obj in rows:
        counts.update(obj.keys())
    return [k for k, c in counts.items() if 2 * c > len(rows)]


def _constancy(rows: Sequence[tuple[int, dict[str, Any]]], group: str, field: str) -> float:
    """Share of rows whose ``field`` equals the first value seen in their ``group``: 1.0 when
    the field is determined by the group (an article is the same for all its summaries)."""
    first: dict[str, Any] = {}
    same = total = 0
    for _, obj in rows:
        if group in obj and field in obj:
            g = str(obj[group])
            total += 1
            if g not in first:
                first[g] = obj[field]
                same += 1
            elif obj[field] == first[g]:
                same += 1
    return same / total if total else 0.0


def _repeats(rows: Sequence[tuple[int, dict[str, Any]]], key: str) -> bool:
    values = [str(obj[key]) for _, obj in rows if key in obj]
    return len(set(values)) < len(values)


def _stem(id_key: str) -> str:
    return id_key[:-3] if id_key.lower().endswith("_id") else id_key


def _detect_scored_fields(rows: Sequence[tuple[int, dict[str, Any]]], file: str, *,
                          aspect: str | None, context_field: str | None,
                          context_id_field: str | None, item_field: str | None,
                          item_id_field: str | None) -> _ScoredFields:
    """Work out which keys are the ids, the texts and the aspects.

    The context id is the ``*_id`` key whose values repeat and which determines a text field
    (SummEval's ``summary_id`` repeats too, S0-S15 in every article, but the summary text is
    not fixed by it, whereas the article is fixed by ``article_id``). Texts are matched to ids
    by name first (``article_id`` -> ``article``), then by behaviour. Explicit field arguments
    override detection.
    """
    keys = _majority_keys(rows)
    first_row = rows[0][0]
    for given in (context_field, context_id_field, item_field, item_id_field):
        if given is not None and not any(given in obj for _, obj in rows):
            raise DataError(f"no key '{given}' in any row (keys: {', '.join(keys)})",
                            file=file, row=first_row, field=given)
    id_keys = [k for k in keys if k.lower().endswith("_id") or k.lower() == "id"]
    given_ids = {k for k in (context_id_field, item_id_field) if k}
    text_keys = [k for k in keys if k not in id_keys and k != aspect and k not in given_ids
                 and sum(isinstance(obj.get(k), str) for _, obj in rows) * 2 > len(rows)]

    ctx_id = context_id_field
    if ctx_id is None:
        candidates = [k for k in id_keys if k != item_id_field and _repeats(rows, k)]
        if len(candidates) == 1:
            ctx_id = candidates[0]
        elif len(candidates) > 1:
            def score(k: str) -> float:
                # A same-named text ("doc" for "doc_id") decides; else any text it fixes.
                if _stem(k) in text_keys:
                    return _constancy(rows, k, _stem(k))
                pool = [t for t in text_keys if t != item_field]
                return max((_constancy(rows, k, t) for t in pool), default=0.0)
            ranked = sorted(candidates, key=score, reverse=True)
            if score(ranked[0]) <= 0.5 or score(ranked[0]) == score(ranked[1]):
                raise DataError(f"cannot tell which of {', '.join(candidates)} is the context "
                                "id; pass context_id_field=", file=file, row=first_row)
            ctx_id = ranked[0]

    ctx_text = context_field
    if ctx_text is None and ctx_id is not None:
        pool = [t for t in text_keys if t != item_field]
        if _stem(ctx_id) in pool and _constancy(rows, ctx_id, _stem(ctx_id)) > 0.5:
            ctx_text = _stem(ctx_id)
        else:
            scored = sorted(((_constancy(rows, ctx_id, t), t) for t in pool), reverse=True)
            if scored and scored[0][0] > 0.5 and (len(scored) == 1 or scored[0][0]
                                                   > scored[1][0]):
                ctx_text = scored[0][1]

    item_id = item_id_field
    if item_id is None:
        rest = [k for k in id_keys if k != ctx_id]
        named = [k for k in rest if _stem(k) in text_keys]
        if len(rest) == 1:
            item_id = rest[0]
        elif len(named) == 1:
            item_id = named[0]
        elif rest:
            raise DataError(f"cannot tell which of {', '.join(rest)} is the item id; pass "
                            "item_id_field=", file=file, row=first_row)

    item = item_field
    if item is None:
        pool = [t for t in text_keys if t != ctx_text]
        if item_id is not None and _stem(item_id) in pool:
            item = _stem(item_id)
        elif len(pool) == 1:
            item = pool[0]
        elif pool:
            # Several candidate texts: the item is the one that varies within a context and,
            # among those, the longest (metadata strings such as a system name are short).
            def length(t: str) -> float:
                values = [obj[t] for _, obj in rows if isinstance(obj.get(t), str)]
                return sum(map(len, values)) / max(len(values), 1)
            varying = [t for t in pool if ctx_id is None or _constancy(rows, ctx_id, t) < 1.0]
            item = max(varying or pool, key=length)
        else:
            raise DataError(f"no text field for the items (keys: {', '.join(keys)}); pass "
                            "item_field=", file=file, row=first_row)

    used = {item, item_id, ctx_text, ctx_id}
    aspects = tuple(k for k in keys if k not in used and k not in id_keys
                    and sum(_is_number(obj.get(k)) for _, obj in rows) * 2 > len(rows))
    return _ScoredFields(item=item, item_id=item_id, context=ctx_text, context_id=ctx_id,
                         aspects=aspects)


def _resolve_aspect(aspect: str, fields: _ScoredFields, rows: Sequence[tuple[int, dict]],
                    file: str) -> str:
    """The key holding ``aspect``; a case-insensitive match is accepted when unique."""
    if any(aspect in obj for _, obj in rows):
        if aspect in {fields.item, fields.item_id, fields.context, fields.context_id}:
            raise DataError(f"'{aspect}' is a text or id field, not a score; aspects "
                            f"available: {', '.join(fields.aspects) or 'none'}", file=file,
                            row=rows[0][0], field=aspect)
        return aspect
    folded = [a for a in fields.aspects if a.lower() == aspect.lower()]
    if len(folded) == 1:
        return folded[0]
    raise DataError(f"no aspect '{aspect}' in this file; aspects available: "
                    f"{', '.join(fields.aspects) or 'none (no numeric fields)'}",
                    file=file, row=rows[0][0], field=aspect)


def _score(value: Any, file: str, row: int, field: str) -> float:
    """A finite number; numeric strings are accepted (some exports quote numbers)."""
    number: float | None = None
    if _is_number(value):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None:
        raise DataError(f"score must be a number, got {value!r}", file=file, row=row,
                        field=field)
    if not math.isfinite(number):
        raise DataError(f"score must be finite, got {value!r}", file=file, row=row, field=field)
    return number


def _id(value: Any, file: str, row: int, field: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise DataError(f"id must be a non-empty string or integer, got {value!r}", file=file,
                        row=row, field=field)
    return str(value)


def _read_scored(path: PathLike, aspect: str, *, context_field: str | None,
                 context_id_field: str | None, item_field: str | None,
                 item_id_field: str | None) -> tuple[list[ScoredItem], _ScoredFields, str]:
    """Items, the detected fields, and the aspect key actually used."""
    p = Path(path)
    file = str(p)
    rows = _read_jsonl(p)
    fields = _detect_scored_fields(rows, file, aspect=aspect, context_field=context_field,
                                   context_id_field=context_id_field, item_field=item_field,
                                   item_id_field=item_id_field)
    key = _resolve_aspect(aspect, fields, rows, file)
    items: list[ScoredItem] = []
    context_of: dict[str, tuple[int, str | None]] = {}
    seen: dict[tuple[str | None, str], int] = {}
    for row, obj in rows:
        ctx_id = _id(_get(obj, fields.context_id, file, row), file, row, fields.context_id) \
            if fields.context_id else None
        ctx = _text(_get(obj, fields.context, file, row), file, row, fields.context) \
            if fields.context else None
        item_id = _id(_get(obj, fields.item_id, file, row), file, row, fields.item_id) \
            if fields.item_id else f"row{row}"
        text = _text(_get(obj, fields.item, file, row), file, row, fields.item)
        score = _score(_get(obj, key, file, row), file, row, key)
        if ctx_id is not None:
            earlier = context_of.setdefault(ctx_id, (row, ctx))
            if earlier[1] != ctx:
                raise DataError(f"{fields.context_id} {ctx_id!r} has a different text here than "
                                f"at row {earlier[0]}", file=file, row=row, field=fields.context)
        if (ctx_id, item_id) in seen:
            where = f" in {fields.context_id} {ctx_id!r}" if ctx_id is not None else ""
            raise DataError(f"duplicate {fields.item_id} {item_id!r}{where} (first at row "
                            f"{seen[(ctx_id, item_id)]})", file=file, row=row,
                            field=fields.item_id)
        seen[(ctx_id, item_id)] = row
        items.append(ScoredItem(item_id=item_id, text=text, score=score, context_id=ctx_id,
                                context=ctx))
    return items, fields, key


def read_scored_items(path: PathLike, aspect: str, *, context_field: str | None = None,
                      context_id_field: str | None = None, item_field: str | None = None,
                      item_id_field: str | None = None) -> list[ScoredItem]:
    """Items with their gold ``aspect`` score from a scored-items JSONL file.

    Field names are detected (see ``_detect_scored_fields``) so files of the same shape with
    other names load unchanged; pass them explicitly when detection cannot decide. A file
    without a repeating ``*_id`` key has no contexts: all its items form one group.
    """
    items, _, _ = _read_scored(path, aspect, context_field=context_field,
                               context_id_field=context_id_field, item_field=item_field,
                               item_id_field=item_id_field)
    return items


def comparisons_within_contexts(items: Iterable[ScoredItem], *,
                                max_pairs_per_context: int | None = None, seed: int = 0,
                                swap_seed: int | None = 0, source: str | None = None,
                                score_field: str | None = None) -> list[Comparison]:
    """Every unordered pair of items sharing a context, labelled by the higher score.

    Pairs are (i, j) with i before j in input order, ``pair_id`` ``"{context_id}:{id_i}|{id_j}"``
    (just ``"{id_i}|{id_j}"`` without context); the id names the unordered pair and does not
    change with the swap. Equal scores give ``TIE``.

    ``swap_seed`` (default 0): each pair's order is flipped by a coin fixed by (swap_seed,
    pair_id), so label 1 and 2 are about equally common whatever order the file lists items
    in (a file sorted by score would otherwise give only one label, which a probe can learn
    as a position bias). ``None`` keeps file order. ``max_pairs_per_context`` keeps a random
    (``seed``-fixed) subset of each context's pairs, in their original order.

    ``source``/``score_field`` only name the file and field in errors. Contexts with one item
    give no pairs (a :class:`DataWarning` with counts); no context with two items, or only
    ties, is a :class:`DataError`.
    """
    if max_pairs_per_context is not None and max_pairs_per_context < 1:
        raise DataError(f"max_pairs_per_context must be at least 1, got {max_pairs_per_context}",
                        file=source, field="max_pairs_per_context")
    groups: dict[str | None, list[ScoredItem]] = {}
    for item in items:
        groups.setdefault(item.context_id, []).append(item)
    if not groups:
        raise DataError("no items to compare", file=source)
    singles = [c for c, g in groups.items() if len(g) < 2]
    if len(singles) == len(groups):
        raise DataError(f"no context has two or more items, so there is nothing to compare "
                        f"({len(groups)} contexts of one item each)", file=source,
                        field="context_id")
    if singles:
        _warn(f"{source + ': ' if source else ''}{len(singles)} of {len(groups)} contexts have a "
              f"single item and give no comparisons (e.g. {', '.join(map(str, singles[:3]))})")
    out: list[Comparison] = []
    pair_ids: set[str] = set()
    for ctx, group in groups.items():
        ids = Counter(it.item_id for it in group)
        dup = next((i for i, c in ids.items() if c > 1), None)
        if dup is not None:
            raise DataError(f"item id {dup!r} appears {ids[dup]} times in context {ctx!r}",
                            file=source, field="item_id")
        pairs = [(i, j) for i in range(len(group)) for j in range(i + 1, len(group))]
        if max_pairs_per_context is not None and len(pairs) > max_pairs_per_context:
            pairs = sorted(random.Random(f"{seed}:{ctx}").sample(pairs, max_pairs_per_context))
        for i, j in pairs:
            a, b = group[i], group[j]
            pid = f"{a.item_id}|{b.item_id}" if ctx is None else f"{ctx}:{a.item_id}|{b.item_id}"
            if pid in pair_ids:
                raise DataError(f"pair id {pid!r} occurs twice (ids containing ':' or '|'?)",
                                file=source, field="item_id")
            pair_ids.add(pid)
            out.append(_compare(a, b, pid, ctx, group[0].context, swap_seed))
    if all(c.label == TIE for c in out):
        raise DataError(f"all {len(out)} pairs are ties (equal scores), nothing to learn from",
                        file=source, field=score_field or "score")
    return out


def _compare(a: ScoredItem, b: ScoredItem, pair_id: str, context_id: str | None,
             context: str | None, swap_seed: int | None) -> Comparison:
    """One comparison of two scored items, flipped by the (swap_seed, pair_id) coin."""
    if swap_seed is not None and _coin(swap_seed, pair_id):
        a, b = b, a
    label = ITEM1 if a.score > b.score else ITEM2 if b.score > a.score else TIE
    return Comparison(pair_id=pair_id, item1=a.text, item2=b.text, label=label, context=context,
                      context_id=context_id, item1_id=a.item_id, item2_id=b.item_id,
                      score1=a.score, score2=b.score)


#: (item name, aspect key) -> (adjective, definition). Definitions follow the SummEval and
#: HANNA annotation guidelines as quoted in the PPairS paper's appendix (shortened).
_ASPECTS: dict[tuple[str, str], tuple[str, str]] = {
    ("summary", "coherence"): ("coherent", "well-structured and well-organized: it builds from "
                               "sentence to sentence into a coherent body of information"),
    ("summary", "consistency"): ("consistent", "factually aligned with the article: it states "
                                 "only facts the article supports, nothing hallucinated"),
    ("summary", "fluency"): ("fluent", "well-written sentences free of grammar, spelling, "
                             "punctuation and formatting problems"),
    ("summary", "relevance"): ("relevant", "selects the important content of the article, "
                               "without redundancy or excess information"),
    ("story", "relevance"): ("relevant", "how well the story matches its prompt"),
    ("story", "coherence"): ("coherent", "how much the story makes sense"),
    ("story", "empathy"): ("empathetic", "how well the reader understands the characters' "
                           "emotions"),
    ("story", "surprise"): ("surprising", "how surprising the end of the story is"),
    ("story", "engagement"): ("engaging", "how much the reader engages with the story"),
    ("story", "complexity"): ("complex", "how elaborate the story is"),
}
_ADJECTIVES = {aspect: adj for (_, aspect), (adj, _) in _ASPECTS.items()}
_CONTEXT_NAMES = {"article": "article", "document": "document", "doc": "document",
                  "source": "source text", "passage": "passage", "prompt": "prompt"}


def _item_name(field: str) -> str:
    return field if field.isalpha() and field.islower() and field != "text" else "item"


def _context_name(field: str | None, item_name: str) -> str:
    if field is None:
        return "context"
    if field == "prompt" and item_name == "story":
        return "story prompt"
    return _CONTEXT_NAMES.get(field, field if field.isalpha() and field.islower() else "context")


def load_scored_items(path: PathLike, aspect: str, *, name: str | None = None,
                      context_field: str | None = None, context_id_field: str | None = None,
                      item_field: str | None = None, item_id_field: str | None = None,
                      max_pairs_per_context: int | None = None, seed: int = 0,
                      swap_seed: int | None = 0) -> Dataset:
    """A comparison dataset from a scored-items JSONL file: pairs within each context.

    See :func:`comparisons_within_contexts` for pairing, ties and the order swap; the
    dataset's ``aspect`` is the adjective ("coherent") and ``aspect_description`` the
    definition for the known SummEval/HANNA aspects.
    """
    p = Path(path)
    items, fields, key = _read_scored(p, aspect, context_field=context_field,
                                      context_id_field=context_id_field, item_field=item_field,
                                      item_id_field=item_id_field)
    records = comparisons_within_contexts(items, max_pairs_per_context=max_pairs_per_context,
                                          seed=seed, swap_seed=swap_seed, source=str(p),
                                          score_field=key)
    item_name = _item_name(fields.item)
    adjective, description = _ASPECTS.get((item_name, key.lower()),
                                          (_ADJECTIVES.get(key.lower(), key), None))
    labels = Counter(r.label for r in records)
    return Dataset(
        name=name or f"{_name_of(p)}-{key}", kind="comparison", records=records,
        aspect=adjective, item_name=item_name,
        context_name=_context_name(fields.context, item_name),
        aspect_description=description, source=str(p),
        extra={"format": "scored-items", "score_field": key, "n_items": len(items),
               "n_contexts": len({i.context_id for i in items}), "ties": labels[TIE],
               "fields": {"item": fields.item, "item_id": fields.item_id,
                          "context": fields.context, "context_id": fields.context_id},
               "aspects": list(fields.aspects)})


def scored_item_aspects(path: PathLike) -> list[str]:
    """The numeric fields of a scored-items file, i.e. the aspects it can be loaded on."""
    p = Path(path)
    rows = _read_jsonl(p)
    return list(_detect_scored_fields(rows, str(p), aspect=None, context_field=None,
                                      context_id_field=None, item_field=None,
                                      item_id_field=None).aspects)


# --------------------------------------------------------------------------------------------
# Pairwise JSON (LLMBar, MT-Bench)
# --------------------------------------------------------------------------------------------

_PAIRWISE_LABELS = {"1": ITEM1, "2": ITEM2}


def load_pairwise_json(path: PathLike, *, name: str | None = None, aspect: str = "helpful",
                       aspect_description: str | None = (
                           "follows the instruction precisely and answers it honestly and "
                           "helpfully")) -> Dataset:
    """Comparisons from a JSON list of ``{input, output_1, output_2, label}``.

    The instruction is the context; records with the same instruction share a context id
    (MT-Bench has several pairs per question), so splits keep them together and the
    harvester runs the instruction once. Rows in errors are list positions (1-based), except
    for JSON syntax errors, which can only be placed at a line.
    """
    p = Path(path)
    file = str(p)
    data = _read_json_document(p)
    if not isinstance(data, list):
        raise DataError(f"expected a JSON list of comparisons, got {_kind(data)}", file=file,
                        row=1)
    if not data:
        raise DataError("the JSON list is empty", file=file, row=1)
    records: list[Comparison] = []
    seen: dict[tuple[str, str, str], int] = {}
    for row, obj in enumerate(data, 1):
        if not isinstance(obj, dict):
            raise DataError(f"expected an object, got {_kind(obj)}", file=file, row=row)
        instruction = _text(_get(obj, "input", file, row), file, row, "input")
        out1 = _text(_get(obj, "output_1", file, row), file, row, "output_1", allow_empty=True)
        out2 = _text(_get(obj, "output_2", file, row), file, row, "output_2", allow_empty=True)
        label = _choice(_get(obj, "label", file, row), _PAIRWISE_LABELS, file, row, "label",
                        "label must be 1 or 2 (the better output)")
        key = (instruction, out1, out2)
        if key in seen:
            raise DataError(f"duplicate comparison: same input and outputs as row {seen[key]}",
                            file=file, row=row, field="input")
        seen[key] = row
        records.append(Comparison(pair_id=f"row{row}", item1=out1, item2=out2, label=label,
                                  context=instruction, context_id=f"in-{_short_hash(instruction)}",
                                  item1_id=f"row{row}/1", item2_id=f"row{row}/2"))
    return Dataset(name=name or _name_of(p), kind="comparison", records=records, aspect=aspect,
                   item_name="output", context_name="instruction",
                   aspect_description=aspect_description, source=file,
                   extra={"format": "pairwise"})


# --------------------------------------------------------------------------------------------
# Story Cloze
# --------------------------------------------------------------------------------------------

_CLOZE_SENTENCES = tuple(f"InputSentence{i}" for i in range(1, 5))
_CLOZE_COLUMNS = ("InputStoryid", *_CLOZE_SENTENCES, "RandomFifthSentenceQuiz1",
                  "RandomFifthSentenceQuiz2", "AnswerRightEnding")


def load_story_cloze(path: PathLike, *, name: str | None = None) -> Dataset:
    """Which of two endings fits a four-sentence story; the story is the context."""
    p = Path(path)
    file = str(p)
    _, rows = _read_table(p, _CLOZE_COLUMNS)
    records: list[Comparison] = []
    seen: dict[str, int] = {}
    for row, values in rows:
        story_id = _text(values["InputStoryid"], file, row, "InputStoryid").strip()
        if story_id in seen:
            raise DataError(f"duplicate story id {story_id!r} (first at row {seen[story_id]})",
                            file=file, row=row, field="InputStoryid")
        seen[story_id] = row
        story = " ".join(_text(values[c], file, row, c).strip() for c in _CLOZE_SENTENCES)
        end1 = _text(values["RandomFifthSentenceQuiz1"], file, row, "RandomFifthSentenceQuiz1")
        end2 = _text(values["RandomFifthSentenceQuiz2"], file, row, "RandomFifthSentenceQuiz2")
        label = _choice(values["AnswerRightEnding"], _PAIRWISE_LABELS, file, row,
                        "AnswerRightEnding", "AnswerRightEnding must be 1 or 2")
        records.append(Comparison(pair_id=story_id, item1=end1.strip(), item2=end2.strip(),
                                  label=label, context=story, context_id=story_id,
                                  item1_id=f"{story_id}/1", item2_id=f"{story_id}/2"))
    return Dataset(name=name or _name_of(p), kind="comparison", records=records,
                   aspect="plausible", item_name="ending", context_name="story",
                   aspect_description="the more sensible, coherent continuation of the story",
                   source=file, extra={"format": "story-cloze"})


# --------------------------------------------------------------------------------------------
# MC-TACO
# --------------------------------------------------------------------------------------------

_MCTACO_COLUMNS = ("sentence", "question", "answer", "label", "category")
_YES_NO = {"yes": True, "no": False}


def load_mctaco(path: PathLike, *, name: str | None = None, max_pairs_per_question: int = 3,
                seed: int = 0) -> Dataset:
    """Plausible vs implausible answers to one temporal question about a sentence.

    Each question has a few "yes" and more "no" answers; all yes x no pairs would weigh
    questions by answer count, so at most ``max_pairs_per_question`` pairs are drawn per
    question (seeded). Which answer is item 1 is a seeded coin per pair, balancing labels.
    Questions with only yes or only no answers give no pairs (a warning with counts).
    """
    if max_pairs_per_question < 1:
        raise DataError(f"max_pairs_per_question must be at least 1, got "
                        f"{max_pairs_per_question}", field="max_pairs_per_question")
    p = Path(path)
    file = str(p)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for row, values in _read_delimited(p, delimiter="\t", quoted=False, columns=_MCTACO_COLUMNS):
        _check_width(values, _MCTACO_COLUMNS, file, row)
        fields = dict(zip(_MCTACO_COLUMNS, values))
        for column in ("sentence", "question", "answer", "category"):
            _text(fields[column], file, row, column)
        plausible = _choice(fields["label"], _YES_NO, file, row, "label",
                            "label must be yes or no")
        group = groups.setdefault((fields["sentence"].strip(), fields["question"].strip()),
                                  {"row": row, "answers": {}, "yes": [], "no": []})
        answer = fields["answer"].strip()
        if answer in group["answers"]:
            raise DataError(f"answer {answer!r} appears twice for this question (first at row "
                            f"{group['answers'][answer]})", file=file, row=row, field="answer")
        group["answers"][answer] = row
        group["yes" if plausible else "no"].append((row, answer))
    records: list[Comparison] = []
    one_sided = 0
    for (sentence, question), group in groups.items():
        if not group["yes"] or not group["no"]:
            one_sided += 1
            continue
        ctx_id = f"q{group['row']}"
        rng = random.Random(f"{seed}:{sentence}\n{question}")
        pairs = [(y, n) for y in group["yes"] for n in group["no"]]
        if len(pairs) > max_pairs_per_question:
            pairs = sorted(rng.sample(pairs, max_pairs_per_question))
        for (yes_row, yes), (no_row, no) in pairs:
            yes_first = rng.random() < 0.5
            a, b = ((yes_row, yes), (no_row, no)) if yes_first else ((no_row, no), (yes_row, yes))
            records.append(Comparison(
                pair_id=f"{ctx_id}:{min(yes_row, no_row)}|{max(yes_row, no_row)}",
                item1=a[1], item2=b[1], label=ITEM1 if yes_first else ITEM2,
                context=f"{sentence}\nQuestion: {question}", context_id=ctx_id,
                item1_id=f"row{a[0]}", item2_id=f"row{b[0]}",
                score1=1.0 if yes_first else 0.0, score2=0.0 if yes_first else 1.0))
    if not records:
        raise DataError(f"no question has both a 'yes' and a 'no' answer ({len(groups)} "
                        "questions), so there is nothing to compare", file=file, field="label")
    if one_sided:
        _warn(f"{file}: {one_sided} of {len(groups)} questions have only 'yes' or only 'no' "
              "answers and give no comparisons")
    return Dataset(name=name or _name_of(p), kind="comparison", records=records,
                   aspect="plausible", item_name="answer", context_name="passage and question",
                   aspect_description="a sensible answer given common sense about time "
                   "(duration, order, frequency, typical time, stationarity)",
                   source=file, extra={"format": "mctaco", "n_questions": len(groups),
                                       "questions_without_pairs": one_sided})


# --------------------------------------------------------------------------------------------
# True/false statements (Geometry of Truth)
# --------------------------------------------------------------------------------------------

_TRUE_FALSE = {"1": True, "0": False, "true": True, "false": False}


def load_true_false_csv(path: PathLike, *, name: str | None = None) -> Dataset:
    """Single statements with a truth label; extra columns are ignored.

    The same statement twice with the same label is kept (with a warning); with opposite
    labels it is an error, since one of them must be wrong.
    """
    p = Path(path)
    file = str(p)
    _, rows = _read_table(p, ("statement", "label"))
    records: list[Statement] = []
    seen: dict[str, tuple[int, bool]] = {}
    repeats = 0
    for row, values in rows:
        statement = _text(values["statement"], file, row, "statement").strip()
        label = _choice(values["label"], _TRUE_FALSE, file, row, "label",
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
        _warn(f"{file}: {repeats} statements repeat an earlier one (same label); kept")
    return Dataset(name=name or _name_of(p), kind="statement", records=records, aspect="true",
                   item_name="statement", context_name="context", source=file,
                   extra={"format": "true-false", "repeated_statements": repeats})


# --------------------------------------------------------------------------------------------
# ClimateX
# --------------------------------------------------------------------------------------------

CLIMATEX_LEVELS: tuple[str, ...] = ("low", "medium", "high", "very high")
_CLIMATEX_COLUMNS = ("statement_idx", "statement", "confidence", "score", "split")


def read_climatex(path: PathLike) -> list[ScoredItem]:
    """IPCC statements with their expert confidence as a score 0-3 (low .. very high).

    ``confidence`` and ``score`` say the same thing twice; a disagreement means a corrupted
    row, so it is an error rather than a silent pick of one.
    """
    p = Path(path)
    file = str(p)
    _, rows = _read_table(p, _CLIMATEX_COLUMNS, delimiter="\t", quoted=False)
    levels = {str(i): i for i in range(len(CLIMATEX_LEVELS))}
    items: list[ScoredItem] = []
    seen: dict[str, int] = {}
    for row, values in rows:
        idx = _text(values["statement_idx"], file, row, "statement_idx").strip()
        if idx in seen:
            raise DataError(f"duplicate statement_idx {idx!r} (first at row {seen[idx]})",
                            file=file, row=row, field="statement_idx")
        seen[idx] = row
        text = _text(values["statement"], file, row, "statement").strip()
        score = _choice(values["score"], levels, file, row, "score",
                        "score must be an integer 0-3")
        confidence = values["confidence"].strip().lower()
        if confidence not in CLIMATEX_LEVELS:
            raise DataError(f"confidence must be one of {', '.join(CLIMATEX_LEVELS)}, got "
                            f"{values['confidence']!r}", file=file, row=row, field="confidence")
        if CLIMATEX_LEVELS.index(confidence) != score:
            raise DataError(f"confidence {confidence!r} does not match score {score} "
                            f"({CLIMATEX_LEVELS[score]!r})", file=file, row=row,
                            field="confidence")
        split = _text(values["split"], file, row, "split").strip()
        items.append(ScoredItem(item_id=idx, text=text, score=float(score), split=split))
    return items


def load_climatex(path: PathLike, split: str | None = "train", max_items: int | None = None,
                  seed: int = 0, *, max_pairs: int | None = 5000, swap_seed: int | None = 0,
                  name: str | None = None) -> Dataset:
    """Comparisons "which statement has the higher confidence" among ClimateX statements.

    ``split=None`` uses all rows. ``max_items`` first draws that many statements (seeded).
    All pairs of the train split would be ~30 million, so when the statements give more than
    ``max_pairs`` pairs, ``max_pairs`` distinct pairs are drawn at random (seeded); pass
    ``max_pairs=None`` for every pair. Equal confidences are ties (kept, as elsewhere).
    """
    p = Path(path)
    file = str(p)
    items = read_climatex(p)
    if split is not None:
        splits = sorted({i.split or "" for i in items})
        items = [i for i in items if i.split == split]
        if not items:
            raise DataError(f"no statements in split {split!r}; splits: {', '.join(splits)}",
                            file=file, field="split")
    rng = random.Random(seed)
    if max_items is not None:
        if max_items < 2:
            raise DataError(f"max_items must be at least 2, got {max_items}", file=file,
                            field="max_items")
        if max_items < len(items):
            items = [items[k] for k in sorted(rng.sample(range(len(items)), max_items))]
    n = len(items)
    if max_pairs is None or n * (n - 1) // 2 <= max_pairs:
        records = comparisons_within_contexts(items, swap_seed=swap_seed, source=file,
                                              score_field="score")
    else:
        chosen: set[tuple[int, int]] = set()
        while len(chosen) < max_pairs:
            i, j = rng.sample(range(n), 2)
            chosen.add((min(i, j), max(i, j)))
        records = _pairs_of(items, sorted(chosen), swap_seed, file)
    labels = Counter(r.label for r in records)
    return Dataset(name=name or f"climatex-{split or 'all'}", kind="comparison",
                   records=records, aspect="confident", item_name="statement",
                   context_name="context",
                   aspect_description="stated by IPCC authors with higher confidence "
                   "(low < medium < high < very high)", source=file,
                   extra={"format": "climatex", "split": split, "n_items": n,
                          "ties": labels[TIE]})


def _pairs_of(items: Sequence[ScoredItem], pairs: Sequence[tuple[int, int]],
              swap_seed: int | None, file: str) -> list[Comparison]:
    """Comparisons for chosen index pairs of context-free items (same rules as within
    contexts)."""
    out = [_compare(items[i], items[j], f"{items[i].item_id}|{items[j].item_id}", None, None,
                    swap_seed) for i, j in pairs]
    if all(c.label == TIE for c in out):
        raise DataError(f"all {len(out)} pairs are ties", file=file, field="score")
    return out


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------

_LOADERS: dict[str, Callable[..., Dataset]] = {
    "scored-items": load_scored_items,
    "pairwise": load_pairwise_json,
    "story-cloze": load_story_cloze,
    "mctaco": load_mctaco,
    "true-false": load_true_false_csv,
    "climatex": load_climatex,
}
_DATA_SUFFIXES = {".jsonl", ".ndjson", ".json", ".csv", ".tsv"}


def _first_line(path: Path) -> str:
    """The first non-blank line, leniently decoded: enough to sniff a format; the loader
    then reports any bad byte precisely."""
    try:
        with path.open("rb") as f:
            for raw in f:
                line = raw.decode("utf-8", "replace").removeprefix("\ufeff")
                if line.strip():
                    return line.rstrip("\r\n")
    except OSError as e:
        raise DataError(f"cannot read the file ({e.strerror or e})", file=str(path)) from None
    raise DataError("the file is empty", file=str(path), row=1)


def sniff_format(path: PathLike) -> str:
    """Which :data:`FORMATS` key a file is in, from its extension and first line."""
    p = Path(path)
    file = str(p)
    first = _first_line(p)
    suffix = p.suffix.lower()
    if suffix in {".jsonl", ".ndjson"}:
        return "scored-items"
    if suffix == ".json":
        return "pairwise"
    if suffix == ".csv":
        header = _split_header(first, ",", True)
        if "InputSentence1" in header:
            return "story-cloze"
        if "statement" in header and "label" in header:
            return "true-false"
        raise DataError(f"unknown CSV format (columns: {', '.join(header)}); expected Story "
                        "Cloze (InputSentence1..) or true/false (statement, label)", file=file,
                        row=1)
    if suffix in {".tsv", ".txt"}:
        columns = [c.strip() for c in first.split("\t")]
        if "confidence" in columns and "statement" in columns:
            return "climatex"
        if len(columns) == len(_MCTACO_COLUMNS):
            return "mctaco"
        raise DataError(f"unknown TSV format ({len(columns)} columns); expected ClimateX (a "
                        "header with statement, confidence, score, split) or MC-TACO (5 "
                        "columns, no header)", file=file, row=1)
    stripped = first.lstrip()
    if stripped.startswith("["):
        return "pairwise"
    if stripped.startswith("{"):
        return "scored-items"
    raise DataError(f"cannot tell the format of this file (extension {suffix or 'none'}); "
                    f"formats: {', '.join(k for k in FORMATS if k != 'builtin')}", file=file,
                    row=1)


def _resolve_path(spec: str) -> Path:
    """A file to load: the path itself, or the one data file in a folder."""
    p = Path(spec)
    if not p.exists():
        raise DataError(f"no such file, and not a built-in dataset (built-ins: "
                        f"{', '.join(BUILTIN)})", file=spec)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower()
                       in _DATA_SUFFIXES)
        if len(files) != 1:
            raise DataError(f"a folder with {len(files)} data files; name one of them",
                            file=spec)
        return files[0]
    return p


def load_dataset(spec: PathLike, **kw: Any) -> Dataset:
    """Load a built-in dataset by name, or a file in any of the :data:`FORMATS`.

    Keyword arguments go to the format's loader (``aspect=`` for scored items; ``seed``,
    ``n`` for built-ins). A scored-items file without ``aspect`` is an error that lists the
    aspects the file has.
    """
    text = os.fspath(spec)
    if text in BUILTIN and not Path(text).exists():
        return builtin_dataset(text, **kw)
    path = _resolve_path(text)
    fmt = sniff_format(path)
    if fmt == "scored-items" and kw.get("aspect") is None:
        aspects = scored_item_aspects(path)
        raise DataError(f"a scored-items file needs aspect=...; aspects in this file: "
                        f"{', '.join(aspects) or 'none'}", file=str(path), row=1,
                        field="aspect")
    loader = _LOADERS[fmt]
    try:
        inspect.signature(loader).bind(path, **kw)
    except TypeError as e:
        raise TypeError(f"the {fmt} loader ({loader.__name__}) does not take these arguments: "
                        f"{e}") from None
    return loader(path, **kw)
