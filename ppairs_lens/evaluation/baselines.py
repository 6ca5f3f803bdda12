"""Two no-model baselines every probe is shown beside, fitted on the training split only.

A probe that scores 0.78 means little if looking up each word's training win rate also scores
0.78, or if "the longer summary wins" does. These baselines read nothing but the store's pairs
(ids, labels, text lengths) and return P(item 1) for every test pair, so they are scored by
exactly the code that scores a probe.

* :func:`memorisation_baseline`: each item id's training win rate; P(item 1) =
  0.5 + (rate1 - rate2) / 2, unseen items at the prior 0.5. For true/false statements (no
  item ids) the key is the leak group (the subject): its share of true statements in training.
* :func:`length_baseline`: the longer item (or statement: than the training median) wins,
  with the sign that fits training better.

In SummEval, NEWSROOM and HANNA the item id *is* the producing system (``S0``..``S15`` recur
in every article): there the lookup is a system identity baseline, and says so
(:func:`ids_recur_across_contexts`). :func:`length_balanced_accuracy` scores only the pairs
whose items are within 10% of each other's length, where "the longer one wins" has nothing to
read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from jaxtyping import Float

from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.metrics import accuracy, targets
from ppairs_lens.evaluation.store_split import pair_groups

__all__ = ["Baseline", "memorisation_baseline", "length_baseline", "MEMO_KEYS", "CROSS_IDS",
           "cross_dataset_memorisation", "LENGTH_TOLERANCE", "MIN_BALANCED_PAIRS",
           "ids_recur_across_contexts", "length_balanced", "length_balanced_accuracy"]

#: Two items are of balanced length when they differ by at most this share of the longer.
LENGTH_TOLERANCE = 0.1
#: Fewest length-balanced pairs an accuracy on them is reported over.
MIN_BALANCED_PAIRS = 30

#: Candidate memorisation keys: name -> (field of item 1, field of item 2) of a store's pairs.
MEMO_KEYS: dict[str, tuple[str, str]] = {"item_id": ("item1_id", "item2_id")}


@dataclass
class Baseline:
    """P(item 1) of a no-model predictor on the test pairs (None when it cannot be built)."""

    kind: str                                   # a key of predictors.BASELINE_NAMES
    p: Float[np.ndarray, " n_test"] | None
    predictor: str                              # what it predicted from, for the tables
    train_accuracy: float = float("nan")
    reason: str | None = None                   # why it is unavailable

    @property
    def available(self) -> bool:
        return self.p is not None


def _check(pairs_train: Sequence[PairInfo], labels_train: np.ndarray) -> np.ndarray:
    y = targets(labels_train)                   # refuses ties
    if len(y) != len(pairs_train):
        raise ProbeError(f"{len(pairs_train)} training pairs but {len(y)} labels")
    return y


def _win_counts(keys: list[tuple], y: np.ndarray) -> tuple[dict, dict]:
    wins: dict = {}
    seen: dict = {}
    for (a, b), t in zip(keys, y):
        for k, w in ((a, float(t)), (b, 1.0 - float(t))):
            wins[k] = wins.get(k, 0.0) + w
            seen[k] = seen.get(k, 0) + 1
    return wins, seen


def _rate(wins: dict, seen: dict, k, drop: float | None = None) -> float:
    """Win rate of ``k`` (0.5 unseen); ``drop``: leave out one comparison ``k`` won (1) or lost
    (0), so a key seen once says nothing about its own pair."""
    n = seen.get(k, 0) - (drop is not None)
    return (wins.get(k, 0.0) - (drop or 0.0)) / n if n > 0 else 0.5


def _pair_p(keys: list[tuple], wins: dict, seen: dict) -> np.ndarray:
    return np.array([0.5 + (_rate(wins, seen, a) - _rate(wins, seen, b)) / 2 for a, b in keys])


def _nothing_recurs(key: str) -> Baseline:
    """No held-out pair's key was seen in training: every answer would be the prior 0.5, a
    constant that is no baseline."""
    return Baseline("memorisation", None, "", reason=f"no {key} of a held-out pair occurs in "
                    "training: nothing to memorise")


def memorisation_baseline(pairs_train: Sequence[PairInfo], labels_train: Sequence[int],
                          pairs_test: Sequence[PairInfo]) -> Baseline:
    """The best of the candidate win-rate lookups (:data:`MEMO_KEYS`), chosen on train."""
    y = _check(pairs_train, np.asarray(labels_train))
    if all(p.item1_id is None and p.len2 is None for p in pairs_train):   # statements
        g_tr = pair_groups(pairs_train)
        wins, seen = _win_counts([(g, None) for g in g_tr], y)
        acc = accuracy(y, np.array([_rate(wins, seen, g, float(t)) for g, t in zip(g_tr, y)]))
        p_te = np.array([_rate(wins, seen, g) for g in pair_groups(pairs_test)])
        if not len(set(pair_groups(pairs_test)) & set(g_tr)):
            return _nothing_recurs("leak group (subject)")
        return Baseline("memorisation", p_te, f"group_id truth rate (leave-one-out train acc "
                        f"{acc:.3f})", acc)
    best: tuple[float, str, np.ndarray] | None = None
    for name, (f1, f2) in MEMO_KEYS.items():
        if not all(getattr(p, f1) is not None and getattr(p, f2) is not None
                   for p in (*pairs_train, *pairs_test)):
            continue
        k_tr = [(getattr(p, f1), getattr(p, f2)) for p in pairs_train]
        wins, seen = _win_counts(k_tr, y)
        # each pair left out of its own items' rates: an in-sample lookup of ids that never
        # recur would score 1.0 and always be chosen
        acc = accuracy(y, np.array([0.5 + (_rate(wins, seen, a, float(t))
                                           - _rate(wins, seen, b, 1.0 - float(t))) / 2
                                    for (a, b), t in zip(k_tr, y)]))
        if best is None or acc > best[0]:
            best = (acc, name, _pair_p([(getattr(p, f1), getattr(p, f2)) for p in pairs_test],
                                            wins, seen))
    if best is None:
        return Baseline("memorisation", None, "", reason="the pairs carry no item ids")
    acc, name, p_te = best
    f1, f2 = MEMO_KEYS[name]
    trained = {getattr(p, f) for p in pairs_train for f in (f1, f2)}
    if not any(getattr(p, f) in trained for p in pairs_test for f in (f1, f2)):
        return _nothing_recurs(name)
    seen = float(np.mean(p_te != 0.5))
    what = ("system id (item ids recur across contexts: each is the system that wrote it)"
            if ids_recur_across_contexts(pairs_train) else name)
    return Baseline("memorisation", p_te, f"{what} win rate (best on train, leave-one-out acc "
                    f"{acc:.3f}; {seen:.0%} of test pairs informed)", acc)


def ids_recur_across_contexts(pairs: Sequence[PairInfo]) -> bool:
    """Whether contexts hold 3+ items and some item id appears in 2+ contexts (SummEval's
    ``S0``..``S15``): then the id names the item's producer, not the item."""
    where: dict = {}
    items: dict = {}
    for p in pairs:
        for i in (p.item1_id, p.item2_id):
            if i is not None:
                where.setdefault(i, set()).add(p.context_id)
                items.setdefault(p.context_id, set()).add(i)
    return (any(len(v) > 2 for v in items.values())
            and any(len(c) > 1 for c in where.values()))


