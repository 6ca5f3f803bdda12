"""A bridge's attention through PyTorch's fused kernel while no hook reads its pattern.

TransformerBridge (transformer-lens 4) recomputes each block's attention step by step so that
``hook_attn_scores`` and ``hook_pattern`` can fire; in the main job that eager path was a third
of all CPU time (py-spy over ``make demo``), mostly for passes reading only the residual stream.
:func:`set_fused_attention` gives each plain rotary attention block a forward that, where
neither hook point has a hook, uses ``scaled_dot_product_attention`` (equal to float error;
every other hook point fires as before). Hooked scores or pattern, training, a caller asking
for attention weights, or any other attention shape (q/k norms, softcapping, sinks, gates,
split inputs, sliding windows, partial rotary) run the bridge's own forward.
"""

from __future__ import annotations

from types import MethodType
from typing import Any

import torch
from einops import rearrange
from torch import Tensor

__all__ = ["fused_blocks", "set_fused_attention"]

#: Config flags that change the attention path (each makes a block keep its eager forward).
_CONFIG_FLAGS = ("use_split_qkv_input", "use_attn_in", "use_attn_result", "gated_q_proj",
                 "rotary_interleaved_cos_sin", "rotary_adjacent_pairs", "qk_norm_after_rope")
#: Attributes of the HF attention module that change the path.
_HF_ATTRS = ("attn_logit_softcapping", "sinks", "key_multiplier", "sliding_window")
#: torch 2.5 added grouped-query attention to the fused kernel.
_NATIVE_GQA = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)
#: What the fused forward does not compute, so a hook on either needs the eager forward.
_PATTERN_HOOKS = ("hook_attn_scores", "hook_pattern")


def _eligible(component) -> bool:
    """Whether ``component`` is plain rotary attention (Llama's shape)."""
    try:
        from transformer_lens.model_bridge.generalized_components.position_embeddings_attention \
            import PositionEmbeddingsAttentionBridge
    except ImportError:  # transformer-lens 3.x: another attention bridge
        return False
    if type(component) is not PositionEmbeddingsAttentionBridge or not all(
            hasattr(component, a) for a in ("_apply_position_embedding_hooks", "_update_kv_cache",
                                            "hook_rot_q", "hook_rot_k", *_PATTERN_HOOKS)):
        return False
    hf = component.original_component
    cfg = component.config
    if hf is None or not all(hasattr(hf, a) for a in ("head_dim", "scaling")):
        return False
    if any(bool(getattr(cfg, f, False)) for f in _CONFIG_FLAGS):
        return False
    if any(getattr(hf, a, None) is not None for a in _HF_ATTRS):
        return False
    rope = getattr(getattr(hf, "config", None), "rope_parameters", None)
    if isinstance(rope, dict) and rope.get("llama_4_scaling_beta") is not None:
        return False
    subs = set(component._modules)
    return {"q", "k", "v", "o"} <= subs and not subs & {"q_norm", "k_norm", "gate"}


def _hooked(point) -> bool:
    return bool(point._forward_hooks or point._forward_pre_hooks or point._backward_hooks
                or getattr(point, "fwd_hooks", None) or getattr(point, "bwd_hooks", None))


def _mask(attention_mask: Tensor | None, q_len: int, kv_len: int, device) -> Tensor:
    """The mask as the eager path applies it (causal over the cache when none is given)."""
    if attention_mask is None:
        return torch.ones(q_len, kv_len, dtype=torch.bool, device=device).tril(kv_len - q_len)
    m = attention_mask[..., :kv_len]
    return m[..., -q_len:, :] if m.shape[-2] != q_len else m


def _fused_forward(self, *args: Any, **kwargs: Any):
    """The attention block's forward, bound to the block (a copied bridge's blocks stay their
    own)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, repeat_kv

    hf = self.original_component
    mask = kwargs.get("attention_mask")
    pe = kwargs.get("position_embeddings")
    hidden = kwargs.get("hidden_states", args[0] if args else None)
    if (self.training or kwargs.get("output_attentions") or not isinstance(hidden, Tensor)
            or pe is None or pe[0].shape[-1] != hf.head_dim  # partial / half-width rotary
            or (mask is not None and mask.ndim != 4)
            or any(_hooked(getattr(self, h)) for h in _PATTERN_HOOKS)):
        return type(self).forward(self, *args, **kwargs)
    if "hidden_states" in kwargs:
        kwargs.pop("hidden_states")
    else:
        args = args[1:]
    kwargs.pop("attention_mask", None)
    cos, sin = self._apply_position_embedding_hooks(kwargs.pop("position_embeddings"))
    hidden = self.hook_in(hidden)
    heads = "b s (h d) -> b h s d"
    q = rearrange(self.q(hidden), heads, d=hf.head_dim)
    k = rearrange(self.k(hidden), heads, d=hf.head_dim)
    v = rearrange(self.v(hidden), heads, d=hf.head_dim)
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    q, k = self.hook_rot_q(q), self.hook_rot_k(k)
    k, v = self._update_kv_cache(k, v, **kwargs)
    gqa = {}
    if q.shape[1] != k.shape[1]:  # grouped keys: the kernel's own grouping copies nothing
        if _NATIVE_GQA:
            gqa = {"enable_gqa": True}
        else:
            groups = q.shape[1] // k.shape[1]
            k, v = repeat_kv(k, groups), repeat_kv(v, groups)
    m = _mask(mask, q.shape[-2], k.shape[-2], q.device)
    if m.dtype != torch.bool:
        m = m.to(q.dtype)
    z = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=hf.scaling,
                                                         **gqa)
    return self.hook_out(self.o(rearrange(z, "b h s d -> b s (h d)"))), None


def set_fused_attention(bridge, enabled: bool = True) -> int:
    """Give every eligible attention block the fused forward (``enabled=False``: its own back);
    returns how many have the fused one. Idempotent."""
    for module in bridge.modules():
        fused = module.__dict__.get("_ppairs_fused", False)
        if enabled and not fused and _eligible(module):
            # object's setattr: the bridge's own passes other names on to the wrapped HF module
            object.__setattr__(module, "forward", MethodType(_fused_forward, module))
            object.__setattr__(module, "_ppairs_fused", True)
        elif not enabled and fused:
            del module.__dict__["forward"], module.__dict__["_ppairs_fused"]
    return fused_blocks(bridge)


def fused_blocks(bridge) -> int:
    """How many attention blocks of ``bridge`` run the fused forward when unhooked."""
    return sum(bool(m.__dict__.get("_ppairs_fused", False)) for m in bridge.modules())
