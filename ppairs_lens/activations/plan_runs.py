"""A whole prefix plan run: each group's context, then its rows; or many contexts a pass.

:func:`run_plan` executes what :func:`ppairs_lens.activations.prefix_sharing.plan` planned.
By default each group's context runs alone (batch 1) and its rows follow from it
(:func:`ppairs_lens.activations.prefix_sharing.run_rows`): at least two passes a group. Where
groups are many and have few rows each (direct scoring and G-Eval: an article with its ten
summaries, one prompt each), those passes are most of the cost on a GPU, where a pass costs
much and a token little. ``batch_contexts`` runs the contexts of as many groups as the token
budget holds in one right-padded pass, then all their rows from that one cache, in parts of
the budget's size across groups. It is the same mechanism (the same plan, ``extend`` and
``run_rows``): every row still sees exactly its own context's keys at its own positions (the
padding is masked, positions are explicit), so the numbers equal the per-group run's up to
float rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ppairs_lens.activations.prefix_sharing import (
    Forward,
    GroupPlan,
    PrefixState,
    Read,
    end_in_tails,
    extend,
    run_rows,
)

__all__ = ["context_chunks", "run_plan"]


def context_chunks(plans: Sequence[GroupPlan], token_budget: int) -> list[list[int]]:
    """Indices of ``plans`` whose context is not empty, longest context first, in chunks
    whose padded size (rows x longest context) fits ``token_budget`` (one at least).

    Empty contexts stay out: a row of nothing but padding would be a query that sees no key.
    """
    order = sorted((i for i, g in enumerate(plans) if g.context),
                   key=lambda i: -len(plans[i].context))
    chunks: list[list[int]] = []
    for i in order:
        if chunks and (len(chunks[-1]) + 1) * len(plans[chunks[-1][0]].context) <= token_budget:
            chunks[-1].append(i)
        else:
            chunks.append([i])
    return chunks


def run_plan(plans: Sequence[GroupPlan], branches: Sequence[Sequence[int]], forward: Forward,
             read: Read, emit: Callable[[list[int], Tensor | None, Tensor | None], None], *,
             token_budget: int, device: torch.device, fuse: bool = True,
             logits_at_end: bool = False, batch_contexts: bool = False) -> None:
    """Execute a whole plan: each group's context once, then
    :func:`~ppairs_lens.activations.prefix_sharing.run_rows` from it (``logits_at_end``: on
    :func:`~ppairs_lens.activations.prefix_sharing.end_in_tails` of the plan, so no row's end
    is cached). ``batch_contexts``: contexts in chunks (:func:`context_chunks`), each chunk's
    rows run together from its one cache."""
    plans = end_in_tails(plans) if logits_at_end else list(plans)
    kw = dict(token_budget=token_budget, fuse=fuse, logits_at_end=logits_at_end)
    chunks = context_chunks(plans, token_budget) if batch_contexts else []
    batched = {i for c in chunks for i in c}
    for i, g in enumerate(plans):
        if i not in batched:
            start = extend(PrefixState.empty(device), [0], [g.context], forward)
            run_rows(start, g.subgroups, branches, forward, read, emit, **kw)
    for chunk in chunks:
        start = extend(PrefixState.empty(device), [0] * len(chunk),
                       [plans[i].context for i in chunk], forward)
        subs = [(r, s) for r, i in enumerate(chunk) for s in plans[i].subgroups]
        run_rows(start, [s for _, s in subs], branches, forward, read, emit,
                 roots=[r for r, _ in subs], **kw)
