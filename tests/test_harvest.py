import pytest
import torch

from ppairs_lens.errors import ModelLoadError, PPairsError
from ppairs_lens.activations.harvest import (
    NonFiniteActivationError,
    harvest_pairs,
    reference_activations,
)
from ppairs_lens.activations.runner import DEFAULT_TOKEN_BUDGET, HarvestSettings
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.models.hook_points import READOUT_PRESET, hook_points

from .conftest import small_comparisons


def _max_rel_err(bridge, pairs, acts):
    worst = 0.0
    for i, p in enumerate(pairs):
        for side in range(2):
            ref = reference_activations(bridge, list(p.prefix_ids) + [p.final_ids[side]])
            err = (acts[i, side] - ref).norm(dim=-1) / ref.norm(dim=-1)
            worst = max(worst, err.max().item())
    return worst


@pytest.mark.parametrize("budget", [10_000, 150])  # one big batch; many small padded batches
def test_harvest_equals_unbatched_unpadded_runs(tiny, budget):
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(12))
    acts = harvest_pairs(tiny, pairs, HarvestSettings(token_budget=budget))
    assert acts.shape == (12, 2, tiny.cfg.n_layers + 1, tiny.cfg.d_model)
    assert _max_rel_err(tiny, pairs, acts) < 1e-4


def test_prefix_sharing_changes_nothing(tiny):
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(8))
    shared = harvest_pairs(tiny, pairs, HarvestSettings(share_prefixes=True))
    alone = harvest_pairs(tiny, pairs, HarvestSettings(share_prefixes=False))
    torch.testing.assert_close(shared, alone, rtol=1e-4, atol=1e-4)


def test_sides_differ_and_last_readout_is_final_norm(tiny):
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(4))
    acts = harvest_pairs(tiny, pairs)
    assert not torch.allclose(acts[:, 0], acts[:, 1])
    assert hook_points(READOUT_PRESET, 2) == ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post",
                             "ln_final.hook_out"]


def test_non_finite_activation_is_named(tiny):
    # Overflow in the last MLP, as a half-precision model can: the harvest must name where.
    overflow = ("blocks.1.hook_mlp_out", lambda x, hook: x * float("inf"))
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(3))
    with tiny.hooks(fwd_hooks=[overflow]):
        with pytest.raises(NonFiniteActivationError, match=r"pair p\d .*blocks\.1\.hook_resid_post"):
            harvest_pairs(tiny, pairs)


def test_a_bridge_that_hands_back_no_cache_is_refused(tiny, monkeypatch):
    # transformers 5.24 with transformer-lens 4.3: the bridge returns no key-value cache, and
    # every branch would silently be read without its prefix.
    real = tiny.forward

    def forward_without_cache(*args, **kwargs):
        out = real(*args, **kwargs)
        return (out[0], None) if kwargs.get("return_type") == "logits_and_cache" else out

    monkeypatch.setattr(tiny, "forward", forward_without_cache)
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(3))
    with pytest.raises(ModelLoadError, match=r"no key-value cache .*transformers<5\.24"):
        harvest_pairs(tiny, pairs)


@pytest.mark.integration
def test_embedded_model_harvest_matches_reference(smol):
    from ppairs_lens.data import builtin_dataset

    for name in ("larger_number", "capital_true"):
        ds = builtin_dataset(name, seed=0)
        ds.records = ds.records[:4]
        pairs = build_contrast_pairs(smol.tokenizer, ds)
        acts = harvest_pairs(smol, pairs, HarvestSettings(token_budget=400))
        assert acts.shape == (4, 2, 31, 576)
        assert _max_rel_err(smol, pairs, acts) < 1e-3


def test_big_shared_context_group_equals_reference(tiny):
    """A context shared by >= MIN_GROUP_ROWS pairs runs once for all of them (not pooled)."""
    from dataclasses import replace

    from ppairs_lens.activations.prefix_sharing import MIN_GROUP_ROWS, share_groups

    ds = small_comparisons(12, with_context=False)
    article = "A long shared article about the numbers below. " * 3
    ds.records = [replace(r, context=article, context_id="art") for r in ds.records]
    pairs = build_contrast_pairs(tiny.tokenizer, ds)
    groups = list(share_groups([p.prefix_ids for p in pairs], [p.group for p in pairs], True))
    assert len(groups) == 1 and len(groups[0][0]) == 12 >= MIN_GROUP_ROWS
    assert groups[0][1] > 40  # the article is in the shared prefix
    acts = harvest_pairs(tiny, pairs, HarvestSettings(token_budget=200))
    assert _max_rel_err(tiny, pairs, acts) < 1e-4


