import numpy as np
import pytest
import torch

from ppairs_lens.judges.calibration import TIE_LOGODDS
from ppairs_lens.interventions.ablation import (
    ablate,
    ablation_hook_sets,
    ablation_hooks,
    orthonormal_basis,
    reject,
    unembedding_direction,
)
from ppairs_lens.models.hook_points import hook_points
from ppairs_lens.judges.zero_shot import (
    choice_probabilities,
    evaluate_zero_shot,
    swapped_dataset,
    zero_shot,
)
from ppairs_lens.activations.runner import HarvestSettings, run_branches
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.data.records import Dataset, Statement

from .conftest import small_comparisons

TEXTS = ["Which number is larger, 12 or 7? The larger one is", "Hi there"]


def _direction(d: int, seed: int = 0, k: int | None = None) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(d, generator=g) if k is None else torch.randn(k, d, generator=g)


def _ids(tok, text: str) -> torch.Tensor:
    return torch.tensor([tok(text, add_special_tokens=False).input_ids])


def _n_hooks(bridge) -> int:
    return sum(len(hp.fwd_hooks) + len(hp.bwd_hooks) for hp in set(bridge.hook_dict.values()))


# ---- reject ---------------------------------------------------------------------------------

def test_reject_removes_one_or_several_directions():
    x = _direction(64, seed=1, k=5)
    r = _direction(64, seed=2)
    y = reject(x, r)
    assert (y @ (r / r.norm())).abs().max() < 1e-5 * x.norm()
    torch.testing.assert_close(reject(y, r), y)  # idempotent
    rs = _direction(64, seed=3, k=3)
    y3 = reject(x, rs)
    assert (y3 @ rs.T).abs().max() < 1e-5 * x.norm()
    # The span is removed, so the result is the orthogonal projection (least squares residual).
    coef = torch.linalg.lstsq(rs.T.double(), x.T.double()).solution
    # y3 is float32: float32 tolerances (the float64 defaults fail on some CPUs' rounding)
    torch.testing.assert_close(y3.double(), x.double() - (rs.T.double() @ coef).T,
                               rtol=1e-5, atol=1e-5)
    basis = orthonormal_basis(rs)
    torch.testing.assert_close(basis @ basis.T, torch.eye(3), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="linearly dependent"):
        orthonormal_basis(torch.stack([rs[0], rs[1], rs[0] + rs[1]]))
    with pytest.raises(ValueError, match="zero"):
        reject(x, torch.zeros(64))


def test_hook_points_presets():
    assert hook_points("paper", 2) == ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post",
                                       "ln_final.hook_out"]
    assert hook_points("full", 2) == ["hook_embed", "blocks.0.hook_attn_out",
                                      "blocks.0.hook_mlp_out", "blocks.1.hook_attn_out",
                                      "blocks.1.hook_mlp_out", "ln_final.hook_out"]
    with pytest.raises(ValueError, match="unknown hook preset"):
        hook_points("everything", 2)


def test_unknown_hook_name_lists_close_matches(tiny):
    with pytest.raises(ValueError, match=r"blocks\.0\.hook_resid_post"):
        ablation_hooks(tiny, _direction(64), ["blocks.0.hook_resid_pots"])
    with pytest.raises(ValueError, match="d_model"):
        ablation_hooks(tiny, _direction(32), "paper")


# ---- hooks on the model ---------------------------------------------------------------------

@pytest.mark.parametrize("preset", ["paper", "full"])
def test_hooked_activations_have_no_component_along_r(tiny, preset):
    r = _direction(64, seed=4)
    u = r / r.norm()
    ids = _ids(tiny.tokenizer, TEXTS[0])
    names = hook_points(preset, tiny.cfg.n_layers)
    with torch.inference_mode():
        _, before = tiny.run_with_cache(ids, names_filter=lambda n: n in names)
        with ablate(tiny, r, preset):  # run_with_cache's hooks run after the ablation's
            _, cache = tiny.run_with_cache(ids, names_filter=lambda n: "resid" in n or n in names)
    for n in names:
        v = cache[n]
        assert ((v @ u).abs() <= 1e-5 * v.norm(dim=-1)).all(), n
        assert (before[n] @ u).abs().max() > 1e-3 * before[n].norm(dim=-1).max(), n
    resid = [f"blocks.{l}.hook_resid_{s}" for l in range(tiny.cfg.n_layers)
             for s in ("pre", "mid", "post")]
    clean = [((cache[n] @ u).abs() <= 1e-5 * cache[n].norm(dim=-1)).all().item() for n in resid]
    if preset == "full":
        assert all(clean)  # every residual state is a sum of r-free terms
    else:
        assert not all(clean)  # resid_mid still carries r: the MLP reads it


