"""Train / test splits of comparisons that do not leak through shared contexts or items.

A probe fitted on comparisons about an article and tested on other comparisons about the same
article is partly tested on what it saw: the article's own representation is in every pair.
Likewise a probe tested on pairs of words it saw in training can score by memorising each
word's win rate. So comparisons are split by *group* (the records' ``group_id``: a context, a
block of items, a template pool, a statement's subject):

* ``by="context"``: whole groups go to one side (``"auto"`` when some group holds 2+ pairs).
* ``by="item"``: when no group is shared but items recur across pairs, the *items* are split
  and a pair is kept only when both its items fall on the same side; cross pairs are dropped,
  so ``len(train) + len(test) < n``.
* ``by="pair"``: plain random split of pairs (each pair independent).
* ``by="auto"`` (the default everywhere): the first of these the ids call for
  (:func:`resolve_split_by`).

:func:`labelled_items_split` is the paper's low-label setting (a handful of labelled items).

Every split holds out a prefix of one seeded order of the groups (:func:`group_order`). Every
function uses its own seeded ``numpy.random.Generator``, never the global RNG; indices come
back sorted, as int64 arrays.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np

from ppairs_lens.errors import ProbeError

#: Held-out share of the leak groups wherever none is asked for (the built-in analyses and every
#: command without ``--test-size``); ``protocol.EvalSettings`` and the library's defaults read it.
BUILTIN_TEST_SIZE: float = 0.3

__all__ = [
    "BUILTIN_TEST_SIZE",
    "SPLIT_MODES",
    "SplitBy",
    "group_order",
    "labelled_items_split",
    "leaked_items",
    "resolve_split_by",
    "split_groups_to_count",
    "train_test_split_pairs",
]

SplitBy = Literal["auto", "context", "item", "pair"]
#: The split modes, ``"auto"`` first (the default).
SPLIT_MODES: tuple[str, ...] = ("auto", "context", "item", "pair")


def _n_test(n_groups: int, test_size: float, what: str) -> int:
    if not 0.0 < test_size < 1.0:
        raise ProbeError(f"test_size must be strictly between 0 and 1, got {test_size}")
    if n_groups < 2:
        raise ProbeError(f"cannot split {n_groups} {what}(s) into train and test: need >= 2")
    return int(min(n_groups - 1, max(1, round(test_size * n_groups))))


def _check_item_pairs(item_ids: Sequence[tuple[Hashable, Hashable]]) -> list[tuple]:
    pairs = [tuple(p) for p in item_ids]
    for i, p in enumerate(pairs):
        if len(p) != 2:
            raise ProbeError(f"item_ids[{i}] must be a pair (item1_id, item2_id), got {p!r}")
    return pairs


def group_order(groups: Sequence[Hashable], rng: np.random.Generator) -> list:
    """The distinct ``groups`` (first-seen order, so reproducible) permuted by ``rng``."""
    distinct = list(dict.fromkeys(groups))
    return [distinct[i] for i in rng.permutation(len(distinct))]


def split_groups_to_count(groups: Sequence[Hashable], eligible: Sequence[bool], n_test: int,
                          seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(train, test)``: whole groups, in :func:`group_order`, go to test until they
    hold ``n_test`` eligible elements (the ranking's evaluation contexts); a group with none is
    skipped (it trains), and the last group in the order always trains."""
    if len(eligible) != len(groups):
        raise ProbeError(f"{len(groups)} groups but {len(eligible)} eligibility flags")
    if n_test < 1:
        raise ProbeError(f"n_test must be at least 1, got {n_test}")
    order = group_order(groups, np.random.default_rng(seed))
    n_eligible = Counter(g for g, ok in zip(groups, eligible) if ok)
    held: set = set()
    n_held = 0
    for g in order[:-1]:
        if n_held >= n_test:
            break
        if n_eligible[g]:
            held.add(g)
            n_held += n_eligible[g]
    is_test = np.fromiter((g in held for g in groups), bool, count=len(groups))
    return np.flatnonzero(~is_test).astype(np.int64), np.flatnonzero(is_test).astype(np.int64)


def resolve_split_by(context_ids: Sequence[Hashable] | None,
                     item_ids: Sequence[tuple[Hashable, Hashable]] | None) -> str:
    """What ``by="auto"`` means: ``"context"`` if some group (``context_ids``: the group ids)
    holds more than one pair, else ``"item"`` if some item occurs in more than one pair, else
    ``"pair"``."""
    if context_ids is not None and any(c > 1 for c in Counter(context_ids).values()):
        return "context"
    if item_ids is not None:
        counts = Counter(i for p in _check_item_pairs(item_ids) for i in set(p))
        if any(c > 1 for c in counts.values()):
            return "item"
    return "pair"


