"""Leak-free train/test splits of comparisons."""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

import numpy as np
import pytest
import torch

from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.activations.store_meta import StoreMeta
from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.splits import (
    labelled_items_split,
    leaked_items,
    resolve_split_by,
    train_test_split_pairs,
)
from ppairs_lens.evaluation.store_split import (
    pair_groups,
    pair_items,
    split_pairs,
    split_store,
    untied_split,
    validation_split,
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


def _block_pairs(n_blocks: int = 12, per: int = 6) -> list[PairInfo]:
    """Store pair rows: all pairs among ``per`` items inside each block, the block the group."""
    rows = []
    for b in range(n_blocks):
        for x, y in combinations(range(per), 2):
            rows.append(PairInfo(f"b{b}:{x}|{y}", 1 + (x + y) % 2, f"b{b}:{x}|{y}",
                                 f"block{b}", f"b{b}i{x}", f"b{b}i{y}"))
    return rows


def test_split_pairs_uses_groups_and_resolves_auto():
    rows = _block_pairs()
    train, test, used = split_pairs(rows, test_size=0.3, seed=0)
    assert used == "context" and len(train) + len(test) == len(rows)
    assert not leaked_items(pair_items(rows), train, test)
    groups = pair_groups(rows)
    assert not {groups[i] for i in train} & {groups[i] for i in test}
    # an old store without group ids falls back to contexts (here: one pair each) ...
    old = [replace(r, group_id=None) for r in rows]
    assert pair_groups(old) == [r.context_id for r in rows]
    # ... and auto then splits by item, since items recur: still no item on both sides
    train, test, used = split_pairs(old, test_size=0.3, seed=0)
    assert used == "item" and not leaked_items(pair_items(old), train, test)
    assert len(train) + len(test) < len(rows)
    # a plain pair split of the same rows does leak items: the check can fail
    train, test, used = split_pairs(old, test_size=0.3, seed=0, split_by="pair")
    assert used == "pair" and leaked_items(pair_items(old), train, test)
    assert pair_items([PairInfo("s", 1, item1_id=None)]) is None


@pytest.mark.parametrize("by", ["auto", "context", "item", "pair"])
def test_validation_split_stays_inside_train_and_leak_free(by):
    rows = _block_pairs()
    train, _, _ = split_pairs(rows, test_size=0.3, seed=1)
    groups = [pair_groups(rows)[i] for i in train]
    items = [pair_items(rows)[i] for i in train]
    fit, val = validation_split(groups, items, val_size=0.25, seed=2, by=by)
    assert fit.dtype == val.dtype == np.int64 and len(fit) and len(val)
    assert fit.max() < len(train) and val.max() < len(train) and not set(fit) & set(val)
    if by in ("auto", "context"):
        assert not {groups[i] for i in fit} & {groups[i] for i in val}
        assert len(fit) + len(val) == len(train)
    if by != "pair":
        assert not leaked_items(items, fit, val)
    again = validation_split(groups, items, val_size=0.25, seed=2, by=by)
    np.testing.assert_array_equal(again[1], val)


def test_validation_split_refusals():
    with pytest.raises(ProbeError, match="validation split"):
        validation_split(["g"] * 8, None, seed=0, by="context")
    with pytest.raises(ProbeError, match="item ids"):
        validation_split(["a", "b"], None, seed=0, by="item")
    with pytest.raises(ProbeError, match="item-id pairs"):
        validation_split(["a", "b"], [("x", "y")], seed=0)


def test_split_store_reports_groups_and_mode(tmp_path):
    rows = _block_pairs(n_blocks=10, per=4)
    rows[0] = replace(rows[0], label=0)                        # a tie: dropped
    meta = {"model": "toy", "dataset": "blocks", "dataset_fingerprint": "fp",
            "template_hash": "t", "hook_names": ["h0", "h1"], "d_model": 3,
            "dtype": "float32", "shard_size": 64}
    store = ActivationStore.create(tmp_path / "s", StoreMeta.from_json(meta), rows)
    acts = torch.arange(len(rows) * 12, dtype=torch.float32).reshape(len(rows), 2, 2, 3)
    store.write_shard(0, acts)
    sp = split_store(store, test_size=0.3, seed=0)
    assert sp.split_used == "context" and len(sp.groups_test) == len(sp.pairs_test)
    assert set(sp.groups_test) == {p.group_id for p in sp.pairs_test}
    assert not set(sp.groups_train) & set(sp.groups_test)
    assert len(sp.pairs_train) + len(sp.pairs_test) == len(rows) - 1
    assert sp.acts_train.shape[1:] == (2, 2, 3) and len(sp.labels_test) == len(sp.pairs_test)
    k = next(i for i, r in enumerate(rows) if r.pair_id == sp.pairs_test[0].pair_id)
    torch.testing.assert_close(sp.acts_test[0], acts[k])
    assert split_store(store, test_size=0.3, seed=0, split_by="pair").split_used == "pair"


def _block_store(tmp_path, rows):
    meta = {"model": "toy", "dataset": "blocks", "dataset_fingerprint": "fp",
            "template_hash": "t", "hook_names": ["h0", "h1"], "d_model": 3,
            "dtype": "float32", "shard_size": 64}
    store = ActivationStore.create(tmp_path / "s", StoreMeta.from_json(meta), rows)
    gen = torch.Generator().manual_seed(0)
    store.write_shard(0, torch.randn(len(rows), 2, 2, 3, generator=gen))
    return store


def test_untied_split_is_split_stores_split_without_activations(tmp_path, monkeypatch):
    rows = _block_pairs(n_blocks=10, per=4)
    rows[3] = replace(rows[3], label=0)                        # a tie: dropped by both
    store = _block_store(tmp_path, rows)
    sp = split_store(store, test_size=0.3, seed=1)

    def no_load(*a, **k):
        raise AssertionError("untied_split must not read activations")
    monkeypatch.setattr(ActivationStore, "load", no_load)
    untied, keep, train, test, used = untied_split(store.pairs(), test_size=0.3, seed=1)
    assert rows[3].pair_id not in {p.pair_id for p in untied} and len(keep) == len(rows) - 1
    # the rule as it stood before untied_split: ties dropped, then split_pairs
    old = split_pairs([p for p in rows if p.label != 0], test_size=0.3, seed=1)
    assert list(old[0]) == list(train) and list(old[1]) == list(test) and old[2] == used
    assert [untied[i].pair_id for i in test] == [p.pair_id for p in sp.pairs_test]
    assert [untied[i].pair_id for i in train] == [p.pair_id for p in sp.pairs_train]
    assert used == sp.split_used
    # split_store's activations and labels line up with those pairs
    monkeypatch.undo()
    acts = store.load()[torch.as_tensor(keep)]
    torch.testing.assert_close(sp.acts_test, acts[torch.as_tensor(test)])
    torch.testing.assert_close(sp.acts_train, acts[torch.as_tensor(train)])
    assert list(sp.labels_test) == [untied[i].label for i in test]


def test_replication_leaves_out_a_store_with_one_class_on_a_side(tmp_path, capsys):
    from ppairs_lens.evaluation.store_split import store_fits

    rows = [replace(r, label=1) for r in _block_pairs(n_blocks=10, per=4)]
    said = []
    assert not store_fits(_block_store(tmp_path, rows), {"test_size": 0.3, "seed": 0}, said.append)
    assert "left out" in said[0] and "0 item 2" in said[0]
    rows = [replace(r, label=1 + i % 2) for i, r in enumerate(rows)]
    assert store_fits(_block_store(tmp_path / "b", rows), {"test_size": 0.3, "seed": 0}, said.append)
    meta = {"model": "toy", "dataset": "unfinished", "dataset_fingerprint": "fp",
            "template_hash": "t", "hook_names": ["h0", "h1"], "d_model": 3,
            "dtype": "float32", "shard_size": 64}
    unfinished = ActivationStore.create(tmp_path / "c", StoreMeta.from_json(meta), rows)
    assert not store_fits(unfinished, {"test_size": 0.3, "seed": 0}, said.append)
    assert "misses shards [0]" in said[-1]


def test_cli_split_flag_defaults_to_auto():
    from analyses.cli import build_parser
    from analyses.cli_args import SPLITS
    from ppairs_lens.evaluation.splits import SPLIT_MODES

    parse = build_parser().parse_args
    assert parse(["sweep"]).split == "auto" and SPLITS == SPLIT_MODES
    assert parse(["sweep", "--split", "item"]).split == "item"
    assert parse(["ablate", "--split-by", "pair"]).settings.split_by == "pair"


def test_split_to_count_holds_out_whole_groups_from_the_same_order_as_the_share_split():
    from ppairs_lens.evaluation.splits import group_order, split_groups_to_count

    groups = [f"g{i % 5}" for i in range(30)]          # 5 groups of 6
    eligible = [i % 2 == 0 for i in range(30)]          # 3 eligible per group
    train, test = split_groups_to_count(groups, eligible, n_test=4, seed=3)
    held = {groups[i] for i in test}
    assert len(held) == 2 and not held & {groups[i] for i in train}  # 3 < 4 <= 6: two groups
    assert held == set(group_order(groups, np.random.default_rng(3))[:2])
    _, share_test = train_test_split_pairs(groups, test_size=0.4, seed=3, by="context")
    assert {groups[i] for i in share_test} == held    # one order, two stopping rules
    _, all_test = split_groups_to_count(groups, eligible, n_test=100, seed=3)
    assert len({groups[i] for i in all_test}) == 4     # the last group always trains


def test_a_size_that_cannot_decide_anything_is_named_before_the_work():
    """Fewer test leak groups than a sign-flip test needs to reach p < 0.05 (two-sided): the
    dataset is named with its groups and the size that would do."""
    from ppairs_lens.activations.pair_info import pair_info
    from ppairs_lens.data.specs import load_dataset_spec
    from ppairs_lens.evaluation.store_split import undecidable_at_size

    small = load_dataset_spec("larger_number", max_pairs=8)
    why = undecidable_at_size([pair_info(small)], small.name, test_size=0.5, seed=0)
    assert why and "4 test groups" in why and "6 groups are needed" in why and "0.125" in why
    enough = load_dataset_spec("larger_number", max_pairs=40)
    assert undecidable_at_size([pair_info(enough)], enough.name, test_size=0.5, seed=0) is None
    assert undecidable_at_size([pair_info(small)], small.name, test_size=None) is None
    # two such files pooled (shift's training side): 8 groups, enough
    assert undecidable_at_size([pair_info(small)] * 2, "both", test_size=0.5, seed=0) is None
    assert "no untied test pair" in undecidable_at_size([[]], "empty", test_size=None)
