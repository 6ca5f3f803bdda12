"""Loading a model (the embedded SmolLM2, an HF id or a folder) as a ``TransformerBridge``, or
with ``backend="hooked"`` a ``HookedTransformer``; the rest of the package touches either only
through hook names, ``run_with_cache`` and ``hooks``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ppairs_lens.errors import ModelLoadError
from ppairs_lens.models.compat import bridge_boot_kwargs
from ppairs_lens.models.embedded import EMBEDDED_MODEL_NAME, embedded_model_dir
from ppairs_lens.models.fused_attention import set_fused_attention
from ppairs_lens.models.hooked import load_hooked
from ppairs_lens.models.spec import BACKENDS, ModelSpec

__all__ = ["BACKENDS", "ModelSpec", "load_model", "model_name"]


def load_model(
    name: ModelSpec | str | None = None,
    *,
    dtype: torch.dtype | str | None = None,
    device: str | torch.device | None = None,
    device_map: str | dict | None = None,
    n_devices: int | None = None,
    max_memory: dict | None = None,
    offload_folder: str | None = None,
    backend: str | None = None,
    fused_attention: bool = True,
):
    """The model a :class:`ModelSpec` describes, or ``name`` with the spec's fields as keywords.

    Multi-device placement (``device_map``, ``n_devices``, ``max_memory``, ``offload_folder``)
    goes to TransformerBridge's accelerate-based loader. ``backend="hooked"``: Llama, Mistral
    and Qwen2 on one device, transformer-lens<4. ``fused_attention``: see
    :mod:`ppairs_lens.models.fused_attention`.
    """
    keywords = {"dtype": dtype, "device": device, "device_map": device_map,
                "max_memory": max_memory, "offload_folder": offload_folder, "backend": backend}
    if isinstance(name, ModelSpec):
        given = [k for k, v in keywords.items() if v is not None]
        if given:  # two answers to one question: the spec is the one
            raise ModelLoadError(f"load_model(spec) reads {', '.join(given)} from the spec; "
                                 "set them there (dataclasses.replace(spec, ...))")
        spec = name
    else:
        spec = ModelSpec(name=None if name is None else str(name),
                         **{k: v for k, v in keywords.items() if v is not None})
    return _load(spec, n_devices=n_devices, fused_attention=fused_attention)


def _load(spec: ModelSpec, *, n_devices: int | None, fused_attention: bool):
    name, dtype, device, device_map = spec.name, spec.torch_dtype, spec.device, spec.device_map
    max_memory, offload_folder = spec.max_memory, spec.offload_folder
    if spec.backend == "hooked":
        placement = {"device_map": device_map, "n_devices": n_devices,
                     "max_memory": max_memory, "offload_folder": offload_folder}
        given = [k for k, v in placement.items() if v is not None]
        if given:
            raise ModelLoadError(f"{', '.join(given)} place a TransformerBridge's layers; "
                                 "backend='hooked' loads on one device (device=...)")

        return load_hooked(name, dtype=dtype, device=device,
                           name=EMBEDDED_MODEL_NAME if name is None else name)
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
        bridge = TransformerBridge.boot_transformers(source, **bridge_boot_kwargs(kwargs))
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
    set_fused_attention(bridge, fused_attention)
    _point_cfg_device_at_execution_device(bridge)
    bridge.ppairs_model_name = EMBEDDED_MODEL_NAME if name is None else name
    return bridge


def _point_cfg_device_at_execution_device(bridge) -> None:
    """Make ``cfg.device`` a real device when the embedding is offloaded to disk: accelerate
    leaves it on ``meta`` (no data) and runs it on its hook's execution device, where the
    inputs belong."""
    if str(getattr(bridge.cfg, "device", "")) != "meta":
        return
    hf = bridge.original_model
    hooks = [getattr(m, "_hf_hook", None) for m in (hf.get_input_embeddings(), *hf.modules())]
    devices = [h.execution_device for h in hooks
               if getattr(h, "execution_device", None) is not None]
    bridge.cfg.device = str(torch.device(devices[0] if devices else "cpu"))


def model_name(bridge) -> str:
    """The name a bridge was loaded under (recorded in stores and probes)."""
    return getattr(bridge, "ppairs_model_name", None) or str(bridge.cfg.model_name)
