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
from collections.abc import Iterator, Sequence
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


def _groups(pairs: Sequence[ContrastPair], share: bool) -> Iterator[tuple[list[int], int]]:
    """(pair indices, shared-prefix length) for each group of pairs that share a prefix."""
    if not share:
        for i, p in enumerate(pairs):
            yield [i], len(p.prefix_ids) - 1
        return
    by_group: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        by_group.setdefault(p.group, []).append(i)
    for idx in by_group.values():
        c = _common_prefix_len([pairs[i].prefix_ids for i in idx])
        if c == 0:  # nothing shared: every pair is its own group
            for i in idx:
                yield [i], len(pairs[i].prefix_ids) - 1
        else:
            # Keep at least one token per pair in its own part, so every row has a real
            # position before the final token (simplifies the masks below).
            yield idx, min(c, min(len(pairs[i].prefix_ids) for i in idx) - 1)


def _device(bridge) -> torch.device:
    return next(bridge.parameters()).device


def _check_context_length(bridge, pairs: Sequence[ContrastPair]) -> None:
    n_ctx = getattr(bridge.cfg, "n_ctx", None)
    if not n_ctx:
        return
    for p in pairs:
        if len(p.prefix_ids) + 1 > n_ctx:
            raise DataError(f"the prompt is {len(p.prefix_ids) + 1} tokens, longer than the "
                            f"model's context of {n_ctx} tokens; shorten or drop this pair",
                            row=None, field=f"pair {p.pair_id}")


@torch.inference_mode()
def harvest_pairs(
    bridge,
    pairs: Sequence[ContrastPair],
    settings: HarvestSettings = HarvestSettings(),
    progress=None,
) -> Float[Tensor, "pair side layer d_model"]:
    """Residual stream at the final token of both prompts of each pair, for every layer.

    Returns ``[n_pairs, 2, n_layers + 1, d_model]`` on CPU in ``settings.out_dtype``; index
    ``n_layers`` is the final norm's output. ``progress`` is an optional callable taking the
    number of pairs just finished.
    """
    _check_context_length(bridge, pairs)
    names = hook_names(bridge.cfg.n_layers)
    out = torch.empty(len(pairs), 2, len(names), bridge.cfg.d_model, dtype=settings.out_dtype)
    dev = _device(bridge)
    for idx, c in _groups(pairs, settings.share_prefixes):
        ctx = torch.tensor([pairs[idx[0]].prefix_ids[:c]], device=dev)
        _, ctx_cache = bridge(ctx, return_type="logits_and_cache", logits_to_keep=1,
                              position_ids=torch.arange(c, device=dev)[None])
        # Longest first: a chunk's padding is set by its first row.
        idx = sorted(idx, key=lambda i: -len(pairs[i].prefix_ids))
        start = 0
        while start < len(idx):
            s_max = len(pairs[idx[start]].prefix_ids) - c
            rows = max(1, min(len(idx) - start, settings.token_budget // (c + s_max + 1)))
            chunk = idx[start:start + rows]
            out[chunk] = _run_chunk(bridge, [pairs[i] for i in chunk], c, ctx_cache, names, dev
                                    ).to(settings.out_dtype)
            start += rows
            if progress is not None:
                progress(len(chunk))
    bad = ~torch.isfinite(out)
    if bad.any():
        p, side, layer, _ = bad.nonzero()[0].tolist()
        raise NonFiniteActivationError(
            f"non-finite activation at pair {pairs[p].pair_id} (index {p}), side {side}, "
            f"read-out {names[layer]}; a half-precision overflow? Load the model in float32.")
    return out


def _run_chunk(bridge, chunk: list[ContrastPair], c: int, ctx_cache, names: list[str],
               dev: torch.device) -> Float[Tensor, "pair side layer d_model"]:
    rows = len(chunk)
    lens = [len(p.prefix_ids) - c for p in chunk]
    s = max(lens)
    suffix = torch.zeros(rows, s, dtype=torch.long, device=dev)
    mask = torch.zeros(rows, c + s, dtype=torch.long, device=dev)
    mask[:, :c] = 1
    for r, p in enumerate(chunk):
        suffix[r, :lens[r]] = torch.tensor(p.prefix_ids[c:], device=dev)
        mask[r, c:c + lens[r]] = 1
    # The context cache is extended in place by each forward pass: copy it per chunk.
    cache = copy.deepcopy(ctx_cache)
    cache.batch_repeat_interleave(rows)
    # Right padding: each row's real tokens sit at positions c..c+len-1, as in a full run.
    _, cache = bridge(suffix, return_type="logits_and_cache", logits_to_keep=1,
                      past_key_values=cache, attention_mask=mask,
                      position_ids=(c + torch.arange(s, device=dev))[None].expand(rows, s))
    cache.batch_repeat_interleave(2)
    final = torch.tensor([t for p in chunk for t in p.final_ids], device=dev)[:, None]
    mask2 = torch.cat([mask.repeat_interleave(2, 0),
                       torch.ones(2 * rows, 1, dtype=torch.long, device=dev)], 1)
    pos = (c + torch.tensor(lens, device=dev)).repeat_interleave(2)[:, None]
    _, acts = bridge.run_with_cache(final, names_filter=lambda n: n in names,
                                    past_key_values=cache, attention_mask=mask2, position_ids=pos)
    stacked = torch.stack([acts[n][:, -1].float().cpu() for n in names], 1)  # [2*rows, layer, d]
    return stacked.view(rows, 2, len(names), -1)


@torch.inference_mode()
def reference_activations(bridge, prompt_ids: Sequence[int]) -> Float[Tensor, "layer d_model"]:
    """The straightforward computation: one unpadded prompt, all read-outs at its last token."""
    names = hook_names(bridge.cfg.n_layers)
    ids = torch.tensor([list(prompt_ids)], device=_device(bridge))
    _, cache = bridge.run_with_cache(ids, names_filter=lambda n: n in names)
    return torch.stack([cache[n][0, -1].float().cpu() for n in names])
