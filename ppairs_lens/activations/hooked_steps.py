"""The forward steps of a harvest on a ``HookedTransformer`` (TransformerLens < 4).

:mod:`ppairs_lens.activations.prefix_sharing` runs a plan through two callables (``Forward``,
``Read``); the bridge's are :func:`ppairs_lens.activations.runner.bridge_steps`. Here:

- the cache is TransformerLens' own, held between passes as :class:`HookedKV`; the rows of a
  batch-1 context are views of it (``expand``), copied only when a pass extends them;
- positions come from the 2-D attention mask (``cumsum - 1``), equal to prefix sharing's
  explicit positions for every real token (padding columns are masked as keys);
- there is no 4-D mask, so for a tail and its branch tokens in one pass (each branch seeing
  the prompt but not its siblings, at one position) the 2-D mask keeps the first branch column
  and masks the others (adding nothing to the cumsum), and a hook on
  ``blocks.{l}.attn.hook_attn_scores`` (before the softmax) masks the first branch from the
  other branch queries and puts back each masked branch's score with itself, through the
  layer's own ``calculate_attention_scores`` on ``q``/``k`` read at ``hook_rot_q``/``hook_rot_k``.

That is exact where a score is ``q . k`` after rotary positions and nothing else
(:func:`branch_fusable`); other models (ALiBi, relative biases, log-n scaling, no rotary
positions) run each further branch token in a pass of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.prefix_sharing import Forward, Read
from ppairs_lens.errors import PPairsError
from ppairs_lens.models.backend import (
    FINAL_NORM_HOOK,
    hooked_device,
    readout_point,
    resolve_hooks,
)
from ppairs_lens.models.hook_points import Hook


@dataclass
class KVLayer:
    """One layer's cached keys and values, ``[row, pos, kv_head, d_head]``."""

    keys: Tensor
    values: Tensor


class HookedKV:
    """A HookedTransformer key-value cache in the form prefix sharing handles. Like HF's
    ``DynamicCache`` layers, the layers rebind (never write into) their tensors, so shallow
    copies, then ``batch_select_indices``, are an independent cache. The attention mask is not
    kept here: each pass is given it."""

    def __init__(self, layers: list[KVLayer]):
        self.layers = layers

    def batch_select_indices(self, index: Tensor) -> None:
        """Keep rows ``index`` (views of a batch-1 cache, else gathered copies)."""
        n = self.layers[0].keys.shape[0] if self.layers else 0
        one = n == 1 and bool((index == 0).all())
        for layer in self.layers:
            if one:  # every row is the one context: views, copied when a pass extends them
                layer.keys = layer.keys.expand(len(index), -1, -1, -1)
                layer.values = layer.values.expand(len(index), -1, -1, -1)
            else:
                layer.keys = layer.keys[index.to(layer.keys.device)]
                layer.values = layer.values[index.to(layer.values.device)]


def tl_cache(model, cache: HookedKV | None, seen: Tensor, *, frozen: bool):
    """TransformerLens' cache holding ``cache`` (None: an empty one), columns masked ``seen``
    (``[row, cached]``)."""
    from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache
    from transformer_lens.cache.key_value_cache_entry import TransformerLensKeyValueCacheEntry

    if cache is None:
        kv = TransformerLensKeyValueCache.init_cache(model.cfg, hooked_device(model),
                                                     seen.shape[0])
    else:
        kv = TransformerLensKeyValueCache(
            [TransformerLensKeyValueCacheEntry(l.keys, l.values) for l in cache.layers],
            seen.to(hooked_device(model)))
    if frozen:
        kv.freeze()
    return kv


