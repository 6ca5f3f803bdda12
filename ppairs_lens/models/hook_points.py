"""Hook points: the read-out and ablation presets, what a hook is, and how an unknown name is
refused (with near misses, so a typo is fixed at once)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import Literal

from ppairs_lens.errors import HookError
from ppairs_lens.models.backend import FINAL_NORM_HOOK, hook_names

#: A forward hook as TransformerLens' ``hooks`` / ``run_with_hooks`` take it.
Hook = tuple[str, Callable]
Preset = Literal["paper", "full"]

#: The embedding hook (an alias of ``embed.hook_out`` on the bridge).
EMBED_HOOK = "hook_embed"
PRESETS: tuple[str, ...] = ("paper", "full")
#: The preset harvests store as read-outs: the paper's residual stream at every layer.
READOUT_PRESET: Preset = "paper"


def hook_points(preset: Preset | Sequence[str], n_layers: int) -> list[str]:
    """The hook names of a preset, in forward order: ``"paper"`` (the stored read-outs, and
    where the paper ablates), ``"full"`` (every write into the residual stream). An explicit
    list is returned as given, duplicates dropped, unchecked."""
    if isinstance(preset, str):
        if preset == "paper":
            return [f"blocks.{l}.hook_resid_post" for l in range(n_layers)] + [FINAL_NORM_HOOK]
        if preset == "full":
            per_block = [f"blocks.{l}.{h}" for l in range(n_layers)
                         for h in ("hook_attn_out", "hook_mlp_out")]
            return [EMBED_HOOK, *per_block, FINAL_NORM_HOOK]
        raise ValueError(f"unknown hook preset {preset!r}; use one of {PRESETS} or a list "
                         "of hook names")
    names = list(dict.fromkeys(preset))
    if not names or not all(isinstance(n, str) for n in names):
        raise ValueError("an explicit preset must be a non-empty list of hook names")
    return names


def check_hook_names(model, names: Sequence[str]) -> None:
    """Refuse any name that is not a hook point of ``model``, suggesting near misses."""
    known = hook_names(model)  # ln_final.hook_out on a HookedTransformer too
    for n in names:
        if n not in known:
            close = difflib.get_close_matches(n, list(known), n=5, cutoff=0.6)
            hint = f"; close matches: {close}" if close else ""
            raise HookError(f"unknown hook point {n!r} for this model{hint}")
