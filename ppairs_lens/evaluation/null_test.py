"""Is a probe direction's ablation effect larger than a null direction's? In log-odds.

The judge's answer per record is its calibrated log-odds ``z`` that item 1 is preferred
(:func:`ppairs_lens.interventions.batched.judge_under_directions`). For each ablated direction,
on the same records as the unablated baseline ``z_base``:

* ``effect`` = mean ``|z_cond - z_base|``: how far the judgement moves, gold aside;
* ``margin`` = mean ``s * (z_cond - z_base)`` with ``s = +1`` where item 1 is the gold item and
  ``-1`` where item 2 is: negative = the judgement got worse.

:func:`null_test` places a probe's effect among those of null directions (random, or
variance-matched) on the same records (paired): its rank and the permutation p-value
``(1 + #{null >= effect}) / (1 + n_null)``. That p-value is the test; there is no bootstrap
"excess over the null median" (one that held the null directions fixed gave CIs excluding 0
where p was 0.3-0.4).
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float

__all__ = ["direction_effects", "null_test", "sign_accuracy"]


def _signs(y: np.ndarray) -> np.ndarray:
    """+1 where item 1 is the gold answer (y == 1), -1 where item 2 is (y == 0)."""
    y = np.asarray(y)
    if not np.isin(y, (0, 1)).all():
        raise ValueError("targets must be 1 (item 1 preferred / true) or 0, ties dropped")
    return np.where(y == 1, 1.0, -1.0)


def direction_effects(z_base: Float[np.ndarray, "n"], z: Float[np.ndarray, "n D"],
                      y: Float[np.ndarray, "n"]
                      ) -> tuple[Float[np.ndarray, "D"], Float[np.ndarray, "D"]]:
    """``(effect, margin)`` per direction (columns of ``z``), against ``z_base`` (module doc)."""
    z_base = np.asarray(z_base, dtype=float)
    z = np.asarray(z, dtype=float)
    if z.ndim != 2 or z.shape[0] != z_base.shape[0]:
        raise ValueError(f"z must be [n, D] with n = {z_base.shape[0]}, got {z.shape}")
    dz = z - z_base[:, None]
    return np.abs(dz).mean(0), (_signs(y)[:, None] * dz).mean(0)


def sign_accuracy(z: Float[np.ndarray, "n"], y: Float[np.ndarray, "n"], tol: float = 0.0
                  ) -> float:
    """Share of records where ``sign(z)`` names the gold item; ``|z| <= tol`` (no answer:
    e.g. float32 round-off of two equal logits) counts half."""
    z = np.asarray(z, dtype=float)
    s = np.where(np.abs(z) <= tol, 0.0, np.sign(z)) * _signs(y)
    return float(np.mean(np.where(s == 0, 0.5, s > 0)))


def null_test(effect: float, null_effects: Float[np.ndarray, "n_null"]) -> dict[str, float]:
    """``{rank, n_null, quantile, p}`` of ``effect`` among the null effects (NaN without any)."""
    null = np.asarray(null_effects, dtype=float)
    null = null[np.isfinite(null)]
    n = len(null)
    if n == 0 or not np.isfinite(effect):
        return {"rank": float("nan"), "n_null": n, "quantile": float("nan"), "p": float("nan")}
    rank = int((null < effect).sum())
    return {"rank": rank, "n_null": n, "quantile": rank / n,
            "p": (1 + int((null >= effect).sum())) / (1 + n)}
