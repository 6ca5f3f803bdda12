"""LEACE concept erasure (Belrose et al. 2023) as an intervention beside vector rejection.

Rejection (:mod:`ppairs_lens.interventions.ablation`) removes one chosen direction
orthogonally. LEACE removes *all* linearly available information about the labels with the
least-squares smallest change (an oblique projection, whitened by the features' covariance);
the eraser comes from the ``concept-erasure`` package (``pip install ppairs-lens[erasure]``).

:func:`fit_leace` fits it on a layer's contrast differences (the features every probe reads)
with the pair labels as the concept. The eraser is affine, ``x -> x - P (x - b)``; applied to
each side of a pair it removes ``P (x0 - x1)`` from their difference, so no linear probe of the
differences can beat chance afterwards. :func:`leace_hooks` / :func:`erase` apply it while the
model runs, with the presets, hook names and positions of :func:`~ppairs_lens.interventions.ablation.ablate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.errors import DirectionError
from ppairs_lens.interventions.ablation import Positions
from ppairs_lens.models.backend import resolve_hooks
from ppairs_lens.models.hook_points import PRESETS, Hook, Preset, check_hook_names, hook_points
from ppairs_lens.probes.features import as_acts, contrast_features, labels_to_targets, side_means

__all__ = ["fit_leace", "apply_eraser", "leace_hooks", "erase"]


def _eraser_class():
    try:
        from concept_erasure import LeaceEraser
    except ImportError:
        raise DirectionError("LEACE needs the concept-erasure package: pip install "
                             "'ppairs-lens[erasure]' (or pip install concept-erasure)") from None
    return LeaceEraser


def fit_leace(acts: Float[Tensor, "n 2 d"], labels: Any):
    """A ``concept_erasure.LeaceEraser`` fitted on one layer's contrast differences (centred
    by the side means) with the labels 1 / 2 as the concept (float64 fit)."""
    x = as_acts(acts, dtype=torch.float64).cpu()
    if x.ndim != 3:
        raise DirectionError(f"fit_leace takes one layer's activations [n, 2, d], got shape "
                             f"{tuple(x.shape)}")
    diffs = contrast_features(x, *side_means(x))
    z = labels_to_targets(labels).to(torch.float64)
    return _eraser_class().fit(diffs, z)


def apply_eraser(eraser, x: Float[Tensor, "... d"]) -> Float[Tensor, "... d"]:
    """``eraser(x)`` computed in float32 or wider on ``x``'s device, cast back to its dtype."""
    work = torch.promote_types(x.dtype, torch.float32)
    right = eraser.proj_right.to(device=x.device, dtype=work)
    left = eraser.proj_left.to(device=x.device, dtype=work)
    xw = x.to(work)
    delta = xw - eraser.bias.to(device=x.device, dtype=work) if eraser.bias is not None else xw
    return (xw - (delta @ right.mH) @ left.mH).to(x.dtype)


def _hook_fn(eraser, name: str, positions: Positions) -> Callable:
    def hook(x: Tensor, hook=None) -> Tensor:
        if x.shape[-1] != eraser.proj_left.shape[0]:
            raise DirectionError(f"LEACE at {name}: activation has last dimension "
                                 f"{x.shape[-1]}, the eraser {eraser.proj_left.shape[0]}")
        if positions == "all":
            return apply_eraser(eraser, x)
        out = x.clone()
        out[:, -1] = apply_eraser(eraser, x[:, -1])
        return out

    return hook


def leace_hooks(bridge, eraser, preset: Preset | str | Sequence[str] = "paper",
                positions: Positions = "all") -> list[Hook]:
    """Forward hooks applying ``eraser`` at every hook point of ``preset`` (a preset, a list of
    hook names or one name); ``positions="last"``: the last position of each row only."""
    if positions not in ("all", "last"):
        raise ValueError(f"positions must be 'all' or 'last', got {positions!r}")
    points = [preset] if isinstance(preset, str) and preset not in PRESETS else preset
    names = hook_points(points, bridge.cfg.n_layers)
    check_hook_names(bridge, names)
    return resolve_hooks(bridge, [(n, _hook_fn(eraser, n, positions)) for n in names])


@contextmanager
def erase(bridge, eraser, preset: Preset | str | Sequence[str] = "paper",
          positions: Positions = "all") -> Iterator:
    """``with erase(bridge, fit_leace(acts, labels), "blocks.3.hook_resid_post"): ...``;
    hooks removed on exit."""
    with bridge.hooks(fwd_hooks=leace_hooks(bridge, eraser, preset, positions)):
        yield bridge
