"""Preferences on demand: comparators that run the model only for the pairs a sort asks about.

A merge sort of ``n`` items asks about ``n log n`` pairs, which ones depending on earlier
answers; so instead of harvesting all ``n^2`` up front, a comparator runs a pair's prompt when
first asked and caches the answer per *ordered* pair (``(a, b)`` and ``(b, a)`` are different
prompts): :class:`ProbeComparator` applies a fitted probe to the pair's read-out (PPairS),
:class:`ZeroShotComparator` reads the model's own answer. Both are ``compare(a, b) -> P(a
preferred over b)`` on item ids, as the sorts of :mod:`ppairs_lens.ranking` take. ``n_rows``
counts prompts run (one per ordered pair), ``n_tokens`` the tokens fed through the model, a
context shared through the :class:`~ppairs_lens.judges.context_cache.ContextKV` counted once.

:func:`run_lockstep` runs many tasks (one sort per context, or one insertion per test item),
each the unchanged ranking function, in threads that block on the comparator; whenever every
unfinished task waits, all their pairs run in one batch: one pair per task, or the several a
task announces (``compare.prefetch(pairs)``: an insertion step's ``k`` references, whose
prompts then share the item's part). Results are exactly those of running the tasks one by
one. Comparisons within one merge are inherently sequential, so none is prefetched on
speculation.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from ppairs_lens.activations.few_logits import choice_columns, choice_logodds
from ppairs_lens.activations.harvest import NonFiniteActivationError, check_context_length
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.prompts import (
    ComparisonTemplate,
    build_contrast_pairs,
    chat_text,
    render_chat,
)
from ppairs_lens.data.records import TIE, Comparison, Dataset, ScoredItem
from ppairs_lens.errors import PPairsError
from ppairs_lens.judges.calibration import logit, sigmoid, swap_calibrated_logodds
from ppairs_lens.judges.context_cache import ContextKV, context_anchor
from ppairs_lens.judges.progress import MIN_ROWS, sort_comparisons_bound
from ppairs_lens.models.hook_points import READOUT_PRESET, hook_points
from ppairs_lens.models.loading import model_name

__all__ = ["BatchComparator", "ProbeComparator", "ZeroShotComparator", "dataset_meta",
           "run_lockstep"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


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

    Subclasses implement :meth:`_evaluate` (P(first item preferred) per ordered pair), or
    :meth:`_evaluate_both` where they read log-odds directly. Cost counters: ``n_rows``
    prompts run, ``n_batches`` model calls, ``n_calls`` comparisons asked, ``seconds`` spent
    evaluating. ``raw`` / ``logodds``: each evaluated ordered pair's uncalibrated probability
    and log-odds.
    """

    def __init__(self, items: Mapping[Hashable, ScoredItem | str], *, calibrate: bool = False):
        self.items = items
        self.calibrate = calibrate
        self.raw: dict[tuple[Hashable, Hashable], float] = {}
        self.logodds: dict[tuple[Hashable, Hashable], float] = {}
        self.n_rows = 0
        self.n_batches = 0
        self.n_calls = 0
        self.seconds = 0.0
        self.bar = None  # progress over the rows merge sorts of ``items`` need at most

    # -- subclass hooks -----------------------------------------------------------------------
    def _evaluate(self, pairs: list[tuple[Hashable, Hashable]]) -> np.ndarray:
        raise NotImplementedError

    def _evaluate_both(self, pairs: list[tuple[Hashable, Hashable]]
                       ) -> tuple[np.ndarray, np.ndarray]:
        """P(first item preferred) and its log-odds per ordered pair (default: from
        :meth:`_evaluate`, checked, via clipped logits)."""
        p = np.asarray(self._evaluate(pairs), dtype=np.float64)
        if p.shape != (len(pairs),) or not np.all((p >= 0) & (p <= 1)):
            raise PPairsError(f"{type(self).__name__} produced invalid probabilities "
                              f"(shape {p.shape}, e.g. {p[:3]})")
        return p, logit(p)

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
        p, ld = (np.asarray(x, dtype=np.float64) for x in self._evaluate_both(batch))
        self.seconds += time.perf_counter() - t0
        if ld.shape != (len(batch),) or np.isnan(ld).any():
            raise PPairsError(f"{type(self).__name__} produced invalid log-odds "
                              f"(shape {ld.shape}, e.g. {ld[:3]})")
        for k, pv, v in zip(batch, p, ld):
            self.raw[k] = float(pv)
            self.logodds[k] = float(v)
        self.n_rows += len(batch)
        self.n_batches += 1
        self._progress(len(batch))
        return len(batch)

    def _progress(self, n: int) -> None:
        if self.bar is None:
            contexts = [self._item(k)[2] for k in self.items]
            bound = sort_comparisons_bound(contexts) * (2 if self.calibrate else 1)
            self.bar = tqdm(total=max(bound, self.n_rows), unit="prompt",
                            desc=f"{type(self).__name__} (total: a sort's most)",
                            disable=bound < MIN_ROWS)
        if self.bar.n + n > self.bar.total:  # more than sorts ask (insertion, prefetch)
            self.bar.total = self.bar.n + n
        self.bar.update(n)

    def __call__(self, a: Hashable, b: Hashable) -> float:
        self.n_calls += 1
        self.prefetch([(a, b)])
        if not self.calibrate:
            return self.raw[(a, b)]
        return float(sigmoid(swap_calibrated_logodds(self.logodds[(a, b)],
                                                     self.logodds[(b, a)])))

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
            # The block every pair of this context shares: the context, else (no context) the
            # instruction header.
            user, _, block = render_chat(self.template, self.meta, rec.context,
                                         item1=rec.item1, item2=rec.item2)
            self._anchors[key] = context_anchor(tok, chat_text(tok, self.template.system, user),
                                                block)
        return self._anchors[key]

    def _pairs(self, pairs: list[tuple[Hashable, Hashable]]):
        recs = [self._record(a, b) for a, b in pairs]
        cps = build_contrast_pairs(self.bridge.tokenizer,
                                   dataclasses.replace(self.meta, records=recs), self.template)
        return recs, cps


