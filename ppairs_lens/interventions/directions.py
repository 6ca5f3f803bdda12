"""Directions to intervene along that do not come from a probe: a null and a positive control.

Removing *any* direction from the residual stream changes a model a little; ablating
``n`` directions drawn uniformly on the sphere (:func:`random_directions`) gives the null
distribution a probe direction's effect is read against. Removing the unembedding difference
of a prompt's two choice tokens after the final norm (:func:`choice_unembedding_direction`)
makes the two choice logits equal: an ablation that must move the model's answer to 0.5.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.prompts import Template, build_contrast_pairs
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import PPairsError
from ppairs_lens.interventions.ablation import unembedding_direction

__all__ = ["choice_unembedding_direction", "random_directions"]


def random_directions(n: int, d: int, seed: int) -> Float[Tensor, "n d"]:
    """``n`` unit directions uniform on the sphere (own generator; no global RNG)."""
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(n, d, generator=g, dtype=torch.float64)
    return (r / r.norm(dim=-1, keepdim=True)).float()


def choice_unembedding_direction(bridge, dataset: Dataset, template: Template
                                 ) -> Float[Tensor, "d_model"]:
    """The unembedding difference of the two choice tokens ``dataset``'s prompts end in
    (one pair for every record, else an error)."""
    finals = {p.final_ids for p in build_contrast_pairs(bridge.tokenizer, dataset, template)}
    if len(finals) != 1:
        raise PPairsError(f"{dataset.name}: the choice tokens differ between records "
                          f"({sorted(finals)[:3]}); the positive control needs one pair")
    return unembedding_direction(bridge, *next(iter(finals)))
