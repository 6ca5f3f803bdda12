"""Loading a model as a classic TransformerLens ``HookedTransformer`` (TransformerLens 2.16-3.x).

On 3.x (kept by SAELens users) ``HookedTransformer`` loads only its official names. Here a
``HookedTransformerConfig`` is built from any HF config of a supported architecture and filled
by TransformerLens' own weight conversion, so a local folder or an in-memory HF model loads
offline. Weights are raw (no folding, no centering), as the bridge's, so directions carry over
between the backends. On TransformerLens 4 every entry point raises :class:`ModelLoadError`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ppairs_lens.errors import ModelLoadError
from ppairs_lens.models.embedded import EMBEDDED_MODEL_NAME, embedded_model_dir
from ppairs_lens.models.tokenizer import load_tokenizer

#: HF architectures this loader converts, with the TransformerLens weight converter's name.
CONVERTERS: dict[str, str] = {
    "LlamaForCausalLM": "convert_llama_weights",
    "MistralForCausalLM": "convert_mistral_weights",
    "Qwen2ForCausalLM": "convert_qwen2_weights",
}
#: A freshly built HF config has no ``architectures`` yet: its ``model_type`` names it.
MODEL_TYPES: dict[str, str] = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                               "qwen2": "Qwen2ForCausalLM"}


def hooked_transformer_class() -> type:
    """``HookedTransformer``, or a ModelLoadError saying which TransformerLens has it."""
    try:
        from transformer_lens import HookedTransformer
    except ImportError as e:
        from ppairs_lens.models.compat import transformer_lens_version

        version = transformer_lens_version()
        raise ModelLoadError(
            "HookedTransformer needs transformer-lens<4 (3.9 here); the installed "
            f"transformer-lens {version} has only TransformerBridge: use "
            "ppairs_lens.models.loading.load_model(), or install transformer-lens>=3.9,<4 in "
            "another environment") from e
    return HookedTransformer


def architecture_of(hf_config: Any) -> str:
    """The HF architecture name of a config (``architectures[0]``, else from ``model_type``)."""
    names = getattr(hf_config, "architectures", None) or []
    if names:
        return str(names[0])
    model_type = str(getattr(hf_config, "model_type", ""))
    return MODEL_TYPES.get(model_type, model_type or type(hf_config).__name__)


def check_supported(hf_config: Any, architecture: str | None = None) -> str:
    """The architecture name, or a ModelLoadError naming it and the supported ones."""
    arch = architecture or architecture_of(hf_config)
    if arch not in CONVERTERS:
        raise ModelLoadError(f"HookedTransformer loading does not support architecture {arch!r};"
                             f" supported: {', '.join(CONVERTERS)}. Use load_model() (a "
                             "TransformerBridge) for other architectures")
    # The Llama and Mistral converters write zero biases: a checkpoint with biases would
    # load without error and compute something else.
    if arch != "Qwen2ForCausalLM" and (getattr(hf_config, "attention_bias", False)
                                       or getattr(hf_config, "mlp_bias", False)):
        raise ModelLoadError(f"{arch} with attention_bias/mlp_bias is not supported by "
                             "TransformerLens' weight conversion")
    return arch


def rope_fields(hf_config: Any) -> dict[str, Any]:
    """The rotary base and Llama 3's NTK-by-parts scaling (transformers 5: ``rope_parameters``,
    4.x: ``rope_theta``/``rope_scaling``). Other scalings have no HookedTransformer twin:
    refused, not dropped."""
    params = getattr(hf_config, "rope_parameters", None) or getattr(hf_config, "rope_scaling",
                                                                     None) or {}
    theta = getattr(hf_config, "rope_theta", None) or params.get("rope_theta", 10000.0)
    fields: dict[str, Any] = {"rotary_base": theta}
    rope_type = params.get("rope_type") or params.get("type") or "default"
    if rope_type == "llama3":
        fields.update(
            use_NTK_by_parts_rope=True,
            NTK_original_ctx_len=params.get("original_max_position_embeddings",
                                            hf_config.max_position_embeddings),
            NTK_by_parts_low_freq_factor=params.get("low_freq_factor", 1.0),
            NTK_by_parts_high_freq_factor=params.get("high_freq_factor", 4.0),
            NTK_by_parts_factor=params.get("factor", 1.0))
    elif rope_type != "default":
        raise ModelLoadError(f"rotary scaling {rope_type!r} has no HookedTransformer equivalent")
    return fields


def hooked_config_from_hf(hf_config: Any, *, dtype: torch.dtype = torch.float32,
                          device: str | torch.device | None = None,
                          model_name: str = "custom", architecture: str | None = None):
    """A ``HookedTransformerConfig`` as TransformerLens' ``convert_hf_model_config`` would make
    it; ``architecture`` overrides the config's (a model built in memory records none)."""
    hooked_transformer_class()  # the TransformerLens 4 message, before any other import
    from transformer_lens import HookedTransformerConfig

    arch = check_supported(hf_config, architecture)
    n_heads = hf_config.num_attention_heads
    d_head = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // n_heads
    n_kv = getattr(hf_config, "num_key_value_heads", None) or n_heads
    fields: dict[str, Any] = dict(
        d_model=hf_config.hidden_size, d_head=d_head, n_heads=n_heads,
        d_mlp=hf_config.intermediate_size, n_layers=hf_config.num_hidden_layers,
        n_ctx=hf_config.max_position_embeddings, d_vocab=hf_config.vocab_size,
        eps=hf_config.rms_norm_eps, act_fn=hf_config.hidden_act,
        # The Llama converter reads K/V as grouped only when n_key_value_heads is set; the
        # Mistral and Qwen2 converters always write grouped K/V.
        n_key_value_heads=n_kv if (n_kv != n_heads or arch != "LlamaForCausalLM") else None,
        normalization_type="RMS", final_rms=True, gated_mlp=True,
        positional_embedding_type="rotary", rotary_dim=d_head, rotary_adjacent_pairs=False,
        original_architecture=arch, model_name=model_name, dtype=dtype, device=device,
        # The weights are loaded next: skip the random initialisation.
        init_weights=False, **rope_fields(hf_config))
    window = getattr(hf_config, "sliding_window", None)
    if arch == "MistralForCausalLM" and window:
        fields.update(use_local_attn=True, window_size=window,
                      attn_types=["local"] * hf_config.num_hidden_layers)
    elif arch == "Qwen2ForCausalLM" and getattr(hf_config, "use_sliding_window", False):
        raise ModelLoadError("Qwen2 with use_sliding_window is not supported")
    return HookedTransformerConfig(**fields)


