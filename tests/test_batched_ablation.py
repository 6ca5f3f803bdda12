"""Many ablations in one pass (a direction per branch position), the nulls and their statistics."""

import numpy as np
import pytest
import torch

from ppairs_lens.judges.calibration import swap_calibrated_logodds
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.data.records import Dataset, Statement
from ppairs_lens.errors import PPairsError
from ppairs_lens.evaluation.null_test import (
    direction_effects,
    null_test,
    sign_accuracy,
)
from ppairs_lens.interventions.ablation import ablate, unembedding_direction
from ppairs_lens.interventions.batched import (
    batched_rejection_hooks,
    judge_under_direction_sets,
    judge_under_directions,
)
from ppairs_lens.interventions.directions import random_directions, variance_matched_directions
from ppairs_lens.judges.zero_shot import swapped_dataset

from .conftest import small_comparisons


def _plain_ld(bridge, pair) -> float:
    """logit(choice 1) - logit(choice 2) of one whole prompt, one unpadded forward."""
    with torch.inference_mode():
        lg = bridge(torch.tensor([pair.prefix_ids]))[0, -1].double()
    a, b = pair.final_ids
    return float(lg[a] - lg[b])


@pytest.mark.parametrize("preset", ["paper", "full"])
def test_batched_directions_equal_one_ablation_each(tiny, preset):
    ds = small_comparisons(6)
    pairs = build_contrast_pairs(tiny.tokenizer, ds)
    sw = build_contrast_pairs(tiny.tokenizer, swapped_dataset(ds))
    a, b = pairs[0].final_ids
    dirs = torch.cat([torch.zeros(1, 64), random_directions(3, 64, seed=4) * 3.0,
                      unembedding_direction(tiny, a, b)[None]])
    out = judge_under_directions(tiny, ds, None, dirs, preset,
                                 settings=HarvestSettings(token_budget=120), directions_per_pass=3)
    assert out["z"].shape == (len(ds), 5)
    for i, (p, s) in enumerate(zip(pairs, sw)):
        base = _plain_ld(tiny, p)
        assert out["ld_original"][i, 0] == pytest.approx(base, abs=1e-5)  # zero = no ablation
        for j in range(1, 5):
            with ablate(tiny, dirs[j], preset, positions="last"):
                lo, ls = _plain_ld(tiny, p), _plain_ld(tiny, s)
            assert out["ld_original"][i, j] == pytest.approx(lo, abs=1e-5)
            assert out["ld_swapped"][i, j] == pytest.approx(ls, abs=1e-5)
            assert out["z"][i, j] == pytest.approx(swap_calibrated_logodds(lo, ls), abs=1e-5)
    assert np.abs(out["z"][:, 1:4] - out["z"][:, :1]).max() > 1e-4  # the ablations acted
    # Positive control in the same preset: the two choice logits become equal.
    ctrl = np.abs(out["ld_original"][:, 4]).max()
    assert ctrl < 1e-5 and np.abs(out["ld_original"][:, 0]).max() > 100 * ctrl


@pytest.mark.parametrize("preset", ["paper", "full"])
def test_direction_sets_in_one_pass_equal_a_pass_each(tiny, preset):
    """The ablation's fast path: the preset's directions and a control at one read-out hook
    in one pass give what a pass per set gives (the slow path it replaced)."""
    ds = small_comparisons(6)
    a, b = build_contrast_pairs(tiny.tokenizer, ds)[0].final_ids
    dirs = torch.cat([torch.zeros(1, 64), random_directions(3, 64, seed=4) * 3.0])
    ctrl = unembedding_direction(tiny, a, b)[None]
    hook = ["blocks.1.hook_resid_post"]
    st = HarvestSettings(token_budget=120)
    one = judge_under_direction_sets(tiny, ds, None, [(dirs, preset), (ctrl, hook)],
                                     settings=st, directions_per_pass=3)
    apart = [judge_under_directions(tiny, ds, None, dirs, preset, settings=st),
             judge_under_directions(tiny, ds, None, torch.cat([dirs[:1], ctrl]), hook,
                                    settings=st)]
    for key in ("z", "ld_original", "ld_swapped"):
        assert one[key].shape == (len(ds), 5)
        np.testing.assert_allclose(one[key][:, :4], apart[0][key], atol=1e-5)
        np.testing.assert_allclose(one[key][:, 4], apart[1][key][:, 1], atol=1e-5)
        np.testing.assert_allclose(apart[1][key][:, 0], apart[0][key][:, 0], atol=1e-5)
    # the control at one block's output only is not the preset's (which zeroes the answer)
    assert np.abs(one["z"][:, 4] - one["z"][:, 0]).max() > 1e-4
    with pytest.raises(PPairsError, match="d_model"):
        judge_under_direction_sets(tiny, ds, None, [(torch.randn(2, 65), preset)])


