"""Layer chunks of an all-layer sweep: how many layers at a time, and their differences.

A sweep never holds float64 copies of every layer at once: :func:`layers_per_chunk` picks how many
layers a chunk holds (small on the CPU, where big buffers are slow to map; about a GiB on a
GPU), and :func:`chunk_diffs` builds one chunk's contrast differences in float64 on the
working device, with the side means and the activations' peak magnitude, refusing NaN / inf.
"""

from __future__ import annotations

import torch
from einops import rearrange
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.errors import ProbeError

__all__ = ["CPU_CHUNK_BYTES", "layers_per_chunk", "chunk_diffs"]


def _raise_non_finite(x_all: Tensor, sl: slice) -> None:
    """Refuse the chunk ``sl``, naming its layer positions that hold NaN / inf."""
    bad = ~torch.isfinite(x_all[:, :, sl])
    layers = torch.nonzero(bad.any(dim=(0, 1, 3))).flatten() + sl.start
    raise ProbeError(f"activations contain {int(bad.sum())} non-finite value(s) (NaN/inf) in "
                     f"layer position(s) {layers.tolist()}")


def chunk_diffs(x_all: Float[Tensor, "n 2 layer d"], sl: slice, dev: torch.device,
                mu_pos: Tensor | None = None, mu_neg: Tensor | None = None):
    """Contrast differences ``[l, n, d]`` (float64, on ``dev``) of the layers ``sl``.

    The same quantity as :func:`ppairs_lens.probes.features.contrast_features`, written as
    ``(x0 - x1) - (mu_pos - mu_neg)`` in float64 (as the single-layer probes compute it).
    Side means are computed here when not given (fitting). Returns
    ``(diffs, mu_pos, mu_neg, peak)``, ``peak`` the largest absolute activation per layer.
    """
    work = torch.promote_types(x_all.dtype, torch.float32)  # half precision: upcast first
    a0, a1 = x_all[:, 0, sl].to(dev, work), x_all[:, 1, sl].to(dev, work)   # [n, l, d]
    n = a0.shape[0]
    diffs = torch.empty(a0.shape[1], n, a0.shape[2], dtype=torch.float64, device=dev)
    other = torch.empty_like(diffs)
    diffs.copy_(rearrange(a0, "n l d -> l n d"))
    other.copy_(rearrange(a1, "n l d -> l n d"))
    # Extremes from the contiguous copies (faster than over the strided views, and than
    # aminmax, which is not vectorised for this).
    peak = torch.stack([t.amax(dim=(1, 2)).abs() for t in (diffs, other)]
                       + [t.amin(dim=(1, 2)).abs() for t in (diffs, other)]).amax(0)
    if not bool(torch.isfinite(peak).all()):
        _raise_non_finite(x_all, sl)
    if mu_pos is None:  # from the float64 copies: a float64 sum over the strided float32
        mu_pos = diffs.sum(dim=1) / n   # views took as long as building the differences
        mu_neg = other.sum(dim=1) / n
    else:
        mu_pos, mu_neg = mu_pos.to(dev), mu_neg.to(dev)
    diffs.sub_(other).sub_((mu_pos - mu_neg).unsqueeze(1))
    return diffs, mu_pos, mu_neg, peak


#: On the CPU, the largest float64 buffer of a chunk of layers stays below this. glibc maps
#: every allocation over 32 MiB afresh (and large ones below that too until its threshold
#: adapts), so each such buffer is page-faulted in again: that was most of the time of
#: building the differences. Measured on a SmolLM2 sweep (280 pairs, 31 layers, fit and
#: score): all layers at once 52,000 faults per run; 16 MiB 16,000; 8 MiB and 4 MiB none,
#: and 20-25% faster.
CPU_CHUNK_BYTES = 8 << 20


def layers_per_chunk(n: int, d: int, itemsize: int, device: torch.device | None = None,
                budget: int = 1 << 30) -> int:
    """Layers per chunk: on the CPU, so that its largest float64 buffer (the differences or
    an ``m x m`` matrix per layer) stays below ``CPU_CHUNK_BYTES``; elsewhere (a GPU wants
    large batches), so that the whole float64 working set stays near ``budget``."""
    m = min(n, d)
    if device is None or device.type == "cpu":
        return max(1, CPU_CHUNK_BYTES // (8 * max(n * d, m * m)))
    per_layer = 8 * (4 * n * d + 3 * m * m) + itemsize * 2 * n * d
    return max(1, budget // per_layer)
