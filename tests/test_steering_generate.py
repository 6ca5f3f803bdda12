"""Steering while generating: ``with steer(model, r, alpha, [hook]): model.generate(...)``.

The key-value cache must not change what is steered: each cached pass sees only its new token,
so "from position p on" must count the cached positions (pl.steer reads them off block 0's
attention). Greedy decoding, so equal settings give equal tokens.
"""

from __future__ import annotations

import pytest
import torch

from ppairs_lens.errors import DirectionError
from ppairs_lens.interventions.steering import steer

HOOK = "blocks.0.hook_resid_post"
N_NEW = 8


def _generate(model, tokens, cache: bool, direction=None, alpha: float = 0.0,
              positions="all", hook: str = HOOK) -> torch.Tensor:
    def run():
        return model.generate(tokens, max_new_tokens=N_NEW, do_sample=False, verbose=False,
                              use_past_kv_cache=cache, stop_at_eos=False)

    if direction is None:
        return run()
    with steer(model, direction, alpha, [hook], positions=positions):
        return run()


@pytest.fixture(scope="module")
def setup(tiny):
    tokens = tiny.to_tokens("The capital of France is a city called")
    direction = torch.randn(tiny.cfg.d_model, generator=torch.Generator().manual_seed(3))
    return tiny, tokens, direction


@pytest.mark.parametrize("cache", [True, False])
def test_steering_changes_generation_and_alpha_zero_does_not(setup, cache):
    model, tokens, r = setup
    plain = _generate(model, tokens, cache)
    assert torch.equal(_generate(model, tokens, cache, r, 0.0), plain)
    steered = _generate(model, tokens, cache, r, 30.0)
    assert steered.shape == plain.shape and not torch.equal(steered, plain)
    assert torch.equal(steered[:, :tokens.shape[1]], tokens)


@pytest.mark.parametrize("positions", ["all", 0, 3, "prompt", "prompt+2"])
def test_cache_and_no_cache_give_the_same_steered_tokens(setup, positions):
    model, tokens, r = setup
    n = tokens.shape[1]
    if isinstance(positions, str) and positions.startswith("prompt"):
        positions = n + (2 if positions.endswith("+2") else 0)
    with_cache = _generate(model, tokens, True, r, 30.0, positions)
    without = _generate(model, tokens, False, r, 30.0, positions)
    assert torch.equal(with_cache, without)
    if isinstance(positions, int):
        # Positions before p are never steered, so the token read from position p - 1 (the
        # one at column p) is the unsteered model's: the cached passes counted from the start.
        plain = _generate(model, tokens, True)
        assert torch.equal(with_cache[:, :positions + 1], plain[:, :positions + 1])


def test_a_start_position_steers_a_forward_pass_only_from_there(setup):
    model, tokens, r = setup
    p = 4
    seen = {}

    def keep(x, hook=None):
        seen[HOOK] = x.detach().clone()

    with model.hooks(fwd_hooks=[(HOOK, keep)]):
        model(tokens)
    plain = seen[HOOK]
    # A hook added after the steering hooks sees the steered activation.
    with steer(model, r, 5.0, [HOOK], positions=p):
        with model.hooks(fwd_hooks=[(HOOK, keep)]):
            model(tokens)
    moved = (seen[HOOK] - plain).norm(dim=-1)[0]
    assert torch.allclose(moved[:p], torch.zeros(p), atol=1e-6)
    assert torch.allclose(moved[p:], torch.full_like(moved[p:], 5.0), atol=1e-4)


def test_a_start_position_before_block_zero_attention_is_refused(setup):
    model, tokens, r = setup
    with pytest.raises(DirectionError, match="before block 0's attention"):
        _generate(model, tokens, True, r, 1.0, positions=2, hook="hook_embed")
    with pytest.raises(ValueError, match="start position >= 0"):
        _generate(model, tokens, True, r, 1.0, positions=-1)


@pytest.mark.integration
def test_steering_the_embedded_model_while_generating(smol):
    """One short run on SmolLM2: steered text differs, alpha 0 and the cache change nothing."""
    tokens = smol.to_tokens("The weather today is")
    r = torch.randn(smol.cfg.d_model, generator=torch.Generator().manual_seed(0))
    hook = f"blocks.{smol.cfg.n_layers // 2}.hook_resid_post"

    def gen(cache, alpha=None, positions="all"):
        return _generate(smol, tokens, cache, None if alpha is None else r, alpha or 0.0,
                         positions, hook)

    plain = gen(True)
    assert torch.equal(gen(True, 0.0), plain)
    steered = gen(True, 40.0)
    assert not torch.equal(steered, plain)
    assert torch.equal(gen(False, 40.0), steered)
    p = tokens.shape[1]
    assert torch.equal(gen(True, 40.0, p), gen(False, 40.0, p))


@pytest.mark.parametrize("start", ["all", "prompt+2"])
def test_a_hooked_transformer_steers_its_cached_generation_alike(tokenizer, start):
    """The same check on a classic HookedTransformer (its own key-value cache; skipped where
    transformer-lens >= 4 has none)."""
    from tests.test_steering import hooked_tiny

    model = hooked_tiny(tokenizer)
    tokens = model.to_tokens("The capital of France is a city called")
    r = torch.randn(model.cfg.d_model, generator=torch.Generator().manual_seed(3))
    positions = "all" if start == "all" else tokens.shape[1] + 2
    with_cache = _generate(model, tokens, True, r, 30.0, positions)
    assert torch.equal(with_cache, _generate(model, tokens, False, r, 30.0, positions))
    assert not torch.equal(with_cache, _generate(model, tokens, True))
