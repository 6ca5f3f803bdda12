"""Working out which keys of a scored-items file hold the ids, the texts and the aspects.

SummEval, HANNA and files of the same shape name their fields differently (``article_id`` /
``article`` / ``summary`` vs ``prompt`` / ``story``), so the fields are detected from how the
values behave: which ``*_id`` repeats, which text it fixes, which keys are numeric. Explicit
field names override detection; where it cannot decide, the error says which argument to pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppairs_lens.data.fields import is_number
from ppairs_lens.errors import DataError

__all__ = ["ScoredFields", "detect_scored_fields", "resolve_aspect"]


@dataclass(frozen=True)
class ScoredFields:
    """Which JSON keys hold what in a scored-items file."""

    item: str
    item_id: str | None
    context: str | None
    context_id: str | None
    aspects: tuple[str, ...]


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


def detect_scored_fields(rows: Sequence[tuple[int, dict[str, Any]]], file: str, *,
                         aspect: str | None, context_field: str | None,
                         context_id_field: str | None, item_field: str | None,
                         item_id_field: str | None) -> ScoredFields:
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
                    and sum(is_number(obj.get(k)) for _, obj in rows) * 2 > len(rows))
    return ScoredFields(item=item, item_id=item_id, context=ctx_text, context_id=ctx_id,
                        aspects=aspects)


def resolve_aspect(aspect: str, fields: ScoredFields, rows: Sequence[tuple[int, dict]],
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
