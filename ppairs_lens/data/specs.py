"""Dataset specs: how a command-line or config string names a dataset.

A spec is a built-in name (``larger_number``), a path, or ``path:aspect`` for a scored-items
file (``../shared/datasets/summeval/summeval.jsonl:coherence``); any of them may end in
``@Name``, the name tables and figures show (``cloze_test.csv@Story Cloze``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path

from ppairs_lens.data import load_dataset, sniff_format
from ppairs_lens.data.records import Dataset, Sampled


def parse_spec(spec: str) -> tuple[str, dict]:
    """``'path:aspect'`` -> (path, {'aspect': aspect}); anything else -> (spec, {})."""
    head, sep, tail = spec.rpartition(":")
    if sep and head and tail and "/" not in tail and "\\" not in tail and Path(head).exists():
        return head, {"aspect": tail}
    return spec, {}


def spec_format(spec: str) -> str | None:
    """The ``FORMATS`` key of the file a spec names; None for a built-in name."""
    path = Path(parse_spec(display_name(spec)[0])[0])
    return sniff_format(path) if path.is_file() else None


def subsample_by_context(dataset: Dataset, max_pairs: int | None, seed: int = 0, *,
                         per_context: int | None = None) -> Dataset:
    """At most ``max_pairs`` records (in the dataset's order), taking contexts in a seeded
    order, each whole or (``per_context``) a seeded sample of at most that many records.

    Contexts are the leak groups a split keeps apart, so a claim's power grows with their
    number: where pairs within a context cost as much as across (MT-Bench's answers share no
    prefix), ``per_context`` spends a fixed budget on more of them. Every limit takes a prefix
    of one sequence, kept as ``sampled_from``: a smaller limit reads pairs a larger one
    harvested, and a larger one harvests only the pairs it adds.
    """
    if per_context is not None and per_context < 1:
        raise ValueError(f"per_context must be at least 1, got {per_context}")
    by_ctx: dict[str, list[int]] = {}
    for i, c in enumerate(dataset.context_ids()):
        by_ctx.setdefault(c, []).append(i)
    order = sorted(by_ctx)
    random.Random(seed).shuffle(order)
    sequence: list[int] = []
    for c in order:
        rows = by_ctx[c]
        if per_context is not None and len(rows) > per_context:
            rows = sorted(random.Random(f"{seed}:{c}").sample(rows, per_context))
        sequence += rows
    cap = "" if per_context is None else f"k{per_context}"
    rank = {i: r for r, i in enumerate(sorted(sequence))}
    whole = Sampled(replace(dataset, records=[dataset.records[i] for i in sequence],
                            sampled_from=None),
                    tuple(rank[i] for i in sequence), seed, per_context)
    if per_context is None and (max_pairs is None or len(dataset) <= max_pairs):
        return replace(dataset, sampled_from=whole)
    keep = sorted(sequence[:max_pairs] if max_pairs is not None else sequence)
    return replace(dataset, records=[dataset.records[i] for i in keep],
                   name=f"{dataset.name}-n{len(keep)}{cap}s{seed}", sampled_from=whole)


def redraw(dataset: Dataset, max_pairs: int | None) -> Dataset:
    """``dataset`` at another limit of the order it was drawn in: what
    :func:`subsample_by_context` gives its file at ``max_pairs`` (same seed, same cap per
    context), so both share one store. A dataset no limit drew is drawn as a file is."""
    drawn = dataset.sampled_from
    if drawn is None:
        return subsample_by_context(dataset, max_pairs)
    order = sorted(range(len(drawn.file_order)), key=drawn.file_order.__getitem__)
    base = replace(drawn.whole, records=[drawn.whole.records[j] for j in order])
    return subsample_by_context(base, max_pairs, drawn.seed, per_context=drawn.per_context)


def display_name(spec: str) -> tuple[str, str | None]:
    """``'spec@Name'`` -> (spec, 'Name'); a spec without a trailing ``@Name`` (or whose ``@``
    belongs to an existing path) -> (spec, None)."""
    head, sep, name = spec.rpartition("@")
    if not sep or not head or Path(spec).exists() or Path(parse_spec(spec)[0]).exists():
        return spec, None
    name = name.strip()
    return (head, name) if name and "/" not in name and "\\" not in name else (spec, None)


@dataclass(frozen=True)
class PairLimits:
    """Pair limits by dataset name (a spec's ``@Name``, else its file's): ``--max-pairs 60
    LLMBar=200`` is ``PairLimits(60, (("LLMBar", 200),))``."""

    default: int | None = None
    named: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        names = [n for n, _ in self.named]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"a pair limit is given twice for {', '.join(twice)}")
        if any(n < 1 for n in [*(v for _, v in self.named), *([self.default] if self.default
                                                                is not None else [])]):
            raise ValueError("pair limits must be at least 1")

    def of(self, *names: str | None) -> int | None:
        """The limit of the first of ``names`` that has one, else the default."""
        named = dict(self.named)
        return next((named[n] for n in names if n in named), self.default)

    def unknown(self, names) -> list[str]:
        """The named limits that match none of ``names``."""
        known = set(names)
        return [n for n, _ in self.named if n not in known]


def load_dataset_spec(spec: str, *, max_pairs: int | PairLimits | None = None, seed: int = 0
                      ) -> Dataset:
    """The dataset a spec names, at most ``max_pairs`` pairs (whole contexts, seeded); a
    ``@Name`` names it in tables and figures (its store keeps the file's name, shared by every
    limit and name of one file)."""
    spec, name = display_name(spec)
    path, kw = parse_spec(spec)
    loaded = load_dataset(path, **kw)
    if isinstance(max_pairs, PairLimits):
        max_pairs = max_pairs.of(name, loaded.name)
    dataset = subsample_by_context(loaded, max_pairs, seed)
    return dataset if name is None else replace(dataset, name=name)


def limit_names(spec: str, dataset: Dataset) -> tuple[str, ...]:
    """The names a :class:`PairLimits` entry matches for ``spec``'s dataset (as
    :func:`load_dataset_spec` returned it), in lookup order: ``@Name``, then its file's."""
    at = display_name(spec)[1]
    whole = dataset.sampled_from
    file_name = whole.whole.name if whole is not None else None if at else dataset.name
    return tuple(n for n in (at, file_name) if n is not None)


def spec_limit(limits: PairLimits | None, spec: str) -> int | None:
    """The limit ``limits`` gives the dataset ``spec`` names (None: no limit)."""
    if limits is None:
        return None
    if not limits.named:
        return limits.default
    return limits.of(*limit_names(spec, load_dataset_spec(spec)))
