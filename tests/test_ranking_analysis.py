"""analyses/ranking.py and analyses/insertion.py end to end on the tiny model: the ranking
table and the insertion table."""

from __future__ import annotations

import csv
import json
import math

import pytest

from analyses.insertion import INSERTION_METHODS, InsertionConfig, run_insertion
from analyses.ranking import RANKING_METHODS, RankingConfig, run_ranking
from ppairs_lens.evaluation.protocol import EvalSettings

_WORDS = ["The council met.", "Taxes rose sharply.", "A bridge was built.",
          "Fans cheered loudly.", "The storm passed.", "Prices fell again."]


def _summeval_like(path, n_ctx: int = 5, per: int = 4) -> str:
    """Summary ids repeat across articles, as in SummEval ("S8" in every article)."""
    with open(path, "w") as f:
        for c in range(n_ctx):
            article = f"Article {c}. " + " ".join(_WORDS[(c + k) % 6] for k in range(4))
            for i in range(per):
                f.write(json.dumps({
                    "article_id": f"a{c}", "summary_id": f"s{i}", "article": article,
                    "summary": " ".join(_WORDS[(c * i + k) % 6] for k in range(1 + i % 3)),
                    "coherence": 1 + (i * 7 + c) % 5, "fluency": 3}) + "\n")
    return f"{path}:coherence"


def _climatex_like(path) -> str:
    levels = ["low", "medium", "high", "very high"]
    rows = ["statement_idx\treport\tpage_num\tsent_num\tstatement\tconfidence\tscore\tsplit"]
    k = 0
    for split, per_level in (("train", 3), ("test", 1)):
        for lv, name in enumerate(levels):
            for j in range(per_level):
                rows.append(f"{k}\tAR6\t1\t{k}\tStatement {k}: {_WORDS[(k + lv) % 6]}\t{name}"
                            f"\t{lv}\t{split}")
                k += 1
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def _read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_ranking_and_insertion_end_to_end(tiny, tmp_path):
    spec = _summeval_like(tmp_path / "scored.jsonl")
    out = tmp_path / "out"
    cfg = RankingConfig(dataset=spec, n_train_contexts=3, max_train_pairs_per_context=None,
                        n_eval_contexts=2, settings=EvalSettings(n_boot=50))
    rows = run_ranking(tiny, cfg, out).rows
    assert [r.method for r in rows] == list(RANKING_METHODS)
    n = 4
    for r in rows:
        assert -1 <= r.spearman <= 1 and r.n_contexts == 2
        if r.method in ("probe_greedy", "zero_shot_greedy"):
            per_pair = 2 if r.method.startswith("zero_shot") else 1  # calibrated: 2 orders
            assert r.n_rows <= 2 * per_pair * n * math.ceil(math.log2(n))
        if r.method in ("direct", "geval"):
            assert r.n_rows == 2 * n
    csv_rows = _read(out / "ranking.csv")
    assert len(csv_rows) == len(RANKING_METHODS) and "n_rows" in csv_rows[0]
    assert len(_read(out / "ranking_contexts.csv")) == 2 * len(RANKING_METHODS)
    saved = json.loads((out / "ranking.config.json").read_text())
    run = saved["config"]["runs"][0]
    assert not set(run["train_contexts"]) & set(run["eval_contexts"])  # disjoint contexts
    for ext in ("png", "svg"):
        assert (out / f"ranking.{ext}").stat().st_size > 0

    ins_cfg = InsertionConfig(path=_climatex_like(tmp_path / "climatex.tsv"), n_train=12,
                              max_train_pairs=30, max_test=4, k=2,
                              settings=EvalSettings(n_boot=50))
    ins = run_insertion(tiny, ins_cfg, out).data()
    overall = [r for r in ins if r["level"] == "overall"]
    # the model's methods, then the no-model taggers on the same test statements
    assert [r["method"] for r in overall] == [*INSERTION_METHODS, "majority", "lexical"]
    for r in overall:
        assert r["n"] == 4 and 0 <= r["accuracy"] <= 1 and math.isfinite(r["bias"])
        assert r["ci_counts"] is False  # 4 statements: a CI that decides no claim
    assert {r["level"] for r in ins} == {"low", "medium", "high", "very high", "overall",
                                         "difference", "pairwise held-out", "direction vs PC1"}
    pc1 = next(r for r in ins if r["level"] == "direction vs PC1")  # thesis Section 4.3.3
    assert 0 <= pc1["abs_cos"] <= 1 and pc1["n"] == pc1["train_pairs"] > 0
    assert math.isnan(pc1["accuracy"])                              # a cosine, no accuracy
    assert math.isnan(pc1["lo"]) and pc1["ci_counts"] is False      # a value, no interval
    diffs = [r for r in ins if r["level"] == "difference"]  # each method minus each tagger
    assert len(diffs) == 2 * len(INSERTION_METHODS)
    for r in diffs:
        assert r["lo"] <= r["accuracy"] <= r["hi"] and r["ci_counts"] is False
    preds = _read(out / "insertion_predictions.csv")
    assert len(preds) == 4 * len(INSERTION_METHODS)
    assert (out / "insertion.config.json").exists()
    for ext in ("png", "svg"):
        assert (out / f"insertion.{ext}").stat().st_size > 0


def test_cli_rank_quick(tiny, tmp_path, monkeypatch, capsys):
    import ppairs_lens.models.loading
    from analyses.cli import main

    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    spec = _summeval_like(tmp_path / "scored.jsonl", n_ctx=6, per=3)
    assert main(["rank", "--datasets", spec, "--quick", "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "ranking.csv").exists()
    assert "G-Eval" in capsys.readouterr().out


def test_unknown_method_is_refused(tiny, tmp_path):
    spec = _summeval_like(tmp_path / "scored.jsonl")
    with pytest.raises(ValueError, match="unknown ranking methods"):
        run_ranking(tiny, RankingConfig(dataset=spec, n_train_contexts=2, n_eval_contexts=1,
                                        methods=("nope",)), tmp_path)


def test_story_sentiment_ranking_keeps_template_pools_apart(tiny, tmp_path):
    """20 evaluation contexts from pools no training context uses; the probe's read-out is
    chosen on held-out training pools; the no-model rows are there and the memorised one,
    seeing no evaluation template in training, ties everywhere."""
    from analyses.ranking import figure_caption

    cfg = RankingConfig(dataset="story_sentiment", n_train_contexts=4,
                        max_train_pairs_per_context=6, n_eval_contexts=20,
                        settings=EvalSettings(n_boot=50),
                        methods=("probe_greedy", "length", "memorised"))
    rows = run_ranking(tiny, cfg, tmp_path).rows
    by = {r.method: r for r in rows}
    assert list(by) == ["probe_greedy", "length", "memorised"]
    assert all(r.n_contexts == 20 and r.split_unit == "group_id" for r in rows)
    assert by["memorised"].spearman == 0.0 and by["memorised"].n_constant == 20
    assert "0 of 80 evaluation items seen" in by["memorised"].note
    assert "ranks higher" in by["length"].note and by["length"].n_rows == 0
    assert by["probe_greedy"].layer_selection == "validation"  # the one read-out choice
    saved = json.loads((tmp_path / "ranking.config.json").read_text())["config"]
    run = saved["runs"][0]
    assert not set(run["split"]["groups_train"]) & set(run["split"]["groups_eval"])
    assert "group_id" in saved["splits"]["story_sentiment"]
    assert run["split"]["description"] in figure_caption([cfg], [run])
    groups = {r["group"] for r in _read(tmp_path / "ranking_contexts.csv")}
    assert groups == set(run["split"]["groups_eval"])
