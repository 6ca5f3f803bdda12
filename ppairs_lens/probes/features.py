"""Contrast-pair features: what a probe sees of one comparison.

Side 0 is the prompt ending "... is Choice 1", side 1 the one ending "... is Choice 2". Both
carry a large component that only says *which prompt* it is, the same for every pair;
centring each side by its own mean removes it, so the difference

    feature = (x0 - mu_pos) - (x1 - mu_neg)

keeps only what varies between pairs. The means are the training data's and are reused
unchanged on any data the probe is applied to (re-centring test data by its own means would
leak test statistics). Shapes: one layer ``[n, 2, d]`` or all layers ``[n, 2, layer, d]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from ppairs_lens.data.records import ITEM1, ITEM2, TIE
from ppairs_lens.errors import ProbeError

__all__ = ["as_acts", "side_means", "contrast_features", "labels_to_targets", "drop_ties"]

ArrayLike = Any  # torch.Tensor | np.ndarray | Sequence


def as_acts(acts: ArrayLike, *, dtype: torch.dtype | None = None) -> Tensor:
    """``acts`` as a float tensor ``[n, 2, ...]`` (numpy wrapped without a copy). Half
    precision is upcast to float32 (means of float16 values lose digits), or all to ``dtype``."""
    t = acts if isinstance(acts, Tensor) else torch.as_tensor(np.asarray(acts))
    if not t.is_floating_point():
        t = t.to(torch.float32)
    if dtype is not None:
        t = t.to(dtype)
    elif t.dtype not in (torch.float32, torch.float64):
        t = t.to(torch.float32)
    if t.ndim < 3 or t.shape[1] != 2:
        raise ProbeError(
            f"activations must have shape [n, 2, d] or [n, 2, layer, d] (axis 1 = the two sides "
            f"of a contrast pair), got shape {tuple(t.shape)}")
    return t


def side_means(acts: Float[Tensor, "n 2 *rest"]) -> tuple[Float[Tensor, "*rest"],
                                                          Float[Tensor, "*rest"]]:
    """Per-side means ``(mu_pos, mu_neg)`` over pairs."""
    t = as_acts(acts)
    if t.shape[0] == 0:
        raise ProbeError("cannot compute side means of zero pairs")
    return t[:, 0].mean(dim=0), t[:, 1].mean(dim=0)


def contrast_features(acts: Float[Tensor, "n 2 *rest"], mu_pos: Float[Tensor, "*rest"],
                      mu_neg: Float[Tensor, "*rest"]) -> Float[Tensor, "n *rest"]:
    """Centred differences ``(x0 - mu_pos) - (x1 - mu_neg)``, the means the *training* data's."""
    t = as_acts(acts)
    mu_pos = torch.as_tensor(mu_pos)
    mu_neg = torch.as_tensor(mu_neg)
    rest = tuple(t.shape[2:])
    for name, mu in (("mu_pos", mu_pos), ("mu_neg", mu_neg)):
        if tuple(mu.shape) != rest:
            raise ProbeError(
                f"{name} has shape {tuple(mu.shape)} but the activations' per-side shape is "
                f"{rest} (d_model {rest[-1]} vs {mu.shape[-1] if mu.ndim else 'scalar'})")
    dt = torch.promote_types(t.dtype, mu_pos.dtype)
    x0, x1 = t[:, 0].to(dt), t[:, 1].to(dt)
    return (x0 - mu_pos.to(device=t.device, dtype=dt)) - (x1 - mu_neg.to(device=t.device, dtype=dt))


def _labels_array(labels: ArrayLike) -> np.ndarray:
    """Labels as an int64 numpy vector, refusing anything that is not 0 / 1 / 2."""
    arr = labels.detach().cpu().numpy() if isinstance(labels, Tensor) else np.asarray(labels)
    if arr.dtype == bool:
        raise ProbeError("labels are booleans; use 1 (item 1 preferred) / 2 (item 2) / 0 (tie)")
    arr = arr.reshape(-1) if arr.ndim == 0 else arr
    if arr.ndim != 1:
        raise ProbeError(f"labels must be a 1-D sequence, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.number):
        raise ProbeError(f"labels must be integers 1 / 2 / 0, got dtype {arr.dtype}")
    with np.errstate(invalid="ignore"):
        as_int = arr.astype(np.int64)
    bad = ~np.isin(as_int, (ITEM1, ITEM2, TIE)) | (as_int != arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ProbeError(f"invalid label {arr[i]!r} at index {i}: labels are 1 (item 1 "
                         f"preferred), 2 (item 2 preferred) or 0 (tie)")
    return as_int


def labels_to_targets(labels: ArrayLike) -> Int[Tensor, "n"]:
    """Probe targets: 1 where item 1 is preferred (label 1), 0 where item 2 is; ties refused."""
    arr = _labels_array(labels)
    ties = np.flatnonzero(arr == TIE)
    if ties.size:
        raise ProbeError(f"{ties.size} tie label(s) (0), first at index {int(ties[0])}: probes "
                         f"are fitted and scored without ties; call drop_ties() first")
    return torch.from_numpy((arr == ITEM1).astype(np.int64))


def _take(x: Any, idx: np.ndarray) -> Any:
    """Rows ``idx`` of ``x``, keeping its type (tensor, ndarray, list, tuple)."""
    if isinstance(x, Tensor):
        return x[torch.as_tensor(idx, dtype=torch.long, device=x.device)]
    if isinstance(x, np.ndarray):
        return x[idx]
    if isinstance(x, tuple):
        return tuple(x[int(i)] for i in idx)
    if isinstance(x, Sequence):
        return [x[int(i)] for i in idx]
    raise ProbeError(f"cannot index an object of type {type(x).__name__} by pair")


def drop_ties(acts: ArrayLike, labels: ArrayLike, *others: Any) -> tuple[Any, ...]:
    """``(acts, labels, *others)`` without the tie pairs, each keeping its type; ``others``:
    any per-pair sequences to keep aligned."""
    arr = _labels_array(labels)
    n = len(arr)
    for name, x in (("acts", acts), *((f"others[{i}]", o) for i, o in enumerate(others))):
        if len(x) != n:
            raise ProbeError(f"{name} has {len(x)} rows but there are {n} labels")
    keep = np.flatnonzero(arr != TIE)
    return (_take(acts, keep), _take(labels, keep), *(_take(o, keep) for o in others))
