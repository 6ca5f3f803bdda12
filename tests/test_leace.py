"""LEACE erasure: after it no probe separates the classes; as hooks it is removed on exit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("concept_erasure", reason="LEACE needs ppairs-lens[erasure]")

from ppairs_lens.judges.calibration import swap_calibrated_logodds
from ppairs_lens.interventions.leace import apply_eraser, erase, fit_leace  # noqa: E402
from ppairs_lens.probes.estimators import make_probe  # noqa: E402
from tests.test_probes import planted  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_erased_pairs_carry_no_linear_label_information():
    acts, labels, _ = planted(n=400, d=12, seed=5)
    assert make_probe("mass_mean").fit(acts, labels).score(acts, labels) > 0.95
    eraser = fit_leace(acts, labels)
    erased = apply_eraser(eraser, acts.double())
    diffs = (erased[:, 0] - erased[:, 1]).numpy()
    y = np.where(labels == 1, 1.0, -1.0)
    # the class-conditional means of the differences coincide: no linear probe beats chance
    cov = ((diffs - diffs.mean(0)) * (y - y.mean())[:, None]).mean(0)
    assert np.abs(cov).max() < 1e-8 * np.abs(diffs).max()


@torch.no_grad()
def test_erase_hooks_change_only_inside_the_block(tiny):
    hook = "blocks.0.hook_resid_post"
    d = tiny.cfg.d_model
    g = torch.Generator().manual_seed(0)
    acts = torch.randn(40, 2, d, generator=g)
    labels = np.where(np.arange(40) % 2 == 0, 1, 2)
    acts[labels == 1, 0, 0] += 3.0
    eraser = fit_leace(acts, labels)
    tokens = torch.tensor([[1, 5, 9, 13]])

    def cached():
        _, cache = tiny.run_with_cache(tokens, names_filter=lambda n: n == hook)
        return cache[hook].clone()

    clean = cached()
    with erase(tiny, eraser, hook):
        erased = cached()
    torch.testing.assert_close(erased, apply_eraser(eraser, clean), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(erased, clean)
    torch.testing.assert_close(cached(), clean)


# ---------------------------------------------------------------- the permuted-label null

from ppairs_lens.activations.runner import HarvestSettings  # noqa: E402
from ppairs_lens.activations.prompts import build_contrast_pairs  # noqa: E402
from ppairs_lens.interventions.leace import (  # noqa: E402
    batched_eraser_hooks,
    eraser_null_test,
    eraser_rows,
    judge_under_erasers,
    leace_null_study,
    permuted_erasers,
)
from ppairs_lens.judges.zero_shot import swapped_dataset  # noqa: E402

from .conftest import small_comparisons  # noqa: E402


@torch.no_grad()
def _planted_tiny_pairs(tiny, n: int = 60, hook: str = "blocks.1.hook_resid_post"):
    """``[n, 2, d]`` read off the tiny model (last token of random prompts), a label direction
    planted into the two sides' difference; labels 1 / 2."""
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(5, 200, (2 * n, 6), generator=g)
    _, cache = tiny.run_with_cache(tokens, names_filter=lambda name: name == hook)
    acts = cache[hook][:, -1].reshape(n, 2, -1).double()
    r = torch.randn(acts.shape[-1], generator=g, dtype=torch.float64)
    r = r / r.norm() * acts.norm(dim=-1).median()
    s = torch.where(torch.arange(n) % 3 == 0, -1.0, 1.0).double()
    acts[:, 0] += 0.5 * s[:, None] * r
    acts[:, 1] -= 0.5 * s[:, None] * r
    return acts, np.where(s.numpy() > 0, 1, 2)


def _plain_ld(bridge, pair) -> float:
    """logit(choice 1) - logit(choice 2) of one whole prompt, one unpadded forward."""
    with torch.inference_mode():
        lg = bridge(torch.tensor([pair.prefix_ids]))[0, -1].double()
    a, b = pair.final_ids
    return float(lg[a] - lg[b])


