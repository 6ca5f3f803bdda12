"""The TransformerLens 3.9 / 4.x differences in :mod:`ppairs_lens.models.compat`.

Runs in both CI environments (`make test` and `make test-tl3`): the checks that need one
release name it and are skipped in the other.
"""

from __future__ import annotations

import pytest
import torch

from ppairs_lens.errors import ModelLoadError
from ppairs_lens.models import compat
from ppairs_lens.models.loading import load_model

from .test_scale import LAYER_ON_DISK, save_tiny_model_dir

TL_MAJOR = int(compat.transformer_lens_version().split(".")[0])
ONE_DEVICE = {"": "cpu"}


@pytest.fixture(scope="module")
def tiny_model_dir(tokenizer, tmp_path_factory):
    return save_tiny_model_dir(tmp_path_factory.mktemp("models") / "tiny-llama", tokenizer)


def test_disk_offload_support_follows_the_major_version():
    assert compat.bridge_supports_disk_offload() == (TL_MAJOR >= 4)


def test_boot_kwargs_unchanged_where_offload_is_supported(monkeypatch):
    monkeypatch.setattr(compat, "bridge_supports_disk_offload", lambda: True)
    kwargs = {"dtype": torch.float32, "device_map": LAYER_ON_DISK, "offload_folder": "/x"}
    assert compat.bridge_boot_kwargs(kwargs) is kwargs


@pytest.mark.parametrize("device_map, folder", [
    pytest.param(LAYER_ON_DISK, None, id="disk-target"),
    pytest.param({"": "meta"}, None, id="meta-target"),
    pytest.param(ONE_DEVICE, "/tmp/offload", id="offload-folder"),
])
def test_disk_offload_refused_where_unsupported(monkeypatch, device_map, folder):
    monkeypatch.setattr(compat, "bridge_supports_disk_offload", lambda: False)
    with pytest.raises(ModelLoadError, match=r"transformer-lens>=4"):
        compat.bridge_boot_kwargs({"device_map": device_map, "offload_folder": folder})


def test_unset_offload_folder_dropped_where_unsupported(monkeypatch):
    monkeypatch.setattr(compat, "bridge_supports_disk_offload", lambda: False)
    out = compat.bridge_boot_kwargs({"device_map": ONE_DEVICE, "offload_folder": None})
    assert out == {"device_map": ONE_DEVICE}


@pytest.mark.skipif(TL_MAJOR >= 4, reason="transformer-lens>=4 offloads to disk (test_scale)")
def test_disk_offload_is_a_clear_error_on_tl3(tiny_model_dir, tmp_path):
    with pytest.raises(ModelLoadError, match=r"offloading weights to disk needs"):
        load_model(str(tiny_model_dir), device_map=LAYER_ON_DISK,
                   offload_folder=str(tmp_path / "offload"))


def test_device_map_on_one_device_matches_in_memory(tiny_model_dir):
    """A device map (accelerate's loader) without offload works on every supported release."""
    ref = load_model(str(tiny_model_dir), device="cpu")
    mapped = load_model(str(tiny_model_dir), device_map=ONE_DEVICE)
    ids = ref.tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.inference_mode():
        torch.testing.assert_close(mapped(ids), ref(ids), rtol=1e-5, atol=1e-5)
