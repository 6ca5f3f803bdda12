"""A tiny randomly initialised Llama-shaped model with the embedded tokenizer, for fast tests."""

from __future__ import annotations

import torch

from ppairs_lens.models.fused_attention import set_fused_attention
from ppairs_lens.models.tokenizer import load_tokenizer

TINY_MODEL_NAME = "tiny-random-llama"


def tiny_hf_model(tokenizer, seed: int = 0, *, n_layers: int = 2, d_model: int = 64):
    """A randomly initialised Llama-shaped HF model (seeded, no global RNG change)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=d_model, intermediate_size=2 * d_model,
        num_hidden_layers=n_layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=2048, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return LlamaForCausalLM(cfg)


def tiny_model(seed: int = 0, *, n_layers: int = 2, d_model: int = 64, tokenizer=None):
    """A seeded tiny bridge with the default model's tokenizer and chat template, so prompts
    and contrast pairs are real."""
    from transformer_lens.model_bridge import TransformerBridge

    tok = tokenizer if tokenizer is not None else load_tokenizer()
    hf = tiny_hf_model(tok, seed, n_layers=n_layers, d_model=d_model)
    # The device is only recorded when hf_model is given: name where the weights are (else
    # cfg.device says cuda on a GPU machine while the weights stay on the CPU).
    bridge = TransformerBridge.boot_transformers(TINY_MODEL_NAME, hf_model=hf, tokenizer=tok,
                                                 device=next(hf.parameters()).device)
    bridge.eval()
    set_fused_attention(bridge)  # as load_model does: the tests run the path the job runs
    bridge.ppairs_model_name = f"{TINY_MODEL_NAME}-seed{seed}-L{n_layers}-d{d_model}"
    return bridge
