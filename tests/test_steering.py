"""Steering hooks on both backends: the read-out moves by exactly alpha along the direction,
only where asked, and the hooks are gone after the ``with`` block."""

from __future__ import annotations

import pytest
import torch

from ppairs_lens.errors import DirectionError
from ppairs_lens.interventions.steering import batched_steering_hooks, steer, steering_vector

pytestmark = pytest.mark.usefixtures("one_torch_thread")
HOOK = "blocks.0.hook_resid_post"
LATER = "blocks.1.hook_resid_post"


def hooked_tiny(tokenizer):
    """The tiny Llama as a classic HookedTransformer (transformer-lens < 4 only)."""
    ht = pytest.importorskip("transformer_lens").__dict__.get("HookedTransformer")
    if ht is None:
        pytest.skip("HookedTransformer is absent (transformer-lens>=4): run in .venv-tl3")
    from ppairs_lens.models.hooked import converter, hooked_config_from_hf
    from ppairs_lens.models.tiny import tiny_hf_model

    hf = tiny_hf_model(tokenizer, 0)
    cfg = hooked_config_from_hf(hf.config, architecture="LlamaForCausalLM", model_name="tiny")
    model = ht(cfg, tokenizer=tokenizer)
    model.load_and_process_state_dict(converter(cfg.original_architecture)(hf, cfg),
                                      fold_ln=False, center_writing_weights=False,
                                      center_unembed=False, fold_value_biases=False)
    return model.eval()


@pytest.fixture(params=["bridge", "hooked"])
def model(request, tokenizer):
    if request.param == "hooked":
        return hooked_tiny(tokenizer)
    try:
        from ppairs_lens.models.tiny import tiny_model

        return tiny_model(tokenizer=tokenizer)
    except ImportError:
        pytest.skip("TransformerBridge is absent (transformer-lens<4)")


def _cache(model, tokens, names):
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    return {n: cache[n].detach().clone() for n in names}


@torch.no_grad()
def test_adding_moves_the_readout_by_exactly_alpha(model):
    tokens = torch.tensor([[1, 5, 9, 13, 17]])
    r = torch.randn(model.cfg.d_model, generator=torch.Generator().manual_seed(0))
    clean = _cache(model, tokens, [HOOK])[HOOK]
    alpha = 3.5
    with steer(model, r, alpha, [HOOK]):
        moved = _cache(model, tokens, [HOOK])[HOOK]
    delta = moved - clean
    unit = r / r.norm()
    torch.testing.assert_close(delta, (alpha * unit).expand_as(delta), atol=1e-5, rtol=0)
    assert torch.allclose(delta @ unit, torch.full(delta.shape[:-1], alpha), atol=1e-5)
    # hooks removed on exit, also after an exception inside the block
    torch.testing.assert_close(_cache(model, tokens, [HOOK])[HOOK], clean)
    with pytest.raises(RuntimeError, match="boom"), steer(model, r, alpha, HOOK):
        raise RuntimeError("boom")
    torch.testing.assert_close(_cache(model, tokens, [HOOK])[HOOK], clean)


@torch.no_grad()
def test_last_position_only_and_final_norm(model):
    tokens = torch.tensor([[1, 5, 9, 13], [2, 6, 10, 14]])
    r = torch.randn(model.cfg.d_model, generator=torch.Generator().manual_seed(1))
    clean = _cache(model, tokens, [HOOK])[HOOK]
    with steer(model, r, -2.0, HOOK, positions="last"):
        moved = _cache(model, tokens, [HOOK])[HOOK]
    torch.testing.assert_close(moved[:, :-1], clean[:, :-1])
    torch.testing.assert_close(moved[:, -1] - clean[:, -1],
                               (-2.0 * r / r.norm()).expand(2, -1), atol=1e-5, rtol=0)
    logits = model(tokens)
    with steer(model, r, 0.0, "ln_final.hook_out"):
        torch.testing.assert_close(model(tokens), logits)
    w_u = model.W_U.detach()
    with steer(model, r, 1.0, "ln_final.hook_out"):
        moved_logits = model(tokens)
    expect = (r / r.norm()) @ w_u
    torch.testing.assert_close(moved_logits - logits, expect.expand_as(logits), atol=1e-4,
                               rtol=1e-4)


def test_refusals(tiny):
    with pytest.raises(DirectionError, match="zero vector"):
        steering_vector(torch.zeros(4), 1.0)
    with pytest.raises(ValueError, match="d_model"):
        with steer(tiny, torch.ones(3), 1.0, HOOK):
            pass
    with pytest.raises(Exception, match="hook_resid_pots"):
        with steer(tiny, torch.ones(tiny.cfg.d_model), 1.0, "blocks.0.hook_resid_pots"):
            pass


@torch.no_grad()
def test_batched_steering_adds_each_row_at_its_position(tiny):
    d = tiny.cfg.d_model
    v = torch.randn(3, d, generator=torch.Generator().manual_seed(2))
    (name, fn), _watch = batched_steering_hooks(tiny, v, [HOOK])  # the steering, then the
    assert _watch[0].startswith("ln_final.")  # read-only watch for inf or NaN
    x = torch.zeros(2, 3, d)
    torch.testing.assert_close(fn(x), v.expand(2, -1, -1))
