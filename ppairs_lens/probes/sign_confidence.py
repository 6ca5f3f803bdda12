"""How sure is the sign of a label-free direction: a bootstrap of the training pairs.

The labels choose only the sign of a PCA direction
(:func:`~ppairs_lens.probes.estimators.orient_to_targets`); where the training correlation is
near zero that is a coin flip, and a PCA curve can jump between ``acc`` and ``1 - acc`` from
one layer to the next.
:func:`sign_confidence` is the share of bootstrap resamples (whole groups when given, so
recurring items are not independent evidence) in which the correlation keeps the chosen sign:
~1 = decided by the data, ~0.5 = not. The direction is held fixed: only the sign is resampled.

Fewer than :data:`MIN_SIGN_GROUPS` resampling units give NaN: a handful of groups have so few
distinct resamples that "1.0" would claim evidence that is not there (the same floor as
``MIN_BOOTSTRAP_GROUPS`` in :mod:`ppairs_lens.evaluation.bootstrap`, which this lower layer
cannot import).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.errors import ProbeError

__all__ = ["MIN_SIGN_GROUPS", "N_SIGN_BOOT", "bootstrap_weights", "sign_confidence"]

#: Bootstrap resamples for the sign confidence.
N_SIGN_BOOT: int = 200
#: Fewest resampling units a sign confidence needs (else NaN: not resolved). Lower than the
#: 20 groups a claim's CI needs: a sign vote reads only which side most resamples fall on.
MIN_SIGN_GROUPS: int = 10


def bootstrap_weights(n: int, groups: Sequence | None, n_boot: int, seed: int
                      ) -> Float[np.ndarray, "b n"]:
    """How often each of ``n`` pairs is drawn in each of ``n_boot`` resamples: whole groups
    drawn with replacement (as many draws as groups), or pairs when ``groups`` is None."""
    if n_boot < 1:
        raise ProbeError(f"n_boot must be at least 1, got {n_boot}")
    if groups is None:
        codes = np.arange(n)
    else:
        if len(groups) != n:
            raise ProbeError(f"{len(groups)} groups for {n} training pairs")
        codes = np.unique(np.asarray([str(g) for g in groups]), return_inverse=True)[1]
    n_groups = int(codes.max()) + 1 if n else 0
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_groups, size=(n_boot, n_groups))
    counts = np.stack([np.bincount(row, minlength=n_groups) for row in draws])
    return counts[:, codes].astype(np.float64)


def sign_confidence(proj: Float[Tensor, "*b n"], y: Float[Tensor, "n"],
                    groups: Sequence | None = None, *, n_boot: int = N_SIGN_BOOT, seed: int = 0
                    ) -> Float[Tensor, "*b"]:
    """Share of bootstrap resamples whose projection-label covariance is positive (exactly
    zero counts one half); ``proj``: training projections on the *oriented* direction (on the
    full training set their covariance with ``y`` is positive by construction); ``y``: 1 where
    item 1 is preferred, else 0."""
    w = torch.from_numpy(bootstrap_weights(proj.shape[-1], groups, n_boot, seed)).to(proj)
    n_units = proj.shape[-1] if groups is None else len({str(g) for g in groups})
    if n_units < MIN_SIGN_GROUPS:
        return torch.full(proj.shape[:-1], float("nan"), dtype=proj.dtype, device=proj.device)
    y = y.to(proj)
    y_bar = (w @ y) / w.sum(-1).clamp_min(1.0)               # [b] weighted label mean
    cov = proj @ (w * (y[None, :] - y_bar[:, None])).T      # [*b, boot]
    agree = (cov > 0).to(proj) + 0.5 * (cov == 0).to(proj)
    return agree.mean(-1)
