"""The fused attention path: the bridge's eager numbers, every hook but the pattern's, and the
eager forward wherever something reads the pattern."""

import copy

import pytest
import torch

from ppairs_lens.activations.harvest import harvest_with_judge
from ppairs_lens.activations.prompts import build_contrast_pairs, default_template
from ppairs_lens.models.fused_attention import fused_blocks, set_fused_attention
from ppairs_lens.models.tiny import tiny_model
from tests.conftest import small_comparisons


@pytest.fixture
def model(tokenizer):
    return tiny_model(3, n_layers=2, tokenizer=tokenizer)  # its own: tests switch it


def _tokens(seed=0):
    g = torch.Generator().manual_seed(seed)
    toks = torch.randint(100, 5000, (3, 40), generator=g)
    mask = torch.ones_like(toks)
    mask[0, :9] = 0  # left padding, as the runner's tails use
    return toks, mask


def _logits(model, toks, mask, **kw):
    with torch.inference_mode():
        return model(toks, attention_mask=mask, **kw)


def test_tiny_model_has_it_and_it_switches_off_and_on(model):
    assert fused_blocks(model) == model.cfg.n_layers
    assert set_fused_attention(model, False) == 0
    assert set_fused_attention(model) == model.cfg.n_layers
    assert set_fused_attention(model) == model.cfg.n_layers  # idempotent


def test_same_logits_as_eager_with_padding(model):
    toks, mask = _tokens()
    fused = _logits(model, toks, mask)
    set_fused_attention(model, False)
    eager = _logits(model, toks, mask)
    keep = mask.bool()
    assert (fused - eager)[keep].abs().max() < 1e-5


def test_prefix_cache_passes_match_eager(model, tokenizer):
    """The harvest's prefix-shared passes (key-value caches, left-padded tails)."""
    ds = small_comparisons(8)
    pairs = build_contrast_pairs(tokenizer, ds, default_template(ds))
    fused = harvest_with_judge(model, pairs)
    set_fused_attention(model, False)
    eager = harvest_with_judge(model, pairs)
    assert torch.allclose(fused.acts, eager.acts, atol=1e-5, rtol=1e-4)
    assert abs(fused.judge_logodds - eager.judge_logodds).max() < 1e-4


def test_a_pattern_hook_runs_the_eager_forward_and_sees_the_pattern(model):
    toks, mask = _tokens(1)
    seen = []

    def keep(x, hook):
        seen.append(hook.name)
        return x

    with model.hooks(fwd_hooks=[("blocks.1.attn.hook_pattern", keep)]):
        hooked = _logits(model, toks, mask)
    assert seen == ["blocks.1.attn.hook_pattern"]
    # a hook that changes the pattern changes the output: it ran on the live path
    with model.hooks(fwd_hooks=[("blocks.1.attn.hook_pattern", lambda x, hook: x * 0)]):
        zeroed = _logits(model, toks, mask)
    assert (zeroed - hooked).abs().max() > 1e-3


@pytest.mark.parametrize("point", ["hook_q", "hook_k", "hook_v", "hook_z", "hook_rot_q",
                                   "hook_rot_k", "hook_in", "hook_out"])
def test_other_attention_hooks_fire_and_act_on_the_fused_path(model, point):
    toks, mask = _tokens(2)
    base = _logits(model, toks, mask)
    name = f"blocks.0.attn.{point}"
    if name not in model.hook_dict:
        pytest.skip(f"{name} is not a hook point of this transformer-lens")
    with model.hooks(fwd_hooks=[(name, lambda x, hook: x * 0.5)]):
        changed = _logits(model, toks, mask)
    assert (changed - base).abs().max() > 1e-4


def test_a_copied_bridge_runs_its_own_weights(model):
    toks, mask = _tokens(3)
    twin = copy.deepcopy(model)
    assert fused_blocks(twin) == model.cfg.n_layers
    with torch.no_grad():
        for p in twin.parameters():
            p.mul_(0.5)
    assert (_logits(twin, toks, mask) - _logits(model, toks, mask)).abs().max() > 1e-3


def test_training_mode_runs_the_eager_forward(model):
    toks, mask = _tokens(4)
    seen = []
    model.train()
    try:
        with model.hooks(fwd_hooks=[("blocks.0.attn.hook_attn_scores",
                                     lambda x, hook: seen.append(1) or x)]):
            model(toks, attention_mask=mask)
    finally:
        model.eval()
    assert seen == [1]


def test_embedded_model_harvest_matches_eager(smol, tokenizer):
    """The real model's prefix-shared harvest and judge answers, fused against eager."""
    ds = small_comparisons(6)
    pairs = build_contrast_pairs(tokenizer, ds, default_template(ds))
    assert fused_blocks(smol) == smol.cfg.n_layers
    fused = harvest_with_judge(smol, pairs)
    try:
        set_fused_attention(smol, False)
        eager = harvest_with_judge(smol, pairs)
    finally:
        set_fused_attention(smol)
    rel = ((fused.acts - eager.acts).norm(dim=-1) / eager.acts.norm(dim=-1)).max()
    assert rel < 1e-4
    assert abs(fused.judge_logodds - eager.judge_logodds).max() < 1e-3
