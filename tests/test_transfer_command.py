"""``ppairs-lens transfer``: beside every transferred probe, the no-model baselines fitted on
its source and the sweep's judge forms, scored on the same held-out pairs of its target, in
``transfer.csv``, ``transfer_summary.json`` and one console table per cell."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

import ppairs_lens.models.loading
from analyses.cli import main
from analyses.cross_dataset import TransferConfig, run_transfer, transfer_table_lines
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.transfer_fit import CROSS_IDS, NO_TEXTS
from tests.test_cross_dataset import D, planted_acts, write_store

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ARGS = ["--datasets", "larger_number@Numbers", "alphabetical@Alphabet", "--max-pairs", "60",
        "--kinds", "supervised", "pca", "--n-boot", "50",
        "--judges", "zero_shot", "few_shot", "--judge-max-pairs", "few_shot=8"]


@pytest.fixture(scope="module")
def transferred(tiny, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("transfer")
    mp = pytest.MonkeyPatch()
    mp.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    argv = ["transfer", *ARGS, "--stores", str(tmp / "stores"), "--out", str(tmp / "out")]
    try:
        code = main(argv)
    finally:
        mp.undo()
    assert code == 0
    with open(tmp / "out" / "transfer.csv") as f:
        rows = list(csv.DictReader(f))
    return rows, tmp, argv


def test_every_cell_has_the_baselines_and_judges_on_the_probes_pairs(transferred):
    rows, _, _ = transferred
    acc = [r for r in rows if r["metric"] == "accuracy"]
    cells = {(r["train"], r["test"]) for r in acc}
    assert cells == {(a, b) for a in ("Numbers", "Alphabet") for b in ("Numbers", "Alphabet")}
    for train, test in cells:
        here = {r["kind"]: r for r in acc if (r["train"], r["test"]) == (train, test)
                and r["center"] in ("target", "")}
        assert {"supervised", "pca", "length", "lexical", "embedding", "zero_shot",
                "few_shot"} <= set(here), (train, test)
        n = here["supervised"]["n_test"]
        # the baselines on every held-out pair of the target, the judges on those they ran
        assert {here[k]["n_test"] for k in ("length", "lexical", "embedding",
                                            "zero_shot")} == {n}
        assert 0 < int(here["few_shot"]["n_test"]) <= 8
        assert here["length"]["role"] == "baseline" and here["zero_shot"]["role"] == "judge"
        # baselines fitted on the source: the same training pairs as its probes
        assert here["lexical"]["n_train"] == here["supervised"]["n_train"]
    # a baseline fitted on another dataset is not the in-distribution one (length: its sign)
    lex = {(r["train"], r["test"]): float(r["value"]) for r in acc if r["kind"] == "length"}
    assert lex[("Numbers", "Alphabet")] != lex[("Alphabet", "Alphabet")]
    # the judge does not depend on the source: the same on every cell of a target
    zs = {(r["train"], r["test"]): r["value"] for r in acc if r["kind"] == "zero_shot"}
    assert zs[("Numbers", "Alphabet")] == zs[("Alphabet", "Alphabet")]


def test_the_summary_pairs_each_probe_with_every_comparator(transferred):
    _, tmp, _ = transferred
    summary = json.loads((tmp / "out" / "transfer_summary.json").read_text())
    entries = {(e["dataset"], e["kind"]): e for e in summary["comparisons"]}
    e = entries[("Numbers -> Alphabet", "supervised")]
    assert {"length", "lexical", "embedding", "zero_shot", "few_shot",
            "probe:pca"} <= set(e["minus"])
    assert e["minus"]["few_shot"]["n"] <= 8 < e["minus"]["zero_shot"]["n"] == e["n_test"]
    assert e["unavailable"]["memorisation"] == CROSS_IDS   # row ids of two files: n/a


def test_the_console_ends_with_a_table_per_cell_and_judges_are_reused(transferred, tiny,
                                                                      capsys, monkeypatch):
    _, tmp, argv = transferred
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    before = {f: f.stat().st_mtime_ns for f in (tmp / "stores").rglob("judges/*.json")}
    assert len(before) == 4                                    # 2 stores x 2 forms
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert all(f.stat().st_mtime_ns == t for f, t in before.items())   # none redone
    assert "Numbers -> Alphabet · split by" in out
    for line in ("baseline length", "baseline lexical", "baseline embedding",
                 "judge zero_shot", "judge few_shot", "probe supervised"):
        assert line in out, line
    assert "plan:" in out


def test_from_stores_alone_the_text_baselines_say_why_they_are_missing(tmp_path):
    r = np.random.default_rng(1).normal(size=D)
    stores = [write_store(tmp_path / n, n, *planted_acts(r / np.linalg.norm(r), seed=i,
                                                         n=120))
              for i, n in enumerate(["a", "b"])]
    cfg = TransferConfig(stores=[], kinds=("supervised",), settings=EvalSettings(n_boot=30),
                         n_random=200)
    res = run_transfer(stores, tmp_path / "out", cfg)
    entry = next(e for e in res.comparisons.entries if e["dataset"] == "a -> b")
    assert entry["unavailable"]["lexical"] == NO_TEXTS
    lines = transfer_table_lines(res, cfg)
    assert any("baseline lexical" in x and NO_TEXTS in x for x in lines), lines


def _system_store(path, name, seed):
    """A store whose item ids are producing systems (S0..S3 in every context, as SummEval's):
    system S0 always wins, so memorising systems works across datasets too."""
    import torch

    from ppairs_lens.activations.pair_info import PairInfo
    from ppairs_lens.activations.store import ActivationStore
    from ppairs_lens.activations.store_meta import StoreMeta
    from tests.test_cross_dataset import HOOKS

    rng = np.random.default_rng(seed)
    pairs = []
    for c in range(60):
        for i, j in ((0, 1), (0, 2), (1, 2), (0, 3)):
            a, b = (i, j) if rng.random() < 0.5 else (j, i)
            pairs.append(PairInfo.from_json({
                "pair_id": f"{name}:{c}:{a}{b}", "label": 1 if a < b else 2,
                "context_id": f"{name}:c{c}", "item1_id": f"S{a}", "item2_id": f"S{b}"}))
    meta = StoreMeta.from_json({"model": "toy-model", "dataset": name,
                                "dataset_fingerprint": f"fp-{name}", "template_hash": "t0",
                                "hook_names": HOOKS, "d_model": D, "dtype": "float32",
                                "shard_size": 256})
    store = ActivationStore.create(path, meta, pairs)
    acts = torch.from_numpy(rng.normal(size=(len(pairs), 2, len(HOOKS), D)).astype(np.float32))
    for k in range(store.n_shards):
        lo, hi = store.shard_range(k)
        store.write_shard(k, acts[lo:hi])
    return store


def test_system_ids_are_memorised_across_datasets(tmp_path):
    stores = [_system_store(tmp_path / n, n, i) for i, n in enumerate(["x", "y"])]
    cfg = TransferConfig(stores=[], kinds=("supervised",), settings=EvalSettings(n_boot=30),
                         n_random=200)
    res = run_transfer(stores, tmp_path / "out", cfg)
    rows = {r["dataset"]: r for r in res.comparisons.table_rows
            if r["kind"] == "memorisation" and r["metric"] == "accuracy"}
    assert set(rows) == {"x -> x", "x -> y", "y -> x", "y -> y"}
    assert rows["x -> y"]["value"] > 0.7          # S0 wins in both: the systems carry over
