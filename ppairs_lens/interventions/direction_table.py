"""The directions an intervention study runs: the probes' own, then the two nulls.

Ablation and steering both ask the same question of a probe direction (does the judge respond
to it more than to directions that are not the probe's?), so both build the same table: each
probe kind fitted on the training pairs at one read-out (degenerate kinds skipped with a
warning), then isotropic random and variance-matched directions
(:mod:`ppairs_lens.interventions.directions`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from jaxtyping import Float
from torch import Tensor

from ppairs_lens.interventions.conditions import MATCHED_NULL, RANDOM_NULL
from ppairs_lens.interventions.directions import random_directions, variance_matched_directions
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep

__all__ = ["null_directions", "probe_directions"]


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
