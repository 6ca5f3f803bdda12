"""A saved probe's, sweep's or direction's model card: ``README.md`` with YAML metadata.

The Hugging Face Hub shows a repository's ``README.md`` as its model card and reads the YAML
front matter between the two ``---`` lines as its metadata. The card written here holds, in
that front matter: the base model, the license, tags, and a ``ppairs_lens`` block with what the
object was fitted on (hook points and read-out indices, the dataset with its fingerprint, the
template's hash, the split, the training size), the held-out metrics with their confidence
intervals where the caller has them (:func:`ppairs_lens.evaluation.saved_probes.save_store_probes`
does), and the package version. The text below it says the same for a reader and gives a Python
snippet that loads the object (from the folder, or from the Hub once pushed).

The metadata comes from the saved folder's :class:`~ppairs_lens.probes.persistence.ProbeMetadata`
(any dataclass with its fields; this module does not import the one that saves, which calls it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ppairs_lens.errors import ProbeError
from ppairs_lens.io.atomic import atomic_write_text

__all__ = ["CARD", "DEFAULT_LICENSE", "card_metadata", "render_card", "write_model_card",
           "read_model_card"]

CARD = "README.md"
#: A saved probe derives from a base model and a dataset, each under its own terms, so no
#: license is assumed: "other" until the owner names one (``license=...``).
DEFAULT_LICENSE = "other"
#: How each kind of object loads (``pl.<loader>``) and what the loader is asked to match.
_LOADERS = {"probe": ("load_probe", "probe"), "sweep": ("load_sweep", "sweep"),
            "direction": ("load_direction", "direction, meta")}
#: Fields of the metadata copied into the card's ``ppairs_lens`` block, in this order.
_FIELDS = ("object", "kinds", "hook_names", "layers", "d_model", "template_hash", "split",
           "n_train", "C", "standardize", "package_version", "format_version")


def _plain(value: Any) -> Any:
    """``value`` as YAML's safe types (tuples -> lists, numpy scalars -> Python)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return value.item()
    return value


def card_metadata(meta: Any, *, metrics: Sequence[Mapping[str, Any]] | None = None,
                  license: str = DEFAULT_LICENSE) -> dict[str, Any]:
    """The card's YAML front matter for ``meta`` (a ``ProbeMetadata``).

    ``metrics``: held-out scores, each a mapping such as ``{"kind", "hook", "metric", "value",
    "ci_low", "ci_high", ...}``; kept as given (plain types).
    """
    m = dataclasses.asdict(meta)
    block = {k: _plain(m.get(k)) for k in _FIELDS}
    block["datasets"] = ([{"name": m.get("dataset"), "fingerprint": m.get("dataset_fingerprint")}]
                         if m.get("dataset") or m.get("dataset_fingerprint") else [])
    block["metrics"] = [_plain(dict(x)) for x in metrics or ()]
    return {"library_name": "ppairs-lens", "license": license, "base_model": m.get("model"),
            "tags": ["ppairs-lens", "linear-probe", "contrast-pairs", str(m.get("object"))],
            "ppairs_lens": block}


def _snippet(meta: Any, source: str) -> str:
    loader, target = _LOADERS.get(meta.object, ("load_probe", "probe"))
    args = [repr(source)]
    if meta.model:
        args.append(f"model={meta.model!r}")
    if meta.object == "sweep" and meta.hook_names:
        args.append(f"hook_names={list(meta.hook_names)!r}")
    elif meta.hook_names:
        args.append(f"hook={meta.hook_names[0]!r}")
    call = f"pl.{loader}({', '.join(args)})"
    if len(call) > 88:
        call = f"pl.{loader}(\n    " + ",\n    ".join(args) + ",\n)"
    return f"import ppairs_lens as pl\n\n{target} = {call}\n"


def _fmt(x: Any) -> str:
    return "" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))


def _metrics_table(metrics: Sequence[Mapping[str, Any]]) -> str:
    if not metrics:
        return ("No held-out metrics were recorded with this object (a saved store's probes "
                "carry them: `ppairs_lens.save_store_probes`).\n")
    cols = ["kind", "hook", "metric", "value", "ci_low", "ci_high", "n_groups", "ci_counts"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(m.get(c)) for c in cols) + " |" for m in metrics]
    note = {m.get("note") for m in metrics if m.get("note")}
    return "\n".join(lines) + "\n" + "".join(f"\n{n}\n" for n in sorted(note))


