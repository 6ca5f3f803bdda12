"""``ModelSpec``: one description of a model, taken by the one loader, the CLI, the experiment
configs and the Ray path; a spec and the keyword form load the same model."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from ppairs_lens.errors import ModelLoadError
from ppairs_lens.io.outputs import config_from_data, jsonable
from ppairs_lens.models.loading import load_model, model_name
from ppairs_lens.models.spec import ModelSpec

from .test_scale import save_tiny_model_dir


def test_a_spec_and_the_keyword_form_load_the_same_model(tokenizer, tmp_path):
    folder = str(save_tiny_model_dir(tmp_path / "tiny", tokenizer))
    by_spec = load_model(ModelSpec(folder, dtype=torch.float64))
    by_keywords = load_model(folder, dtype=torch.float64)
    assert model_name(by_spec) == model_name(by_keywords) == folder
    assert next(by_spec.parameters()).dtype == torch.float64
    for a, b in zip(by_spec.parameters(), by_keywords.parameters()):
        assert torch.equal(a, b)


def test_a_spec_takes_no_second_answer_from_keywords():
    with pytest.raises(ModelLoadError, match="reads dtype from the spec"):
        load_model(ModelSpec(), dtype=torch.float16)


@pytest.mark.parametrize("bad, match", [({"dtype": "float99"}, "unknown dtype"),
                                        ({"backend": "jax"}, "unknown backend")])
def test_a_bad_spec_says_which_field(bad, match):
    with pytest.raises(ModelLoadError, match=match):
        ModelSpec(**bad)


def test_the_cli_options_make_the_spec():
    args = argparse.Namespace(model="org/m", dtype="bfloat16", device="cuda:1",
                              device_map=None, backend="bridge")
    spec = ModelSpec.from_args(args)
    assert spec == ModelSpec("org/m", dtype=torch.bfloat16, device="cuda:1")
    assert spec.torch_dtype is torch.bfloat16


def test_experiment_configs_hold_a_spec_and_old_saved_configs_still_load():
    from analyses.replication.run import ReplicationConfig

    for cls in (ReplicationConfig,):
        cfg = cls(model=ModelSpec("org/m", dtype="bfloat16", device="cuda"))
        data = json.loads(json.dumps(jsonable(cfg)))          # as *.config.json holds it
        assert config_from_data(cls, data).model == cfg.model
        assert config_from_data(cls, {**data, "model": "org/m"}).model == ModelSpec("org/m")
        assert config_from_data(cls, {**data, "model": None}).model == ModelSpec()
        assert cls().model == ModelSpec()


def test_the_ray_path_uses_the_one_spec():
    from ppairs_lens.activations import distributed

    assert distributed.ModelSpec is ModelSpec


def test_a_ray_worker_loads_its_spec_through_the_one_loader(tokenizer, tmp_path, monkeypatch):
    """``harvest_shard_spec`` is what each Ray task runs; here run by hand (no Ray needed)."""
    from ppairs_lens.activations import distributed
    from ppairs_lens.activations.runner import HarvestSettings
    from ppairs_lens.data.specs import load_dataset_spec
    from ppairs_lens.models import loading

    folder = str(save_tiny_model_dir(tmp_path / "tiny", tokenizer))
    seen = []
    real = loading.load_model
    monkeypatch.setattr(loading, "load_model", lambda spec, **kw: seen.append(spec) or
                        real(spec, **kw))
    spec = ModelSpec(folder)
    report = distributed.harvest_shard_spec(
        spec, load_dataset_spec("story_sentiment", max_pairs=6), str(tmp_path / "store"),
        (0, 1), template=None, shard_size=3, settings=HarvestSettings())
    assert seen == [spec] and report.shards_written == (0, 1)
