"""Where activations are computed: the residual stream at the contrasting token, every layer.

The two prompts of a contrast pair differ only in their final token, and pairs that share a
context (an article with its 16 summaries) share a long token prefix. So we run:

1. the group's common prefix once (batch 1), keeping its key-value cache;
2. each pair's own middle part (items, question, assistant prefix) on a copy of that cache,
   right-padded in length-sorted batches sized by tokens;
3. the two final tokens of every pair from that cache, with hooks reading only that position.

Positions are passed explicitly and padding is masked with the tokenizer's conventions (never
inferred from token ids: the pad token is also the end-of-turn token), so the stored values
equal an unbatched, unpadded run of each full prompt.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from .errors import DataError, PPairsError
from .prompts import ContrastPair


class NonFiniteActivationError(PPairsError, FloatingPointError):
    """A harvested activation is NaN or infinite (for example a half-precision overflow)."""


def hook_names(n_layers: int) -> list[str]:
    """The stored read-out points: every block's resid_post, then the final norm's output."""
    return [f"blocks.{l}.hook_resid_post" for l in range(n_layers)] + ["ln_final.hook_out"]


@dataclass(frozen=True)
class HarvestSettings:
    """How a harvest batches its work; none of these change the numbers stored."""

    token_budget: int = 16384  # rows x (context + suffix) tokens held per forward pass
    share_prefixes: bool = True  # False runs each pair's whole prefix (a reference path)
    out_dtype: torch.dtype = torch.float32


def _common_prefix_len(seqs: Sequence[Sequence[int]]) -> int:
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for s in seqs[1:]:
        i = 0
        while i < n and s[i] == first[i]:
            i += 1
        n = i
    return n


#: Groups with fewer rows than this are pooled: what they share beyond the template is
#: small, and running each as its own tiny batch costs far more than it saves.
MIN_GROUP_ROWS = 8


def _groups(prefixes: Sequence[Sequence[int]], keys: Sequence[str], share: bool
            ) -> Iterator[tuple[list[int], int]]:
    """(row indices, shared-prefix length) for each group of rows that share a prefix.

    Rows of small groups (one story with one pair, an instruction with two answers) are
    pooled into one group sharing the template's common prefix, so they batch together.
    """
    if not share:
        for i, p in enumerate(prefixes):
            yield [i], len(p) - 1
        return
    by_group: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        by_group.setdefault(k, []).append(i)
    big = [idx for idx in by_group.values() if len(idx) >= MIN_GROUP_ROWS]
    pooled = [i for idx in by_group.values() if len(idx) < MIN_GROUP_ROWS for i in idx]
    for idx in big + ([sorted(pooled)] if pooled else []):
        c = _common_prefix_len([prefixes[i] for i in idx])
        if c == 0:  # nothing shared: every row is its own group
            for i in idx:
                yield [i], len(prefixes[i]) - 1
        else:
            # Keep at least one token per row in its own part, so every row has a real
            # position before its branch tokens (simplifies the masks below).
            yield idx, min(c, min(len(prefixes[i]) for i in idx) - 1)


def _device(bridge) -> torch.device:
    """Where token ids go: the bridge's execution device (a disk-offloaded embedding's
    parameters sit on 'meta', which holds no data; models.load_model points cfg.device at
    accelerate's execution device)."""
    dev = getattr(bridge.cfg, "device", None)
    return torch.device(dev) if dev else next(bridge.parameters()).device


def _check_context_length(bridge, pair_ids: Sequence[str], prefixes) -> None:
    n_ctx = getattr(bridge.cfg, "n_ctx", None)
    if not n_ctx:
        return
    for pid, p in zip(pair_ids, prefixes):
        if len(p) + 1 > n_ctx:
            raise DataError(f"the prompt is {len(p) + 1} tokens, longer than the model's "
                            f"context of {n_ctx} tokens; shorten or drop this pair",
                            field=f"pair {pid}")


Hook = tuple[str, Callable]


@dataclass
class BranchOutputs:
    """What :func:`run_branches` read at each branch token."""

    acts: Float[Tensor, "row branch readout d_model"] | None
    logits: Float[Tensor, "row branch n_ids"] | None


