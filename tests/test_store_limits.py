"""Pair limits share one store: a smaller limit reads what a larger one harvested, a larger one
computes only the pairs it adds, and a dataset whose records differ gets a store of its own."""

import time
from dataclasses import replace

import pytest
import torch

from ppairs_lens.activations.pipeline import ensure_store, harvest_dataset, stored_rows
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.specs import subsample_by_context
from ppairs_lens.errors import StoreError

from .conftest import small_comparisons


def _ensure(tiny, dataset, root):
    return ensure_store(tiny, dataset, root, progress=False)


def _computed(store, since):
    return ActivationStore.open(store.path, whole=True).pairs_written_since(since)


def test_limits_of_one_dataset_share_a_store_and_compute_each_pair_once(tiny, tmp_path):
    data = small_comparisons(24, with_context=False)
    at = {n: subsample_by_context(data, n, seed=3) for n in (5, 13, 4)}
    t0 = time.time() - 1
    five = _ensure(tiny, at[5], tmp_path)
    assert five.is_view and five.n_pairs == 5 and _computed(five, t0) == 5
    time.sleep(1.1)
    t1 = time.time()
    thirteen = _ensure(tiny, at[13], tmp_path)
    assert thirteen.path == five.path and _computed(thirteen, t1) == 8  # only the pairs added
    time.sleep(1.1)
    t2 = time.time()
    four = _ensure(tiny, at[4], tmp_path)
    assert four.path == five.path and _computed(four, t2) == 0 and four.complete
    assert [p.pair_id for p in four.pairs()] == [r.pair_id for r in at[4].records]
    assert four.meta.dataset == at[4].name and four.meta.dataset_fingerprint == at[4].fingerprint()
    assert len({s.fingerprint() for s in (five, thirteen, four)}) == 3

    # each view reads its own pairs, in its dataset's order, as a harvest of them alone does
    alone = harvest_dataset(tiny, replace(at[13], sampled_from=None), tmp_path / "alone",
                            shard_size=256, progress=False)
    torch.testing.assert_close(thirteen.load(), alone.load(), rtol=1e-5, atol=1e-5)
    assert thirteen.labels().tolist() == alone.labels().tolist()
    got, ref = thirteen.judge_logodds(), alone.judge_logodds()
    assert got is not None and ref is not None and abs(got - ref).max() < 1e-4
    rows = stored_rows(at[4])[1]
    torch.testing.assert_close(four.load([0]), ActivationStore.open(five.path, whole=True).view(
        rows, dataset="x", dataset_fingerprint="y").load([0]), rtol=0, atol=0)


def test_a_limit_reaching_into_a_partial_shard_extends_it(tiny, tmp_path):
    data = small_comparisons(12, with_context=False)
    small, large = (subsample_by_context(data, n, seed=1) for n in (2, 7))
    first = harvest_dataset(tiny, small, tmp_path / "s", shard_size=4, progress=False)
    store = ActivationStore.open(tmp_path / "s", whole=True)
    assert first.complete and not store.complete and store.written_stop(0) == 2
    before = first.fingerprint()
    harvest_dataset(tiny, large, tmp_path / "s", shard_size=4, progress=False)
    assert store.written_stop(0) == 4 and store.written_stop(1) == 7 and store.written_stop(2) is None
    again = harvest_dataset(tiny, small, tmp_path / "s", shard_size=4, progress=False)
    torch.testing.assert_close(again.load(), first.load(), rtol=0, atol=0)
    # the shard grew under the small limit's pairs, which did not change: nor does its key
    assert again.fingerprint() == before
    # the rows digested are checked against the shard's checksums: a changed one is refused
    path = again._shard_paths(0)[0]
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    with safe_open(str(path), framework="pt") as f:
        kept = f.metadata()
    tensors = load_file(str(path))
    key = next(k for k in sorted(tensors) if k.startswith("layer_"))
    tensors[key][0] += 1.0
    save_file(tensors, str(path), metadata=kept)   # same size: only the checksum tells
    with pytest.raises(StoreError, match=f"checksum of {key} differs"):
        again.fingerprint()


def test_records_that_differ_from_the_whole_datasets_get_their_own_store(tiny, tmp_path):
    data = small_comparisons(10, with_context=False)
    part = subsample_by_context(data, 6, seed=0)
    flipped = replace(part, records=[replace(r, label={1: 2, 2: 1}.get(r.label, 0))
                                     for r in part.records])
    assert stored_rows(part)[1] is not None and stored_rows(flipped)[1] is None
    a, b = _ensure(tiny, part, tmp_path), _ensure(tiny, flipped, tmp_path)
    assert a.path != b.path and not b.is_view
    assert b.labels().tolist() == flipped.labels()


def test_an_unharvested_part_is_named_when_read(tiny, tmp_path):
    data = small_comparisons(12, with_context=False)
    harvest_dataset(tiny, subsample_by_context(data, 3, seed=0), tmp_path / "s", shard_size=4,
                    progress=False)
    whole = ActivationStore.open(tmp_path / "s", whole=True)
    assert whole.n_pairs == 12 and whole.missing_shards() == [0, 1, 2]
    with pytest.raises(StoreError, match="incomplete: shards \\[0, 1, 2\\]"):
        whole.load()
    with pytest.raises(StoreError, match="distinct pair positions"):
        whole.view([0, 0], dataset="x", dataset_fingerprint="y")


def test_a_store_opened_by_path_is_the_pairs_harvested_so_far(tiny, tmp_path):
    data = small_comparisons(12)
    seven = subsample_by_context(data, 7, seed=2)
    made = harvest_dataset(tiny, seven, tmp_path / "s", shard_size=4, progress=False)
    opened = ActivationStore.open(tmp_path / "s")
    assert opened.meta.dataset == seven.name and opened.complete and opened.n_pairs == 7
    assert opened.pairs() == made.pairs()  # the limit's pairs, in the file's order
    torch.testing.assert_close(opened.load(), made.load(), rtol=0, atol=0)
    harvest_dataset(tiny, subsample_by_context(data, None, seed=2), tmp_path / "s",
                    shard_size=4, progress=False)
    everything = ActivationStore.open(tmp_path / "s")
    assert everything.meta.dataset == data.name and everything.n_pairs == 12
    assert [p.pair_id for p in everything.pairs()] == [r.pair_id for r in data.records]


def test_a_store_whose_order_is_not_its_pairs_is_refused(tiny, tmp_path):
    import json

    harvest_dataset(tiny, subsample_by_context(small_comparisons(6), 3, seed=0), tmp_path / "s",
                    progress=False)
    meta = json.loads((tmp_path / "s" / "metadata.json").read_text())
    meta["sampling"]["file_order"][0] = meta["sampling"]["file_order"][1]
    (tmp_path / "s" / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(StoreError, match="sampling.file_order"):
        ActivationStore.open(tmp_path / "s")


def test_a_drawn_dataset_redrawn_at_another_limit_is_that_limit_of_its_file():
    from ppairs_lens.data.specs import load_dataset_spec, redraw

    for per_context in (None, 1):
        data = small_comparisons(30)
        twelve = subsample_by_context(data, 12, seed=4, per_context=per_context)
        five = subsample_by_context(data, 5, seed=4, per_context=per_context)
        again = redraw(twelve, 5)
        assert again.records == five.records and again.name == five.name
        assert stored_rows(again)[0].records == stored_rows(five)[0].records
    loaded = load_dataset_spec("story_sentiment")
    assert redraw(loaded, 7).records == load_dataset_spec("story_sentiment", max_pairs=7).records