class ProbeComparator(_PromptComparator):
    """PPairS preferences on demand: a fitted probe applied to freshly harvested pairs.

    ``probe``: anything with ``predict_proba(acts [n, 2, d]) -> [n, 2]``; ``layer``: the
    index into the harvest's read-outs it was fitted on (``harvest_pairs(...)[:, :, layer]``).
    ``items`` maps item ids to :class:`ScoredItem` or plain text; two compared items must
    share their context. Only the probe's read-out is computed (the passes stop after its
    block) and kept: ``acts[(a, b)]`` is the ordered pair's ``[2, d]`` activation.
    """

    def __init__(self, bridge, probe, layer: int, items: Mapping[Hashable, ScoredItem | str],
                 dataset_meta: Dataset | Mapping[str, Any],
                 template: ComparisonTemplate | None = None, *, calibrate: bool = False,
                 runner: ContextKV | None = None, settings: HarvestSettings = HarvestSettings()):
        super().__init__(bridge, items, dataset_meta, template, calibrate=calibrate,
                         runner=runner, settings=settings)
        names = hook_points(READOUT_PRESET, bridge.cfg.n_layers)
        if not -len(names) <= layer < len(names):
            raise ValueError(f"layer {layer} out of range for {len(names)} read-outs")
        self.probe = probe
        self.layer = layer % len(names)
        self.hook = names[self.layer]
        self.acts: dict[tuple[Hashable, Hashable], Float[Tensor, "2 d"]] = {}

    def _evaluate(self, pairs):
        recs, cps = self._pairs(pairs)
        check_context_length(self.bridge, [p.pair_id for p in cps], [p.prefix_ids for p in cps])
        out = self.runner.run([p.prefix_ids for p in cps], [p.final_ids for p in cps],
                              [self._anchor(r) for r in recs], names=[self.hook]).acts[:, :, 0]
        bad = ~torch.isfinite(out)
        if bad.any():
            i = int(bad.nonzero()[0, 0])
            raise NonFiniteActivationError(f"non-finite activation at pair {cps[i].pair_id}, "
                                           f"read-out {self.hook}")
        self.acts.update(zip(pairs, out))
        meta = {}
        if getattr(self.probe, "layer_", None) is not None:
            meta["layer"] = self.layer
        if getattr(self.probe, "model_name_", None) is not None:
            meta["model_name"] = model_name(self.bridge)
        return np.asarray(self.probe.predict_proba(out, **meta))[:, 1]


