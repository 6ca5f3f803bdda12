"""Harvest one store with several workers of a Ray cluster (``pip install 'ppairs-lens[ray]'``).

Shard specs ``i/n`` fill one folder without colliding, as a SLURM array's processes do; here
they run as Ray tasks. Each task loads its own model; only the dataset and settings travel,
and the activations go straight to the store. Ray is imported only inside
:func:`harvest_with_ray`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ppairs_lens.errors import StoreError
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.prompts import Template
from ppairs_lens.data.records import Dataset
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.models.spec import ModelSpec

__all__ = ["ModelSpec", "WorkerReport", "harvest_shard_spec", "harvest_with_ray"]


@dataclass(frozen=True)
class WorkerReport:
    """What one worker did. ``torch_threads``: Ray gives a task as many threads as CPUs it
    asked for, and another thread count sums matrix products in another order (last bits,
    ~1e-7 relative in float32)."""

    shard: tuple[int, int]
    shards_written: tuple[int, ...]
    load_s: float
    harvest_s: float
    torch_threads: int


def harvest_shard_spec(model: ModelSpec, dataset: Dataset, out: str, shard: tuple[int, int], *,
                       template: Template | None, shard_size: int, settings: HarvestSettings
                       ) -> WorkerReport:
    """One worker's job (a plain function Ray wraps in a task, so it can be run by hand)."""
    from ppairs_lens.activations.pipeline import harvest_dataset
    from ppairs_lens.models.loading import load_model

    t0 = time.perf_counter()
    bridge = load_model(model)
    t1 = time.perf_counter()
    # Shards already on disk are skipped by the harvest: note them to report only new ones.
    done: set[int] = set()
    if (Path(out) / "metadata.json").exists():
        prior = ActivationStore.open(out, whole=True)
        done = set(range(prior.n_shards)) - set(prior.missing_shards())
    store = harvest_dataset(bridge, dataset, out, template=template, shard_size=shard_size,
                            shard=shard, settings=settings, progress=False)
    i, n = shard
    written = tuple(k for k in range(store.n_shards) if k % n == i and k not in done)
    return WorkerReport(shard, written, t1 - t0, time.perf_counter() - t1,
                        torch.get_num_threads())


def harvest_with_ray(
    model: str | Path | ModelSpec | None,
    dataset: str | Dataset,
    out: str | Path,
    *,
    n_workers: int = 2,
    address: str | None = None,
    cpus_per_worker: float = 1,
    gpus_per_worker: float = 0,
    max_pairs: int | None = None,
    template: Template | None = None,
    shard_size: int = 256,
    settings: HarvestSettings = HarvestSettings(),
) -> tuple[ActivationStore, list[WorkerReport]]:
    """Harvest ``dataset`` into the store at ``out`` with ``n_workers`` Ray tasks, one shard
    spec each; returns the complete store and what each worker did.

    ``dataset`` (a Dataset or a CLI spec) is resolved here, once, so every worker harvests the
    same pairs; ``out`` must be on a file system every worker sees. With ``address``
    (``"auto"``, ``"ray://host:10001"``) the tasks run on that cluster, else on a local one,
    stopped afterwards. Re-running resumes, as does a task Ray retries after its worker died
    (the dead worker's shard lock goes with its process).
    """
    try:
        import ray
    except ImportError as e:
        raise ImportError("harvest_with_ray needs Ray: pip install 'ppairs-lens[ray]'") from e
    from ppairs_lens.data.specs import load_dataset_spec, redraw

    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    spec = ModelSpec.coerce(model)
    if not isinstance(dataset, Dataset):
        data = load_dataset_spec(dataset, max_pairs=max_pairs)
    elif max_pairs is None:
        # as given: drawing again would forget the whole dataset (and store) a limit drew from
        data = dataset
    else:
        data = redraw(dataset, max_pairs)
    out = str(Path(out).expanduser().resolve())
    started = not ray.is_initialized()
    if started:
        if address is None:
            ray.init(num_cpus=math.ceil(n_workers * cpus_per_worker), include_dashboard=False)
        else:
            ray.init(address=address)
    try:
        task = ray.remote(num_cpus=cpus_per_worker, num_gpus=gpus_per_worker)(harvest_shard_spec)
        data_ref = ray.put(data)
        refs = [task.remote(spec, data_ref, out, (i, n_workers), template=template,
                            shard_size=shard_size, settings=settings) for i in range(n_workers)]
        reports = ray.get(refs)
    finally:
        if started:
            ray.shutdown()
    from ppairs_lens.activations.pipeline import read_as

    store = read_as(ActivationStore.open(out, whole=True), data)
    if not store.complete:
        raise StoreError(f"{out}: the workers finished but shards {store.missing_shards()[:10]} "
                         "are missing; re-run to finish them")
    return store, list(reports)
