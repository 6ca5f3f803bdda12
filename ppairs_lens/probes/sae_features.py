"""A probe direction read in an SAE's features: which decoder rows it points along, and how
the encoder responds to the two classes' mean activations. ``sae`` is duck-typed (anything
with ``W_dec [d_sae, d_in]`` and ``encode(x)``, e.g. a SAELens ``SAE``): no SAE library is
imported. The direction lives in the SAE's input space (the residual stream at the SAE's hook,
where the probe was fitted)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.features import as_acts, labels_to_targets

__all__ = ["SAEAttribution", "sae_attribution", "class_side_means"]


@dataclass(frozen=True)
class SAEAttribution:
    """The top-``k`` SAE latents for a direction (by |cosine| of their decoder rows), the
    signed ``cosines``, and the encoder's activation of each at the mean preferred / other
    side of the pairs (None without activations)."""

    latents: tuple[int, ...]
    cosines: tuple[float, ...]
    response_preferred: tuple[float, ...] | None = None
    response_other: tuple[float, ...] | None = None

    @property
    def response_difference(self) -> tuple[float, ...] | None:
        if self.response_preferred is None or self.response_other is None:
            return None
        return tuple(a - b for a, b in zip(self.response_preferred, self.response_other))


def class_side_means(acts: Float[Tensor, "n 2 d"], labels: Any
                     ) -> tuple[Float[Tensor, "d"], Float[Tensor, "d"]]:
    """Mean activation of the preferred side of each pair (side 0 where the label is 1, side
    1 where it is 2) and of the other side."""
    x = as_acts(acts, dtype=torch.float64)
    y = labels_to_targets(labels).bool()
    if x.ndim != 3 or x.shape[0] != y.numel():
        raise ProbeError(f"need one layer's activations [n, 2, d] and n labels, got shape "
                         f"{tuple(x.shape)} and {y.numel()} labels")
    preferred = torch.where(y[:, None], x[:, 0], x[:, 1])
    other = torch.where(y[:, None], x[:, 1], x[:, 0])
    return preferred.mean(0), other.mean(0)


@torch.no_grad()
def sae_attribution(direction: Float[Tensor, "d_in"] | Any, sae, k: int = 10,
                    acts: Float[Tensor, "n 2 d_in"] | None = None, labels: Any = None
                    ) -> SAEAttribution:
    """:class:`SAEAttribution` of ``direction``; the responses need ``acts`` (one layer) and
    ``labels``."""
    w_dec = sae.W_dec.detach()
    r = torch.as_tensor(direction).detach().to(device=w_dec.device, dtype=torch.float64)
    if r.ndim != 1 or r.shape[0] != w_dec.shape[1]:
        raise ProbeError(f"direction has shape {tuple(r.shape)}; the SAE's decoder rows have "
                         f"d_in={w_dec.shape[1]}")
    if not 1 <= k <= w_dec.shape[0]:
        raise ProbeError(f"k must be in 1..{w_dec.shape[0]} (d_sae), got {k}")
    w = w_dec.to(torch.float64)
    cos = (w @ r) / (w.norm(dim=-1) * r.norm()).clamp_min(1e-30)
    top = cos.abs().topk(k).indices
    out = {"latents": tuple(int(i) for i in top), "cosines": tuple(float(cos[i]) for i in top)}
    if acts is not None:
        pref, other = class_side_means(acts, labels)
        def enc(v: Tensor) -> Tensor:
            return sae.encode(v[None].to(device=w_dec.device, dtype=w_dec.dtype))[0]

        out["response_preferred"] = tuple(float(enc(pref)[i]) for i in top)
        out["response_other"] = tuple(float(enc(other)[i]) for i in top)
    return SAEAttribution(**out)
