"""docs/architecture.md's module map lists every module, each under its own subpackage.

A module added without a line in the map is invisible to the next reader; a line for a module
that was removed points at nothing. Plotting helpers ``<name>_plots.py`` of an analysis are
covered by the ``(+ `_plots`)`` note on their analysis's row.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
SECTION = re.compile(r"^\|\s*\*\*(?P<name>[\w/]+)\*\*\s*\|")
MODULE = re.compile(r"`([\w/]+\.py)`")


def documented() -> dict[str, set[str]]:
    """Section ('' for top-level ppairs_lens, 'data', ..., 'analyses') -> module file names in
    the first column of the module table, plus ``<name>_plots.py`` where a row says so."""
    out: dict[str, set[str]] = {"": set()}
    section = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section = "" if line.strip() == "## Modules" else None
            continue
        if section is None or not line.startswith("|"):
            continue
        m = SECTION.match(line)
        if m:
            section = m["name"].strip("/")
            out.setdefault(section, set())
            continue
        first = line.split("|")[1]
        for name in MODULE.findall(first):
            out[section].add(name)
            if "(+ `_plots`)" in first:
                out[section].add(name.replace(".py", "_plots.py"))
    return out


def on_disk() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for root, prefix in ((REPO / "ppairs_lens", ""), (REPO / "analyses", "analyses")):
        for path in root.rglob("*.py"):
            if path.name == "__init__.py" or "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root).parent
            # analyses/replication/ is its own section, as ppairs_lens/data/ is
            section = (f"{prefix}/{rel.parts[0]}" if prefix and rel.parts else
                       prefix or (rel.parts[0] if rel.parts else ""))
            if prefix == "" and rel.parts[:1] == ("analyses",):
                continue
            out.setdefault(section, set()).add(path.name)
    return out


def test_every_module_is_in_the_map():
    doc = documented()
    missing = sorted(f"{s or 'ppairs_lens'}/{n}" for s, names in on_disk().items()
                     for n in names - doc.get(s, set()))
    assert not missing, f"docs/architecture.md's module map lacks {missing}"


def test_every_mapped_module_exists():
    disk = on_disk()
    stale = sorted(f"{s or 'ppairs_lens'}/{n}" for s, names in documented().items()
                   for n in names - disk.get(s, set()) if not n.startswith("benchmarks/"))
    assert not stale, f"docs/architecture.md lists modules that do not exist: {stale}"
