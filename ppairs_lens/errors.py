"""Errors a user can act on: each names what is wrong and where."""

from __future__ import annotations


class PPairsError(Exception):
    """Base class for every error this package raises on purpose."""


class DataError(PPairsError, ValueError):
    """A dataset file (or an in-memory record) is malformed; the message names the file, the
    1-based row (line, or list index + 1 for JSON) and the field."""

    def __init__(self, problem: str, *, file: str | None = None, row: int | None = None,
                 field: str | None = None):
        self.problem, self.file, self.row, self.field = problem, file, row, field
        where = ", ".join(p for p in (
            f"file {file}" if file else None,
            f"row {row}" if row is not None else None,
            f"field '{field}'" if field else None,
        ) if p)
        super().__init__(f"{where}: {problem}" if where else problem)


class TemplateError(PPairsError, ValueError):
    """A prompt template (with a tokenizer) does not give a valid contrast pair."""


class HookError(PPairsError, ValueError):
    """A hook name, preset or pattern the model does not have, or a hook that cannot be read
    out (not one vector per token)."""


class StoreError(PPairsError, RuntimeError):
    """An activation store is missing, corrupt, locked, or belongs to another run."""


class ModelLoadError(PPairsError, RuntimeError):
    """A model could not be loaded (for example offline, not cached)."""


class ProbeError(PPairsError, ValueError):
    """A probe cannot be fitted or applied to the given features."""


class DirectionError(PPairsError, ValueError):
    """Directions to intervene along that are malformed (shape, NaN, zero, dependent)."""


class FetchError(PPairsError, RuntimeError):
    """A dataset file could not be downloaded or did not verify: the message names the file,
    the URL and, on a mismatch, both SHA-256 hashes."""


class SettingError(PPairsError, ValueError):
    """A setting a caller passed is not usable: a non-finite coefficient, an empty list, a
    request the data cannot support (e.g. more distinct permutations than exist)."""
