"""Saved probes, sweeps and directions cannot be silently wrong: checksums verified on load,
an atomic tensors file, metadata of the wrong JSON type refused by file and field."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import ppairs_lens.io.atomic
from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.estimators import make_probe
from ppairs_lens.probes.persistence import (
    load_direction,
    load_probe,
    load_sweep,
    save_direction,
    save_probe,
    save_sweep,
)
from ppairs_lens.probes.sweep import fit_sweep
from tests.test_probes import planted


@pytest.fixture
def saved(tmp_path):
    acts, labels, _ = planted(n=100, d=8)
    probe = make_probe("mass_mean").fit(acts, labels, layer=1, model_name="m")
    return save_probe(probe, tmp_path / "p", hook="blocks.1.hook_resid_post"), probe, acts


def _flip_last_byte(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # the last byte belongs to the last tensor's data
    path.write_bytes(bytes(data))


def test_a_flipped_byte_is_refused_naming_the_file_and_tensor(saved):
    path, _, _ = saved
    _flip_last_byte(path / "tensors.safetensors")
    with pytest.raises(ProbeError, match=r"tensors.safetensors is corrupt: the checksum of "
                                         r"tensor '\w+' differs"):
        load_probe(path)


@pytest.mark.parametrize("what", ["sweep", "direction"])
def test_sweeps_and_directions_are_checksummed_too(what, tmp_path):
    acts, labels, _ = planted(n=60, d=6)
    if what == "sweep":
        path = save_sweep(fit_sweep(acts[:, :, None], labels), tmp_path / "s")
        load = load_sweep
    else:
        path = save_direction(torch.randn(6), tmp_path / "d")
        load = load_direction
    assert "sha256" in json.loads((path / "metadata.json").read_text())
    load(path)  # whole: loads
    _flip_last_byte(path / "tensors.safetensors")
    with pytest.raises(ProbeError, match="checksum"):
        load(path)


def test_a_truncated_tensors_file_is_a_probe_error(saved):
    path, _, _ = saved
    t = path / "tensors.safetensors"
    t.write_bytes(t.read_bytes()[: t.stat().st_size // 2])
    with pytest.raises(ProbeError, match=r"tensors.safetensors is truncated or corrupt"):
        load_probe(path)


@pytest.mark.parametrize("edit, message", [
    (lambda raw: [raw], r"metadata.json must hold a JSON object, got a array"),
    (lambda raw: "probe", r"must hold a JSON object, got a string"),
    (lambda raw: {**raw, "kinds": "mass_mean"}, r"field 'kinds' must be an array of strings"),
    (lambda raw: {**raw, "layers": ["1"]}, r"field 'layers' must be an array of whole numbers"),
    (lambda raw: {**raw, "params": [1]}, r"field 'params' must be a JSON object"),
    (lambda raw: {**raw, "d_model": "8"}, r"field 'd_model' must be a positive whole number"),
    (lambda raw: {**raw, "sha256": "x"}, r"field 'sha256' must be a JSON object"),
    (lambda raw: {k: v for k, v in raw.items() if k != "object"}, r"field 'object' is missing"),
    (lambda raw: {**raw, "kinds": []}, r"field 'kinds' of a probe holds one kind"),
])
def test_metadata_of_the_wrong_json_type_is_refused_by_field(saved, edit, message):
    path, _, _ = saved
    m = path / "metadata.json"
    m.write_text(json.dumps(edit(json.loads(m.read_text()))))
    with pytest.raises(ProbeError, match=message) as e:
        load_probe(path)
    assert str(m) in str(e.value) or "metadata.json" in str(e.value)


def test_a_missing_tensor_is_named(saved):
    from safetensors.torch import load_file, save_file

    path, _, _ = saved
    t = load_file(str(path / "tensors.safetensors"))
    del t["coef_"]
    save_file(t, str(path / "tensors.safetensors"))
    m = path / "metadata.json"
    raw = json.loads(m.read_text())
    del raw["sha256"]["coef_"]
    m.write_text(json.dumps(raw))
    with pytest.raises(ProbeError, match=r"lacks tensor\(s\) \['coef_'\]"):
        load_probe(path)


@pytest.mark.parametrize("version", [1, 3])
def test_a_folder_of_another_format_is_refused_naming_its_version(saved, version):
    path, _, _ = saved
    m = path / "metadata.json"
    raw = json.loads(m.read_text())
    m.write_text(json.dumps({**raw, "format_version": version}))
    with pytest.raises(ProbeError, match=rf"metadata.json was saved in format {version}; this "
                                         r"version of ppairs-lens reads format 2 only") as e:
        load_probe(path)
    assert "\n" not in str(e.value)


def test_a_folder_without_checksums_is_refused(saved):
    path, _, _ = saved
    m = path / "metadata.json"
    raw = json.loads(m.read_text())
    m.write_text(json.dumps({k: v for k, v in raw.items() if k != "sha256"}))
    with pytest.raises(ProbeError, match="field 'sha256' is missing"):
        load_probe(path)


def test_an_interrupted_save_leaves_the_old_probe_whole(saved, monkeypatch):
    path, probe, acts = saved
    before = {p.name: p.read_bytes() for p in path.iterdir()}

    def dies(tensors, filename, metadata=None):
        with open(filename, "wb") as f:
            f.write(b"half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr("safetensors.torch.save_file", dies)
    with pytest.raises(KeyboardInterrupt):
        save_probe(make_probe("pca").fit(acts, np.where(acts[:, 0, 0] > 0, 1, 2)), path)
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before  # no temp file left
    load_probe(path)


def test_a_save_folder_that_is_a_file_is_refused_before_writing(saved, tmp_path):
    _, probe, _ = saved
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    for target in (a_file, a_file / "under"):
        with pytest.raises(ProbeError, match=f"{a_file} is an existing file, not a folder"):
            save_probe(probe, target)
    assert a_file.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_save_folder_is_refused(saved, tmp_path):
    _, probe, _ = saved
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ProbeError, match="is not writable"):
            save_probe(probe, locked / "p")
    finally:
        locked.chmod(0o700)


def test_store_shards_and_probes_share_one_checksum():
    """One checksum function (io.checksums), used by the store and the probes alike."""
    import inspect

    import ppairs_lens.activations.store as store
    import ppairs_lens.probes.persistence as persistence

    for mod in (store, persistence):
        src = inspect.getsource(mod)
        assert "tensor_sha256" in src and "hashlib.sha256(t" not in src
    assert ppairs_lens.io.atomic.atomic_save_tensors
