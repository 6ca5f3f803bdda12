"""Many ablations in one pass: a different direction at each read-out position.

:func:`ppairs_lens.activations.runner.run_branches` runs each prompt's prefix once, then reads
``D`` branch tokens appended to it, each seeing the prefix and itself only; with
``final_hooks`` they are the whole sequence of their pass. :func:`batched_rejection_hooks`
rejects ``r_j`` at branch position ``j`` at every hook point of a preset, so one pass
evaluates ``D`` ablations sharing the prefix's cache (a zero direction is the baseline).

Only **the read-out token** is ablated (``positions="last"`` of
:func:`ppairs_lens.interventions.ablation.ablate`): the prefix stays clean, which is what lets
``D`` directions share it; ``positions="all"`` needs a full forward per direction.
:func:`judge_under_directions` gives the calibrated zero-shot judge's log-odds under them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.prompts import Template, build_contrast_pairs
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import PPairsError
from ppairs_lens.interventions.ablation import direction_rows
from ppairs_lens.judges.calibration import swap_calibrated_logodds
from ppairs_lens.judges.zero_shot import choice_logodds_of, swapped_dataset
from ppairs_lens.models.backend import resolve_hooks
from ppairs_lens.models.hook_points import Hook, Preset, check_hook_names, hook_points

__all__ = ["batched_rejection_hooks", "judge_under_branches", "judge_under_direction_sets",
           "judge_under_directions", "logodds_per_branch", "unit_rows"]


def unit_rows(directions: Float[Tensor, "D d_model"]) -> Float[Tensor, "D d_model"]:
    """Each row normalised to unit length (float32 or wider); zero rows stay zero."""
    r = direction_rows(directions)
    norms = r.norm(dim=-1, keepdim=True)
    return torch.where(norms > 0, r / norms.clamp_min(torch.finfo(r.dtype).tiny), r)


def _position_hook(basis: Float[Tensor, "D d_model"], name: str) -> Callable:
    """A hook rejecting ``basis[j]`` at position ``j`` of a ``[batch, D, d_model]`` pass."""

    def hook(x: Float[Tensor, "batch pos d_model"], hook=None) -> Tensor:
        if x.ndim != 3 or x.shape[1] != basis.shape[0] or x.shape[2] != basis.shape[1]:
            raise PPairsError(f"batched ablation at {name}: expected [batch, {basis.shape[0]}, "
                              f"{basis.shape[1]}] (one position per direction), got "
                              f"{tuple(x.shape)}; use it as final_hooks of run_branches")
        work = torch.promote_types(x.dtype, torch.float32)
        b = basis.to(device=x.device, dtype=work)
        xw = x.to(work)
        return (xw - (xw * b).sum(-1, keepdim=True) * b).to(x.dtype)

    return hook


def batched_rejection_hooks(bridge, directions: Float[Tensor, "D d_model"],
                            preset: Preset | Sequence[str] = "paper") -> list[Hook]:
    """Hooks rejecting ``directions[j]`` at position ``j`` at every hook point of ``preset``,
    as ``final_hooks`` of :func:`run_branches` with ``D`` branches (a zero row: untouched)."""
    basis = unit_rows(directions)
    if basis.shape[1] != bridge.cfg.d_model:
        raise PPairsError(f"directions have dimension {basis.shape[1]}, the model's d_model is "
                          f"{bridge.cfg.d_model}")
    names = hook_points(preset, bridge.cfg.n_layers)
    check_hook_names(bridge, names)
    return resolve_hooks(bridge, [(n, _position_hook(basis, n)) for n in names])


def logodds_per_branch(bridge, pairs, rows: Tensor, make_hooks: Callable[[Tensor], list],
                       settings, chunk: int, desc: str = "prompted judge"
                       ) -> Float[np.ndarray, "pair D"]:
    """logit(choice 1) - logit(choice 2) per pair and row of ``rows`` (a direction to remove,
    a vector to add), ``chunk`` rows a call, row ``j`` a branch ``make_hooks(block)`` treats.
    The progress bar shows the branch count: a prompt's rate falls as its branches grow."""
    out = []
    for start in range(0, rows.shape[0], chunk):
        block = rows[start:start + chunk]
        out.append(choice_logodds_of(bridge, pairs, settings=settings, n_branch=block.shape[0],
                                     final_hooks=make_hooks(block),
                                     desc=f"{desc}, {block.shape[0]} read-outs each"
                                     ).reshape(len(pairs), -1))
    return np.concatenate(out, axis=1)


