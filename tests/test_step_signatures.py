"""Records, not dicts or strings, cross the main job's step boundaries.

Every step of the main job (each ``StudyRunner.step`` call in ``analyses/replication/run.py``) is a
named function whose return annotation declares a frozen dataclass, or a list, tuple or
``dict[str, ...]`` (keyed by dataset) of them; the runner rebuilds that type from its cache
(:func:`ppairs_lens.io.records.record_from_data`), so a reused step hands on the same record
as a fresh one. Read from the source, so a step added as a lambda or returning a dict fails
here. Steps not converted yet are listed in :data:`KNOWN_UNTYPED` with their reason; an
entry that has become typed fails the check until it is deleted.
"""

from __future__ import annotations

import ast
import importlib
import types
import typing
from pathlib import Path

import pytest

from ppairs_lens.io.records import is_record_type

ROOT = Path(__file__).resolve().parent.parent
MAIN_JOB = "analyses.replication.run"

#: Steps whose result is still JSON data, each with its reason (none now: the table steps
#: hand on ``StepRows`` of typed rows, each declared in its step's module; the layer sweep and transfer
#: their ``SweepResult`` and ``TransferHeadline``, in analyses/layer_sweep.py and
#: analyses/cross_dataset.py).
KNOWN_UNTYPED: dict[str, str] = {}


def _steps(tree: ast.AST) -> list[tuple[str, ast.expr, int]]:
    """``(step name, function argument, line)`` of every ``<runner>.step(name, fn, ...)``."""
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "step" and len(node.args) >= 2
                and isinstance(node.args[0], ast.Constant)):
            out.append((node.args[0].value, node.args[1], node.lineno))
    return out


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def _is_record_result(hint) -> bool:
    """A frozen dataclass, or a list / tuple / ``dict[str, ...]`` / optional of one."""
    if is_record_type(hint):
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return all(_is_record_result(a) for a in args if a is not type(None))
    if origin in (list, tuple):
        return bool(args) and _is_record_result(args[0])
    if origin is dict:
        return len(args) == 2 and args[0] is str and _is_record_result(args[1])
    return False


def _declared(fn: ast.FunctionDef, namespace: dict):
    assert fn.returns is not None, f"step function {fn.name} declares no return type"
    return eval(ast.unparse(fn.returns), namespace)  # noqa: S307 - our own source


def _untyped_steps(source: str, namespace: dict) -> dict[str, str]:
    """Per step name: why its result is not a declared record (absent: it is one)."""
    tree = ast.parse(source)
    defs = _functions(tree)
    bad = {}
    for name, fn, line in _steps(tree):
        if not isinstance(fn, ast.Name) or fn.id not in defs:
            bad[name] = f"line {line}: the step is not a named function of the module"
        elif defs[fn.id].returns is None:
            bad[name] = f"line {line}: {fn.id} declares no return type"
        else:
            hint = _declared(defs[fn.id], namespace)
            if not _is_record_result(hint):
                bad[name] = f"line {line}: {fn.id} returns {hint}, not a frozen record"
    return bad


def _main_job():
    mod = importlib.import_module(MAIN_JOB)
    path = Path(mod.__file__)
    return path.read_text("utf-8"), vars(mod)


def test_every_main_job_step_hands_on_a_declared_record():
    source, namespace = _main_job()
    names = {name for name, _, _ in _steps(ast.parse(source))}
    bad = _untyped_steps(source, namespace)
    new = {n: why for n, why in bad.items() if n not in KNOWN_UNTYPED}
    assert not new, ("steps returning dicts, strings or undeclared results (declare "
                     f"`def step() -> Record` with a frozen dataclass): {new}")
    stale = sorted((set(KNOWN_UNTYPED) - set(bad)))
    assert not stale, f"KNOWN_UNTYPED entries now typed or gone, delete them: {stale}"
    assert names - set(KNOWN_UNTYPED), "no typed step found: the reader missed the steps"


@pytest.mark.parametrize("body, why", [
    ("def f() -> dict[str, float]:\n    return {}\nrun.step('s', f)\n", "not a frozen record"),
    ("run.step('s', lambda: {})\n", "not a named function"),
    ("def f():\n    return R(1)\nrun.step('s', f)\n", "declares no return type"),
    ("def f() -> str:\n    return ''\nrun.step('s', f)\n", "not a frozen record"),
    ("def f() -> list[M]:\n    return []\nrun.step('s', f)\n", "not a frozen record"),
])
def test_the_check_sees_an_untyped_step(body, why):
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class R:
        x: int

    @dataclass
    class M:  # mutable: not a record between steps
        x: int

    bad = _untyped_steps(body, {"R": R, "M": M})
    assert why in bad["s"]
    ok = "def f() -> dict[str, R]:\n    return {}\nrun.step('s', f)\n"
    assert _untyped_steps(ok, {"R": R}) == {}


def _untyped_table_steps(steps) -> dict[str, str]:
    """Per table step (analyses/replication/steps.py): why its ``run`` hands on no declared
    record (absent: it does)."""
    from ppairs_lens.io.study_runner import declared_result

    bad = {}
    for s in steps:
        hint = declared_result(s.run)
        if hint is None:
            bad[s.name] = "its run declares no return type"
        elif not _is_record_result(hint):
            bad[s.name] = f"its run returns {hint}, not a frozen record"
    return bad


def test_every_table_step_hands_on_a_declared_record_and_the_check_sees_one_that_does_not():
    from analyses.replication.steps import TABLE_STEPS, TableStep

    assert len(TABLE_STEPS) >= 9 and _untyped_table_steps(TABLE_STEPS) == {}
    assert len({s.name for s in TABLE_STEPS}) == len(TABLE_STEPS)
    sections = [s.section for s in TABLE_STEPS if s.section]
    assert len(set(sections)) == len(sections)  # one summary section per step

    def as_dict(ctx) -> dict[str, float]:
        return {}
    bad = _untyped_table_steps((TableStep("a", "a", lambda ctx: {}),
                                TableStep("b", "b", as_dict)))
    assert "declares no return type" in bad["a"] and "not a frozen record" in bad["b"]
