"""The prompted judges run on exactly the held-out pairs the probes are scored on."""

import pytest

from ppairs_lens.activations.pipeline import ensure_store
from ppairs_lens.data.builtin import builtin_dataset
from ppairs_lens.evaluation.store_split import split_store
from ppairs_lens.judges.held_out import held_out_datasets, judge_entry, judge_held_out


@pytest.fixture(scope="module")
def numbers(tiny, tmp_path_factory):
    ds = builtin_dataset("larger_number", n=80)
    return ds, ensure_store(tiny, ds, tmp_path_factory.mktemp("stores"))


def test_judges_cover_every_test_pair_of_the_probe_split(tiny, numbers):
    ds, store = numbers
    sp = split_store(store, test_size=0.3, split_by="auto", seed=3)
    res = judge_held_out(tiny, store, ds, test_size=0.3, split_by="auto", seed=3, few_shot_k=2)
    test_ids = {p.pair_id for p in sp.pairs_test}
    assert set(res.zero_shot["p_by_pair"]) == test_ids
    assert set(res.few_shot["p_by_pair"]) == test_ids
    assert res.split_used == sp.split_used == "context"
    train_ids = {p.pair_id for p in sp.pairs_train}
    assert set(res.few_shot["few_shot"]["demo_pair_ids"]) <= train_ids
    entry = judge_entry(res)
    assert entry["p_by_pair"] == res.zero_shot["p_by_pair"]
    assert entry["few_shot_p_by_pair"] == res.few_shot["p_by_pair"]


def test_sides_share_no_leak_group(numbers):
    ds, store = numbers
    train, test, _ = held_out_datasets(store, ds, test_size=0.3, split_by="auto", seed=0)
    assert not set(train.group_ids()) & set(test.group_ids())
    def items(d):
        return {i for r in d.records for i in (r.item1_id, r.item2_id)}

    assert not items(train) & items(test)


def test_a_store_from_other_records_is_refused(tiny, numbers):
    _, store = numbers
    other = builtin_dataset("larger_number", n=80, seed=5)
    with pytest.raises(Exception, match="store|dataset|harvested"):
        judge_held_out(tiny, store, other)