def train_test_split_pairs(context_ids: Sequence[Hashable] | None,
                           item_ids: Sequence[tuple[Hashable, Hashable]] | None = None,
                           test_size: float = BUILTIN_TEST_SIZE, seed: int = 0,
                           by: SplitBy = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(train, test)`` of comparisons, split so nothing leaks between the sides
    (``by``: module doc; ``context_ids[i]``: comparison ``i``'s group). ``test_size`` is the
    fraction of the units put in the test set: groups, items (with 30% test items about 9% of
    an all-pairs design is test and 49% train, cross pairs dropped) or pairs."""
    if context_ids is None and item_ids is None:
        raise ProbeError("give context_ids or item_ids to split")
    n = len(context_ids) if context_ids is not None else len(item_ids)
    if context_ids is not None and item_ids is not None and len(item_ids) != n:
        raise ProbeError(f"{len(context_ids)} context ids but {len(item_ids)} item-id pairs")
    if by == "auto":
        by = resolve_split_by(context_ids, item_ids)
    rng = np.random.default_rng(seed)
    if by == "pair":
        perm = rng.permutation(n)
        k = _n_test(n, test_size, "pair")
        return np.sort(perm[k:]).astype(np.int64), np.sort(perm[:k]).astype(np.int64)
    if by == "context":
        if context_ids is None:
            raise ProbeError("by='context' needs context_ids")
        k = _n_test(len(set(context_ids)), test_size, "group")
        test_groups = set(group_order(context_ids, rng)[:k])
        is_test = np.fromiter((c in test_groups for c in context_ids), bool, count=n)
        return np.flatnonzero(~is_test).astype(np.int64), np.flatnonzero(is_test).astype(np.int64)
    if by == "item":
        if item_ids is None:
            raise ProbeError("by='item' needs item_ids (pairs of item1_id, item2_id)")
        pairs = _check_item_pairs(item_ids)
        items = list(dict.fromkeys(i for p in pairs for i in p))
        k = _n_test(len(items), test_size, "item")
        test_items = {items[i] for i in rng.permutation(len(items))[:k]}
        side = np.array([[a in test_items, b in test_items] for a, b in pairs], dtype=bool)
        side = side.reshape(n, 2)
        train = np.flatnonzero(~side[:, 0] & ~side[:, 1]).astype(np.int64)
        test = np.flatnonzero(side[:, 0] & side[:, 1]).astype(np.int64)
        if not len(train) or not len(test):
            raise ProbeError(f"splitting items left {len(train)} train and {len(test)} test "
                             f"pairs (cross pairs are dropped); use more items or by='pair'")
        return train, test
    raise ProbeError(f"unknown split mode by={by!r}; use 'auto', 'context', 'item' or 'pair'")


def leaked_items(item_ids: Sequence[tuple[Hashable, Hashable]], train: Sequence[int],
                 test: Sequence[int]) -> set:
    """Items that occur in a ``train`` pair and in a ``test`` pair."""
    pairs = _check_item_pairs(item_ids)
    seen = {i for k in train for i in pairs[k]}
    return {i for k in test for i in pairs[k]} & seen


def labelled_items_split(item_ids_pairs: Sequence[tuple[Hashable, Hashable]],
                         n_train_items: int, seed: int = 0,
                         test: Literal["unlabelled", "rest"] = "unlabelled",
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The paper's few-labels setting: ``n_train_items`` random items are labelled; train on
    the comparisons *among* them (both items labelled), test on comparisons among unlabelled
    items only (``test="unlabelled"``, no item seen in training) or on every other comparison
    (``"rest"``, including those with one labelled item)."""
    pairs = _check_item_pairs(item_ids_pairs)
    items = list(dict.fromkeys(i for p in pairs for i in p))
    if not 2 <= n_train_items < len(items):
        raise ProbeError(f"n_train_items must be in [2, {len(items) - 1}] for {len(items)} "
                         f"items, got {n_train_items}")
    rng = np.random.default_rng(seed)
    labelled = {items[i] for i in rng.permutation(len(items))[:n_train_items]}
    lab = np.array([[a in labelled, b in labelled] for a, b in pairs], dtype=bool).reshape(-1, 2)
    is_train = lab[:, 0] & lab[:, 1]
    if test == "unlabelled":
        is_test = ~lab[:, 0] & ~lab[:, 1]
    elif test == "rest":
        is_test = ~is_train
    else:
        raise ProbeError(f"test must be 'unlabelled' or 'rest', got {test!r}")
    train, test_idx = np.flatnonzero(is_train), np.flatnonzero(is_test)
    if not len(train) or not len(test_idx):
        raise ProbeError(f"{n_train_items} labelled items give {len(train)} train and "
                         f"{len(test_idx)} test comparisons")
    return train.astype(np.int64), test_idx.astype(np.int64)
