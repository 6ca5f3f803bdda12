"""Leak-free train/test splits of comparisons."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.splits import (
    labelled_items_split,
    resolve_split_by,
    train_test_split_pairs,
)


def _contexts(n_ctx: int = 20, per: int = 6) -> list[str]:
    return [f"article{c}" for c in range(n_ctx) for _ in range(per)]


def _all_pairs(n_items: int = 30) -> list[tuple[str, str]]:
    return [(f"s{a}", f"s{b}") for a, b in combinations(range(n_items), 2)]


def test_context_split_keeps_contexts_on_one_side():
    ctx = _contexts()
    train, test = train_test_split_pairs(ctx, test_size=0.3, seed=1)
    assert train.dtype == test.dtype == np.int64
    assert sorted(np.r_[train, test].tolist()) == list(range(len(ctx)))
    tr_ctx = {ctx[i] for i in train}
    te_ctx = {ctx[i] for i in test}
    assert not tr_ctx & te_ctx
    assert len(te_ctx) == 6                        # 30% of 20 contexts
    again = train_test_split_pairs(ctx, test_size=0.3, seed=1)
    np.testing.assert_array_equal(again[1], test)
    other = train_test_split_pairs(ctx, test_size=0.3, seed=2)
    assert not np.array_equal(other[1], test)


def test_item_split_drops_cross_pairs():
    pairs = _all_pairs(30)
    train, test = train_test_split_pairs(None, pairs, test_size=0.3, seed=0, by="item")
    tr_items = {i for k in train for i in pairs[k]}
    te_items = {i for k in test for i in pairs[k]}
    assert not tr_items & te_items
    assert len(te_items) == 9 and len(tr_items) == 21
    assert len(test) == 9 * 8 // 2 and len(train) == 21 * 20 // 2   # all within-side pairs
    assert len(train) + len(test) < len(pairs)                       # cross pairs dropped


def test_pair_split_and_auto_resolution():
    ctx = [f"p{i}" for i in range(100)]            # every pair its own context
    train, test = train_test_split_pairs(ctx, test_size=0.25, seed=3, by="pair")
    assert len(test) == 25 and len(train) == 75 and not set(train) & set(test)
    assert resolve_split_by(_contexts(), None) == "context"
    assert resolve_split_by(ctx, None) == "pair"
    pairs = _all_pairs(10)
    assert resolve_split_by([f"p{i}" for i in range(len(pairs))], pairs) == "item"
    assert resolve_split_by(None, [("a", "b"), ("c", "d")]) == "pair"
    auto = train_test_split_pairs(None, pairs, seed=4)
    items = train_test_split_pairs(None, pairs, seed=4, by="item")
    np.testing.assert_array_equal(auto[0], items[0])


def test_labelled_items_split():
    pairs = _all_pairs(40)
    train, test = labelled_items_split(pairs, n_train_items=10, seed=0)
    labelled = {i for k in train for i in pairs[k]}
    assert len(labelled) == 10 and len(train) == 45           # all pairs among 10 items
    assert not labelled & {i for k in test for i in pairs[k]}
    assert len(test) == 30 * 29 // 2
    _, rest = labelled_items_split(pairs, n_train_items=10, seed=0, test="rest")
    assert sorted(np.r_[train, rest].tolist()) == list(range(len(pairs)))


def test_no_global_rng_and_refusals():
    state = np.random.get_state()[1].copy()
    train_test_split_pairs(_contexts(), seed=5)
    labelled_items_split(_all_pairs(12), 4, seed=5)
    np.testing.assert_array_equal(np.random.get_state()[1], state)
    with pytest.raises(ProbeError, match="need >= 2"):
        train_test_split_pairs(["a"] * 10, by="context")
    with pytest.raises(ProbeError, match="test_size"):
        train_test_split_pairs(_contexts(), test_size=1.5)
    with pytest.raises(ProbeError, match="unknown split"):
        train_test_split_pairs(_contexts(), by="article")
    with pytest.raises(ProbeError, match="needs item_ids"):
        train_test_split_pairs(_contexts(), by="item")
    with pytest.raises(ProbeError, match="n_train_items"):
        labelled_items_split(_all_pairs(5), 5)
    with pytest.raises(ProbeError, match="context ids"):
        train_test_split_pairs(["a", "b"], [("x", "y")])
