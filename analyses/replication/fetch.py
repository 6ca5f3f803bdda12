"""Downloading the replication's data files from their public sources, verified.

:func:`fetch_datasets` lays the files of :data:`~analyses.replication.provenance.PROVENANCE`
out as in ``../shared/datasets`` (into the package cache by default). Each file is streamed
into ``<file>.part``, its SHA-256 checked, and only then renamed onto its place: a reader
finds a verified file or none, never half of one or a wrong one. A cut connection resumes
from the bytes already in ``.part`` (an HTTP ``Range`` request), in the same call or the
next one.
"""

from __future__ import annotations

import http.client
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from filelock import FileLock, Timeout

from ppairs_lens.cache import cache_root
from analyses.replication.provenance import (MIRROR_ENV, NOT_FETCHED, PROVENANCE, SourceFile,
                                         data_base, source_url)
from ppairs_lens.errors import FetchError
from ppairs_lens.io.checksums import file_sha256

__all__ = ["FetchReport", "MAX_REQUESTS", "default_data_dir", "fetch_datasets", "fetch_file",
           "fetch_lock_path", "fetched_data_folder"]

#: Requests per file at most: a cut connection is resumed this many times less one.
MAX_REQUESTS = 4
#: Seconds a connection may stay silent (connecting or reading) before it counts as cut.
TIMEOUT_S = 30.0
_CHUNK = 1 << 16


def default_data_dir() -> Path:
    """Where fetched files go unless told: ``<cache>/datasets`` (``$PPAIRS_LENS_CACHE``)."""
    return cache_root() / "datasets"


@dataclass(frozen=True)
class FetchReport:
    """What a fetch did: ``present`` the files already there and verified, ``skipped`` those
    left out with the reason for each."""

    root: Path
    fetched: tuple[str, ...]
    present: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]


def fetch_datasets(to: str | Path | None = None, *, files: Iterable[SourceFile] | None = None,
                   base: str | None = None, not_fetched: Mapping[str, str] | None = None,
                   log: Callable[[str], None] = print, max_requests: int = MAX_REQUESTS,
                   timeout: float = TIMEOUT_S) -> FetchReport:
    """Every file of ``files`` (default: the provenance table) into ``to`` (default:
    :func:`default_data_dir`), each verified; ``base``: the raw-file server (default
    :func:`~analyses.replication.provenance.data_base`). Raises :class:`FetchError` (one
    line) at the first file that cannot be had."""
    root = Path(to).expanduser() if to is not None else default_data_dir()
    if root.exists() and not root.is_dir():
        raise FetchError(f"{root} is an existing file, not a folder; name a folder")
    files = PROVENANCE if files is None else tuple(files)
    not_fetched = NOT_FETCHED if not_fetched is None else not_fetched
    base = data_base() if base is None else base
    scheme = urlsplit(base)
    if scheme.scheme not in ("http", "https", "file") or not (scheme.netloc or scheme.path):
        raise FetchError(f"data mirror {base!r} (${MIRROR_ENV} or the base given) is not an "
                         "http(s) or file URL")
    root.parent.mkdir(parents=True, exist_ok=True)   # the lock sits beside the folder, so
    lock = FileLock(str(fetch_lock_path(root)))      # the folder holds the data files alone
    try:            # two fetches into one folder would write each other's .part files
        lock.acquire(timeout=0)
    except Timeout:
        raise FetchError(f"another fetch is writing into {root} (its lock {lock.lock_file} is "
                         "held): wait for it, then run this again") from None
    try:
        return _fetch_all(root, files, not_fetched, base, log, max_requests, timeout)
    finally:
        lock.release()


def fetch_lock_path(root: Path) -> Path:
    """The lock a fetch into ``root`` holds: beside the folder, not in it."""
    return root.parent / f".{root.name}.fetch.lock"


def _fetch_all(root: Path, files, not_fetched, base: str, log, max_requests: int,
               timeout: float) -> FetchReport:
    fetched, present = [], []
    for src in files:
        target = root / src.file
        if target.is_file():
            if file_sha256(target) == src.sha256:
                present.append(src.file)
                continue
            # an unverified file must not stay where the replication would read it
            log(f"{src.file}: the file there does not match its SHA-256; fetching it again")
            target.unlink()
        size = fetch_file(src, target, source_url(src, base), max_requests=max_requests,
                          timeout=timeout, log=log)
        log(f"fetched {src.file} ({size} bytes, SHA-256 verified)")
        fetched.append(src.file)
    for name, reason in not_fetched.items():
        log(f"skipped {name}: {reason}")
    log(f"{len(fetched) + len(present)} data files verified in {root} ({len(fetched)} fetched "
        f"now, {len(not_fetched)} left out)")
    return FetchReport(root, tuple(fetched), tuple(present), tuple(not_fetched.items()))


