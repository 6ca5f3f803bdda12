"""The prefix tree: planning from token ids, and runs over it equal to unshared runs."""

from dataclasses import replace

import pytest
import torch

from ppairs_lens.activations.harvest import harvest_pairs, reference_activations
from ppairs_lens.activations.runner import HarvestSettings, run_branches
from ppairs_lens.activations.prefix_sharing import plan, subgroups, tokens_computed
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.data.records import Comparison, Dataset
from ppairs_lens.models.hook_points import READOUT_PRESET, hook_points


def test_subgroups_follow_shared_tokens():
    ctx = [1, 2, 3]
    a, b = [10] * 9, [20] * 9  # two "first items", 9 tokens each
    prefixes = [ctx + a + [5, 6], ctx + b + [7], ctx + a + [8], ctx + [30, 31], ctx + b + [9, 9]]
    subs = subgroups(prefixes, range(5), 3, min_shared=8)
    by_rows = {s.rows: s for s in subs}
    assert set(by_rows) == {(0, 2), (1, 4), (3,)}
    assert by_rows[(0, 2)].mid == tuple(a) and by_rows[(0, 2)].tails == ((5, 6), (8,))
    assert by_rows[(3,)].mid == () and by_rows[(3,)].tails == ((30, 31),)
    # Fewer shared tokens than min_shared, or too small a saving: the flat plan.
    for kw in ({"min_shared": 10}, {"min_saving": 0.5}):
        flat = subgroups(prefixes, range(5), 3, **kw)
        assert all(len(s.rows) == 1 and s.tails == ((),) for s in flat)
        assert sorted(s.mid for s in flat) == sorted(tuple(p[3:]) for p in prefixes)


def test_tokens_computed_counts_each_shared_part_once():
    ctx = list(range(100, 140))
    prefixes = [ctx + [10] * 9 + [5, 6], ctx + [10] * 9 + [8], ctx + [20, 21]]
    plans = plan(prefixes, ["g"] * 3, share=True)
    # pooled (3 rows < MIN_GROUP_ROWS) into one group: context 40, mid 9 once, tails 2 + 1,
    # the third row's 2 tokens, and 2 branch tokens per row.
    assert tokens_computed(plans, 2) == 40 + 9 + (2 + 2) + (1 + 2) + (2 + 2)
    alone = plan(prefixes, ["g"] * 3, share=False)
    assert tokens_computed(alone, 2) == sum(len(p) + 2 for p in prefixes)


def _all_pairs_dataset(n_items: int = 6, words: int = 40) -> Dataset:
    """Every ordered pair of items under one shared context: each item is first in several
    pairs, so pairs share the context *and* their first item."""
    items = [f"Item {k} says " + "word " * (words + 5 * k) for k in range(n_items)]
    recs = [Comparison(f"{i}-{j}", items[i], items[j], 1 if i > j else 2,
                       context="A shared article about items. " * 4, context_id="art")
            for i in range(n_items) for j in range(n_items) if i != j]
    return Dataset("all_pairs", "comparison", recs, aspect="longer", item_name="item",
                   context_name="article")


@pytest.mark.parametrize("budget", [100_000, 300])  # one batch; subgroups split across chunks
def test_harvest_with_shared_first_items_equals_reference(tiny, budget):
    pairs = build_contrast_pairs(tiny.tokenizer, _all_pairs_dataset())
    plans = plan([p.prefix_ids for p in pairs], [p.group for p in pairs])
    assert len(plans) == 1 and max(len(s.rows) for s in plans[0].subgroups) == 5
    acts = harvest_pairs(tiny, pairs, HarvestSettings(token_budget=budget))
    for i in (0, 7, 29):
        for side in range(2):
            ref = reference_activations(tiny, list(pairs[i].prefix_ids) + [pairs[i].final_ids[side]])
            err = (acts[i, side] - ref).norm(dim=-1) / ref.norm(dim=-1)
            assert err.max().item() < 1e-4
    alone = harvest_pairs(tiny, pairs, HarvestSettings(share_prefixes=False))
    torch.testing.assert_close(acts, alone, rtol=1e-4, atol=1e-4)


