"""Scaling past one machine: offloaded models, and several processes filling one store.

A model folder is saved once per module (``tiny_model_dir``): the offload path and the CLI
both load models from disk, the way a 70B checkpoint is loaded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ppairs_lens.interventions.ablation import ablate
from analyses.cli import build_parser
from ppairs_lens.data import builtin_dataset
from ppairs_lens.activations.harvest import harvest_pairs
from ppairs_lens.activations.pipeline import harvest_dataset, parse_shard
from ppairs_lens.models.compat import bridge_supports_disk_offload
from ppairs_lens.models.loading import load_model
from ppairs_lens.probes.estimators import SupervisedProbe
from ppairs_lens.activations.prompts import build_contrast_pairs, default_template
from ppairs_lens.activations.store import IDENTITY_FIELDS, ActivationStore
from ppairs_lens.data.specs import load_dataset_spec
from ppairs_lens.probes.sweep import fit_sweep

from .conftest import child_env, small_comparisons

RTOL = 1e-4


def save_tiny_model_dir(folder: Path, tokenizer, *, seed: int = 0, n_layers: int = 2,
                        d_model: int = 64) -> Path:
    """A random Llama with the embedded tokenizer, saved as an HF folder (config, safetensors).

    ``tiny_model()``'s own HF model cannot be saved: the bridge wraps its modules, so its
    state dict no longer has HF's names. This builds the same shape from scratch instead.
    """
    from ppairs_lens.models.tiny import tiny_hf_model

    hf = tiny_hf_model(tokenizer, seed, n_layers=n_layers, d_model=d_model)
    hf.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_model_dir(tokenizer, tmp_path_factory) -> Path:
    return save_tiny_model_dir(tmp_path_factory.mktemp("models") / "tiny-llama", tokenizer)


# ---- 1. a model bigger than the device: part of it offloaded to disk --------------------------

#: Embedding and first layer in memory, second layer on disk (read back at each forward).
LAYER_ON_DISK = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.layers.0": "cpu",
                 "model.layers.1": "disk", "model.norm": "cpu", "lm_head": "cpu"}
#: Everything on disk, the embedding included (its weight is a data-less ``meta`` placeholder).
ALL_ON_DISK = {"": "disk"}


def _study_numbers(bridge, pairs, labels):
    """What a study computes from a model: activations, probes on them, and an ablation."""
    acts = harvest_pairs(bridge, pairs)
    sweep = fit_sweep(acts, labels, max_iter=200)
    direction = sweep.directions["supervised"][0].float()
    with ablate(bridge, direction, preset="paper"):
        ablated = harvest_pairs(bridge, pairs)
    return acts, sweep, ablated


@pytest.mark.skipif(not bridge_supports_disk_offload(), reason="transformer-lens<4's bridge "
                    "refuses disk offload (tests/test_compat.py checks the error)")
@pytest.mark.parametrize("device_map", [
    pytest.param(LAYER_ON_DISK, id="layer1-on-disk"),
    pytest.param(ALL_ON_DISK, id="all-on-disk"),
])
def test_offloaded_model_matches_in_memory(tiny_model_dir, tmp_path, device_map):
    # Both on the CPU (on a GPU machine the in-memory one would go to the GPU by default).
    ref = load_model(str(tiny_model_dir), device="cpu")
    off = load_model(str(tiny_model_dir), device_map=device_map,
                     offload_folder=str(tmp_path / "offload"))
    hf_map = off.original_model.hf_device_map
    assert "disk" in hf_map.values()
    assert any(p.device.type == "meta" for p in off.parameters())  # really not in memory
    assert off.cfg.device == "cpu"  # where inputs go, even with the embedding on disk

    dataset = builtin_dataset("story_sentiment", n=12)
    pairs = build_contrast_pairs(ref.tokenizer, dataset, default_template(dataset))
    labels = dataset.labels()
    acts_ref, sweep_ref, abl_ref = _study_numbers(ref, pairs, labels)
    acts_off, sweep_off, abl_off = _study_numbers(off, pairs, labels)

    torch.testing.assert_close(acts_off, acts_ref, rtol=RTOL, atol=0)
    torch.testing.assert_close(abl_off, abl_ref, rtol=RTOL, atol=0)
    assert not torch.allclose(abl_ref, acts_ref)  # the ablation did change something
    for kind in sweep_ref.kinds:
        torch.testing.assert_close(sweep_off.coef(kind), sweep_ref.coef(kind), rtol=RTOL,
                                   atol=1e-8)
    last = acts_ref.shape[2] - 2  # the last block's resid_post
    p_ref = SupervisedProbe().fit(acts_ref[:, :, last], labels)
    p_off = SupervisedProbe().fit(acts_off[:, :, last], labels)
    torch.testing.assert_close(torch.from_numpy(p_off.coef_), torch.from_numpy(p_ref.coef_),
                               rtol=RTOL, atol=1e-8)


# ---- 2. several processes, one store ---------------------------------------------------------

N_PAIRS, SHARD_SIZE = 12, 3  # 4 store shards: 0, 2 for --shard 0/2 and 1, 3 for --shard 1/2


def _harvest_cmd(model_dir: Path, out: Path, shard: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "analyses.cli", "harvest", "--model", str(model_dir),
           "--dataset", "story_sentiment", "--max-pairs", str(N_PAIRS), "--out", str(out),
           "--shard-size", str(SHARD_SIZE)]
    return cmd + (["--shard", shard] if shard else [])


def test_two_process_sharded_harvest_equals_single(tiny_model_dir, tmp_path):
    out = tmp_path / "sharded"
    env = child_env(TQDM_DISABLE="1")
    procs = [subprocess.Popen(_harvest_cmd(tiny_model_dir, out, f"{i}/2"), env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    results = [p.communicate(timeout=600) for p in procs]
    for p, (stdout, stderr) in zip(procs, results):
        assert p.returncode == 0, stderr[-3000:]

    sharded = ActivationStore.open(out)
    assert sharded.complete and sharded.n_shards == 4
    bridge = load_model(str(tiny_model_dir))
    dataset = load_dataset_spec("story_sentiment", max_pairs=N_PAIRS)
    single = harvest_dataset(bridge, dataset, tmp_path / "single", shard_size=SHARD_SIZE,
                             progress=False)
    torch.testing.assert_close(sharded.load(), single.load(), rtol=0, atol=0)
    assert sharded.pairs() == single.pairs()
    both = [ActivationStore.open(s.path, whole=True).meta for s in (sharded, single)]
    assert [{k: getattr(m, k) for k in IDENTITY_FIELDS} for m in both] == [
        {k: getattr(both[1], k) for k in IDENTITY_FIELDS}] * 2
    # Nothing left behind but the lock files: no temporary shard halves.
    assert not list((out / "shards").glob(".*tmp"))


def test_one_shard_alone_leaves_the_others_missing(tiny, tmp_path):
    store = harvest_dataset(tiny, small_comparisons(10), tmp_path / "s", shard_size=3,
                            shard=(1, 2), progress=False)
    assert store.missing_shards() == [0, 2]


@pytest.mark.parametrize("spec", ["2/2", "a/b", "1/0", "1/2/3", "1-2", "0/-2"])
def test_bad_shard_specs_are_refused_clearly(spec, capsys):
    with pytest.raises(ValueError, match="0 <= i < n"):
        parse_shard(spec)
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["harvest", "--dataset", "x", f"--shard={spec}"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "argument --shard: expected i/n with 0 <= i < n" in err and repr(spec) in err


def test_good_shard_specs_parse():
    assert parse_shard("0/2") == (0, 2)
    assert parse_shard(" 3 / 4 ") == (3, 4)
    assert parse_shard(None) == (0, 1)
    assert build_parser().parse_args(["harvest", "--dataset", "x", "--shard", "1/2"]).shard == "1/2"
