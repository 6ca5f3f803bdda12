"""Where finished analysis steps are remembered, so a rerun or an interrupted run skips them.

A step's record holds its JSON result and a key: a digest of its inputs (store fingerprints
included) and the named packages' source. A later run with the same key, whose output files
are all still there, takes the result; any change recomputes the step.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ppairs_lens.io.outputs import jsonable
from ppairs_lens.io.atomic import atomic_write_text


@cache
def code_digest(*packages: str) -> str:
    """Digest of the named packages' Python sources (a code change invalidates results)."""
    h = hashlib.sha256()
    for name in packages:
        root = Path(importlib.import_module(name).__file__).resolve().parent
        for f in sorted(root.rglob("*.py")):
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


class StepCache:
    """Records of finished steps in ``folder``, one JSON file per step name."""

    def __init__(self, folder: str | Path, enabled: bool = True,
                 code_packages: Sequence[str] = ("ppairs_lens",)):
        self.folder = Path(folder)
        self.enabled = enabled
        self.code_packages = tuple(code_packages)

    def key(self, name: str, **inputs: Any) -> str:
        """A digest of ``name``, ``inputs`` and the source of ``code_packages`` (if any)."""
        code = code_digest(*self.code_packages) if self.code_packages else None
        blob = json.dumps({"step": name, "inputs": jsonable(inputs, keep_nan=True),
                           "code": code},
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _record(self, name: str) -> dict:
        path = self.folder / f"{name}.json"
        if not (self.enabled and path.is_file()):
            return {}
        try:
            rec = json.loads(path.read_text("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return {}  # a damaged record only costs a recomputation
        # so does one of the wrong JSON type
        return rec if isinstance(rec, dict) and "result" in rec else {}

    def has(self, name: str, key: str) -> bool:
        """Whether :meth:`run` would reuse step ``name`` under ``key`` (its output files aside):
        a run's plan can leave it out of its cost."""
        return self._record(name).get("key") == key

    def run(self, name: str, key: str, fn: Callable[[], Any],
            outputs: Sequence[str | Path] = ()) -> tuple[Any, bool]:
        """``(result, reused)``: the remembered result when ``key`` matches and every file in
        ``outputs`` exists, else ``fn()`` (then remembered)."""
        path = self.folder / f"{name}.json"
        if all(Path(o).is_file() for o in outputs):
            rec = self._record(name)
            if rec.get("key") == key:
                return rec["result"], True
        # Round-trip through JSON so a fresh and a remembered result look the same.
        result = json.loads(json.dumps(jsonable(fn(), keep_nan=True)))
        atomic_write_text(path, json.dumps({"key": key, "result": result}, indent=1))
        return result, False
