"""Next-token logits of a few token ids, without the model's full-vocabulary unembedding.

A judge or an ablation reads the logits of two or three token ids at many positions, where the
HF model would project each onto the whole vocabulary (49152 x 576 on SmolLM2: about a quarter
of a branch pass). Where the logits are exactly ``lm_head(last hidden state)``, the bridge is
asked for none and the few columns are projected here from ``ln_final.hook_out``.

:func:`choice_logodds` is here so that a harvest computes a judge's answer exactly as the
judges do.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from ppairs_lens.models.backend import FINAL_NORM_HOOK

#: HF causal-LM classes whose logits are ``lm_head(last_hidden_state[:, kept])`` and nothing
#: more (checked in transformers' modeling code). Others (Gemma 2's soft-capping, Cohere's
#: logit scale, ...) change the logits after ``lm_head``, so they keep the model's own path.
PLAIN_UNEMBEDDING_MODELS = frozenset(
    {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"})


def plain_unembedding(bridge) -> bool:
    """Whether :func:`project_logits` computes ``bridge``'s logits: a listed HF model, a linear
    unembedding not offloaded, and the final norm's hook seeing the tensor unconverted."""
    hf = getattr(bridge, "original_model", None)
    linear = getattr(getattr(bridge, "unembed", None), "original_component", None)
    point = getattr(bridge, "hook_dict", {}).get(FINAL_NORM_HOOK)
    return (type(hf).__name__ in PLAIN_UNEMBEDDING_MODELS
            and isinstance(linear, torch.nn.Linear) and linear.weight.device.type != "meta"
            and point is not None and getattr(point, "hook_conversion", None) is None)


def unembedding_hooked(bridge) -> bool:
    """Whether a forward hook is on the unembedding now (``unembed.hook_in``/``hook_out``):
    it must see the logits the model computes, so then the model computes them."""
    from transformer_lens.hook_points import HookPoint

    return any(len(m._forward_hooks) for m in bridge.unembed.modules()
               if isinstance(m, HookPoint))


def no_logits() -> Tensor:
    """A ``logits_to_keep`` that keeps no position. On the CPU: torch takes CPU indices for a
    tensor on any device, and on a split model the last hidden state is not where the ids are."""
    return torch.empty(0, dtype=torch.long)


def project_logits(bridge, x: Float[Tensor, "*rows d_model"],
                   ids: Sequence[int]) -> Float[Tensor, "*rows n_ids"]:
    """``x @ W_U[:, ids] + b_U[ids]`` with the unembedding's weights, in float32."""
    linear = bridge.unembed.original_component
    idx = torch.as_tensor(list(ids), dtype=torch.long, device=linear.weight.device)
    w = linear.weight[idx].to(x.device, torch.float32)
    out = x.to(torch.float32) @ w.T
    if linear.bias is not None:  # the bridge adds a zero buffer where the checkpoint has none
        out = out + linear.bias[idx].to(x.device, torch.float32)
    return out


def choice_columns(final_ids: Sequence[tuple[int, int]]) -> tuple[list[int], Int[Tensor, "pair 2"]]:
    """The sorted union of all prompts' choice ids, and ``columns[i]``: prompt ``i``'s two."""
    ids = sorted({t for pair in final_ids for t in pair})
    col = {t: i for i, t in enumerate(ids)}
    return ids, torch.tensor([[col[a], col[b]] for a, b in final_ids], dtype=torch.long)


def choice_logodds(logits: Float[Tensor, "pair n_ids"], columns: Int[Tensor, "pair 2"]
                   ) -> Float[np.ndarray, "pair"]:
    """logit(first choice) - logit(second choice) per prompt, in float64 (not through a
    probability, so a confident judge keeps its full log-odds); NaN where a row's logits are."""
    two = logits.gather(1, columns.to(logits.device)).double()
    return (two[:, 0] - two[:, 1]).cpu().numpy()
