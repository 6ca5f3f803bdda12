"""Dataset specs: how a command-line or config string names a dataset.

A spec is a built-in name (``larger_number``), a path, or ``path:aspect`` for a scored-items
file (``../shared/datasets/summeval/summeval.jsonl:coherence``); any of them may end in
``@Name``, the name tables and figures show (``cloze_test.csv@Story Cloze``).
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from ppairs_lens.data import load_dataset, sniff_format
from ppairs_lens.data.records import Dataset


def parse_spec(spec: str) -> tuple[str, dict]:
    """``'path:aspect'`` -> (path, {'aspect': aspect}); anything else -> (spec, {})."""
    head, sep, tail = spec.rpartition(":")
    if sep and head and tail and "/" not in tail and "\\" not in tail and Path(head).exists():
        return head, {"aspect": tail}
    return spec, {}


def spec_format(spec: str) -> str | None:
    """The file format (a ``FORMATS`` key) of the file a spec names; None for anything else
    (a built-in name)."""
    path = Path(parse_spec(display_name(spec)[0])[0])
    return sniff_format(path) if path.is_file() else None


def subsample_by_context(dataset: Dataset, max_pairs: int | None, seed: int = 0, *,
                         per_context: int | None = None) -> Dataset:
    """At most ``max_pairs`` records, taking contexts in a seeded random order; each context
    whole, or (``per_context``) a seeded sample of at most that many of its records.

    Contexts are the leak groups a split keeps apart, so a claim's power grows with their
    number: where pairs within a context cost as much as pairs across contexts (MT-Bench's
    answers share no prefix), ``per_context`` spends a fixed budget on more of them.
    """
    if per_context is not None and per_context < 1:
        raise ValueError(f"per_context must be at least 1, got {per_context}")
    by_ctx: dict[str, list[int]] = {}
    for i, c in enumerate(dataset.context_ids()):
        by_ctx.setdefault(c, []).append(i)
    if per_context is None and (max_pairs is None or len(dataset) <= max_pairs):
        return dataset
    order = sorted(by_ctx)
    random.Random(seed).shuffle(order)
    keep: list[int] = []
    for c in order:
        rows = by_ctx[c]
        if per_context is not None and len(rows) > per_context:
            rows = sorted(random.Random(f"{seed}:{c}").sample(rows, per_context))
        keep += rows
        if max_pairs is not None and len(keep) >= max_pairs:
            break
    keep = sorted(keep[:max_pairs] if max_pairs is not None else keep)
    cap = "" if per_context is None else f"k{per_context}"
    return replace(dataset, records=[dataset.records[i] for i in keep],
                   name=f"{dataset.name}-n{len(keep)}{cap}s{seed}")


def display_name(spec: str) -> tuple[str, str | None]:
    """``'spec@Name'`` -> (spec, 'Name'); a spec without a trailing ``@Name`` (or whose ``@``
    belongs to an existing path) -> (spec, None)."""
    head, sep, name = spec.rpartition("@")
    if not sep or not head or Path(spec).exists() or Path(parse_spec(spec)[0]).exists():
        return spec, None
    name = name.strip()
    return (head, name) if name and "/" not in name and "\\" not in name else (spec, None)


def load_dataset_spec(spec: str, *, max_pairs: int | None = None, seed: int = 0) -> Dataset:
    """The dataset a spec names, at most ``max_pairs`` pairs (whole contexts, seeded); a
    ``@Name`` suffix names it (in tables, figures and its store's folder)."""
    spec, name = display_name(spec)
    path, kw = parse_spec(spec)
    dataset = subsample_by_context(load_dataset(path, **kw), max_pairs, seed)
    return dataset if name is None else replace(dataset, name=name)


