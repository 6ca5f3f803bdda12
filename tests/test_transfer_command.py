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
from ppairs_lens.evaluation.transfer_comparators import NO_TEXTS
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
        assert {"supervised", "pca", "surface", "lexical", "embedding", "zero_shot",
                "few_shot"} <= set(here), (train, test)
        n = here["supervised"]["n_test"]
        # the baselines on every held-out pair of the target, the judges on those they ran
        assert {here[k]["n_test"] for k in ("surface", "lexical", "embedding",
                                            "zero_shot")} == {n}
        assert 0 < int(here["few_shot"]["n_test"]) <= 8
        assert here["surface"]["role"] == "baseline" and here["zero_shot"]["role"] == "judge"
        # baselines fitted on the source: the same training pairs as its probes
        assert here["lexical"]["n_train"] == here["supervised"]["n_train"]
    # a baseline fitted on another dataset is not the in-distribution one (length: its sign)
    lex = {(r["train"], r["test"]): float(r["value"]) for r in acc if r["kind"] == "surface"}
    assert lex[("Numbers", "Alphabet")] != lex[("Alphabet", "Alphabet")]
    # the judge does not depend on the source: the same on every cell of a target
    zs = {(r["train"], r["test"]): r["value"] for r in acc if r["kind"] == "zero_shot"}
    assert zs[("Numbers", "Alphabet")] == zs[("Alphabet", "Alphabet")]


def test_the_summary_pairs_each_probe_with_every_comparator(transferred):
    _, tmp, _ = transferred
    summary = json.loads((tmp / "out" / "transfer_summary.json").read_text())
    entries = {(e["dataset"], e["kind"]): e for e in summary["comparisons"]}
    e = entries[("Numbers -> Alphabet", "supervised")]
    assert {"surface", "lexical", "embedding", "zero_shot", "few_shot",
            "probe:pca"} <= set(e["minus"])
    assert e["minus"]["few_shot"]["n"] <= 8 < e["minus"]["zero_shot"]["n"] == e["n_test"]
    assert "memorisation" in e["unavailable"]      # no item recurs: n/a with its reason


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
    for line in ("baseline surface", "baseline lexical", "baseline embedding",
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
    entry = next(e for e in res["comparisons"].entries if e["dataset"] == "a -> b")
    assert entry["unavailable"]["lexical"] == NO_TEXTS
    lines = transfer_table_lines(res, cfg)
    assert any("baseline lexical" in x and NO_TEXTS in x for x in lines), lines
