"""Where shared prompt prefixes are planned and run once: a two-level prefix tree.

Pairs of an article's summaries share the article, pairs with the same *first* item share that
too, and a pair's two sides share all but the final token. Each shared part runs once:

* **group context** — the common prefix of a group of rows, run once with batch 1;
* **shared middle** — rows of a group that go on identically for at least ``min_shared`` more
  tokens (same first item) form a subgroup whose middle runs once;
* **tail** — each row's remaining tokens;
* **branches** — the tokens read out, each alone, in the same pass as the row's tail (on
  request also the logits at the row's last prompt token, the prompted judge's answer:
  ``logits_at_end``).

:func:`plan` builds that tree from token ids alone and :func:`run_rows` executes it over any
model through two callables, so the harvester and the benchmarks' bare HF limit run the same
schedule. Caches are *gathered* per row (the parent's stays valid for its other children), new
tokens right-padded and masked, positions explicit: every row sees exactly its unpadded prompt.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from ppairs_lens.activations.branch_layout import fused_inputs, split_end

#: Groups with fewer rows than this are pooled: what they share beyond the template is
#: small, and running each as its own tiny batch costs far more than it saves.
MIN_GROUP_ROWS = 8
#: Rows sharing at least this many tokens beyond their group's context share a middle part.
MIN_SHARED = 8
#: ... and the shared middles are run separately only when that saves this share of tokens.
#: Measured on SmolLM2 (CPU): the tree won at 33% fewer tokens (a SummEval article with 16
#: summaries: 84 s vs 99 s flat) and lost at 18% (story_sentiment: 39-42 s vs 35 s flat).
MIN_SAVING = 0.25


@dataclass(frozen=True)
class SubGroup:
    """Rows of a group that continue identically for ``mid`` after the group's context."""

    mid: tuple[int, ...]
    rows: tuple[int, ...]  # row indices into the caller's lists
    tails: tuple[tuple[int, ...], ...]  # each row's tokens after ``mid`` (may be empty)


@dataclass(frozen=True)
class GroupPlan:
    """A group's context (run once) and its subgroups."""

    context: tuple[int, ...]
    subgroups: tuple[SubGroup, ...]


def _lcp(a: Sequence[int], b: Sequence[int], start: int = 0) -> int:
    """Length of the common prefix of ``a`` and ``b`` (both known to agree before ``start``)."""
    n, i = min(len(a), len(b)), start
    while i < n and a[i] == b[i]:
        i += 1
    return i


def share_groups(prefixes: Sequence[Sequence[int]], keys: Sequence[str], share: bool
                 ) -> Iterator[tuple[list[int], int]]:
    """(row indices, context length) per group of rows sharing a context; small groups are
    pooled into one group sharing the template's common prefix, so they batch together."""
    if not share:
        for i, p in enumerate(prefixes):
            yield [i], len(p)
        return
    by_group: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        by_group.setdefault(k, []).append(i)
    big = [idx for idx in by_group.values() if len(idx) >= MIN_GROUP_ROWS]
    pooled = [i for idx in by_group.values() if len(idx) < MIN_GROUP_ROWS for i in idx]
    for idx in big + ([sorted(pooled)] if pooled else []):
        c = len(prefixes[idx[0]])
        for i in idx[1:]:
            c = _lcp(prefixes[idx[0]][:c], prefixes[i])
        yield idx, c


def _best_runs(lcp: Sequence[int], lo: int, hi: int, min_shared: int, depth: int = 0
               ) -> tuple[int, list[tuple[int, int, int]]]:
    """Best split of sorted rows ``lo:hi`` into runs sharing a middle part.

    ``lcp[k]``: tokens rows ``k`` and ``k + 1`` share beyond the context. A run ``(a, b, m)``
    shares ``m = min(lcp[a:b-1])`` tokens and saves ``(b - a - 1) * m``. The whole range is one
    run, or splits where neighbours share least, each part split best in turn (the LCP-interval
    tree); whichever saves more."""
    if hi - lo == 1:
        return 0, [(lo, hi, 0)]
    m = min(lcp[lo:hi - 1])
    whole = ((hi - lo - 1) * m, [(lo, hi, m)]) if m >= min_shared else (-1, [])
    if depth > 200:  # pathological nesting: stop refining
        return whole if whole[0] >= 0 else (0, [(k, k + 1, 0) for k in range(lo, hi)])
    cuts = [k + 1 for k in range(lo, hi - 1) if lcp[k] == m]
    saving, runs = 0, []
    for a, b in zip([lo, *cuts], [*cuts, hi]):
        s_part, r_part = _best_runs(lcp, a, b, min_shared, depth + 1)
        saving += s_part
        runs += r_part
    return whole if whole[0] >= saving else (saving, runs)


