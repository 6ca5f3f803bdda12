"""Run a dataset through a model into an activation store, resumably and shard by shard.

A dataset drawn by a seeded pair limit (``sampled_from``) is stored as the whole dataset in the
limit's order, harvested as far as the limit reaches, and read as a view of its own pairs: a
smaller limit later reads what a larger one harvested, a larger one harvests only what it adds.
Each shard also keeps the prompted judge's log-odds, read in the harvest's own passes, so the
judges need not run those prompts again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from filelock import FileLock, Timeout
from tqdm.auto import tqdm

from ppairs_lens.errors import StoreError
from ppairs_lens.activations.harvest import (
    default_readouts,
    harvest_with_judge,
    readout_names,
    readout_width,
)
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.models.backend import model_dtype
from ppairs_lens.models.loading import model_name
from ppairs_lens.activations.prompts import (
    ComparisonTemplate,
    StatementTemplate,
    Template,
    build_contrast_pairs,
    default_template,
    template_hash,
)
from ppairs_lens.data.records import Dataset
from ppairs_lens.activations.pair_info import pair_info
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.activations.store_meta import StoreMeta


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "model"


def stored_rows(dataset: Dataset) -> tuple[Dataset, list[int] | None]:
    """``(the dataset a store holds, the positions of dataset's records in it)``: a limit's
    whole dataset when every record is the one at its pair id there, else (dataset, None)."""
    if dataset.sampled_from is None:
        return dataset, None
    whole = dataset.sampled_from.whole
    at = {r.pair_id: i for i, r in enumerate(whole.records)}
    rows = [at.get(r.pair_id) for r in dataset.records]
    if (len(at) != len(whole.records) or len(set(rows)) != len(rows) or dataset.kind != whole.kind
            or any(i is None or whole.records[i] != r for i, r in zip(rows, dataset.records))):
        return dataset, None
    return whole, rows


def read_as(store: ActivationStore, dataset: Dataset) -> ActivationStore:
    """``store`` (opened whole) read as ``dataset``: the view of its records where a limit
    drew it, else the store itself."""
    return _as_dataset(store, dataset, stored_rows(dataset)[1])


def _as_dataset(store: ActivationStore, dataset: Dataset, rows: list[int] | None
                ) -> ActivationStore:
    if rows is None:
        return store
    return store.view(rows, dataset=dataset.name, dataset_fingerprint=dataset.fingerprint())


def default_store_path(root: str | Path, model: str, dataset: Dataset, template: Template,
                       hook_names: Sequence[str] | None = None) -> Path:
    """``root/<model>/<dataset>-<fingerprint>-<template hash>`` (a limit's whole dataset);
    read-outs other than the default (``hook_names``) add ``-h<hash of the names>``."""
    dataset = stored_rows(dataset)[0]
    folder = f"{_slug(dataset.name)}-{dataset.fingerprint()[:8]}-{template_hash(template)[:8]}"
    if hook_names is not None:
        folder += "-h" + hashlib.sha256(json.dumps(list(hook_names)).encode()).hexdigest()[:8]
    return Path(root) / _slug(Path(model).name if Path(model).exists() else model) / folder


def parse_shard(spec: str | None) -> tuple[int, int]:
    """'i/n' -> (i, n), 0-based; None -> (0, 1), the whole harvest."""
    if not spec:
        return 0, 1
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec)
    if not m or not int(m[1]) < int(m[2]):
        raise ValueError(f"--shard must be i/n with 0 <= i < n, got {spec!r}")
    return int(m[1]), int(m[2])


@dataclass
class _Prepared:
    """A harvest's store, the rows the dataset reads, and the held lock of its shard spec."""

    store: ActivationStore
    dataset: Dataset
    rows: list[int] | None
    built: list            # contrast pairs of the stored pairs up to the last one read
    named: dict
    lock: FileLock

    def view(self) -> ActivationStore:
        return _as_dataset(self.store, self.dataset, self.rows)

    def todo(self, shard: tuple[int, int] = (0, 1)) -> list[tuple[int, int, int]]:
        """``(shard, first pair to compute, stop)`` per shard of the spec still needed."""
        i, n = shard
        need = self.view()
        out = []
        for k in need.missing_shards():
            if k % n == i:
                start, stop = need.needed_range(k)
                out.append((k, self.store.written_stop(k) or start, stop))
        return out


def _prepared(bridge, dataset: Dataset, out: str | Path, template: Template | None,
              shard_size: int, settings: HarvestSettings, names, shard: tuple[int, int] = (0, 1)
              ) -> _Prepared:
    """The store created or reopened for ``dataset``, holding the lock of this shard spec: two
    harvests of one spec at once are refused, not interleaved."""
    template = template or default_template(dataset)
    whole, rows = stored_rows(dataset)
    need = len(whole) if rows is None else max(rows, default=-1) + 1
    built = build_contrast_pairs(bridge.tokenizer, replace(whole, records=whole.records[:need]),
                                 template)
    hooks = readout_names(bridge, names)  # checked before anything is written
    meta = StoreMeta(
        model=model_name(bridge),
        dataset=whole.name,
        dataset_fingerprint=whole.fingerprint(),
        dataset_source=whole.source,
        aspect=whole.aspect,
        kind=whole.kind,
        template=template.describe(),
        template_hash=template_hash(template),
        hook_names=tuple(hooks),
        n_layers=bridge.cfg.n_layers,
        d_model=(width := readout_width(bridge, names)),
        readout_widths=(width,) * len(hooks),
        dtype=str(settings.out_dtype).removeprefix("torch."),
        shard_size=shard_size,
        sampling=None if rows is None else {
            "seed": dataset.sampled_from.seed, "per_context": dataset.sampled_from.per_context,
            "file_order": list(dataset.sampled_from.file_order)},
        harvest_settings={k: str(v) for k, v in asdict(settings).items()},
        model_dtype=model_dtype(bridge),
    )
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
        store = ActivationStore.create(out, meta, pair_info(whole))
    except BaseException:
        lock.release()
        raise
    return _Prepared(store, dataset, rows, built, {} if names is None else {"names": hooks},
                     lock)


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
    """Harvest ``dataset`` (activations and the judge's log-odds) into the store at ``out``.
    ``names``: the read-outs (exact hook names, presets, glob patterns; default every block's
    resid_post and the final norm).

    Complete shards are skipped, so a killed harvest resumes where it stopped. ``shard=(i, n)``
    does only the shards ``k`` with ``k % n == i``: n processes (a SLURM array, a shell loop)
    fill one store without collisions.
    """
    return harvest_together(bridge, [(dataset, out, template)], shard_size=shard_size,
                            shard=shard, settings=settings, progress=progress, names=names)[0]


def harvest_together(bridge, jobs: Sequence[tuple[Dataset, str | Path, Template | None]], *,
                     shard_size: int = 256, shard: tuple[int, int] = (0, 1),
                     settings: HarvestSettings = HarvestSettings(), progress: bool = True,
                     names: str | Sequence[str] | None = None) -> list[ActivationStore]:
    """Harvest several ``(dataset, store folder, template)`` at once: shard ``k`` of every store
    runs in one pass, so a context shared across datasets (one article asked about four
    aspects) runs once. Each store stays resumable per shard."""
    prepared: list[_Prepared] = []
    try:
        for d, out, t in jobs:
            prepared.append(_prepared(bridge, d, out, t, shard_size, settings, names, shard))
        todo = [{k: (a, b) for k, a, b in p.todo(shard)} for p in prepared]
        total = sum(b - a for t in todo for a, b in t.values())
        label = jobs[0][0].name if len(jobs) == 1 else f"{len(jobs)} datasets"
        bar = tqdm(total=total, desc=f"harvest {label}", unit="pair", disable=not progress)
        named = prepared[0].named
        for k in sorted({k for t in todo for k in t}):
            parts = [(p, t[k][0], p.built[slice(*t[k])])
                     for p, t in zip(prepared, todo) if k in t]
            got = harvest_with_judge(bridge, [x for _, _, ps in parts for x in ps], settings,
                                     progress=bar.update, **named)
            ld = got.judge_logodds
            at = 0
            for p, start, ps in parts:
                p.store.write_shard(k, got.acts[at:at + len(ps)],
                                    None if ld is None else ld[at:at + len(ps)], start=start)
                at += len(ps)
        bar.close()
    finally:
        for p in prepared:
            p.lock.release()
    return [p.view() for p in prepared]


def ensure_stores(bridge, datasets: Sequence[Dataset], root: str | Path, *,
                  settings: HarvestSettings = HarvestSettings(), progress: bool = True
                  ) -> list[ActivationStore]:
    """:func:`ensure_store` for several datasets (default template and read-outs)."""
    found = [finished_store(bridge, d, root) for d in datasets]
    paths = [p for p, _ in found]
    out: list[ActivationStore | None] = [s for _, s in found]
    # Datasets read from one file (SummEval's four aspects) share their contexts: harvest
    # them together; the others one by one, so an interruption loses one file's shard only.
    by_source: dict[str, list[int]] = {}
    for i, s in enumerate(out):
        if s is None:
            by_source.setdefault(str(datasets[i].source or datasets[i].name), []).append(i)
    for idx in by_source.values():
        made = harvest_together(bridge, [(datasets[i], paths[i], None) for i in idx],
                                settings=settings, progress=progress)
        for i, s in zip(idx, made):
            out[i] = s
    return out


def finished_store(bridge, dataset: Dataset, root: str | Path, *,
                   template: Template | None = None, names: str | Sequence[str] | None = None
                   ) -> tuple[Path, ActivationStore | None]:
    """``(path, store)``: where :func:`ensure_store` keeps ``dataset``'s store, and the store
    when it is complete for this model and read-outs (else None)."""
    template = template or default_template(dataset)
    hooks = readout_names(bridge, names)
    path = default_store_path(root, model_name(bridge), dataset, template,
                              None if hooks == default_readouts(bridge) else hooks)
    if (path / "metadata.json").exists():
        store = read_as(ActivationStore.open(path, whole=True), dataset)
        if (store.complete and store.meta.model == model_name(bridge)
                and store.hook_names == hooks):
            return path, store
    return path, None


def pending_records(bridge, dataset: Dataset, root: str | Path, *,
                    template: Template | None = None, names: str | Sequence[str] | None = None
                    ) -> list[int]:
    """Positions of ``dataset``'s records that :func:`ensure_store` would still harvest."""
    template = template or default_template(dataset)
    hooks = readout_names(bridge, names)
    path = default_store_path(root, model_name(bridge), dataset, template,
                              None if hooks == default_readouts(bridge) else hooks)
    everything = list(range(len(dataset)))
    if not (path / "metadata.json").exists():
        return everything
    store = ActivationStore.open(path, whole=True)
    if store.meta.model != model_name(bridge) or store.hook_names != hooks:
        return everything
    rows = stored_rows(dataset)[1] or everything
    size = int(store.meta.shard_size)
    stops = {k: store.written_stop(k) for k in {r // size for r in rows}}
    return [i for i, r in enumerate(rows) if (stops[r // size] or 0) <= r]


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
    A store is reused only if it holds exactly these read-outs (``names``)."""
    template = template or default_template(dataset)
    hooks = readout_names(bridge, names)
    default = hooks == default_readouts(bridge)
    path, store = finished_store(bridge, dataset, root, template=template, names=names)
    if store is not None:
        return store
    return harvest_dataset(bridge, dataset, path, template=template, settings=settings,
                           progress=progress, names=None if default else hooks)


def store_template(store: ActivationStore) -> Template:
    """The prompt template a store was harvested with, rebuilt from its metadata."""
    desc = dict(store.meta.template or {})
    kind = desc.pop("kind")
    cls = ComparisonTemplate if kind == "comparison" else StatementTemplate
    if "choices" in desc:
        desc["choices"] = tuple(desc["choices"])
    template = cls(**desc)
    if template_hash(template) != store.meta.template_hash:
        raise StoreError(f"{store.path}: cannot rebuild the store's prompt template from its "
                         "metadata (hash mismatch)")
    return template


def check_store_matches(bridge, store: ActivationStore, dataset: Dataset) -> None:
    """Refuse a store not harvested from ``dataset``'s records with ``bridge``'s model."""
    if store.meta.model != model_name(bridge):
        raise StoreError(f"{store.path} was harvested with model {store.meta.model!r}, but "
                         f"the model given is {model_name(bridge)!r}")
    if store.meta.dataset_fingerprint != dataset.fingerprint():
        raise StoreError(f"{store.path} holds dataset {store.meta.dataset!r} "
                         f"(fingerprint {store.meta.dataset_fingerprint}), not the records of "
                         f"{dataset.name!r} ({dataset.fingerprint()}); pass the dataset the "
                         "store was harvested from")
    ids = [p.pair_id for p in store.pairs()]
    if ids != [r.pair_id for r in dataset.records]:
        raise StoreError(f"{store.path}: pair ids differ from the dataset's records")
