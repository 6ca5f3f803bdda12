"""The HookedTransformer loader (TransformerLens 2.16-3.x) computes what the HF model computes."""

from __future__ import annotations

import pytest
import torch

from ppairs_lens.errors import ModelLoadError

try:
    from transformer_lens import HookedTransformer  # noqa: F401

    HAS_HOOKED = True
except ImportError:
    HAS_HOOKED = False

needs_hooked = pytest.mark.skipif(
    not HAS_HOOKED, reason="HookedTransformer is absent: transformer-lens>=4 has only "
    "TransformerBridge (run these in an environment with transformer-lens>=3.9,<4)")

PROMPT = "The capital of France is Paris. The capital of Italy is"


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute difference relative to the largest magnitude of the reference."""
    return float((a - b).abs().max() / b.abs().max())


def randomise_vectors(hf, seed: int = 0):
    """Give norm gains and biases seeded non-trivial values (HF initialises them to 1 and 0,
    which would hide a dropped gain or bias)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in hf.parameters():
            if p.ndim == 1:
                p.add_(0.5 * torch.randn(p.shape, generator=g))
    return hf.eval()


def tiny_config(kind: str, tokenizer, **extra):
    """A 3-layer, d_model 64 HF config of ``kind`` for the embedded tokenizer."""
    import transformers

    cls = {"llama": transformers.LlamaConfig, "mistral": transformers.MistralConfig,
           "qwen2": transformers.Qwen2Config}[kind]
    fields = {"vocab_size": len(tokenizer), "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 256, "tie_word_embeddings": False}
    return cls(**{**fields, **extra})


def assert_matches_hf(hf, tokenizer, prompt: str = PROMPT):
    """Logits and every layer's residual stream of the HookedTransformer equal HF's."""
    from ppairs_lens.models.hooked import load_hooked

    model = load_hooked(hf, tokenizer)
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.inference_mode():
        out = hf(ids, output_hidden_states=True)
        logits, cache = model.run_with_cache(ids)
    assert rel_err(logits, out.logits) < 1e-4
    n_layers = model.cfg.n_layers
    # HF's last hidden state is after the final norm; the others are block outputs.
    for l in range(n_layers - 1):
        assert rel_err(cache[f"blocks.{l}.hook_resid_post"], out.hidden_states[l + 1]) < 1e-4, l
    final = cache["ln_final.hook_normalized"] * model.ln_final.w.detach()
    assert rel_err(final, out.hidden_states[n_layers]) < 1e-4
    return model, cache, out


@needs_hooked
def test_tiny_llama_matches_hf(tokenizer):
    from ppairs_lens.models.tiny import tiny_hf_model

    hf = randomise_vectors(tiny_hf_model(tokenizer, seed=0, n_layers=3))
    model, cache, out = assert_matches_hf(hf, tokenizer)
    assert model.training is False
    assert model.ppairs_model_name
    # hook_normalized is before the gain: it is not HF's final hidden state (nor the bridge's
    # ln_final.hook_out); a read-out must multiply by ln_final.w.
    assert rel_err(cache["ln_final.hook_normalized"], out.hidden_states[-1]) > 1e-2


@needs_hooked
@pytest.mark.parametrize("kind,extra", [
    ("llama", {"rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 32}}),
    ("llama", {"num_key_value_heads": 4}),  # plain multi-head attention
    ("mistral", {"sliding_window": 4}),  # shorter than the prompt: the window matters
    ("qwen2", {}),  # q/k/v biases
])
def test_tiny_variants_match_hf(tokenizer, kind, extra):
    from transformers import AutoModelForCausalLM

    with torch.random.fork_rng():
        torch.manual_seed(1)
        hf = AutoModelForCausalLM.from_config(tiny_config(kind, tokenizer, **extra))
    assert_matches_hf(randomise_vectors(hf), tokenizer)


@needs_hooked
def test_unsupported_architectures_are_refused(tokenizer, tmp_path):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from ppairs_lens.models.hooked import hooked_config_from_hf, load_hooked

    neox = GPTNeoXForCausalLM(GPTNeoXConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2))
    with pytest.raises(ModelLoadError, match="GPTNeoXForCausalLM.*supported: LlamaForCausalLM"):
        load_hooked(neox, tokenizer)
    neox.save_pretrained(tmp_path / "neox")  # a folder is refused before its weights load
    with pytest.raises(ModelLoadError, match="GPTNeoXForCausalLM"):
        load_hooked(tmp_path / "neox", tokenizer)
    linear = tiny_config("llama", tokenizer, rope_parameters={
        "rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0})
    with pytest.raises(ModelLoadError, match="rotary scaling 'linear'"):
        hooked_config_from_hf(linear)
    with pytest.raises(ModelLoadError, match="no such folder"):
        load_hooked(tmp_path / "missing", tokenizer)


@pytest.mark.skipif(HAS_HOOKED, reason="checks the message given where HookedTransformer is absent")
def test_transformer_lens_4_says_which_version_has_it(tokenizer):
    from ppairs_lens.models.hooked import load_hooked
    from ppairs_lens.models.tiny import tiny_hf_model

    with pytest.raises(ModelLoadError, match="transformer-lens<4"):
        load_hooked(tiny_hf_model(tokenizer), tokenizer)


@needs_hooked
@pytest.mark.integration
def test_embedded_model_agrees_with_the_bridge(smol, tokenizer):
    from ppairs_lens.models.hooked import load_hooked

    model = load_hooked()
    assert model.ppairs_model_name == smol.ppairs_model_name
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    names = ["blocks.10.hook_resid_post", "blocks.29.hook_resid_post"]
    with torch.inference_mode():
        _, hooked = model.run_with_cache(ids, names_filter=names + ["ln_final.hook_normalized"])
        _, bridge = smol.run_with_cache(ids, names_filter=names + ["ln_final.hook_out"])
    for name in names:
        assert rel_err(hooked[name], bridge[name]) < 1e-4, name
    final = hooked["ln_final.hook_normalized"] * model.ln_final.w.detach()
    assert rel_err(final, bridge["ln_final.hook_out"]) < 1e-4
