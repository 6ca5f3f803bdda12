"""From a direction to a calibrated probe: orient it to the labels, fit its probability scale.

The PCA and mass-mean probes find a direction without a probability scale (and PCA without a
sign). :func:`orient_to_targets` flips it so that training projections correlate positively
with "item 1 preferred"; :func:`fit_logistic_scale` fits ``P = sigmoid(scale * projection)``
by a 1-D logistic regression, so their probabilities are calibrated like the supervised
probe's. Both take any leading batch axes, so a sweep scales all layers with the same maths.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

__all__ = ["orient_to_targets", "fit_logistic_scale"]


def orient_to_targets(direction: Float[Tensor, "*b d"], diffs: Float[Tensor, "*b n d"],
                      y: Float[Tensor, "n"]) -> tuple[Float[Tensor, "*b d"], Float[Tensor, "*b n"]]:
    """Flip ``direction`` so the projections correlate positively with ``y`` (1 = item 1).

    Returns the oriented direction and the training projections on it.
    """
    proj = (diffs @ direction.unsqueeze(-1)).squeeze(-1)
    y = y.to(proj)
    sign = torch.sign((proj * (y - y.mean())).sum(dim=-1))
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    return direction * sign.unsqueeze(-1), proj * sign.unsqueeze(-1)


def fit_logistic_scale(proj: Float[Tensor, "*b n"], y: Float[Tensor, "n"], *, lam: float = 1.0,
                       n_iter: int = 90) -> Float[Tensor, "*b"]:
    """Scale ``s`` of a 1-D logistic regression ``P(y=1) = sigmoid(s * proj)``, batched.

    No intercept (the centred differences have mean zero, and swapping the two items negates
    a difference, so a zero projection should mean 0.5) and no class weights (plain maximum
    likelihood, so probabilities are calibrated). The projections are standardised first and
    a weak ridge ``lam / 2 * s_std**2`` keeps ``s`` finite on separable data; it is negligible
    against the n log-losses. The 1-D problem is convex, so the root of its derivative is found
    by bisection: robust and identical for one layer or all. NaN where the projections are
    constant (nothing to scale).
    """
    y = y.to(proj)
    std = proj.std(dim=-1, correction=0)
    ok = std > 0
    z = proj / torch.where(ok, std, torch.ones_like(std)).unsqueeze(-1)
    bound = z.abs().sum(dim=-1) / lam + 1.0   # derivative is > 0 at +bound and < 0 at -bound
    lo, hi = -bound, bound
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        grad = ((torch.sigmoid(mid.unsqueeze(-1) * z) - y) * z).sum(dim=-1) + lam * mid
        up = grad > 0
        hi = torch.where(up, mid, hi)
        lo = torch.where(up, lo, mid)
    scale = 0.5 * (lo + hi) / torch.where(ok, std, torch.ones_like(std))
    return torch.where(ok, scale, torch.full_like(scale, float("nan")))
