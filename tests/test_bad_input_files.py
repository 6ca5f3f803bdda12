"""Files the package writes and reads back (store metadata, pairs and shard sidecars, configs,
step records, result tables) refuse a value of the wrong type by file and field, never with
an AttributeError or KeyError from whoever reads them next."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ppairs_lens.activations.pipeline import harvest_dataset
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.errors import DataError, PPairsError, StoreError
from ppairs_lens.io.outputs import load_config, save_config
from ppairs_lens.io.step_cache import StepCache

from .conftest import small_comparisons


@pytest.fixture(scope="module")
def store_path(tiny, tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "s"
    harvest_dataset(tiny, small_comparisons(4), path, shard_size=2, progress=False)
    return path


@pytest.fixture
def store(store_path, tmp_path):
    import shutil

    return shutil.copytree(store_path, tmp_path / "s")


def _edit_json(path, edit):
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))


@pytest.mark.parametrize("edit, message", [
    (lambda m: [m], "metadata.json must hold a JSON object, got a array"),
    (lambda m: {**m, "d_model": "64"}, "field 'd_model' must be a positive whole number"),
    (lambda m: {**m, "hook_names": "blocks.0.hook_resid_post"},
     "field 'hook_names' must be an array of strings"),
    (lambda m: {**m, "shard_size": 0}, "field 'shard_size' must be a positive whole number"),
])
def test_store_metadata_of_the_wrong_type(store, edit, message):
    _edit_json(store / "metadata.json", edit)
    with pytest.raises(StoreError, match=message):
        ActivationStore.open(store)


def test_a_pairs_line_of_the_wrong_type_is_named(store):
    lines = (store / "pairs.jsonl").read_text().splitlines()
    lines[1] = json.dumps([1, 2])
    (store / "pairs.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(StoreError, match=r"pairs.jsonl line 2 must hold a JSON object"):
        ActivationStore.open(store).pairs()
    row = json.loads(lines[0])
    lines[1] = json.dumps({**row, "label": "1"})
    (store / "pairs.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(StoreError, match=r"line 2: field 'label' must be 0, 1 or 2"):
        ActivationStore.open(store).pairs()


@pytest.mark.parametrize("edit, message", [
    (lambda s: [s], "must hold a JSON object"),
    (lambda s: {**s, "bytes": "10"}, "field 'bytes' must be a whole number"),
    (lambda s: {**s, "sha256": ["x"]}, "field 'sha256' must be a JSON object"),
    (lambda s: {k: v for k, v in s.items() if k != "sha256"}, "field 'sha256' is missing"),
])
def test_a_shard_sidecar_of_the_wrong_type(store, edit, message):
    _edit_json(store / "shards" / "shard-00001.json", edit)
    with pytest.raises(StoreError, match=f"shard-00001.json.*{message}"):
        ActivationStore.open(store).load()


def test_a_step_record_of_the_wrong_type_is_recomputed(tmp_path):
    cache = StepCache(tmp_path)
    key = cache.key("s", x=1)
    for bad in ([1, 2], {"key": key}, "text"):
        (tmp_path / "s.json").write_text(json.dumps(bad))
        assert cache.run("s", key, lambda: {"v": 1}) == ({"v": 1}, False)


@dataclass
class _Cfg:
    a: int


@pytest.mark.parametrize("text, message", [
    ("[1]", "must hold a JSON object, got a array"),
    ('{"config": [1]}', "field 'config' must be a JSON object"),
    ("{}", "field 'config' is missing"),
    ('{"config": {"b": 2}}', "field 'config' does not fit _Cfg"),  # a is required
    ("{bad", "is not valid JSON"),
])
def test_a_saved_config_of_the_wrong_type(tmp_path, text, message):
    assert load_config(_Cfg, save_config(tmp_path, "x", _Cfg(a=3))) == _Cfg(a=3)
    (tmp_path / "x.config.json").write_text(text)
    with pytest.raises(PPairsError, match=message):
        load_config(_Cfg, tmp_path / "x.config.json")


def test_a_result_table_cell_that_is_no_number_is_located(tmp_path):
    from analyses.ablation_plots import read_rows

    (tmp_path / "a.csv").write_text("dataset,effect\nx,0.5\ny,lots\n")
    with pytest.raises(DataError, match=r"a.csv, row 3, field 'effect': expected a number"):
        read_rows(tmp_path / "a.csv")
    with pytest.raises(DataError, match="cannot read"):
        read_rows(tmp_path / "missing.csv")


def test_a_summary_of_the_wrong_type_is_refused(tmp_path):
    from analyses.replication.run import refresh

    (tmp_path / "summary.json").write_text("[]")
    with pytest.raises(PPairsError, match="summary.json must hold a JSON object"):
        refresh(tmp_path)


@pytest.mark.parametrize("written, culprit", [
    ({}, "summary.json cannot be read"),
    ({"summary.json": "{}"}, "lack the field 'sizes'"),
])
def test_refresh_from_the_command_line_refuses_in_one_line(written, culprit, tmp_path):
    for name, text in written.items():
        (tmp_path / name).write_text(text)
    done = subprocess.run([sys.executable, "-m", "analyses.replication", str(tmp_path)],
                          capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("python -m analyses.replication: error: ") and culprit in line
