"""The ranking split (leak groups apart, >= 20 evaluation contexts, no Spearman on < 3 items),
the no-model ranking baselines (length, memorised win rates) and the probe's read-out chosen
on a validation split of the training pairs. Pure Python / numpy, plus the built-in data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ppairs_lens.data.builtin import builtin_dataset
from ppairs_lens.data.item_sampling import items_by_context, training_comparisons
from ppairs_lens.data.records import Comparison, Dataset, ScoredItem
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.metrics import spearman
from ppairs_lens.judges.probe_judge import choose_probe_readout
from ppairs_lens.ranking.baselines import (
    length_scores,
    length_sign,
    memorised_scores,
    win_rates,
)
from ppairs_lens.ranking.context_split import (
    MIN_RANK_ITEMS,
    context_groups,
    split_contexts,
    split_for_ranking,
)


def _scored(n_ctx: int, per: int, group_of=lambda c: None, longer_better: bool = True
            ) -> Dataset:
    """All pairs among ``per`` items in each of ``n_ctx`` contexts; item k has score k and
    length growing (or shrinking) with k; ``group_of(c)`` the context's group."""
    recs = []
    for c in range(n_ctx):
        for i in range(per):
            for j in range(i + 1, per):
                li, lj = (i, j) if longer_better else (per - i, per - j)
                recs.append(Comparison(f"c{c}:{i}|{j}", "x" * (li + 1), "x" * (lj + 1), label=2,
                                       context=f"ctx {c}", context_id=f"c{c}",
                                       item1_id=f"c{c}/i{i}", item2_id=f"c{c}/i{j}",
                                       score1=float(i), score2=float(j),
                                       group_id=group_of(c)))
    return Dataset("scored", "comparison", recs)


# -- the split ---------------------------------------------------------------------------------

def test_story_sentiment_ranks_20_contexts_from_unseen_template_pools():
    ds = builtin_dataset("story_sentiment")
    items = items_by_context(ds)
    sp = split_for_ranking(ds, items, n_train=10, n_eval=20, seed=0)
    assert len(sp.eval) >= 20 and len(sp.train) == 10 and sp.unit == "group_id"
    assert not set(sp.groups_train) & set(sp.groups_eval)
    # No template (item id) and no sentence text is on both sides.
    def seen(ctxs, key):
        return {key(it) for c in ctxs for it in items[c].values()}
    for key in (lambda it: it.item_id, lambda it: it.text):
        assert not seen(sp.train, key) & seen(sp.eval, key)
    assert "group_id" in sp.describe() and "20 evaluation contexts" in sp.describe()


def test_contexts_joined_by_a_shared_group_stay_together():
    # Records of contexts 0 and 1 share group "g"; context 1 also has records of group "h",
    # which context 2 uses: all three are one unit; 3 is alone.
    recs = [Comparison("a", "x", "y", 1, context_id="0", group_id="g"),
            Comparison("b", "x", "y", 1, context_id="1", group_id="g"),
            Comparison("c", "x", "y", 1, context_id="1", group_id="h"),
            Comparison("d", "x", "y", 1, context_id="2", group_id="h"),
            Comparison("e", "x", "y", 1, context_id="3", group_id="k")]
    units = context_groups(Dataset("d", "comparison", recs))
    assert units["0"] == units["1"] == units["2"] != units["3"]


@pytest.mark.parametrize("seed", range(5))
def test_split_keeps_every_group_on_one_side(seed):
    groups = {f"c{i}": f"g{i % 4}" for i in range(24)}
    sp = split_contexts(groups, list(groups), list(groups), n_train=6, n_eval=10, seed=seed)
    assert {groups[c] for c in sp.train}.isdisjoint({groups[c] for c in sp.eval})
    assert len(sp.eval) == 10 and len(sp.train) == 6  # two groups of 6 give 12 >= 10
    assert split_contexts(groups, list(groups), list(groups), n_train=6, n_eval=10,
                          seed=seed) == sp  # seeded


def test_a_single_group_falls_back_to_contexts_and_says_so():
    groups = {f"c{i}": "all" for i in range(6)}
    sp = split_contexts(groups, list(groups), list(groups), n_train=2, n_eval=3, seed=0)
    assert sp.unit == "single_group" and "single group" in sp.describe()
    assert not set(sp.train) & set(sp.eval)


def test_no_spearman_where_contexts_have_fewer_than_three_items():
    pairs = _scored(8, 2)  # context = one pair: Spearman would be 2 * accuracy - 1
    with pytest.raises(DataError, match=f"{MIN_RANK_ITEMS}\\+ items"):
        split_for_ranking(pairs, items_by_context(pairs), n_train=2, n_eval=2, seed=0)
    ds = _scored(8, 4)
    with pytest.raises(DataError, match="max_items_per_context=2"):
        split_for_ranking(ds, items_by_context(ds), n_train=2, n_eval=2, seed=0, max_items=2)
    mixed = Dataset("m", "comparison", _scored(6, 4).records + [
        Comparison(f"s{c}", "a", "bb", 2, context_id=f"small{c}", item1_id="a", item2_id="b",
                   score1=0.0, score2=1.0) for c in range(3)])
    sp = split_for_ranking(mixed, items_by_context(mixed), n_train=9, n_eval=3, seed=0)
    assert not any(c.startswith("small") for c in sp.eval) and sp.n_too_small == 3


