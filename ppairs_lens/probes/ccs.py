"""Contrast-consistent search (CCS; Burns et al. 2023), batched over layers (the estimator is
:class:`ppairs_lens.probes.estimators.CCSProbe`).

CCS needs no labels: a linear probe ``p(x) = sigmoid(<x, w> + b)`` is trained so that the two
sides of a contrast pair get complementary probabilities, ``p(x0) ~ 1 - p(x1)``
(consistency), without the degenerate answer ``p = 0.5`` (confidence):

    loss = mean[(p(x0) - (1 - p(x1)))^2] + mean[min(p(x0), p(x1))^2]

Each side is centred by its training mean (the sides' means, as every probe here uses) and
the layer's features are divided by their root mean square, so one learning rate fits every
layer; ``w`` is returned in the raw basis. ``n_tries`` random starts (seeded) are trained with
full-batch Adam for ``n_epochs`` steps, and the one with the lowest loss is kept. Layers are a
batch axis (their losses are independent), so a sweep's layer equals the single-layer fit.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

__all__ = ["ccs_loss", "fit_ccs_directions"]


def ccs_loss(p0: Tensor, p1: Tensor) -> Tensor:
    """The CCS loss over the last axis (pairs): consistency plus confidence."""
    return ((p0 - (1 - p1)) ** 2).mean(-1) + (torch.minimum(p0, p1) ** 2).mean(-1)


def fit_ccs_directions(x0: Float[Tensor, "l n d"], x1: Float[Tensor, "l n d"], *,
                       n_tries: int = 5, n_epochs: int = 400, lr: float = 1e-2,
                       weight_decay: float = 0.0, seed: int = 0
                       ) -> tuple[Float[Tensor, "l d"], Float[Tensor, "l"]]:
    """``(w [l, d], loss [l])``: the best of ``n_tries`` CCS probes per layer on the centred
    sides ``x0``, ``x1`` (``w`` not normalised, in the raw basis; float64)."""
    with torch.inference_mode(False), torch.enable_grad():
        x0 = x0.detach().clone().double()
        x1 = x1.detach().clone().double()
        l, _, d = x0.shape
        rms = torch.cat([x0, x1], 1).pow(2).mean(dim=(1, 2)).sqrt().clamp_min(1e-30)
        z0, z1 = x0 / rms[:, None, None], x1 / rms[:, None, None]
        g = torch.Generator().manual_seed(int(seed))
        w0 = torch.randn(n_tries, d, generator=g, dtype=torch.float64) / d ** 0.5
        w = w0.to(x0.device).expand(l, -1, -1).clone().requires_grad_(True)
        b = torch.zeros(l, n_tries, dtype=torch.float64, device=x0.device, requires_grad=True)
        opt = torch.optim.Adam([w, b], lr=lr, weight_decay=weight_decay)

        def losses() -> Tensor:
            p0 = torch.sigmoid(z0 @ w.mT + b[:, None, :]).mT  # [l, tries, n]
            p1 = torch.sigmoid(z1 @ w.mT + b[:, None, :]).mT
            return ccs_loss(p0, p1)

        for _ in range(n_epochs):
            opt.zero_grad()
            losses().sum().backward()
            opt.step()
        with torch.no_grad():
            final = losses()
            best = final.argmin(dim=1)
            rows = torch.arange(l, device=x0.device)
            return (w[rows, best] / rms[:, None]).detach(), final[rows, best].detach()

