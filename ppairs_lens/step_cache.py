"""Where finished analysis steps are remembered, so a rerun or an interrupted run skips them.

A step's record holds a key (a digest of everything the step depends on: its inputs, the
fingerprints of the activation stores it reads, and the source code of this package and of
``analyses``) and its JSON result. A later run with the same key, whose output files are all
still there, takes the result instead of recomputing; any change — a config field, a store's
data, a line of code — recomputes the step.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from .experiment import _jsonable
from .store import atomic_write_text


def _plain(obj: Any) -> Any:
    """JSON-able data, NaN kept (as JSON's ``NaN``, which Python reads back as NaN)."""
    if isinstance(obj, float):
        return obj
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalars
        return obj.item()
    return _jsonable(obj)


@cache
def code_digest() -> str:
    """Digest of the Python sources of ``ppairs_lens`` and ``analyses`` (a code change must
    invalidate remembered results)."""
    root = Path(__file__).resolve().parent
    files = sorted(root.rglob("*.py"))
    other = root.parent / "analyses"
    if other.is_dir():
        files += sorted(other.rglob("*.py"))
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


class StepCache:
    """Records of finished steps in ``folder`` (one JSON file per step name)."""

    def __init__(self, folder: str | Path, enabled: bool = True):
        self.folder = Path(folder)
        self.enabled = enabled

    @staticmethod
    def key(name: str, **inputs: Any) -> str:
        blob = json.dumps({"step": name, "inputs": _plain(inputs), "code": code_digest()},
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def run(self, name: str, key: str, fn: Callable[[], Any],
            outputs: Sequence[str | Path] = ()) -> tuple[Any, bool]:
        """``(result, reused)``: the remembered result when ``key`` matches and every file in
        ``outputs`` exists, else ``fn()`` (then remembered)."""
        path = self.folder / f"{name}.json"
        if self.enabled and path.is_file() and all(Path(o).is_file() for o in outputs):
            try:
                rec = json.loads(path.read_text("utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                rec = {}  # a damaged record only costs a recomputation
            if rec.get("key") == key:
                return rec["result"], True
        # Round-trip through JSON so a fresh and a remembered result look the same.
        result = json.loads(json.dumps(_plain(fn())))
        atomic_write_text(path, json.dumps({"key": key, "result": result}, indent=1))
        return result, False
