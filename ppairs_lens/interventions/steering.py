"""Steering: add ``alpha`` times a unit direction to the residual stream while the model runs.

The complement of :mod:`ppairs_lens.interventions.ablation`, with its hook machinery (presets,
hook names or ``{hook_name: direction}``; ``positions="all"`` or ``"last"``; hooks removed when
the ``with`` block exits). On a HookedTransformer a hook on ``ln_final.hook_out`` acts after the
final norm's gain, as on a bridge (:func:`ppairs_lens.models.backend.resolve_hooks`).

While generating the same hooks run on every pass: ``positions="all"`` adds at every prompt
position, then at each new token, so a key-value cache gives the tokens generating without one
gives. ``positions=p`` (an int) adds at positions ``p`` and after in the whole sequence: with a
cache each pass's first position is read from block 0's attention (:class:`PassOffset`), so
the hook point must come after it (``blocks.{l}.hook_resid_post``, not ``hook_embed``);
``p`` = the prompt's length steers the generated tokens only (the first is read from an
unsteered pass). ``"last"`` steers each pass's last position, which differs with a cache.

Adding at every hook point of a preset compounds along the residual stream; to steer once,
name one hook.

:func:`batched_steering_hooks` adds a different vector at each branch position of the read-out
step, so :func:`judge_under_steering` reads the swap-calibrated judge under many in one pass.
A vector that says "item 1 is better" in the original order says "item 2" in the swapped one,
so the swapped prompts get ``-v``: the same ``v`` in both orders would only move the position
bias, which the calibration cancels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from ppairs_lens.activations.prompts import Template, build_contrast_pairs
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import DirectionError, SettingError
from ppairs_lens.interventions.ablation import (
    Directions,
    Positions,
    apply_at_positions,
    check_directions,
    direction_rows,
)
from ppairs_lens.interventions.batched import logodds_per_branch
from ppairs_lens.judges.calibration import swap_calibrated_logodds
from ppairs_lens.judges.zero_shot import swapped_dataset
from ppairs_lens.models.backend import FINAL_NORM_HOOK, hook_names, resolve_hooks
from ppairs_lens.models.hook_points import (
    PRESETS,
    Hook,
    Preset,
    check_hook_names,
    hook_points,
)

__all__ = ["MAX_ALPHA", "OFFSET_HOOK", "PassOffset", "batched_steering_hooks", "check_alpha",
           "check_finite_activations", "judge_under_steering", "steer", "steering_hooks",
           "steering_vector"]


#: The largest steering strength taken, relative to the activations' median norm at the hook
#: point (the commands' unit; a raw strength is divided by that norm before this check):
#: beyond it the residual stream is the steering vector alone, and far enough out float32
#: overflows (at 1e39 the continuations came back empty with rc 0).
MAX_ALPHA: float = 1e4


def check_alpha(alpha: float, what: str = "alpha", bound: float | None = MAX_ALPHA) -> float:
    """``alpha`` as a float, refused unless finite (NaN or inf would come back as NaN log-odds
    blamed on the directions or the dtype) and at most ``bound`` in size (None: any; the
    activations then say whether it overflowed)."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise SettingError(f"steering coefficient {what} must be a number, got {alpha!r}") \
            from None
    if not math.isfinite(a):
        raise SettingError(f"steering coefficient {what} must be a finite number, got {a}")
    if bound is not None and abs(a) > bound:
        raise SettingError(f"steering coefficient {what} = {a:g} is beyond ±{bound:g} times the "
                           "activations' median norm: the activations would be the steering "
                           "vector alone (and overflow float32 far enough out)")
    return a


def check_finite_activations(x: Tensor, where: str) -> None:
    """Refuse NaN or inf activations (a vector too large for the dtype would otherwise come
    back as empty continuations or NaN log-odds, with no error)."""
    if not bool(torch.isfinite(x).all()):
        raise SettingError(f"{where}: the steered activations hold inf or NaN; the steering "
                           "strength overflows the model's dtype, use a smaller alpha")


def steering_vector(direction: Float[Tensor, "d_model"], alpha: float
                    ) -> Float[Tensor, "d_model"]:
    """``alpha * direction / |direction|`` (float32 or wider); the zero vector is refused."""
    a = check_alpha(alpha, bound=None)  # the commands bound it relative to the activations
    r = direction_rows(direction)
    if r.shape[0] != 1:
        raise DirectionError(f"steering adds one direction per hook point, got {r.shape[0]}")
    n = r[0].norm()
    if n == 0:
        raise DirectionError("the steering direction is the zero vector")
    if abs(a) >= torch.finfo(r.dtype).max:
        raise SettingError(f"steering coefficient alpha = {a:g} overflows {r.dtype}; the "
                           "steered activations would hold inf or NaN, use a smaller alpha")
    return a * r[0] / n


