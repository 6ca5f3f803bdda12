"""Preferences on demand: comparators that run the model only for the pairs a sort asks about.

A PAIRS merge sort of ``n`` items asks about ``n log n`` pairs, one at a time, and which pairs
it asks depends on earlier answers. So instead of harvesting every pair of a context up front
(``n^2``), the comparators here build and run a pair's prompt when it is first asked for, and
cache the answer per *ordered* pair (``(a, b)`` and ``(b, a)`` are different prompts):

* :class:`ProbeComparator` - PPairS: harvest the contrast pair at one read-out and apply a
  fitted probe; ``P(a preferred) = probe.predict_proba(acts)[:, 1]``. The activations are
  kept too (``acts``).
* :class:`ZeroShotComparator` - the prompted baseline: the model's own answer, ``softmax`` of
  the "1" / "2" logits after "... is Choice ", position-calibrated by default (as
  :func:`ppairs_lens.judges.zero_shot.zero_shot`).

Both are callables ``compare(a, b) -> P(a preferred over b)`` on item ids, so they plug into
:func:`ppairs_lens.ranking.sorting.merge_sort`, ``beam_merge_sort`` and ``insertion_score`` unchanged.
``swap_calibrated=True`` (via :func:`ppairs_lens.ranking.sorting.swap_calibrated`) asks both orders of
each pair, in one batch, and averages them.

Cost (what analyses report): ``n_rows`` counts prompts run through the model, one per ordered
pair (a harvest reads the prompt's two final tokens, "1" and "2", from one run of its prefix);
``n_tokens`` counts the tokens actually fed through the model, shared context included once.

Speed. Each comparison is a forward pass, so two things matter:

1. **Batching** - :func:`run_lockstep` runs many sorts (one per context, or one insertion per
   test item) in threads that block on the comparator; whenever every unfinished sort is
   waiting for a comparison, all their pairs are evaluated in one batch. The sorts are the
   unchanged ``ranking`` functions, so results are exactly those of running them one by one;
   a round holds one pair per unfinished sort. ``prefetch(pairs)`` evaluates any list of
   pairs at once (e.g. all first-level merges of a sort).
2. **Context reuse** - :class:`ContextKV` keeps the key-value cache of each context's prompt
   prefix (chat header + article) across calls, so a comparison on a 500-token article costs
   only its own ~150 tokens, not the article again. Rows whose prompt does not start with the
   cached prefix fall back to :func:`ppairs_lens.activations.harvest.run_branches` (same numbers).

Not done: speculative prefetching of the comparisons a merge *might* ask next; within one
merge the comparisons are inherently sequential.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.errors import PPairsError
from ppairs_lens.activations.harvest import (
    BranchOutputs,
    HarvestSettings,
    NonFiniteActivationError,
    _check_context_length,
    _device,
    bridge_steps,
    hook_names,
    run_branches,
)
from ppairs_lens.models.loading import model_name
from ppairs_lens.activations.prefix_sharing import (
    PrefixState,
    extend,
    plan,
    run_rows,
    subgroups,
    tokens_computed,
)
from ppairs_lens.activations.prompts import (
    ComparisonTemplate,
    _chat_text,
    build_contrast_pairs,
    render_comparison,
)
from ppairs_lens.ranking.sorting import swap_calibrated
from ppairs_lens.data.records import TIE, Comparison, Dataset, ScoredItem

__all__ = ["ContextKV", "BatchComparator", "ProbeComparator", "ZeroShotComparator",
           "run_lockstep", "dataset_meta", "context_anchor"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

#: Tokens dropped from the end of a context prefix before caching it, so a tokenizer that
#: merges the context's last characters with what follows cannot make the cached tokens differ
#: from the prompt's (rows are checked anyway and fall back when they differ).
ANCHOR_MARGIN: int = 2


# --------------------------------------------------------------------------------------------
# Context prefixes kept across calls
# --------------------------------------------------------------------------------------------


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

    ``run`` reads, like :func:`ppairs_lens.activations.harvest.run_branches`, the hook points ``names``
    and/or the next-token ``logit_ids`` at each branch token appended to each row's
    prefix. Each row may name an *anchor*: token ids its prefix starts with (the context
    part of its prompt). An anchor's key-value cache is computed once and kept for later
    calls (the ``max_contexts`` most recently used), so later rows only run their own tokens.
    Rows without an anchor, or whose prefix does not start with it, run through
    ``run_branches`` (sharing within the call only). Numbers equal an unbatched run of each
    full prompt (up to float error).

    ``n_tokens`` counts tokens fed through the model; ``n_context_builds`` the anchors run.
    """

    def __init__(self, bridge, *, max_contexts: int = 32,
                 settings: HarvestSettings = HarvestSettings()):
        self.bridge = bridge
        self.max_contexts = max_contexts
        self.settings = settings
        self._caches: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.n_tokens = 0
        self.n_context_builds = 0
        self.n_fallback_rows = 0

    def clear(self) -> None:
        """Drop every kept context cache (frees memory)."""
        self._caches.clear()

    def _context(self, anchor: tuple[int, ...], forward) -> PrefixState:
        state = self._caches.get(anchor)
        if state is not None:
            self._caches.move_to_end(anchor)
            return state
        state = extend(PrefixState.empty(_device(self.bridge)), [0], [anchor], forward)
        self.n_tokens += len(anchor)
        self.n_context_builds += 1
        self._caches[anchor] = state
        while len(self._caches) > self.max_contexts:
            self._caches.popitem(last=False)
        return state

    @torch.inference_mode()
    def run(self, prefixes: Sequence[Sequence[int]], branches: Sequence[Sequence[int]],
            anchors: Sequence[tuple[int, ...] | None], *, names: Sequence[str] = (),
            logit_ids: Sequence[int] | None = None) -> BranchOutputs:
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
        forward, read = bridge_steps(self.bridge, names, logit_ids)

        def emit(rows: list[int], a, lg) -> None:
            if acts is not None:
                acts[rows] = a.view(len(rows), n_branch, len(names), -1).to(
                    self.settings.out_dtype)
            if logits is not None:
                logits[rows] = lg.view(len(rows), n_branch, -1)

        for anchor, idx in by_anchor.items():
            state = self._context(anchor, forward)
            subs = subgroups(prefixes, idx, len(anchor))
            self.n_tokens += sum(len(sg.mid) + sum(len(t) + n_branch for t in sg.tails)
                                 for sg in subs)
            run_rows(state, subs, branches, forward, read, emit,
                     token_budget=self.settings.budget_for(self.bridge, _device(self.bridge)))
        if rest:
            out = run_branches(self.bridge, [prefixes[i] for i in rest],
                               [branches[i] for i in rest], ["__rest__"] * len(rest),
                               names=names, logit_ids=logit_ids, settings=self.settings)
            self.n_tokens += tokens_computed(plan([prefixes[i] for i in rest],
                                                  ["__rest__"] * len(rest)), n_branch)
            self.n_fallback_rows += len(rest)
            if acts is not None:
                acts[rest] = out.acts
            if logits is not None:
                logits[rest] = out.logits
        return BranchOutputs(acts, logits)


