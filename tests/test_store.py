import errno
import json
import subprocess
import sys
import textwrap

import pytest
import torch
from filelock import FileLock

from ppairs_lens.errors import StoreError
from ppairs_lens.activations.pipeline import harvest_dataset
from ppairs_lens.activations.prompts import ComparisonTemplate
from ppairs_lens.activations.store import ActivationStore

from .conftest import REPO, child_env, small_comparisons


def _harvest(tiny, out, n=10, **kw):
    return harvest_dataset(tiny, small_comparisons(n), out, shard_size=3, progress=False, **kw)


def _same_store(a: ActivationStore, b: ActivationStore):
    torch.testing.assert_close(a.load(), b.load(), rtol=0, atol=0)
    assert a.pairs() == b.pairs()


def test_roundtrip_and_partial_layers(tiny, tmp_path):
    store = _harvest(tiny, tmp_path / "s")
    again = ActivationStore.open(tmp_path / "s")
    full = again.load()
    assert full.shape == (10, 2, 3, 64) and again.complete and again.n_shards == 4
    torch.testing.assert_close(again.load([0, 2]), full[:, :, [0, 2]])
    torch.testing.assert_close(again.load(-1), full[:, :, 2])
    assert again.labels().tolist() == [r.label for r in small_comparisons(10).records]
    meta = json.loads((tmp_path / "s" / "metadata.json").read_text())
    for key in ("model", "hook_names", "d_model", "dtype", "template", "dataset_fingerprint",
                "package_version", "created"):
        assert key in meta
    assert store.meta == again.meta


def test_reopening_for_another_run_names_the_difference(tiny, tmp_path):
    _harvest(tiny, tmp_path / "s")
    other = ComparisonTemplate(assistant="The {comparative} {item} is Choice ")
    with pytest.raises(StoreError, match="template_hash"):
        _harvest(tiny, tmp_path / "s", template=other)
    with pytest.raises(StoreError, match="dataset_fingerprint"):
        harvest_dataset(tiny, small_comparisons(9), tmp_path / "s", shard_size=3, progress=False)


def test_corrupt_and_truncated_shards_are_named(tiny, tmp_path):
    _harvest(tiny, tmp_path / "s")
    shard = tmp_path / "s" / "shards" / "shard-00001.safetensors"
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0xFF  # flip bits in the last tensor's payload
    shard.write_bytes(bytes(data))
    store = ActivationStore.open(tmp_path / "s")
    store.load([0])  # the untouched layer still reads: checksums are per tensor
    with pytest.raises(StoreError, match="shard-00001.safetensors is corrupt"):
        store.load()
    shard.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(StoreError, match="shard-00001.safetensors is truncated"):
        store.load([0])


def test_incomplete_store_refuses_to_load(tiny, tmp_path):
    _harvest(tiny, tmp_path / "s")
    (tmp_path / "s" / "shards" / "shard-00002.json").unlink()
    with pytest.raises(StoreError, match=r"incomplete: shards \[2\]"):
        ActivationStore.open(tmp_path / "s").load()


def test_second_writer_is_refused(tiny, tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    with FileLock(out / ".harvest-0-of-1.lock"):
        with pytest.raises(StoreError, match="being written by another harvest"):
            _harvest(tiny, out)


def test_ctrl_c_and_disk_full_lose_nothing(tiny, tmp_path, monkeypatch):
    ref = _harvest(tiny, tmp_path / "ref")
    calls = {"n": 0}

    def interrupt(_n):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    import ppairs_lens.activations.pipeline as hts

    real = hts.harvest_with_judge
    monkeypatch.setattr(hts, "harvest_with_judge",
                        lambda b, p, s, progress=None: real(b, p, s, progress=interrupt))
    with pytest.raises(KeyboardInterrupt):
        _harvest(tiny, tmp_path / "s")
    monkeypatch.setattr(hts, "harvest_with_judge", real)

    import safetensors.torch as store_mod  # the store writes through io.atomic's save

    real_save = store_mod.save_file

    def full_disk(tensors, path, metadata=None):
        real_save(tensors, path, metadata=metadata)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_mod, "save_file", full_disk)
    with pytest.raises(OSError, match="No space"):
        _harvest(tiny, tmp_path / "s")
    monkeypatch.setattr(store_mod, "save_file", real_save)
    assert not list((tmp_path / "s" / "shards").glob(".*tmp"))  # no half shard left behind
    _same_store(_harvest(tiny, tmp_path / "s"), ref)


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {repo!r})
    import safetensors.torch as store_mod
    from ppairs_lens.activations.pipeline import harvest_dataset
    from ppairs_lens.models.tiny import tiny_model
    from tests.conftest import small_comparisons
    real, count = store_mod.save_file, [0]
    def save_then_maybe_die(tensors, path, metadata=None):
        count[0] += 1
        real(tensors, path, metadata=metadata)
        if count[0] == 3:  # the third shard is on disk under its temporary name: die now
            os.kill(os.getpid(), signal.SIGKILL)
    store_mod.save_file = save_then_maybe_die
    harvest_dataset(tiny_model(seed=0), small_comparisons(10), sys.argv[1], shard_size=3,
                    progress=False)
""")


def test_sigkill_midway_then_resume_equals_uninterrupted(tiny, tmp_path):
    script = tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT.format(repo=str(REPO)))
    out = tmp_path / "s"
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True,
                          timeout=300, env=child_env())
    assert proc.returncode == -9, proc.stderr[-2000:]
    store = ActivationStore.open(out)
    assert store.missing_shards() == [2, 3]  # two shards survived, the third did not count
    resumed = _harvest(tiny, out)
    _same_store(resumed, _harvest(tiny, tmp_path / "ref"))


def test_pairs_written_since_counts_only_shards_finished_after(tiny, tmp_path):
    import time as _time

    before = _time.time() - 1
    store = _harvest(tiny, tmp_path / "s", n=10)
    assert store.n_shards > 1 and store.pairs_written_since(before) == store.n_pairs
    later = _time.time() + 60
    assert ActivationStore.open(store.path).pairs_written_since(later) == 0