def subgroups(prefixes: Sequence[Sequence[int]], idx: Sequence[int], c: int,
              min_shared: int = MIN_SHARED, min_saving: float = MIN_SAVING
              ) -> tuple[SubGroup, ...]:
    """Split rows (agreeing on their first ``c`` tokens) into subgroups: sorted, the runs
    sharing at least ``min_shared`` more tokens that save the most (:func:`_best_runs`), other
    rows alone; used only when it runs ``min_saving`` fewer tokens than the flat plan (each
    row's remainder whole, as ``mid``)."""
    order = sorted(idx, key=lambda i: tuple(prefixes[i][c:]))
    flat = tuple(SubGroup(tuple(prefixes[i][c:]), (i,), ((),)) for i in order)
    lcp = [_lcp(prefixes[a], prefixes[b], c) - c for a, b in zip(order, order[1:])]
    saved, runs = _best_runs(lcp, 0, len(order), min_shared) if order else (0, [])
    if saved <= 0:
        return flat
    # Rows outside shared runs start their own part at the tail step (empty middle), so the
    # middle step pads shared middles only against each other.
    tree = []
    for a, b, m in runs:
        rows = order[a:b]
        if b - a > 1:
            tree.append(SubGroup(tuple(prefixes[rows[0]][c:c + m]), tuple(rows),
                                 tuple(tuple(prefixes[i][c + m:]) for i in rows)))
        else:
            tree.append(SubGroup((), tuple(rows), (tuple(prefixes[rows[0]][c:]),)))
    # An extra step costs a forward pass, cache gathers and padding of its own: take it only
    # when it saves a good share of the tokens.
    if _own_tokens(tree) > (1 - min_saving) * _own_tokens(flat):
        return flat
    return tuple(tree)


def _own_tokens(subs: Sequence[SubGroup]) -> int:
    return sum(len(s.mid) + sum(len(t) for t in s.tails) for s in subs)


def plan(prefixes: Sequence[Sequence[int]], groups: Sequence[str], *, share: bool = True,
         min_shared: int = MIN_SHARED, min_saving: float = MIN_SAVING) -> list[GroupPlan]:
    """The prefix tree of ``prefixes``: contexts by ``groups`` key, then shared middles
    (``share=False``: each row alone, its whole prefix as a context, the reference path)."""
    out = []
    for idx, c in share_groups(prefixes, groups, share):
        ctx = tuple(prefixes[idx[0]][:c])
        subs = (subgroups(prefixes, idx, c, min_shared, min_saving) if share else
                (SubGroup((), (idx[0],), ((),)),))
        out.append(GroupPlan(ctx, subs))
    return out


def end_in_tails(plans: Sequence[GroupPlan]) -> list[GroupPlan]:
    """``plans`` with every row's last prompt token moved into its tail, where
    ``logits_at_end`` reads it (out of a context run alone, or a flat plan's ``mid``); the
    same tokens run."""
    out = []
    for g in plans:
        ctx, subs = g.context, list(g.subgroups)
        if ctx and any(not s.mid and not all(s.tails) for s in subs):
            subs = [SubGroup(ctx[-1:] + s.mid, s.rows, s.tails) if s.mid else
                    SubGroup((), s.rows, tuple(ctx[-1:] + t for t in s.tails)) for s in subs]
            ctx = ctx[:-1]
        out.append(GroupPlan(ctx, tuple(
            SubGroup(s.mid[:-1], s.rows, tuple(s.mid[-1:] + t for t in s.tails))
            if s.mid and not all(s.tails) else s for s in subs)))
    return out


def tokens_computed(plans: Sequence[GroupPlan], n_branch: int) -> int:
    """Token positions the plan runs through the model (padding not counted)."""
    return sum(len(g.context) + sum(len(s.mid) + sum(len(t) + n_branch for t in s.tails)
                                    for s in g.subgroups) for g in plans)