def test_ablation_propagates_to_the_next_block(tiny):
    r = _direction(64, seed=5)
    ids = _ids(tiny.tokenizer, TEXTS[0])
    with torch.inference_mode():
        _, clean = tiny.run_with_cache(ids)
        with ablate(tiny, r, "paper"):
            out, abl = tiny.run_with_cache(ids)
    for l in range(tiny.cfg.n_layers - 1):
        post, nxt = abl[f"blocks.{l}.hook_resid_post"], abl[f"blocks.{l + 1}.hook_resid_pre"]
        torch.testing.assert_close(nxt, post, rtol=0, atol=0)
        assert (nxt - clean[f"blocks.{l + 1}.hook_resid_pre"]).abs().max() > 1e-4
    assert (out - tiny(ids)).abs().max() > 1e-4


def test_no_hook_remains_after_the_context_even_on_error(tiny):
    r = _direction(64, seed=6)
    ids = _ids(tiny.tokenizer, TEXTS[0])
    n0 = _n_hooks(tiny)
    with torch.inference_mode():
        before = tiny(ids)
        with ablate(tiny, r, "full"):
            assert _n_hooks(tiny) == n0 + len(hook_points("full", tiny.cfg.n_layers))
            during = tiny(ids)
        with pytest.raises(RuntimeError, match="boom"):
            with ablate(tiny, r, "paper"):
                assert _n_hooks(tiny) > n0
                raise RuntimeError("boom")
        after = tiny(ids)
    assert _n_hooks(tiny) == n0
    assert all(not hp.fwd_hooks for hp in tiny.hook_dict.values())
    assert (during - before).abs().max() > 1e-4
    torch.testing.assert_close(after, before, rtol=0, atol=0)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("positions", ["all", "last"])
def test_padded_batch_matches_single_rows(tiny, side, positions):
    tok = tiny.tokenizer
    r = _direction(64, seed=7)
    enc = tok(TEXTS, padding=True, padding_side=side, return_tensors="pt",
              add_special_tokens=False)
    mask = enc.attention_mask
    pos_ids = (mask.cumsum(-1) - 1).clamp(min=0)  # real positions, whichever side is padded
    last = (mask.sum(-1) - 1 if side == "right"
            else torch.full((len(TEXTS),), mask.shape[1] - 1))
    kw = dict(last_positions=last) if positions == "last" else {}
    with torch.inference_mode():
        clean = tiny(enc.input_ids, attention_mask=mask, position_ids=pos_ids)
        with ablate(tiny, r, "full", positions, **kw):
            batch = tiny(enc.input_ids, attention_mask=mask, position_ids=pos_ids)
        for i, text in enumerate(TEXTS):
            with ablate(tiny, r, "full", positions):  # one row: default last position -1
                alone = tiny(_ids(tok, text))[0]
            real = batch[i][mask[i].bool()]
            torch.testing.assert_close(real, alone, rtol=1e-4, atol=1e-5)
            assert (batch[i, last[i]] - clean[i, last[i]]).abs().max() > 1e-4
            if positions == "last":  # earlier positions untouched
                torch.testing.assert_close(real[:-1], clean[i][mask[i].bool()][:-1])


def test_unembedding_direction_equalises_the_two_logits(tiny):
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(2))
    a, b = pairs[0].final_ids
    u = unembedding_direction(tiny, a, b)
    w = tiny.unembed.original_component.weight.detach()  # HF layout [vocab, d_model]
    torch.testing.assert_close(u, (w[a] - w[b]) / (w[a] - w[b]).norm())
    ids = torch.tensor([pairs[0].prefix_ids])
    with torch.inference_mode():
        clean = tiny(ids)[0]
        for preset in (["ln_final.hook_out"], "paper", "full"):
            with ablate(tiny, u, preset):
                lg = tiny(ids)[0]
            assert (lg[:, a] - lg[:, b]).abs().max() < 1e-4, preset
    assert (clean[:, a] - clean[:, b]).abs().max() > 1e-3


def test_per_hook_directions_and_hook_sets(tiny):
    r0, r1 = _direction(64, seed=8), _direction(64, seed=9, k=2)
    hooks = ablation_hooks(tiny, {"blocks.0.hook_resid_post": r0, "blocks.1.hook_mlp_out": r1})
    assert [n for n, _ in hooks] == ["blocks.0.hook_resid_post", "blocks.1.hook_mlp_out"]
    ids = _ids(tiny.tokenizer, TEXTS[0])
    with torch.inference_mode(), tiny.hooks(fwd_hooks=hooks):
        _, cache = tiny.run_with_cache(ids)
    assert (cache["blocks.0.hook_resid_post"] @ r0).abs().max() < 1e-5
    assert (cache["blocks.1.hook_mlp_out"] @ r1.T).abs().max() < 1e-5
    h, f = ablation_hook_sets(tiny, r0, "paper", "all")
    assert len(h) == tiny.cfg.n_layers + 1 and f == []
    h, f = ablation_hook_sets(tiny, r0, "paper", "last")
    assert h == [] and len(f) == tiny.cfg.n_layers + 1


# ---- the zero-shot evaluator ----------------------------------------------------------------

def _plain_p1(bridge, pair) -> float:
    """P(choice 1) from one plain unbatched forward of the prompt prefix."""
    with torch.inference_mode():
        lg = bridge(torch.tensor([pair.prefix_ids]))[0, -1, list(pair.final_ids)]
    return torch.softmax(lg.double(), -1)[0].item()