def test_eraser_rows_in_the_batched_hook_equal_apply_eraser(tiny):
    acts, labels = _planted_tiny_pairs(tiny, n=30)
    erasers = [None, fit_leace(acts, labels), *permuted_erasers(acts, labels, 2, seed=1)]
    hook = "blocks.0.hook_resid_post"
    (_, fn), = batched_eraser_hooks(tiny, eraser_rows(erasers, acts.shape[-1]), hook)
    x = torch.randn(5, len(erasers), acts.shape[-1])
    out = fn(x.clone())
    torch.testing.assert_close(out[:, 0], x[:, 0])                  # None: the identity
    for j in range(1, len(erasers)):
        torch.testing.assert_close(out[:, j], apply_eraser(erasers[j], x[:, j]),
                                   atol=1e-5, rtol=1e-5)


def test_real_leace_moves_a_probe_more_than_permuted_label_erasers(tiny):
    """A planted label direction: the real eraser sends the probe to chance, erasers fitted on
    permuted labels barely move it; the permutation p is 1 / (K + 1) exactly, its resolution."""
    acts, labels = _planted_tiny_pairs(tiny)
    probe = make_probe("mass_mean").fit(acts, labels)
    assert probe.score(acts, labels) > 0.95
    y = (labels == 1).astype(int)
    for k, outcome in ((39, "holds"), (9, "not tested at this size")):
        erasers = [fit_leace(acts, labels), *permuted_erasers(acts, labels, k, seed=0)]
        z = np.column_stack([probe.decision_function(acts)]
                            + [probe.decision_function(apply_eraser(e, acts)) for e in erasers])
        res = eraser_null_test(z, y, list(range(len(y))), n_boot=50)
        assert res["rank"] == k and res["n_null"] == k
        assert res["p"] == pytest.approx(1 / (k + 1)) == res["p_resolution"]
        assert res["effect"] > 3 * res["null_effect_p95"]
        assert res["accuracy_delta"] < -0.3 and abs(res["null_accuracy_delta_median"]) < 0.1
        assert res["delta_accuracy_hi"] < 0 and res["delta_logodds_hi"] < 0     # paired CIs
        assert res["verdict"]["outcome"] == outcome, res["verdict"]["reason"]


def test_judge_under_erasers_equals_one_erasure_each(tiny):
    """The batched erasers at the read-out token equal :func:`erase` (positions="last"), one
    at a time; ``None`` is the unablated judge; the study wraps it with its null test."""
    ds = small_comparisons(6)
    hook = ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]
    acts, labels = _planted_tiny_pairs(tiny, n=30, hook=hook[0])
    erasers = [None, fit_leace(acts, labels), *permuted_erasers(acts, labels, 2, seed=0)]
    out = judge_under_erasers(tiny, ds, None, erasers, hook,
                              settings=HarvestSettings(token_budget=120), per_pass=2)
    assert out["z"].shape == (len(ds), 4)
    pairs = build_contrast_pairs(tiny.tokenizer, ds)
    sw = build_contrast_pairs(tiny.tokenizer, swapped_dataset(ds))
    for i, (p, s) in enumerate(zip(pairs, sw)):
        assert out["ld_original"][i, 0] == pytest.approx(_plain_ld(tiny, p), abs=1e-5)
        for j in (1, 3):
            with erase(tiny, erasers[j], hook, positions="last"):
                lo, ls = _plain_ld(tiny, p), _plain_ld(tiny, s)
            assert out["ld_original"][i, j] == pytest.approx(lo, abs=1e-5)
            assert out["z"][i, j] == pytest.approx(swap_calibrated_logodds(lo, ls), abs=1e-5)
    study = leace_null_study(tiny, ds, None, acts, labels, preset=hook, n_perm=3, n_boot=20)
    assert study["z"].shape == (len(ds), 5) and study["n_null"] == 3
    np.testing.assert_allclose(study["z"][:, :2], out["z"][:, :2], atol=1e-6)
