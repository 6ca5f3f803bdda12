"""Direct scoring and G-Eval with each article's prefix shared and many articles' contexts in one
pass (``HarvestSettings.batch_contexts``, :mod:`ppairs_lens.activations.runner`): the same
numbers as each prompt run alone, on the tiny random model."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from ppairs_lens.activations.harvest import harvest_pairs
from ppairs_lens.activations.runner import context_chunks
from ppairs_lens.activations.prefix_sharing import GroupPlan, SubGroup, plan
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.data.records import Dataset, ScoredItem
from ppairs_lens.data.scored_items import comparisons_within_contexts
from ppairs_lens.judges.held_out import (
    held_out_items,
    score_held_out,
    score_held_out_sets,
)
from ppairs_lens.judges.scoring import score_item_sets, score_items, score_prompt

pytestmark = pytest.mark.usefixtures("one_torch_thread")

_WORDS = "river council park storm market bread winter money street flood hall fish".split()


def _items(sizes: list[int]) -> dict[str, ScoredItem]:
    """Articles of different lengths with ``sizes[c]`` summaries each (a context of 8 or more
    items is a group of its own; fewer are pooled into one group sharing the template)."""
    out = {}
    for c, n in enumerate(sizes):
        article = " ".join(_WORDS[(c + k) % len(_WORDS)] for k in range(40 + 23 * c))
        for s in range(n):
            iid = f"a{c}/s{s}"
            text = " ".join(_WORDS[(3 * s + k) % len(_WORDS)] for k in range(5 + 3 * s))
            out[iid] = ScoredItem(iid, text.capitalize() + ".", float(1 + (s + c) % 5), f"a{c}",
                                  article)
    return out


def _dataset(items: dict[str, ScoredItem]) -> Dataset:
    return Dataset("articles", "comparison", comparisons_within_contexts(items.values()),
                   aspect="coherent", item_name="summary", context_name="article")


def _alone(bridge, items, meta) -> np.ndarray:
    """Each rating prompt in a plain forward of its own (the one-prompt-at-a-time path)."""
    rows = []
    for iid, it in items.items():
        sp = score_prompt(bridge.tokenizer, meta, iid, it)
        with torch.inference_mode():
            rows.append(bridge(torch.tensor([list(sp.prefix_ids)]))[0, -1, list(sp.score_ids)])
    return torch.stack(rows).double().numpy()


def _probs(lg: np.ndarray) -> np.ndarray:
    e = np.exp(lg - lg.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _check_close(lg: np.ndarray, ref: np.ndarray) -> None:
    # relative to the logits' scale (a logit near 0 has no relative error of its own)
    assert np.abs(lg - ref).max() <= 1e-5 * np.abs(ref).max()
    np.testing.assert_allclose(_probs(lg), _probs(ref), rtol=1e-5, atol=0)


@pytest.mark.parametrize("budget", [None, 600, 1])  # one pass of contexts; chunks; a row a pass
def test_batched_contexts_score_as_each_prompt_alone(tiny, budget):
    items = _items([9, 8, 10, 3, 2])  # three groups of their own, two small contexts pooled
    meta = _dataset(items)
    plans = plan([score_prompt(tiny.tokenizer, meta, k, v).prefix_ids[:-1]
                  for k, v in items.items()], [v.context_id for v in items.values()])
    assert len(plans) == 4  # sanity of the fixture: 3 articles' groups + the pooled one
    ref = _alone(tiny, items, meta)
    got = score_items(tiny, items, meta,
                      settings=HarvestSettings(token_budget=budget, batch_contexts=True))
    _check_close(got.logits, ref)
    per_group = score_items(tiny, items, meta, settings=HarvestSettings(token_budget=budget))
    _check_close(per_group.logits, ref)
    assert list(got.item_ids) == list(items)


def test_held_out_scores_match_the_one_prompt_at_a_time_path(tiny):
    items = _items([10, 9, 4])
    test = _dataset(items)
    assert set(held_out_items(test)) == {f"{v.context_id}/{k}" for k, v in items.items()}
    shared = score_held_out(tiny, test)  # default: contexts batched
    alone = score_held_out(tiny, test, HarvestSettings(share_prefixes=False))
    keys = sorted(shared.geval_scores)
    np.testing.assert_allclose([shared.geval_scores[k] for k in keys],
                               [alone.geval_scores[k] for k in keys], rtol=1e-5, atol=0)
    assert shared.direct_scores == alone.direct_scores
    assert shared.n_prompts == alone.n_prompts == len(items)


def test_batched_contexts_with_shared_middles_equal_the_unshared_harvest(tiny):
    """Rows of several contexts whose middles run in a pass of their own: each middle
    extends its own context's row of the batched cache."""
    items = _items([5, 6])  # 10 and 15 pairs: groups of their own
    pairs = build_contrast_pairs(tiny.tokenizer, _dataset(items))
    plans = plan([p.prefix_ids for p in pairs], [p.group for p in pairs])
    assert len(plans) == 2 and any(s.mid for g in plans for s in g.subgroups)
    alone = harvest_pairs(tiny, pairs, HarvestSettings(share_prefixes=False))
    for budget in (100_000, 700):
        acts = harvest_pairs(tiny, pairs, HarvestSettings(token_budget=budget,
                                                           batch_contexts=True))
        torch.testing.assert_close(acts, alone, rtol=1e-4, atol=1e-4)


def test_context_chunks_fit_the_budget_longest_first_and_skip_empty_contexts():
    sub = (SubGroup((), (0,), ((1,),)),)
    plans = [GroupPlan(tuple(range(n)), sub) for n in (5, 0, 9, 3, 7)]
    chunks = context_chunks(plans, 20)
    assert [i for c in chunks for i in c] == [2, 4, 0, 3]  # longest first, the empty one out
    for c in chunks:
        assert len(c) == 1 or len(c) * len(plans[c[0]].context) <= 20
    assert context_chunks(plans, 1) == [[2], [4], [0], [3]]  # at least one a chunk


def test_aspects_scored_in_one_pass_equal_each_aspect_alone(tiny):
    """One corpus's aspects rate the same items: one pass over every aspect shares each
    context and item, and gives each aspect's scores as its own pass does."""
    items = _items([4, 4, 5])   # 4-5 rows an article: too few to share alone, enough for two
    tests = {a: replace(_dataset(items), aspect=a) for a in ("coherent", "fluent")}
    together = score_held_out_sets(tiny, tests)
    for a, test in tests.items():
        alone = score_held_out(tiny, test)
        keys = sorted(alone.geval_scores)
        np.testing.assert_allclose([together[a].geval_scores[k] for k in keys],
                                   [alone.geval_scores[k] for k in keys], rtol=1e-5, atol=0)
        assert together[a].direct_scores == alone.direct_scores
    assert together["coherent"].geval_scores != together["fluent"].geval_scores
    sets = [(held_out_items(t), t) for t in tests.values()]
    one_pass = sum(s.n_tokens for s in score_item_sets(tiny, sets))
    per_aspect = sum(score_items(tiny, i, m).n_tokens for i, m in sets)
    assert one_pass < 0.95 * per_aspect    # each article runs once, not once an aspect (these
    # articles are short: real SummEval saves 57%, benchmarks/bench_scoring.py --aspects)


def test_scoring_nothing_runs_no_pass(tiny):
    """The built-ins have no scored items: direct scoring and G-Eval rate none (it raised an
    IndexError at ``prompts[0]``, so ``run --builtins`` failed there)."""
    from ppairs_lens.judges.held_out import score_held_out_sets

    assert score_held_out_sets(tiny, {}) == {}
