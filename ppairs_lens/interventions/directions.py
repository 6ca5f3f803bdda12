"""The directions an intervention study runs: the probes' own, the two nulls, a positive control.

Ablation and steering both ask whether the judge responds to a probe direction more than to
directions that are not the probe's, so both build the same table: each probe kind fitted at
one read-out (degenerate kinds skipped with a warning), then the nulls. Removing *any*
direction changes a model a little; uniform random directions give the null distribution, and
variance-matched ones the null for directions that, like a probe's, live where the residual
stream varies. Removing the choice tokens' unembedding difference after the final norm makes
their logits equal: an ablation that must move the answer to 0.5.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.prompts import Template, build_contrast_pairs
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import PPairsError
from ppairs_lens.interventions.ablation import unembedding_direction
from ppairs_lens.interventions.conditions import MATCHED_NULL, RANDOM_NULL
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep

__all__ = ["choice_unembedding_direction", "null_directions", "probe_directions",
           "random_directions", "variance_matched_directions"]


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

    ``g' X_c`` with ``g' ~ N(0, I_n)`` over the centred rows ``X_c`` has covariance
    ``X_c^T X_c`` (proportional to ``Sigma``), so no ``d x d`` square root is formed.
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


def probe_directions(acts_train: Float[Tensor, "n 2 layer d"], labels_train, layer: int,
                     kinds: Sequence[str], *, C: float, name: str
                     ) -> tuple[SweepProbes, list[str], list[Tensor]]:
    """``(probes, kinds kept, unit directions)`` fitted on the training pairs at ``layer``."""
    probes = fit_sweep(acts_train[:, :, [layer]], labels_train, tuple(kinds), C=C,
                       layers=[layer])
    names, rows = [], []
    for k in kinds:
        if bool(probes.degenerate[k][0]):
            warnings.warn(f"{name}: the {k} probe is degenerate at read-out {layer}; skipped")
            continue
        names.append(k)
        rows.append(probes.directions[k][0].float())
    return probes, names, rows


def null_directions(acts_train: Float[Tensor, "n 2 layer d"], layer: int, n_random: int,
                    n_matched: int, seed: int) -> tuple[list[str], list[str], list[Tensor]]:
    """``(names, kinds, rows)``: ``n_random`` isotropic and ``n_matched`` variance-matched
    directions (from the training contrasts' covariance at ``layer``)."""
    acts = acts_train[:, :, layer].double()
    names, kinds, rows = [], [], []
    for null, dirs in ((RANDOM_NULL, random_directions(n_random, acts.shape[-1], seed)),
                       (MATCHED_NULL, variance_matched_directions(acts[:, 0] - acts[:, 1],
                                                                  n_matched, seed + 1))):
        names += [f"{null}_{i:03d}" for i in range(len(dirs))]
        kinds += [null] * len(dirs)
        rows += list(dirs)
    return names, kinds, rows
