"""Reading back a JSON file the package wrote, which may have been edited or damaged by hand:
the wrong JSON type is refused in one error naming the file and the field, never an
``AttributeError`` or ``KeyError`` deep inside whoever reads it next.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ppairs_lens.errors import PPairsError

__all__ = ["FieldType", "array_of", "check_fields", "is_int", "is_number", "json_object",
           "json_type", "optional", "read_json_object"]

#: ``(check, what the value must be)``, e.g. ``(is_int, "a whole number")``.
FieldType = tuple[Callable[[Any], bool], str]


def json_type(v: Any) -> str:
    """The JSON name of ``v``'s type (object, array, string, number, boolean, null)."""
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            type(None): "null"}.get(type(v), "number")


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def optional(t: FieldType) -> FieldType:
    """``t`` or null."""
    return (lambda v: v is None or t[0](v)), f"{t[1]} or null"


def array_of(check: Callable[[Any], bool], what: str) -> FieldType:
    return (lambda v: isinstance(v, list) and all(check(x) for x in v)), f"an array of {what}"


def json_object(text: str, source: str | Path, error: type[PPairsError] = PPairsError
                ) -> dict[str, Any]:
    """``text`` parsed as a JSON object, else refused naming ``source``."""
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise error(f"{source} is not valid JSON ({e})") from None
    if not isinstance(raw, dict):
        raise error(f"{source} must hold a JSON object, got a {json_type(raw)}")
    return raw


def check_fields(raw: Mapping[str, Any], types: Mapping[str, FieldType], source: str | Path,
                 error: type[PPairsError] = PPairsError, required: tuple[str, ...] = ()
                 ) -> None:
    """Refuse a missing ``required`` field, or the first whose value fails its ``types``."""
    for key in required:
        if key not in raw:
            raise error(f"{source}: field {key!r} is missing")
    for key, value in raw.items():
        if key in types and not types[key][0](value):
            raise error(f"{source}: field {key!r} must be {types[key][1]}, got "
                        f"{json.dumps(value)[:60]} ({json_type(value)})")


def read_json_object(path: str | Path, error: type[PPairsError] = PPairsError
                     ) -> dict[str, Any]:
    """The JSON object in file ``path``, else refused naming the file."""
    try:
        text = Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path} cannot be read: {e}") from None
    return json_object(text, path, error)
