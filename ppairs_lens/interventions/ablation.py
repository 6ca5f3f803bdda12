"""Directional ablation: remove one or a few directions from the residual stream while the
model runs, with TransformerLens forward hooks (``bridge.hooks``, never patched modules,
removed when the ``with`` block exits, exceptions included).

Hook points (``shared/notes/transformerlens-4.md``): ``"paper"`` rejects at every
``hook_resid_post``, as in the paper, but inside a block the MLP still reads what its
attention just wrote along r. ``"full"`` rejects at the embedding and every attention and MLP
output, so every residual-stream state is a sum of r-free terms. The final norm's gain
re-introduces a component along r, so both also reject after ``ln_final``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ppairs_lens.errors import DirectionError
from ppairs_lens.models.backend import resolve_hooks
from ppairs_lens.models.hook_points import Hook, Preset, check_hook_names, hook_points

Positions = Literal["all", "last"]
Directions = Float[Tensor, "d_model"] | Float[Tensor, "k d_model"] | Mapping[str, Tensor]


def direction_rows(directions: Float[Tensor, "*k d_model"]) -> Float[Tensor, "k d_model"]:
    """``directions`` as ``[k, d_model]`` rows (k >= 1) in float32 or wider, all finite."""
    r = torch.as_tensor(directions).detach()
    if r.ndim == 1:
        r = r[None]
    if r.ndim != 2 or r.shape[0] == 0:
        raise DirectionError(f"directions must be [d_model] or [k, d_model] with k >= 1, got "
                             f"shape {tuple(torch.as_tensor(directions).shape)}")
    r = r.to(torch.promote_types(r.dtype, torch.float32))
    if not torch.isfinite(r).all():
        raise DirectionError("directions contain NaN or infinite values")
    return r


def orthonormal_basis(directions: Float[Tensor, "*k d_model"]) -> Float[Tensor, "k d_model"]:
    """Orthonormal rows (float32 or wider, by QR for several) spanning ``directions``' space.

    Linearly dependent directions raise: QR would fill the missing rank with arbitrary
    directions, silently ablating a larger space than asked.
    """
    r = direction_rows(directions)
    norms = r.norm(dim=-1)
    if (norms == 0).any():
        raise DirectionError("a direction to ablate is the zero vector")
    if r.shape[0] == 1:
        return r / norms[:, None]
    if r.shape[0] > r.shape[1]:
        raise DirectionError(f"{r.shape[0]} directions in a {r.shape[1]}-dimensional space "
                             "are linearly dependent")
    q, rr = torch.linalg.qr((r / norms[:, None]).T)  # q: [d_model, k], orthonormal columns
    diag = rr.diagonal().abs()
    if (diag < 1e-5 * diag.max()).any():
        raise DirectionError("the directions to ablate are linearly dependent; pass a basis "
                             "of their span")
    return q.T.contiguous()


def _project_out(x: Float[Tensor, "... d_model"], basis: Float[Tensor, "k d_model"]
                 ) -> Float[Tensor, "... d_model"]:
    """x minus its projection on the orthonormal rows of ``basis``, in float32 or wider (no
    projection from rounded half-precision dot products)."""
    work = torch.promote_types(x.dtype, torch.float32)
    b = basis.to(device=x.device, dtype=work)
    xw = x.to(work)
    return (xw - (xw @ b.T) @ b).to(x.dtype)


def reject(x: Float[Tensor, "... d_model"], r: Float[Tensor, "*k d_model"]
           ) -> Float[Tensor, "... d_model"]:
    """Vector rejection ``x - (x . r) r`` of one direction or the span of ``[k, d_model]``
    (any non-zero ``r``: orthonormalised here)."""
    if x.shape[-1] != r.shape[-1]:
        raise ValueError(f"x has last dimension {x.shape[-1]} but r has {r.shape[-1]}")
    return _project_out(x, orthonormal_basis(r))


def apply_at_positions(x: Float[Tensor, "batch pos d_model"], fn: Callable[[Tensor], Tensor],
                       positions: Positions, last_positions: Int[Tensor, "batch"] | None,
                       name: str) -> Tensor:
    """``fn`` applied to every position of ``x`` (``"all"``), or each row's last real position
    (``"last"``: -1, or ``last_positions`` per row for padding); for ablation and steering."""
    if positions == "all":
        return fn(x)
    if x.ndim != 3:
        raise ValueError(f"positions='last' needs [batch, pos, d_model] activations at "
                         f"{name}, got shape {tuple(x.shape)}")
    rows = torch.arange(x.shape[0], device=x.device)
    pos = torch.full_like(rows, -1) if last_positions is None else last_positions.to(x.device)
    if pos.shape != rows.shape:
        raise ValueError(f"last_positions has {pos.shape[0]} rows but the batch at {name} "
                         f"has {x.shape[0]}")
    out = x.clone()
    out[rows, pos] = fn(x[rows, pos])
    return out


def check_directions(bridge, per_point: Mapping[str, Tensor]) -> None:
    """Refuse a hook name the model lacks, or a direction of another size than its d_model."""
    check_hook_names(bridge, list(per_point))
    for name, r in per_point.items():
        if r.shape[-1] != bridge.cfg.d_model:
            raise ValueError(f"direction for {name} has dimension {r.shape[-1]}, the model's "
                             f"d_model is {bridge.cfg.d_model}")


def _hook_fn(basis: Float[Tensor, "k d_model"], name: str, positions: Positions,
             last_positions: Int[Tensor, "batch"] | None) -> Callable:
    """A forward hook that rejects ``basis`` from its activation (all or last positions)."""

    def hook(x: Float[Tensor, "batch pos d_model"], hook=None) -> Tensor:
        if x.shape[-1] != basis.shape[-1]:
            raise ValueError(f"ablation at {name}: activation has last dimension {x.shape[-1]} "
                             f"but the direction has {basis.shape[-1]}")
        return apply_at_positions(x, lambda v: _project_out(v, basis), positions,
                                  last_positions, name)

    return hook


def ablation_hooks(
    bridge,
    directions: Directions,
    preset: Preset | Sequence[str] = "paper",
    positions: Positions = "all",
    last_positions: Int[Tensor, "batch"] | Sequence[int] | None = None,
) -> list[Hook]:
    """TransformerLens forward hooks ``[(name, fn)]`` that reject ``directions``.

    ``directions``: ``[d_model]``, ``[k, d_model]`` (their span), or ``{hook_name:
    direction(s)}`` (exactly those points; ``preset`` unused). Directions move to the
    activation's device inside the hook, so layers spread over devices work.
    ``positions="last"``: only each row's last real token, ``last_positions[b]`` (from the
    attention mask of a right-padded batch; default -1, right for unpadded or left-padded).
    """
    if positions not in ("all", "last"):
        raise ValueError(f"positions must be 'all' or 'last', got {positions!r}")
    if last_positions is not None and positions != "last":
        raise ValueError("last_positions only applies with positions='last'")
    lp = (None if last_positions is None
          else torch.as_tensor(last_positions, dtype=torch.long).reshape(-1))
    if isinstance(directions, Mapping):
        per_point = {name: orthonormal_basis(torch.as_tensor(r))
                     for name, r in directions.items()}
        if not per_point:
            raise ValueError("the dict of directions is empty")
    else:
        basis = orthonormal_basis(torch.as_tensor(directions))
        per_point = {name: basis for name in hook_points(preset, bridge.cfg.n_layers)}
    check_directions(bridge, per_point)
    # On a HookedTransformer, ln_final.hook_out is served in after-gain space (see backend).
    return resolve_hooks(bridge, [(name, _hook_fn(b, name, positions, lp))
                                  for name, b in per_point.items()])


@contextmanager
def ablate(
    bridge,
    directions: Directions,
    preset: Preset | Sequence[str] = "paper",
    positions: Positions = "all",
    last_positions: Int[Tensor, "batch"] | Sequence[int] | None = None,
) -> Iterator:
    """``with ablate(bridge, r): ...`` runs the model with ``r`` rejected
    (:func:`ablation_hooks`); hooks added inside the block run after it, seeing ablated values.
    """
    hooks = ablation_hooks(bridge, directions, preset, positions, last_positions)
    with bridge.hooks(fwd_hooks=hooks):
        yield bridge


def ablation_hook_sets(
    bridge,
    directions: Directions,
    preset: Preset | Sequence[str] = "paper",
    positions: Positions = "all",
) -> tuple[list[Hook], list[Hook]]:
    """``(hooks, final_hooks)`` for ``run_branches`` / ``harvest_pairs``: ``"all"`` ablates
    every forward pass; ``"last"`` only the branch step (``final_hooks``), whose sequence is
    the read-out tokens alone, so all its positions are ablated.
    """
    if positions == "all":
        return ablation_hooks(bridge, directions, preset, "all"), []
    if positions != "last":
        raise ValueError(f"positions must be 'all' or 'last', got {positions!r}")
    return [], ablation_hooks(bridge, directions, preset, "all")


def unembedding_direction(bridge, id_a: int, id_b: int) -> Float[Tensor, "d_model"]:
    """``W_U[:, a] - W_U[:, b]``, normalised (float32, CPU): the positive control. After the
    final norm logit(a) - logit(b) is the projection on it (plus any ``b_U[a] - b_U[b]``), so
    rejecting it at ``ln_final.hook_out`` makes the two logits equal.
    """
    if id_a == id_b:
        raise ValueError("the two token ids must differ")
    w_u = bridge.W_U  # [d_model, d_vocab] in TransformerLens layout
    d = (w_u[:, id_a] - w_u[:, id_b]).detach().float().cpu()
    n = d.norm()
    if n == 0:
        raise ValueError(f"tokens {id_a} and {id_b} have the same unembedding")
    return d / n