# --------------------------------------------------------------------------------------------
# Comparators
# --------------------------------------------------------------------------------------------


def dataset_meta(meta: Dataset | Mapping[str, Any]) -> Dataset:
    """The question a comparison asks (aspect, item_name, context_name, aspect_description) as
    an empty comparison :class:`Dataset`; ``meta`` is a Dataset (records ignored) or a dict."""
    if isinstance(meta, Dataset):
        return dataclasses.replace(meta, records=[], kind="comparison")
    keys = ("aspect", "item_name", "context_name", "aspect_description")
    unknown = set(meta) - set(keys) - {"name"}
    if unknown:
        raise ValueError(f"unknown dataset_meta keys {sorted(unknown)}; expected {keys}")
    return Dataset(name=str(meta.get("name", "on-demand")), kind="comparison", records=[],
                   **{k: meta[k] for k in keys if k in meta})


class BatchComparator:
    """``compare(a, b) -> P(a preferred over b)`` evaluated in batches, cached per ordered pair.

    Subclasses implement :meth:`_evaluate` (P(first item preferred) for a list of ordered
    pairs, as presented). With ``calibrate=True`` a call asks both orders (in one batch) and
    returns ``swap_calibrated``'s ``0.5 * (p(a, b) + 1 - p(b, a))``.

    Cost counters: ``n_rows`` prompts run (ordered pairs evaluated), ``n_batches`` model calls,
    ``n_calls`` comparisons asked, ``seconds`` spent evaluating. ``raw`` maps each evaluated
    ordered pair to its uncalibrated probability.
    """

    def __init__(self, items: Mapping[Hashable, ScoredItem | str], *, calibrate: bool = False):
        self.items = items
        self.calibrate = calibrate
        self.raw: dict[tuple[Hashable, Hashable], float] = {}
        self.n_rows = 0
        self.n_batches = 0
        self.n_calls = 0
        self.seconds = 0.0
        self._calibrated = swap_calibrated(lambda a, b: self.raw[(a, b)])

    # -- subclass hook ------------------------------------------------------------------------
    def _evaluate(self, pairs: list[tuple[Hashable, Hashable]]) -> np.ndarray:
        raise NotImplementedError

    # -- public -------------------------------------------------------------------------------
    def _needed(self, a: Hashable, b: Hashable) -> list[tuple[Hashable, Hashable]]:
        return [(a, b), (b, a)] if self.calibrate else [(a, b)]

    def ready(self, a: Hashable, b: Hashable) -> bool:
        """Whether ``compare(a, b)`` can answer without running the model."""
        return all(k in self.raw for k in self._needed(a, b))

    def prefetch(self, pairs: Iterable[tuple[Hashable, Hashable]]) -> int:
        """Evaluate every not yet cached pair of ``pairs`` in one batch; returns how many ran."""
        todo: dict[tuple[Hashable, Hashable], None] = {}
        for a, b in pairs:
            if a == b:
                raise ValueError(f"cannot compare item {a!r} with itself")
            for k in self._needed(a, b):
                if k not in self.raw:
                    todo[k] = None
        if not todo:
            return 0
        batch = list(todo)
        t0 = time.perf_counter()
        p = np.asarray(self._evaluate(batch), dtype=np.float64)
        self.seconds += time.perf_counter() - t0
        if p.shape != (len(batch),) or not np.all((p >= 0) & (p <= 1)):
            raise PPairsError(f"{type(self).__name__} produced invalid probabilities "
                              f"(shape {p.shape}, e.g. {p[:3]})")
        for k, v in zip(batch, p):
            self.raw[k] = float(v)
        self.n_rows += len(batch)
        self.n_batches += 1
        return len(batch)

    def __call__(self, a: Hashable, b: Hashable) -> float:
        self.n_calls += 1
        self.prefetch([(a, b)])
        return self._calibrated(a, b) if self.calibrate else self.raw[(a, b)]

    def cost(self) -> dict[str, float]:
        """Counters as a dict (for tables)."""
        return {"n_rows": self.n_rows, "n_batches": self.n_batches, "n_calls": self.n_calls,
                "seconds": self.seconds}

    # -- shared prompt building ---------------------------------------------------------------
    def _item(self, key: Hashable) -> tuple[str, str | None, str | None]:
        try:
            it = self.items[key]
        except KeyError:
            raise KeyError(f"unknown item id {key!r}") from None
        if isinstance(it, ScoredItem):
            return it.text, it.context, it.context_id
        return str(it), None, None

    def _record(self, a: Hashable, b: Hashable) -> Comparison:
        ta, ca, ia = self._item(a)
        tb, cb, ib = self._item(b)
        if (ia, ca) != (ib, cb):
            raise ValueError(f"items {a!r} and {b!r} have different contexts ({ia!r} vs {ib!r}); "
                             "a comparison has one context")
        return Comparison(pair_id=f"{a}|{b}", item1=ta, item2=tb, label=TIE, context=ca,
                          context_id=ia, item1_id=str(a), item2_id=str(b))


