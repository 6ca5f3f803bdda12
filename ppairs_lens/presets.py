"""Presets as data: how an experiment's ``quick`` and ``full`` runs differ from its defaults.

Each experiment's config declares ``PRESETS``: a preset's name -> a :class:`Preset` listing
only the fields it changes, so no size is written twice; the config's own defaults are
``demo``. :data:`PREVIEWS` says what a preview does to every command besides. The command line
applies a preset with :func:`at_preset` before the user's options, which win.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

from ppairs_lens.errors import PPairsError
from ppairs_lens.evaluation.protocol import EvalSettings

__all__ = ["DEMO", "PRESET_NAMES", "PREVIEWS", "Preset", "Preview", "at_preset",
           "max_pairs_at", "settings_at"]

#: Every preset an experiment may declare, smallest first.
PRESET_NAMES: tuple[str, ...] = ("quick", "demo", "full")
#: The defaults of every config: the preset that needs no declaration.
DEMO = "demo"


@dataclass(frozen=True)
class Preview:
    """A preview: at most ``n_boot`` bootstrap resamples, figures as PNG only, and at most
    ``max_pairs`` pairs of each named dataset (whole contexts, seeded) unless ``--max-pairs``."""

    n_boot: int = 100
    max_pairs: int = 80

    def settings(self, s: EvalSettings) -> EvalSettings:
        """``s`` as a preview's protocol (an explicit ``--n-boot`` with ``--quick`` stays)."""
        if s.quick:
            return s
        return replace(s, n_boot=min(s.n_boot, self.n_boot), quick=True)


PREVIEWS: dict[str, Preview] = {"quick": Preview()}


def settings_at(s: EvalSettings, name: str) -> EvalSettings:
    return PREVIEWS[name].settings(s) if name in PREVIEWS else s


def max_pairs_at(name: str) -> int | None:
    """Pairs per named dataset at the preset ``name`` (None: every pair)."""
    return PREVIEWS[name].max_pairs if name in PREVIEWS else None


@dataclass(frozen=True)
class Preset:
    """How one preset differs from its config's defaults: field name -> value, or for a
    dataclass field a mapping of its fields to change."""

    changes: Mapping[str, Any] = field(default_factory=dict)

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
        return replace(cfg, **kw)


def at_preset(cfg, presets: Mapping[str, Preset], name: str):
    """``cfg`` at the preset ``name`` of ``presets`` (``demo``: ``cfg`` itself unless declared);
    a preset the experiment lacks is refused naming the ones it has."""
    if name not in PRESET_NAMES:
        raise PPairsError(f"unknown preset {name!r}: choose one of {', '.join(PRESET_NAMES)}")
    if name == DEMO and name not in presets:
        return cfg
    if name not in presets:
        have = [DEMO, *(n for n in presets if n != DEMO)]
        raise PPairsError(f"{type(cfg).__name__} has no {name} preset (it has "
                          f"{', '.join(have)}): drop --{name}")
    cfg = presets[name].apply(cfg)
    return replace(cfg, settings=settings_at(cfg.settings, name)) if name in PREVIEWS else cfg
