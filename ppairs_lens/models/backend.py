"""Which kind of TransformerLens model a function was given, and what differs between kinds.

- ``TransformerBridge`` (TransformerLens 3.x and 4.x) wraps the HF model: HF's key-value cache,
  explicit positions, 4-D attention masks, ``logits_to_keep``;
- ``HookedTransformer`` (TransformerLens < 4, and subclasses such as SAELens'
  ``HookedSAETransformer``): its own cache, positions from the 2-D attention mask, logits at
  every position (:mod:`ppairs_lens.activations.hooked_steps`).

The bridge's ``ln_final.hook_out`` is the state after the final norm's gain (HF's last hidden
state); HookedTransformer has only ``ln_final.hook_normalized``, before the gain. Stores and
probes record hook names, so both backends store, read and ablate the after-gain state as
``ln_final.hook_out``: on a HookedTransformer a hook on ``hook_normalized`` serves it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Literal

import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.errors import ModelLoadError, PPairsError

Backend = Literal["bridge", "hooked"]

#: The state after the final norm, gain included (equals HF's last hidden state).
FINAL_NORM_HOOK = "ln_final.hook_out"
#: HookedTransformer's hook point nearest to it: the final norm's output before its gain.
HOOKED_FINAL_NORM_SOURCE = "ln_final.hook_normalized"


@functools.cache
def hooked_transformer_type() -> type | None:
    """``HookedTransformer``, or None where TransformerLens has none (4.x)."""
    try:
        from transformer_lens import HookedTransformer
    except ImportError:
        return None
    return HookedTransformer


def is_hooked(model) -> bool:
    """Whether ``model`` is a HookedTransformer (a subclass such as SAELens' included)."""
    cls = hooked_transformer_type()
    return cls is not None and isinstance(model, cls)


def backend_of(model) -> Backend:
    """``"bridge"`` or ``"hooked"``; a ModelLoadError naming what is supported otherwise."""
    if is_hooked(model):
        return "hooked"
    from transformer_lens.model_bridge import TransformerBridge

    if isinstance(model, TransformerBridge):
        return "bridge"
    hooked = ("HookedTransformer (and subclasses such as SAELens' HookedSAETransformer)"
              if hooked_transformer_type() is not None else
              "HookedTransformer (with transformer-lens<4; not in this installation)")
    raise ModelLoadError(
        f"got a {type(model).__module__}.{type(model).__name__}: the model must be a "
        f"TransformerLens TransformerBridge or a {hooked}. Load one with "
        "ppairs_lens.models.loading.load_model(name, backend='bridge' or 'hooked')")


def hooked_device(model) -> torch.device:
    """Where a HookedTransformer's token ids go: its embedding's device."""
    return model.embed.W_E.device


def model_dtype(model) -> str:
    """The dtype the model computes in ("float32", ...): its first floating parameter's."""
    p = next((p for p in model.parameters() if p.is_floating_point()), None)
    return str(p.dtype if p is not None else torch.float32).removeprefix("torch.")


def has_forward_hooks(model) -> bool:
    """Whether a forward hook is on any hook point now (an ablation, steering, a permanent
    hook): the model's answer is then not its plain one. The bridge's own torch hooks on the
    wrapped modules are not hook points' and do not count."""
    from transformer_lens.hook_points import HookPoint

    return any(m.fwd_hooks for m in model.modules() if isinstance(m, HookPoint))


def final_norm_affine(model) -> tuple[Tensor | None, Tensor | None]:
    """``(gain, bias)`` of a HookedTransformer's final norm (None where absent or folded)."""
    ln = getattr(model, "ln_final", None)
    if ln is None or HOOKED_FINAL_NORM_SOURCE not in model.hook_dict:
        raise PPairsError(f"this HookedTransformer has no final norm ({HOOKED_FINAL_NORM_SOURCE}"
                          f"): there is no {FINAL_NORM_HOOK} to read or ablate")
    w, b = getattr(ln, "w", None), getattr(ln, "b", None)
    return (None if w is None else w.detach()), (None if b is None else b.detach())


def hook_names(model) -> list[str]:
    """Names of the model's hook points, with ``ln_final.hook_out`` on a HookedTransformer."""
    names = list(model.hook_dict)
    if is_hooked(model) and FINAL_NORM_HOOK not in model.hook_dict \
            and HOOKED_FINAL_NORM_SOURCE in model.hook_dict:
        names.append(FINAL_NORM_HOOK)
    return names


def to_after_gain(model) -> Callable[[Tensor], Tensor]:
    """Maps a HookedTransformer's ``hook_normalized`` value to the after-gain state (itself
    where the gain is folded into the unembedding, ``fold_ln``)."""
    w, b = final_norm_affine(model)

    def after(x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        y = x if w is None else x * w.to(x.device, x.dtype)
        return y if b is None else y + b.to(x.device, x.dtype)

    return after


def after_gain_hook(model, fn: Callable) -> Callable:
    """A hook on ``hook_normalized`` running ``fn`` on the after-gain state ``x * w (+ b)`` and
    mapping its result back (``(y - b) / w``); one that writes needs a gain without zeros."""
    w, b = final_norm_affine(model)
    after = to_after_gain(model)
    zeros = 0 if w is None else int((w == 0).sum())

    def hook(x: Float[Tensor, "batch pos d_model"], hook=None):
        ax = after(x)
        y = fn(ax, hook=hook)
        if y is None or y is ax:
            return None
        if zeros:
            raise PPairsError(f"cannot change {FINAL_NORM_HOOK} on this HookedTransformer: its "
                              f"final norm's gain has {zeros} zero entries, so the after-gain "
                              f"state cannot be mapped back to {HOOKED_FINAL_NORM_SOURCE}; hook "
                              "the last blocks.L.hook_resid_post instead, or use the bridge")
        if b is not None:
            y = y - b.to(y.device, y.dtype)
        return y if w is None else y / w.to(y.device, y.dtype)

    return hook


def resolve_hooks(model, hooks: Sequence[tuple[str, Callable]]) -> list[tuple[str, Callable]]:
    """``hooks`` for ``model.hooks``: on a HookedTransformer one on ``ln_final.hook_out`` becomes
    an after-gain hook on ``hook_normalized``."""
    if not is_hooked(model) or FINAL_NORM_HOOK in model.hook_dict:
        return list(hooks)
    return [(HOOKED_FINAL_NORM_SOURCE, after_gain_hook(model, fn)) if name == FINAL_NORM_HOOK
            else (name, fn) for name, fn in hooks]


def readout_point(model, name: str) -> tuple[str, Callable[[Tensor], Tensor]]:
    """``(hook point, map)``: read ``name`` as ``map(value at that hook point)``."""
    if name == FINAL_NORM_HOOK and is_hooked(model) and name not in model.hook_dict:
        return HOOKED_FINAL_NORM_SOURCE, to_after_gain(model)
    return name, lambda x: x
