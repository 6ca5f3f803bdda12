"""Batched linear algebra over a leading layer axis, for the Newton solver and the sweep.

Every function takes a stack of per-layer matrices or vectors (axis 0 = layers) and treats
each layer independently: matrix-vector products written the way the CPU runs them fastest,
a Cholesky factorisation that adds jitter only when round-off breaks it, a solve with that
factor, and preconditioned conjugate gradients in which every layer stops at its own tolerance.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from ppairs_lens.errors import ProbeError

__all__ = ["bmv", "bmv_t", "cholesky", "chol_apply", "pcg"]


def bmv(x: Float[Tensor, "l n d"], w: Float[Tensor, "l d"]) -> Float[Tensor, "l n"]:
    """``x @ w`` per layer (as row-vector products: 1.5-3x faster than bmm's gemv on CPU)."""
    return (w.unsqueeze(1) @ x.mT).squeeze(1)


def bmv_t(x: Float[Tensor, "l n d"], r: Float[Tensor, "l n"]) -> Float[Tensor, "l d"]:
    """``x^T @ r`` per layer, without materialising a transposed copy of ``x``."""
    return (r.unsqueeze(1) @ x).squeeze(1)


def cholesky(a: Float[Tensor, "l m m"]) -> Float[Tensor, "l m m"]:
    """Cholesky factor; the matrices are I + PSD, so failure only comes from round-off."""
    chol, info = torch.linalg.cholesky_ex(a)
    if bool((info != 0).any()):
        jitter = 1e-10 * a.diagonal(dim1=-2, dim2=-1).mean(-1).clamp_min(1.0)
        chol, info = torch.linalg.cholesky_ex(
            a + jitter[:, None, None] * torch.eye(a.shape[-1], dtype=a.dtype, device=a.device))
        if bool((info != 0).any()):
            raise ProbeError("Newton system is not positive definite even with jitter: the "
                             "activations are too large to solve in float64 (rescale them)")
    return chol


def chol_apply(factor: Float[Tensor, "l m m"], r: Float[Tensor, "l m"]) -> Float[Tensor, "l m"]:
    """``(L L^T)^{-1} r`` by two triangular solves (much faster than batched cholesky_solve)."""
    half = torch.linalg.solve_triangular(factor, r.unsqueeze(-1), upper=False)
    return torch.linalg.solve_triangular(factor.mT, half, upper=True).squeeze(-1)


def pcg(hvp, b: Float[Tensor, "l d"], apply_pinv, rtol: Float[Tensor, "l"], max_iter: int
         ) -> tuple[Float[Tensor, "l d"], Bool[Tensor, "l"]]:
    """Batched preconditioned CG for ``H x = b``, each layer stopping at its own tolerance.

    ``apply_pinv(r)`` applies the inverse preconditioner. Returns ``(x, reached)``; CG
    iterates from 0 are descent directions, so an unfinished ``x`` is still usable.
    """
    x = torch.zeros_like(b)
    r = b.clone()
    z = apply_pinv(r)
    p = z.clone()
    rz = (r * z).sum(-1)
    target = rtol * b.norm(dim=-1)
    active = r.norm(dim=-1) > target
    for _ in range(max_iter):
        if not bool(active.any()):
            break
        hp = hvp(p)
        php = (p * hp).sum(-1)
        alpha = torch.where(active, rz / torch.where(php > 0, php, torch.ones_like(php)),
                            torch.zeros_like(php))
        x = x + alpha[:, None] * p
        r = r - alpha[:, None] * hp
        z = apply_pinv(r)
        rz_new = (r * z).sum(-1)
        beta = torch.where(active, rz_new / torch.where(rz != 0, rz, torch.ones_like(rz)),
                           torch.zeros_like(rz))
        p = z + beta[:, None] * p
        rz = rz_new
        active = active & (r.norm(dim=-1) > target)
    return x, ~active
