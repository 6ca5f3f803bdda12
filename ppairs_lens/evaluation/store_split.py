"""The held-in / held-out split of an activation store that every analysis scores on.

:func:`split_store` loads a store, drops tied pairs and splits the rest by context (or by
pair or item) with :func:`ppairs_lens.evaluation.splits.train_test_split_pairs`; the same
arguments always give the same split, so separate analyses see the same held-out pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import TIE
from ppairs_lens.evaluation.splits import train_test_split_pairs

__all__ = ["StoreSplit", "split_store"]


@dataclass
class StoreSplit:
    """Held-in / held-out pairs of one store, ties dropped."""

    name: str
    acts_train: Float[Tensor, "n_train 2 layer d_model"]
    acts_test: Float[Tensor, "n_test 2 layer d_model"]
    labels_train: np.ndarray
    labels_test: np.ndarray
    pairs_test: list[dict]
    pairs_train: list[dict]


def split_store(store: ActivationStore, *, test_size: float, split_by: str, seed: int,
                layers: Sequence[int] | None = None) -> StoreSplit:
    """Load a store (``layers``: only those read-outs), drop ties and split it by
    ``split_by`` ("context", "pair", "item" or "auto": contexts if shared, else items if
    they recur, else pairs)."""
    acts = store.load(layers)
    pairs = store.pairs()
    labels = np.array([p["label"] for p in pairs])
    keep = np.flatnonzero(labels != TIE)
    acts, labels = acts[keep], labels[keep]
    pairs = [pairs[i] for i in keep]
    contexts = [p["context_id"] for p in pairs]
    # "auto" needs the items too: it splits by item where contexts are not shared.
    items = ([(p.get("item1_id"), p.get("item2_id")) for p in pairs]
             if split_by in ("item", "auto") and all(p.get("item1_id") is not None for p in pairs)
             else None)
    train, test = train_test_split_pairs(contexts, item_ids=items, test_size=test_size, seed=seed,
                                         by=split_by)
    return StoreSplit(store.meta["dataset"], acts[train], acts[test], labels[train],
                      labels[test], [pairs[i] for i in test], [pairs[i] for i in train])
