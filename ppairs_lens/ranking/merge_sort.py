"""PAIRS merge sort: rank items from pairwise preferences, greedily or with a beam search.

PAIRS (Liu et al. 2024, "Aligning with Human Judgement: The Role of Pairwise Preference in Large
Language Model Evaluators") ranks ``n`` items with a merge sort whose comparisons are preference
probabilities ``P(a preferred over b)``. PPairS reads those probabilities from a linear probe
instead of the LLM's stated preference; this module does not care where they come from. A
*comparator* is any ``compare(a, b) -> P(a preferred over b)`` on hashable item keys;
everything here is deterministic given it.

Defaults of the beam search (``beam_size=100``, ``uncertainty=0.15``) follow the public PairS
reference code (its command-line defaults ``--beam_size 100`` and ``--prob_gap 0.15``): a
comparison counts as *uncertain*, and both of its outcomes stay in the beam, when
``|p - 0.5| <= 0.15``, i.e. ``p`` in ``[0.35, 0.65]``. How the beam's final interleaving is
chosen deviates from that code on purpose; see :func:`beam_merge_sort`.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ppairs_lens.judges.calibration import Comparator  # compare(a, b) = P(a preferred)

__all__ = [
    "Comparator",
    "CountingComparator",
    "merge_sort",
    "beam_merge_sort",
    "DEFAULT_BEAM_SIZE",
    "DEFAULT_UNCERTAINTY",
]


#: Beam width of :func:`beam_merge_sort` (PairS reference code default ``--beam_size 100``).
DEFAULT_BEAM_SIZE: int = 100
#: Half-width of the uncertain band around 0.5 (PairS reference code default ``--prob_gap 0.15``).
DEFAULT_UNCERTAINTY: float = 0.15

# Floor for log-probabilities, so an outcome a comparison gave probability 0 scores as very
# unlikely instead of -inf (where all such candidates would tie, whatever else they got right).
_LOG_FLOOR: float = 1e-12

K = TypeVar("K", bound=Hashable)


class CountingComparator:
    """Wrap a comparator to count its use and cache its answers per ordered pair.

    Comparisons are the expensive part, so the number of *distinct* ones is the cost to report,
    and repeated questions (beam search asks them) should not be paid twice. ``calls`` counts
    every request; ``(a, b)`` and ``(b, a)`` are different pairs (a probe may have a position
    bias).
    """

    def __init__(self, fn: Comparator):
        self.fn = fn
        self.calls: int = 0
        self.cache: dict[tuple[Hashable, Hashable], float] = {}

    @property
    def unique_calls(self) -> int:
        """Distinct ordered pairs evaluated (= calls of the wrapped function)."""
        return len(self.cache)

    def __call__(self, a: Hashable, b: Hashable) -> float:
        self.calls += 1
        key = (a, b)
        if key not in self.cache:
            self.cache[key] = float(self.fn(a, b))
        return self.cache[key]


def _prob(compare: Comparator, a: Hashable, b: Hashable) -> float:
    """``compare(a, b)`` as a float, refusing non-probabilities (a NaN would silently mis-sort)."""
    p = float(compare(a, b))
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"comparator returned {p!r} for ({a!r}, {b!r}); "
                         "need a probability in [0, 1]")
    return p


def _finish(order: list[Any], descending: bool) -> list[Any]:
    return order if descending else order[::-1]


def merge_sort(items: Sequence[K], compare: Comparator, descending: bool = True) -> list[K]:
    """Rank ``items`` by a top-down merge sort driven by ``compare`` (greedy PAIRS).

    Merge sort needs at most ``n * ceil(log2 n)`` comparisons, and each merge only compares the
    heads of two sorted runs, which is what the PAIRS beam search extends. ``a`` (left run)
    goes before ``b`` (right run) iff ``compare(a, b) > 0.5`` (at exactly 0.5 the right one goes
    first). ``descending=True``: the most-preferred first; ``False``: the reverse of that same
    list. The input is not modified.
    """
    return _finish(_sort(list(items), lambda left, right: _greedy_merge(left, right, compare)),
                   descending)


def _sort(items: list[K], merge: Callable[[list[K], list[K]], list[K]]) -> list[K]:
    """Top-down merge sort: both halves sorted (left first), then ``merge(left, right)``."""
    if len(items) <= 1:
        return items
    mid = len(items) // 2
    return merge(_sort(items[:mid], merge), _sort(items[mid:], merge))


def _greedy_merge(left: list[K], right: list[K], compare: Comparator) -> list[K]:
    moves = _greedy_moves(len(left), len(right), lambda i, j: _prob(compare, left[i], right[j]))
    return _interleave(left, right, moves)


@dataclass(frozen=True)
class _Hyp:
    """A partial merge: ``i`` items taken from the left run, ``j`` from the right; ``moves``
    (True = took the left head), ``logp`` their summed log-probabilities (the path score)."""

    i: int
    j: int
    moves: tuple[bool, ...]
    logp: float


def beam_merge_sort(items: Sequence[K], compare: Comparator, beam_size: int = DEFAULT_BEAM_SIZE,
                    uncertainty: float = DEFAULT_UNCERTAINTY,
                    descending: bool = True) -> list[K]:
    """Rank ``items`` by merge sort with the PAIRS uncertainty-guided beam search in each merge.

    A greedy merge commits to every comparison, so one wrong but unsure comparison misplaces
    a whole block; PAIRS keeps several interleavings of the two runs alive instead.

    Search (as in PAIRS): with run heads ``a``, ``b`` and ``p = compare(a, b)``, taking ``a``
    has probability ``p``. When ``|p - 0.5| > uncertainty`` only the preferred branch is
    followed; otherwise both are. The ``beam_size`` hypotheses with the best summed
    log-probability are kept each step (all have made the same number of decisions, so this
    is PAIRS' mean log-probability ranking).

    Selection (our choice, differs from the reference code): the finished interleavings, plus
    the greedy one, are compared on the *same* evidence, the log-likelihood of every comparison
    made during this merge, ``sum log p`` over pairs the interleaving puts ``a`` before ``b`` and
    ``sum log(1 - p)`` over the others. Why: path scores of finished hypotheses sum over
    different numbers of decisions, and picking by them (sum or mean, as the reference does)
    was measurably *worse* than greedy in our simulations with a noisy Thurstone comparator,
    while shared-evidence selection was better than greedy (see tests/test_ranking.py).

    Other choices, documented because they change results:

    * hypothesis recombination: hypotheses that took the same numbers ``(i, j)`` from each run
      share all futures, so only the better one is kept (fewer comparisons, more diversity);
    * a hypothesis that exhausts a run is finished; it uses its beam slot in that step and
      then leaves the beam; the search runs until no hypothesis is left;
    * ties are broken in favour of the greedy decision (and the greedy interleaving), so
      ``beam_size=1`` returns exactly :func:`merge_sort`'s result.

    Cost: a merge of runs of sizes ``l`` and ``r`` asks for at most
    ``min(l * r, (beam_size + 1) * (l + r - 1))`` distinct comparisons (one per ``(i, j)`` state
    in the beam per step, plus the greedy path), so the sort needs at most
    ``min(n (n - 1) / 2, (beam_size + 1) n ceil(log2 n))``; in practice little more than greedy
    when few comparisons are uncertain. Bookkeeping is ``O(beam_size * (l + r)^2)`` per merge
    at worst, selection ``O((l + r) * r * log)``. Wrap ``compare`` in
    :class:`CountingComparator` to count comparisons (and cache them across calls).

    ``descending`` has the same meaning as in :func:`merge_sort`; the input is not modified.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    return _finish(_sort(list(items), lambda left, right: _beam_merge(
        left, right, compare, beam_size, uncertainty)), descending)


def _log(p: float) -> float:
    return math.log(max(p, _LOG_FLOOR))


def _beam_merge(left: list[K], right: list[K], compare: Comparator, beam_size: int,
                uncertainty: float) -> list[K]:
    """Best interleaving of two sorted runs by PAIRS beam search (see beam_merge_sort)."""
    seen: dict[tuple[int, int], float] = {}  # (i, j) -> compare(left[i], right[j])

    def prob(i: int, j: int) -> float:
        if (i, j) not in seen:
            seen[(i, j)] = _prob(compare, left[i], right[j])
        return seen[(i, j)]

    beam = [_Hyp(0, 0, (), 0.0)]
    finished: list[_Hyp] = []
    while beam:
        # Candidates in generation order, the greedy branch of each hypothesis first, so that
        # the stable sort below breaks score ties in favour of the greedy decision.
        candidates: dict[tuple[int, int], _Hyp] = {}
        for h in beam:
            p = prob(h.i, h.j)
            take_left = _Hyp(h.i + 1, h.j, h.moves + (True,), h.logp + _log(p))
            take_right = _Hyp(h.i, h.j + 1, h.moves + (False,), h.logp + _log(1.0 - p))
            greedy, other = (take_left, take_right) if p > 0.5 else (take_right, take_left)
            for c in ([greedy] if abs(p - 0.5) > uncertainty else [greedy, other]):
                kept = candidates.get((c.i, c.j))
                if kept is None or c.logp > kept.logp:
                    candidates[(c.i, c.j)] = c
        beam = []
        for c in sorted(candidates.values(), key=lambda c: -c.logp)[:beam_size]:
            (finished if c.i == len(left) or c.j == len(right) else beam).append(c)

    greedy_moves = _greedy_moves(len(left), len(right), prob)
    evidence = _Evidence(seen, len(right))
    # max() keeps the first of equals: the greedy interleaving, then finished ones by path score.
    ordered = [greedy_moves] + [c.moves for c in sorted(finished, key=lambda c: -c.logp)]
    best = max(ordered, key=lambda m: evidence.loglik(m, len(left)))
    return _interleave(left, right, best)


def _greedy_moves(n_left: int, n_right: int, prob: Callable[[int, int], float]
                  ) -> tuple[bool, ...]:
    moves: list[bool] = []
    i = j = 0
    while i < n_left and j < n_right:
        take_left = prob(i, j) > 0.5
        moves.append(take_left)
        i, j = (i + 1, j) if take_left else (i, j + 1)
    return tuple(moves)


def _interleave(left: list[K], right: list[K], moves: Sequence[bool]) -> list[K]:
    out: list[K] = []
    i = j = 0
    for take_left in moves:
        if take_left:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out + left[i:] + right[j:]


class _Evidence:
    """Log-likelihood of an interleaving under a fixed set of observed cross comparisons.

    Per right-run column ``j``: the sorted left rows compared with ``right[j]`` and prefix sums
    of ``log p`` and ``log(1 - p)``, so "``right[j]`` after the first ``h`` left items" costs
    one bisect (rows ``< h`` preferred: ``log p``; the others ``log(1 - p)``).
    """

    def __init__(self, seen: Mapping[tuple[int, int], float], n_right: int):
        cols: list[list[tuple[int, float]]] = [[] for _ in range(n_right)]
        for (i, j), p in seen.items():
            cols[j].append((i, p))
        self.rows: list[list[int]] = []
        self.cum_a: list[list[float]] = []
        self.cum_b: list[list[float]] = []
        for col in cols:
            col.sort()
            self.rows.append([i for i, _ in col])
            self.cum_a.append(list(itertools.accumulate((_log(p) for _, p in col), initial=0.0)))
            self.cum_b.append(list(itertools.accumulate((_log(1 - p) for _, p in col),
                                                        initial=0.0)))

    def loglik(self, moves: Sequence[bool], n_left: int) -> float:
        heights: list[int] = []  # heights[j] = number of left items placed before right[j]
        h = 0
        for take_left in moves:
            if take_left:
                h += 1
            else:
                heights.append(h)
        heights.extend([n_left] * (len(self.rows) - len(heights)))
        total = 0.0
        for rows, ca, cb, hj in zip(self.rows, self.cum_a, self.cum_b, heights):
            if rows:
                k = bisect.bisect_left(rows, hj)
                total += ca[k] + cb[-1] - cb[k]
        return total

