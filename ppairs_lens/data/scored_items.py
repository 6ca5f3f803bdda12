"""Scored-items files (SummEval, HANNA): items with a gold score, compared within contexts.

Each JSONL line is one item (a summary, a story) with numeric aspect scores and, usually, the
context it belongs to (an article, a story prompt). A dataset is built from every pair of
items sharing a context, labelled by the higher score on the chosen aspect; the same pairing
serves any list of :class:`ScoredItem` (ClimateX too).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ppairs_lens.data.fields import get, is_number, text
from ppairs_lens.data.reading import PathLike, dataset_name, read_jsonl, warn
from ppairs_lens.data.records import ITEM1, ITEM2, TIE, Comparison, Dataset, ScoredItem
from ppairs_lens.data.scored_fields import ScoredFields, detect_scored_fields, resolve_aspect
from ppairs_lens.errors import DataError

__all__ = ["comparisons_of_pairs", "comparisons_within_contexts", "load_scored_items",
           "read_scored_items", "scored_item_aspects"]


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
    """Items with their gold ``aspect`` score from a scored-items JSONL file.

    Field names are detected (see ``detect_scored_fields``) so files of the same shape with
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
    """A fair coin fixed by (seed, key): the same pair flips the same way whatever else
    is in the dataset, so sub-sampling does not reshuffle orientations."""
    return bool(hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=1).digest()[0] & 1)


def _compare(a: ScoredItem, b: ScoredItem, pair_id: str, context_id: str | None,
             context: str | None, swap_seed: int | None) -> Comparison:
    """One comparison of two scored items, flipped by the (swap_seed, pair_id) coin."""
    if swap_seed is not None and _coin(swap_seed, pair_id):
        a, b = b, a
    label = ITEM1 if a.score > b.score else ITEM2 if b.score > a.score else TIE
    return Comparison(pair_id=pair_id, item1=a.text, item2=b.text, label=label, context=context,
                      context_id=context_id, item1_id=a.item_id, item2_id=b.item_id,
                      score1=a.score, score2=b.score)


def comparisons_of_pairs(items: Sequence[ScoredItem], pairs: Sequence[tuple[int, int]],
                         swap_seed: int | None, source: str | None) -> list[Comparison]:
    """Comparisons for chosen index pairs of context-free items (same rules as within
    contexts); for when all pairs would be too many to list first."""
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
