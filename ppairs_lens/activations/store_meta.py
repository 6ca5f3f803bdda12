"""What a store was harvested from and how: :class:`StoreMeta`, the store's ``metadata.json``.

Typed, so that a misspelt key fails where it is written. The file keeps its keys in their order
(a store's fingerprint digests its bytes), unknown keys in :attr:`StoreMeta.extra`, and absent
optional keys absent when it is written again.
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
#: Fields every ``metadata.json`` has: a file without one is not a store's.
REQUIRED_FIELDS = ("model", "dataset_fingerprint", "template_hash", "hook_names", "d_model",
                   "dtype", "n_pairs", "shard_size", "dataset")

#: Fields held as tuples (frozen), written as JSON lists.
_TUPLES = ("hook_names", "readout_widths")
#: Fields a store writes only when set: a store in its dataset's own order keeps the bytes
#: (and so the fingerprint) it had before a pair limit's order could be recorded.
_WRITTEN_WHEN_SET = ("sampling",)


@dataclass(frozen=True, kw_only=True)
class StoreMeta:
    """A store's ``metadata.json``; fields in the order a harvest writes them."""

    model: str
    # The name for tables and result keys, the fingerprint checked against the records an
    # analysis re-runs the model on, the file read (stores of one file are harvested together),
    # and what is asked (``kind``: "comparison" / "statement").
    dataset: str
    dataset_fingerprint: str
    dataset_source: str | None = None
    aspect: str | None = None
    kind: str | None = None
    # ``Template.describe()`` (rebuilt by :func:`ppairs_lens.activations.pipeline.store_template`)
    template: Mapping[str, Any] | None = None
    template_hash: str
    # Read-outs in forward order; each vector's width (d_model, or an SAE's d_sae); stored dtype.
    hook_names: tuple[str, ...]
    n_layers: int | None = None
    d_model: int
    readout_widths: tuple[int, ...] | None = None
    dtype: str
    shard_size: int
    # A seeded pair limit's order (None: the dataset's own): its ``seed``, ``per_context`` and
    # each pair's ``file_order`` (place in the file), so the store opens as the pairs so far.
    sampling: Mapping[str, Any] | None = None
    harvest_settings: Mapping[str, str] | None = None  # stringified ``HarvestSettings``
    # The model's own dtype (not the stored one): stored judge answers pair with later ones
    # only from a model loaded the same way.
    model_dtype: str | None = None
    n_pairs: int | None = None  # set by ``ActivationStore.create``, with the provenance below
    package_version: str | None = None
    created: str | None = None
    # Keys this class does not know (a newer writer's), kept so a rewrite loses nothing.
    extra: Mapping[str, Any] = field(default_factory=dict)
    # The read file's keys, in order (empty: built in code, every field written); not compared.
    keys: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """A read file's keys in its order (then fields set since), else every field; then
        ``extra``."""
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
        known = {f.name for f in fields(cls)} - {"extra", "keys"}
        values = {k: (tuple(v) if k in _TUPLES and v is not None else v)
                  for k, v in meta.items() if k in known}
        extra = {k: v for k, v in meta.items() if k not in known}
        return cls(**values, extra=extra, keys=tuple(meta))
