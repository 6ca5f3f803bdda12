"""Saved probes, sweeps and directions on the Hugging Face Hub: upload a folder, find one.

:func:`resolve_saved` turns what a ``load_*`` function was given into a local folder: a
folder that exists is used as it is; otherwise an ``owner/name`` (or ``owner/name@revision``)
Hub repo id is fetched with ``huggingface_hub.snapshot_download`` into the Hub's cache. With
``HF_HUB_OFFLINE=1`` (read when called, as is ``HF_HUB_CACHE``) nothing is fetched: the
snapshot comes from the local cache or the load fails with one line saying so.

:func:`commit_operations` is the commit an upload sends (one ``CommitOperationAdd`` per file
of the folder), built without any network so that it can be checked; :func:`push_folder`
creates the repository if needed and sends that commit with ``HfApi.create_commit``.
``huggingface_hub`` (a dependency of ``transformers``) is imported only when used.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from ppairs_lens.errors import ProbeError

__all__ = ["REPO_ID", "is_repo_id", "offline", "resolve_saved", "commit_operations",
           "push_folder"]

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
    """The local folder of ``source``: a folder here, else a Hub repo id's snapshot.

    A path that is neither an existing folder nor a repo id, or whose parent folder exists
    here, is returned as it is (the loader then says that it is not a saved object).
    """
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
    """Upload ``folder`` to the Hub model repository ``repo_id`` (created if absent) in one
    commit (:func:`commit_operations`, or ``operations``); returns ``create_commit``'s
    ``CommitInfo``."""
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
