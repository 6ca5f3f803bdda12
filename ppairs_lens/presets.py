"""Presets as data: how an experiment's ``quick`` and ``full`` runs differ from its defaults.

Each experiment's config declares its presets once, beside its fields, as ``PRESETS``: a
mapping from a preset's name to a :class:`Preset`. The config's own defaults are the ``demo``
preset (what ``make demo`` and a command without ``--quick`` or ``--full`` run), and a preset
lists only the fields it changes, so no size is written twice. The command line picks a preset
by name (``--quick``, ``--full``) and applies it with :func:`at_preset` before the options a
user gave, which win; a preset an experiment does not declare is refused with one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

from ppairs_lens.errors import PPairsError

__all__ = ["DEMO", "PRESET_NAMES", "Preset", "at_preset"]

#: Every preset an experiment may declare, smallest first.
PRESET_NAMES: tuple[str, ...] = ("quick", "demo", "full")
#: The defaults of every config: the preset that needs no declaration.
DEMO = "demo"


@dataclass(frozen=True)
class Preset:
    """How one preset differs from its config's defaults.

    ``changes``: field name -> value; for a field that is itself a dataclass (the replication's
    ``sizes`` and each step's config it nests), a mapping of that record's fields to change.
    ``preview``: the protocol of a preview as well (``EvalSettings.as_quick``: fewer
    resamples, figures as PNG only)."""

    changes: Mapping[str, Any] = field(default_factory=dict)
    preview: bool = False

    def apply(self, cfg):
        """``cfg`` with this preset's changes (a copy; ``cfg`` is left as it is)."""
        names = {f.name for f in fields(cfg)}
        unknown = sorted(set(self.changes) - names)
        if unknown:
            raise PPairsError(f"a preset of {type(cfg).__name__} names no field of it: "
                              f"{', '.join(unknown)}")
        kw = {}
        for name, value in self.changes.items():
            current = getattr(cfg, name)
            nested = is_dataclass(current) and isinstance(value, Mapping)
            kw[name] = replace(current, **value) if nested else value
        if self.preview:
            kw["settings"] = cfg.settings.as_quick()
        return replace(cfg, **kw)


def at_preset(cfg, presets: Mapping[str, Preset], name: str):
    """``cfg`` at the preset ``name`` of ``presets`` (an experiment's ``PRESETS``); ``demo``,
    the defaults, is ``cfg`` itself unless declared. A preset the experiment lacks is refused
    with one line naming the ones it has."""
    if name not in PRESET_NAMES:
        raise PPairsError(f"unknown preset {name!r}: choose one of {', '.join(PRESET_NAMES)}")
    if name == DEMO and name not in presets:
        return cfg
    if name not in presets:
        have = [DEMO, *(n for n in presets if n != DEMO)]
        raise PPairsError(f"{type(cfg).__name__} has no {name} preset (it has "
                          f"{', '.join(have)}): drop --{name}")
    return presets[name].apply(cfg)
