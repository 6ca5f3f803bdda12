"""``ppairs-lens data fetch``: the replication's files downloaded from a real HTTP server on
127.0.0.1 (raw-file layout, Range requests), verified, resumed, refused in one line."""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
from pathlib import Path
from urllib.parse import unquote

import pytest

import analyses.replication.run
import analyses.replication.fetch as fetch_module
import ppairs_lens.models.loading
from analyses.cli import main
from analyses.replication.fetch import fetch_datasets, fetched_data_folder
from analyses.replication.provenance import (MIRROR_ENV, NOT_FETCHED, PROVENANCE, RAW_BASE,
                                         SourceFile, source_url)
from ppairs_lens.errors import FetchError

#: A small table of made-up files: nested folders, a path with spaces (like Story Cloze's),
#: and one file several read chunks long, so that a cut lands mid-file.
SYNTHETIC_BYTES = {
    "a/first.jsonl": b'{"x": 1}\n' * 40,
    "b/deep/big file.csv": bytes(range(256)) * 1200,  # 307,200 bytes
    "c/last.tsv": b"s\tq\ta\tyes\tcat\n" * 30,
}
SYNTHETIC = tuple(SourceFile(f, "owner/repo", "0" * 40, f"data/{f.replace('/', ' - ', 1)}",
                             hashlib.sha256(b).hexdigest()) for f, b in SYNTHETIC_BYTES.items())
BIG = SYNTHETIC[1]
CUT_AT = 100_000


class _Handler(http.server.BaseHTTPRequestHandler):
    """GET ``/<owner>/<repo>/<commit>/<path>`` from the server's folder; ``Range: bytes=N-``
    answered with 206 (416 past the end); a path in ``cuts`` gets its headers and only
    ``CUT_AT`` bytes of its body before the connection closes (HTTP/1.0: one request each)."""

    timeout = 5  # a stuck client cannot hold a handler thread

    def do_GET(self):  # noqa: N802 - http.server's name
        srv = self.server
        rel = unquote(self.path.lstrip("/"))
        rng = self.headers.get("Range")
        srv.requests.append((rel, rng))
        path = srv.root / rel
        if not path.is_file():
            self.send_error(404, "Not Found")
            return
        data = path.read_bytes()
        if not srv.honour_range:
            rng = None
        start = int(rng.removeprefix("bytes=").rstrip("-")) if rng else 0
        if start >= len(data) and rng:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = data[start:]
        self.send_response(206 if rng else 200)
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if srv.cuts.get(rel, 0) > 0:
            srv.cuts[rel] -= 1
            body = body[:CUT_AT]  # the connection closes short of Content-Length
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class RawServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root, self.requests, self.cuts, self.honour_range = root, [], {}, True

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def raw_layout(root: Path, table, read) -> Path:
    """``root`` holding each file of ``table`` at ``<repo>/<commit>/<path>`` (``read(src)``:
    its bytes)."""
    for src in table:
        path = root / src.repo / src.commit / src.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(read(src))
    return root


def served(src: SourceFile, server: RawServer) -> Path:
    return server.root / src.repo / src.commit / src.path


def _serve(root: Path):
    server = RawServer(root)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def server(tmp_path):
    """The synthetic table served from a raw-file layout."""
    yield from _serve(raw_layout(tmp_path / "raw", SYNTHETIC,
                                 lambda s: SYNTHETIC_BYTES[s.file]))


@pytest.fixture
def shared_server(tmp_path, shared_datasets):
    """A copy of ``../shared/datasets``' provenance files, served in the raw-file layout."""
    yield from _serve(raw_layout(tmp_path / "raw", PROVENANCE,
                                 lambda s: (shared_datasets / s.file).read_bytes()))


def fetch(server, to, **kw):
    return fetch_datasets(to, files=SYNTHETIC, base=server.base, not_fetched={},
                          log=lambda m: None, timeout=5, **kw)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


# -- the table and its URLs --------------------------------------------------------------------

@pytest.mark.shared_data
def test_the_table_accounts_for_every_shared_file_and_its_hash(shared_datasets):
    held = {str(p.relative_to(shared_datasets)) for p in shared_datasets.rglob("*")
            if p.is_file()}
    listed = {s.file for s in PROVENANCE}
    assert held == listed | set(NOT_FETCHED) and not listed & set(NOT_FETCHED)
    for src in PROVENANCE:
        got = hashlib.sha256((shared_datasets / src.file).read_bytes()).hexdigest()
        assert got == src.sha256, src.file


def test_urls_encode_the_path_and_take_the_mirror(monkeypatch):
    cloze = next(s for s in PROVENANCE if s.file.startswith("story_cloze/"))
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    assert source_url(cloze) == (f"{RAW_BASE}/p-null/openai-gpt-pytorch/{cloze.commit}/data/"
                                 "cloze_test_val__spring2016%20-%20cloze_test_ALL_val.csv")
    monkeypatch.setenv(MIRROR_ENV, "http://mirror.example/raw/")
    assert source_url(cloze).startswith("http://mirror.example/raw/p-null/")


