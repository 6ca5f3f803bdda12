"""The Ray engine: a local 2-worker cluster fills one store, equal to a single-process harvest."""

from __future__ import annotations

import pytest
import torch

from ppairs_lens.activations.pipeline import harvest_dataset
from ppairs_lens.models.loading import load_model
from ppairs_lens.data.specs import load_dataset_spec

from .test_scale import save_tiny_model_dir

ray = pytest.importorskip("ray")


def test_two_ray_workers_fill_one_store_equal_to_single_process(tokenizer, tmp_path,
                                                                 monkeypatch):
    from ppairs_lens.activations.distributed import ModelSpec, harvest_with_ray

    model_dir = save_tiny_model_dir(tmp_path / "tiny-llama", tokenizer)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    dataset = load_dataset_spec("story_sentiment", max_pairs=12)
    store, reports = harvest_with_ray(str(model_dir), "story_sentiment", tmp_path / "ray",
                                      n_workers=2, max_pairs=12, shard_size=3)
    assert not ray.is_initialized()  # the local cluster it started is stopped again
    assert store.complete and store.n_shards == 4
    assert sorted(r.shard for r in reports) == [(0, 2), (1, 2)]
    assert {r.shard: r.shards_written for r in reports} == {(0, 2): (0, 2), (1, 2): (1, 3)}

    # Ray runs a 1-CPU task with one thread; the same thread count here makes the reference
    # sum in the same order, so the two stores agree bit for bit.
    assert {r.torch_threads for r in reports} == {1}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = harvest_dataset(load_model(str(model_dir)), dataset, tmp_path / "single",
                                 shard_size=3, progress=False)
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(store.load(), single.load(), rtol=0, atol=0)
    assert store.pairs() == single.pairs()
    assert store.meta.model == single.meta.model == str(model_dir)

    # Re-running on the complete store writes nothing and returns it unchanged.
    again, reports = harvest_with_ray(ModelSpec(str(model_dir)), dataset, tmp_path / "ray",
                                      n_workers=2, shard_size=3)
    assert all(r.shards_written == () for r in reports)
    torch.testing.assert_close(again.load(), single.load(), rtol=0, atol=0)


def test_bad_worker_count_is_refused_before_ray_starts(tmp_path):
    from ppairs_lens.activations.distributed import harvest_with_ray

    with pytest.raises(ValueError, match="n_workers"):
        harvest_with_ray("unused", "story_sentiment", tmp_path / "s", n_workers=0)
    assert not ray.is_initialized()
