"""Scored-items files (SummEval, HANNA): items with a gold score, compared within contexts.

Each JSONL line is one item with numeric aspect scores and usually its context (an article, a
story prompt); every pair of items sharing a context is labelled by the higher score (the same
pairing serves any :class:`ScoredItem` list, ClimateX too). Files name their fields
differently (``article_id`` / ``summary`` vs ``prompt`` / ``story``), so fields are detected
from how values behave (:func:`detect_scored_fields`); explicit names override detection, and
where it cannot decide the error says which argument to pass.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppairs_lens.data.reading import PathLike, dataset_name, get, is_number, read_jsonl, text, warn
from ppairs_lens.data.records import ITEM1, ITEM2, TIE, Comparison, Dataset, ScoredItem
from ppairs_lens.errors import DataError

__all__ = ["ScoredFields", "comparisons_of_pairs", "comparisons_within_contexts",
           "detect_scored_fields", "load_scored_items", "read_scored_items", "resolve_aspect",
           "scored_item_aspects"]


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
    """Which keys are the ids, the texts and the aspects.

    The context id is the ``*_id`` key whose values repeat and which determines a text field
    (SummEval's ``summary_id`` repeats too, S0-S15 in every article, but does not fix the
    summary text). Texts are matched to ids by name first (``article_id`` -> ``article``),
    then by behaviour.
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


def _score(value: Any, file: str, row: int, field: str) -> float:
    """A finite number; numeric strings are accepted (some exports quote numbers)."""
    number: float | None = None
    if is_number(value):
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
    """An id as the file gives it (string or integer), as a string."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise DataError(f"id must be a non-empty string or integer, got {value!r}", file=file,
                        row=row, field=field)
    return str(value)


def _read_scored(path: PathLike, aspect: str, *, context_field: str | None,
                 context_id_field: str | None, item_field: str | None,
                 item_id_field: str | None) -> tuple[list[ScoredItem], ScoredFields, str]:
    """Items, the detected fields, and the aspect key actually used."""
    p = Path(path)
    file = str(p)
    rows = read_jsonl(p)
    fields = detect_scored_fields(rows, file, aspect=aspect, context_field=context_field,
                                  context_id_field=context_id_field, item_field=item_field,
                                  item_id_field=item_id_field)
    key = resolve_aspect(aspect, fields, rows, file)
    items: list[ScoredItem] = []
    context_of: dict[str, tuple[int, str | None]] = {}
    seen: dict[tuple[str | None, str], int] = {}
    for row, obj in rows:
        ctx_id = _id(get(obj, fields.context_id, file, row), file, row, fields.context_id) \
            if fields.context_id else None
        ctx = text(get(obj, fields.context, file, row), file, row, fields.context) \
            if fields.context else None
        item_id = _id(get(obj, fields.item_id, file, row), file, row, fields.item_id) \
            if fields.item_id else f"row{row}"
        item_text = text(get(obj, fields.item, file, row), file, row, fields.item)
        score = _score(get(obj, key, file, row), file, row, key)
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
        items.append(ScoredItem(item_id=item_id, text=item_text, score=score, context_id=ctx_id,
                                context=ctx))
    return items, fields, key


def read_scored_items(path: PathLike, aspect: str, *, context_field: str | None = None,
                      context_id_field: str | None = None, item_field: str | None = None,
                      item_id_field: str | None = None) -> list[ScoredItem]:
    """Items with their gold ``aspect`` score from a scored-items JSONL file (fields detected);
    a file without a repeating ``*_id`` key has no contexts: its items form one group."""
    return _read_scored(path, aspect, context_field=context_field,
                        context_id_field=context_id_field, item_field=item_field,
                        item_id_field=item_id_field)[0]


def comparisons_within_contexts(items: Iterable[ScoredItem], *,
                                max_pairs_per_context: int | None = None, seed: int = 0,
                                swap_seed: int | None = 0, source: str | None = None,
                                score_field: str | None = None) -> list[Comparison]:
    """Every unordered pair of items sharing a context, labelled by the higher score (or TIE).

    ``pair_id`` ``"{context_id}:{id_i}|{id_j}"`` (i before j in input order; no ``context_id:``
    without context) names the unordered pair, whatever the swap. ``swap_seed``: each pair is
    flipped by a coin fixed by (swap_seed, pair_id), so labels 1 and 2 are about equally common
    however the file is ordered (one sorted by score would give one label, learnable as a
    position bias); ``None`` keeps file order. ``max_pairs_per_context`` keeps a seeded subset
    of each context's pairs, in order. ``source``/``score_field`` name the file and field in
    errors. Single-item contexts warn; no context of two, or only ties, is an error.
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
        warn(f"{source + ': ' if source else ''}{len(singles)} of {len(groups)} contexts have "
             f"a single item and give no comparisons (e.g. {', '.join(map(str, singles[:3]))})")
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


def _coin(seed: int, key: str) -> bool:
    """A fair coin fixed by (seed, key), so sub-sampling does not reshuffle orientations."""
    return bool(hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=1).digest()[0] & 1)


def _compare(a: ScoredItem, b: ScoredItem, pair_id: str, context_id: str | None,
             context: str | None, swap_seed: int | None) -> Comparison:
    """Two scored items compared, flipped by the (swap_seed, pair_id) coin."""
    if swap_seed is not None and _coin(swap_seed, pair_id):
        a, b = b, a
    label = ITEM1 if a.score > b.score else ITEM2 if b.score > a.score else TIE
    return Comparison(pair_id=pair_id, item1=a.text, item2=b.text, label=label, context=context,
                      context_id=context_id, item1_id=a.item_id, item2_id=b.item_id,
                      score1=a.score, score2=b.score)


def comparisons_of_pairs(items: Sequence[ScoredItem], pairs: Sequence[tuple[int, int]],
                         swap_seed: int | None, source: str | None) -> list[Comparison]:
    """Comparisons for chosen index pairs of context-free items, when all would be too many."""
    out = [_compare(items[i], items[j], f"{items[i].item_id}|{items[j].item_id}", None, None,
                    swap_seed) for i, j in pairs]
    if all(c.label == TIE for c in out):
        raise DataError(f"all {len(out)} pairs are ties", file=source, field="score")
    return out


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
    """Comparisons within each context of a scored-items file (:func:`comparisons_within_contexts`);
    ``aspect`` the adjective ("coherent"), with the definition of known SummEval/HANNA aspects."""
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
        name=name or f"{dataset_name(p)}-{key}", kind="comparison", records=records,
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
    rows = read_jsonl(p)
    return list(detect_scored_fields(rows, str(p), aspect=None, context_field=None,
                                     context_id_field=None, item_field=None,
                                     item_id_field=None).aspects)