class _PromptComparator(BatchComparator):
    """Comparison prompts of a model, run through a (possibly shared) :class:`ContextKV`."""

    def __init__(self, bridge, items, dataset_meta_: Dataset | Mapping[str, Any],
                 template: ComparisonTemplate | None, *, calibrate: bool,
                 runner: ContextKV | None, settings: HarvestSettings):
        super().__init__(items, calibrate=calibrate)
        self.bridge = bridge
        self.meta = dataset_meta(dataset_meta_)
        self.template = template or ComparisonTemplate()
        self.runner = runner or ContextKV(bridge, settings=settings)
        self._anchors: dict[tuple[str | None, str | None], tuple[int, ...] | None] = {}

    @property
    def n_tokens(self) -> int:
        """Tokens fed through the model by this comparator's runner (shared if shared)."""
        return self.runner.n_tokens

    def cost(self) -> dict[str, float]:
        return {**super().cost(), "n_tokens": self.runner.n_tokens}

    def _anchor(self, rec: Comparison) -> tuple[int, ...] | None:
        key = (rec.context_id, rec.context)
        if key not in self._anchors:
            tok = self.bridge.tokenizer
            user, _ = render_comparison(self.template, self.meta, rec)
            text = _chat_text(tok, self.template.system, user)
            block = (self.template.context_block.format(context_name=self.meta.context_name,
                                                        context=rec.context)
                     if rec.context else None)
            if block is None:  # no context: the instruction header is what every pair shares
                try:
                    block = self.template.no_context_block.format(item=self.meta.item_name)
                except (KeyError, IndexError):
                    block = None
            self._anchors[key] = context_anchor(tok, text, block)
        return self._anchors[key]

    def _pairs(self, pairs: list[tuple[Hashable, Hashable]]):
        recs = [self._record(a, b) for a, b in pairs]
        cps = build_contrast_pairs(self.bridge.tokenizer,
                                   dataclasses.replace(self.meta, records=recs), self.template)
        return recs, cps


