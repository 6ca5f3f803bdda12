"""Key-value caches of shared prompt contexts, kept across calls.

A comparison or rating prompt is a chat header, a long shared context (an article, a story) and
a short item part. :class:`ContextKV` keeps the key-value cache of each context's prefix across
calls, so a prompt on a 500-token article costs only its own ~150 tokens, not the article again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ppairs_lens.activations.runner import (
    BranchOutputs,
    HarvestSettings,
    model_device,
    model_steps,
    read_depth,
    run_branches,
)
from ppairs_lens.activations.prefix_sharing import (
    PrefixState,
    extend,
    plan,
    run_rows,
    subgroups,
    tokens_computed,
)

__all__ = ["ANCHOR_MARGIN", "context_anchor", "ContextKV"]

#: Tokens dropped from the end of a context prefix before caching it, so a tokenizer that
#: merges the context's last characters with what follows cannot make the cached tokens differ
#: from the prompt's (rows are checked anyway and fall back when they differ).
ANCHOR_MARGIN: int = 2


def context_anchor(tokenizer, prompt_text: str, block: str | None) -> tuple[int, ...] | None:
    """Token ids of ``prompt_text`` up to the end of ``block`` (its shared context part),
    minus :data:`ANCHOR_MARGIN` tokens; None where there is nothing worth caching."""
    if not block:
        return None
    at = prompt_text.find(block)
    if at < 0:
        return None
    ids = tokenizer(prompt_text[:at + len(block)], add_special_tokens=False).input_ids
    ids = ids[:len(ids) - ANCHOR_MARGIN]
    return tuple(ids) if len(ids) >= 1 else None


class ContextKV:
    """Run prompts from a cache of their shared context prefixes (key-value caches).

    ``run`` reads what :func:`ppairs_lens.activations.runner.run_branches` reads. A row may
    name an *anchor*, the token ids its prefix starts with (its prompt's context): its cache
    is computed once and kept (the ``max_contexts`` most recently used), so later rows run
    only their own tokens; other rows run through ``run_branches``. Numbers equal an unbatched
    run of each full prompt (up to float error). ``stop_after_reads``: a read of the first
    blocks only runs those blocks (the same numbers, in a fraction of the time); caches are
    keyed by depth too, so a deeper read never continues a shallower cache. ``n_tokens``
    counts tokens fed through the model; ``n_context_builds`` the anchors run.
    """

    def __init__(self, bridge, *, max_contexts: int = 32,
                 settings: HarvestSettings = HarvestSettings(), stop_after_reads: bool = True):
        self.bridge = bridge
        self.max_contexts = max_contexts
        self.settings = settings
        self.stop_after_reads = stop_after_reads
        self._caches: OrderedDict[tuple[int | None, tuple[int, ...]], Any] = OrderedDict()
        self.n_tokens = 0
        self.n_context_builds = 0
        self.n_fallback_rows = 0

    def clear(self) -> None:
        """Drop every kept context cache (frees memory)."""
        self._caches.clear()

    def _context(self, anchor: tuple[int, ...], depth: int | None, forward) -> PrefixState:
        key = (depth, anchor)
        state = self._caches.get(key)
        if state is not None:
            self._caches.move_to_end(key)
            return state
        state = extend(PrefixState.empty(model_device(self.bridge)), [0], [anchor], forward)
        self.n_tokens += len(anchor)
        self.n_context_builds += 1
        self._caches[key] = state
        while len(self._caches) > self.max_contexts:
            self._caches.popitem(last=False)
        return state

    @torch.inference_mode()
    def run(self, prefixes: Sequence[Sequence[int]], branches: Sequence[Sequence[int]],
            anchors: Sequence[tuple[int, ...] | None], *, names: Sequence[str] = (),
            logit_ids: Sequence[int] | None = None,
            progress: Callable[[int], None] | None = None) -> BranchOutputs:
        """The rows' reads; ``progress(n)`` after each ``n`` rows done."""
        n = len(prefixes)
        if n == 0:
            raise ValueError("no rows to run")
        n_branch = len(branches[0])
        d = self.bridge.cfg.d_model
        acts = (torch.empty(n, n_branch, len(names), d, dtype=self.settings.out_dtype)
                if names else None)
        logits = torch.empty(n, n_branch, len(logit_ids)) if logit_ids is not None else None
        by_anchor: dict[tuple[int, ...], list[int]] = {}
        rest: list[int] = []
        for i, (p, a) in enumerate(zip(prefixes, anchors)):
            if a is not None and len(p) > len(a) and tuple(p[:len(a)]) == a:
                by_anchor.setdefault(a, []).append(i)
            else:
                rest.append(i)
        depth = read_depth(self.bridge, names, logit_ids) if self.stop_after_reads else None
        forward, read = model_steps(self.bridge, names, logit_ids, depth=depth)

        def emit(rows: list[int], a, lg) -> None:
            if acts is not None:
                acts[rows] = a.view(len(rows), n_branch, len(names), -1).to(
                    self.settings.out_dtype)
            if logits is not None:
                logits[rows] = lg.view(len(rows), n_branch, -1)
            if progress is not None:
                progress(len(rows))

        for anchor, idx in by_anchor.items():
            state = self._context(anchor, depth, forward)
            subs = subgroups(prefixes, idx, len(anchor))
            self.n_tokens += sum(len(sg.mid) + sum(len(t) + n_branch for t in sg.tails)
                                 for sg in subs)
            run_rows(state, subs, branches, forward, read, emit,
                     token_budget=self.settings.budget_for(self.bridge, model_device(self.bridge)))
        if rest:
            out = run_branches(self.bridge, [prefixes[i] for i in rest],
                               [branches[i] for i in rest], ["__rest__"] * len(rest),
                               names=names, logit_ids=logit_ids, settings=self.settings,
                               progress=progress, stop_after_reads=self.stop_after_reads)
            self.n_tokens += tokens_computed(plan([prefixes[i] for i in rest],
                                                  ["__rest__"] * len(rest)), n_branch)
            self.n_fallback_rows += len(rest)
            if acts is not None:
                acts[rest] = out.acts
            if logits is not None:
                logits[rest] = out.logits
        return BranchOutputs(acts, logits)