def test_duplicate_prompts_and_prefix_rows(tiny):
    """Rows whose prompt is entirely shared (duplicates) have empty tails: still correct."""
    ds = _all_pairs_dataset(3)
    ds.records = ds.records + [replace(r, pair_id=r.pair_id + "dup") for r in ds.records]
    pairs = build_contrast_pairs(tiny.tokenizer, ds)
    acts = harvest_pairs(tiny, pairs, HarvestSettings(token_budget=250))
    n = len(pairs) // 2
    torch.testing.assert_close(acts[:n], acts[n:], rtol=1e-5, atol=1e-5)
    alone = harvest_pairs(tiny, pairs, HarvestSettings(share_prefixes=False))
    torch.testing.assert_close(acts, alone, rtol=1e-4, atol=1e-4)


def test_rows_without_a_shared_middle_leave_the_group_cache_intact(tiny):
    """Unordered pairs (as SummEval's 120 of 16 summaries): the last first-items have a
    single pair, so they start their own part at the tail step from the group's context.
    With one row per batch that context's cache must be copied, not extended in place (it
    serves the rows after it)."""
    ds = _all_pairs_dataset(6, words=150)
    ds.records = [r for r in ds.records if r.pair_id < r.pair_id[::-1]]  # i < j only
    ds.records += [Comparison(f"x{k}", f"Other {k} " + "odd " * (10 + k), "Last " + "w " * 12,
                              1, context=ds.records[0].context, context_id="art")
                   for k in range(3)]
    pairs = build_contrast_pairs(tiny.tokenizer, ds)
    subs = plan([p.prefix_ids for p in pairs], [p.group for p in pairs])[0].subgroups
    assert sum(1 for s in subs if not s.mid) >= 2  # several rows with no shared middle
    alone = harvest_pairs(tiny, pairs, HarvestSettings(share_prefixes=False))
    for budget in (1, 100_000):  # one row per forward pass; everything at once
        acts = harvest_pairs(tiny, pairs, HarvestSettings(token_budget=budget))
        torch.testing.assert_close(acts, alone, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("budget", [100_000, 300])
def test_branches_read_in_the_tail_pass_equal_a_pass_of_their_own(tiny, budget):
    """By default a row's tail (right-padded to its part's longest) and its branch tokens
    share one forward pass under a 4-D mask; with ``final_hooks`` (here one that changes
    nothing) the tails run first and the branches alone. Both read the same activations and
    logits as the straightforward run of each full prompt."""
    pairs = build_contrast_pairs(tiny.tokenizer, _all_pairs_dataset())
    assert len({len(p.prefix_ids) for p in pairs}) > 5  # tails of many lengths: padding
    names = hook_points(READOUT_PRESET, tiny.cfg.n_layers)
    args = ([p.prefix_ids for p in pairs], [p.final_ids for p in pairs],
            [p.group for p in pairs])
    kw = dict(names=names, logit_ids=[5, 17], settings=HarvestSettings(token_budget=budget))
    fused = run_branches(tiny, *args, **kw)
    apart = run_branches(tiny, *args, final_hooks=[("hook_embed", lambda x, hook: x)], **kw)
    torch.testing.assert_close(fused.acts, apart.acts, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(fused.logits, apart.logits, rtol=1e-4, atol=1e-4)
    for i in (0, 13, 29):
        for side in range(2):
            ids = list(pairs[i].prefix_ids) + [pairs[i].final_ids[side]]
            ref = reference_activations(tiny, ids)
            err = (fused.acts[i, side] - ref).norm(dim=-1) / ref.norm(dim=-1)
            assert err.max().item() < 1e-4
            with torch.inference_mode():
                logits = tiny(torch.tensor([ids]))[0, -1, [5, 17]]
            torch.testing.assert_close(fused.logits[i, side], logits, rtol=1e-4, atol=1e-4)