def converter(arch: str) -> Callable[[Any, Any], dict[str, torch.Tensor]]:
    from transformer_lens.pretrained import weight_conversions

    return getattr(weight_conversions, CONVERTERS[arch])


def load_hooked(folder_or_hf_model: Any = None, tokenizer: Any = None, *,
                dtype: torch.dtype = torch.float32, device: str | torch.device | None = None,
                name: str | None = None):
    """An eval-mode ``HookedTransformer`` with the weights of ``folder_or_hf_model``: None for
    the embedded SmolLM2, a folder (or HF id), or a loaded ``*ForCausalLM`` with its
    ``tokenizer``. ``name`` is recorded as ``ppairs_model_name``."""
    hooked_transformer = hooked_transformer_class()
    source = folder_or_hf_model
    if source is None:
        source, name = embedded_model_dir(), name or EMBEDDED_MODEL_NAME
    if isinstance(source, (str, Path)):
        hf_model = load_hf_model(source, dtype)
        tokenizer = tokenizer if tokenizer is not None else load_tokenizer(str(source))
        name = name or str(folder_or_hf_model)
    else:
        hf_model = source
        if tokenizer is None:
            raise ValueError("load_hooked(hf_model, tokenizer): an HF model needs its tokenizer")
        name = name or getattr(hf_model.config, "name_or_path", "") or type(hf_model).__name__
    cfg = hooked_config_from_hf(hf_model.config, dtype=dtype, device=device, model_name=name,
                                architecture=type(hf_model).__name__)
    model = hooked_transformer(cfg, tokenizer=tokenizer)
    with torch.no_grad():
        state = converter(cfg.original_architecture)(hf_model, cfg)
        # Raw weights, as the bridge computes by default: no folding, no centering.
        model.load_and_process_state_dict(state, fold_ln=False, center_writing_weights=False,
                                          center_unembed=False, fold_value_biases=False)
    model.eval()
    model.ppairs_model_name = name
    return model


def load_hf_model(source: str | Path, dtype: torch.dtype):
    """The HF model in ``source``, checked to be convertible before its weights are read."""
    from transformers import AutoConfig, AutoModelForCausalLM

    local = Path(source).expanduser()
    text = str(source)
    if not local.exists() and (text.startswith((".", "/", "~")) or text.count("/") > 1):
        raise ModelLoadError(f"cannot load model {text!r}: no such folder {local}")
    where = str(local) if local.exists() else text
    try:
        check_supported(AutoConfig.from_pretrained(where))
        return AutoModelForCausalLM.from_pretrained(where, dtype=dtype)
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"cannot load model {text!r}: "
                             f"{e.__class__.__name__}: {str(e).splitlines()[0]}") from e
