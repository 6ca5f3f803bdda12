"""Checksums of saved tensors: one sha256 per tensor, over its raw bytes.

Activation store shards (:mod:`ppairs_lens.activations.store`) and saved probes, sweeps and
directions (:mod:`ppairs_lens.probes.persistence`) both record one per tensor when they write
and compare it when they read, so a flipped byte is refused instead of loaded.
"""

from __future__ import annotations

import hashlib

import torch
from torch import Tensor

__all__ = ["tensor_sha256"]


def tensor_sha256(t: Tensor) -> str:
    """The sha256 (hex) of ``t``'s bytes in memory (contiguous, on the CPU)."""
    return hashlib.sha256(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
                          ).hexdigest()
