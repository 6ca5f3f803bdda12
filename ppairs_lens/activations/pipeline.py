"""Run a dataset through a model into an activation store, resumably and shard by shard."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from filelock import FileLock, Timeout
from tqdm.auto import tqdm

from ppairs_lens.errors import StoreError
from ppairs_lens.activations.harvest import HarvestSettings, harvest_pairs, readout_names
from ppairs_lens.models.loading import model_name
from ppairs_lens.activations.prompts import (
    ComparisonTemplate,
    StatementTemplate,
    Template,
    build_contrast_pairs,
    default_template,
    template_hash,
)
from ppairs_lens.data.records import Comparison, Dataset
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.activations.readouts import default_readouts


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "model"


def default_store_path(root: str | Path, model: str, dataset: Dataset, template: Template,
                       hook_names: Sequence[str] | None = None) -> Path:
    """``root/<model>/<dataset>-<fingerprint>-<template hash>``: one folder per harvest; read-outs
    other than the default (``hook_names``) add ``-h<hash of the names>``."""
    folder = f"{_slug(dataset.name)}-{dataset.fingerprint()[:8]}-{template_hash(template)[:8]}"
    if hook_names is not None:
        folder += "-h" + hashlib.sha256(json.dumps(list(hook_names)).encode()).hexdigest()[:8]
    return Path(root) / _slug(Path(model).name if Path(model).exists() else model) / folder


def pair_info(dataset: Dataset) -> list[dict]:
    """What analyses need per pair without the model: ids, label, context, leak group
    (``group_id``, which splits keep on one side), gold scores, and the character lengths of
    the two items (``len1``/``len2``; a statement's length and None) for surface baselines."""
    labels, contexts, groups = dataset.labels(), dataset.context_ids(), dataset.group_ids()
    info = []
    for rec, label, ctx, group in zip(dataset.records, labels, contexts, groups):
        row = {"pair_id": rec.pair_id, "label": label, "context_id": ctx, "group_id": group}
        if isinstance(rec, Comparison):
            row.update(item1_id=rec.item1_id, item2_id=rec.item2_id,
                       score1=rec.score1, score2=rec.score2,
                       len1=len(rec.item1), len2=len(rec.item2))
        else:
            row.update(len1=len(rec.statement), len2=None)
        info.append(row)
    return info


def parse_shard(spec: str | None) -> tuple[int, int]:
    """'i/n' -> (i, n), 0-based; None -> (0, 1), the whole harvest."""
    if not spec:
        return 0, 1
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec)
    if not m or not int(m[1]) < int(m[2]):
        raise ValueError(f"--shard must be i/n with 0 <= i < n, got {spec!r}")
    return int(m[1]), int(m[2])


