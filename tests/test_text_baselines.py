"""Text baselines (lexical unigram bag of words, pooled input embedding): fitted on train,
antisymmetric."""

from __future__ import annotations

import numpy as np
import pytest

from ppairs_lens.data.records import Comparison, Dataset, Statement
from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.predictors import BASELINE_NAMES
from ppairs_lens.evaluation.metrics import accuracy, targets
from ppairs_lens.evaluation.text_baselines import (embedding_baseline, lexical_baseline,
                                                   text_baselines)

WORDS = [f"w{k}" for k in range(150)]


def _sentence(rng, n: int = 8) -> str:
    return " ".join(rng.choice(WORDS, size=n))


def _comparisons(n: int, seed: int, cue: bool, start: int = 0) -> list[Comparison]:
    """Pairs of random sentences; with ``cue`` the better item says "excellent"; the label is
    random, so without the cue nothing in the texts predicts it. Groups of 4 pairs."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(start, start + n):
        good, bad = _sentence(rng), _sentence(rng)
        if cue:
            good = f"{good} excellent"
        label = int(rng.integers(1, 3))
        a, b = (good, bad) if label == 1 else (bad, good)
        out.append(Comparison(f"p{k}", a, b, label, group_id=f"g{k // 4}"))
    return out


def _labels(records) -> list[int]:
    return [r.label for r in records]


def _swapped(records: list[Comparison]) -> list[Comparison]:
    return [Comparison(r.pair_id, r.item2, r.item1, {1: 2, 2: 1}.get(r.label, 0),
                       group_id=r.group_id) for r in records]


def test_a_planted_word_is_learned_and_random_texts_are_chance():
    tr, te = _comparisons(240, 0, cue=True), _comparisons(200, 1, cue=True, start=1000)
    b = lexical_baseline(tr, _labels(tr), te, seed=0)
    assert b.kind == "lexical" and b.available and b.p.shape == (200,)
    assert accuracy(targets(_labels(te)), b.p) > 0.9
    assert b.train_accuracy > 0.9                      # grouped CV on train finds it too
    assert "bag of words" in b.predictor and "C=" in b.predictor and "CV acc" in b.predictor

    tr, te = _comparisons(240, 2, cue=False), _comparisons(400, 3, cue=False, start=1000)
    b = lexical_baseline(tr, _labels(tr), te, seed=0)
    assert 0.4 < accuracy(targets(_labels(te)), b.p) < 0.6


def test_the_vocabulary_is_kept_whole_and_length_is_seen():
    """Every training word counts (no min_df pruning: on ~56 training texts it removed most of
    the vocabulary), and word counts carry the length difference: "the longer answer wins"
    is learnable by the bag of words, as a plain unigram model learns it."""
    rng = np.random.default_rng(11)
    tr, te = [], []
    for k in range(160):
        short, long_ = _sentence(rng, 4), _sentence(rng, 14)   # words drawn from 150: most rare
        label = int(rng.integers(1, 3))
        a, b = (long_, short) if label == 1 else (short, long_)
        (tr if k < 80 else te).append(Comparison(f"p{k}", a, b, label, group_id=f"g{k // 2}"))
    b = lexical_baseline(tr, _labels(tr), te, seed=0)
    assert accuracy(targets(_labels(te)), b.p) > 0.9
    vocab = {w for r in tr for w in (r.item1 + " " + r.item2).split()}
    assert f"({len(vocab)} words" in b.predictor


def test_swapping_the_items_flips_p():
    tr, te = _comparisons(120, 4, cue=True), _comparisons(60, 5, cue=True, start=1000)
    p = lexical_baseline(tr, _labels(tr), te, seed=0).p
    q = lexical_baseline(tr, _labels(tr), _swapped(te), seed=0).p
    np.testing.assert_allclose(q, 1 - p, atol=1e-9)
    # the training order does not matter either: both orders are fitted
    q2 = lexical_baseline(_swapped(tr), _labels(_swapped(tr)), te, seed=0).p
    np.testing.assert_allclose(q2, p, atol=1e-6)


def test_the_seed_is_explicit_and_reproducible():
    tr, te = _comparisons(120, 6, cue=True), _comparisons(40, 7, cue=True, start=1000)
    a = lexical_baseline(tr, _labels(tr), te, seed=3)
    b = lexical_baseline(tr, _labels(tr), te, seed=3)
    np.testing.assert_array_equal(a.p, b.p)
    assert a.predictor == b.predictor


def test_training_ties_are_refused_and_the_dataset_helper_drops_them():
    tr, te = _comparisons(80, 8, cue=True), _comparisons(30, 9, cue=True, start=1000)
    tied = tr + [Comparison("tie", "same words", "other words", 0, group_id="gt")]
    with pytest.raises(ProbeError, match="ties"):
        lexical_baseline(tied, _labels(tied), te)
    te_tied = te[:10] + [Comparison("tie2", "a b", "c d", 0)] + te[10:]
    out = text_baselines(Dataset("tr", "comparison", tied), Dataset("te", "comparison", te_tied))
    assert [b.kind for b in out] == ["lexical"]
    assert out[0].p.shape == (len(te),)                # aligned with test's non-tie records
    np.testing.assert_allclose(out[0].p, lexical_baseline(tr, _labels(tr), te).p)


def test_statements_use_the_statement_with_an_intercept():
    rng = np.random.default_rng(10)
    recs = [Statement(f"s{k}", _sentence(rng) + (" indeed" if k % 2 else " perhaps"),
                      bool(k % 2), group_id=f"g{k // 2}") for k in range(200)]
    tr, te = Dataset("tr", "statement", recs[:140]), Dataset("te", "statement", recs[140:])
    (b,) = text_baselines(tr, te)
    assert accuracy(targets(te.labels()), b.p) > 0.9


def test_mixed_kinds_and_bad_labels_are_refused():
    tr = _comparisons(20, 11, cue=True)
    with pytest.raises(ProbeError, match="labels"):
        lexical_baseline(tr, [3] * len(tr), tr)
    with pytest.raises(ProbeError):
        lexical_baseline(tr, _labels(tr), [Statement("s", "x y", True)])


@pytest.mark.parametrize("as_tensor", [False, True])
def test_embedding_baseline_is_antisymmetric(tokenizer, as_tensor):
    emb = np.random.default_rng(0).normal(size=(len(tokenizer), 16)).astype(np.float32)
    if as_tensor:
        import torch

        emb = torch.from_numpy(emb)
    tr, te = _comparisons(120, 12, cue=True), _comparisons(50, 13, cue=True, start=1000)
    b = embedding_baseline(emb, tokenizer, tr, _labels(tr), te, seed=0)
    assert b.kind == "embedding" and b.available and b.p.shape == (50,)
    assert np.all((b.p > 0) & (b.p < 1))
    assert "mean-pooled" in b.predictor and "W_E" in b.predictor
    q = embedding_baseline(emb, tokenizer, tr, _labels(tr), _swapped(te), seed=0).p
    np.testing.assert_allclose(q, 1 - b.p, atol=1e-9)


def test_embedding_baseline_through_the_dataset_helper(tokenizer):
    emb = np.random.default_rng(1).normal(size=(len(tokenizer), 8))
    tr, te = _comparisons(60, 14, cue=True), _comparisons(20, 15, cue=True, start=1000)
    out = text_baselines(Dataset("tr", "comparison", tr), Dataset("te", "comparison", te),
                         embedding=emb, tokenizer=tokenizer)
    assert [b.kind for b in out] == ["lexical", "embedding"]
    assert all(b.p.shape == (20,) for b in out)
    with pytest.raises(ProbeError, match="tokenizer"):
        text_baselines(Dataset("tr", "comparison", tr), Dataset("te", "comparison", te),
                       embedding=emb)
    with pytest.raises(ProbeError, match="outside"):
        embedding_baseline(emb[:10], tokenizer, tr, _labels(tr), te)


def test_the_kinds_have_figure_labels():
    assert {"lexical", "embedding"} <= set(BASELINE_NAMES)


def test_held_out_text_baselines_cover_exactly_the_probes_test_pairs(tiny):
    """The one call every command makes: fitted on the split's training side, P(item 1) on
    each of its held-out pairs (the pairs a probe is scored on)."""
    from ppairs_lens.activations.pair_info import pair_info
    from ppairs_lens.data.builtin import builtin_dataset
    from ppairs_lens.evaluation.store_split import untied_split
    from ppairs_lens.evaluation.text_baselines import held_out_text_baselines

    ds = builtin_dataset("story_sentiment", n=60)
    split = {"test_size": 0.3, "split_by": "auto", "seed": 1}
    got = held_out_text_baselines(pair_info(ds), ds, embedding=tiny.W_E.detach(),
                                  tokenizer=tiny.tokenizer, **split).p_by_pair()
    pairs, _, _, test, _ = untied_split(pair_info(ds), **split)
    want = {pairs[i].pair_id for i in test}
    assert set(got) == {"lexical_p_by_pair", "embedding_p_by_pair"}
    for by_pair in got.values():
        assert set(by_pair) == want and all(0.0 <= p <= 1.0 for p in by_pair.values())
    alone = held_out_text_baselines(pair_info(ds), ds, **split)
    assert set(alone.p_by_pair()) == {"lexical_p_by_pair"} and alone.embedding is None