class ZeroShotComparator(_PromptComparator):
    """The prompted judge on demand, :func:`ppairs_lens.judges.zero_shot.zero_shot`'s numbers;
    position-calibrated by default (two rows per comparison)."""

    def __init__(self, bridge, items: Mapping[Hashable, ScoredItem | str],
                 dataset_meta: Dataset | Mapping[str, Any],
                 template: ComparisonTemplate | None = None, *, calibrate: bool = True,
                 runner: ContextKV | None = None, settings: HarvestSettings = HarvestSettings()):
        super().__init__(bridge, items, dataset_meta, template, calibrate=calibrate,
                         runner=runner, settings=settings)

    def _evaluate(self, pairs):
        return self._evaluate_both(pairs)[0]

    def _evaluate_both(self, pairs):
        # Read from the two choice logits in float64, not through a (clippable) probability.
        recs, cps = self._pairs(pairs)
        prefixes = [p.prefix_ids[:-1] for p in cps]
        check_context_length(self.bridge, [p.pair_id for p in cps], prefixes)
        ids, columns = choice_columns([p.final_ids for p in cps])
        lg = self.runner.run(prefixes, [(p.prefix_ids[-1],) for p in cps],
                             [self._anchor(r) for r in recs], logit_ids=ids).logits[:, 0]
        ld = choice_logodds(lg, columns)
        return sigmoid(ld), ld


class _Aborted(Exception):
    """Raised inside a waiting task when the batch it waited for failed."""


class _TaskCompare:
    """One task's ``compare(a, b)``, and ``prefetch(pairs)``: pairs it will ask next, put in
    the next round at once (it blocks until they are evaluated)."""

    def __init__(self, ask: Callable[[list[tuple[Hashable, Hashable]]], None],
                 comparator: BatchComparator, lock: threading.Condition):
        self._ask = ask
        self._comparator = comparator
        self._lock = lock

    def prefetch(self, pairs) -> None:
        self._ask(list(pairs))

    def __call__(self, a: Hashable, b: Hashable) -> float:
        self._ask([(a, b)])
        with self._lock:  # the comparator's counters are shared by every task
            return self._comparator(a, b)


def run_lockstep(tasks: Mapping[K, Callable[[Callable[[Hashable, Hashable], float]], T]],
                 comparator: BatchComparator) -> dict[K, T]:
    """``{key: task(compare)}`` of ``tasks`` run in lockstep; the first exception of a task
    or a batch is re-raised after all threads have stopped."""
    cond = threading.Condition()
    pending: dict[K, list[tuple[Hashable, Hashable]]] = {}
    results: dict[K, T] = {}
    errors: list[BaseException] = []
    state = {"alive": len(tasks), "failed": False}

    def make_compare(key: K) -> _TaskCompare:
        def ask(pairs: list[tuple[Hashable, Hashable]]) -> None:
            with cond:
                if state["failed"]:
                    raise _Aborted
                todo = [p for p in pairs if not comparator.ready(*p)]
                if todo:
                    pending[key] = todo
                    cond.notify_all()
                    while key in pending:
                        cond.wait()
                    if state["failed"]:
                        raise _Aborted
        return _TaskCompare(ask, comparator, cond)

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
            batch = list(dict.fromkeys(p for pairs in pending.values() for p in pairs))
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
