"""``ppairs-lens shift``: probes trained on any files, tested on any others, with the
zero-shot judge and every no-model baseline beside, a table, a CSV and a figure."""

from __future__ import annotations

import contextlib
import csv
import io
import itertools

import numpy as np
import pytest

import ppairs_lens.models.loading
from analyses.cli import main
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.shift import ScoredSet, shift_rows
from tests.test_figure_layout import overlap, text_boxes

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def shifted(tiny, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shift")
    mp = pytest.MonkeyPatch()
    mp.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            code = main(["shift", "--train", "larger_number@Numbers",
                         "--test", "story_sentiment@Stories", "alphabetical@Alphabet order",
                         "--max-pairs", "60", "--n-boot", "50", "--stores",
                         str(tmp / "stores"), "--out", str(tmp / "out")])
    finally:
        mp.undo()
    assert code == 0
    (tmp / "printed.txt").write_text(printed.getvalue())
    with open(tmp / "out" / "shift.csv") as f:
        return list(csv.DictReader(f)), tmp


def test_every_set_is_scored_by_probes_baselines_and_the_judge(shifted):
    rows, _ = shifted
    scores = [r for r in rows if r["role"] != "drop"]
    by_set = {}
    for r in scores:
        by_set.setdefault((r["dataset"], r["role"]), {})[r["method"]] = r
    assert set(by_set) == {("Numbers", "in distribution"), ("Stories", "shifted"),
                           ("Alphabet order", "shifted")}
    for methods in by_set.values():
        assert {"supervised", "pca", "mass_mean", "length", "lexical", "embedding",
                "zero_shot"} <= set(methods)
        assert len({m["n"] for m in methods.values()}) == 1     # all on the same pairs
    # a shifted file is scored whole (60 pairs, no tie), not a held-out fraction of it
    assert by_set[("Stories", "shifted")]["supervised"]["n"] == "60"
    assert int(by_set[("Numbers", "in distribution")]["supervised"]["n"]) < 60
    drops = [r for r in rows if r["role"] == "drop"]
    assert {r["shifted"] for r in drops} == {"Stories", "Alphabet order"}
    gaps = [r for r in drops if r["method"] == "zero_shot drop - supervised drop"]
    assert len(gaps) == 2 and all(r["verdict"] for r in gaps)


def test_the_figure_is_written_with_its_caption_beside_it(shifted):
    _, tmp = shifted
    out = tmp / "out"
    for suffix in ("png", "svg", "md", "config.json"):
        assert (out / f"shift.{suffix}").is_file(), suffix
    assert "Numbers" in (out / "shift.svg").read_text()
    assert "bootstrap" in (out / "shift.md").read_text()


def test_the_shift_figure_has_no_overlapping_text(shifted):
    from analyses.distribution_shift import ShiftFilesConfig, ShiftFilesRow
    from analyses.distribution_shift_plots import plot_shift

    rows, _ = shifted
    scores = [ShiftFilesRow(dataset=r["dataset"], role=r["role"], method=r["method"],
                            accuracy=float(r["accuracy"]), lo=float(r["lo"]),
                            hi=float(r["hi"]), ci_counts=r["ci_counts"] == "True",
                            n=int(r["n"]), read_out=r["read_out"])
              for r in rows if r["role"] != "drop"]
    fig = plot_shift(scores, "tiny", ShiftFilesConfig(["Numbers"], ["Stories"]), {})
    boxes = text_boxes(fig)
    assert not [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
                if overlap(ba, bb)]
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    assert not overlap(legend.get_window_extent(renderer), fig.axes[0].get_window_extent(renderer))


def test_mixed_kinds_and_missing_files_fail_in_one_line(tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    assert main(["shift", "--train", "larger_number", "--test", "nope.json",
                 "--stores", str(tmp_path / "s"), "--out", str(tmp_path / "o")]) == 2
    assert "nope.json" in capsys.readouterr().err
    statements = tmp_path / "facts.csv"
    statements.write_text("statement,label,city\n" + "".join(
        f"City {i} is in country {i}.,{i % 2},c{i}\n" for i in range(12)))
    assert main(["shift", "--train", "larger_number", "--test", str(statements),
                 "--max-pairs", "30", "--stores", str(tmp_path / "s"),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "mix comparisons and statements" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()          # refused before any harvest


def test_the_sweeps_judge_forms_run_limited_and_remembered(tiny, tmp_path, monkeypatch,
                                                           capsys):
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    argv = ["shift", "--train", "larger_number@Numbers", "--test", "story_sentiment@Stories",
            "--max-pairs", "40", "--n-boot", "30", "--kinds", "supervised",
            "--judges", "zero_shot", "few_shot", "--judge-max-pairs", "few_shot=8",
            "--stores", str(tmp_path / "stores"), "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    with open(tmp_path / "out" / "shift.csv") as f:
        rows = list(csv.DictReader(f))
    scores = {(r["dataset"], r["method"]): r for r in rows if r["role"] != "drop"}
    for name in ("Numbers", "Stories"):
        assert int(scores[name, "zero_shot"]["n"]) == int(scores[name, "supervised"]["n"])
        assert 0 < int(scores[name, "few_shot"]["n"]) <= 8
    gaps = {r["method"]: r for r in rows if r["role"] == "drop"}
    assert {"zero_shot drop - supervised drop", "few_shot drop - supervised drop",
            "few_shot"} <= set(gaps)
    assert "few_shot" in capsys.readouterr().out
    cached = {f.name for f in (tmp_path / "stores").rglob("judges/*.json")}
    assert cached == {"zero_shot.json", "few_shot.json", "zero_shot_every_pair.json",
                      "few_shot_every_pair.json"}
    stamps = {f: f.stat().st_mtime_ns for f in (tmp_path / "stores").rglob("judges/*.json")}
    assert main(argv) == 0                                     # rerun: no judge redone
    assert {f: f.stat().st_mtime_ns for f in stamps} == stamps


def _llmbar_file(path, offset):
    """An LLMBar-format file: its pairs are named by row (row1, row2...), as a user's are."""
    import json
    import random

    rng = random.Random(offset)
    rows = []
    for i in range(40):
        a, b = rng.sample(range(offset, offset + 500), 2)
        good, bad = str(max(a, b)), str(min(a, b))
        first = rng.random() < 0.5
        rows.append({"input": f"Name the larger number: {a} or {b}?",
                     "output_1": good if first else bad, "output_2": bad if first else good,
                     "label": 1 if first else 2})
    path.write_text(json.dumps(rows))
    return str(path)


def test_files_whose_pair_ids_coincide_keep_their_own_judge_answers(tiny, tmp_path,
                                                                    monkeypatch):
    import json

    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    train = _llmbar_file(tmp_path / "a.json", 0)
    test = _llmbar_file(tmp_path / "b.json", 1000)
    assert main(["shift", "--train", f"{train}@A", "--test", f"{test}@B", "--n-boot", "30",
                 "--kinds", "supervised", "--stores", str(tmp_path / "stores"),
                 "--out", str(tmp_path / "out")]) == 0
    with open(tmp_path / "out" / "shift.csv") as f:
        rows = {(r["dataset"], r["method"]): r for r in csv.DictReader(f) if r["role"] != "drop"}
    (held_out,) = [json.loads(p.read_text())["result"] for p in
                   (tmp_path / "stores").rglob("judges/zero_shot.json")]
    # the training file's held-out pairs scored with its own answers, not the shifted file's
    assert float(rows["A", "zero_shot"]["accuracy"]) == pytest.approx(
        held_out["metrics"]["accuracy"]["value"])
    assert int(rows["A", "zero_shot"]["n"]) == len(held_out["p_by_pair"])
    assert ("B", "memorisation") not in rows        # row ids of two files name other items


def test_a_drop_counts_only_when_both_sides_have_twenty_groups():
    """A drop compares two sets: its bootstrap is as good as the smaller side's groups, so
    40 + 6 groups give an interval that does not count (the registry's test needs 20)."""
    rng = np.random.default_rng(0)

    def scored(name, role, n):
        t = (rng.uniform(size=n) > 0.5).astype(float)
        return ScoredSet(name, role, t, tuple(f"{name}/{i}" for i in range(n)),
                         {"zero_shot": rng.uniform(size=n), "pca": rng.uniform(size=n)})

    for n_shifted, counts in ((6, False), (25, True)):
        _, drops = shift_rows([scored("src", "in distribution", 40),
                               scored("dst", "shifted", n_shifted)],
                              EvalSettings(n_boot=50), kinds=["pca"])
        assert drops and all(d["n_groups"] == n_shifted for d in drops)
        assert all(d["ci_counts"] is counts for d in drops)


def test_shift_prints_its_plan_estimate_and_progress(shifted):
    """Like sweep: the plan (each harvest and judge, its prompts and tokens), the estimated
    model time with what measuring the rates cost, progress after each harvest, and at the end
    each step's time beside its estimate."""
    _, tmp = shifted
    out = (tmp / "printed.txt").read_text()
    assert "\nplan:" in out or out.startswith("plan:")   # after any "cannot be decided"
    for name in ("Numbers", "Stories", "Alphabet order"):
        assert f"{name}" in out.split("estimated model time")[0]
    assert "estimated model time" in out
    assert "measured on" in out or "as an earlier run on this model measured" in out
    assert out.count("model time left") >= 1
    assert "model steps, measured vs estimated:" in out
    assert "judges estimated" in out


def test_a_second_shift_run_plans_no_model_work(shifted, tiny, capsys, monkeypatch):
    """Everything the first run did is on disk: the plan says so for every step, the shifted
    sets' judges included (remembered as <form>_every_pair)."""
    _, tmp = shifted
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    assert main(["shift", "--train", "larger_number@Numbers",
                 "--test", "story_sentiment@Stories", "alphabetical@Alphabet order",
                 "--max-pairs", "60", "--n-boot", "50", "--stores", str(tmp / "stores"),
                 "--out", str(tmp / "again")]) == 0
    plan = capsys.readouterr().out.split("estimated model time")[0].split("plan:")[1]
    steps = [line for line in plan.splitlines() if line.strip()]
    assert steps and all("on disk, reused" in line for line in steps), steps
