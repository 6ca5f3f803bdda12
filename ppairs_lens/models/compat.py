"""What differs between the TransformerLens releases ppairs-lens supports (3.9 to 4.x).

transformer-lens 3.9 is the newest release SAELens accepts and the last with both
``HookedTransformer`` and ``TransformerBridge``. The bridge runs the same on both, measured,
except for disk offload: 3.9's ``boot_transformers`` has no ``offload_folder`` and refuses
``disk`` / ``meta`` targets after loading the weights; here that is a clear error before any load.
"""

from __future__ import annotations

import inspect
from typing import Any

from ppairs_lens.errors import ModelLoadError

#: device-map targets that keep weights off any device; only TransformerLens 4's bridge runs them.
OFFLOAD_TARGETS = frozenset({"disk", "meta"})


def transformer_lens_version() -> str:
    """The installed transformer-lens version (its distribution's; the module has none)."""
    from importlib.metadata import version

    return version("transformer-lens")


def bridge_supports_disk_offload() -> bool:
    """Whether this TransformerLens' ``TransformerBridge.boot_transformers`` offloads to disk."""
    from transformer_lens.model_bridge import TransformerBridge

    return "offload_folder" in inspect.signature(TransformerBridge.boot_transformers).parameters


def bridge_boot_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` for ``boot_transformers``: on 3.x without ``offload_folder``, disk offload
    refused."""
    if "offload_folder" not in kwargs or bridge_supports_disk_offload():
        return kwargs
    device_map = kwargs.get("device_map")
    targets = ({str(v).lower() for v in device_map.values()} if isinstance(device_map, dict)
               else set())
    if kwargs["offload_folder"] is not None or targets & OFFLOAD_TARGETS:
        raise ModelLoadError(
            f"offloading weights to disk needs transformer-lens>=4: the installed "
            f"{transformer_lens_version()} TransformerBridge refuses disk/meta device_map "
            "targets and has no offload_folder. Place every module on a device (cpu or cuda) "
            "or install transformer-lens>=4 (then SAELens, which needs <4, cannot share the "
            "environment)")
    return {k: v for k, v in kwargs.items() if k != "offload_folder"}
