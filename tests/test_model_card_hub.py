"""Probes that travel: the model card a save writes, the Hub upload's commit, loading by repo id
from an offline Hub cache. No Hub is reachable here: the upload is checked up to the network
(``HfApi`` methods replaced by a recorder), the download from a cache laid out as
``huggingface_hub`` lays it out."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
import yaml

import ppairs_lens
from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.estimators import make_probe
from ppairs_lens.probes.hub import read_model_card
from ppairs_lens.probes.persistence import (
    load_direction,
    load_probe,
    load_sweep,
    read_metadata,
    save_direction,
    save_probe,
    save_sweep,
)
from ppairs_lens.probes.persistence import hub_operations, push_to_hub
from ppairs_lens.probes.sweep import fit_sweep
from tests.test_probes import planted

HOOK = "blocks.3.hook_resid_post"
REPO = "someone/larger-number-probe"
REV = "0123456789abcdef0123456789abcdef01234567"


def _probe(tmp_path, kind="mass_mean"):
    acts, labels, _ = planted(n=160, d=16)
    probe = make_probe(kind).fit(acts[:120], labels[:120], layer=3, model_name="m")
    path = save_probe(probe, tmp_path / "probe", hook=HOOK, template_hash="t", split="group",
                      dataset="larger_number", dataset_fingerprint="fp123", n_train=120)
    return probe, path, acts[120:]


def _front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def test_the_card_metadata_parses_and_matches_the_probe(tmp_path):
    probe, path, held = _probe(tmp_path)
    front = read_model_card(path)
    assert front == _front_matter((path / "README.md").read_text())
    meta = read_metadata(path)
    block = front["ppairs_lens"]
    assert front["base_model"] == meta.model == "m" and front["license"]
    assert front["library_name"] == "ppairs-lens"
    assert block["hook_names"] == [HOOK] and block["kinds"] == ["mass_mean"]
    assert block["datasets"] == [{"name": "larger_number", "fingerprint": "fp123"}]
    assert block["split"] == "group" and block["n_train"] == 120 and block["d_model"] == 16
    assert block["package_version"] == ppairs_lens.__version__ and block["metrics"] == []
    # The card's snippet loads the probe, which then scores as the fitted one does.
    code = (path / "README.md").read_text().split("```python\n")[1].split("```")[0]
    scope: dict = {}
    exec(code, scope)  # noqa: S102 - the card's own snippet, run as a user would
    np.testing.assert_array_equal(scope["probe"].predict_proba(held), probe.predict_proba(held))


def test_sweep_and_direction_cards_name_their_loaders(tmp_path):
    acts, labels, _ = planted(n=80, d=8)
    sweep = fit_sweep(torch.stack([acts, -acts], 2), labels, model_name="m", layers=[1, 2])
    hooks = ["blocks.1.hook_resid_post", "blocks.2.hook_resid_post"]
    s = save_sweep(sweep, tmp_path / "s", hook_names=hooks)
    d = save_direction(torch.randn(8), tmp_path / "d", hook=HOOK, model="m", kind="pca")
    assert read_model_card(s)["ppairs_lens"]["hook_names"] == hooks
    assert read_model_card(s)["ppairs_lens"]["layers"] == [1, 2]
    assert "pl.load_sweep(" in (s / "README.md").read_text()
    assert "direction, meta = pl.load_direction(" in (d / "README.md").read_text()


def test_a_saved_stores_card_holds_held_out_metrics_with_cis(tiny, tmp_path):
    from ppairs_lens.activations.pipeline import harvest_dataset
    from ppairs_lens.data.builtin import builtin_dataset
    from ppairs_lens.evaluation.saved_probes import save_store_probes
    from ppairs_lens.evaluation.store_split import split_store

    store = harvest_dataset(tiny, builtin_dataset("larger_number", n=40), tmp_path / "store",
                            progress=False)
    path = save_store_probes(store, tmp_path / "probes", split_by="pair", n_boot=200)
    block = read_model_card(path)["ppairs_lens"]
    sweep = load_sweep(path, model=store.meta.model, hook_names=store.hook_names)
    assert block["datasets"] == [{"name": store.meta.dataset,
                                  "fingerprint": store.meta.dataset_fingerprint}]
    assert block["template_hash"] == store.meta.template_hash
    assert {m["kind"] for m in block["metrics"]} == set(sweep.kinds)
    sp = split_store(store, test_size=0.3, split_by="pair", seed=0)
    logits = sweep.decision_function(sp.acts_test)
    y = sp.labels_test == 1
    for m in block["metrics"]:
        assert m["hook"] in store.hook_names and m["ci_level"] == 0.95
        assert m["ci_low"] <= m["value"] <= m["ci_high"]
        if m["metric"] == "accuracy":  # the card's number is the loaded sweep's on the test pairs
            j = store.hook_names.index(m["hook"])
            assert m["value"] == pytest.approx(float(((logits[m["kind"]][j] >= 0) == y).mean()))


def _record_hub(monkeypatch):
    from huggingface_hub import HfApi

    calls = {}
    monkeypatch.setattr(HfApi, "create_repo",
                        lambda self, repo_id, **kw: calls.setdefault("repo", (repo_id, kw)))

    def commit(self, repo_id, operations, **kw):
        # What would go over the wire, read now: a pushed object's folder is temporary.
        calls["commit"] = (repo_id, list(operations), kw)
        calls["files"] = {op.path_in_repo: _payload(op) for op in operations}
        return "sent"

    monkeypatch.setattr(HfApi, "create_commit", commit)
    return calls


def _payload(op) -> bytes:
    src = op.path_or_fileobj
    with open(src, "rb") if not isinstance(src, bytes) else memoryview(src) as f:
        return bytes(f.read() if hasattr(f, "read") else f)


def test_push_to_hub_builds_the_commit_it_would_send(tmp_path, monkeypatch):
    _, path, _ = _probe(tmp_path)
    calls = _record_hub(monkeypatch)
    push_to_hub(path, REPO, commit_message="probe")
    repo_id, kw = calls["repo"]
    assert repo_id == REPO and kw["exist_ok"] is True
    repo_id, ops, kw = calls["commit"]
    assert repo_id == REPO and kw["commit_message"] == "probe"
    files = calls["files"]
    assert set(files) == {"README.md", "metadata.json", "tensors.safetensors"}
    assert files["tensors.safetensors"] == (path / "tensors.safetensors").read_bytes()
    card = files["README.md"].decode()
    assert _front_matter(card) == read_model_card(path)  # same metadata, snippet for the repo
    assert f"pl.load_probe('{REPO}'" in card and REPO not in (path / "README.md").read_text()


def test_push_to_hub_saves_an_object_first_and_refuses_offline(tmp_path, monkeypatch):
    calls = _record_hub(monkeypatch)
    push_to_hub(torch.randn(8), REPO, hook=HOOK, model="m", kind="mass_mean", license="mit")
    meta = json.loads(calls["files"]["metadata.json"])
    assert _front_matter(calls["files"]["README.md"].decode())["license"] == "mit"
    card = calls["files"]["README.md"].decode()
    assert "direction, meta = pl.load_direction(" in card and f"'{REPO}'" in card
    assert meta["object"] == "direction" and meta["hook_names"] == [HOOK]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ProbeError, match="HF_HUB_OFFLINE"):
        push_to_hub(torch.randn(8), REPO, hook=HOOK)
    with pytest.raises(ProbeError, match="not a Hub repo id"):
        push_to_hub(torch.randn(8), "no-owner", hook=HOOK)


def _offline_cache(tmp_path, monkeypatch, folder, repo=REPO) -> None:
    """``folder``'s commit laid out as huggingface_hub's cache (snapshot + refs/main), the
    environment pointed at it and offline."""
    cache = tmp_path / "hf-cache"
    root = cache / f"models--{repo.replace('/', '--')}"
    snap = root / "snapshots" / REV
    snap.mkdir(parents=True)
    for op in hub_operations(folder, repo):
        (snap / op.path_in_repo).write_bytes(_payload(op))
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(REV)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_loading_a_repo_id_from_an_offline_cache(tmp_path, monkeypatch):
    probe, path, held = _probe(tmp_path)
    _offline_cache(tmp_path, monkeypatch, path)
    shutil.rmtree(path)  # only the cache has it now
    loaded = load_probe(REPO, model="m", hook=HOOK)
    np.testing.assert_array_equal(loaded.predict_proba(held), probe.predict_proba(held))
    assert load_probe(f"{REPO}@{REV}").metadata_.dataset_fingerprint == "fp123"
    # The refusals still apply, naming the fields.
    with pytest.raises(ProbeError, match=r"model \(saved 'm', expected 'other'\).*hook"):
        load_probe(REPO, model="other", hook="blocks.0.hook_resid_post")
    with pytest.raises(ProbeError, match="holds a saved probe, not a direction"):
        load_direction(REPO)
    with pytest.raises(ProbeError, match="someone/absent.*local Hub cache"):
        load_probe("someone/absent")
    # A mistyped local path is not sent to the Hub: its parent folder exists here.
    (tmp_path / "runs").mkdir()
    with pytest.raises(ProbeError, match="is not a saved probe"):
        load_probe(str(tmp_path / "runs" / "typo"))


def test_a_sweep_round_trips_through_a_folder_and_the_cache_scoring_identically(
        tmp_path, monkeypatch):
    acts, labels, _ = planted(n=150, d=8)
    x = torch.stack([acts, 0.5 * acts + 0.1], dim=2)
    sweep = fit_sweep(x[:100], labels[:100], model_name="m", layers=[0, 1])
    hooks = ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]
    path = save_sweep(sweep, tmp_path / "sweep", hook_names=hooks)
    want = sweep.predict_proba(x[100:])
    _offline_cache(tmp_path, monkeypatch, path, "someone/sweep")
    for source in (path, "someone/sweep"):
        got = load_sweep(source, model="m", hook_names=hooks).predict_proba(x[100:])
        for k in sweep.kinds:
            np.testing.assert_array_equal(got[k], want[k])
