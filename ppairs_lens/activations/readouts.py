"""Which hook points a harvest reads out: names, presets and glob patterns -> exact hook names.

A read-out is any hook point that gives one vector per token (``[batch, position, width]``):
the residual stream (``blocks.L.hook_resid_pre/mid/post``), attention and MLP outputs, the
final norm, an SAE's latents on a ``HookedSAETransformer``. Users name them exactly, by preset
(``"paper"``, ``"full"``: :func:`ppairs_lens.models.hook_points.hook_points`) or by glob
pattern (``"blocks.*.hook_resid_pre"``), expanded against the model's ``hook_dict``. One short
forward pass puts the names in forward order and measures each one's shape, so a hook that
cannot be stored (attention patterns, per-head values) is refused before a harvest starts.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ppairs_lens.errors import HookError
from ppairs_lens.models.backend import hook_names, resolve_hooks
from ppairs_lens.models.hook_points import PRESETS, READOUT_PRESET, check_hook_names, hook_points

__all__ = ["Readouts", "default_readouts", "expand_readout_names", "resolve_readouts"]

#: Tokens of the forward pass that measures hook shapes: more than 1 (so the position axis
#: shows) and odd, so a head axis of a small model is unlikely to pass for it.
PROBE_TOKENS = 5
_GLOB_CHARS = "*?["


@dataclass(frozen=True)
class Readouts:
    """Exact hook names in forward order and the width every one of them has."""

    names: list[str]
    width: int


def default_readouts(model) -> list[str]:
    """The read-outs of a harvest given no names: every block's resid_post and the final norm."""
    return hook_points(READOUT_PRESET, model.cfg.n_layers)


def expand_readout_names(model, names: str | Sequence[str]) -> list[str]:
    """Exact names for ``names`` (exact hook names, preset names, glob patterns; a single
    string is one of these), duplicates dropped, unknown names refused with near misses."""
    specs = [names] if isinstance(names, str) else list(names)
    if not specs or not all(isinstance(s, str) and s for s in specs):
        raise HookError(f"read-outs must be hook names, presets {PRESETS} or glob patterns, "
                        f"got {names!r}")
    known = hook_names(model)
    chosen: list[str] = []
    for spec in specs:
        if spec in PRESETS:
            chosen += hook_points(spec, model.cfg.n_layers)
        elif any(c in spec for c in _GLOB_CHARS):
            hits = fnmatch.filter(known, spec)
            if not hits:
                # A near miss of the pattern with its wildcards filled by a layer index.
                close = difflib.get_close_matches(spec.replace("*", "0").replace("?", "0"),
                                                  known, n=5, cutoff=0.6)
                hint = f"; close hook names: {close}" if close else ""
                raise HookError(f"the hook pattern {spec!r} matches no hook point of this "
                                f"model{hint}")
            chosen += hits
        else:
            chosen.append(spec)
    chosen = list(dict.fromkeys(chosen))
    check_hook_names(model, chosen)
    return chosen


@torch.inference_mode()
def resolve_readouts(model, names: str | Sequence[str] | None, device: torch.device
                     ) -> Readouts:
    """``names`` (None: :func:`default_readouts`) as exact hook names in forward order, each
    checked to give one vector per token, all of one width (a harvest stacks them)."""
    exact = default_readouts(model) if names is None else expand_readout_names(model, names)
    shapes: dict[str, tuple[int, ...]] = {}  # filled as hooks fire: forward order

    def measure(name):
        def hook(x, hook=None):
            shapes.setdefault(name, tuple(x.shape))
        return hook

    ids = torch.zeros(1, PROBE_TOKENS, dtype=torch.long, device=device)
    with model.hooks(fwd_hooks=resolve_hooks(model, [(n, measure(n)) for n in exact])):
        model(ids, return_type=None)
    fired = list(shapes)
    silent = [n for n in exact if n not in shapes]
    if silent:
        raise HookError(f"hook points {silent} did not fire in a forward pass of this model; "
                        "they cannot be read out")
    widths: dict[int, list[str]] = {}
    for n in fired:
        shape = shapes[n]
        if len(shape) != 3 or shape[:2] != (1, PROBE_TOKENS):
            raise HookError(
                f"hook point {n!r} gives a tensor of shape {list(shape)} for one prompt of "
                f"{PROBE_TOKENS} tokens, not one vector per token ([batch, position, width]); "
                "attention patterns and scores and per-head hooks (hook_q/k/v/z) cannot be "
                "stored: read hook_attn_out, or an attention block's hook_out, instead")
        widths.setdefault(shape[2], []).append(n)
    if len(widths) > 1:
        raise HookError(f"the read-outs have different widths {dict(widths)}; a harvest and a "
                        "store hold read-outs of one width, so harvest each width on its own")
    return Readouts(fired, next(iter(widths)))
