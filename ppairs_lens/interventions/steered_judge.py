"""The calibrated zero-shot judge under many steering vectors, one pass per block of them.

Vector ``j`` is added at branch position ``j`` of the read-out token (the prompt's last
token) at every hook point of ``hooks`` (:func:`ppairs_lens.interventions.steering.batched_steering_hooks`),
so all vectors share each prompt's prefix, as in the batched ablation
(:func:`ppairs_lens.interventions.batched.judge_under_directions`).

For comparisons the judge is swap-calibrated, ``z = (ld_original - ld_swapped) / 2``. A vector
that says "item 1 is better" in the original order says "item 2 is better" in the swapped one,
so the swapped prompts get ``-v``: adding the same ``v`` to both orders would only move the
position bias, which the calibration cancels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.prompts import Template, build_contrast_pairs
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import DirectionError
from ppairs_lens.interventions.steering import batched_steering_hooks
from ppairs_lens.judges.calibration import swap_calibrated_logodds
from ppairs_lens.interventions.batched import logodds_per_branch
from ppairs_lens.judges.zero_shot import swapped_dataset
from ppairs_lens.models.hook_points import Preset

__all__ = ["judge_under_steering"]


def _logodds(bridge, pairs, vectors, hooks, settings, chunk, desc) -> Float[np.ndarray, "pair D"]:
    return logodds_per_branch(bridge, pairs, vectors,
                              lambda b: batched_steering_hooks(bridge, b, hooks), settings, chunk,
                              desc)


@torch.inference_mode()
def judge_under_steering(
    bridge, dataset: Dataset, template: Template | None, vectors: Float[Tensor, "D d_model"],
    hooks: Preset | Sequence[str], *, settings: HarvestSettings = HarvestSettings(),
    vectors_per_pass: int | None = None, desc: str = "steered judge",
) -> dict[str, np.ndarray | None]:
    """``{"z", "ld_original", "ld_swapped"}`` per record and vector (``[record, D]``; the
    swapped one None for statements), each vector added as given (not normalised) at the
    read-out token; a zero row is the unsteered judge."""
    v = torch.as_tensor(vectors).detach().float()
    if not torch.isfinite(v).all():  # before any prompt is built or run
        raise DirectionError("steering vectors hold NaN or inf (a non-finite coefficient "
                             "alpha, or direction); every vector must be finite")
    chunk = int(vectors_per_pass or v.shape[0])
    pairs = build_contrast_pairs(bridge.tokenizer, dataset, template)
    ld_o = _logodds(bridge, pairs, v, hooks, settings, chunk, desc)
    if dataset.kind != "comparison":
        return {"z": ld_o, "ld_original": ld_o, "ld_swapped": None}
    swapped = build_contrast_pairs(bridge.tokenizer, swapped_dataset(dataset), template)
    ld_s = _logodds(bridge, swapped, -v, hooks, settings, chunk, f"{desc}, swapped")
    return {"z": swap_calibrated_logodds(ld_o, ld_s), "ld_original": ld_o, "ld_swapped": ld_s}