@torch.inference_mode()
def judge_under_directions(
    bridge, dataset: Dataset, template: Template | None, directions: Float[Tensor, "D d_model"],
    preset: Preset | Sequence[str] = "paper", *, settings: HarvestSettings = HarvestSettings(),
    directions_per_pass: int | None = None,
) -> dict[str, np.ndarray | None]:
    """The zero-shot judge's log-odds per record under each direction's ablation.

    ``{"z", "ld_original", "ld_swapped"}``, each ``[record, D]`` (swapped None for
    statements): ``ld`` = logit(choice 1) - logit(choice 2) at the read-out token; for
    comparisons ``z = (ld_original - ld_swapped) / 2``, the swap-calibrated log-odds that item 1
    is preferred (:func:`ppairs_lens.judges.calibration.swap_calibrated_logodds`), for
    statements the raw ``ld``. A zero row is the unablated judge; ``directions_per_pass``:
    directions per :func:`run_branches` call (None: all at once).
    """
    r = unit_rows(directions)
    return judge_under_branches(bridge, dataset, template, r,
                                lambda b: batched_rejection_hooks(bridge, b, preset),
                                settings=settings, per_pass=directions_per_pass)


@torch.inference_mode()
def judge_under_direction_sets(
    bridge, dataset: Dataset, template: Template | None,
    sets: Sequence[tuple[Float[Tensor, "D d_model"], Preset | Sequence[str]]], *,
    settings: HarvestSettings = HarvestSettings(), directions_per_pass: int | None = None,
    desc: str = "ablated judge",
) -> dict[str, np.ndarray | None]:
    """:func:`judge_under_directions` for several ``(directions, preset)`` sets in one pass
    (the costly prefixes run once, not once a set): columns are the sets' directions in
    order, each rejected only at its own set's hook points."""
    if not sets:
        raise PPairsError("judge_under_direction_sets needs at least one set of directions")
    per_set = [(unit_rows(r), hook_points(p, bridge.cfg.n_layers)) for r, p in sets]
    d = bridge.cfg.d_model
    if any(r.shape[1] != d for r, _ in per_set):
        raise PPairsError(f"directions have dimension {[r.shape[1] for r, _ in per_set]}, "
                          f"the model's d_model is {d}")
    names = list(dict.fromkeys(n for _, pts in per_set for n in pts))
    check_hook_names(bridge, names)
    blocks = []
    for r, pts in per_set:  # [D_set, point, d]: the set's rows where it acts, zeros elsewhere
        at = torch.tensor([n in pts for n in names], dtype=r.dtype)
        blocks.append(r[:, None, :] * at[None, :, None])
    rows = torch.cat(blocks)

    def hooks(block: Tensor) -> list[Hook]:
        # block[j, p] is rejected at branch position j at hook point names[p] (zero: left alone)
        return resolve_hooks(bridge, [(n, _position_hook(block[:, p], n))
                                      for p, n in enumerate(names)])

    return judge_under_branches(bridge, dataset, template, rows, hooks, settings=settings,
                                per_pass=directions_per_pass, desc=desc)


@torch.inference_mode()
def judge_under_branches(bridge, dataset: Dataset, template: Template | None, rows: Tensor,
                         make_hooks: Callable[[Tensor], list], *,
                         settings: HarvestSettings = HarvestSettings(),
                         per_pass: int | None = None, desc: str = "prompted judge"
                         ) -> dict[str, np.ndarray | None]:
    """The calibrated judge of :func:`judge_under_directions` with ``rows[j]`` treated by
    ``make_hooks(block)`` at branch ``j``, the same in both orders (a rejection, an erasure:
    sign-free)."""
    chunk = int(per_pass or rows.shape[0])
    pairs = build_contrast_pairs(bridge.tokenizer, dataset, template)
    n = len(pairs)
    calibrate = dataset.kind == "comparison"
    if calibrate:
        pairs = pairs + build_contrast_pairs(bridge.tokenizer, swapped_dataset(dataset), template)
    ld = logodds_per_branch(bridge, pairs, rows, make_hooks, settings, chunk, desc)
    if not calibrate:
        return {"z": ld, "ld_original": ld, "ld_swapped": None}
    ld_o, ld_s = ld[:n], ld[n:]
    return {"z": swap_calibrated_logodds(ld_o, ld_s), "ld_original": ld_o, "ld_swapped": ld_s}

