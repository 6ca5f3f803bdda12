"""Several activation stores read together, one per dataset, as a cross-dataset analysis does.

Their probes and directions can only be compared when the stores share a model, ``d_model``
and read-outs (:func:`check_comparable`); :func:`unique_names` names each store by its dataset
(its folder where two hold the same dataset) and :func:`readout_index` resolves a read-out
index that may count from the end.
"""

from __future__ import annotations

from collections.abc import Sequence

from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.errors import StoreError

__all__ = ["check_comparable", "readout_index", "unique_names"]


def check_comparable(stores: Sequence[ActivationStore]) -> None:
    """Refuse fewer than two stores, or stores not of one model, one d_model and the same
    read-outs."""
    if len(stores) < 2:
        raise StoreError(f"cross-dataset transfer needs at least 2 stores, got {len(stores)}")
    first = stores[0]
    for s in stores[1:]:
        for key, what in (("model", "model"), ("d_model", "d_model"),
                          ("hook_names", "read-outs (hook_names)")):
            if getattr(s.meta, key) != getattr(first.meta, key):
                a, b = getattr(first.meta, key), getattr(s.meta, key)
                if key == "hook_names":
                    a, b = f"{len(a or [])} read-outs", f"{len(b or [])} read-outs"
                raise StoreError(
                    f"all stores must come from the same model with the same d_model and "
                    f"read-outs: {first.path} has {what} {a!r}, {s.path} has {b!r}. Directions "
                    f"and probes of different models live in different spaces")


def unique_names(stores: Sequence[ActivationStore]) -> list[str]:
    """Dataset names; the store folder name where two stores hold the same dataset name."""
    names = [s.meta.dataset for s in stores]
    return [s.path.name if names.count(n) > 1 else n for n, s in zip(names, stores)]


def readout_index(layer: int, n_readouts: int) -> int:
    """``layer`` as an index in ``0..n_readouts - 1`` (negative ones count from the end)."""
    if not -n_readouts <= layer < n_readouts:
        raise StoreError(f"the stores have read-outs 0..{n_readouts - 1} (or -{n_readouts}..-1); "
                         f"layer {layer} is out of range")
    return layer % n_readouts
