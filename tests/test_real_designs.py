"""The papers' own designs (issue 35, item 4): NEWSROOM beside SummEval in the thesis tables,
Table 4.2 on every article, Figure 4's Adversarial subsets, Table 2 as ΔF1, ClimateX paired
with the paper's own predictions (tiny model / synthetic data; real files only where present)."""

from dataclasses import replace

import numpy as np
import pytest

from analyses.replication.claims import evaluate_claims
from analyses.insertion import published_row
from analyses.replication.config import replication_config
from analyses.thesis_tables import (
    ThesisTablesConfig,
    article_rho,
    published_rows,
    thesis_cell,
    thesis_rows,
)
from ppairs_lens.activations.pipeline import ensure_store
from ppairs_lens.data.climatex import (
    published_prediction_sets,
    read_published_predictions,
)
from ppairs_lens.data.newsroom import clean_html, newsroom_dataset
from ppairs_lens.data.records import Dataset, ScoredItem
from analyses.replication.sets import (
    ADVERSARIAL_SUBSETS,
    NEWSROOM_ASPECTS,
    ReplicationSizes,
    comparison_names,
    replication_datasets,
    shifted_names,
    summeval_names,
)
from ppairs_lens.data.scored_items import comparisons_within_contexts
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.judge_change import judge_baseline, judge_change, proba_from_logodds
from ppairs_lens.evaluation.level_agreement import paired_with_published, slope_bias
from ppairs_lens.evaluation.metrics import f1
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.judges.held_out import HeldOutScores, held_out_datasets, held_out_items

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------------ NEWSROOM's text and aspects

def test_clean_html_gives_the_text_a_reader_saw():
    raw = ("<p>One &quot;two&quot;.</p><p>Three&#x27;s &amp;lt;b&amp;gt; <i>x</i></p>"
           "<p>  four\u00a0 five </p>")
    assert clean_html(raw) == "One \"two\".\n\nThree's &lt;b&gt; x\n\nfour five"
    # an escaped tag is text, not a tag: it survives as the characters the reader saw
    assert clean_html("a &lt;p&gt; b") == "a <p> b"


def _scored_items(n_ctx: int, scores=(1.0, 2.0, 2.0, 3.0, 4.0), html: bool = False):
    items = []
    for c in range(n_ctx):
        ctx = (f"<p>Article {c} says &quot;{c}&quot;.</p><p>More.</p>" if html
               else f"Article {c} about topic {c % 3}.")
        for i, s in enumerate(scores):
            items.append(ScoredItem(f"S{i}", f"Summary {i} of {c}: " + "word " * (i + 1),
                                    s, f"a{c}", ctx))
    return items


def _dataset(name: str, aspect: str, n_ctx: int = 12, html: bool = False) -> Dataset:
    recs = comparisons_within_contexts(_scored_items(n_ctx, html=html), score_field="x")
    return Dataset(name, "comparison", recs, aspect=aspect, item_name="summary",
                   context_name="article")


def test_newsroom_dataset_cleans_every_text_and_uses_its_own_aspects():
    d = newsroom_dataset(_dataset("newsroom-informativeness", "informativeness", 2, html=True),
                         "informativeness")
    assert d.aspect == "informative" and "key points" in d.aspect_description
    for r in d.records:
        assert "<p>" not in r.context and "&quot;" not in r.context
        assert r.context.startswith("Article") and "\n\nMore." in r.context
    before = _dataset("x", "informativeness", 2, html=True)
    assert [r.pair_id for r in d.records] == [r.pair_id for r in before.records]
    assert [r.label for r in d.records] == [r.label for r in before.records]


def test_replication_names_route_newsroom_and_the_adversarial_subsets():
    names = ["summeval-coherence", "summeval-fluency", "newsroom-coherence",
             "newsroom-informativeness", "rocstories", "llmbar-clean",
             *ADVERSARIAL_SUBSETS.values()]
    kinds = {n: "comparison" for n in names}
    assert summeval_names(names) == names[:4]
    assert shifted_names(names) == list(ADVERSARIAL_SUBSETS.values())
    assert comparison_names(names, kinds) == ["summeval-coherence", "newsroom-coherence",
                                              "rocstories", "llmbar-clean"]