#: ``forward(ids, cache, mask, pos) -> cache``: run ``ids`` after ``cache`` (None: nothing
#: before), with the 2-D attention mask over cache + ids and explicit positions.
Forward = Callable[[Tensor, Any, Tensor, Tensor], Any]
#: ``read(ids, cache, mask, pos, n_read) -> (acts or None, logits or None)``: run ``ids``
#: after ``cache`` with the 4-D attention mask ``mask`` and read at the last ``n_read``
#: columns of every row (rows x those columns first in the results).
Read = Callable[[Tensor, Any, Tensor, Tensor, int], tuple[Tensor | None, Tensor | None]]


@dataclass
class PrefixState:
    """Cached prefixes, one per row. ``select`` (when set) picks this state's rows out of
    ``cache``'s batch lazily: the cache is gathered only right before a pass needs it."""

    cache: Any
    mask: Int[Tensor, "row seq"]
    next_pos: Int[Tensor, " row"]
    select: Int[Tensor, " row"] | None = None

    @classmethod
    def empty(cls, device: torch.device) -> PrefixState:
        return cls(None, torch.ones(1, 0, dtype=torch.long, device=device),
                   torch.zeros(1, dtype=torch.long, device=device))


def _gather_cache(cache, index: Tensor):
    """Rows ``index`` of ``cache`` as new tensors. HF's ``DynamicCache`` layers rebind (never
    write into) their tensors on update, so shallow copies, then an index, are independent."""
    if cache is None:
        return None
    new = copy.copy(cache)
    new.layers = [copy.copy(layer) for layer in cache.layers]
    new.batch_select_indices(index)
    return new


def _padded(tokens: Sequence[Sequence[int]], device) -> tuple[Tensor, Tensor, list[int]]:
    lens = [len(t) for t in tokens]
    ids = torch.zeros(len(tokens), max(lens), dtype=torch.long)
    mask = torch.zeros(len(tokens), max(lens), dtype=torch.long)
    for r, t in enumerate(tokens):
        ids[r, :len(t)] = torch.tensor(t, dtype=torch.long)
        mask[r, :len(t)] = 1
    return ids.to(device), mask.to(device), lens


def _select(state: PrefixState, rows: Sequence[int]) -> tuple[Tensor, Tensor]:
    """``(index into state, index into its cache)`` of ``rows``."""
    index = torch.tensor(list(rows), dtype=torch.long, device=state.mask.device)
    return index, (index if state.select is None else state.select[index])


def _cache_for_forward(state: PrefixState, select: Tensor, consume: bool):
    """A gathered copy of the cache, unless ``consume`` and ``state`` owns it with these rows
    in order. A lazily selected state shares its parent's cache (serving the parent's other
    children), so it never hands it over, even for an identity selection."""
    cache = state.cache
    if consume and cache is not None and state.select is None:
        n = cache.layers[0].keys.shape[0] if cache.layers and cache.layers[0].keys is not None \
            else -1
        if len(select) == n and bool((select == torch.arange(n, device=select.device)).all()):
            return cache
    return _gather_cache(cache, select)


def extend(state: PrefixState, parents: Sequence[int], tokens: Sequence[Sequence[int]],
           forward: Forward, consume: bool = False) -> PrefixState:
    """Rows ``parents`` of ``state`` extended by ``tokens``; ``consume``: ``state`` is not used
    afterwards, so its cache may be extended in place."""
    index, select = _select(state, parents)
    mask, pos0 = state.mask[index], state.next_pos[index]
    if max(len(t) for t in tokens) == 0:
        return PrefixState(state.cache, mask, pos0, select)
    dev = state.mask.device
    ids, new_mask, lens = _padded(tokens, dev)
    mask = torch.cat([mask, new_mask], 1)
    # Padding columns get positions too (masked for every later key, so harmless).
    pos = pos0[:, None] + torch.arange(ids.shape[1], device=dev)[None]
    cache = forward(ids, _cache_for_forward(state, select, consume), mask, pos)
    return PrefixState(cache, mask, pos0 + torch.tensor(lens, dtype=torch.long, device=dev))