def test_statements_give_raw_logodds(tiny):
    ds = Dataset("st", "statement", [Statement("s0", "Paris is in France.", True),
                                     Statement("s1", "Two is larger than three.", False)])
    out = judge_under_directions(tiny, ds, None, torch.zeros(2, 64))
    assert out["ld_swapped"] is None
    pairs = build_contrast_pairs(tiny.tokenizer, ds)
    np.testing.assert_allclose(out["z"][:, 1], [_plain_ld(tiny, p) for p in pairs], atol=1e-5)


def test_batched_hook_refuses_a_pass_of_other_shape(tiny):
    (_, fn), *_ = batched_rejection_hooks(tiny, torch.randn(3, 64))
    with pytest.raises(PPairsError, match="one position per direction"):
        fn(torch.randn(2, 5, 64))
    with pytest.raises(PPairsError, match="d_model"):
        batched_rejection_hooks(tiny, torch.randn(3, 65))


def test_variance_matched_directions_follow_the_covariance():
    rng = np.random.default_rng(0)
    scale = np.r_[np.full(3, 30.0), np.ones(47)]
    feats = rng.standard_normal((400, 50)) * scale
    m = variance_matched_directions(torch.from_numpy(feats), 200, seed=1)
    iso = random_directions(200, 50, seed=1)
    assert m.shape == (200, 50)
    np.testing.assert_allclose(m.norm(dim=-1).numpy(), 1.0, atol=1e-6)
    top = lambda r: float((r[:, :3] ** 2).sum(-1).mean())  # noqa: E731
    assert top(m) > 0.8 and top(iso) < 0.2  # matched directions live where the variance is
    torch.testing.assert_close(m, variance_matched_directions(torch.from_numpy(feats), 200, 1))


def test_effects_margin_and_permutation_p():
    z_base = np.array([2.0, -1.0, 0.5, -0.5])
    y = np.array([1, 0, 1, 0])  # 1: item 1 preferred
    z = np.stack([z_base, z_base * 0.0, -z_base, z_base + 1.0], 1)
    eff, margin = direction_effects(z_base, z, y)
    np.testing.assert_allclose(eff, [0.0, 1.0, 2.0, 1.0])
    np.testing.assert_allclose(margin, [0.0, -1.0, -2.0, 0.0])  # +1 helps 2 records, hurts 2
    assert sign_accuracy(z_base, y) == 1.0 and sign_accuracy(-z_base, y) == 0.0
    assert sign_accuracy(np.zeros(4), y) == 0.5  # no answer scores half
    assert sign_accuracy(z_base * 1e-7, y, tol=1e-5) == 0.5
    null = np.arange(100) / 100.0
    t = null_test(0.995, null)
    assert t["rank"] == 100 and t["p"] == pytest.approx(1 / 101)
    t = null_test(0.5, null)
    assert t["p"] == pytest.approx(51 / 101) and t["rank"] == 50
    assert null_test(0.5, np.array([]))["p"] != null_test(0.5, np.array([]))["p"]  # NaN


@pytest.mark.integration
def test_positive_control_collapses_the_embedded_judge(smol):
    from ppairs_lens.data import builtin_dataset

    ds = builtin_dataset("larger_number", n=6, seed=0)
    a, b = build_contrast_pairs(smol.tokenizer, ds)[0].final_ids
    u = unembedding_direction(smol, a, b)
    dirs = torch.stack([torch.zeros_like(u), u, random_directions(1, u.shape[0], seed=2)[0]])
    out = judge_under_directions(smol, ds, None, dirs, "paper")
    ld = np.concatenate([out["ld_original"], out["ld_swapped"]])
    assert np.abs(ld[:, 1]).max() < 1e-4 < np.abs(ld[:, 0]).min()  # both orders: no answer
    assert np.abs(out["z"][:, 2] - out["z"][:, 0]).max() > 0  # a random direction acts too
