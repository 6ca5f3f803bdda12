"""Saved probes, sweeps and directions on the Hugging Face Hub: model card, download, upload.

The Hub shows ``README.md`` as the model card and reads its YAML front matter as metadata.
:func:`render_card` puts there the base model, license, tags and a ``ppairs_lens`` block
(what the object was fitted on, held-out metrics with their intervals where the caller has
them, the package version), then the same in prose with a loading snippet. The metadata is
any dataclass with :class:`~ppairs_lens.probes.persistence.ProbeMetadata`'s fields (this
module does not import the one that saves, which calls it).

:func:`resolve_saved` uses a folder that exists as it is, else fetches an
``owner/name[@revision]`` repo id into the Hub's cache; with ``HF_HUB_OFFLINE=1`` (read when
called) only the local cache is used. :func:`commit_operations` builds an upload's commit
without any network, so it can be checked; :func:`push_folder` sends it.
``huggingface_hub`` is imported only when used.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ppairs_lens.errors import ProbeError
from ppairs_lens.io.atomic import atomic_write_text

__all__ = ["CARD", "DEFAULT_LICENSE", "card_metadata", "render_card", "write_model_card",
           "read_model_card", "REPO_ID", "is_repo_id", "offline", "resolve_saved",
           "commit_operations", "push_folder"]

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
    """The card's YAML front matter for ``meta``; ``metrics``: held-out scores (mappings such
    as ``{"kind", "hook", "metric", "value", "ci_low", "ci_high", ...}``), kept as given."""
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
    """Refuse a read-back field of the wrong shape here, by field (a card edited by hand), not
    deep inside ``generate`` or ``push_to_hub``."""
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


#: ``owner/name`` with an optional ``@revision`` (the Hub's repo-id characters).
REPO_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[\w./-]+))?$")
_TRUE = {"1", "on", "yes", "true"}


def is_repo_id(text: str | Path) -> bool:
    """Whether ``text`` reads as a Hub repo id (``owner/name[@revision]``)."""
    return isinstance(text, str) and REPO_ID.match(text) is not None


def offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` asks for no network (read now, not at import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def resolve_saved(source: str | Path) -> Path:
    """The local folder of ``source``: a folder here, else a Hub repo id's snapshot; anything
    else is returned as it is (the loader then says that it is not a saved object)."""
    local = Path(source)
    # "owner/name" where a folder "owner" exists here is a mistyped local path, not a repo id.
    if local.exists() or local.parent.is_dir() or not is_repo_id(str(source)):
        return local
    m = REPO_ID.match(str(source))
    assert m is not None
    repo, revision = m["repo"], m["revision"]
    try:
        from huggingface_hub import snapshot_download
    except ImportError as e:
        raise ProbeError(f"{source} is not a folder here, and loading a Hub repo id needs "
                         f"huggingface_hub (pip install huggingface_hub): {e}") from e
    cache = os.environ.get("HF_HUB_CACHE") or None
    try:
        folder = snapshot_download(repo, revision=revision, cache_dir=cache,
                                   local_files_only=offline())
    except Exception as e:  # noqa: BLE001 - network, auth and cache misses: one line each
        where = ("the local Hub cache (HF_HUB_OFFLINE is set)" if offline()
                 else "the Hugging Face Hub")
        raise ProbeError(f"{source} is not a folder here, and {where} does not give it: "
                         f"{type(e).__name__}: {' '.join(str(e).split())[:300]}") from e
    return Path(folder)


def commit_operations(folder: str | Path, replace: Mapping[str, bytes] | None = None) -> list:
    """The ``CommitOperationAdd`` list an upload of ``folder`` sends: every file under it
    (hidden files and folders, such as locks or partial writes, left out), in sorted order;
    ``replace``: the bytes to send instead of a file's (the model card made for the repo)."""
    from huggingface_hub import CommitOperationAdd

    folder = Path(folder)
    if not folder.is_dir():
        raise ProbeError(f"{folder} is not a folder; save the object first")
    replace = dict(replace or {})
    files = sorted(p for p in folder.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    ops = []
    for p in files:
        rel = p.relative_to(folder).as_posix()
        ops.append(CommitOperationAdd(path_in_repo=rel,
                                      path_or_fileobj=replace.pop(rel, None) or str(p)))
    ops += [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=data)
            for rel, data in sorted(replace.items())]
    return ops


def push_folder(folder: str | Path, repo_id: str, *, operations: list | None = None,
                commit_message: str | None = None, private: bool | None = None,
                revision: str | None = None, token: str | None = None, api=None):
    """Upload ``folder`` to model repo ``repo_id`` (created if absent) in one commit
    (``operations``, default :func:`commit_operations`); returns the ``CommitInfo``."""
    if not is_repo_id(repo_id) or "@" in repo_id:
        raise ProbeError(f"{repo_id!r} is not a Hub repo id (owner/name)")
    if offline():
        raise ProbeError(f"cannot push to {repo_id}: HF_HUB_OFFLINE is set")
    from huggingface_hub import HfApi

    ops = operations if operations is not None else commit_operations(folder)
    api = api or HfApi(token=token)
    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        return api.create_commit(repo_id, ops, repo_type="model", revision=revision,
                                 commit_message=commit_message or f"Upload {Path(folder).name} "
                                                                  f"with ppairs-lens")
    except Exception as e:     # the Hub's own errors and the network's, each as one line
        raise ProbeError(f"cannot push to {repo_id}: {_hub_reason(e)}") from e


def _hub_reason(e: Exception) -> str:
    """One line for a failed Hub call: unauthorised, not found, or unreachable."""
    status = getattr(getattr(e, "response", None), "status_code", None)
    if status in (401, 403):
        return f"the Hub refused the token (HTTP {status}): log in or pass token="
    if status == 404:
        return "no such repository or revision on the Hub (HTTP 404)"
    if (isinstance(e, (ConnectionError, TimeoutError, OSError))
            or "connect" in type(e).__name__.lower()):
        return f"the Hub cannot be reached ({type(e).__name__}); HF_HUB_OFFLINE=1 works offline"
    first = " ".join(str(e).split())[:200]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__
