"""Directions to intervene along that do not come from a probe: a null and a positive control.

Removing *any* direction from the residual stream changes a model a little; ablating
``n`` directions drawn uniformly on the sphere (:func:`random_directions`) gives the null
distribution a probe direction's effect is read against. Removing the unembedding difference
of a prompt's two choice tokens after the final norm (:func:`choice_unembedding_direction`)
makes the two choice logits equal: an ablation that must move the model's answer to 0.5.
Uniform directions mostly point where the residual stream hardly varies, unlike a probe's;
:func:`variance_matched_directions` draws them from the training features' covariance instead.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.prompts import Template, build_contrast_pairs
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import PPairsError
from ppairs_lens.interventions.ablation import unembedding_direction

__all__ = ["choice_unembedding_direction", "random_directions", "variance_matched_directions"]


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


def variance_matched_directions(features: Float[Tensor, "n d"], n: int, seed: int
                                ) -> Float[Tensor, "n_dir d"]:
    """``n`` unit directions ``Sigma^{1/2} g`` (normalised), ``Sigma`` the covariance of
    ``features`` (e.g. the training contrast differences at the probes' read-out).

    A null for directions that, like a probe's, live where the residual stream varies: uniform
    directions mostly point where it hardly varies. ``g' X_c`` with ``g' ~ N(0, I_n)`` over the
    centred rows ``X_c`` has covariance ``X_c^T X_c`` (proportional to ``Sigma``), so no
    ``d x d`` square root is formed.
    """
    x = torch.as_tensor(features).detach().to(torch.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise PPairsError(f"features must be [n >= 2, d], got shape {tuple(x.shape)}")
    xc = x - x.mean(0, keepdim=True)
    if not torch.isfinite(xc).all() or float(xc.abs().max()) == 0.0:
        raise PPairsError("the features have no finite variance to match")
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(n, x.shape[0], generator=g, dtype=torch.float64) @ xc
    return (r / r.norm(dim=-1, keepdim=True)).float()
