"""No-model baselines: memorisation of training win rates and text length."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.evaluation.baselines import MEMO_KEYS, memorisation_baseline, length_baseline
from ppairs_lens.evaluation.metrics import accuracy, targets


def _ranked_pairs(n: int, n_items: int, seed: int, lengths: bool = True) -> list[PairInfo]:
    """Pairs among items with a fixed rank (lower index wins) and random order; the length
    of an item is unrelated to its rank."""
    rng = np.random.default_rng(seed)
    length = rng.integers(10, 200, size=n_items)
    out = []
    for k in range(n):
        a, b = rng.choice(n_items, size=2, replace=False)
        label = 1 if a < b else 2
        out.append(PairInfo(f"p{k}", label, f"p{k}", f"p{k}", f"w{a}", f"w{b}",
                            len1=int(length[a]) if lengths else None,
                            len2=int(length[b]) if lengths else None))
    return out


def _labels(pairs):
    return np.array([p.label for p in pairs])


def test_memorisation_reads_recurring_items_and_is_chance_on_unseen_ones():
    pairs = _ranked_pairs(400, 30, seed=0)
    tr, te = pairs[:300], pairs[300:]
    b = memorisation_baseline(tr, _labels(tr), te)
    assert b.available and b.predictor.startswith("item_id")
    assert accuracy(targets(_labels(te)), b.p) > 0.85              # items leak: it memorises
    unseen = [replace(p, item1_id="x" + str(p.item1_id), item2_id="x" + str(p.item2_id))
              for p in _ranked_pairs(100, 30, seed=1)]             # other items altogether
    b2 = memorisation_baseline(tr, _labels(tr), unseen)
    # every answer would be the prior 0.5: no baseline at all (n/a), with the reason
    assert not b2.available and "nothing to memorise" in b2.reason
    b3 = memorisation_baseline(tr, _labels(tr), [*unseen, te[0]])   # one pair informed
    assert b3.available and (b3.p != 0.5).sum() >= 1


def test_memorisation_reads_only_fields_a_store_writes():
    """The candidate keys are fields of ``pair_info``'s records, nothing a store never holds."""
    from ppairs_lens.activations.pipeline import pair_info
    from ppairs_lens.data import builtin_dataset

    fields = set(pair_info(builtin_dataset("larger_number", n=4))[0].to_json())
    assert {f for pair in MEMO_KEYS.values() for f in pair} <= fields


def test_statements_memorise_the_truth_rate_of_their_group():
    pairs = [PairInfo(f"s{k}", 1 if k % 4 else 2, f"city{k % 4}", f"city{k % 4}",
                      len1=30 + k % 7, kind="statement") for k in range(80)]
    b = memorisation_baseline(pairs[:60], _labels(pairs[:60]), pairs[60:])
    assert b.predictor.startswith("group_id")
    assert accuracy(targets(_labels(pairs[60:])), b.p) == 1.0


@pytest.mark.parametrize("longer_wins", [True, False])
def test_length_finds_the_sign_of_length_on_train(longer_wins):
    pairs = [replace(p, **dict(zip(("len1", "len2"), (120, 80) if (p.label == 1) == longer_wins
                                   else (80, 120))))   # make length decide (either way round)
             for p in _ranked_pairs(300, 40, seed=3)]
    b = length_baseline(pairs[:200], _labels(pairs[:200]), pairs[200:])
    assert b.available and ("longer" if longer_wins else "shorter") in b.predictor
    assert accuracy(targets(_labels(pairs[200:])), b.p) == 1.0
    assert b.train_accuracy == 1.0


def test_length_is_near_chance_when_length_says_nothing_and_statements_use_the_median():
    pairs = _ranked_pairs(600, 60, seed=4)
    b = length_baseline(pairs[:400], _labels(pairs[:400]), pairs[400:])
    assert abs(accuracy(targets(_labels(pairs[400:])), b.p) - 0.5) < 0.12
    st = [PairInfo(f"s{k}", 1 if k % 2 else 2, f"s{k}",
                   len1=50 + (10 if k % 2 else -10) + k % 3, kind="statement")
          for k in range(100)]
    b = length_baseline(st[:70], _labels(st[:70]), st[70:])
    assert "statement is true" in b.predictor
    assert accuracy(targets(_labels(st[70:])), b.p) == 1.0


def test_missing_fields_give_a_reason_not_an_error():
    pairs = _ranked_pairs(50, 10, seed=5, lengths=False)
    b = length_baseline(pairs[:30], _labels(pairs[:30]), pairs[30:])
    assert not b.available and "len1" in b.reason
    pairs = [replace(p, item1_id=None, item2_id=None, len1=10, len2=12) for p in pairs]
    b = memorisation_baseline(pairs[:30], _labels(pairs[:30]), pairs[30:])
    assert not b.available and "item ids" in b.reason


def test_summeval_style_ids_are_system_identity():
    """SummEval's summary ids (S0..S15) recur in every article: each names the system that
    wrote it, so the lookup is a system-identity baseline, and it wins where systems differ."""
    rng = np.random.default_rng(5)
    quality = {f"S{s}": s for s in range(6)}        # S5 the best system in every article

    def article(a):
        out = []
        for k in range(6):
            x, y = rng.choice(6, size=2, replace=False)
            label = 1 if x > y else 2
            out.append(PairInfo(f"A{a}:{k}", label, f"A{a}", f"A{a}", f"S{x}", f"S{y}",
                                len1=100, len2=100))
        return out
    train = [p for a in range(20) for p in article(a)]
    test = [p for a in range(20, 30) for p in article(a)]
    b = memorisation_baseline(train, _labels(train), test)
    assert b.predictor.startswith("system id")
    assert accuracy(targets(_labels(test)), b.p) > 0.9
    assert quality["S5"] == 5


def test_length_balanced_accuracy_only_on_enough_close_pairs():
    from ppairs_lens.evaluation.baselines import length_balanced, length_balanced_accuracy

    close = [PairInfo(f"c{k}", 1 + k % 2, len1=100, len2=95) for k in range(30)]
    far = [PairInfo(f"f{k}", 1, len1=100, len2=50) for k in range(10)]
    pairs = close + far
    assert length_balanced(pairs).tolist() == [True] * 30 + [False] * 10
    y = _labels(pairs)
    longer = np.full(len(pairs), 0.9)                  # "item 1 wins": right on every far pair
    out = length_balanced_accuracy(y, {"length": longer}, pairs)
    assert out["n"] == 30 and out["accuracy"]["length"] == pytest.approx(0.5)
    assert length_balanced_accuracy(y[:35], {"length": longer[:35]}, pairs[:35],
                                    min_pairs=31) is None
