"""A judge's progress bar, with an estimate of the time left, like the harvest's.

A judge over a few hundred prompts runs for minutes on a CPU; without a bar the command looks
stuck. Small calls (a sort asking one comparison) show none: a bar per call would flicker.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager

from tqdm.auto import tqdm

#: Calls with fewer read-outs than this (prompts times read-out branches) show no bar.
MIN_ROWS = 16


@contextmanager
def judge_bar(total: int, desc: str, show: bool = True, branches: int = 1
              ) -> Iterator[Callable[[int], None]]:
    """``update(n)`` of a bar over ``total`` prompts, closed on exit. ``branches``: read-outs
    per prompt, counted in the work that decides whether a bar is worth showing (14 prompts
    of 115 read-outs each run for minutes)."""
    bar = tqdm(total=total, desc=desc, unit="prompt",
               disable=not show or total * branches < MIN_ROWS)
    try:
        yield bar.update
    finally:
        bar.close()


def sort_comparisons_bound(contexts: Iterable[Hashable]) -> int:
    """At most how many comparisons merge sorts of the items of each context ask:
    ``n ceil(log2 n)`` per context of ``n`` items (``contexts``: each item's context)."""
    counts: dict[Hashable, int] = {}
    for c in contexts:
        counts[c] = counts.get(c, 0) + 1
    return sum(n * math.ceil(math.log2(n)) for n in counts.values() if n > 1)