def test_token_ids_go_where_the_weights_are(tiny, tokenizer):
    # A bridge booted around an existing HF model only records a device in cfg.device (cuda
    # on any GPU machine), wherever the weights are: the harvest must follow the weights.
    from ppairs_lens.models.tiny import tiny_model

    other = tiny_model(seed=0, tokenizer=tokenizer)
    other.cfg.device = "meta"  # holds no data: token ids sent there could not run
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(4))
    torch.testing.assert_close(harvest_pairs(other, pairs), harvest_pairs(tiny, pairs))


@pytest.mark.parametrize("budget", [0, -5, 2.5])
def test_a_token_budget_below_one_token_is_refused(budget):
    # 0 used to mean "the default" silently, and a negative budget one row per pass.
    with pytest.raises(PPairsError, match="token_budget"):
        HarvestSettings(token_budget=budget)


def test_the_token_budget_is_the_one_set_else_by_device(tiny):
    cpu = torch.device("cpu")
    assert HarvestSettings(token_budget=300).budget_for(tiny, cpu) == 300
    assert HarvestSettings().budget_for(tiny, cpu) == DEFAULT_TOKEN_BUDGET


def _ablate(u):
    """An ablation-like hook: remove twice the component along ``u`` at every position."""
    def hook(x, hook):
        return x - 2 * (x @ u)[..., None] * u
    return hook


def _at_last(fn):
    """``fn`` on the last position only (what a final hook does to a branch token alone)."""
    def hook(x, hook):
        x = x.clone()
        x[:, -1:] = fn(x[:, -1:], hook)
        return x
    return hook


def _lm_head_positions(bridge):
    """Positions the unembedding's linear layer projects, per call (a torch hook, not a
    HookPoint one: it does not count as hooking the unembedding)."""
    seen: list[int] = []
    handle = bridge.unembed.original_component.register_forward_hook(
        lambda m, args, out: seen.append(args[0].shape[1]))
    return seen, handle


@pytest.mark.parametrize("points", [["ln_final.hook_out"],
                                    ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]])
def test_branch_logits_skip_the_full_unembedding_and_equal_a_plain_forward(tiny, points):
    from ppairs_lens.activations.few_logits import plain_unembedding
    from ppairs_lens.activations.runner import run_branches

    u = torch.randn(tiny.cfg.d_model, generator=torch.Generator().manual_seed(0))
    u /= u.norm()
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(6))
    ids = [33, 34, 216]
    seen, handle = _lm_head_positions(tiny)
    try:
        out = run_branches(tiny, [p.prefix_ids for p in pairs], [p.final_ids for p in pairs],
                           [p.group for p in pairs], logit_ids=ids,
                           final_hooks=[(n, _ablate(u)) for n in points],
                           settings=HarvestSettings(token_budget=150)).logits
    finally:
        handle.remove()
    assert plain_unembedding(tiny) and seen and set(seen) == {0}  # the model projected nothing
    with torch.inference_mode(), tiny.hooks(fwd_hooks=[(n, _at_last(_ablate(u))) for n in points]):
        for i, p in enumerate(pairs):
            for side in range(2):
                ref = tiny(torch.tensor([list(p.prefix_ids) + [p.final_ids[side]]]))[0, -1, ids]
                torch.testing.assert_close(out[i, side], ref, rtol=1e-4, atol=1e-5)


def test_a_hooked_unembedding_keeps_the_models_own_logits(tiny):
    # A hook on the unembedding's output must see (and may change) the model's logits.
    from ppairs_lens.activations.runner import run_branches

    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(4))
    args = ([p.prefix_ids for p in pairs], [p.final_ids for p in pairs], [p.group for p in pairs])
    plain = run_branches(tiny, *args, logit_ids=[33, 34]).logits
    seen, handle = _lm_head_positions(tiny)
    try:
        shifted = run_branches(tiny, *args, logit_ids=[33, 34],
                               final_hooks=[("unembed.hook_out", lambda x, hook: x + 5.0)]).logits
    finally:
        handle.remove()
    assert max(seen) == 2  # the branch read projected its two tokens (forwards: none)
    torch.testing.assert_close(shifted, plain + 5.0, rtol=1e-4, atol=1e-4)
