"""Where activations are computed: the residual stream at the contrasting token, every layer.

The two prompts of a contrast pair differ only in their final token:
:func:`ppairs_lens.activations.runner.run_branches` runs each shared prefix once and reads both
final tokens in one pass, equal to an unbatched run of each full prompt
(:func:`reference_activations`, tested against). A pair's prompt up to its final token is also
the prompted judge's: :func:`harvest_with_judge` reads that answer in the same passes, for the
store to keep (the judges then run only the swapped order).

A read-out is any hook point giving one vector per token (``[batch, position, width]``: the
residual stream, attention and MLP outputs, an SAE's latents on a ``HookedSAETransformer``), named
exactly, by preset (``"paper"``, ``"full"``) or by glob (``"blocks.*.hook_resid_pre"``). One
short forward pass orders the names and measures their shapes, so a hook that cannot be stored
(attention patterns, per-head values) is refused before a harvest.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.errors import DataError, HookError, PPairsError
from ppairs_lens.activations.few_logits import choice_columns, choice_logodds
from ppairs_lens.activations.prompts import ContrastPair
from ppairs_lens.activations.runner import HarvestSettings, model_device, run_branches
from ppairs_lens.models.backend import (
    backend_of,
    has_forward_hooks,
    hook_names,
    readout_point,
    resolve_hooks,
)
from ppairs_lens.models.hook_points import (
    PRESETS,
    READOUT_PRESET,
    Hook,
    check_hook_names,
    hook_points,
)


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
    """Every block's resid_post and the final norm."""
    return hook_points(READOUT_PRESET, model.cfg.n_layers)


def expand_readout_names(model, names: str | Sequence[str]) -> list[str]:
    """Exact names for ``names`` (hook names, presets, globs), duplicates dropped, unknown
    names refused with near misses."""
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
    """``names`` as exact hook names in forward order, each checked to give one vector per
    token, all of one width (a harvest stacks them)."""
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


class NonFiniteActivationError(PPairsError, FloatingPointError):
    """A harvested activation is NaN or infinite (for example a half-precision overflow)."""


def check_context_length(bridge, pair_ids: Sequence[str], prefixes) -> None:
    """Refuse a prompt (prefix plus one token) longer than ``cfg.n_ctx``, naming its pair."""
    backend_of(bridge)  # first: an object that is no TransformerLens model gets a clear error
    n_ctx = getattr(bridge.cfg, "n_ctx", None)
    if not n_ctx:
        return
    for pid, p in zip(pair_ids, prefixes):
        if len(p) + 1 > n_ctx:
            raise DataError(f"the prompt is {len(p) + 1} tokens, longer than the model's "
                            f"context of {n_ctx} tokens; shorten or drop this pair",
                            field=f"pair {pid}")


@torch.inference_mode()
def harvest_pairs(
    bridge,
    pairs: Sequence[ContrastPair],
    settings: HarvestSettings = HarvestSettings(),
    progress: Callable[[int], None] | None = None,
    *,
    hooks: Sequence[Hook] = (),
    final_hooks: Sequence[Hook] = (),
    names: str | Sequence[str] | None = None,
) -> Float[Tensor, "pair side readout d_model"]:
    """Residual stream at the final token of both prompts of each pair, for every layer:
    ``[n_pairs, 2, n_layers + 1, d_model]`` on CPU in ``settings.out_dtype`` (index
    ``n_layers``: the final norm's output), or the read-outs ``names`` in forward order.
    ``progress`` takes the number of pairs just finished; ``hooks``/``final_hooks`` act as in
    :func:`ppairs_lens.activations.runner.run_branches`.
    """
    return _harvest(bridge, pairs, settings, progress, hooks, final_hooks, names, False).acts


@dataclass(frozen=True)
class Harvested:
    """Activations, and ``judge_logodds[i]`` = logit(choice 1) - logit(choice 2) at pair
    ``i``'s last prompt token, float64 (None on a backend that cannot read there)."""

    acts: Float[Tensor, "pair side readout d_model"]
    judge_logodds: Float[np.ndarray, " pair"] | None


@torch.inference_mode()
def harvest_with_judge(bridge, pairs: Sequence[ContrastPair],
                       settings: HarvestSettings = HarvestSettings(),
                       progress: Callable[[int], None] | None = None, *,
                       names: str | Sequence[str] | None = None) -> Harvested:
    """:func:`harvest_pairs` without hooks, plus the zero-shot judge's log-odds read at the
    prompt's last token (a few columns more per pass). Under a caller's ablation or steering
    hooks they would not be the judge's: ``judge_logodds`` is then None."""
    return _harvest(bridge, pairs, settings, progress, (), (), names,
                    not has_forward_hooks(bridge))


def _harvest(bridge, pairs, settings, progress, hooks, final_hooks, names, judge: bool
             ) -> Harvested:
    prefixes = [p.prefix_ids for p in pairs]
    check_context_length(bridge, [p.pair_id for p in pairs], prefixes)
    names = readout_names(bridge, names)
    ids, columns = choice_columns([p.final_ids for p in pairs]) if judge else (None, None)
    out = run_branches(bridge, prefixes, [p.final_ids for p in pairs], [p.group for p in pairs],
                       names=names, hooks=hooks, final_hooks=final_hooks, settings=settings,
                       progress=progress, logit_ids=ids,
                       logits_at="end" if judge else "branches")
    bad = ~torch.isfinite(out.acts)
    if bad.any():
        p, side, layer, _ = bad.nonzero()[0].tolist()
        raise NonFiniteActivationError(
            f"non-finite activation at pair {pairs[p].pair_id} (index {p}), side {side}, "
            f"read-out {names[layer]}; a half-precision overflow? Load the model in float32.")
    end = out.end_logits
    return Harvested(out.acts, None if end is None else choice_logodds(end, columns))


def readout_names(bridge, names: str | Sequence[str] | None) -> list[str]:
    """The exact hook names a harvest of ``names`` reads (None: :func:`default_readouts`)."""
    if names is None:
        return default_readouts(bridge)
    return resolve_readouts(bridge, names, model_device(bridge)).names


def readout_width(bridge, names: str | Sequence[str] | None) -> int:
    """The width of the vectors a harvest of ``names`` reads (d_model, or an SAE's d_sae)."""
    if names is None:
        return int(bridge.cfg.d_model)
    return resolve_readouts(bridge, names, model_device(bridge)).width


@torch.inference_mode()
def reference_activations(bridge, prompt_ids: Sequence[int],
                          names: str | Sequence[str] | None = None
                          ) -> Float[Tensor, "readout d_model"]:
    """The straightforward computation: one unpadded prompt's read-outs at its last token."""
    names = readout_names(bridge, names)
    # On a HookedTransformer ``ln_final.hook_out`` is read at another point through a map.
    points = {n: readout_point(bridge, n) for n in names}
    wanted = {point for point, _ in points.values()}
    ids = torch.tensor([list(prompt_ids)], device=model_device(bridge))
    _, cache = bridge.run_with_cache(ids, names_filter=lambda n: n in wanted)
    return torch.stack([fn(cache[point][0, -1]).float().cpu() for point, fn in points.values()])