# -- the no-model baselines ----------------------------------------------------------------------

@pytest.mark.parametrize("longer_better", [True, False])
def test_length_sign_is_chosen_on_training_contexts(longer_better):
    ds = _scored(4, 5, longer_better=longer_better)
    items = items_by_context(ds)
    sign, rho = length_sign({c: items[c] for c in ("c0", "c1")})
    assert sign == (1 if longer_better else -1) and math.isclose(abs(rho), 1.0)
    rank = spearman(length_scores(items["c3"], sign), {k: it.score for k, it in
                                                       items["c3"].items()})
    assert math.isclose(rank, 1.0)


def test_memorised_win_rates_see_only_training_items():
    train = Dataset("t", "comparison", [
        Comparison("p", "good", "bad", 1, item1_id="A", item2_id="B"),
        Comparison("q", "good", "meh", 1, item1_id="A", item2_id="C")])
    rates = win_rates(train)
    items = {"x": ScoredItem("A", "other text", 1.0), "y": ScoredItem("Z", "bad", 0.0),
             "z": ScoredItem("Q", "never seen", 0.5)}
    scores, seen = memorised_scores(items, rates)
    assert scores == {"x": 1.0, "y": 0.0, "z": 0.5} and seen == 2  # by id, by text, unseen


def test_memorisation_wins_on_a_template_leak_and_ties_without_one():
    """story_sentiment's templates recur within a pool: split by context alone, memorised
    training win rates rank held-out passages almost perfectly; split by pool, every
    evaluation item is unseen and the baseline ties."""
    ds = builtin_dataset("story_sentiment")
    items = items_by_context(ds)
    meta = Dataset(ds.name, ds.kind, [])

    def memorised_rho(train_ctx, eval_ctx):
        train = training_comparisons(meta, [it for c in train_ctx for it in items[c].values()],
                                     None, 0)
        rates = win_rates(train)
        rhos = [spearman(memorised_scores(items[c], rates)[0],
                         {k: it.score for k, it in items[c].items()}) for c in eval_ctx]
        return float(np.mean([0.0 if math.isnan(r) else r for r in rhos]))

    leaky = sorted(items)
    assert memorised_rho(leaky[::2], leaky[1::2]) > 0.9
    sp = split_for_ranking(ds, items, n_train=10, n_eval=20, seed=0)
    assert memorised_rho(sp.train, sp.eval) == 0.0


# -- the probe's read-out --------------------------------------------------------------------

def _planted(n_groups: int = 6, per: int = 10, layers: int = 5, signal_at: int = 3, seed: int = 0):
    """Pairs whose label is readable at one read-out only."""
    rng = np.random.default_rng(seed)
    n, d = n_groups * per, 8
    labels = np.where(rng.random(n) < 0.5, 1, 2)
    acts = rng.normal(size=(n, 2, layers, d))
    acts[:, 0, signal_at, 0] += np.where(labels == 1, 3.0, -3.0)
    groups = [f"g{i // per}" for i in range(n)]
    items = [(f"g{i // per}/a{i}", f"g{i // per}/b{i}") for i in range(n)]
    return torch.tensor(acts, dtype=torch.float32), labels, groups, items


HOOKS5 = [f"blocks.{i}.hook_resid_post" for i in range(4)] + ["ln_final.hook_out"]


def test_the_read_out_is_chosen_on_whole_held_out_groups_of_training_pairs(monkeypatch):
    import ppairs_lens.evaluation.readout_choice as rc

    acts, labels, groups, items = _planted()
    seen = []
    real = rc.validation_split

    def spy(g, it, **kw):
        fit, val = real(g, it, **kw)
        seen.append((kw["by"], len(val)))
        return fit, val

    monkeypatch.setattr(rc, "validation_split", spy)
    choice = choose_probe_readout(acts, labels, groups, items, HOOKS5, kind="supervised",
                                  layer=None, seed=0)
    assert choice.index == 3 and choice.hook == HOOKS5[3]  # the spike, not a neighbour
    assert choice.selected_by == "validation" and len(choice.val_scores) == 5
    assert seen and all(by == "context" and n % 10 == 0 for by, n in seen)  # whole groups


def test_without_groups_the_validation_split_keeps_items_apart(monkeypatch):
    import ppairs_lens.evaluation.readout_choice as rc

    acts, labels, _, _ = _planted()
    n = len(labels)
    items = [(f"i{k % 12}", f"i{(k * 5 + 1) % 12}") for k in range(n)]  # items recur
    items = [(a, b) if a != b else (a, "i_x") for a, b in items]
    seen = []
    real = rc.validation_split

    def spy(g, it, **kw):
        fit, val = real(g, it, **kw)
        seen.append((kw["by"], len(fit) + len(val)))
        return fit, val

    monkeypatch.setattr(rc, "validation_split", spy)
    choose_probe_readout(acts, labels, [str(i) for i in range(n)], items, HOOKS5,
                         kind="supervised", layer=None, seed=1)
    assert seen and all(by == "item" and m < n for by, m in seen)  # cross pairs dropped
