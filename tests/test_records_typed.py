"""The typed records between stages (``PairInfo``, ``StoreMeta``) keep a store's files as they
were: the same JSON keys in the same order, so fingerprints hold; a store's lines of another
format are refused."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

import ppairs_lens as pl
from ppairs_lens.activations.pair_info import PairInfo, pair_info
from ppairs_lens.activations.pipeline import harvest_dataset
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.activations.store_meta import IDENTITY_FIELDS, StoreMeta
from ppairs_lens.data.records import Comparison, Dataset, Statement
from ppairs_lens.errors import StoreError
from ppairs_lens.evaluation.store_split import split_store

from .conftest import small_comparisons

#: A comparison's line and a statement's, as the harvest has written them since leak groups.
COMPARISON_ROW = {"pair_id": "p0", "label": 1, "context_id": "c0", "group_id": "g0",
                  "item1_id": "a", "item2_id": "b", "score1": 3.0, "score2": None,
                  "len1": 12, "len2": 7}
STATEMENT_ROW = {"pair_id": "s0", "label": 2, "context_id": "s0", "group_id": "Paris",
                 "len1": 20, "len2": None}
#: Lines without a leak group or the items' lengths (no released version wrote them).
OLD_ROWS = [{"pair_id": "p0", "label": 1, "context_id": "c0", "item1_id": "a", "item2_id": "b",
             "score1": None, "score2": None},
            {"pair_id": "s1", "label": 2, "context_id": "s1"}]
#: A metadata.json as a harvest writes it, with a key this version does not know.
META = {"model": "toy", "dataset": "small", "dataset_fingerprint": "fp", "dataset_source": None,
        "aspect": "larger", "kind": "comparison",
        "template": {"kind": "comparison", "choices": ["1", "2"]}, "template_hash": "th",
        "hook_names": ["blocks.0.hook_resid_post", "ln_final.hook_normalized"], "n_layers": 1,
        "d_model": 4, "readout_widths": [4, 4], "dtype": "float32", "shard_size": 2,
        "harvest_settings": {"token_budget": "512"}, "model_dtype": "float32", "n_pairs": 3,
        "package_version": "0.0.1", "created": "2025-01-01T00:00:00+0000", "from_the_future": {"x": 1}}


@pytest.mark.parametrize("row", [COMPARISON_ROW, STATEMENT_ROW])
def test_pair_info_round_trips_its_json_line_exactly(row):
    p = PairInfo.from_json(row)
    assert json.dumps(p.to_json()) == json.dumps(row)        # same keys, same order
    assert PairInfo.from_json(json.loads(json.dumps(p.to_json()))) == p


def test_pair_info_fields_and_leak_group():
    c, s = PairInfo.from_json(COMPARISON_ROW), PairInfo.from_json(STATEMENT_ROW)
    assert (c.kind, c.item1_id, c.score1, c.len2, c.group) == ("comparison", "a", 3.0, 7, "g0")
    assert (s.kind, s.item1_id, s.score1, s.len1, s.len2) == ("statement", None, None, 20, None)
    with pytest.raises(AttributeError):
        c.label = 2                                          # frozen: records are not edited


def test_pair_info_of_a_dataset_keeps_statements_without_items():
    ds = Dataset("st", "statement", [Statement("s0", "Paris is in France.", True,
                                               group_id="Paris")])
    (row,) = pair_info(ds)
    assert row.to_json() == {"pair_id": "s0", "label": 1, "context_id": "s0",
                             "group_id": "Paris", "len1": 19, "len2": None}
    cmp = Dataset("c", "comparison", [Comparison("p0", "12", "7", 1)])
    assert pair_info(cmp)[0].to_json() == {
        "pair_id": "p0", "label": 1, "context_id": "p0", "group_id": "p0", "item1_id": None,
        "item2_id": None, "score1": None, "score2": None, "len1": 2, "len2": 1}


def test_store_meta_round_trips_metadata_json_exactly():
    m = StoreMeta.from_json(META)
    assert json.dumps(m.to_json(), indent=2) == json.dumps(META, indent=2)
    assert m.hook_names == tuple(META["hook_names"]) and m.readout_widths == (4, 4)
    assert m.dataset == "small" and m.n_pairs == 3 and m.extra == {"from_the_future": {"x": 1}}
    # a meta built in a test, without the optional keys: they stay absent when written
    small = {k: META[k] for k in IDENTITY_FIELDS if k != "n_pairs"} | {"dataset": "d"}
    written = replace(StoreMeta.from_json(small), n_pairs=5).to_json()
    assert list(written) == [*small, "n_pairs"] and written["n_pairs"] == 5
    # built in code: every field, in the order a harvest writes them
    built = StoreMeta(**{k: v for k, v in StoreMeta.from_json(META).__dict__.items()
                         if k not in ("extra", "keys")})
    assert list(built.to_json()) == [k for k in META if k != "from_the_future"]
    assert built == replace(m, extra={})


def _write_old_store(path, rows, meta):
    """A store of ``rows`` and ``meta`` as written: metadata.json, pairs.jsonl, one shard."""
    path.mkdir()
    (path / "metadata.json").write_text(json.dumps(meta, indent=2))
    (path / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = ActivationStore.open(path)
    store.write_shard(0, torch.arange(len(rows) * 2 * 2 * 4, dtype=torch.float32)
                      .reshape(len(rows), 2, 2, 4))
    return store


def test_a_store_of_lines_without_groups_or_lengths_is_refused_naming_its_version(tmp_path):
    meta = {**{k: v for k, v in META.items() if k != "from_the_future"}, "n_pairs": 2}
    for n, row in enumerate(OLD_ROWS):
        rows = [COMPARISON_ROW, {**row, "pair_id": "p1"}]
        store = _write_old_store(tmp_path / f"old{n}", rows, meta)
        assert store.meta.dataset == "small" and store.complete     # the metadata still reads
        lacks = "group_id, len1, len2"
        with pytest.raises(StoreError, match=rf"pairs.jsonl line 2 lacks {lacks}: a store of a "
                           r"format this version does not read \(ppairs-lens 0.0.1\); delete "
                           rf".*old{n} and harvest again") as e:
            ActivationStore.open(store.path).pairs()
        assert "\n" not in str(e.value)
        with pytest.raises(StoreError, match="lacks group_id"):
            split_store(store, test_size=0.5, seed=0, split_by="pair")


def test_a_store_reopens_for_its_own_harvest_and_refuses_another(tmp_path):
    rows = [COMPARISON_ROW, {**COMPARISON_ROW, "pair_id": "p1", "label": 2}]
    meta = {k: v for k, v in META.items() if k not in ("from_the_future", "n_pairs")}
    store = _write_old_store(tmp_path / "s", rows, {**meta, "n_pairs": 2})
    before = store.fingerprint()
    assert [p.group for p in ActivationStore.open(store.path).pairs()] == ["g0", "g0"]
    # a harvest resuming into it with the same identity reopens it and rewrites nothing
    same = ActivationStore.create(store.path, StoreMeta.from_json(meta),
                                  [PairInfo.from_json(r) for r in rows])
    assert same.meta == store.meta and same.fingerprint() == before
    with pytest.raises(StoreError, match=r"differing fields: d_model: store has 4, this "
                                         r"harvest has 8; n_pairs: store has 2, this harvest "
                                         r"has 1"):
        ActivationStore.create(store.path, replace(StoreMeta.from_json(meta), d_model=8),
                               [PairInfo.from_json(rows[0])])
    # the same weights loaded in another dtype compute other activations: not one store
    with pytest.raises(StoreError, match=r"differing fields: model_dtype: store has "
                                         r"'float32', this harvest has 'bfloat16'"):
        ActivationStore.create(store.path, replace(StoreMeta.from_json(meta),
                                                   model_dtype="bfloat16"),
                               [PairInfo.from_json(r) for r in rows])


def _dict_era_files(dataset: Dataset, store: ActivationStore) -> tuple[str, str]:
    """pairs.jsonl and metadata.json as the dict-based code wrote them for ``dataset`` (plus
    ``model_dtype``, a key added since, in its place)."""
    rows = []
    for rec, label, ctx, group in zip(dataset.records, dataset.labels(), dataset.context_ids(),
                                      dataset.group_ids()):
        row = {"pair_id": rec.pair_id, "label": label, "context_id": ctx, "group_id": group}
        row.update(item1_id=rec.item1_id, item2_id=rec.item2_id, score1=rec.score1,
                   score2=rec.score2, len1=len(rec.item1), len2=len(rec.item2))
        rows.append(row)
    raw = json.loads((store.path / "metadata.json").read_text())
    order = ["model", "dataset", "dataset_fingerprint", "dataset_source", "aspect", "kind",
             "template", "template_hash", "hook_names", "n_layers", "d_model", "readout_widths",
             "dtype", "shard_size", "harvest_settings", "model_dtype", "n_pairs", "package_version",
             "created"]
    meta = {k: raw[k] for k in order}
    return "".join(json.dumps(r) + "\n" for r in rows), json.dumps(meta, indent=2)


def test_a_harvested_store_writes_what_the_dict_code_wrote(tiny, tmp_path):
    """The tiny model's store: its two JSON files are byte for byte what the dict-based
    writer produced (so the fingerprint, a digest of those bytes and the shard sidecars, is
    unchanged), and reopening it leaves the fingerprint as it was."""
    ds = small_comparisons(6)
    store = harvest_dataset(tiny, ds, tmp_path / "s", shard_size=4, progress=False)
    pairs_text, meta_text = _dict_era_files(ds, store)
    assert (store.path / "pairs.jsonl").read_text() == pairs_text
    assert (store.path / "metadata.json").read_text() == meta_text
    fp = store.fingerprint()
    again = harvest_dataset(tiny, ds, tmp_path / "s", shard_size=4, progress=False)
    assert again.fingerprint() == fp and again.meta == store.meta
    assert isinstance(again.meta, pl.StoreMeta) and isinstance(again.pairs()[0], pl.PairInfo)