def test_run_branches_logits_equal_a_plain_forward(tiny):
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(6))
    ids = [33, 34, 216]
    out = run_branches(tiny, [p.prefix_ids[:-1] for p in pairs],
                       [(p.prefix_ids[-1],) for p in pairs], [p.group for p in pairs],
                       logit_ids=ids, settings=HarvestSettings(token_budget=200)).logits
    with torch.inference_mode():
        for i, p in enumerate(pairs):
            ref = tiny(torch.tensor([p.prefix_ids]))[0, -1, ids]
            torch.testing.assert_close(out[i, 0], ref, rtol=1e-4, atol=1e-5)


def test_calibration_averages_both_orders(tiny):
    ds = small_comparisons(6)
    res = zero_shot(tiny, ds)
    orig = build_contrast_pairs(tiny.tokenizer, ds)
    swapped = build_contrast_pairs(tiny.tokenizer, swapped_dataset(ds))
    assert [s.label for s in swapped] == [{1: 2, 2: 1, 0: 0}[p.label] for p in orig]
    for i, (p, s) in enumerate(zip(orig, swapped)):
        p1, p1s = _plain_p1(tiny, p), _plain_p1(tiny, s)
        assert res.p_original[i] == pytest.approx(p1, abs=1e-5)
        # log-odds calibration: z = (ld(a, b) - ld(b, a)) / 2, p = sigmoid(z)
        z = 0.5 * (np.log(p1 / (1 - p1)) - np.log(p1s / (1 - p1s)))
        z = 0.0 if abs(z) < TIE_LOGODDS else z      # a tie by rule
        assert res.p[i] == pytest.approx(1 / (1 + np.exp(-z)), abs=1e-5)
    assert res.n_rows == 2 * len(ds)
    assert not np.allclose(res.p, res.p_original)
    report = evaluate_zero_shot(tiny, ds, calibrate=False)
    assert report["n_rows"] == len(ds) and not report["calibrated"]
    assert report["n_scored"] + report["n_ties"] == len(ds)
    assert 0.0 <= report["metrics"]["accuracy"]["value"] <= 1.0


def test_statements_are_not_calibrated(tiny):
    ds = Dataset("st", "statement", [Statement("s0", "Paris is in France.", True),
                                     Statement("s1", "Two is larger than three.", False)])
    res = zero_shot(tiny, ds)
    assert res.p_swapped is None and res.n_rows == 2
    pairs = build_contrast_pairs(tiny.tokenizer, ds)
    assert res.p[1] == pytest.approx(_plain_p1(tiny, pairs[1]), abs=1e-5)


@pytest.mark.parametrize("positions", ["all", "last"])
def test_evaluator_with_ablation_hooks_matches_ablated_plain_forward(tiny, positions):
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(4))
    r = _direction(64, seed=10)
    hooks, final_hooks = ablation_hook_sets(tiny, r, "full", positions)
    p = choice_probabilities(tiny, pairs, hooks=hooks, final_hooks=final_hooks)
    with ablate(tiny, r, "full", positions):
        ref = [_plain_p1(tiny, q) for q in pairs]
    np.testing.assert_allclose(p, ref, atol=1e-5)
    assert not np.allclose(p, [_plain_p1(tiny, q) for q in pairs], atol=1e-5)


# ---- the embedded model ---------------------------------------------------------------------

@pytest.mark.integration
def test_unembedding_ablation_collapses_the_evaluator(smol):
    try:
        from ppairs_lens.data import builtin_dataset
        ds = builtin_dataset("larger_number", seed=0)
        ds.records = ds.records[:8]
    except ImportError:
        ds = small_comparisons(8, with_context=False)
    pairs = build_contrast_pairs(smol.tokenizer, ds)
    a, b = pairs[0].final_ids
    u = unembedding_direction(smol, a, b)
    base = evaluate_zero_shot(smol, ds, calibrate=False)
    hooks, _ = ablation_hook_sets(smol, u, "paper", "all")
    collapsed = evaluate_zero_shot(smol, ds, calibrate=False, hooks=hooks)
    assert np.abs(collapsed["proba"] - 0.5).max() < 1e-3
    hooks, _ = ablation_hook_sets(smol, _direction(smol.cfg.d_model, seed=11), "paper", "all")
    rand = evaluate_zero_shot(smol, ds, calibrate=False, hooks=hooks)
    acc = {k: v["metrics"]["accuracy"]["value"] for k, v in
           dict(base=base, collapsed=collapsed, random=rand).items()}
    shift = np.abs(rand["proba"] - base["proba"]).max()
    print("zero-shot accuracy (8 pairs, uncalibrated):", acc, "max |dp| random:", shift)
    assert abs(acc["random"] - acc["base"]) <= 1 / 8 + 1e-9
    # A random direction moves P(choice 1) far less than the collapse to 0.5 does.
    assert shift < 0.1 * np.abs(base["proba"] - 0.5).max()