def check_window(model, mask: Tensor) -> None:
    """Refuse a padded pass longer than a local-attention window: TransformerLens counts the
    window in cache columns, padding included, so it would not match the unpadded prompt."""
    window = getattr(model.cfg, "window_size", None)
    if getattr(model.cfg, "use_local_attn", False) and window and mask.shape[1] > window \
            and not bool(mask.bool().all()):
        raise PPairsError(
            f"this HookedTransformer has local attention (window {window}) and a padded batch "
            f"of {mask.shape[1]} columns: padding would shift its window. Harvest with "
            "HarvestSettings(share_prefixes=False), which runs every prompt unpadded")


def branch_fusable(model) -> bool:
    """Whether a score is ``calculate_attention_scores(rot q, rot k)`` plus masks only (rotary
    positions; no ALiBi, relative bias or log-n query scaling)."""
    cfg = model.cfg
    return (cfg.positional_embedding_type == "rotary"
            and not getattr(cfg, "use_logn_attn", False)
            and (getattr(cfg, "attention_dir", "causal") == "causal"))


def branch_mask_hooks(model, n_branch: int) -> list[Hook]:
    """Hooks that hide the last ``n_branch`` columns of a pass from each other (the 2-D mask
    must keep the first of them and mask the rest)."""
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


def hooked_plain_unembedding(model) -> bool:
    """Whether the logits are ``final norm output @ W_U + b_U`` (no soft cap, no hook on the
    unembedding), so a few columns may be projected."""
    from transformer_lens.hook_points import HookPoint

    cap = getattr(model.cfg, "output_logits_soft_cap", 0.0) or 0.0
    hooked = any(len(m._forward_hooks) for m in model.unembed.modules()
                 if isinstance(m, HookPoint))
    return cap <= 0 and not hooked


def project_hooked_logits(model, x: Float[Tensor, "*rows d_model"],
                          ids: Sequence[int]) -> Float[Tensor, "*rows n_ids"]:
    """Logits of token ``ids`` at final-norm outputs ``x``, without the full-vocabulary
    product (and its transposed weight copy)."""
    idx = torch.as_tensor(list(ids), dtype=torch.long, device=model.unembed.W_U.device)
    w = model.unembed.W_U[:, idx].to(x.device, torch.float32)
    b = model.unembed.b_U[idx].to(x.device, torch.float32)
    return x.to(torch.float32) @ w + b