def _watch(bridge) -> list[Hook]:
    """A read-only hook refusing inf or NaN at the model's last state: a strength that fits at
    its hook point can still overflow a later norm's variance (NaN logits decode as empty)."""
    names = hook_names(bridge)
    last = FINAL_NORM_HOOK if FINAL_NORM_HOOK in names \
        else f"blocks.{bridge.cfg.n_layers - 1}.hook_resid_post"

    def watch(x: Tensor, hook=None) -> None:
        check_finite_activations(x, f"steering (read at {last})")

    return [(last, watch)] if last in names else []


def _as_points(preset: Preset | str | Sequence[str]) -> Preset | Sequence[str]:
    """A preset name, a list of hook names, or one hook name (as a one-item list)."""
    return [preset] if isinstance(preset, str) and preset not in PRESETS else preset


def _add(x: Tensor, v: Tensor) -> Tensor:
    work = torch.promote_types(x.dtype, torch.float32)
    return (x.to(work) + v.to(device=x.device, dtype=work)).to(x.dtype)


#: Where a pass's first position is read: keys (cached + new) minus queries (new).
OFFSET_HOOK = "blocks.0.attn.hook_attn_scores"
#: The first hook point of every forward pass (clears the offset).
PASS_START_HOOK = "hook_embed"


class PassOffset:
    """The current forward pass's first position in its sequence (``value``; None before
    block 0's attention): with a key-value cache, each new token's pass sees only that token.

    Block 0's attention scores have one key per cached or new position and one query per new
    one, so ``keys - queries`` is it, on either backend, through hook points only.
    ``hook_embed`` clears it, so a hook point before block 0's attention never gets the
    previous pass's offset. Add :meth:`hooks` to the same ``model.hooks(...)`` as its readers.
    """

    def __init__(self) -> None:
        self.value: int | None = None

    def _clear(self, x: Tensor, hook=None) -> Tensor:
        self.value = None
        return x

    def _record(self, scores: Float[Tensor, "batch head query key"], hook=None) -> Tensor:
        self.value = int(scores.shape[-1] - scores.shape[-2])
        return scores

    def hooks(self) -> list[tuple[str, Callable]]:
        """``[(hook name, fn)]`` that keep :attr:`value` up to date, pass by pass."""
        return [(PASS_START_HOOK, self._clear), (OFFSET_HOOK, self._record)]


def _from_position(x: Float[Tensor, "batch pos d_model"], v: Tensor, start: int,
                   offset: int | None, name: str) -> Tensor:
    """``x`` with ``v`` added at the sequence positions ``>= start`` (this pass's columns are
    positions ``offset, offset + 1, ...``)."""
    if offset is None:
        raise DirectionError(f"steering from position {start} at {name}: this hook point runs "
                             "before block 0's attention, where a pass's position in the "
                             "sequence is read; steer at a later hook point (e.g. "
                             "blocks.0.hook_resid_post)")
    if x.ndim != 3:
        raise DirectionError(f"steering from position {start} needs [batch, pos, d_model] "
                             f"activations at {name}, got shape {tuple(x.shape)}")
    cols = offset + torch.arange(x.shape[1], device=x.device)
    if bool((cols < start).all()):
        return x
    return torch.where((cols >= start)[None, :, None], _add(x, v), x)


def _hook_fn(v: Float[Tensor, "d_model"], name: str, positions: Positions | int,
             last_positions: Int[Tensor, "batch"] | None,
             offset: PassOffset | None = None) -> Callable:
    def hook(x: Float[Tensor, "batch pos d_model"], hook=None) -> Tensor:
        if x.shape[-1] != v.shape[-1]:
            raise ValueError(f"steering at {name}: activation has last dimension {x.shape[-1]} "
                             f"but the direction has {v.shape[-1]}")
        if offset is not None:
            out = _from_position(x, v, int(positions), offset.value, name)
        else:
            out = apply_at_positions(x, lambda y: _add(y, v), positions, last_positions, name)
        check_finite_activations(out, f"steering at {name}")
        return out

    return hook


def _check_positions(positions: Positions | int, last_positions) -> None:
    if isinstance(positions, bool) or not (positions in ("all", "last") or (
            isinstance(positions, int) and positions >= 0)):
        raise ValueError(f"positions must be 'all', 'last' or a start position >= 0, got "
                         f"{positions!r}")
    if last_positions is not None and positions != "last":
        raise ValueError("last_positions only applies with positions='last'")


