"""``ModelSpec``: which model to load and how, as one frozen record.

The CLI's model options, an experiment config's ``model`` field and each Ray worker's job all
describe a model this way, so a model is loaded one way wherever it is used (e.g.
``run_replication(ReplicationConfig(model=ModelSpec(..., device="cuda")))``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ppairs_lens.errors import ModelLoadError

#: The kinds of TransformerLens model :func:`~ppairs_lens.models.loading.load_model` builds.
BACKENDS: tuple[str, ...] = ("bridge", "hooked")


@dataclass(frozen=True)
class ModelSpec:
    """A model to load: ``name`` (None: the embedded SmolLM2), ``dtype`` (a torch dtype's name;
    a ``torch.dtype`` is kept by name, so a spec saves as JSON), ``device`` or ``device_map``
    (e.g. ``"auto"``: placed by accelerate, with ``max_memory`` and ``offload_folder``), and
    ``backend``. A name for Ray workers must be readable by every worker (an absolute path on a
    shared file system); stores record it.
    """

    name: str | None = None
    dtype: str = "float32"
    device: str | None = None
    device_map: str | dict | None = None
    backend: str = "bridge"
    max_memory: dict | None = None
    offload_folder: str | None = None

    def __post_init__(self):
        if isinstance(self.dtype, torch.dtype):
            object.__setattr__(self, "dtype", str(self.dtype).removeprefix("torch."))
        if not isinstance(getattr(torch, str(self.dtype), None), torch.dtype):
            raise ModelLoadError(f"unknown dtype {self.dtype!r}; use a torch dtype's name "
                                 "(float32, bfloat16, float16)")
        if self.backend not in BACKENDS:
            raise ModelLoadError(f"unknown backend {self.backend!r}; use one of {BACKENDS}")
        if self.device is not None and not isinstance(self.device, str):
            object.__setattr__(self, "device", str(self.device))

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @classmethod
    def from_args(cls, args: Any) -> ModelSpec:
        """The spec of the command line's model options (an absent one: its default)."""
        return cls(name=getattr(args, "model", None), dtype=getattr(args, "dtype", "float32"),
                   device=getattr(args, "device", None),
                   device_map=getattr(args, "device_map", None),
                   backend=getattr(args, "backend", "bridge"))

    @classmethod
    def coerce(cls, model: ModelSpec | str | None) -> ModelSpec:
        """A spec from a spec, its JSON form, a name or folder, or None (the embedded model)."""
        if isinstance(model, cls):
            return model
        if isinstance(model, dict):  # a spec read back from JSON
            return cls(**model)
        return cls(name=None if model is None else str(model))
