"""Atomic file writes: readers see the old file or the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ppairs_lens.errors import PPairsError


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; results are meant to be shared
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_save_tensors(path: Path, tensors: dict, metadata: dict[str, str] | None = None
                        ) -> None:
    """``safetensors.torch.save_file``, atomically."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o644)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=metadata)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_output_folder(path: str | Path, what: str,
                        error: type[PPairsError] = PPairsError, *,
                        may_be_read_only: bool = False) -> Path:
    """Refuse ``path`` as a folder to write into, before any work: a file, a path under a
    file, or an unwritable folder (or nearest existing parent); ``what`` names it in the error.
    ``may_be_read_only``: an existing folder need not be writable (stores only read)."""
    path = Path(path)
    near = path
    while not near.exists() and near != near.parent:
        near = near.parent
    if near == path and not path.is_dir():
        raise error(f"{what} {path} is an existing file, not a folder; name a folder")
    if not near.is_dir():
        raise error(f"{what} {path}: {near} is an existing file, not a folder; name a folder")
    if not (may_be_read_only and near == path) and not os.access(near, os.W_OK | os.X_OK):
        raise error(f"{what} {path}: {near} is not writable")
    return path
