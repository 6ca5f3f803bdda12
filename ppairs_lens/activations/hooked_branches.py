"""Several branch tokens in one HookedTransformer pass, each hidden from the others.

A contrast pair's two final tokens must each see the prompt but not each other, at the same
position. The bridge takes a 4-D mask and explicit positions; a ``HookedTransformer`` takes
neither, only a 2-D mask from which it derives positions (``cumsum - 1``). So:

- the 2-D mask keeps the first branch column and masks the others as keys: every branch token
  then sits at the first one's position (a masked column adds nothing to the cumsum), and no
  later query sees a masked branch;
- a hook on ``blocks.{l}.attn.hook_attn_scores`` (before the softmax) masks the first branch
  from the other branch queries and puts back each masked branch's score with itself, which
  the 2-D mask removed: ``q_b . k_b`` through the layer's own ``calculate_attention_scores``
  (same scale, grouped heads, soft cap), with ``q``/``k`` read at ``hook_rot_q``/``hook_rot_k``.

That is exact where a score is ``q . k`` after rotary positions and nothing else:
:func:`branch_fusable` says where.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.models.hook_points import Hook


def branch_fusable(model) -> bool:
    """Whether a score on this model is ``calculate_attention_scores(rot q, rot k)`` plus
    masks only (rotary positions, no ALiBi / relative bias / log-n query scaling)."""
    cfg = model.cfg
    return (cfg.positional_embedding_type == "rotary"
            and not getattr(cfg, "use_logn_attn", False)
            and (getattr(cfg, "attention_dir", "causal") == "causal"))


def branch_mask_hooks(model, n_branch: int) -> list[Hook]:
    """Hooks that hide the last ``n_branch`` columns of a pass from each other (see the
    module's docstring; the 2-D mask must keep the first of them and mask the rest)."""
    if n_branch < 2:
        return []
    hooks: list[Hook] = []
    for layer, block in enumerate(model.blocks):
        seen: dict[str, Tensor] = {}
        hooks += [(f"blocks.{layer}.attn.hook_rot_q", keep(seen, "q", n_branch)),
                  (f"blocks.{layer}.attn.hook_rot_k", keep(seen, "k", n_branch)),
                  (f"blocks.{layer}.attn.hook_attn_scores",
                   apart(block.attn, seen, n_branch))]
    return hooks


def keep(seen: dict[str, Tensor], key: str, n: int) -> Callable:
    """A hook keeping the last ``n`` positions of ``q`` or ``k`` (``[batch, pos, head, d]``)."""
    def hook(x, hook=None):
        seen[key] = x[:, -n:]
    return hook


def apart(attn, seen: dict[str, Tensor], n: int) -> Callable:
    """The hook on the scores: among the last ``n`` queries and keys, only the diagonal."""
    def hook(scores: Float[Tensor, "batch head query key"], hook=None):
        q, k = seen["q"], seen["k"]  # [batch, n, head, d], [batch, n, kv_head, d]
        b = q.shape[0]
        # Each branch's score with itself only (not n x n): the n pairs as a batch, through
        # the layer's own score function (scale, grouped heads, soft cap).
        own = attn.calculate_attention_scores(q.reshape(b * n, 1, *q.shape[2:]),
                                              k.reshape(b * n, 1, *k.shape[2:]))
        own = own.reshape(b, n, -1).transpose(1, 2)  # [batch, head, n]
        block = scores[:, :, -n:, -n:]
        block.fill_(attn.IGNORE.item())
        block.diagonal(dim1=-2, dim2=-1).copy_(own)
        seen.clear()
        return scores
    return hook


def branch_columns_mask(rows: int, n_branch: int, like: Tensor) -> Tensor:
    """The 2-D mask of ``n_branch`` branch columns: the first kept, the others masked."""
    out = torch.zeros(rows, n_branch, dtype=like.dtype, device=like.device)
    out[:, 0] = 1
    return out


def hooked_plain_unembedding(model) -> bool:
    """Whether the logits are ``final norm output @ W_U + b_U`` with nothing after (no soft
    cap) and no hook on the unembedding, so a few columns may be projected here."""
    from transformer_lens.hook_points import HookPoint

    cap = getattr(model.cfg, "output_logits_soft_cap", 0.0) or 0.0
    hooked = any(len(m._forward_hooks) for m in model.unembed.modules()
                 if isinstance(m, HookPoint))
    return cap <= 0 and not hooked


def project_hooked_logits(model, x: Float[Tensor, "*rows d_model"],
                          ids: Sequence[int]) -> Float[Tensor, "*rows n_ids"]:
    """Logits of token ``ids`` at final-norm outputs ``x`` (what the unembedding reads):
    without the unembedding's full-vocabulary product (and its transposed weight copy)."""
    idx = torch.as_tensor(list(ids), dtype=torch.long, device=model.unembed.W_U.device)
    w = model.unembed.W_U[:, idx].to(x.device, torch.float32)
    b = model.unembed.b_U[idx].to(x.device, torch.float32)
    return x.to(torch.float32) @ w + b
