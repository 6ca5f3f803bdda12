"""What a store was harvested from and how: :class:`StoreMeta`, the store's ``metadata.json``.

Typed, so that a misspelt key fails where it is written. The file's content stays exactly what
it was when the metadata was a dict: the same keys in the same order (a store's fingerprint
digests the file's bytes), unknown keys kept in :attr:`StoreMeta.extra`, and a file's absent
optional keys left absent when it is written again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["IDENTITY_FIELDS", "REQUIRED_FIELDS", "StoreMeta"]

#: Fields that must agree between a store on disk and a harvest that wants to write into it.
#: ``model_dtype`` among them: a model loaded in bfloat16 computes other activations than the
#: same weights in float32, and one store must not hold both.
IDENTITY_FIELDS = ("model", "dataset_fingerprint", "template_hash", "hook_names", "d_model",
                   "dtype", "n_pairs", "shard_size", "model_dtype")
#: Fields every ``metadata.json`` has (every harvest has written them): a file without one is
#: not a store's.
REQUIRED_FIELDS = ("model", "dataset_fingerprint", "template_hash", "hook_names", "d_model",
                   "dtype", "n_pairs", "shard_size", "dataset")

#: Fields held as tuples (frozen), written as JSON lists.
_TUPLES = ("hook_names", "readout_widths")
#: Fields a store writes only when set: a store in its dataset's own order keeps the bytes
#: (and so the fingerprint) it had before a pair limit's order could be recorded.
_WRITTEN_WHEN_SET = ("sampling",)


@dataclass(frozen=True, kw_only=True)
class StoreMeta:
    """A store's ``metadata.json``, keyword arguments only. Fields in the order a harvest
    writes them; those without a default are in every store (:data:`REQUIRED_FIELDS`)."""

    # Identity (IDENTITY_FIELDS): a harvest may resume into a store only if all of them agree.
    model: str
    # The dataset: its name for tables and result keys (``dataset``), its fingerprint for
    # checks against the records an analysis re-runs the model on; ``dataset_source`` is the
    # file it was read from (stores of one file are harvested together), ``aspect`` and
    # ``kind`` ("comparison" / "statement") what is asked.
    dataset: str
    dataset_fingerprint: str
    dataset_source: str | None = None
    aspect: str | None = None
    kind: str | None = None
    # The prompt: ``template`` is ``Template.describe()`` (enough to rebuild it,
    # :func:`ppairs_lens.activations.pipeline.store_template`), ``template_hash`` checks that.
    template: Mapping[str, Any] | None = None
    template_hash: str
    # The tensors: read-outs in forward order, the model's depth, each vector's width (d_model,
    # or an SAE's d_sae) and the dtype they are stored in.
    hook_names: tuple[str, ...]
    n_layers: int | None = None
    d_model: int
    readout_widths: tuple[int, ...] | None = None
    dtype: str
    # Layout: pairs per shard; how the harvest ran (stringified ``HarvestSettings``).
    shard_size: int
    # A whole dataset stored in a seeded pair limit's order (None: the dataset's own order):
    # the limit's ``seed`` and ``per_context``, and each pair's ``file_order`` (its place in
    # the file's order), so that the store opens as the pairs harvested so far, in that order.
    sampling: Mapping[str, Any] | None = None
    harvest_settings: Mapping[str, str] | None = None
    # The model's own dtype when the harvest ran (not the stored one): the judge answers a
    # store keeps pair with answers computed later only from a model loaded the same way.
    model_dtype: str | None = None
    # Set by ``ActivationStore.create``: the number of pairs, then provenance.
    n_pairs: int | None = None
    package_version: str | None = None
    created: str | None = None
    # Keys this class does not know (a newer writer's), kept so a rewrite loses nothing.
    extra: Mapping[str, Any] = field(default_factory=dict)
    # The keys of the file this was read from, in order (empty: built in code, every field is
    # written). Not compared: two metas are equal when their values are.
    keys: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The content of ``metadata.json``: a read file's keys in its order (then any field
        set since, such as ``n_pairs``), else every field in harvest order; then ``extra``."""
        names = [f.name for f in fields(self) if f.name not in ("extra", "keys")
                 and not (f.name in _WRITTEN_WHEN_SET and getattr(self, f.name) is None)]
        if self.keys:
            names = [k for k in self.keys if k in names or k in self.extra] + \
                [n for n in names if n not in self.keys and getattr(self, n) is not None]
        out: dict[str, Any] = {}
        for k in names:
            v = self.extra[k] if k in self.extra else getattr(self, k)
            out[k] = list(v) if k in _TUPLES and v is not None else v
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out

    @classmethod
    def from_json(cls, meta: Mapping[str, Any]) -> StoreMeta:
        """A ``metadata.json``'s content (or a dict built in a test) as a StoreMeta."""
        known = {f.name for f in fields(cls)} - {"extra", "keys"}
        values = {k: (tuple(v) if k in _TUPLES and v is not None else v)
                  for k, v in meta.items() if k in known}
        extra = {k: v for k, v in meta.items() if k not in known}
        return cls(**values, extra=extra, keys=tuple(meta))
