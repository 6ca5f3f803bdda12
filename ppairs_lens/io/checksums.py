"""Checksums of saved tensors and output files, so a flipped byte is refused instead of loaded."""

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
    """The sha256 (hex) of a file's bytes: a re-decision from a run's outputs refuses one
    edited since (a spreadsheet's re-save, deleted rows)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