def fetch_file(src: SourceFile, target: Path, url: str, *, max_requests: int = MAX_REQUESTS,
               timeout: float = TIMEOUT_S, log: Callable[[str], None] = print) -> int:
    """``url`` into ``target`` through ``<target>.part`` (resumed where it holds bytes),
    renamed onto ``target`` once its SHA-256 is ``src.sha256``; returns the size."""
    part = target.with_name(target.name + ".part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        complete, problem = False, ""
        for _ in range(max_requests):
            complete, problem = _one_request(src, part, url, timeout, log)
            if complete:
                break
        if not complete:
            kept = part.stat().st_size if part.is_file() else 0
            raise FetchError(
                f"{src.file}: the download from {url} was cut {max_requests} times ({problem}); "
                f"{kept} bytes kept in {part}, run again to resume")
        digest = file_sha256(part)
        if digest != src.sha256:
            part.unlink()
            raise FetchError(f"{src.file}: SHA-256 mismatch for {url}: expected {src.sha256}, "
                             f"got {digest} (download deleted)")
        os.replace(part, target)
        return target.stat().st_size
    except OSError as e:  # the disk side: network errors are handled in _one_request
        raise FetchError(f"{src.file}: cannot write {e.filename or part}: "
                         f"{e.strerror or e}") from None


def _one_request(src: SourceFile, part: Path, url: str, timeout: float,
                 log: Callable[[str], None]) -> tuple[bool, str]:
    """One request for what ``part`` lacks. ``(True, "")`` when ``part`` holds the whole
    body, ``(False, why)`` when the connection was cut (worth another request); a refusal
    (404, no network) raises."""
    have = part.stat().st_size if part.is_file() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    if have:
        log(f"{src.file}: resuming at byte {have}")
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                      timeout=timeout)
    except urllib.error.HTTPError as e:
        e.close()
        if e.code == 416 and have:  # nothing left to send: .part holds the whole file or more
            if file_sha256(part) == src.sha256:
                return True, ""
            part.unlink()
            return False, "the partial download did not verify; started over"
        raise FetchError(f"{src.file}: {url} answered HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        reason = getattr(e, "reason", None) or e
        raise FetchError(f"{src.file}: cannot reach {url} ({reason}); no network? Set "
                         f"{MIRROR_ENV} to a mirror, or use a local data folder") from None
    with resp:
        if resp.status == 206 and _range_start(resp.headers.get("Content-Range")) != have:
            part.unlink(missing_ok=True)
            return False, "the server resumed at another byte; started over"
        mode = "ab" if resp.status == 206 else "wb"  # 200: the whole file, from the start
        expected = resp.headers.get("Content-Length")
        with open(part, mode) as f:
            got, cut = _stream(resp, f)
            f.flush()
            os.fsync(f.fileno())
    if cut is not None:
        return False, f"{type(cut).__name__}: {cut}"
    if expected is not None and expected.isdigit() and got < int(expected):
        return False, f"connection closed after {got} of {expected} bytes"
    return True, ""


def _stream(resp, f) -> tuple[int, BaseException | None]:
    """Copy the body into ``f``: the bytes copied, and the network error that cut it."""
    got = 0
    while True:
        try:
            chunk = resp.read(_CHUNK)
        except (http.client.HTTPException, OSError) as e:  # reset, timeout, incomplete read
            return got, e
        if not chunk:
            return got, None
        f.write(chunk)
        got += len(chunk)


def _range_start(content_range: str | None) -> int | None:
    m = re.match(r"bytes (\d+)-", content_range or "")
    return int(m.group(1)) if m else None


def fetched_data_folder(log: Callable[[str], None] = print) -> Path | None:
    """The data folder of a machine without ``../shared/datasets``: the cache's, fetched now
    where files are missing; None (said in one line) when the fetch fails."""
    try:
        return fetch_datasets(log=log).root
    except FetchError as e:
        log(f"data fetch failed: {' '.join(str(e).split())}")
        return None
