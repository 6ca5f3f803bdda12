"""The replication's library parts: data assembly, joint harvest, judge forms, ALLURE's choice,
the joint judge study and the study runner (tiny model; real files only where present)."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from analyses.replication.config import replication_config
from ppairs_lens.activations.pipeline import ensure_store, ensure_stores
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import ITEM1, ITEM2, TIE, Comparison, Dataset
from analyses.replication.sets import (
    combine,
    items_within_contexts,
    replication_datasets,
)
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.judges.study import most_wrong
from ppairs_lens.judges.study import fit_threshold, judge_forms, paper_probability
from ppairs_lens.judges.study import JudgeStudySettings, judge_study
from ppairs_lens.judges.zero_shot import zero_shot

from .conftest import small_comparisons

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _scored(n_ctx=5, n_items=6, aspect="x") -> Dataset:
    recs = []
    for c in range(n_ctx):
        for i in range(n_items):
            for j in range(i + 1, n_items):
                recs.append(Comparison(f"c{c}:{i}|{j}", f"item {i}", f"item {j}",
                                       ITEM1 if (i + c) % 3 > (j + c) % 3 else ITEM2,
                                       context=f"context {c}", context_id=f"c{c}",
                                       item1_id=f"S{i}", item2_id=f"S{j}"))
    return Dataset(f"scored-{aspect}", "comparison", recs, aspect=aspect)


def test_items_within_contexts_keeps_every_pair_of_the_drawn_items():
    d = items_within_contexts(_scored(), n_contexts=3, items_per_context=4, seed=1)
    by_ctx = {}
    for r in d.records:
        by_ctx.setdefault(r.context_id, set()).update({r.item1_id, r.item2_id})
    assert len(by_ctx) == 3
    for c, items in by_ctx.items():
        assert len(items) == 4
        assert sum(r.context_id == c for r in d.records) == 6  # C(4, 2): every pair
    again = items_within_contexts(_scored(), n_contexts=3, items_per_context=4, seed=1)
    assert [r.pair_id for r in again.records] == [r.pair_id for r in d.records]


def test_the_item_draw_never_reads_the_gold_scores():
    """Items are drawn at random, the same whatever the aspect's scores: a draw that avoided
    tied scores would test on wider, easier gaps than the corpus has (SummEval's untied pairs
    differ by 1.25 / 1.86 / 1.18 / 0.92 on average; a tie-avoiding draw gave 1.48 / 2.09 /
    1.66 / 1.09)."""
    def aspect(sc):
        return Dataset("a", "comparison", [
            Comparison(f"c{c}:{i}|{j}", f"item {i}", f"item {j}",
                       TIE if sc[i] == sc[j] else ITEM1 if sc[i] > sc[j] else ITEM2,
                       context_id=f"c{c}", item1_id=f"S{i}", item2_id=f"S{j}",
                       score1=sc[i], score2=sc[j])
            for c in range(6) for i in range(6) for j in range(i + 1, 6)], aspect="x")
    mostly_fives, spread = aspect([5.0, 5.0, 5.0, 5.0, 3.0, 4.0]), aspect([1, 2, 3, 4, 5, 6])
    for seed in range(4):
        got = [{(r.context_id, r.item1_id, r.item2_id)
                for r in items_within_contexts(d, 4, 3, seed).records}
               for d in (mostly_fives, spread)]
        assert got[0] == got[1]


def test_combine_prefixes_ids_so_parts_never_collide():
    a, b = replace(_scored(1, 3), name="a"), replace(_scored(1, 3), name="b")
    both = combine("ab", [a, b])
    assert len(both) == 6 and len({r.pair_id for r in both.records}) == 6
    assert {r.context_id for r in both.records} == {"a/c0", "b/c0"}


def test_replication_datasets_skip_a_missing_folder_with_a_reason(tmp_path):
    said = []
    assert replication_datasets(tmp_path / "nope", log=said.append) == {}
    assert "does not exist" in said[0]


def test_replication_datasets_on_the_shared_files(shared_datasets):
    d = replication_datasets(shared_datasets, replication_config("quick").sizes, log=lambda m: None)
    assert {"summeval-coherence", "rocstories", "mctaco", "mt-bench", "llmbar-clean"} <= set(d)
    # SummEval: every pair among the drawn summaries of each drawn article
    sizes = replication_config("quick").sizes
    pairs = sizes.summeval_items * (sizes.summeval_items - 1) // 2
    assert len(d["summeval-coherence"]) == sizes.summeval_contexts * pairs


def test_paper_form_and_threshold():
    ld_o, ld_s = np.array([2.0, -1.0]), np.array([-2.0, 3.0])
    p = paper_probability(ld_o, ld_s)
    np.testing.assert_allclose(p, [(1 / (1 + np.exp(-2)) + 1 / (1 + np.exp(-2))) / 2,
                                   (1 / (1 + np.exp(1)) + 1 / (1 + np.exp(3))) / 2])
    # a judge whose log-odds sit above 0 for everything still separates the classes at 5
    z = np.array([4.0, 4.5, 5.5, 6.0])
    t = fit_threshold(z, np.array([False, False, True, True]))
    assert 4.5 < t < 5.5
    f = judge_forms(np.array([9.0, 12.0]), np.array([0.0, 0.0]), z, np.array([0, 0, 1, 1], bool))
    assert (f.threshold > 0.5).tolist() == [False, True]
    assert fit_threshold(np.array([]), np.array([], bool)) == 0.0


def test_most_wrong_picks_the_worst_mistakes_and_alternates_answers():
    labels = [ITEM1, ITEM1, ITEM2, ITEM2, TIE]
    z = np.array([-3.0, 1.0, 2.0, -0.5, -9.0])  # the tie's big |z| must never be picked
    assert most_wrong(z, labels, set(), 2) == [0, 2]
    assert most_wrong(z, labels, {0}, 1) == [1]


def test_joint_harvest_equals_separate_harvests(tiny, tmp_path):
    d1 = replace(small_comparisons(10), source="one-file")  # one file: harvested together
    d2 = replace(d1, name="small2", aspect="smaller")  # same contexts, another question
    together = ensure_stores(tiny, [d1, d2], tmp_path / "joint")
    alone = [ensure_store(tiny, d, tmp_path / f"alone{k}") for k, d in enumerate((d1, d2))]
    for a, b in zip(together, alone):
        assert a.complete and a.meta.dataset == b.meta.dataset
        torch.testing.assert_close(a.load(), b.load(), rtol=1e-4, atol=1e-4)
    # reopened, not harvested again
    again = ensure_stores(tiny, [d1, d2], tmp_path / "joint")
    assert [s.fingerprint() for s in again] == [s.fingerprint() for s in together]
    assert isinstance(again[0], ActivationStore)


def test_judge_study_equals_the_zero_shot_judge_per_dataset(tiny, tmp_path):
    from ppairs_lens.judges.held_out import held_out_datasets

    d1 = small_comparisons(12)
    d2 = replace(d1, name="small2", aspect="smaller")
    stores = ensure_stores(tiny, [d1, d2], tmp_path)
    settings = JudgeStudySettings(EvalSettings(test_size=0.5, split_by="pair"), train_pairs=4,
                                  allure=None)
    out = judge_study(tiny, stores, [d1, d2], settings)
    for s, d in zip(stores, (d1, d2)):
        _, test, _ = held_out_datasets(s, d, test_size=0.5, split_by="pair", seed=0)
        ref = zero_shot(tiny, test)
        got = out[d.name]
        assert list(got.test_ids) == [r.pair_id for r in test.records]
        np.testing.assert_allclose(got.forms.z, ref.z, rtol=1e-4, atol=1e-4)
        assert set(got.p_by_pair()) == {"p_by_pair", "threshold_p_by_pair"}


def test_a_size_of_zero_leaves_a_dataset_out_with_a_reason(shared_datasets):
    said = []
    sizes = replace(replication_config("quick").sizes, hanna_contexts=0, mctaco_pairs=0)
    d = replication_datasets(shared_datasets, sizes, log=said.append)
    assert "hanna-coherence" not in d and "mctaco" not in d and "rocstories" in d
    assert any(m.startswith("mctaco left out") for m in said)
