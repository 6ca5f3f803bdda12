"""Checksums of saved tensors (one sha256 per tensor, over its raw bytes) and of output files:
store shards and saved probes record one per tensor when they write and compare it when they
read, so a flipped byte is refused instead of loaded."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from torch import Tensor

__all__ = ["file_sha256", "tensor_sha256"]


def tensor_sha256(t: Tensor) -> str:
    """The sha256 (hex) of ``t``'s bytes in memory (contiguous, on the CPU)."""
    return hashlib.sha256(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
                          ).hexdigest()


def file_sha256(path: str | Path) -> str:
    """The sha256 (hex) of a file's bytes: a run records its outputs' so that a re-decision
    from them refuses one edited since (a spreadsheet's re-save, deleted rows)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
