"""The layout's rules, checked on the source (docs/architecture.md states them):

- imports run one way: ``analyses`` -> ``ppairs_lens``, never back;
- an experiment module in ``analyses`` imports only the library and its own plotting module;
  only the entry points (the CLI and the main job) import experiments;
- no ``_private`` name is imported from another module (shared helpers are public);
- a module is sized by its job; one over 800 lines is flagged (it likely holds two jobs).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = sorted((ROOT / "ppairs_lens").rglob("*.py"))
ANALYSES = sorted((ROOT / "analyses").glob("*.py"))
#: The replication: its own package, which may import the experiments, never imported by them.
REPLICATION = sorted((ROOT / "analyses" / "replication").glob("*.py"))
#: Modules that compose experiments: they may import them.
ENTRY_POINTS = {"cli", "cli_args", "__init__", "__main__"}
MAX_LINES = 800


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


@pytest.mark.parametrize("path", ANALYSES + LIBRARY, ids=lambda p: _module(p))
def test_only_the_entry_points_import_the_replication(path):
    """The replication imports the plugin and the experiments; neither imports it (the CLI's
    entry points excepted: ``ppairs-lens run`` and ``data fetch`` are its commands)."""
    if path.parent.name == "analyses" and path.stem in ENTRY_POINTS:
        return
    bad = [(m, line) for m, _, line in _imports(path) if _is(m, "analyses.replication")]
    assert not bad, f"{_module(path)} imports the replication at {bad}"


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
    LIBRARY + ANALYSES + REPLICATION + sorted((ROOT / "tests").glob("*.py"))
    + sorted((ROOT / "benchmarks").glob("*.py")),
    ids=lambda p: _module(p))
def test_no_private_name_is_imported_from_another_module(path):
    assert not _private_imports(path), (
        f"{_module(path)} imports private names: {_private_imports(path)}; make a shared "
        "helper public where it belongs")


@pytest.mark.parametrize("path", LIBRARY + ANALYSES + REPLICATION, ids=lambda p: _module(p))
def test_modules_stay_small(path):
    n = len(path.read_text("utf-8").splitlines())
    assert n <= MAX_LINES, f"{_module(path)} has {n} lines: does it hold two jobs? (flagged over {MAX_LINES})"


def test_the_check_sees_a_violation(tmp_path):
    """The import reader must find what the rules forbid (a check that cannot fail is none)."""
    bad = tmp_path / "ppairs_lens" / "io" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("from analyses.ablation import x\nfrom ..probes.sweep import _chunk\n")
    mods = [(m, n) for m, n, _ in _imports(bad, tmp_path)]
    assert ("analyses.ablation", ["x"]) in mods
    assert ("ppairs_lens.probes.sweep", ["_chunk"]) in mods


# -- the library's layers ---------------------------------------------------------------------

#: Which subpackages of the library each one may import (besides itself, ``errors.py`` and
#: the package root's ``__version__``): the pipeline's order, data and models at the bottom.
#: A subpackage missing here fails the check until it is placed.
LAYERS: dict[str, set[str]] = {
    "io": set(),
    "data": set(),
    "models": set(),
    "activations": {"data", "models", "io"},
    "probes": {"data", "io"},
    "evaluation": {"data", "activations", "probes", "io"},
    "judges": {"data", "models", "activations", "probes", "evaluation", "io"},
    "ranking": {"data", "evaluation", "judges", "io"},
    "interventions": {"data", "models", "activations", "probes", "evaluation", "judges", "io"},
    "finetuning": {"data", "models", "activations", "probes", "evaluation", "judges", "io"},
}
#: Known breaches being fixed in parallel work, each with its reason; an entry that is no
#: longer needed fails the check (delete it).
PENDING: dict[tuple[str, str], str] = {}
PENDING_CYCLES: dict[frozenset, str] = {}


def _subpackage(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else None


def _library_modules() -> dict[str, Path]:
    out = {}
    for p in LIBRARY:
        name = _module(p)
        out[name.removesuffix(".__init__")] = p
    return out


def _library_edges(path: Path, known: dict[str, Path], root: Path = ROOT) -> set[str]:
    """Library modules ``path`` imports anywhere in it (function-level imports included)."""
    deps = set()
    for mod, names, _ in _imports(path, root):
        if not _is(mod, "ppairs_lens"):
            continue
        deps |= {f"{mod}.{n}" for n in names if f"{mod}.{n}" in known}
        if mod in known:
            deps.add(mod)
    return deps


def _layer_breaches(paths: list[Path], root: Path = ROOT) -> list[tuple[str, str, str]]:
    known = _library_modules()
    bad = []
    for path in paths:
        src = _module(path, root)
        pkg = _subpackage(src)
        if pkg is None or (len(src.split(".")) == 2 and src.endswith("__init__")):
            continue
        if pkg not in LAYERS:
            bad.append((src, "?", f"subpackage {pkg!r} has no place in LAYERS"))
            continue
        for dep in _library_edges(path, known, root) | {m for m, _, _ in _imports(path, root)
                                                        if _is(m, "ppairs_lens")}:
            target = _subpackage(dep)
            if target is None or target == pkg or target in LAYERS[pkg]:
                continue
            bad.append((src, target, dep))
    return bad


def test_subpackages_import_only_the_layers_below_them():
    found = {(src, target) for src, target, _ in _layer_breaches(LIBRARY)}
    new = sorted(f"{s} imports {t}" for s, t in found - set(PENDING))
    assert not new, ("layer breaches (see LAYERS in this file; judges must not import "
                     f"ranking, probes not evaluation...): {new}")
    stale = sorted(f"{s} -> {t}" for s, t in set(PENDING) - found)
    assert not stale, f"PENDING entries no longer needed, delete them: {stale}"


def _cycles() -> set[frozenset]:
    known = _library_modules()
    graph = {m: _library_edges(p, known) - {m, "ppairs_lens"} for m, p in known.items()}
    found, state, stack = set(), {}, []

    def visit(u: str) -> None:
        state[u] = 1
        stack.append(u)
        for v in graph.get(u, ()):
            if state.get(v) == 1:
                found.add(frozenset(stack[stack.index(v):]))
            elif not state.get(v):
                visit(v)
        stack.pop()
        state[u] = 2

    for m in graph:
        if not state.get(m):
            visit(m)
    return found


def test_no_import_cycle_between_library_modules():
    found = _cycles()
    new = [sorted(c) for c in found - set(PENDING_CYCLES)]
    assert not new, f"import cycles (function-level imports count): {new}"
    stale = [sorted(c) for c in set(PENDING_CYCLES) - found]
    assert not stale, f"PENDING_CYCLES entries no longer needed, delete them: {stale}"


def test_the_layer_check_sees_a_breach(tmp_path):
    """A judge that imports ranking, and a data module that imports models, are caught."""
    judge = tmp_path / "ppairs_lens" / "judges" / "fake.py"
    data = tmp_path / "ppairs_lens" / "data" / "fake.py"
    for path, line in ((judge, "from ppairs_lens.ranking.merge_sort import merge_sort"),
                       (data, "    from ..models.loading import load_model")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f():\n    pass\n{line}\n" if not line.startswith(" ")
                        else f"def f():\n{line}\n")
    found = {(s, t) for s, t, _ in _layer_breaches([judge, data], tmp_path)}
    assert found == {("ppairs_lens.judges.fake", "ranking"), ("ppairs_lens.data.fake", "models")}
