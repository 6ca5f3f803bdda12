"""Saving and loading probes, sweeps and directions: round trips, refusals, the CLI flag."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.estimators import PROBE_KINDS, make_probe
from ppairs_lens.probes.persistence import (
    ProbeMetadata,
    load_direction,
    load_probe,
    load_sweep,
    read_metadata,
    save_direction,
    save_probe,
    save_sweep,
)
from ppairs_lens.probes.sweep import fit_sweep
from tests.test_probes import planted

HOOK = "blocks.3.hook_resid_post"


@pytest.mark.parametrize("kind", PROBE_KINDS)
def test_probe_round_trip_scores_without_refit(kind, tmp_path):
    acts, labels, _ = planted(n=200, d=16)
    probe = make_probe(kind).fit(acts[:150], labels[:150], layer=3, model_name="m")
    path = save_probe(probe, tmp_path / kind, hook=HOOK, template_hash="t", split="pair",
                      dataset_fingerprint="f", n_train=150)
    loaded = load_probe(path, model="m", hook=HOOK, template_hash="t")
    assert type(loaded) is type(probe) and loaded.get_params() == probe.get_params()
    np.testing.assert_array_equal(loaded.predict_proba(acts[150:]), probe.predict_proba(acts[150:]))
    assert loaded.layer_ == 3 and loaded.metadata_.split == "pair"
    assert loaded.metadata_.hook_names == (HOOK,) and loaded.metadata_.n_train == 150
    if kind != "supervised":
        assert loaded.sign_confidence_ == probe.sign_confidence_


def test_loading_for_another_model_or_hook_names_the_fields(tmp_path):
    acts, labels, _ = planted(n=100, d=8)
    probe = make_probe("mass_mean").fit(acts, labels, layer=1, model_name="m")
    path = save_probe(probe, tmp_path / "p", hook=HOOK, template_hash="t")
    with pytest.raises(ProbeError, match=r"model \(saved 'm', expected 'other'\).*hook"):
        load_probe(path, model="other", hook="blocks.0.hook_resid_post")
    with pytest.raises(ProbeError, match="template_hash"):
        load_probe(path, template_hash="u")
    with pytest.raises(ProbeError, match="not a saved"):
        load_probe(tmp_path)
    with pytest.raises(ProbeError, match="holds a saved probe, not a sweep"):
        load_sweep(path)


def test_metadata_is_typed_json(tmp_path):
    acts, labels, _ = planted(n=100, d=8)
    path = save_probe(make_probe("supervised", C=0.5).fit(acts, labels), tmp_path / "p")
    meta = read_metadata(path)
    assert isinstance(meta, ProbeMetadata) and meta.C == 0.5 and meta.standardize is True
    raw = json.loads((path / "metadata.json").read_text())
    assert raw["object"] == "probe" and raw["package_version"] and raw["d_model"] == 8


def test_sweep_round_trip(tmp_path):
    acts, labels, _ = planted(n=120, d=8)
    x = torch.stack([acts, 2 * acts], dim=2)
    sweep = fit_sweep(x[:90], labels[:90], model_name="m", layers=[4, 5])
    hooks = ["blocks.4.hook_resid_post", "blocks.5.hook_resid_post"]
    path = save_sweep(sweep, tmp_path / "s", hook_names=hooks, split="pair")
    loaded = load_sweep(path, model="m", hook_names=hooks)
    for k in sweep.kinds:
        np.testing.assert_array_equal(loaded.predict_proba(x[90:])[k],
                                      sweep.predict_proba(x[90:])[k])
    assert loaded.layers == (4, 5) and loaded.to_probe("pca", 1).layer_ == 5
    with pytest.raises(ProbeError, match="hook_names"):
        load_sweep(path, hook_names=hooks[::-1])


def test_direction_round_trip(tmp_path):
    r = torch.randn(2, 6)
    path = save_direction(r, tmp_path / "d", hook=HOOK, model="m", kind="pca")
    got, meta = load_direction(path, model="m", hook=HOOK)
    torch.testing.assert_close(got, r)
    assert meta.kinds == ("pca",) and meta.d_model == 6
    with pytest.raises(ProbeError, match="model"):
        load_direction(path, model="x")


def test_sweep_and_transfer_save_probes_from_the_cli(tiny, tmp_path, monkeypatch):
    import analyses.cross_dataset
    import analyses.layer_sweep
    import ppairs_lens.models.loading
    from analyses.cli import main
    from ppairs_lens.activations.store import ActivationStore
    from ppairs_lens.models.loading import model_name

    loads = []
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model",
                        lambda *a, **k: loads.append(a) or tiny)
    monkeypatch.setattr(analyses.layer_sweep, "run_sweep", lambda *a, **k: analyses.layer_sweep.SweepResult(selection="", metric="accuracy", ci="", entries=()))
    monkeypatch.setattr(analyses.cross_dataset, "run_transfer", lambda *a, **k: analyses.cross_dataset.TransferResult(names=(), layer=0, hook="", layers={}, split_by={}, random={}, per_kind={}, rows=(), cosine=(), layer_cosine=()))
    monkeypatch.setattr(analyses.cross_dataset, "print_summary", lambda *a: None)
    common = ["--max-pairs", "24", "--split", "pair",
              "--stores", str(tmp_path / "stores"), "--out", str(tmp_path / "out")]
    # transfer needs two datasets (refused before the model otherwise)
    for command, datasets in (("sweep", ["larger_number"]),
                              ("transfer", ["larger_number", "alphabetical"])):
        saved = tmp_path / command
        loads.clear()
        assert main([command, "--datasets", *datasets, *common, "--save-probes", str(saved)]) \
            == 0
        assert len(loads) == 1  # the probes are saved with the model the command loaded
        folders = sorted(p for p in saved.iterdir() if p.is_dir())
        assert len(folders) == len(datasets)
        folder = next(p for p in folders if p.name.startswith("larger_number"))
        store = ActivationStore.open(next(
            p for p in (tmp_path / "stores").rglob("metadata.json")
            if ActivationStore.open(p.parent).meta.dataset.startswith("larger_number")).parent)
        sweep = load_sweep(folder, model=model_name(tiny), hook_names=store.hook_names,
                           template_hash=store.meta.template_hash)
        assert sweep.n_layers == store.n_readouts and read_metadata(folder).split == "pair"
        probs = sweep.predict_proba(store.load())
        assert set(probs) == set(PROBE_KINDS)