def test_full_sizes_are_the_papers_designs():
    full = replication_config("full").sizes
    assert (full.newsroom_contexts, full.newsroom_items) == (60, 7)
    assert full.newsroom_aspects == NEWSROOM_ASPECTS and full.summeval_items >= 8
    assert full.llmbar_adversarial_pairs is None  # every pair of each subset
    assert full.llmbar_adversarial == tuple(ADVERSARIAL_SUBSETS)
    assert set(ReplicationSizes().llmbar_adversarial) < set(ADVERSARIAL_SUBSETS)  # a preview
    # a preview: one shifted set
    assert len(replication_config("quick").sizes.llmbar_adversarial) == 1
    demo = ReplicationSizes()
    assert demo.newsroom_items == 7  # Table 4.2 sorts all 7 even in the preview


def test_newsroom_and_adversarial_subsets_on_the_shared_files(shared_datasets):
    sizes = ReplicationSizes()
    d = replication_datasets(shared_datasets, sizes, log=lambda m: None)
    n = d["newsroom-coherence"]
    assert len({r.context_id for r in n.records}) == sizes.newsroom_contexts
    per_article = sizes.newsroom_items * (sizes.newsroom_items - 1) // 2
    assert len(n) == sizes.newsroom_contexts * per_article  # every pair, ties included
    assert n.context_name == "article" and n.aspect == "coherent"
    for r in n.records:
        assert not any(t in r.context + r.item1 + r.item2 for t in ("<p>", "</p>", "&quot;",
                                                                      "&#x27;", "&amp;"))
    for sub in sizes.llmbar_adversarial:
        assert len(d[ADVERSARIAL_SUBSETS[sub]]) == sizes.llmbar_adversarial_pairs
    full = replication_datasets(shared_datasets, replace(
        replication_config("full").sizes, summeval_aspects=(), hanna_contexts=0,
        story_cloze_pairs=0, mctaco_pairs=0, mt_bench_pairs=0), log=lambda m: None)
    assert [len(full[n]) for n in ADVERSARIAL_SUBSETS.values()] == [134, 92, 47, 46]
    assert len({r.context_id for r in full["newsroom-informativeness"].records}) == 60
    assert full["newsroom-informativeness"].aspect == "informative"


# ------------------------------------------------------------------ Tables 4.1 / 4.2

def test_article_rho_scores_an_all_equal_ranking_zero_not_nan():
    gold = {"a": 1.0, "b": 2.0, "c": 3.0}
    assert article_rho({"a": 4.0, "b": 4.0, "c": 4.0}, gold) == 0.0
    assert article_rho(["c", "b", "a"], gold) == pytest.approx(1.0)
    assert article_rho({"a": 3.0, "b": 2.0, "c": 1.0}, gold) == pytest.approx(-1.0)


def test_thesis_rows_keep_every_article_and_put_newsroom_in_its_column(tiny, tmp_path):
    ds = _dataset("newsroom-informativeness", "informative", n_ctx=12)
    store = ensure_store(tiny, ds, tmp_path)
    settings = EvalSettings(test_size=0.5, n_boot=50)
    cfg = ThesisTablesConfig(stores=[str(store.path)], settings=settings, beam_size=20)
    test = held_out_datasets(store, ds, **settings.split_kwargs())[1]
    items = held_out_items(test)
    rng = np.random.default_rng(0)
    judge_p = {r.pair_id: float(rng.uniform()) for r in test.records}
    scores = HeldOutScores(
        direct_scores={k: 3.0 for k in items},       # ranks every summary equal
        geval_scores={k: it.score for k, it in items.items()},   # the gold order
        direct_p={r.pair_id: 0.5 for r in test.records},
        geval_p={r.pair_id: float(r.label == 1) for r in test.records}, n_prompts=0)
    rows = thesis_rows(store, test, judge_p, scores, 0, cfg)
    articles = {r.context_id for r in test.records}
    t42 = {r.method: r for r in rows if r.table == "4.2" and r.model == "ours"
           and r.metric == "spearman"}
    assert t42["direct"].value == 0.0 and t42["direct"].n == len(articles)
    assert t42["G-Eval"].value == pytest.approx(1.0)
    # each article holds a pair the humans tie (never judged): the sorts still rank it
    assert t42["PAIRS"].n == t42["PPAIRS"].n == len(articles)
    assert all(r.dataset == "NEWSROOM" and r.aspect == "informativeness" for r in rows)
    assert {r.thesis_column for r in rows if hasattr(r, "thesis_column")} == {"CON"}
    assert rows[-1].n_items_per_article == 5
    diff = [r for r in rows if r.method == "PPAIRS - direct" and r.table == "4.2"]
    assert diff[0].n == len(articles)
    assert diff[0].min_items_sorted == 5  # each article sorts its 5 summaries


