"""The columns of a fused read pass: a row's tail, then its branch tokens, in one sequence.

:func:`fused_inputs` lays out the pass of
:func:`ppairs_lens.activations.prefix_sharing.read_branches` (ids, a 4-D mask, explicit
positions) so every real token sees exactly what it would unpadded, and each branch token not
its siblings. With ``logits_at_end`` tails are left-padded, so each row's last prompt token sits
just before its branches and its next-token logits (the prompted judge's answer) are read in
the same pass; :func:`split_end` separates that column's logits.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Bool, Int
from torch import Tensor

__all__ = ["fused_inputs", "split_end"]


def fused_inputs(tails: Sequence[Sequence[int]], tokens: Sequence[Sequence[int]],
                 prev: Bool[Tensor, "row cached"], pos0: Int[Tensor, " row"],
                 logits_at_end: bool = False
                 ) -> tuple[Int[Tensor, "row col"], Bool[Tensor, "row 1 col key"],
                            Int[Tensor, "row col"], Int[Tensor, " row"]]:
    """``(ids, mask, pos, tail lengths)`` of the pass running ``tails[r]`` then each of
    ``tokens[r]`` after row ``r``'s cached prefix (``prev``: its 2-D mask, ``pos0``: its next
    position).

    Each tail token sees the row's prefix and the real tail up to itself; each branch token
    the prefix, the real tail and itself, at the position after the tail. No real query sees a
    padding key, and no padding query sees nothing (right padding: the tail before it; left
    padding: itself). ``logits_at_end``: the left-padded block is at least one column wide
    (padding where a tail is empty: its last token is in the cache).
    """
    dev = prev.device
    nb = len(tokens[0])
    lens = torch.tensor([len(t) for t in tails], dtype=torch.long, device=dev)
    width = max(int(lens.max()), int(logits_at_end))
    off = width - lens if logits_at_end else torch.zeros_like(lens)  # first real tail column
    ids = torch.zeros(len(tails), width + nb, dtype=torch.long)
    for r, (t, b, o) in enumerate(zip(tails, tokens, off.tolist())):
        ids[r, o:o + len(t)] = torch.tensor(t, dtype=torch.long)
        ids[r, width:] = torch.tensor(list(b), dtype=torch.long)
    c = prev.shape[1]
    col = torch.arange(width, device=dev)
    real = (col[None, :] >= off[:, None]) & (col[None, :] < (off + lens)[:, None])  # [row, tail]
    mask = torch.zeros(len(tails), 1, width + nb, c + width + nb, dtype=torch.bool, device=dev)
    mask[:, 0, :, :c] = prev[:, None, :]
    tail = (col[:, None] >= col[None, :])[None] & real[:, None, :]  # causal over the real tail
    if logits_at_end:  # left padding comes before the real tail: it sees itself
        tail |= torch.eye(width, dtype=torch.bool, device=dev)[None] & ~real[:, :, None]
    mask[:, 0, :width, c:c + width] = tail
    mask[:, 0, width:, c:c + width] = real[:, None, :]
    mask[:, 0, width:, c + width:] = torch.eye(nb, dtype=torch.bool, device=dev)
    pos = torch.cat([pos0[:, None] + (col[None, :] - off[:, None]).clamp(min=0),
                     (pos0 + lens)[:, None].expand(-1, nb)], 1)
    return ids.to(dev), mask, pos, lens


def split_end(acts: Tensor | None, logits: Tensor | None, lens: Int[Tensor, " row"]
              ) -> tuple[Tensor | None, Tensor | None]:
    """A ``logits_at_end`` pass's reads (rows x (end column, branches) first) -> the branches'
    activations (rows x branches first) and the end column's logits ``[row, n_ids]``, NaN
    where a tail is empty (its last token ran earlier)."""
    n = len(lens)
    if acts is not None:
        acts = acts.unflatten(0, (n, -1))[:, 1:].flatten(0, 1)
    if logits is not None:
        logits = logits.unflatten(0, (n, -1))[:, 0].masked_fill(
            (lens == 0).to(logits.device)[:, None], float("nan"))
    return acts, logits
