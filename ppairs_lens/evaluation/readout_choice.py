"""The read-out of a store split's probes, chosen without reading its test set.

A layer setting is ``"val"`` or an int read-out index (forced). With ``"val"``, a store's
probes are scored on a validation split of *its own* training pairs (whole leak groups on
one side, :func:`ppairs_lens.evaluation.layer_selection.validation_scores`) and each kind
takes the best read-out there (:func:`chosen_layers`); a view that needs one read-out for
several stores takes the best validation score averaged over stores and kinds
(:func:`common_layer`). :func:`split_half_directions` fits one read-out on two leak-free
halves of the training pairs (a kind's self-agreement). Used by the cross-dataset analysis.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ppairs_lens.activations.store_sets import readout_index
from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.layer_selection import select_layer, validation_scores
from ppairs_lens.evaluation.store_split import StoreSplit, pair_items, validation_split
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["LAYER_RULES", "check_layer_setting", "chosen_layers", "common_layer", "layer_rule",
           "layer_setting", "split_half_directions", "store_validation_scores"]

#: Layer settings that are not a fixed read-out index.
LAYER_RULES: tuple[str, ...] = ("val",)


def layer_rule(layer: int | str) -> str:
    """``"val"`` (chosen on validation) or ``"fixed"`` (an int read-out index)."""
    return "val" if layer == "val" else "fixed"


def layer_setting(text: str) -> int | str:
    """A layer setting from text (a command-line option): "val" or an int read-out index;
    ValueError otherwise (argparse reports it as an invalid value)."""
    return text if text == "val" else int(text)


def check_layer_setting(layer: Any) -> None:
    """Refuse a ``layer`` that is neither a read-out index nor ``"val"``."""
    if isinstance(layer, bool) or not (isinstance(layer, (int, np.integer)) or layer == "val"):
        raise ProbeError(f"layer must be 'val' (chosen on a validation split of each source's "
                         f"training pairs) or an int read-out index, got {layer!r}")


def store_validation_scores(sp: StoreSplit, kinds: tuple[str, ...], *, seed: int,
                             val_size: float, **fit_kw: Any) -> dict[str, np.ndarray]:
    """``{kind: [read-out]}`` validation accuracy of probes fitted on the rest of ``sp``'s
    training pairs (split by ``sp.split_used``, groups kept whole); the test pairs are never
    read."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # degenerate read-outs: NaN, never chosen
        return validation_scores(sp.acts_train, sp.labels_train, sp.groups_train,
                                 pair_items(sp.pairs_train), kinds=kinds, val_size=val_size,
                                 seed=seed, by=sp.split_used, **fit_kw)


def chosen_layers(val_scores: dict[str, np.ndarray] | None, layer: int | str,
                  kinds: tuple[str, ...], n_readouts: int) -> dict[str, int]:
    """Read-out index per kind: the validation argmax, or the forced ``layer``."""
    if layer_rule(layer) == "fixed":
        li = readout_index(int(layer), n_readouts)
        return {k: li for k in kinds}
    if val_scores is None:
        raise ProbeError("layer='val' needs the validation scores of each source")
    return {k: select_layer(val_scores[k]) for k in kinds}


def common_layer(val_scores: list[dict[str, np.ndarray] | None], layer: int | str,
                 kinds: tuple[str, ...], n_readouts: int) -> int:
    """One read-out for views that compare every dataset at once: the forced ``layer``, or
    the best validation accuracy averaged over sources and kinds (NaN ignored)."""
    if layer_rule(layer) == "fixed":
        return readout_index(int(layer), n_readouts)
    stack = np.stack([v[k] for v in val_scores if v is not None for k in kinds])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # all-NaN read-outs stay NaN
        return select_layer(np.nanmean(stack, axis=0))


def split_half_directions(sp: StoreSplit, li: int, kinds: tuple[str, ...], *, seed: int,
                          **fit_kw: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Directions fitted on two disjoint halves of the held-in pairs at read-out ``li``,
    split as the test split was (whole groups / items on one side).

    Their cosine is how well one probe kind agrees with *itself* on the same task given half
    the data: the ceiling to read cross-dataset cosines against (a kind whose split-half
    |cos| is ~0 cannot show agreement between datasets, whatever the truth). Empty when the
    halves cannot be split or fitted.
    """
    try:
        h1, h2 = validation_split(sp.groups_train, pair_items(sp.pairs_train), val_size=0.5,
                                  seed=seed + 1, by=sp.split_used)
        dirs = []
        for h in (h1, h2):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                sw = fit_sweep(sp.acts_train[h][:, :, [li]], sp.labels_train[h], kinds,
                               groups=[sp.groups_train[i] for i in h], seed=seed, **fit_kw)
            dirs.append(sw.directions)
    except ProbeError:
        return {}
    return {k: (dirs[0][k][0].numpy(), dirs[1][k][0].numpy()) for k in kinds}