def test_table_4_2_claims_are_tested_only_where_articles_sort_seven_summaries():
    """A Spearman over 3 summaries can only be ±0.5 or ±1: the claim says so, not tested."""
    def rows(k):
        return {"model": "meta-llama/Meta-Llama-3-8B-Instruct",   # a model of the thesis
                "thesis_tables": [{"table": "4.2", "dataset": "SummEval", "aspect": "coherence",
                                   "model": "ours", "method": "PPAIRS - direct",
                                   "value": -0.6, "lo": -0.7, "hi": -0.5, "n": 30,
                                   "n_groups": 30, "ci_counts": True,
                                   "min_items_sorted": k}]}
    cid = "thesis4.2.ppairs-vs-direct.summeval-coherence"
    few = {c["id"]: c for c in evaluate_claims(rows(3), None)["claims"]}[cid]
    assert few["outcome"] == "not tested at this size" and "7+" in few["needed"]
    enough = {c["id"]: c for c in evaluate_claims(rows(7), None)["claims"]}[cid]
    assert enough["outcome"] == "fails"       # -0.6 [-0.7, -0.5] over 30 articles
    unknown = {c["id"]: c for c in evaluate_claims(rows(None), None)["claims"]}[cid]
    assert unknown["outcome"] == "not tested at this size" and "rerun" in unknown["reason"]


def test_published_newsroom_con_column_stands_beside_informativeness():
    assert thesis_cell("newsroom-informativeness", "informative") == ("NEWSROOM",
                                                                      "informativeness")
    assert thesis_cell("summeval-consistency", "consistent") == ("SummEval", "consistency")
    rows = published_rows([("NEWSROOM", "informativeness"), ("SummEval", "coherence")])
    got = {(r.dataset, r.aspect, r.table, r.model, r.method): r.value for r in rows}
    # thesis Table 4.1, Mistral PPAIRS: NEWSROOM CON 0.81; Table 4.2 Llama-3 PPAIRS CON 0.68
    assert got[("NEWSROOM", "informativeness", "4.1", "Mistral-7B-Instruct-v0.1",
                "PPAIRS")] == 0.81
    assert got[("NEWSROOM", "informativeness", "4.2", "Llama-3-8B-Instruct", "PPAIRS")] == 0.68
    assert got[("SummEval", "coherence", "4.1", "Llama-2-7B-chat", "PPAIRS")] == 0.86
    assert not any(d == "NEWSROOM" and a == "consistency" for d, a, *_ in got)


# ------------------------------------------------------------------ Table 2: ΔF1

def test_judge_change_reports_delta_f1_beside_accuracy_and_auroc():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 60)
    z_base = np.where(y == 1, 1.0, -1.0) + rng.normal(0, 1.2, 60)
    z_cond = z_base + rng.normal(0, 1.5, 60)
    groups = [f"g{k // 2}" for k in range(60)]
    out = judge_change(y, z_base, z_cond, groups, n_boot=200, seed=0)
    lab = np.where(y == 1, 1, 2)
    want = f1(lab, proba_from_logodds(z_cond)) - f1(lab, proba_from_logodds(z_base))
    assert out["delta_f1"] == pytest.approx(want)
    assert out["delta_f1_lo"] <= out["delta_f1_tost_lo"] <= out["delta_f1"] \
        <= out["delta_f1_tost_hi"] <= out["delta_f1_hi"]
    assert {"delta_accuracy", "delta_auroc"} <= set(out)
    base = judge_baseline(y, z_base, z_base, -z_base, groups, n_boot=100, seed=0)
    assert base["judge_f1_lo"] <= base["judge_f1"] <= base["judge_f1_hi"]
    assert base["judge_f1"] == pytest.approx(f1(lab, proba_from_logodds(z_base)))


# ------------------------------------------------------------------ ClimateX

