"""From dataset specs to activation stores: the first step of every analysis.

A spec is a built-in name (``larger_number``), a path, or ``path:aspect`` for a scored-items
file (``../shared/datasets/summeval/summeval.jsonl:coherence``). Stores are reused when they
exist and resumed when a harvest was cut off.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from .data import load_dataset
from .harvest import HarvestSettings
from .harvest_to_store import default_store_path, harvest_dataset
from .models import model_name
from .prompts import Template, default_template
from .records import Dataset
from .store import ActivationStore


def parse_spec(spec: str) -> tuple[str, dict]:
    """``'path:aspect'`` -> (path, {'aspect': aspect}); anything else -> (spec, {})."""
    head, sep, tail = spec.rpartition(":")
    if sep and head and tail and "/" not in tail and "\\" not in tail and Path(head).exists():
        return head, {"aspect": tail}
    return spec, {}


def subsample_by_context(dataset: Dataset, max_pairs: int | None, seed: int = 0) -> Dataset:
    """At most ``max_pairs`` records, taking whole contexts in a seeded random order.

    Whole contexts keep splits by context honest and keep the harvester's prefix sharing.
    """
    if max_pairs is None or len(dataset) <= max_pairs:
        return dataset
    by_ctx: dict[str, list[int]] = {}
    for i, c in enumerate(dataset.context_ids()):
        by_ctx.setdefault(c, []).append(i)
    order = sorted(by_ctx)
    random.Random(seed).shuffle(order)
    keep: list[int] = []
    for c in order:
        keep += by_ctx[c]
        if len(keep) >= max_pairs:
            break
    keep = sorted(keep[:max_pairs])
    return replace(dataset, records=[dataset.records[i] for i in keep],
                   name=f"{dataset.name}-n{len(keep)}s{seed}")


def load_dataset_spec(spec: str, *, max_pairs: int | None = None, seed: int = 0) -> Dataset:
    path, kw = parse_spec(spec)
    return subsample_by_context(load_dataset(path, **kw), max_pairs, seed)


def ensure_store(
    bridge,
    dataset: Dataset,
    root: str | Path,
    *,
    template: Template | None = None,
    settings: HarvestSettings = HarvestSettings(),
    progress: bool = True,
) -> ActivationStore:
    """The store of ``dataset`` under ``root``: opened if complete, else harvested or resumed."""
    template = template or default_template(dataset)
    path = default_store_path(root, model_name(bridge), dataset, template)
    if (path / "metadata.json").exists():
        store = ActivationStore.open(path)
        if store.complete and store.meta["model"] == model_name(bridge):
            return store
    return harvest_dataset(bridge, dataset, path, template=template, settings=settings,
                           progress=progress)