def harvest_dataset(
    bridge,
    dataset: Dataset,
    out: str | Path,
    *,
    template: Template | None = None,
    shard_size: int = 256,
    shard: tuple[int, int] = (0, 1),
    settings: HarvestSettings = HarvestSettings(),
    progress: bool = True,
    names: str | Sequence[str] | None = None,
) -> ActivationStore:
    """Harvest ``dataset`` into the store at ``out`` and return it.

    ``names``: the read-outs (exact hook names, presets, glob patterns such as
    ``"blocks.*.hook_resid_pre"``; default every block's resid_post and the final norm),
    recorded in the store's metadata as exact names in forward order.

    Shards already complete are skipped, so a killed harvest resumes where it stopped.
    ``shard=(i, n)`` does only the store shards ``k`` with ``k % n == i``: n processes (a SLURM
    array, a shell loop) fill one store without collisions. Two harvests of the same shard
    spec at once are refused by a lock rather than interleaved.
    """
    template = template or default_template(dataset)
    pairs = build_contrast_pairs(bridge.tokenizer, dataset, template)
    hooks = readout_names(bridge, names)  # checked before anything is written
    meta = {
        "model": model_name(bridge),
        "dataset": dataset.name,
        "dataset_fingerprint": dataset.fingerprint(),
        "dataset_source": dataset.source,
        "aspect": dataset.aspect,
        "kind": dataset.kind,
        "template": template.describe(),
        "template_hash": template_hash(template),
        "hook_names": hooks,
        "n_layers": bridge.cfg.n_layers,
        "d_model": bridge.cfg.d_model,
        "dtype": str(settings.out_dtype).removeprefix("torch."),
        "shard_size": shard_size,
        "harvest_settings": {k: str(v) for k, v in asdict(settings).items()},
    }
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    i, n = shard
    lock = FileLock(out / f".harvest-{i}-of-{n}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise StoreError(f"{out} is being written by another harvest (shard {i}/{n}; lock file "
                         f"{lock.lock_file}); wait for it, or give this one another --shard") from None
    try:
        store = ActivationStore.create(out, meta, pair_info(dataset))
        todo = [k for k in store.missing_shards() if k % n == i]
        total = sum(store.shard_range(k)[1] - store.shard_range(k)[0] for k in todo)
        bar = tqdm(total=total, desc=f"harvest {dataset.name}", unit="pair", disable=not progress)
        # the default read-outs: the plain call (no names), as before read-outs could be named
        named = {} if names is None else {"names": hooks}
        for k in todo:
            start, stop = store.shard_range(k)
            acts = harvest_pairs(bridge, pairs[start:stop], settings, progress=bar.update,
                                 **named)
            store.write_shard(k, acts)
        bar.close()
    finally:
        lock.release()
    return store


def ensure_store(
    bridge,
    dataset: Dataset,
    root: str | Path,
    *,
    template: Template | None = None,
    settings: HarvestSettings = HarvestSettings(),
    progress: bool = True,
    names: str | Sequence[str] | None = None,
) -> ActivationStore:
    """The store of ``dataset`` under ``root``: opened if complete, else harvested or resumed.

    ``names`` as in :func:`harvest_dataset`; read-outs other than the default get a folder of
    their own, and a store is reused only if it holds exactly these read-outs."""
    template = template or default_template(dataset)
    hooks = readout_names(bridge, names)
    default = hooks == default_readouts(bridge)
    path = default_store_path(root, model_name(bridge), dataset, template,
                              None if default else hooks)
    if (path / "metadata.json").exists():
        store = ActivationStore.open(path)
        if (store.complete and store.meta["model"] == model_name(bridge)
                and store.hook_names == hooks):
            return store
    return harvest_dataset(bridge, dataset, path, template=template, settings=settings,
                           progress=progress, names=None if default else hooks)


def store_template(store: ActivationStore) -> Template:
    """The prompt template a store was harvested with, rebuilt from its metadata."""
    desc = dict(store.meta["template"])
    kind = desc.pop("kind")
    cls = ComparisonTemplate if kind == "comparison" else StatementTemplate
    if "choices" in desc:
        desc["choices"] = tuple(desc["choices"])
    template = cls(**desc)
    if template_hash(template) != store.meta["template_hash"]:
        raise StoreError(f"{store.path}: cannot rebuild the store's prompt template from its "
                         "metadata (hash mismatch)")
    return template


def check_store_matches(bridge, store: ActivationStore, dataset: Dataset) -> None:
    """Refuse a store not harvested from ``dataset``'s records with ``bridge``'s model (an
    analysis that re-runs the model on the records needs both to be the store's)."""
    if store.meta["model"] != model_name(bridge):
        raise StoreError(f"{store.path} was harvested with model {store.meta['model']!r}, but "
                         f"the model given is {model_name(bridge)!r}")
    if store.meta["dataset_fingerprint"] != dataset.fingerprint():
        raise StoreError(f"{store.path} holds dataset {store.meta['dataset']!r} "
                         f"(fingerprint {store.meta['dataset_fingerprint']}), not the records of "
                         f"{dataset.name!r} ({dataset.fingerprint()}); pass the dataset the "
                         "store was harvested from")
    ids = [p["pair_id"] for p in store.pairs()]
    if ids != [r.pair_id for r in dataset.records]:
        raise StoreError(f"{store.path}: pair ids differ from the dataset's records")
