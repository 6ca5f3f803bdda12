"""Preferences on demand (ppairs_lens.judges.comparators, context_cache, lockstep) and the
scoring baselines (ppairs_lens.judges.scoring).

All on the tiny random model: the numbers are meaningless, but caching, cost accounting and
agreement with the plain harvest / forward pass are exact properties.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from ppairs_lens.activations.harvest import harvest_pairs
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.data.records import Comparison, Dataset, ScoredItem
from ppairs_lens.errors import TemplateError
from ppairs_lens.judges.comparators import ProbeComparator, ZeroShotComparator
from ppairs_lens.judges.context_cache import ContextKV
from ppairs_lens.judges.comparators import run_lockstep
from ppairs_lens.judges.scoring import ScoreTemplate, score_items, score_prompt
from ppairs_lens.judges.zero_shot import zero_shot
from ppairs_lens.probes.estimators import make_probe
from ppairs_lens.ranking.merge_sort import beam_merge_sort, merge_sort

LAYER = 1
META = Dataset("meta", "comparison", [], aspect="positive", item_name="sentence",
               context_name="passage")
_FEEL = ["It was awful.", "It was dull.", "It was fine.", "It was nice.", "It was great!",
         "It was the best day ever.", "It was sad.", "It was okay, I guess."]


def scored_items(n_ctx: int = 3, per: int = 8) -> dict[str, ScoredItem]:
    out = {}
    for c in range(n_ctx):
        ctx = f"Sam went to the park number {c} with a friend and stayed all afternoon."
        for i in range(per):
            iid = f"c{c}/s{i}"
            out[iid] = ScoredItem(iid, f"{_FEEL[i % len(_FEEL)]} (note {c}.{i})", float(i % 5),
                                  f"c{c}", ctx)
    return out


def comparisons_of(items: dict[str, ScoredItem], pairs) -> Dataset:
    recs = [Comparison(f"{a}|{b}", items[a].text, items[b].text, 1 if i % 2 else 2,
                       context=items[a].context, context_id=items[a].context_id, item1_id=a,
                       item2_id=b) for i, (a, b) in enumerate(pairs)]
    return dataclasses.replace(META, records=recs)


@pytest.fixture(scope="module")
def setup(tiny):
    items = scored_items()
    ids = list(items)
    train_pairs = [(ids[i], ids[j]) for i in range(0, 8) for j in range(i + 1, 8)][:16]
    ds = comparisons_of(items, train_pairs)
    acts = harvest_pairs(tiny, build_contrast_pairs(tiny.tokenizer, ds))
    probe = make_probe("mass_mean").fit(acts[:, :, LAYER], np.array(ds.labels()), layer=LAYER)
    return items, probe


class _Forwards:
    """Count forward passes of the bridge."""

    def __init__(self, bridge):
        self.n = 0
        self.handle = bridge.register_forward_hook(lambda *a: self._hit())

    def _hit(self):
        self.n += 1

    def close(self):
        self.handle.remove()


def test_probe_comparator_matches_probe_on_harvested_pairs_and_caches(tiny, setup):
    items, probe = setup
    pairs = [("c1/s0", "c1/s3"), ("c1/s5", "c1/s2"), ("c2/s1", "c2/s7")]
    comp = ProbeComparator(tiny, probe, LAYER, items, META)
    got = [comp(a, b) for a, b in pairs]
    ref_acts = harvest_pairs(tiny, build_contrast_pairs(tiny.tokenizer, comparisons_of(items, pairs)))
    want = probe.predict_proba(ref_acts[:, :, LAYER])[:, 1]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for k, (a, b) in enumerate(pairs):
        torch.testing.assert_close(comp.acts[(a, b)], ref_acts[k, :, LAYER], rtol=1e-4,
                                   atol=1e-4)
    assert comp.n_rows == 3 and comp.n_calls == 3
    assert comp.runner.n_fallback_rows == 0  # every row reused its context's cached prefix
    # Asking again runs nothing: no forward pass, no new row.
    fw = _Forwards(tiny)
    try:
        again = [comp(a, b) for a, b in pairs]
    finally:
        fw.close()
    assert fw.n == 0 and comp.n_rows == 3 and comp.n_calls == 6
    assert again == got
    # The other order is another prompt.
    comp("c1/s3", "c1/s0")
    assert comp.n_rows == 4


def test_calibrated_comparator_asks_both_orders_in_one_batch(tiny, setup):
    items, probe = setup
    raw = ProbeComparator(tiny, probe, LAYER, items, META)
    cal = ProbeComparator(tiny, probe, LAYER, items, META, calibrate=True)
    p = cal("c0/s1", "c0/s4")
    assert cal.n_rows == 2 and cal.n_batches == 1
    # The log-odds rule: sigmoid((logit p(a, b) - logit p(b, a)) / 2), not a probability mean.
    # abs 1e-5: float32 round-off differs between batch shapes
    pab, pba = raw("c0/s1", "c0/s4"), raw("c0/s4", "c0/s1")
    z = (math.log(pab / (1 - pab)) - math.log(pba / (1 - pba))) / 2
    assert p == pytest.approx(1 / (1 + math.exp(-z)), abs=1e-5)
    assert cal.logodds[("c0/s1", "c0/s4")] == pytest.approx(math.log(pab / (1 - pab)), abs=1e-4)
    assert cal("c0/s4", "c0/s1") == pytest.approx(1 - p) and cal.n_rows == 2


def test_sorting_harvests_at_most_n_log_n_pairs(tiny, setup):
    items, probe = setup
    ids = [k for k in items if k.startswith("c0/")]
    n = len(ids)
    comp = ProbeComparator(tiny, probe, LAYER, items, META)
    order = merge_sort(ids, comp)
    assert sorted(order) == sorted(ids)
    bound = n * math.ceil(math.log2(n))
    assert comp.n_rows <= bound < n * (n - 1)
    before = comp.n_rows
    beam_merge_sort(ids, comp, beam_size=1)  # same comparisons as greedy: all cached
    assert comp.n_rows == before


def test_lockstep_gives_the_sequential_results_in_fewer_batches(tiny, setup):
    items, probe = setup
    groups = {c: [k for k in items if k.startswith(f"{c}/")] for c in ("c0", "c1", "c2")}
    seq = ProbeComparator(tiny, probe, LAYER, items, META)
    want = {c: merge_sort(ids, seq) for c, ids in groups.items()}
    lock = ProbeComparator(tiny, probe, LAYER, items, META)
    got = run_lockstep({c: (lambda cmp, ids=ids: merge_sort(ids, cmp))
                        for c, ids in groups.items()}, lock)
    assert got == want
    assert lock.n_rows == seq.n_rows
    assert lock.n_batches < seq.n_batches


def test_lockstep_reraises_task_errors(tiny, setup):
    items, probe = setup
    comp = ProbeComparator(tiny, probe, LAYER, items, META)

    def bad(cmp):
        cmp("c0/s0", "c0/s1")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_lockstep({"ok": lambda cmp: merge_sort(["c1/s0", "c1/s1", "c1/s2"], cmp),
                      "bad": bad}, comp)


def test_items_of_different_contexts_are_refused(tiny, setup):
    items, probe = setup
    comp = ProbeComparator(tiny, probe, LAYER, items, META)
    with pytest.raises(ValueError, match="different contexts"):
        comp("c0/s0", "c1/s0")


def test_plain_text_items_without_context(tiny, setup):
    _, probe = setup
    texts = {"a": "The sea level rose.", "b": "Glaciers retreated a lot.", "c": "It rained."}
    comp = ProbeComparator(tiny, probe, LAYER, texts, {"aspect": "confident",
                                                       "item_name": "statement"})
    p = comp("a", "b")
    ds = Dataset("t", "comparison", [Comparison("a|b", texts["a"], texts["b"], 1)],
                 aspect="confident", item_name="statement")
    acts = harvest_pairs(tiny, build_contrast_pairs(tiny.tokenizer, ds))
    assert p == pytest.approx(probe.predict_proba(acts[:, :, LAYER])[0, 1], abs=1e-6)


def test_zero_shot_comparator_equals_the_evaluator(tiny, setup):
    items, _ = setup
    pairs = [("c0/s0", "c0/s2"), ("c2/s6", "c2/s3")]
    comp = ZeroShotComparator(tiny, items, META)
    got = [comp(a, b) for a, b in pairs]
    want = zero_shot(tiny, comparisons_of(items, pairs))
    np.testing.assert_allclose(got, want.p, rtol=1e-5, atol=1e-6)
    assert comp.n_rows == 4  # calibrated: two prompts per comparison
    # Same raw log-odds per order as the evaluator, read from the logits.
    for k, (a, b) in enumerate(pairs):
        assert comp.logodds[(a, b)] == pytest.approx(want.ld_original[k], abs=1e-4)
        assert comp.logodds[(b, a)] == pytest.approx(want.ld_swapped[k], abs=1e-4)


def test_score_prompt_ends_right_before_a_single_score_token(tiny, setup):
    items, _ = setup
    tok = tiny.tokenizer
    sp = score_prompt(tok, META, "c0/s0", items["c0/s0"])
    assert len(sp.score_ids) == 5
    for s, i in zip("12345", sp.score_ids):
        assert tok.decode([i]) == s
        assert tok(sp.text + s, add_special_tokens=False).input_ids == list(sp.prefix_ids) + [i]
    assert sp.text.endswith("I would rate it ")
    with pytest.raises(TemplateError, match="not one token"):
        score_prompt(tok, META, "x", "text", ScoreTemplate(scores=("1", "22", "3", "4", "5")))


def test_geval_is_the_probability_weighted_mean_of_a_plain_forward(tiny, setup):
    items, _ = setup
    chosen = {k: items[k] for k in ("c0/s0", "c0/s4", "c1/s2", "c2/s7")}
    res = score_items(tiny, chosen, META)
    runner = ContextKV(tiny)
    res_kv = score_items(tiny, chosen, META, runner=runner)
    assert res.n_rows == 4 and runner.n_fallback_rows == 0
    for k, iid in enumerate(chosen):
        sp = score_prompt(tiny.tokenizer, META, iid, chosen[iid])
        with torch.inference_mode():
            logits = tiny(torch.tensor([list(sp.prefix_ids)]))[0, -1, list(sp.score_ids)]
        p = torch.softmax(logits.double(), -1).numpy()
        geval = float(p @ np.arange(1, 6))
        assert res.geval[k] == pytest.approx(geval, abs=1e-4)
        assert res_kv.geval[k] == pytest.approx(geval, abs=1e-4)
        assert res.direct[k] == 1 + int(np.argmax(p))


def test_scores_within_the_tie_band_are_ties_whatever_noise_moved_them():
    from ppairs_lens.judges.scoring import SCORE_TIE, ItemScores, chained_ties

    rng = np.random.default_rng(0)
    noise = rng.uniform(-1e-6, 1e-6, size=6)
    # a0 and a1 are one summary twice, a2 another; b0 copies a0's score in another article
    raw = np.array([3.2, 3.2, 3.5, 3.2, 2.0, 2.0 + 3 * SCORE_TIE]) + noise
    groups = ["a", "a", "a", "b", "c", "c"]
    tied = chained_ties(raw, groups)
    assert tied[0] == tied[1] == min(raw[0], raw[1])
    assert tied[2] == raw[2] and tied[3] == raw[3]          # alone in its chain, untouched
    assert tied[4] == raw[4] and tied[5] == raw[5]          # further apart than the band
    # a chain: each within the band of the one before, all take its smallest value
    chain = chained_ties(np.array([1.0, 1.0 + 0.6 * SCORE_TIE, 1.0 + 1.2 * SCORE_TIE]), "zzz")
    assert (chain == 1.0).all()
    # without the rule one noisy copy would beat the other: the pairwise answer is a tie
    for trial in range(50):
        jitter = rng.normal(0, 1e-6, size=2)
        t = chained_ties(np.array([4.1, 4.1]) + jitter, ["a", "a"])
        assert t[0] == t[1]

    # direct: two score logits within the band of the largest are a tie, the lower score wins
    lg = np.array([[0.0, 5.0, 5.0 + SCORE_TIE / 2, 1.0, 0.0],
                   [0.0, 5.0 + SCORE_TIE / 2, 5.0, 1.0, 0.0],
                   [0.0, 5.0, 5.0 + 2 * SCORE_TIE, 1.0, 0.0]])
    s = ItemScores(("x", "y", "z"), (1.0, 2.0, 3.0, 4.0, 5.0), lg, 3, 0, ("g", "g", "g"))
    assert list(s.direct) == [2.0, 2.0, 3.0]

    # an item without an answer (NaN logits) has none, and lends no score to another
    with_nan = np.array([3.0, np.nan, 3.0 + SCORE_TIE / 2, 3.5])
    t = chained_ties(with_nan, "gggg")
    assert t[0] == t[2] == 3.0 and np.isnan(t[1]) and t[3] == 3.5
    lg[1, 2] = np.nan
    assert np.isnan(ItemScores(("x", "y", "z"), (1.0, 2.0, 3.0, 4.0, 5.0), lg, 3, 0,
                               ("g", "g", "g")).direct[1])