def steering_hooks(
    bridge, direction: Directions, alpha: float,
    preset: Preset | Sequence[str] = "paper", positions: Positions | int = "all",
    last_positions: Int[Tensor, "batch"] | Sequence[int] | None = None,
) -> list[Hook]:
    """Forward hooks ``[(name, fn)]`` adding ``alpha`` times the unit ``direction``.

    ``direction``: ``[d_model]`` (at every hook point of ``preset``) or ``{hook_name:
    direction}``. ``positions``: as in :func:`~ppairs_lens.interventions.ablation.
    ablation_hooks`, or an int ``p``: from ``p`` on, also with a cache (:class:`PassOffset`)."""
    _check_positions(positions, last_positions)
    lp = (None if last_positions is None
          else torch.as_tensor(last_positions, dtype=torch.long).reshape(-1))
    if isinstance(direction, Mapping):
        if not direction:
            raise ValueError("the dict of directions is empty")
        per_point = {n: steering_vector(torch.as_tensor(r), alpha) for n, r in direction.items()}
    else:
        v = steering_vector(torch.as_tensor(direction), alpha)
        per_point = {n: v for n in hook_points(_as_points(preset), bridge.cfg.n_layers)}
    check_directions(bridge, per_point)
    offset = PassOffset() if isinstance(positions, int) else None
    hooks = [(n, _hook_fn(v, n, positions, lp, offset)) for n, v in per_point.items()]
    # The offset's hooks first: at a shared hook point they run before the steering hook.
    return resolve_hooks(bridge, (offset.hooks() if offset else []) + hooks + _watch(bridge))


@contextmanager
def steer(
    bridge, direction: Directions, alpha: float,
    preset: Preset | Sequence[str] = "paper", positions: Positions | int = "all",
    last_positions: Int[Tensor, "batch"] | Sequence[int] | None = None,
) -> Iterator:
    """``with steer(bridge, r, alpha, ["blocks.6.hook_resid_post"]): ...`` runs the model (and
    ``generate``, every pass) with ``alpha * r / |r|`` added (:func:`steering_hooks`)."""
    hooks = steering_hooks(bridge, direction, alpha, preset, positions, last_positions)
    with bridge.hooks(fwd_hooks=hooks):
        yield bridge


def _position_hook(vectors: Float[Tensor, "D d_model"], name: str) -> Callable:
    def hook(x: Float[Tensor, "batch pos d_model"], hook=None) -> Tensor:
        if x.ndim != 3 or tuple(x.shape[1:]) != tuple(vectors.shape):
            raise DirectionError(f"batched steering at {name}: expected [batch, "
                                 f"{vectors.shape[0]}, {vectors.shape[1]}] (one position per "
                                 f"direction), got {tuple(x.shape)}; use it as final_hooks")
        out = _add(x, vectors)
        check_finite_activations(out, f"batched steering at {name}")
        return out

    return hook


def batched_steering_hooks(bridge, vectors: Float[Tensor, "D d_model"],
                           hooks: Preset | Sequence[str]) -> list[Hook]:
    """Hooks adding ``vectors[j]`` (as given: not normalised) at branch position ``j`` at every
    hook point of ``hooks``; for ``final_hooks`` of ``run_branches`` with ``D`` branches."""
    v = direction_rows(vectors)
    if v.shape[1] != bridge.cfg.d_model:
        raise DirectionError(f"vectors have dimension {v.shape[1]}, the model's d_model is "
                             f"{bridge.cfg.d_model}")
    names = hook_points(_as_points(hooks), bridge.cfg.n_layers)
    check_hook_names(bridge, names)
    return resolve_hooks(bridge, [(n, _position_hook(v, n)) for n in names] + _watch(bridge))


@torch.inference_mode()
def judge_under_steering(
    bridge, dataset: Dataset, template: Template | None, vectors: Float[Tensor, "D d_model"],
    hooks: Preset | Sequence[str], *, settings: HarvestSettings = HarvestSettings(),
    vectors_per_pass: int | None = None, desc: str = "steered judge",
) -> dict[str, np.ndarray | None]:
    """:func:`ppairs_lens.interventions.batched.judge_under_directions`, with vector ``j`` added
    as given (not normalised) at branch ``j``, ``-v`` in the swapped order; zero: unsteered."""
    v = torch.as_tensor(vectors).detach().float()
    if not torch.isfinite(v).all():  # before any prompt is built or run
        raise DirectionError("steering vectors hold NaN or inf (a non-finite coefficient "
                             "alpha, or direction); every vector must be finite")
    chunk = int(vectors_per_pass or v.shape[0])

    def logodds(pairs, vecs: Tensor, what: str) -> Float[np.ndarray, "pair D"]:
        return logodds_per_branch(bridge, pairs, vecs,
                                  lambda b: batched_steering_hooks(bridge, b, hooks), settings,
                                  chunk, what)

    ld_o = logodds(build_contrast_pairs(bridge.tokenizer, dataset, template), v, desc)
    if dataset.kind != "comparison":
        return {"z": ld_o, "ld_original": ld_o, "ld_swapped": None}
    swapped = build_contrast_pairs(bridge.tokenizer, swapped_dataset(dataset), template)
    ld_s = logodds(swapped, -v, f"{desc}, swapped")
    return {"z": swap_calibrated_logodds(ld_o, ld_s), "ld_original": ld_o, "ld_swapped": ld_s}
