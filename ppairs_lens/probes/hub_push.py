"""``push_to_hub``: a saved folder, or a fitted probe, sweep or direction, onto the Hub.

A folder is checked first (it must hold a saved object: :func:`read_metadata`); an object is
saved into a temporary folder with :mod:`ppairs_lens.probes.persistence` (``save_kw``: its
``save_*`` keywords: ``hook``, ``hook_names``, ``model``...). The uploaded model card is the
folder's, its metrics and license kept, with the loading snippet naming the repo id; the
folder itself is left as it is. The upload is :func:`ppairs_lens.probes.hub.push_folder`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.hub import commit_operations, push_folder
from ppairs_lens.probes.model_card import CARD, DEFAULT_LICENSE, read_model_card, render_card
from ppairs_lens.probes.persistence import read_metadata, save_direction, save_probe, save_sweep
from ppairs_lens.probes.sweep import SweepProbes

__all__ = ["hub_operations", "push_to_hub"]


def hub_operations(folder: str | Path, repo_id: str, license: str | None = None) -> list:
    """The commit :func:`push_to_hub` sends for saved ``folder`` to ``repo_id``: its files,
    the model card re-rendered so that its snippet loads ``repo_id`` (``license``: instead of
    the card's)."""
    folder = Path(folder)
    meta = read_metadata(folder)
    front = read_model_card(folder) if (folder / CARD).is_file() else {}
    metrics = (front.get("ppairs_lens") or {}).get("metrics") or []
    card = render_card(meta, metrics=metrics, source=repo_id,
                       license=license or front.get("license") or DEFAULT_LICENSE)
    return commit_operations(folder, replace={CARD: card.encode("utf-8")})


def _save(obj: Any, folder: Path, save_kw: dict) -> Path:
    if isinstance(obj, SweepProbes):
        return save_sweep(obj, folder, **save_kw)
    if isinstance(obj, (Tensor, np.ndarray)):
        return save_direction(obj, folder, **save_kw)
    if hasattr(obj, "direction_") or hasattr(obj, "get_params"):
        return save_probe(obj, folder, **save_kw)
    raise ProbeError(f"push_to_hub takes a saved folder, a probe, a sweep or a direction, "
                     f"not a {type(obj).__name__}")


def push_to_hub(folder_or_object: Any, repo_id: str, *, license: str | None = None,
                commit_message: str | None = None,
                private: bool | None = None, revision: str | None = None,
                token: str | None = None, api=None, **save_kw: Any):
    """Upload a saved folder (or ``folder_or_object`` saved now, with ``save_kw``) to the Hub
    model repository ``repo_id``; returns the ``CommitInfo``. ``license``: the card's license
    field (default: the folder card's, else "other"). Load it back with
    ``pl.load_probe(repo_id, ...)`` (or ``load_sweep`` / ``load_direction``)."""
    if isinstance(folder_or_object, (str, Path)):
        if save_kw:
            raise ProbeError(f"{folder_or_object} is already saved; save keywords "
                             f"{sorted(save_kw)} apply only to an object")
        folder = Path(folder_or_object)
        ops = hub_operations(folder, repo_id, license)
        return push_folder(folder, repo_id, operations=ops, commit_message=commit_message,
                           private=private, revision=revision, token=token, api=api)
    with tempfile.TemporaryDirectory(prefix="ppairs-push-") as tmp:
        folder = _save(folder_or_object, Path(tmp) / repo_id.split("/")[-1], save_kw)
        ops = hub_operations(folder, repo_id, license)
        # The operations read files by path: send them before the folder goes.
        return push_folder(folder, repo_id, operations=ops, commit_message=commit_message,
                           private=private, revision=revision, token=token, api=api)
