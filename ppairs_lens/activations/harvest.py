"""Where activations are computed: the residual stream at the contrasting token, every layer.

The two prompts of a contrast pair differ only in their final token, and pairs that share a
context share a long token prefix: :func:`harvest_pairs` hands the prefixes and the two final
tokens to :func:`ppairs_lens.activations.runner.run_branches`, which runs each shared prefix
once and reads both final tokens in one pass, each seeing the prompt but not the other. The
stored values equal an unbatched, unpadded run of each full prompt
(:func:`reference_activations`, the straightforward computation they are tested against).
A pair's prompt up to its final token is also the prompted judge's (items in their order):
:func:`harvest_with_judge` reads that judge's answer at the last prompt token in the same
passes, for the store to keep (the judges then run only the swapped order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.errors import DataError, PPairsError
from ppairs_lens.activations.few_logits import choice_columns, choice_logodds
from ppairs_lens.activations.prompts import ContrastPair
from ppairs_lens.activations.readouts import default_readouts, resolve_readouts
from ppairs_lens.activations.runner import HarvestSettings, model_device, run_branches
from ppairs_lens.models.backend import backend_of, has_forward_hooks, readout_point
from ppairs_lens.models.hook_points import Hook


class NonFiniteActivationError(PPairsError, FloatingPointError):
    """A harvested activation is NaN or infinite (for example a half-precision overflow)."""


def check_context_length(bridge, pair_ids: Sequence[str], prefixes) -> None:
    """Refuse (:class:`DataError`) a prompt, prefix plus one token, longer than the model's
    context, naming its pair; a model without ``cfg.n_ctx`` is not checked."""
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
    """Residual stream at the final token of both prompts of each pair, for every layer.

    Returns ``[n_pairs, 2, n_layers + 1, d_model]`` on CPU in ``settings.out_dtype``; index
    ``n_layers`` is the final norm's output. ``names`` reads other hook points instead (exact
    names, presets, glob patterns such as ``"blocks.*.hook_resid_pre"``; see
    :func:`ppairs_lens.activations.readouts.resolve_readouts`), in forward order along axis 2.
    ``progress`` is an optional callable taking the number of pairs just finished.
    ``hooks``/``final_hooks`` (e.g. ablations) act during the harvest as in
    :func:`ppairs_lens.activations.runner.run_branches`.
    """
    return _harvest(bridge, pairs, settings, progress, hooks, final_hooks, names, False).acts


@dataclass(frozen=True)
class Harvested:
    """A plain harvest's activations, and the prompted zero-shot judge's answer to each pair's
    prompt read in the same passes: ``judge_logodds[i]`` = logit(choice 1) - logit(choice 2)
    at pair ``i``'s last prompt token, float64, as
    :func:`ppairs_lens.judges.zero_shot.choice_logodds_of` computes it (None on a backend
    that cannot read there)."""

    acts: Float[Tensor, "pair side readout d_model"]
    judge_logodds: Float[np.ndarray, " pair"] | None


@torch.inference_mode()
def harvest_with_judge(bridge, pairs: Sequence[ContrastPair],
                       settings: HarvestSettings = HarvestSettings(),
                       progress: Callable[[int], None] | None = None, *,
                       names: str | Sequence[str] | None = None) -> Harvested:
    """:func:`harvest_pairs` without hooks (what a store keeps), plus the judge's log-odds.

    A harvest pair's prompt up to its last token is exactly the zero-shot judge's prompt in
    the items' order, so the harvest reads the two choice tokens' logits there too (a few
    columns more per pass) and the judge need not run that prompt again. Only a plain
    harvest gives them: under ablation or steering hooks, ours or a caller's context already
    on the model, they would not be the judge's (``judge_logodds`` is then None)."""
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
    """The exact hook names a harvest of ``names`` reads (None: every block's resid_post and
    the final norm), refused unless each is one vector per token, all of one width (d_model,
    or an SAE's d_sae of any size: :func:`readout_width`)."""
    if names is None:
        return default_readouts(bridge)
    return resolve_readouts(bridge, names, model_device(bridge)).names


def readout_width(bridge, names: str | Sequence[str] | None) -> int:
    """The width of the vectors a harvest of ``names`` reads (d_model for the residual
    stream, d_sae for an SAE's latents)."""
    if names is None:
        return int(bridge.cfg.d_model)
    return resolve_readouts(bridge, names, model_device(bridge)).width


@torch.inference_mode()
def reference_activations(bridge, prompt_ids: Sequence[int],
                          names: str | Sequence[str] | None = None
                          ) -> Float[Tensor, "readout d_model"]:
    """The straightforward computation: one unpadded prompt, all read-outs (``names`` as in
    :func:`harvest_pairs`) at its last token."""
    names = readout_names(bridge, names)
    # On a HookedTransformer ``ln_final.hook_out`` is read at another point through a map.
    points = {n: readout_point(bridge, n) for n in names}
    wanted = {point for point, _ in points.values()}
    ids = torch.tensor([list(prompt_ids)], device=model_device(bridge))
    _, cache = bridge.run_with_cache(ids, names_filter=lambda n: n in wanted)
    return torch.stack([fn(cache[point][0, -1]).float().cpu() for point, fn in points.values()])
