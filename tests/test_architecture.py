"""The layout's rules, checked on the source (docs/architecture.md states them):

- imports run one way: ``analyses`` -> ``ppairs_lens``, never back;
- an experiment module in ``analyses`` imports only the library and its own plotting module;
  only the entry points (the CLI and the main job) import experiments;
- no ``_private`` name is imported from another module (shared helpers are public);
- no module is over ~400 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = sorted((ROOT / "ppairs_lens").rglob("*.py"))
ANALYSES = sorted((ROOT / "analyses").glob("*.py"))
#: Modules that compose experiments: they may import them.
ENTRY_POINTS = {"cli", "run_all", "__init__", "__main__"}
MAX_LINES = 400


def _module(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def _imports(path: Path, root: Path = ROOT) -> list[tuple[str, list[str], int]]:
    """``(module, names, line)`` for every import in ``path`` (relative ones resolved)."""
    tree = ast.parse(path.read_text("utf-8"))
    package = _module(path, root).rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([mod] if mod else []))
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def _is(mod: str, top: str) -> bool:
    return mod == top or mod.startswith(top + ".")


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: _module(p))
def test_the_library_never_imports_the_analyses(path):
    bad = [(m, line) for m, _, line in _imports(path) if _is(m, "analyses")]
    assert not bad, f"{_module(path)} imports analyses at {bad}: move that code into the library"


@pytest.mark.parametrize("path", ANALYSES, ids=lambda p: _module(p))
def test_experiments_import_only_the_library_and_their_own_plots(path):
    stem = path.stem
    if stem in ENTRY_POINTS:
        return
    for mod, names, line in _imports(path):
        if not _is(mod, "analyses"):
            continue
        targets = [mod.split(".", 1)[1]] if "." in mod else names
        for t in targets:
            assert t == f"{stem}_plots", (
                f"analyses.{stem} imports analyses.{t} (line {line}): shared code belongs in "
                "ppairs_lens; an experiment imports only the library and its own plots module")


def _private_imports(path: Path) -> list[str]:
    found = []
    for mod, names, line in _imports(path):
        if not (_is(mod, "ppairs_lens") or _is(mod, "analyses") or _is(mod, "benchmarks")
                or _is(mod, "tests")):
            continue
        found += [f"{n} from {mod} (line {line})" for n in names
                  if n.startswith("_") and not n.startswith("__")]
    return found


@pytest.mark.parametrize(
    "path",
    LIBRARY + ANALYSES + sorted((ROOT / "tests").glob("*.py"))
    + sorted((ROOT / "benchmarks").glob("*.py")),
    ids=lambda p: _module(p))
def test_no_private_name_is_imported_from_another_module(path):
    assert not _private_imports(path), (
        f"{_module(path)} imports private names: {_private_imports(path)}; make a shared "
        "helper public where it belongs")


@pytest.mark.parametrize("path", LIBRARY + ANALYSES, ids=lambda p: _module(p))
def test_modules_stay_small(path):
    n = len(path.read_text("utf-8").splitlines())
    assert n <= MAX_LINES, f"{_module(path)} has {n} lines: split it by job (<= {MAX_LINES})"


def test_the_check_sees_a_violation(tmp_path):
    """The import reader must find what the rules forbid (a check that cannot fail is none)."""
    bad = tmp_path / "ppairs_lens" / "io" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("from analyses.ablation import x\nfrom ..probes.sweep import _chunk\n")
    mods = [(m, n) for m, n, _ in _imports(bad, tmp_path)]
    assert ("analyses.ablation", ["x"]) in mods
    assert ("ppairs_lens.probes.sweep", ["_chunk"]) in mods