#: Why memorisation is missing across two datasets whose ids are not system ids.
CROSS_IDS = ("item ids of two datasets name the same item only where they name a system "
             "(ids recurring across contexts in both); here they do not")


def cross_dataset_memorisation(pairs_train: Sequence[PairInfo], labels_train: Sequence[int],
                               pairs_test: Sequence[PairInfo]) -> Baseline:
    """:func:`memorisation_baseline` fitted on one dataset and looked up on another, only where
    ids recur across contexts in both (they name a system); ids such as a file's row numbers
    would match unrelated items."""
    if not (ids_recur_across_contexts(pairs_train) and ids_recur_across_contexts(pairs_test)):
        return Baseline("memorisation", None, "", reason=CROSS_IDS)
    return memorisation_baseline(pairs_train, labels_train, pairs_test)


def length_balanced(pairs: Sequence[PairInfo],
                    tolerance: float = LENGTH_TOLERANCE) -> np.ndarray:
    """Mask of the pairs whose items' lengths differ by at most ``tolerance`` of the longer
    (False where a length is missing, and for statements)."""
    lengths = [(p.len1, p.len2) for p in pairs]
    return np.array([a is not None and b is not None and max(a, b) > 0
                     and abs(float(a) - float(b)) <= tolerance * max(float(a), float(b))
                     for a, b in lengths], dtype=bool)


def length_balanced_accuracy(labels: Sequence[int], predictions: dict[str, np.ndarray],
                             pairs: Sequence[PairInfo], *,
                             min_pairs: int = MIN_BALANCED_PAIRS) -> dict | None:
    """``{"n", "tolerance", "accuracy": {name: acc}}`` of each predictor's P(item 1) on the
    length-balanced pairs (:func:`length_balanced`); None with fewer than ``min_pairs``."""
    keep = length_balanced(pairs)
    if keep.sum() < min_pairs:
        return None
    y = targets(np.asarray(labels)[keep])
    return {"n": int(keep.sum()), "tolerance": LENGTH_TOLERANCE,
            "accuracy": {k: accuracy(y, np.asarray(p, dtype=float)[keep])
                         for k, p in predictions.items()}}


def _lengths(pairs: Sequence[PairInfo], statements: bool, median: float) -> np.ndarray:
    if statements:
        return np.array([float(p.len1) - median for p in pairs])
    return np.array([float(p.len1) - float(p.len2) for p in pairs])


def length_baseline(pairs_train: Sequence[PairInfo], labels_train: Sequence[int],
                     pairs_test: Sequence[PairInfo]) -> Baseline:
    """Item 1 wins when longer (statements: true when longer than the training median), or
    the reverse when that fits the training pairs better."""
    y = _check(pairs_train, np.asarray(labels_train))
    both = (*pairs_train, *pairs_test)
    if any(p.len1 is None for p in both):
        return Baseline("length", None, "", reason="the pairs carry no text lengths "
                        "(len1/len2)")
    statements = all(p.len2 is None for p in both)
    if not statements and any(p.len2 is None for p in both):
        return Baseline("length", None, "", reason="some pairs have no len2")
    median = float(np.median([float(p.len1) for p in pairs_train])) if statements else 0.0
    d_tr = _lengths(pairs_train, statements, median)
    scale = float(np.std(d_tr)) or 1.0
    sig = lambda d: 1.0 / (1.0 + np.exp(-np.clip(d / scale, -30, 30)))  # noqa: E731
    acc_long = accuracy(y, sig(d_tr))
    acc_short = accuracy(y, sig(-d_tr))
    sign = 1.0 if acc_long >= acc_short else -1.0
    what = ("longer" if sign > 0 else "shorter") + (" statement is true (than the train "
                                                    f"median {median:.0f} chars)" if statements
                                                    else " item wins")
    acc = max(acc_long, acc_short)
    return Baseline("length", sig(sign * _lengths(pairs_test, statements, median)),
                    f"{what} (sign chosen on train, acc {acc:.3f})", acc)