# -- against the shared files ------------------------------------------------------------------

@pytest.mark.shared_data
def test_a_clean_fetch_reproduces_the_shared_files_byte_for_byte(
        shared_server, shared_datasets, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(MIRROR_ENV, shared_server.base)
    to = tmp_path / "fetched"
    assert main(["data", "fetch", "--to", str(to)]) == 0
    out = capsys.readouterr().out
    for src in PROVENANCE:
        assert (to / src.file).read_bytes() == (shared_datasets / src.file).read_bytes()
    assert not list(to.rglob("*.part"))
    for name in NOT_FETCHED:  # left out, each said with its reason
        assert not (to / name).exists() and f"skipped {name}: " in out
    n = len(shared_server.requests)
    assert n == len(PROVENANCE)
    assert main(["data", "fetch", "--to", str(to)]) == 0  # verified files are kept as they are
    assert len(shared_server.requests) == n


@pytest.mark.shared_data
def test_a_tampered_shared_file_is_refused_by_name(shared_server, tmp_path, monkeypatch,
                                                   capsys):
    monkeypatch.setenv(MIRROR_ENV, shared_server.base)
    cloze = next(s for s in PROVENANCE if s.file.startswith("story_cloze/"))
    path = served(cloze, shared_server)
    data = bytearray(path.read_bytes())
    data[1000] ^= 1
    path.write_bytes(bytes(data))
    to = tmp_path / "fetched"
    assert main(["data", "fetch", "--to", str(to)]) == 2
    err = one_line_error(capsys)
    bad = hashlib.sha256(bytes(data)).hexdigest()
    assert cloze.file in err and source_url(cloze, shared_server.base) in err
    assert cloze.sha256 in err and bad in err
    assert not (to / cloze.file).exists() and not list(to.rglob("*.part"))


# -- against the synthetic table ---------------------------------------------------------------

def test_a_tampered_file_is_refused_and_nothing_is_left_where_it_belongs(server, tmp_path):
    path = served(BIG, server)
    path.write_bytes(path.read_bytes()[:-1] + b"!")
    to = tmp_path / "to"
    with pytest.raises(FetchError, match="SHA-256 mismatch") as e:
        fetch(server, to)
    assert BIG.sha256 in str(e.value) and hashlib.sha256(path.read_bytes()).hexdigest() in \
        str(e.value)
    assert (to / SYNTHETIC[0].file).is_file()  # fetched before it, verified
    assert not (to / BIG.file).exists() and not list(to.rglob("*.part"))


def test_a_cut_connection_resumes_from_the_bytes_already_there(server, tmp_path):
    rel = f"{BIG.repo}/{BIG.commit}/{BIG.path}"
    server.cuts[rel] = 1
    report = fetch(server, tmp_path / "to")
    assert [r for p, r in server.requests if p == rel] == [None, f"bytes={CUT_AT}-"]
    assert (tmp_path / "to" / BIG.file).read_bytes() == SYNTHETIC_BYTES[BIG.file]
    assert set(report.fetched) == {s.file for s in SYNTHETIC}


def test_an_interrupted_fetch_keeps_its_part_and_the_next_one_resumes(server, tmp_path):
    rel = f"{BIG.repo}/{BIG.commit}/{BIG.path}"
    server.cuts[rel] = 10
    to = tmp_path / "to"
    with pytest.raises(FetchError, match="cut 2 times") as e:
        fetch(server, to, max_requests=2)
    assert BIG.file in str(e.value) and "\n" not in str(e.value)
    part = to / (BIG.file + ".part")
    assert part.stat().st_size == 2 * CUT_AT and not (to / BIG.file).exists()
    server.cuts[rel] = 0
    report = fetch(server, to)
    assert [r for p, r in server.requests if p == rel][-1] == f"bytes={2 * CUT_AT}-"
    assert (to / BIG.file).read_bytes() == SYNTHETIC_BYTES[BIG.file] and not part.exists()
    assert report.present == (SYNTHETIC[0].file,)


def test_a_server_that_ignores_range_sends_the_whole_file_again(server, tmp_path):
    rel = f"{BIG.repo}/{BIG.commit}/{BIG.path}"
    server.cuts[rel], server.honour_range = 1, False
    fetch(server, tmp_path / "to")  # the 200 after the cut overwrites the part, not appends
    assert [r for p, r in server.requests if p == rel] == [None, f"bytes={CUT_AT}-"]
    assert (tmp_path / "to" / BIG.file).read_bytes() == SYNTHETIC_BYTES[BIG.file]


def test_a_whole_part_is_verified_and_put_in_place(server, tmp_path):
    """A run killed between the last byte and the rename: the server has nothing left to
    send (416), the part verifies and takes its place."""
    to = tmp_path / "to"
    (to / "b" / "deep").mkdir(parents=True)
    (to / (BIG.file + ".part")).write_bytes(SYNTHETIC_BYTES[BIG.file])
    fetch(server, to)
    assert (to / BIG.file).read_bytes() == SYNTHETIC_BYTES[BIG.file]
    assert (f"{BIG.repo}/{BIG.commit}/{BIG.path}", f"bytes={len(SYNTHETIC_BYTES[BIG.file])}-") \
        in server.requests


def test_a_wrong_file_in_place_is_fetched_again(server, tmp_path):
    to = tmp_path / "to"
    fetch(server, to)
    (to / SYNTHETIC[2].file).write_bytes(b"edited")
    report = fetch(server, to)
    assert report.fetched == (SYNTHETIC[2].file,)
    assert (to / SYNTHETIC[2].file).read_bytes() == SYNTHETIC_BYTES[SYNTHETIC[2].file]


def test_a_404_names_the_url_in_one_line(server, tmp_path, monkeypatch, capsys):
    served(SYNTHETIC[2], server).unlink()
    monkeypatch.setattr(fetch_module, "PROVENANCE", SYNTHETIC)
    monkeypatch.setenv(MIRROR_ENV, server.base)
    assert main(["data", "fetch", "--to", str(tmp_path / "to")]) == 2
    err = one_line_error(capsys)
    assert "HTTP 404" in err and source_url(SYNTHETIC[2], server.base) in err
    assert err.startswith("ppairs-lens data: error: c/last.tsv")


def test_no_network_names_the_url_in_one_line(tmp_path, monkeypatch, capsys):
    base = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setattr(fetch_module, "PROVENANCE", SYNTHETIC)
    monkeypatch.setenv(MIRROR_ENV, base)
    assert main(["data", "fetch", "--to", str(tmp_path / "to")]) == 2
    err = one_line_error(capsys)
    assert "cannot reach" in err and source_url(SYNTHETIC[0], base) in err
    assert not [p for p in (tmp_path / "to").rglob("*") if p.is_file()]


def test_a_file_given_as_the_folder_is_refused(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert main(["data", "fetch", "--to", str(tmp_path / "f")]) == 2
    assert "is an existing file, not a folder" in one_line_error(capsys)


# -- ppairs-lens run without a data folder ------------------------------------------------------

@pytest.fixture
def clone(tmp_path, monkeypatch):
    """A fresh clone's view: no ../shared/datasets, an empty cache, a recording model load,
    and the main job recorded instead of run (on the data, or on the built-ins)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PPAIRS_LENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch_module, "PROVENANCE", SYNTHETIC)
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: "model")
    ran = {}
    monkeypatch.setattr(analyses.replication.run, "run_replication", lambda cfg, **kw: ran.update(
        {"replication" if cfg.datasets is None else "builtins": cfg}))
    return ran


def test_run_fetches_the_data_when_no_folder_is_found(clone, server, tmp_path, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, server.base)
    assert main(["run", "--out", str(tmp_path / "out"), "--quick"]) == 0
    data = tmp_path / "cache" / "datasets"
    assert list(clone) == ["replication"] and clone["replication"].shared_data == str(data)
    assert (data / BIG.file).read_bytes() == SYNTHETIC_BYTES[BIG.file]


def test_run_falls_back_to_the_builtins_when_the_fetch_fails(clone, tmp_path, monkeypatch,
                                                             capsys):
    monkeypatch.setenv(MIRROR_ENV, f"http://127.0.0.1:{closed_port()}")
    assert main(["run", "--out", str(tmp_path / "out"), "--quick"]) == 0
    assert list(clone) == ["builtins"]
    failed = [line for line in capsys.readouterr().out.splitlines() if "data fetch failed" in line]
    assert len(failed) == 1 and "cannot reach" in failed[0]


def test_an_explicit_missing_data_folder_fetches_nothing(clone, tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(analyses.replication.run, "fetched_data_folder", lambda: calls.append(1))
    # a folder the user named is theirs: refused (exit 2), never replaced by a download
    assert main(["run", "--out", str(tmp_path / "out"), "--quick",
                 "--shared-data", str(tmp_path / "missing")]) == 2
    assert calls == [] and list(clone) == []
    assert "no such folder" in capsys.readouterr().err


def test_fetched_data_folder_is_none_without_network(tmp_path, monkeypatch):
    monkeypatch.setenv("PPAIRS_LENS_CACHE", str(tmp_path))
    monkeypatch.setenv(MIRROR_ENV, f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setattr(fetch_module, "PROVENANCE", SYNTHETIC)
    said = []
    assert fetched_data_folder(log=said.append) is None
    assert len(said) == 1 and said[0].startswith("data fetch failed: a/first.jsonl")



def test_a_mirror_that_is_not_a_url_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(MIRROR_ENV, "not a url")
    assert main(["data", "fetch", "--to", str(tmp_path / "d")]) == 2
    err = one_line_error(capsys)
    assert "not a url" in err and "URL" in err


def test_a_second_fetch_into_one_folder_is_refused_while_the_first_holds_it(tmp_path,
                                                                            capsys):
    from filelock import FileLock

    from analyses.replication.fetch import fetch_lock_path

    to = tmp_path / "d"
    with FileLock(str(fetch_lock_path(to))):
        assert main(["data", "fetch", "--to", str(to)]) == 2
    err = one_line_error(capsys)
    assert "another fetch" in err and str(to) in err
