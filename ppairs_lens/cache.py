"""The package's user cache folder: where the embedded model's dequantized copy and the
fetched datasets live (one rule for both, so ``PPAIRS_LENS_CACHE`` moves everything)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_root", "writable_cache_root"]

CACHE_ENV = "PPAIRS_LENS_CACHE"


def cache_root() -> Path:
    """The user cache folder (``$PPAIRS_LENS_CACHE``, else ``$XDG_CACHE_HOME``/~/.cache)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ppairs-lens"


def writable_cache_root() -> Path:
    """:func:`cache_root`, refused before any work where a file is on its way."""
    from ppairs_lens.errors import PPairsError

    root = cache_root()
    for p in (root, *root.parents):
        if p.exists():
            if not p.is_dir():
                raise PPairsError(f"the cache folder {root} cannot be made: {p} is a file "
                                  f"(set ${CACHE_ENV} to a folder)")
            break
    return root