def render_card(meta: Any, *, metrics: Sequence[Mapping[str, Any]] | None = None,
                license: str = DEFAULT_LICENSE, source: str = ".") -> str:
    """The card's text: YAML front matter (:func:`card_metadata`), then a description, the
    metrics and a snippet loading the object from ``source`` (a folder or a Hub repo id)."""
    front = card_metadata(meta, metrics=metrics, license=license)
    block = front["ppairs_lens"]
    kinds = ", ".join(block["kinds"]) or "-"
    hooks = block["hook_names"]
    hook_text = (", ".join(f"`{h}`" for h in hooks[:4]) + (f" ... ({len(hooks)} in all)"
                                                          if len(hooks) > 4 else "")) or "-"
    data = "; ".join(f"`{d['name']}` (fingerprint `{d['fingerprint']}`)"
                     for d in block["datasets"]) or "-"
    body = (f"# ppairs-lens {meta.object}: {kinds}\n\n"
            f"A {meta.object} saved by ppairs-lens "
            f"(PPairS contrast-pair probes on TransformerLens), version "
            f"{block['package_version'] or '?'}.\n\n"
            f"| field | value |\n|---|---|\n"
            f"| base model | `{meta.model}` |\n| hook points | {hook_text} |\n"
            f"| d_model | {block['d_model']} |\n| datasets | {data} |\n"
            f"| template hash | `{block['template_hash']}` |\n"
            f"| split | {block['split']} |\n| training pairs | {block['n_train']} |\n\n"
            f"## Held-out metrics\n\n{_metrics_table(block['metrics'])}\n"
            f"## Loading it\n\n```python\n{_snippet(meta, source)}```\n\n"
            f"Loading refuses another base model or hook point, naming the fields that differ. "
            f"A Hub repo id loads through `huggingface_hub.snapshot_download` (with "
            f"`HF_HUB_OFFLINE=1`, from the local cache only).\n")
    header = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{header}---\n\n{body}"


def write_model_card(path: str | Path, meta: Any, *,
                     metrics: Sequence[Mapping[str, Any]] | None = None,
                     license: str = DEFAULT_LICENSE, source: str | None = None) -> Path:
    """Write ``path/README.md`` for the object saved in folder ``path``; returns ``path``."""
    path = Path(path)
    atomic_write_text(path / CARD, render_card(meta, metrics=metrics, license=license,
                                               source=source or str(path)))
    return path


def read_model_card(path: str | Path) -> dict[str, Any]:
    """The YAML front matter of ``path/README.md`` (or of the file ``path``)."""
    path = Path(path)
    card = path / CARD if path.is_dir() else path
    try:
        text = card.read_text(encoding="utf-8")
    except OSError as e:
        raise ProbeError(f"{card}: no model card ({e.strerror or e})") from e
    parts = text.split("---\n", 2)
    if not text.startswith("---\n") or len(parts) < 3:
        raise ProbeError(f"{card}: no YAML front matter between '---' lines")
    try:
        front = yaml.safe_load(parts[1])
    except yaml.YAMLError as e:
        raise ProbeError(f"{card}: the YAML front matter does not parse: "
                         f"{' '.join(str(e).split())}") from e
    if not isinstance(front, dict):
        raise ProbeError(f"{card}: the front matter is not a mapping")
    _check_card(front, card)
    return front


def _check_card(front: dict, card: Path) -> None:
    """The fields this package reads back, each of its shape (a card edited by hand is refused
    here, by field, not deep inside ``generate`` or ``push_to_hub``)."""
    def bad(field: str, want: str, got: Any) -> ProbeError:
        return ProbeError(f"{card}: field {field!r} must be {want}, got "
                          f"{type(got).__name__} {got!r}")
    if front.get("license") is not None and not isinstance(front["license"], str):
        raise bad("license", "a string", front["license"])
    block = front.get("ppairs_lens")
    if block is None:
        return
    if not isinstance(block, dict):
        raise bad("ppairs_lens", "a mapping", block)
    metrics = block.get("metrics")
    if metrics is None:
        return
    if not isinstance(metrics, list):
        raise bad("ppairs_lens.metrics", "a list", metrics)
    for i, m in enumerate(metrics):
        if not isinstance(m, dict):
            raise bad(f"ppairs_lens.metrics[{i}]", "a mapping", m)
        for key in ("kind", "hook", "dataset"):
            if m.get(key) is not None and not isinstance(m[key], str):
                raise bad(f"ppairs_lens.metrics[{i}].{key}", "a string", m[key])
