"""Where activations are computed: the residual stream at the contrasting token, every layer.

The two prompts of a contrast pair differ only in their final token, and pairs that share a
context share a long token prefix: :func:`harvest_pairs` hands the prefixes and the two final
tokens to :func:`ppairs_lens.activations.runner.run_branches`, which runs each shared prefix
once and reads both final tokens in one pass, each seeing the prompt but not the other. The
stored values equal an unbatched, unpadded run of each full prompt
(:func:`reference_activations`, the straightforward computation they are tested against).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.errors import DataError, PPairsError
from ppairs_lens.activations.prompts import ContrastPair
from ppairs_lens.activations.readouts import default_readouts, resolve_readouts
from ppairs_lens.activations.runner import HarvestSettings, model_device, run_branches
from ppairs_lens.models.backend import backend_of, readout_point
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
    prefixes = [p.prefix_ids for p in pairs]
    check_context_length(bridge, [p.pair_id for p in pairs], prefixes)
    names = readout_names(bridge, names)
    out = run_branches(bridge, prefixes, [p.final_ids for p in pairs], [p.group for p in pairs],
                       names=names, hooks=hooks, final_hooks=final_hooks, settings=settings,
                       progress=progress).acts
    bad = ~torch.isfinite(out)
    if bad.any():
        p, side, layer, _ = bad.nonzero()[0].tolist()
        raise NonFiniteActivationError(
            f"non-finite activation at pair {pairs[p].pair_id} (index {p}), side {side}, "
            f"read-out {names[layer]}; a half-precision overflow? Load the model in float32.")
    return out


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
