"""The batched sweep scoring (every layer and kind on one draw of the resamples, through group
sums) gives the per-layer path's numbers
(``benchmarks/sweep_scoring_reference.py``) bit for bit: on random data with few groups, one
group per pair, no groups, ragged contexts and ties, and on the tiny model's stores."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.sweep_scoring_reference import (context_rhos_loop, per_layer_scores,
                                                synthetic_contexts)
from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.evaluation import resampled
from ppairs_lens.evaluation.bootstrap import (batch_intervals, draw_resamples, intervals,
                                              mean_ci, resample_weights)
from ppairs_lens.evaluation.metrics import METRICS, context_rhos
from ppairs_lens.evaluation.resampled import RESAMPLED, WEIGHTED
from ppairs_lens.evaluation.sweep_scores import score_pairs, score_pairs_batch

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _safe(fn, y, p):
    try:
        return float(fn(y, p))
    except ValueError:
        return float("nan")


def _same(a: dict, b: dict) -> bool:
    """Equal dicts of intervals, NaN equal to NaN (bit for bit otherwise)."""
    if a.keys() != b.keys():
        return False
    for m in a:
        if a[m].keys() != b[m].keys():
            return False
        for f, x in a[m].items():
            y = b[m][f]
            if not (x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))):
                return False
    return True


# --- data ----------------------------------------------------------------------------------
full_contexts = synthetic_contexts  # all ordered pairs per context, tied probabilities


def ragged_contexts(seed=3):
    """Contexts of 2-8 items with 1-40 comparisons, some with constant gold or no scores;
    a constant column, a perfect one, and coarse (tied) random ones."""
    rng = np.random.default_rng(seed)
    pairs = []
    for c in range(25):
        m = int(rng.integers(2, 9))
        gold = rng.integers(1, 4, size=m).astype(float)
        if c % 7 == 0:
            gold[:] = 3.0
        for t in range(int(rng.integers(1, 40))):
            a, b = rng.choice(m, 2, replace=False)
            sc = (None, None) if c % 11 == 5 else (gold[a], gold[b])
            pairs.append(PairInfo(f"c{c}-{t}", int(rng.integers(1, 3)), f"c{c}", f"g{c % 23}",
                                  f"S{a}", f"S{b}", *sc))
    y = np.array([q.label for q in pairs])
    p = np.round(rng.random((len(y), 5)), 1)
    p[:, 0] = 0.5
    p[:, 1] = np.where(y == 1, 0.9, 0.1)
    return y, p, pairs


CASES = {
    "contexts": lambda: (*full_contexts(), lambda ps: [q.group for q in ps]),
    "one group per pair": lambda: (*full_contexts(n_ctx=6), lambda ps: [q.pair_id for q in ps]),
    "no groups": lambda: (*full_contexts(n_ctx=6), lambda ps: None),
    "ragged": lambda: (*ragged_contexts(), lambda ps: [q.group for q in ps]),
    "ragged by context": lambda: (*ragged_contexts(), lambda ps: [q.context_id for q in ps]),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("n_boot,seed", [(200, 0), (150, 7)])
def test_batch_equals_the_per_layer_path_bit_for_bit(case, n_boot, seed):
    y, p, pairs, groups_of = CASES[case]()
    groups = groups_of(pairs)
    batch = score_pairs_batch(y, p, pairs, groups, n_boot=n_boot, seed=seed)
    assert len(batch) == p.shape[1]
    for j, got in enumerate(batch):
        want = per_layer_scores(y, p[:, j], pairs, groups, n_boot=n_boot, seed=seed)
        assert _same(got, want), (case, j)
        assert _same(score_pairs(y, p[:, j], pairs, groups, n_boot=n_boot, seed=seed), want)
    if case.startswith("contexts") or case == "ragged":
        assert any("spearman" in s and s["spearman"]["n_contexts"] > 0 for s in batch)


@pytest.mark.parametrize("n_groups", [7, 40, 300])
def test_resampled_metrics_are_the_metrics_of_the_resampled_records(n_groups, monkeypatch):
    """Against the plain metrics on records repeated as often as drawn (a few resamples),
    and against the dense weighted forms on all of them; the AUROC by both of its routes."""
    rng = np.random.default_rng(n_groups)
    n = 300
    t = rng.integers(0, 2, n)
    p = np.round(rng.random((n, 4)), 2)
    p[:, 3] = 0.5
    r = draw_resamples(n, list(rng.integers(0, n_groups, n)), 120, seed=1)
    w = r.weights()
    for factor in (resampled.AUROC_GROUP_FACTOR, 0):   # 0: always through the weights
        monkeypatch.setattr(resampled, "AUROC_GROUP_FACTOR", factor)
        for name, fn in METRICS.items():
            got = RESAMPLED[name](r, t, p)
            for j in range(p.shape[1]):
                assert np.array_equal(got[:, j], WEIGHTED[name](w, t, p[:, j]), equal_nan=True)
                for b in range(5):
                    rep = np.repeat(np.arange(n), w[b].astype(int))
                    assert got[b, j] == _safe(fn, t[rep], p[rep, j]) or (
                        math.isnan(got[b, j]) and math.isnan(_safe(fn, t[rep], p[rep, j])))


def test_resamples_are_the_one_draw():
    groups = [i // 3 for i in range(60)]
    r = draw_resamples(60, groups, 80, seed=4)
    assert np.array_equal(r.weights(), resample_weights(60, groups, 80, seed=4))
    x = np.random.default_rng(0).integers(0, 3, (60, 5)) * 0.5
    assert np.array_equal(r.sums(x), r.weights() @ x)
    v = np.random.default_rng(1).random(60)
    one = intervals({"m": lambda w: w @ v / w.sum(1)}, 60, groups, n_boot=80, seed=4)
    batch = batch_intervals({"m": lambda rs: (rs.weights() @ v / rs.weights().sum(1))[:, None]},
                            r, {"m": [one["m"]["value"]]})
    assert batch == [one]
    assert mean_ci(v, groups, n_boot=80, seed=4, resamples=r) == mean_ci(v, groups, n_boot=80,
                                                                       seed=4)


def test_context_rhos_are_spearman_of_gold_and_win_rate_bit_for_bit():
    """Items in up to 300 comparisons (numpy's pairwise sum recurses past 128 terms)."""
    rng = np.random.default_rng(5)
    trip, gold = [], {}
    for c in range(12):
        m = int(rng.integers(3, 9))
        for i in range(m):
            gold[c, i] = float(rng.integers(0, 4))
        for _ in range(int(rng.integers(5, 600))):
            a, b = rng.choice(m, 2, replace=False)
            trip.append((c, (c, a), (c, b)))
    for c in range(12, 20):                            # every item in 2 * 9 comparisons
        for a in range(10):
            gold[c, a] = float(rng.integers(0, 4))
            trip += [(c, (c, a), (c, b)) for b in range(10) if b != a]
    p = rng.random((len(trip), 3))
    p[:, 1] = np.round(p[:, 1] * 4) / 4                # tied win rates
    p[:, 2] = np.round(p[:, 2], 2)    # win rates tied but for the rounding of their sums
    for j, (ctxs, rhos) in enumerate(context_rhos(trip, p, gold)):
        want = context_rhos_loop(trip, p[:, j], gold)
        assert len(ctxs) == len(want) > 0 and np.array_equal(rhos, want)


def test_the_tiny_models_sweep_scores_as_the_per_layer_path(tiny, tmp_path):
    from ppairs_lens.activations.pipeline import harvest_dataset
    from ppairs_lens.data import builtin_dataset
    from ppairs_lens.evaluation.store_split import bootstrap_groups, split_store
    from ppairs_lens.probes.sweep import fit_sweep

    store = harvest_dataset(tiny, builtin_dataset("story_sentiment", seed=0, n=160),
                            tmp_path / "s")
    sp = split_store(store, test_size=0.5, seed=0)
    probes = fit_sweep(sp.acts_train, sp.labels_train, groups=sp.groups_train, seed=0)
    proba = probes.predict_proba(sp.acts_test)
    cols = [proba[k][li] for k in probes.kinds for li in range(sp.acts_test.shape[2])
            if not np.isnan(proba[k][li]).any()]
    p = np.stack(cols, axis=1)
    groups = bootstrap_groups(sp)[0]
    batch = score_pairs_batch(sp.labels_test, p, sp.pairs_test, groups, n_boot=200, seed=0)
    assert any("spearman" in s for s in batch)
    for j, got in enumerate(batch):
        want = per_layer_scores(sp.labels_test, p[:, j], sp.pairs_test, groups, n_boot=200,
                                   seed=0)
        assert _same(got, want), j


@pytest.mark.parametrize("metric", sorted(METRICS))
@pytest.mark.parametrize("per_record", [False, True])
def test_paired_differences_are_the_dense_weights_numbers(metric, per_record):
    from ppairs_lens.evaluation.bootstrap import bootstrap
    from ppairs_lens.evaluation.paired import paired_target_difference

    rng = np.random.default_rng(9)
    n = 400
    t = rng.integers(0, 2, n)
    a, b = np.round(rng.random(n), 2), np.round(rng.random(n), 1)
    groups = None if per_record else [i // 8 for i in range(n)]
    got = paired_target_difference(t, a, b, groups, metric=metric, n_boot=300, seed=2)
    wfn = WEIGHTED[metric]
    want = bootstrap(lambda w: wfn(w, t, a) - wfn(w, t, b), n, groups, n_boot=300, seed=2,
                     value=got["a"] - got["b"])
    assert {k: got[k] for k in want} == want