@torch.inference_mode()
def run_branches(
    bridge,
    prefixes: Sequence[Sequence[int]],
    branches: Sequence[Sequence[int]],
    groups: Sequence[str],
    *,
    names: Sequence[str] = (),
    logit_ids: Sequence[int] | None = None,
    hooks: Sequence[Hook] = (),
    final_hooks: Sequence[Hook] = (),
    settings: HarvestSettings = HarvestSettings(),
    progress: Callable[[int], None] | None = None,
) -> BranchOutputs:
    """For each row, run ``prefix`` once and read the model at each token of ``branches[row]``
    appended to it (each branch alone, all from the same prefix cache).

    Rows with the same ``groups`` key share their common token prefix, which is run once.
    ``names`` are hook points read at the branch token; ``logit_ids`` selects next-token logits
    read there. ``hooks`` act on every forward pass, ``final_hooks`` only on the branch step
    (its sequence is that one token, so position -1 is the read-out position).
    """
    n_branch = len(branches[0])
    if any(len(b) != n_branch for b in branches):
        raise ValueError("every row needs the same number of branch tokens")
    dev = _device(bridge)
    acts = (torch.empty(len(prefixes), n_branch, len(names), bridge.cfg.d_model,
                        dtype=settings.out_dtype) if names else None)
    logits = (torch.empty(len(prefixes), n_branch, len(logit_ids)) if logit_ids is not None
              else None)
    with bridge.hooks(fwd_hooks=list(hooks)):
        for idx, c in _groups(prefixes, groups, settings.share_prefixes):
            ctx = torch.tensor([list(prefixes[idx[0]][:c])], device=dev)
            _, ctx_cache = bridge(ctx, return_type="logits_and_cache", logits_to_keep=1,
                                  position_ids=torch.arange(c, device=dev)[None])
            idx = sorted(idx, key=lambda i: -len(prefixes[i]))  # a chunk's padding = its first row
            start = 0
            while start < len(idx):
                s_max = len(prefixes[idx[start]]) - c
                rows = max(1, min(len(idx) - start, settings.token_budget // (c + s_max + 1)))
                chunk = idx[start:start + rows]
                a, lg = _run_chunk(bridge, [prefixes[i] for i in chunk],
                                   [branches[i] for i in chunk], c, ctx_cache, names,
                                   logit_ids, final_hooks, dev)
                if acts is not None:
                    acts[chunk] = a.to(settings.out_dtype)
                if logits is not None:
                    logits[chunk] = lg
                start += rows
                if progress is not None:
                    progress(len(chunk))
    return BranchOutputs(acts, logits)


def _run_chunk(bridge, prefixes, branches, c: int, ctx_cache, names, logit_ids, final_hooks,
               dev: torch.device):
    rows, n_branch = len(prefixes), len(branches[0])
    lens = [len(p) - c for p in prefixes]
    s = max(lens)
    suffix = torch.zeros(rows, s, dtype=torch.long, device=dev)
    mask = torch.zeros(rows, c + s, dtype=torch.long, device=dev)
    mask[:, :c] = 1
    for r, p in enumerate(prefixes):
        suffix[r, :lens[r]] = torch.tensor(p[c:], device=dev)
        mask[r, c:c + lens[r]] = 1
    # The context cache is extended in place by each forward pass: copy it per chunk.
    cache = copy.deepcopy(ctx_cache)
    cache.batch_repeat_interleave(rows)
    # Right padding: each row's real tokens sit at positions c..c+len-1, as in a full run.
    _, cache = bridge(suffix, return_type="logits_and_cache", logits_to_keep=1,
                      past_key_values=cache, attention_mask=mask,
                      position_ids=(c + torch.arange(s, device=dev))[None].expand(rows, s))
    if n_branch > 1:
        cache.batch_repeat_interleave(n_branch)
    final = torch.tensor([t for b in branches for t in b], device=dev)[:, None]
    mask2 = torch.cat([mask.repeat_interleave(n_branch, 0),
                       torch.ones(n_branch * rows, 1, dtype=torch.long, device=dev)], 1)
    pos = (c + torch.tensor(lens, device=dev)).repeat_interleave(n_branch)[:, None]
    kwargs = dict(past_key_values=cache, attention_mask=mask2, position_ids=pos)
    with bridge.hooks(fwd_hooks=list(final_hooks)):
        if names:
            out, cached = bridge.run_with_cache(final, names_filter=lambda n: n in names, **kwargs)
            acts = torch.stack([cached[n][:, -1].float().cpu() for n in names], 1)
            acts = acts.view(rows, n_branch, len(names), -1)
        else:
            out, acts = bridge(final, **kwargs), None
    lg = None
    if logit_ids is not None:
        lg = out[:, -1, list(logit_ids)].float().cpu().view(rows, n_branch, len(logit_ids))
    return acts, lg


@torch.inference_mode()
def harvest_pairs(
    bridge,
    pairs: Sequence[ContrastPair],
    settings: HarvestSettings = HarvestSettings(),
    progress: Callable[[int], None] | None = None,
    *,
    hooks: Sequence[Hook] = (),
    final_hooks: Sequence[Hook] = (),
) -> Float[Tensor, "pair side layer d_model"]:
    """Residual stream at the final token of both prompts of each pair, for every layer.

    Returns ``[n_pairs, 2, n_layers + 1, d_model]`` on CPU in ``settings.out_dtype``; index
    ``n_layers`` is the final norm's output. ``progress`` is an optional callable taking the
    number of pairs just finished. ``hooks``/``final_hooks`` (e.g. ablations) act during the
    harvest as in :func:`run_branches`.
    """
    prefixes = [p.prefix_ids for p in pairs]
    _check_context_length(bridge, [p.pair_id for p in pairs], prefixes)
    names = hook_names(bridge.cfg.n_layers)
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


@torch.inference_mode()
def reference_activations(bridge, prompt_ids: Sequence[int]) -> Float[Tensor, "layer d_model"]:
    """The straightforward computation: one unpadded prompt, all read-outs at its last token."""
    names = hook_names(bridge.cfg.n_layers)
    ids = torch.tensor([list(prompt_ids)], device=_device(bridge))
    _, cache = bridge.run_with_cache(ids, names_filter=lambda n: n in names)
    return torch.stack([cache[n][0, -1].float().cpu() for n in names])