def hooked_steps(model, names: Sequence[str] = (), logit_ids: Sequence[int] | None = None,
                 final_hooks: Sequence[tuple[str, Callable]] = ()) -> tuple[Forward, Read]:
    """A HookedTransformer's steps, with the contract of
    :func:`ppairs_lens.activations.runner.bridge_steps`: read-outs ``names``
    (``ln_final.hook_out`` is the after-gain state) and next-token ``logit_ids`` at the branch
    tokens, with ``final_hooks`` on the branch passes only."""
    names = list(names)
    points = [readout_point(model, n) for n in names]
    final_hooks = resolve_hooks(model, final_hooks)
    fusable = branch_fusable(model)
    final_point = readout_point(model, FINAL_NORM_HOOK)
    final_key = "final norm, for logits"  # its own key: names may hold ln_final.hook_out too

    def forward(ids, cache, mask, pos):
        check_window(model, mask)
        new = ids.shape[1]
        kv = tl_cache(model, cache, mask[:, :mask.shape[1] - new], frozen=False)
        model(ids, return_type=None, past_kv_cache=kv, attention_mask=mask[:, -new:])
        return HookedKV([KVLayer(e.past_keys, e.past_values) for e in kv.entries])

    def branch_pass(tokens, cache, seen, new_mask, frozen: bool, n_read: int = 1,
                    extra: Sequence[tuple[str, Callable]] = (), project: bool = False):
        """``tokens`` after ``cache`` (columns masked ``seen``) under the branch hooks, read at
        the last ``n_read`` columns; also the filled cache. ``project``: logits from the final
        norm (the model computes none)."""
        grabbed: dict[str, Tensor] = {}

        def grabber(name, to_readout):
            def grab(x, hook):
                grabbed[name] = to_readout(x[:, -n_read:]).to(tokens.device, torch.float32,
                                                              copy=True)
            return grab

        kv = tl_cache(model, cache, seen, frozen=frozen)
        # Grabbers after final_hooks on the same point, so they see what those hooks did.
        fwd = (final_hooks + list(extra) + [(p, grabber(n, f)) for n, (p, f) in zip(names, points)]
               + ([(final_point[0], grabber(final_key, final_point[1]))] if project else []))
        with model.hooks(fwd_hooks=fwd):
            full = logit_ids is not None and not project
            out = model(tokens, past_kv_cache=kv, attention_mask=new_mask,
                        return_type="logits" if full else None)
        acts = torch.stack([grabbed[n] for n in names], 2) if names else None  # row, col, ...
        if logit_ids is None:
            lg = None
        elif project:
            lg = project_hooked_logits(model, grabbed[final_key], logit_ids)
        else:
            lg = out[:, -n_read:, list(logit_ids)].float()
        return acts, lg, kv

    def fused_read(ids, cache, seen, c, width, n_read):
        """Tail and every branch token in one pass. Logits are projected from the final norm
        where the unembedding is plain; else the tail runs first, so the model computes them
        at the branches only."""
        project = logit_ids is not None and hooked_plain_unembedding(model)
        if width and logit_ids is not None and not project:
            cache = forward(ids[:, :width], cache, seen, None)
            ids, c, width = ids[:, width:], c + width, 0
        branch_cols = torch.zeros(ids.shape[0], n_read, dtype=seen.dtype, device=seen.device)
        branch_cols[:, 0] = 1  # the first branch column kept, the others masked
        acts, lg, _ = branch_pass(ids, cache, seen[:, :c],
                                  torch.cat([seen[:, c:], branch_cols], 1), frozen=False,
                                  n_read=n_read, extra=branch_mask_hooks(model, n_read),
                                  project=project)
        return ((acts.flatten(0, 1).cpu() if names else None),
                (lg.flatten(0, 1).cpu() if logit_ids is not None else None))

    def read(ids, cache, mask, pos, n_read):
        width = ids.shape[1] - n_read
        c = mask.shape[-1] - ids.shape[1]
        # The 4-D mask's last query is a branch token: it sees the prefix and the real tail.
        seen = mask[:, 0, -1, :c + width].long()
        one = torch.ones(ids.shape[0], 1, dtype=seen.dtype, device=seen.device)
        check_window(model, torch.cat([seen, one], 1))
        if fusable:
            return fused_read(ids, cache, seen, c, width, n_read)
        reads, first = [], width
        if width and logit_ids is None and not final_hooks:
            # The tail and the first branch token in one pass (one pass fewer): with right
            # padding that token follows padding columns, masked as keys, and TransformerLens
            # counts positions from the mask, so it sees and sits where it would unpadded.
            # (Not with logits: they would be computed at every column of the tail.)
            a, lg, kv = branch_pass(ids[:, :width + 1], cache, seen[:, :c],
                                    torch.cat([seen[:, c:], one], 1), frozen=False)
            reads.append((a, lg))
            cache = HookedKV([KVLayer(e.past_keys[:, :-1], e.past_values[:, :-1])
                              for e in kv.entries])  # views without that token
            first = width + 1
        elif width:
            cache = forward(ids[:, :width], cache, seen, pos[:, :width])
        for b in range(first, ids.shape[1]):  # each further branch alone, over a frozen cache
            a, lg, _ = branch_pass(ids[:, b:b + 1], cache, seen, one, frozen=True)
            reads.append((a, lg))
        # Rows first, each row's branches together, as the bridge's read gives them.
        acts = torch.cat([a for a, _ in reads], 1).flatten(0, 1).cpu() if names else None
        logits = (torch.cat([lg for _, lg in reads], 1).flatten(0, 1).cpu()
                  if logit_ids is not None else None)
        return acts, logits

    return forward, read