class ProbeComparator(_PromptComparator):
    """PPairS preferences on demand: a fitted probe applied to freshly harvested pairs.

    ``probe`` is a fitted single-layer probe (:func:`ppairs_lens.probes.estimators.make_probe`) or
    anything with ``predict_proba(acts [n, 2, d]) -> [n, 2]``; ``layer`` indexes the harvest's
    read-outs (:func:`ppairs_lens.activations.harvest.hook_names`: blocks ``0..L-1``, then the final norm),
    i.e. the same index as ``harvest_pairs(...)[:, :, layer]`` the probe was fitted on.
    ``items`` maps item ids to :class:`ScoredItem` (text, context) or plain text (no
    context); two compared items must share their context. ``dataset_meta`` gives the
    question (a :class:`Dataset` or a dict of aspect / item_name / context_name /
    aspect_description). Only the probe's read-out is computed and kept: ``acts[(a, b)]`` is
    the ``[2, d]`` activation of the ordered pair.
    """

    def __init__(self, bridge, probe, layer: int, items: Mapping[Hashable, ScoredItem | str],
                 dataset_meta: Dataset | Mapping[str, Any],
                 template: ComparisonTemplate | None = None, *, calibrate: bool = False,
                 runner: ContextKV | None = None, settings: HarvestSettings = HarvestSettings()):
        super().__init__(bridge, items, dataset_meta, template, calibrate=calibrate,
                         runner=runner, settings=settings)
        names = hook_names(bridge.cfg.n_layers)
        if not -len(names) <= layer < len(names):
            raise ValueError(f"layer {layer} out of range for {len(names)} read-outs")
        self.probe = probe
        self.layer = layer % len(names)
        self.hook = names[self.layer]
        self.acts: dict[tuple[Hashable, Hashable], Float[Tensor, "2 d"]] = {}

    def _evaluate(self, pairs):
        recs, cps = self._pairs(pairs)
        _check_context_length(self.bridge, [p.pair_id for p in cps], [p.prefix_ids for p in cps])
        out = self.runner.run([p.prefix_ids for p in cps], [p.final_ids for p in cps],
                              [self._anchor(r) for r in recs], names=[self.hook]).acts[:, :, 0]
        bad = ~torch.isfinite(out)
        if bad.any():
            i = int(bad.nonzero()[0, 0])
            raise NonFiniteActivationError(f"non-finite activation at pair {cps[i].pair_id}, "
                                           f"read-out {self.hook}")
        for k, a in zip(pairs, out):
            self.acts[k] = a
        meta = {}
        if getattr(self.probe, "layer_", None) is not None:
            meta["layer"] = self.layer
        if getattr(self.probe, "model_name_", None) is not None:
            meta["model_name"] = model_name(self.bridge)
        return np.asarray(self.probe.predict_proba(out, **meta))[:, 1]


