"""The fast insertion path gives what the slow one gives (tiny random models).

Two levers, each checked against the path without it: a pass that stops after the deepest
block it reads (``runner.read_depth``, TransformerLens' ``stop_at_layer``), and an insertion
step whose ``k`` comparisons go into one lockstep round (``compare.prefetch``).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from ppairs_lens.activations.harvest import harvest_pairs
from ppairs_lens.activations.prompts import (
    ComparisonTemplate,
    build_contrast_pairs,
    prompt_prefix_text,
)
from ppairs_lens.activations.runner import read_depth, run_branches
from ppairs_lens.data.records import Comparison, Dataset
from ppairs_lens.judges.comparators import BatchComparator, ProbeComparator
from ppairs_lens.judges.context_cache import ContextKV, context_anchor
from ppairs_lens.judges.comparators import run_lockstep
from ppairs_lens.models.hook_points import READOUT_PRESET, hook_points
from ppairs_lens.probes.estimators import make_probe
from ppairs_lens.ranking.insertion import insertion_score

pytestmark = pytest.mark.usefixtures("one_torch_thread")

META = Dataset("meta", "comparison", [], aspect="confident", item_name="statement",
               context_name="context")
LEVELS = [0, 1, 2, 3]
_WORDS = ("warming sea level glaciers rainfall drought heat extremes ocean acidity likely "
          "very increased decreased since observed projected regions coastal").split()


@pytest.fixture(scope="module")
def deep(tokenizer):
    """A 4-layer tiny model: a read-out at block 1 leaves two blocks a full pass would run."""
    from ppairs_lens.models.tiny import tiny_model

    return tiny_model(seed=1, n_layers=4, tokenizer=tokenizer)


def statements(n: int, seed: int = 0) -> dict[str, str]:
    rng = random.Random(seed)
    return {f"s{i}": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14))).capitalize()
            + "." for i in range(n)}


def pairs_dataset(texts: dict[str, str], pairs) -> Dataset:
    recs = [Comparison(f"{a}|{b}", texts[a], texts[b], 1 + (i % 2), item1_id=a, item2_id=b)
            for i, (a, b) in enumerate(pairs)]
    return Dataset(META.name, "comparison", recs, aspect=META.aspect,
                   item_name=META.item_name, context_name=META.context_name)


def test_read_depth_is_one_past_the_deepest_block_read(deep, tiny):
    names = hook_points(READOUT_PRESET, deep.cfg.n_layers)  # blocks 0..3, then the final norm
    assert read_depth(deep, [names[1]]) == 2
    assert read_depth(deep, [names[0], names[2]]) == 3
    assert read_depth(deep, [names[3]]) is None  # the last block: the whole model anyway
    assert read_depth(deep, [names[4]]) is None  # the final norm
    assert read_depth(deep, [names[1]], logit_ids=[5]) is None  # logits need every block
    assert read_depth(deep, [names[1]], final_hooks=[(names[2], lambda x, hook: x)]) is None
    assert read_depth(deep, []) is None
    assert read_depth(tiny, [hook_points(READOUT_PRESET, 2)[0]]) == 1


def test_a_pass_stopped_after_its_read_out_reads_the_same(deep):
    texts = statements(10)
    ids = list(texts)
    pairs = [(a, b) for a in ids[:4] for b in ids[4:7]]  # rows share their first statement
    cps = build_contrast_pairs(deep.tokenizer, pairs_dataset(texts, pairs))
    names = [hook_points(READOUT_PRESET, deep.cfg.n_layers)[1]]
    args = ([p.prefix_ids for p in cps], [p.final_ids for p in cps], [p.group for p in cps])
    full = run_branches(deep, *args, names=names).acts
    stopped = run_branches(deep, *args, names=names, stop_after_reads=True).acts
    torch.testing.assert_close(stopped, full, rtol=1e-5, atol=1e-5)
    # ... and both are what the plain harvest stores at that read-out
    torch.testing.assert_close(stopped[:, :, 0], harvest_pairs(deep, cps)[:, :, 1], rtol=1e-4,
                               atol=1e-4)


def test_context_caches_of_a_shallow_read_never_serve_a_deeper_one(deep):
    texts = statements(6, seed=3)
    pairs = [("s0", "s1"), ("s2", "s3"), ("s4", "s5")]
    cps = build_contrast_pairs(deep.tokenizer, pairs_dataset(texts, pairs))
    names = hook_points(READOUT_PRESET, deep.cfg.n_layers)
    ds = pairs_dataset(texts, pairs)
    anchor = context_anchor(deep.tokenizer, prompt_prefix_text(deep.tokenizer,
                            ComparisonTemplate(), ds, ds.records[0]),
                            "Consider the following two statements.\n\n")
    assert anchor is not None and all(p.prefix_ids[:len(anchor)] == anchor for p in cps)
    rows = ([p.prefix_ids for p in cps], [p.final_ids for p in cps], [anchor] * len(cps))
    shared = ContextKV(deep)
    shallow = shared.run(*rows, names=[names[1]]).acts
    deeper = shared.run(*rows, names=[names[3], names[4]]).acts  # the same anchor, all blocks
    assert shared.n_context_builds == 2 and shared.n_fallback_rows == 0
    plain = ContextKV(deep, stop_after_reads=False)
    torch.testing.assert_close(shallow, plain.run(*rows, names=[names[1]]).acts, rtol=1e-5,
                               atol=1e-5)
    torch.testing.assert_close(deeper, plain.run(*rows, names=[names[3], names[4]]).acts,
                               rtol=1e-5, atol=1e-5)


class _Table(BatchComparator):
    """A deterministic comparator from a table of item strengths; counts its batches."""

    def __init__(self, strength: dict[str, float]):
        super().__init__({k: k for k in strength})
        self.strength = strength
        self.batch_sizes: list[int] = []

    def _evaluate(self, pairs):
        self.batch_sizes.append(len(pairs))
        return np.array([1 / (1 + np.exp(self.strength[b] - self.strength[a]))
                         for a, b in pairs])


def _refs_and_items(n_refs: int = 5, n_items: int = 12, seed: int = 0):
    rng = random.Random(seed)
    refs = {lv: [f"r{lv}.{j}" for j in range(n_refs)] for lv in LEVELS}
    strength = {r: lv + rng.gauss(0, 0.6) for lv, rs in refs.items() for r in rs}
    items = {f"t{i}": rng.uniform(-0.5, 3.5) for i in range(n_items)}
    return refs, {**strength, **items}, list(items)


def test_lockstep_insertion_asks_each_step_in_one_round_with_the_same_results():
    refs, strength, items = _refs_and_items()
    k = 3

    def task(iid, j, plain):
        return lambda cmp: insertion_score(iid, LEVELS, refs, (lambda a, b: cmp(a, b)) if plain
                                           else cmp, k=k, seed=j, return_trace=True)

    alone = {iid: insertion_score(iid, LEVELS, refs, _Table(strength), k=k, seed=j,
                                  return_trace=True) for j, iid in enumerate(items)}
    batched, plain = _Table(strength), _Table(strength)
    got = run_lockstep({iid: task(iid, j, False) for j, iid in enumerate(items)}, batched)
    old = run_lockstep({iid: task(iid, j, True) for j, iid in enumerate(items)}, plain)
    assert got == alone == old
    # Four levels: two binary-search steps, so two rounds of k pairs a statement (not 2k)
    assert batched.batch_sizes == [k * len(items)] * 2
    assert len(plain.batch_sizes) == 2 * k
    assert batched.n_calls == plain.n_calls == 2 * k * len(items)


def test_fast_probe_insertion_places_statements_as_the_slow_path(deep):
    texts = statements(40, seed=7)
    ids = list(texts)
    refs = {lv: ids[lv * 6:(lv + 1) * 6] for lv in LEVELS}  # 24 references, 16 to place
    train = [(a, b) for a, b in zip(ids[:24], ids[1:24] + ids[:1])]
    layer = 1  # blocks.1.hook_resid_post: half the model's depth
    acts = harvest_pairs(deep, build_contrast_pairs(deep.tokenizer, pairs_dataset(texts, train)))
    labels = np.array([1 + (i % 2) for i in range(len(train))])
    probe = make_probe("mass_mean").fit(acts[:, :, layer], labels, layer=layer)
    k, todo = 4, ids[24:]

    def place(stop: bool, batched: bool):
        comp = ProbeComparator(deep, probe, layer, texts, META,
                               runner=ContextKV(deep, stop_after_reads=stop))

        def task(iid, j):
            return lambda cmp: insertion_score(iid, LEVELS, refs, cmp if batched else
                                               (lambda a, b: cmp(a, b)), k=k, seed=j,
                                               return_trace=True)
        out = run_lockstep({iid: task(iid, j) for j, iid in enumerate(todo)}, comp)
        return out, comp

    slow, slow_comp = place(stop=False, batched=False)
    fast, fast_comp = place(stop=True, batched=True)
    assert [fast[i][0] for i in todo] == [slow[i][0] for i in todo]
    assert all(fast[i][1].path == slow[i][1].path for i in todo)
    got = [s.mean_p for i in todo for s in fast[i][1].steps]
    want = [s.mean_p for i in todo for s in slow[i][1].steps]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert {len(set(fast[i][1].path)) for i in todo} == {2}  # a real binary search
    assert fast_comp.n_batches == 2 and slow_comp.n_batches == 2 * k
    assert fast_comp.n_rows == slow_comp.n_rows == 2 * k * len(todo)
    assert fast_comp.n_tokens < slow_comp.n_tokens  # each statement's part once per step
