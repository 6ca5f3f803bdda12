"""Built-in datasets: deterministic, balanced, large enough, and right about their answers."""

from __future__ import annotations

from collections import Counter

import pytest

from ppairs_lens.data import BUILTIN, BUILTIN_NAMES, builtin_dataset, load_dataset
from ppairs_lens.data.builtin import CAPITALS, WORDS
from ppairs_lens.errors import DataError
from ppairs_lens.data.records import ITEM1, ITEM2, Comparison


def winner(r: Comparison) -> str:
    return r.item1 if r.label == ITEM1 else r.item2


def loser(r: Comparison) -> str:
    return r.item2 if r.label == ITEM1 else r.item1


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_builtin_basics(name: str) -> None:
    ds = builtin_dataset(name)
    assert len(BUILTIN) >= 4 and ds.name == name and ds.kind == "comparison"
    assert BUILTIN_NAMES == tuple(BUILTIN)  # the default list, in listing order
    assert len(ds) >= 200
    labels = Counter(ds.labels())
    assert set(labels) == {ITEM1, ITEM2} and abs(labels[ITEM1] - labels[ITEM2]) <= 1
    assert len({r.pair_id for r in ds.records}) == len(ds)
    assert all(r.item1 != r.item2 for r in ds.records)
    assert all((r.score1 > r.score2) == (r.label == ITEM1) for r in ds.records)
    assert ds.aspect and ds.item_name != "item"


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_builtin_deterministic_per_seed(name: str) -> None:
    assert builtin_dataset(name, seed=3).fingerprint() == BUILTIN[name](3).fingerprint()
    assert builtin_dataset(name, seed=3).fingerprint() != builtin_dataset(name, 4).fingerprint()
    assert len(builtin_dataset(name, n=50)) == 50
    assert len(builtin_dataset(name, n=51)) == 51


def test_larger_number_is_right() -> None:
    for r in builtin_dataset("larger_number").records:
        assert int(winner(r)) > int(loser(r))


def test_capital_true_is_right() -> None:
    capitals = dict(CAPITALS)
    ds = builtin_dataset("capital_true")
    assert len(CAPITALS) >= 60 and len(set(capitals.values())) == len(CAPITALS)
    for r in ds.records:
        country = r.context_id.split(":", 1)[1]
        assert winner(r) == f"The capital of {country} is {capitals[country]}."
        assert loser(r).startswith(f"The capital of {country} is ") and r.context is None
    assert len({r.context_id for r in ds.records}) == len(CAPITALS)  # every country used


def test_alphabetical_is_right() -> None:
    assert len(set(WORDS)) == len(WORDS) and all(w.isalpha() and w.islower() for w in WORDS)
    for r in builtin_dataset("alphabetical").records:
        assert winner(r) < loser(r)


def test_story_sentiment_shares_contexts() -> None:
    ds = builtin_dataset("story_sentiment")
    groups: dict[str, list[Comparison]] = {}
    for r in ds.records:
        groups.setdefault(r.context_id, []).append(r)
    assert all(len(g) == 6 for g in groups.values())
    assert all(len({r.context for r in g}) == 1 and g[0].context for g in groups.values())
    assert len({g[0].context for g in groups.values()}) == len(groups)
    assert ds.context_name == "passage"


def test_builtin_errors() -> None:
    with pytest.raises(DataError, match="unknown built-in"):
        builtin_dataset("nope")
    with pytest.raises(DataError, match="between 1 and"):
        builtin_dataset("capital_true", n=10**6)
    with pytest.raises(DataError):
        builtin_dataset("larger_number", n=0)
    assert load_dataset("alphabetical", n=20).fingerprint() == builtin_dataset(
        "alphabetical", n=20).fingerprint()


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_builtin_groups_hold_their_items(name: str) -> None:
    """Every record has a group; no item (a template, for story_sentiment) is in two groups,
    so a split by group never puts an item on both sides."""
    ds = builtin_dataset(name, seed=2)
    assert all(r.group_id for r in ds.records) and ds.extra["group_by"]
    owner: dict[str, str] = {}
    for r in ds.records:
        for item in (r.item1_id, r.item2_id):
            assert owner.setdefault(item, r.group_id) == r.group_id, item
    assert 6 <= len(set(ds.group_ids())) < len(ds)


def test_block_builtins_spread_pairs_over_blocks() -> None:
    for name, n_groups in (("larger_number", 40), ("alphabetical", 20)):
        sizes = Counter(builtin_dataset(name).group_ids())
        assert len(sizes) >= n_groups and max(sizes.values()) - min(sizes.values()) <= 1
    assert len(set(WORDS)) == 200


def test_story_sentiment_template_pools() -> None:
    ds = builtin_dataset("story_sentiment")
    assert len(ds) == 360 and len({r.context_id for r in ds.records}) == 60
    pools = Counter(ds.group_ids())
    assert len(pools) == 6 and set(pools.values()) == {60}      # 10 passages per pool
    for r in ds.records:
        pool = r.group_id.rsplit("pool", 1)[1]
        for item_id, score in ((r.item1_id, r.score1), (r.item2_id, r.score2)):
            _, level, template = item_id.split(":")
            assert template == pool and int(level) == score
    # one template, one sentence up to name and pronoun: the id is what a lookup can use
    name_free = {(r.item1_id, r.item1.replace(r.context.split()[0], "{n}")
                  .replace(" her ", " {p} ").replace(" his ", " {p} ")) for r in ds.records}
    assert len({t for t, _ in name_free}) == len(name_free) == 30


def test_capital_true_groups_by_country() -> None:
    ds = builtin_dataset("capital_true")
    assert all(r.context_id == f"capital:{r.group_id}" for r in ds.records)


def test_group_id_is_part_of_the_fingerprint() -> None:
    from dataclasses import replace

    ds = builtin_dataset("alphabetical", n=20)
    moved = replace(ds, records=[replace(ds.records[0], group_id="elsewhere"), *ds.records[1:]])
    assert moved.fingerprint() != ds.fingerprint()
    assert moved.group_ids()[0] == "elsewhere" and moved.group_ids()[1:] == ds.group_ids()[1:]
