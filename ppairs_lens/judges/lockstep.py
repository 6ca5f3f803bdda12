"""Many sorts in lockstep: their comparisons batched into one model call per round.

Each comparison of an on-demand comparator is a forward pass, and a sort asks for them one at a
time. :func:`run_lockstep` runs many tasks (one sort per context, or one insertion per test
item), each the unchanged function of :mod:`ppairs_lens.ranking`, in threads that block on the
comparator; whenever every unfinished task is waiting for a comparison, all their pairs are
evaluated in one batch (:meth:`ppairs_lens.judges.comparators.BatchComparator.prefetch`). A
round holds one pair per unfinished task, or the several pairs a task announces at once
(``compare.prefetch(pairs)``: an insertion step's ``k`` references, known before any of them
is compared, whose prompts then share the item's part in the batch); results are exactly
those of running the tasks one by one. Not done: speculative prefetching of the comparisons a
merge *might* ask next; within one merge the comparisons are inherently sequential.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar

from ppairs_lens.judges.comparators import BatchComparator

__all__ = ["run_lockstep"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


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
    """Run ``tasks`` (each ``task(compare) -> result``) with their comparisons batched.

    Each task runs in its own thread and asks ``compare(a, b)`` one pair at a time, as
    ``merge_sort`` does (or announces several with ``compare.prefetch(pairs)``); a cached pair
    answers at once, an uncached one blocks. Whenever all unfinished tasks are blocked, their
    pairs go to ``comparator.prefetch`` in one batch and they resume. Results are exactly
    what running each task alone would give (the comparator is deterministic per pair); only
    the batching changes. Returns ``{key: result}``; the
    first exception of a task (or of a batch) is re-raised after all threads have stopped.
    """
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