def read_branches(state: PrefixState, rows: Sequence[int], tokens: Sequence[Sequence[int]],
                  read: Read, consume: bool = False,
                  tails: Sequence[Sequence[int]] | None = None, logits_at_end: bool = False
                  ) -> tuple[Tensor | None, Tensor | None]:
    """Read the model at each of ``tokens[k]`` appended, alone, to row ``rows[k]`` of
    ``state`` (after ``tails[k]``, when given, in the same pass).

    Tail then branches, under a 4-D mask that hides the branches from each other
    (:func:`ppairs_lens.activations.branch_layout.fused_inputs`): repeating the cache per
    branch would copy it, and a pass of its own for the tail would read every weight again.
    ``logits_at_end``: tails are left-padded and the logits at each row's last prompt token
    come back too, ``[row, n_ids]`` (NaN where the tail is empty).
    """
    index, select = _select(state, rows)
    cache = _cache_for_forward(state, select, consume)
    tails = tails if tails is not None else [()] * len(rows)
    ids, mask, pos, lens = fused_inputs(tails, tokens, state.mask[index].bool(),
                                        state.next_pos[index], logits_at_end)
    acts, logits = read(ids, cache, mask, pos, len(tokens[0]) + int(logits_at_end))
    return split_end(acts, logits, lens) if logits_at_end else (acts, logits)


def run_rows(
    start: PrefixState,
    subs: Sequence[SubGroup],
    branches: Sequence[Sequence[int]],
    forward: Forward,
    read: Read,
    emit: Callable[[list[int], Tensor | None, Tensor | None], None],
    *,
    token_budget: int,
    fuse: bool = True,
    logits_at_end: bool = False,
    roots: Sequence[int] | None = None,
) -> None:
    """Run ``subs`` (continuing row ``roots[k]`` of ``start``, else row 0) and their branches.

    ``emit(rows, acts, logits)`` gets each finished part, ``len(rows) * n_branch`` rows, each
    row's branches together. Work is depth-first (a chunk's shared middles, then its tails in
    parts of about ``token_budget`` cached tokens), so memory does not grow with the rows.
    Without ``fuse`` the tails run in a pass of their own and ``read`` sees only the branch
    tokens (for hooks meant for those alone). ``logits_at_end`` (fused only): ``logits`` are
    read at each row's last prompt token instead, one row each (:func:`read_branches`).
    """
    if logits_at_end and not fuse:
        raise ValueError("logits at the prompts' end are read in the fused pass only")
    n_branch = len(branches[subs[0].rows[0]]) if subs else 0
    base = start.mask.shape[1]
    # Longest first: a chunk's padding is set by its first member. (Empty middles sort last,
    # so chunks of them need no middle step.)
    order = sorted(range(len(subs)),
                   key=lambda j: (-len(subs[j].mid), -max(len(t) for t in subs[j].tails)))
    roots = [0 if roots is None else roots[j] for j in order]
    subs = [subs[j] for j in order]
    k = 0
    while k < len(subs):
        k0 = k
        width = base + len(subs[k].mid) + n_branch
        # Sized by its middle step (one row per subgroup): batching middles amortises a pass's
        # fixed cost; tails run in parts of their own. Empty middles all share one chunk.
        chunk = [subs[k]]
        k += 1
        while k < len(subs) and (bool(subs[k].mid) == bool(chunk[0].mid)) and (
                not subs[k].mid or (len(chunk) + 1) * width <= token_budget):
            chunk.append(subs[k])
            k += 1
        mid_state = extend(start, roots[k0:k], [s.mid for s in chunk], forward)
        rows = sorted(((j, r, t) for j, s in enumerate(chunk) for r, t in zip(s.rows, s.tails)),
                      key=lambda x: -len(x[2]))
        mid_w = mid_state.mask.shape[1]
        r0 = 0
        while r0 < len(rows):
            w = mid_w + len(rows[r0][2]) + n_branch
            part = rows[r0:r0 + max(1, token_budget // w)]
            only = r0 == 0 and len(part) == len(rows)  # mid_state serves this part alone
            r0 += len(part)
            parents, ids, tails = ([j for j, _, _ in part], [r for _, r, _ in part],
                                   [t for _, _, t in part])
            if fuse:
                acts, logits = read_branches(mid_state, parents, [branches[r] for r in ids],
                                             read, consume=only, tails=tails,
                                             logits_at_end=logits_at_end)
            else:
                tail_state = extend(mid_state, parents, tails, forward, consume=only)
                acts, logits = read_branches(tail_state, range(len(part)),
                                             [branches[r] for r in ids], read, consume=True)
            emit(ids, acts, logits)