class ZeroShotComparator(_PromptComparator):
    """The prompted judge on demand: softmax of the two choice logits after "... is Choice ".

    Same prompts as :class:`ProbeComparator` and as :func:`ppairs_lens.judges.zero_shot.zero_shot`
    (whose numbers it reproduces); position-calibrated by default (``calibrate=True``: both
    orders, two rows per comparison).
    """

    def __init__(self, bridge, items: Mapping[Hashable, ScoredItem | str],
                 dataset_meta: Dataset | Mapping[str, Any],
                 template: ComparisonTemplate | None = None, *, calibrate: bool = True,
                 runner: ContextKV | None = None, settings: HarvestSettings = HarvestSettings()):
        super().__init__(bridge, items, dataset_meta, template, calibrate=calibrate,
                         runner=runner, settings=settings)

    def _evaluate(self, pairs):
        recs, cps = self._pairs(pairs)
        _check_context_length(self.bridge, [p.pair_id for p in cps],
                              [p.prefix_ids[:-1] for p in cps])
        ids = sorted({t for p in cps for t in p.final_ids})
        col = {t: i for i, t in enumerate(ids)}
        lg = self.runner.run([p.prefix_ids[:-1] for p in cps], [(p.prefix_ids[-1],) for p in cps],
                             [self._anchor(r) for r in recs], logit_ids=ids).logits[:, 0]
        rows = torch.arange(len(cps))
        first = torch.tensor([col[p.final_ids[0]] for p in cps])
        second = torch.tensor([col[p.final_ids[1]] for p in cps])
        two = torch.stack([lg[rows, first], lg[rows, second]], -1).double()
        return torch.softmax(two, -1)[:, 0].numpy()


# --------------------------------------------------------------------------------------------
# Many sorts in lockstep
# --------------------------------------------------------------------------------------------


class _Aborted(Exception):
    """Raised inside a waiting task when the batch it waited for failed."""


def run_lockstep(tasks: Mapping[K, Callable[[Callable[[Hashable, Hashable], float]], T]],
                 comparator: BatchComparator) -> dict[K, T]:
    """Run ``tasks`` (each ``task(compare) -> result``) with their comparisons batched.

    Each task runs in its own thread and asks ``compare(a, b)`` one pair at a time, as
    ``merge_sort`` does; a cached pair answers at once, an uncached one blocks. Whenever all
    unfinished tasks are blocked, their pairs go to ``comparator.prefetch`` in one batch and
    they resume. Results are exactly what running each task alone would give (the comparator
    is deterministic per pair); only the batching changes. Returns ``{key: result}``; the
    first exception of a task (or of a batch) is re-raised after all threads have stopped.
    """
    cond = threading.Condition()
    pending: dict[K, tuple[Hashable, Hashable]] = {}
    results: dict[K, T] = {}
    errors: list[BaseException] = []
    state = {"alive": len(tasks), "failed": False}

    def make_compare(key: K) -> Callable[[Hashable, Hashable], float]:
        def compare(a: Hashable, b: Hashable) -> float:
            with cond:
                if state["failed"]:
                    raise _Aborted
                if not comparator.ready(a, b):
                    pending[key] = (a, b)
                    cond.notify_all()
                    while key in pending:
                        cond.wait()
                    if state["failed"]:
                        raise _Aborted
                return comparator(a, b)
        return compare

    def worker(key: K, fn) -> None:
        try:
            results[key] = fn(make_compare(key))
        except _Aborted:
            pass
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            with cond:
                errors.append(e)
        finally:
            with cond:
                state["alive"] -= 1
                cond.notify_all()

    threads = [threading.Thread(target=worker, args=(k, f), daemon=True,
                                name=f"lockstep-{i}") for i, (k, f) in enumerate(tasks.items())]
    for t in threads:
        t.start()
    with cond:
        while True:
            cond.wait_for(lambda: len(pending) == state["alive"])
            if state["alive"] == 0:
                break
            batch = list(dict.fromkeys(pending.values()))
            try:
                comparator.prefetch(batch)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)
                state["failed"] = True
                pending.clear()
                cond.notify_all()
                break
            pending.clear()
            cond.notify_all()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