def _write_predictions(path, preds: dict[str, str]):
    lines = ["statement_idx,statement,confidence,score,split,prediction"]
    lines += [f"{i},statement {i},low,0,test,{p}" for i, p in preds.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_slope_and_bias_are_the_papers_over_level_means():
    # unbalanced levels: a line through every point differs; the paper's weighs levels alike
    true = [0] * 2 + [1] * 6 + [2] * 2
    pred = [0, 0] + [2] * 6 + [2, 2]
    slope, bias = slope_bias(pred, true)
    assert slope == pytest.approx(1.0) and bias == pytest.approx(1 / 3)
    assert np.isnan(slope_bias([1, 2], [1, 1])[0])


def test_paired_with_published_on_the_same_statements(tmp_path):
    f = tmp_path / "gpt-4_few-shot.csv"
    _write_predictions(f, {"1": "low", "2": "medium", "3": "idk", "4": "High", "5": "low"})
    theirs = read_published_predictions(f)
    assert (theirs.model, theirs.setting, theirs.n_unparsed) == ("GPT-4", "few-shot", 1)
    true = {"1": 0, "2": 2, "3": 1, "4": 2, "5": 3}
    ours = {"1": 0, "2": 2, "3": 1, "4": 1, "5": 3}
    d = paired_with_published(ours, true, theirs, n_boot=200, seed=0)
    assert d["ours_accuracy"] == pytest.approx(0.8) and d["theirs_accuracy"] == 0.4
    assert d["difference"] == pytest.approx(0.4) and d["lo"] <= 0.4 <= d["hi"]
    assert d["n"] == 5 and d["n_unparsed"] == 1 and d["ci_counts"] is False  # 5 statements
    row = published_row("probe", d)
    assert row.level == "published paired" and row.method == "probe - GPT-4 few-shot"
    assert row.accuracy == d["difference"] and row.theirs_accuracy == 0.4
    with pytest.raises(DataError, match="no published prediction"):
        paired_with_published({**ours, "9": 0}, {**true, "9": 0}, theirs)


def test_published_predictions_refuse_a_repeated_statement(tmp_path):
    f = tmp_path / "gpt-4_zero-shot.csv"
    f.write_text("statement_idx,prediction\n1,low\n1,high\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_published_predictions(f)
    assert "gpt-4_zero-shot.csv" in str(e.value) and "statement_idx" in str(e.value)
    assert published_prediction_sets(tmp_path / "absent") == []


def test_the_papers_own_predictions_give_its_published_numbers(shared_datasets):
    from ppairs_lens.data import read_climatex
    from ppairs_lens.evaluation.published import published

    true = {i.item_id: int(i.score) for i in read_climatex(
        shared_datasets / "climatex" / "ipcc_statements_dataset.tsv") if i.split == "test"}
    sets = {(p.model, p.setting): p for p in published_prediction_sets(
        shared_datasets / "climatex" / "published_predictions")}
    assert len(true) == 300
    for setting in ("zero-shot", "few-shot"):
        p = sets[("GPT-4", setting)]
        d = paired_with_published(p.levels, true, p, n_boot=50)  # theirs against themselves
        assert d["difference"] == 0.0 and d["n"] == 300
        pub = {x.metric: x.value for x in published(source="climatex", model="GPT-4",
                                                     method=setting, setting="overall")}
        assert d["theirs_accuracy"] == pytest.approx(pub["accuracy"], abs=5e-4)
        assert d["theirs_slope"] == pytest.approx(pub["slope"], abs=1e-3)
        assert d["theirs_bias"] == pytest.approx(pub["bias"], abs=1e-3)


def test_per_context_cap_spends_pairs_on_more_contexts():
    from ppairs_lens.data.records import Comparison
    from ppairs_lens.data.specs import subsample_by_context

    recs = [Comparison(pair_id=f"q{q}-{k}", context=f"question {q}", item1=f"a{k}",
                       item2=f"b{k}", label=1 + k % 2, context_id=f"q{q}")
            for q in range(10) for k in range(4)]
    d = Dataset(name="d", records=recs, kind="comparison")
    whole = subsample_by_context(d, 12, seed=3)
    capped = subsample_by_context(d, 12, seed=3, per_context=1)
    assert len(whole) == 12 and len(set(whole.context_ids())) == 3  # 4 pairs a question
    assert len(capped) == 10 and len(set(capped.context_ids())) == 10  # every question, once
    assert len(set(subsample_by_context(d, 6, seed=3, per_context=1).context_ids())) == 6
    assert capped.records == subsample_by_context(d, 12, seed=3, per_context=1).records
    assert len(subsample_by_context(d, None, per_context=2)) == 20
    with pytest.raises(ValueError, match="per_context"):
        subsample_by_context(d, 12, per_context=0)
